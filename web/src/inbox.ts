// The approvals inbox across agents: every agent this console knows (the agent list, and the agents whose tokens
// this browser keeps) for which it holds a way to read them (the agent's token, its owner session or the admin
// token), with what waits for each, explained and decided as in the agent's own Approvals tab (./approvals). Read
// again every few seconds while it is shown. Deciding needs owner authority over that agent (§10).
import { api, type AgentSummary, type ChainInfo } from './api';
import { approvalList, poll, type ApprovalList } from './approvals';
import { adminToken, onAuthorityChange, ownerCredential } from './authority';
import { clear, h, shortHex, uid } from './dom';
import { getToken } from './tokens';

const TOKEN_PREFIX = 'agentd.token.';

/** The agents the console knows: the listed ones, then those whose token this browser keeps. */
export function knownAgents(listed: AgentSummary[]): { id: string; name: string | null; active: boolean }[] {
  const agents = listed.map((a) => ({ id: a.id, name: a.name as string | null, active: a.is_active }));
  for (let i = 0; i < localStorage.length; i += 1) {
    const key = localStorage.key(i);
    if (!key?.startsWith(TOKEN_PREFIX)) continue;
    const id = key.slice(TOKEN_PREFIX.length);
    if (!agents.some((a) => a.id === id)) agents.push({ id, name: null, active: true });
  }
  return agents;
}

export function inboxView(
  listed: AgentSummary[],
  chains: ChainInfo[],
  onCount: (count: number) => void = () => {},
  openAgent: (id: string) => void = () => {},
): HTMLElement {
  const heading = uid('inbox');
  const groups = h('div', { class: 'stack', 'data-testid': 'inbox' });
  const summary = h('p', { class: 'small', 'data-testid': 'inbox-summary', role: 'status' }, 'Reading…');
  const skipped = h('p', { class: 'muted small', 'data-testid': 'inbox-skipped' });
  const refreshButton = h('button', { type: 'button', class: 'secondary' }, 'Refresh');
  const counts = new Map<string, number>();
  let lists: { id: string; list: ApprovalList; group: HTMLElement }[] = [];

  function build(): void {
    clear(groups);
    counts.clear();
    lists = [];
    const unreachable: string[] = [];
    for (const agent of knownAgents(listed)) {
      if (!agent.active) continue;
      const token = getToken(agent.id);
      if (!token && !ownerCredential(agent.id)) {
        unreachable.push(agent.name ?? shortHex(agent.id, 8, 4));
        continue;
      }
      const title = h('span', {}, agent.name ?? shortHex(agent.id, 8, 4));
      if (!agent.name) {
        void api.agent(agent.id, token).then((d) => (title.textContent = d.name), () => {});
      }
      const count = h('span', { class: 'count' });
      const list = approvalList({
        agentId: agent.id,
        token,
        chains,
        emptyText: null,
        onCount: (n) => {
          counts.set(agent.id, n);
          count.textContent = String(n);
          group.hidden = n === 0;
          total();
        },
      });
      const group: HTMLElement = h(
        'section',
        { class: 'inbox-agent', 'data-testid': 'inbox-agent', 'data-agent-id': agent.id, hidden: true },
        h(
          'div',
          { class: 'section-head' },
          h('h3', {}, title, ' ', count),
          h(
            'a',
            {
              href: `#/agents/${agent.id}/approvals`,
              onclick: (event: Event) => {
                event.preventDefault();
                openAgent(agent.id);
              },
            },
            'Open this agent',
          ),
        ),
        ownerCredential(agent.id)
          ? null
          : h('p', { class: 'warning small' }, 'No owner authority for this agent in this browser: sign in as its owner or enter the admin token to decide.'),
        list.error.el,
        list.el,
      );
      groups.append(group);
      lists.push({ id: agent.id, list, group });
    }
    skipped.textContent = unreachable.length
      ? `Not checked (no token, owner session or admin token for them in this browser): ${unreachable.join(', ')}.`
      : '';
    if (lists.length === 0) {
      summary.textContent = adminToken()
        ? 'No agent to check.'
        : 'No agent to check: enter the admin token, or open an agent with its token, to see what waits for approval.';
    }
  }

  function total(): void {
    let n = 0;
    let agents = 0;
    for (const c of counts.values()) {
      n += c;
      if (c) agents += 1;
    }
    summary.textContent =
      n === 0
        ? `Nothing is waiting for approval in the ${lists.length} agent${lists.length === 1 ? '' : 's'} checked.`
        : `${n} waiting for approval across ${agents} agent${agents === 1 ? '' : 's'} (${lists.length} checked) · updated ${new Date().toLocaleTimeString()}`;
    summary.dataset.count = String(n);
    onCount(n);
  }

  async function refresh(): Promise<void> {
    refreshButton.disabled = true;
    await Promise.all(
      lists.map(async ({ list, group }) => {
        const n = await list.refresh();
        if (n === null) group.hidden = false;
      }),
    );
    refreshButton.disabled = false;
  }

  refreshButton.addEventListener('click', () => void refresh());
  const el = h(
    'section',
    { class: 'inbox-view', 'aria-labelledby': heading },
    h('div', { class: 'section-head' }, h('h2', { id: heading }, 'Approvals inbox'), refreshButton),
    h(
      'p',
      { class: 'muted' },
      'What waits for an owner in every agent this browser can read, oldest first within each agent, with the rule that ',
      'held it. It follows new requests and decisions by itself while open.',
    ),
    summary,
    skipped,
    groups,
  );
  // Entering or forgetting the admin token, or signing in as an owner, changes which agents can be read.
  onAuthorityChange(el, () => {
    build();
    void refresh();
  });
  build();
  void refresh();
  poll(el, refresh);
  return el;
}
