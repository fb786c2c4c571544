// The policy's contract-call rules (docs/api.md §18 `calls`): a table of the rules in order (chain, contract,
// function, argument and value conditions as JSON, action; typed-data rules with their `typed_data` as JSON), which
// rows can be added, moved and removed; the default; the unlimited-approvals switch; and the whole `calls` object as
// JSON. Both views edit one object: a change in the table rewrites the JSON, valid JSON redraws the table.
import { clear, field, h, uid } from './dom';
import { fieldProblem, type FieldProblem } from './ui';

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

export function callsEditor(initial: unknown, defaultChain: string): CallsEditor {
  let model: Json = isObject(initial) ? structuredClone(initial) : {};
  if (!Array.isArray(model.rules)) model.rules = model.rules === undefined ? [] : model.rules;
  let rows: RowView[] = [];
  let jsonBroken = false;

  const rules = (): Json[] => (Array.isArray(model.rules) ? (model.rules as Json[]) : []);

  const tbody = h('tbody', {});
  const table = h(
    'table',
    { class: 'limits call-rules cards', 'aria-label': 'Contract-call rules', 'data-testid': 'call-rules' },
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        ['#', 'Chain', 'Contract', 'Function', 'Argument conditions', 'Value condition', 'Action', ''].map((t) =>
          h('th', { scope: 'col' }, t),
        ),
      ),
    ),
    tbody,
  );
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
    const view: RowView = { el: h('tr', { 'data-testid': 'call-rule', 'data-index': String(i) }), problems, broken: false };
    // Each cell names its column: a narrow screen shows a card per rule.
    const LABELS: Record<string, string> = { typed_data: 'Typed data', chain: 'Chain', to: 'Contract', function: 'Function', args: 'Arguments', value: 'Value', action: 'Action' };
    const cell = (name: string, control: HTMLElement, attrs: Record<string, string | number> = {}) => {
      const p = fieldProblem(control);
      problems.set(name, p);
      return h('td', { 'data-label': LABELS[name] ?? '', ...attrs }, control, p.el);
    };
    const action = h(
      'select',
      { 'aria-label': `Rule ${n} action` },
      ACTIONS.map((a) => h('option', { value: a }, a)),
      typeof rule.action === 'string' && !ACTIONS.includes(rule.action) ? h('option', { value: rule.action }, rule.action) : null,
    );
    action.value = typeof rule.action === 'string' ? rule.action : 'deny';
    const typed = 'typed_data' in rule;
    const cells: HTMLElement[] = [];
    // Reads the row's controls back into its rule; JSON that does not parse marks the row and leaves the rule.
    let read: () => void;
    if (typed) {
      const data = h('textarea', { rows: 2, class: 'mono', spellcheck: 'false', 'aria-label': `Rule ${n} typed data` }, jsonText(rule.typed_data));
      cells.push(cell('typed_data', data, { colspan: 5 }));
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
      const args = h('textarea', { rows: 1, class: 'mono', spellcheck: 'false', placeholder: '{"0": {"eq": "$agent"}}', 'aria-label': `Rule ${n} argument conditions` }, jsonText(rule.args));
      const value = textInput(jsonText(rule.value), `Rule ${n} value condition`, '{"eq": "0"}');
      cells.push(cell('chain', chain), cell('to', to), cell('function', fn), cell('args', args), cell('value', value));
      read = () => {
        rule.chain = chain.value.trim();
        rule.to = to.value.trim();
        rule.function = fn.value.trim();
        for (const [name, input] of [['args', args], ['value', value]] as const) {
          const p = problems.get(name);
          const text = input.value.trim();
          if (!text) {
            delete rule[name];
            p?.clear();
            continue;
          }
          try {
            rule[name] = JSON.parse(text);
            p?.clear();
          } catch {
            view.broken = true;
            p?.show('not valid JSON');
          }
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
    view.el.append(
      h('td', { class: 'muted', 'data-label': 'Rule' }, h('span', {}, String(n)), typed ? h('div', { class: 'small' }, 'typed data') : null, rowP.el),
      ...cells,
      cell('action', action),
      h('td', { class: 'nowrap actions', 'data-label': '' }, up, down, remove),
    );
    view.el.addEventListener('input', () => {
      view.broken = false;
      read();
      rule.action = action.value;
      writeJson();
    });
    view.el.addEventListener('change', () => {
      rule.action = action.value;
      writeJson();
    });
    return view;
  }

  function renderRows(): void {
    clear(tbody);
    rows = rules().map((rule, i) => {
      const view = renderRow(isObject(rule) ? rule : {}, i);
      tbody.append(view.el);
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
      jsonP.show(`Not valid JSON (${(e as Error).message}); the table shows the last valid rules.`);
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
      'and whose conditions hold decides: allow, deny, or approve (wait for approval). Conditions are JSON: argument ',
      'positions ("0") or ABI names mapped to {"eq" | "ne" | "in" | "not_in" | "lt" | "lte" | "gt" | "gte": …}; "$agent" ',
      'is the agent’s address; the value condition is in whole native units. Typed-data rules judge EIP-712 signatures. ',
      'Allowing a call never lifts the limits or the cap.',
    ),
    h('div', { class: 'table-wrap' }, table),
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
      h('p', { class: 'muted small' }, 'Edits here redraw the table; ABIs (`abis`, keyed "<chain>:<address>") are set here.'),
      json,
      jsonP.el,
    ),
  );

  return {
    el,
    value() {
      if (jsonBroken) throw new Error('The contract-call JSON is not valid: fix it or reload the policy.');
      const broken = rows.findIndex((r) => r.broken);
      if (broken >= 0) throw new Error(`Rule ${broken + 1} of the contract calls has conditions that are not valid JSON.`);
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
