// The operator's gas sponsorship page (`#/sponsorship`, docs/api.md §22): each sponsorable chain with its paymaster's
// deposit, the sponsor's balance and whether the paymaster trusts and allowlists the sponsor, with a warning and the
// operator's next step for each thing missing or at risk (the sponsorships of the agents listed adding up to more
// than the deposit, a shared paymaster, a low sponsor balance); then every agent on those chains with its
// sponsorship (per day, counted over the last 24 hours, left) and a form to set it, which takes the admin token.
import { api, adminToken, type AgentSummary, type ChainInfo, type Sponsorship } from './api';
import { compareDecimal, roundAmount } from './amount';
import { ownerCredential } from './authority';
import { cell, clear, copyButton, h, uid } from './dom';
import { chainWarnings, committedPerDay, LOW_SPONSOR_BALANCE, sponsorshipEditor, sponsorshipOn } from './sponsorship';
import { getToken } from './tokens';
import { errorLine, errorText } from './ui';

export interface SponsorshipPageHooks {
  open(agentId: string, tab?: 'wallet'): void;
}

const PARALLEL = 4;

const amount = (value: string, symbol: string, testid?: string) =>
  h('span', { title: `${value} ${symbol}`, 'data-testid': testid ?? null, 'data-value': value }, `${roundAmount(value)} ${symbol}`);

const yesNo = (ok: boolean, yes: string, no: string) => h('span', { class: `badge ${ok ? 'good' : 'bad'}` }, ok ? yes : no);

export function sponsorshipPage(agents: AgentSummary[], initialChains: ChainInfo[], hooks: SponsorshipPageHooks): HTMLElement {
  const heading = uid('sponsorship');
  const error = errorLine();
  const chainsBox = h('div', { class: 'stack', 'data-testid': 'sponsor-chains' });
  const rows = h('tbody', {});
  const table = h(
    'table',
    { class: 'sponsorships cards', 'aria-label': 'Sponsorships of the agents', 'data-testid': 'sponsorships' },
    h('thead', {}, h('tr', {}, ['Agent', 'Chain', 'Today', 'Set'].map((t) => h('th', { scope: 'col' }, t)))),
    rows,
  );
  const agentsNote = h('p', { class: 'muted small', 'data-testid': 'sponsorships-summary', role: 'status' });
  const refresh = h('button', { type: 'button', class: 'secondary small' }, 'Refresh');
  let chains = initialChains;
  /** Each agent's sponsorships as read (or saved since). */
  const known = new Map<string, Sponsorship[]>();

  const sponsorable = () => chains.filter((c) => c.sponsorship);

  function renderChains(): void {
    clear(chainsBox);
    const list = sponsorable();
    const others = chains.filter((c) => c.configured && !c.sponsorship).map((c) => c.name);
    if (!list.length) {
      chainsBox.append(
        h(
          'p',
          { class: 'card', 'data-testid': 'no-sponsorable-chain' },
          'No chain is sponsorable on this service, so every agent pays its own gas. A chain becomes sponsorable when ',
          h('code', {}, 'ENTRY_POINT_<CHAIN>'),
          ', ',
          h('code', {}, 'ACCOUNT_IMPLEMENTATION_<CHAIN>'),
          ' and ',
          h('code', {}, 'PAYMASTER_<CHAIN>'),
          ' (a SingletonPaymaster v0.7 the operator deploys) are set and check out when agentd starts; its log says why a chain does not.',
        ),
      );
      return;
    }
    for (const chain of list) {
      const info = chain.sponsorship!;
      const sym = chain.native_symbol;
      const onChain = [...known.values()].flatMap((l) => l.filter((s) => s.chain === chain.name));
      const committed = committedPerDay(onChain);
      const warnings = chainWarnings(info, committed, sym);
      const facts = h('dl', { class: 'facts-list' });
      const fact = (term: string, ...value: (Node | string)[]) => facts.append(h('dt', {}, term), h('dd', {}, ...value));
      fact('Deposit', amount(info.deposit, sym, 'sponsor-deposit'), h('span', { class: 'muted small' }, ' at the EntryPoint: it pays the sponsored operations'));
      fact(
        'Sponsor',
        h('code', { class: 'mono', 'data-testid': 'sponsor-address' }, info.sponsor),
        ' ',
        copyButton(info.sponsor, `Copy the sponsor address on ${chain.name}`),
        h('div', { class: 'small' }, 'balance ', amount(info.sponsor_balance, sym, 'sponsor-balance'), h('span', { class: 'muted' }, ' (pays the bundles\u2019 gas, paid back by the EntryPoint)')),
      );
      fact(
        'Paymaster',
        h('code', { class: 'mono' }, info.paymaster),
        h(
          'div',
          { class: 'small' },
          yesNo(info.trusted, 'trusts the sponsor', 'does not trust the sponsor'),
          ' ',
          yesNo(info.bundler_allowed, 'sponsor allowlisted', 'sponsor not allowlisted'),
          ' ',
          info.shared ? h('span', { class: 'badge bad' }, 'shared') : h('span', { class: 'badge good' }, 'agentd\u2019s alone'),
        ),
      );
      fact('Sponsorships', amount(committed, sym, 'sponsor-committed'), h('span', { class: 'muted small' }, ` a day over the ${onChain.filter((s) => compareDecimal(s.per_day, '0') === 1).length} agent(s) listed`));
      fact('EntryPoint', h('code', { class: 'mono small' }, info.entry_point));
      fact('Account implementation', h('code', { class: 'mono small' }, info.account_implementation));
      chainsBox.append(
        h(
          'article',
          {
            class: 'card sponsor-chain',
            'data-testid': 'sponsor-chain',
            'data-chain': chain.name,
            'data-ready': String(!warnings.some((w) => ['untrusted', 'not_allowlisted', 'no_deposit'].includes(w.kind))),
          },
          h('h3', {}, chain.name, h('small', { class: 'muted' }, ` \u00b7 chain id ${chain.chain_id}`)),
          facts,
          warnings.length
            ? h('ul', { class: 'review-notes', 'data-testid': 'sponsor-warnings' }, warnings.map((w) => w.el))
            : h('p', { class: 'small good', 'data-testid': 'sponsor-warnings' }, 'Ready: the sponsor is trusted and allowlisted, and the deposit covers the sponsorships.'),
        ),
      );
    }
    if (others.length) {
      chainsBox.append(
        h('p', { class: 'muted small' }, `Not sponsorable here: ${others.join(', ')} (their agents pay their own gas).`),
      );
    }
  }

  /** One row per agent and sponsorable chain of its: what it has today, and the operator's form. */
  function renderAgent(agent: AgentSummary, list: Sponsorship[] | null, problem: unknown): void {
    for (const old of rows.querySelectorAll(`tr[data-agent-id="${agent.id}"]`)) old.remove();
    for (const chain of sponsorable().filter((c) => agent.chains.includes(c.name))) {
      const s = sponsorshipOn(list, chain.name);
      const sym = chain.native_symbol;
      const today =
        problem !== null
          ? h('span', { class: 'form-error small' }, errorText(problem))
          : s && compareDecimal(s.per_day, '0') === 1
            ? h(
                'span',
                { 'data-testid': 'sponsorship-today', 'data-left': s.left, 'data-per-day': s.per_day },
                amount(s.left, sym),
                ` left of ${roundAmount(s.per_day)} a day`,
                h('div', { class: 'muted small' }, `${roundAmount(s.counted)} ${sym} counted in the last 24 h`),
              )
            : h('span', { class: 'muted', 'data-testid': 'sponsorship-today', 'data-per-day': s?.per_day ?? '' }, s ? 'ended: its wallet pays' : 'none: its wallet pays');
      rows.append(
        h(
          'tr',
          { 'data-testid': 'sponsorship-row', 'data-agent-id': agent.id, 'data-chain': chain.name },
          cell('Agent', { class: 'agent-cell' }, h('button', { type: 'button', class: 'link', onclick: () => hooks.open(agent.id, 'wallet') }, agent.name)),
          cell('Chain', {}, chain.name),
          cell('Today', {}, today),
          cell(
            'Set',
            {},
            sponsorshipEditor(agent.id, chain, s, (saved) => {
              const rest = (known.get(agent.id) ?? []).filter((x) => x.chain !== saved.chain);
              known.set(agent.id, [...rest, saved]);
              renderAgent(agent, known.get(agent.id)!, null);
              renderChains();
            }),
          ),
        ),
      );
    }
  }

  async function load(): Promise<void> {
    error.clear();
    refresh.disabled = true;
    try {
      chains = await api.chains();
    } catch (e) {
      error.show(e);
    }
    renderChains();
    clear(rows);
    known.clear();
    const listed = agents.filter((a) => a.is_active && a.chains.some((c) => sponsorable().some((s) => s.name === c)));
    agentsNote.textContent = listed.length ? `Reading ${listed.length} agent(s)…` : 'No agent works on a sponsorable chain.';
    let unread = 0;
    const queue = [...listed];
    await Promise.all(
      Array.from({ length: Math.min(PARALLEL, queue.length) }, async () => {
        for (let agent = queue.shift(); agent; agent = queue.shift()) {
          const token = getToken(agent.id);
          if (!token && !ownerCredential(agent.id)) {
            unread += 1;
            renderAgent(agent, null, new Error('Not readable: enter the admin token, or open the agent with its token.'));
            continue;
          }
          try {
            const list = await api.sponsorships(agent.id, token);
            known.set(agent.id, list);
            renderAgent(agent, list, null);
          } catch (e) {
            unread += 1;
            renderAgent(agent, null, e);
          }
          renderChains();
        }
      }),
    );
    if (listed.length) {
      agentsNote.textContent = `${listed.length} agent(s) on sponsorable chains${unread ? `, ${unread} not readable` : ''}. The sums above count the agents read here.`;
    }
    refresh.disabled = false;
  }
  refresh.addEventListener('click', () => void load());
  void load();

  const admin = adminToken();
  return h(
    'section',
    { class: 'sponsorship-page', 'aria-labelledby': heading, 'data-testid': 'sponsorship-page' },
    h('div', { class: 'section-head' }, h('h2', { id: heading }, 'Gas sponsorship'), refresh),
    h(
      'p',
      { class: 'muted' },
      'The operator can pay the agents\u2019 gas, so that an agent holding only a stablecoin can still move it: agentd ',
      'sends each sponsored transfer or batch as a user operation of the agent\u2019s own address, approved by its ',
      'sponsor key and paid from the paymaster\u2019s deposit, within a daily budget per agent (a rolling 24 hours). ',
      `Warnings: a sponsor below ${LOW_SPONSOR_BALANCE} of the native coin, sponsorships adding up to more than the deposit, a paymaster shared with other signers.`,
    ),
    admin
      ? null
      : h(
          'p',
          { class: 'warning small', 'data-testid': 'sponsorship-needs-admin' },
          'Setting a sponsorship takes the operator\u2019s admin token (the agent\u2019s token and an owner session are refused: an owner must not make the operator pay). Enter it in the sidebar\u2019s Admin token.',
        ),
    error.el,
    chainsBox,
    h('h3', {}, 'Agents'),
    agentsNote,
    h('div', { class: 'table-wrap' }, table),
  );
}
