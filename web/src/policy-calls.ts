// The policy's contract-call rules (docs/api.md §18 `calls`): a card per rule in order (chain, contract, function,
// action; each argument condition and each value condition a row of fields — argument, operator, value(s) — that
// can be added and removed; typed-data rules with their `typed_data` as JSON), which can be added, moved and
// removed; the default; the unlimited-approvals switch; and the whole `calls` object as JSON. Both views edit one
// object: a change in the fields rewrites the JSON, valid JSON redraws the fields.
import { clear, field, h, uid } from './dom';
import { fieldProblem, type FieldProblem } from './ui';
import { argNames, functionName, paramTypes, type Abis } from './calls';

type Json = Record<string, unknown>;

export interface CallsEditor {
  el: HTMLElement;
  /** The `calls` object to save (null when it says nothing); throws when a JSON text does not parse. */
  value(): Json | null;
  /** Puts a server field error (`calls.rules[0].function`, …) next to its control; false when it has none. */
  showProblem(name: string, message: string): boolean;
  clearProblems(): void;
}

const ACTIONS = ['allow', 'deny', 'approve'];

interface RowView {
  el: HTMLElement;
  problems: Map<string, FieldProblem>;
  broken: boolean;
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** JSON text of an optional value: empty when absent. */
function jsonText(v: unknown): string {
  return v === undefined ? '' : JSON.stringify(v);
}

const OPERATORS: [string, string][] = [
  ['eq', '= (eq)'],
  ['ne', '≠ (ne)'],
  ['in', 'in'],
  ['not_in', 'not in'],
  ['lt', '< (lt)'],
  ['lte', '≤ (lte)'],
  ['gt', '> (gt)'],
  ['gte', '≥ (gte)'],
];
const LISTS = new Set(['in', 'not_in']);

/** An operand as a field shows it: lists comma-separated. */
function operandText(v: unknown): string {
  if (Array.isArray(v)) return v.map(operandText).join(', ');
  return typeof v === 'string' ? v : JSON.stringify(v);
}

/** A field's text as an operand: true and false as booleans, anything else as the string the service reads. */
function operandOf(text: string): unknown {
  return text === 'true' ? true : text === 'false' ? false : text;
}

interface ConditionList {
  el: HTMLElement;
  /** The conditions keyed by argument (`{"0": {"in": […]}}`), or what is missing. */
  read(): { conditions: Record<string, Json> } | { problem: string };
}

/**
 * The conditions of one rule on its arguments (`args`: argument, operator, value per row) or on the call's value
 * (`value`: operator and value per row, under the key "value"); several rows on one argument must all hold.
 */
function conditionList(n: number, kind: 'args' | 'value', initial: unknown, params: string | null = null): ConditionList {
  const list = h('div', { class: 'condition-rows', 'data-testid': kind === 'args' ? 'arg-conditions' : 'value-conditions' });
  const rows: { key: HTMLInputElement | null; op: HTMLSelectElement; value: HTMLInputElement; el: HTMLElement }[] = [];
  const what = kind === 'args' ? 'condition' : 'value condition';
  const changed = () => list.dispatchEvent(new Event('conditions-changed', { bubbles: true }));

  function relabel(): void {
    rows.forEach((r, i) => {
      const k = `Rule ${n} ${what} ${i + 1}`;
      r.key?.setAttribute('aria-label', `${k} argument`);
      r.op.setAttribute('aria-label', `${k} operator`);
      r.value.setAttribute('aria-label', `${k} value`);
      r.el.querySelector('button')?.setAttribute('aria-label', `Remove rule ${n} ${what} ${i + 1}`);
    });
  }

  function placeholderFor(op: string): string {
    return LISTS.has(op) ? '0x…, 0x… (comma-separated)' : kind === 'value' ? 'e.g. 0.01' : '0x…, $agent or a number';
  }

  function addRow(key: string, op: string, operand: string): void {
    const keyInput =
      kind === 'args'
        ? h('input', { type: 'text', class: 'mono cond-key', value: key, placeholder: '0 or name', autocomplete: 'off', spellcheck: 'false', list: params })
        : null;
    const opSelect = h('select', { class: 'cond-op' }, OPERATORS.map(([v, label]) => h('option', { value: v }, label)));
    opSelect.value = OPERATORS.some(([v]) => v === op) ? op : 'eq';
    const valueInput = h('input', { type: 'text', class: 'mono cond-value', value: operand, placeholder: placeholderFor(opSelect.value), autocomplete: 'off', spellcheck: 'false' });
    opSelect.addEventListener('change', () => {
      valueInput.placeholder = placeholderFor(opSelect.value);
    });
    const row = { key: keyInput, op: opSelect, value: valueInput, el: h('div', { class: 'condition' }) };
    const remove = h(
      'button',
      {
        type: 'button',
        class: 'icon',
        onclick: () => {
          rows.splice(rows.indexOf(row), 1);
          row.el.remove();
          relabel();
          changed();
        },
      },
      '×',
    );
    row.el.append(...(keyInput ? [keyInput] : []), opSelect, valueInput, remove);
    rows.push(row);
    list.insertBefore(row.el, add);
    relabel();
  }

  const add = h(
    'button',
    {
      type: 'button',
      class: 'secondary small',
      onclick: () => {
        addRow(kind === 'value' ? 'value' : '', 'eq', '');
        changed();
        (rows[rows.length - 1].key ?? rows[rows.length - 1].value).focus();
      },
    },
    kind === 'args' ? 'Add argument condition' : 'Add value condition',
  );
  list.append(add);
  if (isObject(initial)) {
    for (const [key, condition] of Object.entries(initial)) {
      if (!isObject(condition)) continue;
      for (const [op, operand] of Object.entries(condition)) addRow(key, op, operandText(operand));
    }
  }

  return {
    el: list,
    read() {
      const out: Record<string, Json> = {};
      for (const [i, r] of rows.entries()) {
        const key = kind === 'value' ? 'value' : (r.key?.value.trim() ?? '');
        const text = r.value.value.trim();
        if (!key && !text) continue;
        if (!key) return { problem: `${what} ${i + 1}: name the argument (its position 0, 1, … or its name).` };
        if (!text) return { problem: `${what} ${i + 1}: give a value.` };
        const operand = LISTS.has(r.op.value)
          ? text.split(',').map((t) => t.trim()).filter((t) => t !== '').map(operandOf)
          : operandOf(text);
        out[key] = { ...(out[key] ?? {}), [r.op.value]: operand };
      }
      return { conditions: out };
    },
  };
}

export function callsEditor(initial: unknown, defaultChain: string): CallsEditor {
  let model: Json = isObject(initial) ? structuredClone(initial) : {};
  if (!Array.isArray(model.rules)) model.rules = model.rules === undefined ? [] : model.rules;
  let rows: RowView[] = [];
  let jsonBroken = false;

  const rules = (): Json[] => (Array.isArray(model.rules) ? (model.rules as Json[]) : []);

  const list = h('ol', { class: 'call-rules', 'aria-label': 'Contract-call rules', 'data-testid': 'call-rules' });
  const empty = h('p', { class: 'muted small' }, 'No rules: every call gets the default.');

  const defaultSelect = h(
    'select',
    { id: uid('calls-default') },
    h('option', { value: '' }, 'not set (deny when guarded, allow otherwise)'),
    ACTIONS.map((a) => h('option', { value: a }, a)),
  );
  const defaultP = fieldProblem(defaultSelect);
  const unlimited = h('input', { type: 'checkbox', id: uid('unlimited') });
  const unlimitedP = fieldProblem(unlimited);
  const json = h('textarea', {
    rows: 8,
    class: 'mono',
    spellcheck: 'false',
    'aria-label': 'Contract-call rules as JSON',
    'data-testid': 'calls-json',
  });
  const jsonP = fieldProblem(json);

  function writeJson(): void {
    if (rows.some((r) => r.broken)) return;
    json.value = JSON.stringify(model, null, 2);
    jsonBroken = false;
    jsonP.clear();
  }

  function syncControls(): void {
    defaultSelect.value = typeof model.default === 'string' && ACTIONS.includes(model.default) ? model.default : '';
    unlimited.checked = model.allow_unlimited_approvals === true;
  }

  function move(i: number, to: number): void {
    const list = rules();
    if (to < 0 || to >= list.length) return;
    const [rule] = list.splice(i, 1);
    list.splice(to, 0, rule);
    renderRows();
    writeJson();
  }

  function textInput(value: string, label: string, placeholder: string): HTMLInputElement {
    return h('input', { type: 'text', class: 'mono', value, placeholder, autocomplete: 'off', spellcheck: 'false', 'aria-label': label });
  }

  function renderRow(rule: Json, i: number): RowView {
    const n = i + 1;
    const problems = new Map<string, FieldProblem>();
    const view: RowView = { el: h('li', { class: 'call-rule', 'data-testid': 'call-rule', 'data-index': String(i) }), problems, broken: false };
    const labelled = (name: string, label: string, control: HTMLElement, extra = '') => {
      const p = fieldProblem(control);
      problems.set(name, p);
      const id = control.id || uid('rule');
      control.id = id;
      return h('div', { class: `field ${extra}`.trim() }, h('label', { for: id }, label), control, p.el);
    };
    const action = h(
      'select',
      { 'aria-label': `Rule ${n} action` },
      ACTIONS.map((a) => h('option', { value: a }, a)),
      typeof rule.action === 'string' && !ACTIONS.includes(rule.action) ? h('option', { value: rule.action }, rule.action) : null,
    );
    action.value = typeof rule.action === 'string' ? rule.action : 'deny';
    const typed = 'typed_data' in rule;
    const body: HTMLElement[] = [];
    // Reads the row's controls back into its rule; a condition that is not complete marks the row and leaves it.
    let read: () => void;
    if (typed) {
      const data = h('textarea', { rows: 3, class: 'mono', spellcheck: 'false', 'aria-label': `Rule ${n} typed data` }, jsonText(rule.typed_data));
      body.push(labelled('typed_data', 'Typed data (JSON: domain, primary_type, message)', data, 'wide'));
      read = () => {
        const p = problems.get('typed_data');
        try {
          rule.typed_data = JSON.parse(data.value);
          p?.clear();
        } catch {
          view.broken = true;
          p?.show('not valid JSON');
        }
      };
      view.el.dataset.kind = 'typed_data';
    } else {
      const chain = textInput(typeof rule.chain === 'string' ? rule.chain : '', `Rule ${n} chain`, 'base or *');
      const to = textInput(typeof rule.to === 'string' ? rule.to : '', `Rule ${n} contract`, '0x… or *');
      const fn = textInput(typeof rule.function === 'string' ? rule.function : '', `Rule ${n} function`, 'approve(address,uint256) or *');
      // The function's parameters, offered in each argument field: positions with their names and types.
      const params = h('datalist', { id: uid('params') });
      const fillParams = () => {
        clear(params);
        const text = fn.value.trim();
        const inputs = paramTypes(text).map((p) => p.split(/\s+/));
        const canonical = `${functionName(text)}(${inputs.map((p) => p[0]).join(',')})`;
        const known = argNames(typeof rule.chain === 'string' ? rule.chain : '', { to: to.value.trim(), selector: null, function: canonical, args: null }, (model.abis ?? null) as Abis | null);
        inputs.forEach((p, i) => {
          const name = p.length > 1 ? p[p.length - 1] : known[i];
          params.append(h('option', { value: String(i), label: `${name ? `${name} ` : ''}(${p[0]})` }));
          if (name) params.append(h('option', { value: name, label: `argument ${i} (${p[0]})` }));
        });
      };
      fillParams();
      fn.addEventListener('input', fillParams);
      const args = conditionList(n, 'args', rule.args, params.id);
      const value = conditionList(n, 'value', rule.value === undefined ? undefined : { value: rule.value });
      const argsP = fieldProblem(args.el);
      const valueP = fieldProblem(value.el);
      problems.set('args', argsP);
      problems.set('value', valueP);
      body.push(
        h(
          'div',
          { class: 'rule-fields' },
          labelled('chain', 'Chain', chain, 'narrow'),
          labelled('to', 'Contract', to),
          labelled('function', 'Function', fn, 'wide'),
        ),
        h('div', { class: 'conditions' }, h('h4', {}, 'Argument conditions'), params, args.el, argsP.el),
        h('div', { class: 'conditions' }, h('h4', {}, 'Value condition (whole native units)'), value.el, valueP.el),
      );
      read = () => {
        rule.chain = chain.value.trim();
        rule.to = to.value.trim();
        rule.function = fn.value.trim();
        for (const [name, conds, p] of [['args', args, argsP], ['value', value, valueP]] as const) {
          const got = conds.read();
          if ('problem' in got) {
            view.broken = true;
            p.clear();
            p.show(got.problem);
            continue;
          }
          p.clear();
          const conditions = name === 'value' ? got.conditions.value : got.conditions;
          if (conditions && Object.keys(conditions).length) rule[name] = conditions;
          else delete rule[name];
        }
      };
      view.el.dataset.kind = 'call';
    }
    const up = h('button', { type: 'button', class: 'icon', 'aria-label': `Move rule ${n} up`, disabled: i === 0, onclick: () => move(i, i - 1) }, '↑');
    const down = h('button', { type: 'button', class: 'icon', 'aria-label': `Move rule ${n} down`, disabled: i === rules().length - 1, onclick: () => move(i, i + 1) }, '↓');
    const remove = h(
      'button',
      {
        type: 'button',
        class: 'icon',
        'aria-label': `Remove rule ${n}`,
        onclick: () => {
          rules().splice(i, 1);
          renderRows();
          writeJson();
        },
      },
      '×',
    );
    const rowP = fieldProblem(view.el);
    problems.set('', rowP);
    const actionP = fieldProblem(action);
    problems.set('action', actionP);
    view.el.append(
      h(
        'div',
        { class: 'rule-head' },
        h('strong', { class: 'rule-number' }, `Rule ${n}`),
        typed ? h('span', { class: 'muted small' }, 'typed data') : null,
        h('label', { class: 'rule-action' }, h('span', { class: 'muted small' }, 'Action'), action),
        h('span', { class: 'rule-buttons' }, up, down, remove),
      ),
      actionP.el,
      rowP.el,
      ...body,
    );
    const changed = () => {
      view.broken = false;
      read();
      rule.action = action.value;
      writeJson();
    };
    view.el.addEventListener('input', changed);
    view.el.addEventListener('change', changed);
    view.el.addEventListener('conditions-changed', changed);
    return view;
  }

  function renderRows(): void {
    clear(list);
    rows = rules().map((rule, i) => {
      const view = renderRow(isObject(rule) ? rule : {}, i);
      list.append(view.el);
      return view;
    });
    empty.hidden = rows.length > 0;
  }

  defaultSelect.addEventListener('change', () => {
    if (defaultSelect.value) model.default = defaultSelect.value;
    else delete model.default;
    writeJson();
  });
  unlimited.addEventListener('change', () => {
    if (unlimited.checked) model.allow_unlimited_approvals = true;
    else delete model.allow_unlimited_approvals;
    writeJson();
  });
  json.addEventListener('input', () => {
    let parsed: unknown;
    try {
      parsed = json.value.trim() ? JSON.parse(json.value) : {};
    } catch (e) {
      jsonBroken = true;
      jsonP.clear();
      jsonP.show(`Not valid JSON (${(e as Error).message}); the rules above show the last valid ones.`);
      return;
    }
    if (!isObject(parsed)) {
      jsonBroken = true;
      jsonP.clear();
      jsonP.show('Must be a JSON object: {"default": …, "rules": […]}.');
      return;
    }
    jsonBroken = false;
    jsonP.clear();
    model = parsed;
    renderRows();
    syncControls();
  });

  const addCall = h(
    'button',
    {
      type: 'button',
      class: 'secondary small',
      onclick: () => {
        if (!Array.isArray(model.rules)) model.rules = [];
        rules().push({ chain: defaultChain, to: '', function: '', action: 'allow' });
        renderRows();
        writeJson();
        rows[rows.length - 1]?.el.querySelector<HTMLInputElement>('input[aria-label$="contract"]')?.focus();
      },
    },
    'Add call rule',
  );
  const addTyped = h(
    'button',
    {
      type: 'button',
      class: 'secondary small',
      onclick: () => {
        if (!Array.isArray(model.rules)) model.rules = [];
        rules().push({ typed_data: { primary_type: 'Permit' }, action: 'approve' });
        renderRows();
        writeJson();
      },
    },
    'Add typed-data rule',
  );

  renderRows();
  syncControls();
  writeJson();

  const el = h(
    'div',
    { class: 'calls-editor', 'data-testid': 'calls-editor' },
    h('h3', {}, 'Contract calls'),
    h(
      'p',
      { class: 'muted small' },
      'Every contract call is simulated first; the first rule whose chain, contract and function match (* matches any) ',
      'and whose conditions all hold decides: allow, deny, or approve (wait for approval). A condition names an argument ',
      'by position (0, 1, …) or by name, an operator and a value; in and not in take values separated by commas; ',
      '$agent is the agent’s address; the value condition is in whole native units. Typed-data rules judge EIP-712 ',
      'signatures. Allowing a call never lifts the limits or the cap.',
    ),
    list,
    empty,
    h('div', { class: 'row' }, addCall, addTyped),
    field('When no rule matches', defaultSelect),
    defaultP.el,
    h(
      'label',
      { class: 'check', for: unlimited.id },
      unlimited,
      h('span', {}, 'Allow unlimited approvals (otherwise a call or signature granting an unlimited allowance is refused)'),
    ),
    unlimitedP.el,
    h(
      'details',
      { class: 'calls-json' },
      h('summary', {}, 'All contract-call settings as JSON (rules, default, ABIs)'),
      h('p', { class: 'muted small' }, 'Edits here redraw the rules above; ABIs (`abis`, keyed "<chain>:<address>") are set here.'),
      json,
      jsonP.el,
    ),
  );

  return {
    el,
    value() {
      if (jsonBroken) throw new Error('The contract-call JSON is not valid: fix it or reload the policy.');
      const broken = rows.findIndex((r) => r.broken);
      if (broken >= 0) throw new Error(`Rule ${broken + 1} of the contract calls has a condition that is not complete or not valid.`);
      const keys = Object.keys(model).filter((k) => !(k === 'rules' && rules().length === 0));
      return keys.length ? model : null;
    },
    showProblem(name, message) {
      if (name !== 'calls' && !name.startsWith('calls.')) return false;
      const rule = /^calls\.rules\[(\d+)\](?:\.(\w+)(?:\.(.+))?)?$/.exec(name);
      if (rule) {
        const row = rows[Number(rule[1])];
        const part = rule[2] ?? '';
        const p = row?.problems.get(part) ?? row?.problems.get('');
        if (p) {
          p.show(rule[3] ? `${rule[3]}: ${message}` : part && !row.problems.has(part) ? `${part}: ${message}` : message);
          return true;
        }
      }
      if (name === 'calls.default') defaultP.show(message);
      else if (name === 'calls.allow_unlimited_approvals') unlimitedP.show(message);
      else {
        jsonP.show(`${name}: ${message}`);
        const details = json.closest('details');
        if (details) details.open = true;
      }
      return true;
    },
    clearProblems() {
      defaultP.clear();
      unlimitedP.clear();
      if (!jsonBroken) jsonP.clear();
      for (const r of rows) for (const p of r.problems.values()) p.clear();
    },
  };
}
