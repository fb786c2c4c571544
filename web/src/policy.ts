// The policy tab (docs/api.md §11, §18): per-asset limits, recipients, approvals, x402 hosts and contract-call rules.
// GET shows the policy; Save PUTs it whole (owner authority on a guarded agent); a 422 puts each field's problem next
// to that field. Under the form, what each daily and weekly window has counted and has left, as the service states
// it (`GET …/budget`: the figures its next decision uses).
import { api, ApiError, type AgentDetail, type AssetLimits, type ChainInfo, type Policy, type PolicyBody } from './api';
import { windows, windowSentence, type AgentFacts } from './explain';
import { authorityText, onAuthorityChange } from './authority';
import { callsEditor, type CallsEditor } from './policy-calls';
import { clear, field, h, uid } from './dom';
import { errorLine, fieldProblem as problem, notify, type FieldProblem } from './ui';

export interface PolicyPanel {
  el: HTMLElement;
  load(): void;
  /** Shows a rule a refusal named (`calls.rules[0]`, `calls.default`): scrolled to, marked and focused. */
  reveal(rule: string): void;
}

const LIMIT_FIELDS: { name: keyof AssetLimits; label: string }[] = [
  { name: 'per_transfer', label: 'Per transfer' },
  { name: 'per_day', label: 'Per day' },
  { name: 'per_week', label: 'Per week' },
  { name: 'approval_above', label: 'Approval above' },
];

type Problem = FieldProblem;

interface LimitRow {
  el: HTMLElement;
  asset: HTMLInputElement;
  inputs: Map<keyof AssetLimits, HTMLInputElement>;
  problems: Map<string, Problem>;
}

function lines(text: string): string[] {
  return text
    .split(/[\s,]+/)
    .map((l) => l.trim())
    .filter(Boolean);
}

export function policyPanel(agent: AgentDetail, token: string | null, chains: ChainInfo[]): PolicyPanel {
  const heading = uid('policy');
  const formError = errorLine();
  const authority = h('p', { class: 'muted small' });
  const savedAt = h('span', { class: 'muted small', 'data-testid': 'policy-saved', role: 'status' });
  const body = h('div', {}, h('p', { class: 'muted' }, 'Loading the policy…'));
  const budget = h('div', { class: 'small budget', 'data-testid': 'policy-budget', 'aria-live': 'polite' });
  const save = h('button', { type: 'submit' }, 'Save policy');
  const reload = h('button', { type: 'button', class: 'secondary' }, 'Reload');
  const form = h(
    'form',
    { class: 'card policy', 'aria-labelledby': heading, novalidate: true },
    h('div', { class: 'section-head' }, h('h2', { id: heading }, 'Policy'), reload),
    h(
      'p',
      { class: 'muted' },
      'Rules checked on every transfer, in the same step as the spending cap. Amounts are in whole units of the asset ',
      '(e.g. 0.05 ETH); an empty field is no limit. Days and weeks are rolling windows (the last 24 hours / 7 days).',
    ),
    authority,
    body,
    budget,
    formError.el,
    h('div', { class: 'row' }, save, savedAt),
  );

  let rows: LimitRow[] = [];
  // Where each server field name shows its problem (`limits.base:ETH.per_day`, `approval_ttl_secs`, …).
  let problems = new Map<string, Problem>();
  let collect: () => PolicyBody = () => ({});
  let calls: CallsEditor | null = null;

  function defaultAsset(): string {
    const chain = agent.chains[0] ?? 'ethereum';
    const symbol = chains.find((c) => c.name === chain)?.native_symbol || 'ETH';
    return `${chain}:${symbol}`;
  }

  function render(policy: Policy): void {
    clear(body);
    rows = [];
    problems = new Map();
    const table = h('tbody', {});
    const limitsTable = h(
      'table',
      { class: 'limits cards', 'aria-label': 'Limits per asset' },
      h(
        'thead',
        {},
        h('tr', {}, h('th', { scope: 'col' }, 'Asset'), LIMIT_FIELDS.map((f) => h('th', { scope: 'col' }, f.label)), h('th', {})),
      ),
      table,
    );
    const addRow = (key: string, limits: AssetLimits): void => {
      const asset = h('input', {
        type: 'text',
        class: 'mono',
        value: key,
        placeholder: 'base:ETH',
        autocomplete: 'off',
        spellcheck: 'false',
        'aria-label': 'Asset (<chain>:<SYMBOL>)',
      });
      const rowProblems = new Map<string, Problem>();
      const assetProblem = problem(asset);
      rowProblems.set('', assetProblem);
      const inputs = new Map<keyof AssetLimits, HTMLInputElement>();
      const cells = LIMIT_FIELDS.map((f) => {
        const input = h('input', {
          type: 'text',
          inputmode: 'decimal',
          autocomplete: 'off',
          value: limits[f.name] ?? '',
          placeholder: 'no limit',
        });
        const label = () => input.setAttribute('aria-label', `${asset.value.trim() || 'asset'} ${f.label.toLowerCase()}`);
        label();
        asset.addEventListener('input', label);
        inputs.set(f.name, input);
        const p = problem(input);
        rowProblems.set(f.name, p);
        return h('td', { 'data-label': f.label }, input, p.el);
      });
      const row: LimitRow = { el: h('tr', {}), asset, inputs, problems: rowProblems };
      const remove = h(
        'button',
        {
          type: 'button',
          class: 'icon',
          'aria-label': `Remove the limits of ${key || 'this asset'}`,
          onclick: () => {
            row.el.remove();
            rows = rows.filter((r) => r !== row);
          },
        },
        '×',
      );
      // Each cell names its column: a narrow screen shows a card per asset.
      row.el.append(h('td', { 'data-label': 'Asset' }, asset, assetProblem.el), ...cells, h('td', { 'data-label': '', class: 'actions' }, remove));
      rows.push(row);
      table.append(row.el);
    };
    for (const [key, limits] of Object.entries(policy.limits ?? {})) addRow(key, limits ?? {});
    const add = h(
      'button',
      {
        type: 'button',
        class: 'secondary small',
        onclick: () => {
          const taken = new Set(rows.map((r) => r.asset.value.trim()));
          addRow(taken.has(defaultAsset()) ? '' : defaultAsset(), {});
          rows[rows.length - 1].asset.focus();
        },
      },
      'Add asset',
    );

    const restrict = h('input', { type: 'checkbox', id: uid('restrict'), checked: policy.allowed_recipients != null });
    const allowed = h('textarea', { rows: 3, class: 'mono', spellcheck: 'false', placeholder: '0x… (one a line)' }, (policy.allowed_recipients ?? []).join('\n'));
    allowed.disabled = !restrict.checked;
    restrict.addEventListener('change', () => (allowed.disabled = !restrict.checked));
    const blocked = h('textarea', { rows: 3, class: 'mono', spellcheck: 'false', placeholder: '0x… (one a line)' }, (policy.blocked_recipients ?? []).join('\n'));
    const approveNew = h('input', { type: 'checkbox', id: uid('approve-new'), checked: policy.approve_new_recipients });
    const ttl = h('input', { type: 'number', min: 1, step: 1, value: String(policy.approval_ttl_secs) });
    const restrictHosts = h('input', { type: 'checkbox', id: uid('hosts'), checked: policy.allowed_hosts != null });
    const hosts = h('textarea', { rows: 2, class: 'mono', spellcheck: 'false', placeholder: 'api.example.com (one a line)' }, (policy.allowed_hosts ?? []).join('\n'));
    hosts.disabled = !restrictHosts.checked;
    restrictHosts.addEventListener('change', () => (hosts.disabled = !restrictHosts.checked));

    const named = (name: string, control: HTMLElement): Problem => {
      const p = problem(control);
      problems.set(name, p);
      return p;
    };
    const allowedP = named('allowed_recipients', allowed);
    const blockedP = named('blocked_recipients', blocked);
    const approveP = named('approve_new_recipients', approveNew);
    const ttlP = named('approval_ttl_secs', ttl);
    const hostsP = named('allowed_hosts', hosts);

    body.append(
      h('h3', {}, 'Limits per asset'),
      h(
        'p',
        { class: 'muted small' },
        'Assets are <chain>:<SYMBOL>, such as base:ETH or base:USDC. Once any asset is listed, transfers of an unlisted ',
        'asset are refused; a row with every field empty allows its asset without limits. A transfer above “approval above” waits for approval.',
      ),
      h('div', { class: 'table-wrap' }, limitsTable),
      h('div', { class: 'row' }, add),
      h('h3', {}, 'Recipients'),
      h('label', { class: 'check', for: restrict.id }, restrict, h('span', {}, 'Only allow the recipients listed here')),
      field('Allowed recipients', allowed),
      allowedP.el,
      field('Blocked recipients', blocked, 'Transfers to these addresses are always refused.'),
      blockedP.el,
      h('h3', {}, 'Approvals'),
      h(
        'label',
        { class: 'check', for: approveNew.id },
        approveNew,
        h('span', {}, 'A transfer to a recipient never paid before waits for approval'),
      ),
      approveP.el,
      field('Approval waits at most (seconds)', ttl, 'Past this, a waiting transfer expires and its reservation is released.'),
      ttlP.el,
      h('h3', {}, 'HTTP payments (x402)'),
      h('label', { class: 'check', for: restrictHosts.id }, restrictHosts, h('span', {}, 'Only pay the hosts listed here')),
      field('Allowed hosts', hosts),
      hostsP.el,
    );
    calls = callsEditor(policy.calls, agent.chains[0] ?? 'base');
    body.append(calls.el);
    const callsNow = calls;

    collect = () => {
      const limits: Record<string, AssetLimits> = {};
      for (const row of rows) {
        const key = row.asset.value.trim();
        const values: AssetLimits = {};
        for (const [name, input] of row.inputs) {
          const value = input.value.trim();
          if (value) values[name] = value;
        }
        if (!key && Object.keys(values).length === 0) continue;
        limits[key] = values;
      }
      return {
        limits,
        allowed_recipients: restrict.checked ? lines(allowed.value) : null,
        blocked_recipients: lines(blocked.value),
        approve_new_recipients: approveNew.checked,
        approval_ttl_secs: Number(ttl.value),
        allowed_hosts: restrictHosts.checked ? lines(hosts.value) : null,
        calls: callsNow.value() as PolicyBody['calls'],
      };
    };
  }

  function clearProblems(): void {
    formError.clear();
    for (const p of problems.values()) p.clear();
    for (const row of rows) for (const p of row.problems.values()) p.clear();
    calls?.clearProblems();
  }

  /** Puts each `details.fields` entry next to its control; what matches no control goes to the form's line. */
  function showProblems(fields: Record<string, string>): string[] {
    const unplaced: string[] = [];
    for (const [name, message] of Object.entries(fields)) {
      if (calls?.showProblem(name, message)) continue;
      const limit = /^limits\.(.*?)(?:\.(per_transfer|per_day|per_week|approval_above))?$/.exec(name);
      if (limit) {
        const row = rows.find((r) => r.asset.value.trim() === limit[1]);
        const p = row?.problems.get(limit[2] ?? '');
        if (p) {
          p.show(message);
          continue;
        }
      }
      const list = /^(\w+)\[(\d+)\]$/.exec(name);
      const p = problems.get(list ? list[1] : name);
      if (p) p.show(list ? `Entry ${Number(list[2]) + 1}: ${message}` : message);
      else unplaced.push(`${name}: ${message}`);
    }
    return unplaced;
  }

  async function load(): Promise<void> {
    authority.textContent = authorityText(agent.id);
    reload.disabled = true;
    try {
      render(await api.policy(agent.id, token));
      formError.clear();
      void showBudget();
    } catch (e) {
      clear(body);
      formError.show(e);
    } finally {
      reload.disabled = false;
    }
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearProblems();
    savedAt.textContent = '';
    let policy: PolicyBody;
    try {
      policy = collect();
    } catch (e) {
      formError.show(e);
      return;
    }
    // Two rows for one asset would silently collapse into one: say so instead.
    const keys = rows.map((r) => r.asset.value.trim()).filter(Boolean);
    const twice = keys.find((k, i) => keys.indexOf(k) !== i);
    if (twice) {
      rows.filter((r) => r.asset.value.trim() === twice).forEach((r) => r.problems.get('')?.show('listed twice'));
      formError.show(new Error(`${twice} is listed twice: keep one row per asset.`));
      return;
    }
    save.disabled = true;
    try {
      const saved = await api.putPolicy(agent.id, token, policy);
      render(saved);
      void showBudget();
      savedAt.textContent = `Saved ${new Date().toLocaleTimeString()}`;
      notify('Policy saved.');
    } catch (e) {
      if (e instanceof ApiError && e.status === 422 && e.details?.fields) {
        const unplaced = showProblems(e.details.fields);
        formError.show(
          new Error(
            unplaced.length
              ? `The policy was not saved: ${unplaced.join('; ')}`
              : 'The policy was not saved: fix the fields marked above.',
          ),
        );
      } else formError.show(e);
    } finally {
      save.disabled = false;
    }
  });
  reload.addEventListener('click', () => void load());
  onAuthorityChange(form, () => (authority.textContent = authorityText(agent.id)));

  /** What the windows have counted and have left now, as the service states it (nothing of its own). */
  async function showBudget(): Promise<void> {
    const stated = await api.budget(agent.id, token).catch(() => null);
    clear(budget);
    if (!stated) return;
    const facts = { budget: stated } as AgentFacts;
    const lines = Object.keys(stated.limits ?? {}).flatMap((key) =>
      windows(facts, key).map((w) =>
        h(
          'div',
          { 'data-testid': `policy-budget-${w.rule === 'per_day' ? 'daily' : 'weekly'}`, 'data-asset': key, 'data-left': w.left },
          windowSentence(w, `${key.split(':')[1] ?? key} (${key})`),
        ),
      ),
    );
    if (lines.length) budget.append(h('p', {}, h('strong', {}, 'Counted now')), ...lines);
  }

  let loaded: Promise<void> | null = null;
  const loadOnce = () => (loaded ??= load());
  return {
    el: form,
    load() {
      void loadOnce();
    },
    reveal(rule: string) {
      void loadOnce().then(() => {
        const n = /^calls\.rules\[(\d+)\]$/.exec(rule)?.[1];
        const target = n
          ? form.querySelector<HTMLElement>(`[data-testid="call-rule"][data-index="${n}"]`)
          : rule === 'calls.default'
            ? (form.querySelector<HTMLElement>('[data-testid="calls-editor"]') ?? null)
            : null;
        if (!target) return;
        for (const old of form.querySelectorAll('.revealed')) old.classList.remove('revealed');
        target.classList.add('revealed');
        target.scrollIntoView({ block: 'center' });
        target.querySelector<HTMLElement>('select, input, textarea')?.focus({ preventScroll: true });
      });
    },
  };
}
