// The Wallet tab's send form (docs/api.md §12): chain, asset, recipient and amount; a review of what will be sent,
// to whom, and the figures the API gives (balance, the spending cap and what it has counted, the policy's limits
// for that asset); then a confirm that sends `POST …/transfers` with an `Idempotency-Key` made for that review, so
// a double click or a retry never sends twice. The answer is shown as it comes: sent (pending, then followed to its
// confirmation), held for the owner's approval, or refused with the service's message, code and rule. Where the
// operator sponsors the agent's gas (§22), the form offers who pays it (the sponsorship by default, as the service
// decides), the review says what the sponsorship has left, and the answer shows the user operation, its bundle and
// what the gas cost.
import { api, ApiError, type AgentDetail, type Budget, type ChainInfo, type ChainSponsorship, type GasPayer, type NewTransferBody, type Policy, type Sponsorship, type Transfer, type TransferPreview } from './api';
import { compareDecimal, roundAmount } from './amount';
import { clear, copyButton, field, h, uid } from './dom';
import { qrSvg } from './qr';
import { errorRefusal, loadFacts, paidBefore, windows, windowSentence, type AgentFacts } from './explain';
import { agentTokenPrompt, errorLine, errorText, txHashLink } from './ui';
import { budgetOf, listDelegations, periodWords, spendableReason, spendableShort, type Delegation } from './delegations';
import { defaultGas, gasInfo, isActive, leftWords, sponsorshipOn } from './sponsorship';

export interface SendHooks {
  /** Something moved or is held: balances and the approvals count are read again. */
  onChange(): void;
  /** Opens the Approvals tab at a held transfer's card. */
  openApproval?(transferId: string): void;
}

interface Draft {
  chain: ChainInfo;
  asset: string;
  native: boolean;
  to: string;
  amount: string;
  key: string;
  /** Paid from an owner's account through a delegation (§21), with what its limit leaves now; null: the wallet. */
  delegation: { id: string; delegator: string; available: string | null; limit: string; per: string } | null;
  /** Who pays the gas, as chosen (sent as `gas`); null where the agent has no sponsorship there (its wallet pays). */
  gas: GasPayer | null;
}

export const FINAL = new Set(['confirmed', 'reverted', 'dropped', 'cancelled', 'rejected', 'expired']);

export function newKey(): string {
  return typeof crypto.randomUUID === 'function'
    ? `console-${crypto.randomUUID()}`
    : `console-${Date.now()}-${Math.random().toString(36).slice(2)}`;
}

/** An amount rounded for reading, with the exact value in its title. */
export function amountSpan(value: string, unit: string, testid?: string): HTMLElement {
  return h('span', { title: `${value} ${unit}`.trim(), 'data-testid': testid ?? null }, `${roundAmount(value)} ${unit}`.trim());
}

export function sendPanel(agent: AgentDetail, token: string | null, chains: ChainInfo[], hooks: SendHooks): HTMLElement {
  // Sending acts as the agent (§10: POST …/transfers refuses owner authority alone): without its token, ask for it.
  if (!token) {
    const heading = uid('send');
    return h(
      'section',
      { class: 'card send', 'aria-labelledby': heading, 'data-testid': 'send-card' },
      h('h2', { id: heading }, 'Send'),
      agentTokenPrompt(agent.id, {
        title: 'Sending needs the agent\u2019s own token',
        why: 'A send acts as the agent, under its spending cap and policy: the service takes only the agent\u2019s access token for it, not the admin token or an owner session. Give the token to send from here; everything else on this page works without it.',
      }),
    );
  }
  return sendForm(agent, token, chains, hooks);
}

function sendForm(agent: AgentDetail, token: string, chains: ChainInfo[], hooks: SendHooks): HTMLElement {
  const known = chains.filter((c) => agent.chains.includes(c.name));
  const canSend = agent.capabilities.includes('transact');
  const chain = h('select', {}, known.map((c) => h('option', { value: c.name }, `${c.name} (chain id ${c.chain_id})`)));
  const asset = h('select', {});
  const to = h('input', { type: 'text', class: 'mono', placeholder: '0x…', autocomplete: 'off', spellcheck: 'false' });
  const amount = h('input', { type: 'text', inputmode: 'decimal', placeholder: 'e.g. 0.01', autocomplete: 'off' });
  // Pay from the agent's wallet, or from an owner's account through an active delegation of this chain and asset.
  const source = h('select', { 'data-testid': 'send-source' });
  const sourceField = field('Pay from', source, 'A delegation spends from the owner\u2019s account, within the limits it sets on chain.');
  sourceField.hidden = true;
  let delegations: Delegation[] = [];
  // What the service says each delegation lets a send take now (`GET …/budget`), read with the delegations.
  let budget: Budget | null = null;
  // Who pays the gas (§22): offered where the operator sponsors the agent on the chain, the sponsorship by default.
  let sponsorships: Sponsorship[] | null = null;
  const gas = h('select', { 'data-testid': 'send-gas' });
  const gasField = field('Gas paid by', gas, 'The operator’s sponsorship pays the network fee, so the wallet needs no native coin.');
  gasField.hidden = true;
  /** The chain whose default the gas choice shows; another chain starts again from its own default. */
  let gasChain: string | null = null;
  function fillGas(): void {
    const s = sponsorshipOn(sponsorships, chain.value);
    const info = known.find((c) => c.name === chain.value);
    const offered = isActive(s) && !!info;
    gasField.hidden = !offered;
    if (!offered || !info) {
      gasChain = null;
      return;
    }
    const chosen = gasChain === chain.value ? (gas.value as GasPayer) : defaultGas(sponsorships, chain.value);
    clear(gas);
    gas.append(
      h('option', { value: 'sponsored' }, `The operator’s sponsorship (${leftWords(s, info.native_symbol).textContent})`),
      h('option', { value: 'wallet' }, `This agent’s wallet, in ${info.native_symbol}`),
    );
    gas.value = chosen;
    gasChain = chain.value;
  }
  const limitOf = (d: Delegation) => d.limits.find((l) => l.asset === `${chain.value}:${asset.value}`);
  function fillSources(): void {
    clear(source);
    source.append(h('option', { value: '' }, 'This agent\u2019s wallet'));
    for (const d of delegations) {
      const limit = d.status === 'active' && d.chain === chain.value ? limitOf(d) : undefined;
      if (!limit) continue;
      const entry = budgetOf(budget, d.id, limit.asset);
      const now = entry ? spendableShort(entry, asset.value) : null;
      const left = now ? `: ${now}` : limit.available == null ? '' : `, ${roundAmount(limit.available)} ${asset.value} left`;
      source.append(h('option', { value: d.id }, `The owner\u2019s account ${d.delegator.slice(0, 8)}\u2026 (delegation${left})`));
    }
    sourceField.hidden = source.options.length < 2;
  }
  // Read when the form is built and again whenever it is used (a field gains focus, the chain or asset changes): a
  // delegation granted in the Delegations tab since then is offered without reloading the page. Only the answer to
  // the latest read is applied.
  let reads = 0;
  function readDelegations(): void {
    const read = ++reads;
    void Promise.all([listDelegations(agent.id, token), api.budget(agent.id, token).catch(() => null)])
      .then(([all, stated]) => {
        if (read !== reads) return;
        const chosen = source.value;
        delegations = all;
        budget = stated;
        // `GET …/budget` carries the sponsorships (§22); a server before them answers none.
        sponsorships = stated?.sponsorships ?? null;
        fillGas();
        fillSources();
        if ([...source.options].some((o) => o.value === chosen)) source.value = chosen;
      })
      .catch(() => {});
  }
  readDelegations();
  const formError = errorLine();
  const reviewButton = h('button', { type: 'submit' }, 'Review');
  const review = h('div', { class: 'send-review', 'data-testid': 'send-review', hidden: true });
  const result = h('div', { class: 'send-result', 'data-testid': 'send-result', hidden: true, role: 'status' });

  function fillAssets(): void {
    const info = known.find((c) => c.name === chain.value);
    clear(asset);
    if (!info) return;
    asset.append(h('option', { value: info.native_symbol }, `${info.native_symbol} (native coin)`));
    for (const t of info.tokens ?? []) asset.append(h('option', { value: t.symbol }, t.symbol));
  }
  chain.addEventListener('change', () => {
    fillAssets();
    fillSources();
    fillGas();
    readDelegations();
  });
  asset.addEventListener('change', () => {
    fillSources();
    readDelegations();
  });
  fillAssets();

  const form = h(
    'form',
    { class: 'send-form', 'aria-label': 'Send from this wallet' },
    h(
      'div',
      { class: 'inline-form' },
      field('Chain', chain),
      field('Asset', asset),
    ),
    sourceField,
    gasField,
    field('Recipient', to, 'A 0x address. The agent\u2019s own address and the zero address are refused.'),
    field('Amount', amount, 'In whole units of the asset (e.g. 0.01 ETH, 5 USDC).'),
    formError.el,
    h('div', { class: 'row' }, reviewButton),
  );
  form.addEventListener('focusin', readDelegations);
  if (!canSend) {
    for (const el of [chain, asset, source, gas, to, amount, reviewButton]) el.disabled = true;
  }

  function editing(on: boolean): void {
    for (const el of [chain, asset, source, gas, to, amount, reviewButton]) el.disabled = !canSend || !on;
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    formError.clear();
    result.hidden = true;
    const info = known.find((c) => c.name === chain.value);
    const recipient = to.value.trim();
    const value = amount.value.trim();
    if (!info) return formError.show(new Error('Choose a chain.'));
    if (!/^0x[0-9a-fA-F]{40}$/.test(recipient)) return formError.show(new Error('The recipient must be a 0x address of 40 hex digits.'));
    if (!/^\d+(\.\d+)?$/.test(value) || compareDecimal(value, '0') !== 1) {
      return formError.show(new Error('The amount must be a decimal number greater than zero, such as 0.01.'));
    }
    const draft: Draft = {
      chain: info,
      asset: asset.value,
      native: asset.value === info.native_symbol,
      to: recipient,
      amount: value,
      key: newKey(),
      delegation: null,
      gas: gasField.hidden ? null : (gas.value as GasPayer),
    };
    const chosen = delegations.find((d) => d.id === source.value);
    const limit = chosen ? limitOf(chosen) : undefined;
    if (chosen && limit) {
      const per = limit.period_seconds ? `this ${periodWords(limit.period_seconds).noun}` : 'in all';
      draft.delegation = { id: chosen.id, delegator: chosen.delegator, available: limit.available ?? null, limit: limit.amount, per };
    }
    editing(false);
    await showReview(draft);
  });

  async function showReview(draft: Draft): Promise<void> {
    clear(review);
    review.hidden = false;
    review.append(h('p', { class: 'muted' }, 'Reading the balance, the cap and the policy…'));
    // Fresh figures from the API: the agent (cap and what it has counted), its balances, its policy.
    const [detail, balances, policy, known, parts, fee] = await Promise.allSettled([
      api.agent(agent.id, token),
      api.balances(agent.id, token),
      api.policy(agent.id, token),
      // The daily and weekly windows (what was sent and what waits) and whether this recipient was ever paid.
      api.approvals(agent.id, token).then((waiting) => loadFacts(agent.id, token, waiting)),
      // A sponsored send: the paymaster as it stands now (the operator may have trusted or funded it since).
      draft.gas === 'sponsored'
        ? api.chains().then((all) => all.find((x) => x.name === draft.chain.name)?.sponsorship ?? null)
        : Promise.resolve(null),
      // The service's own preview of this send (§12): the most its network fee could be, from the gas limit and
      // maximum fee per gas of the transaction it would sign now.
      api.previewTransfer(agent.id, token, bodyOf(draft)),
    ]);
    const previewed = fee.status === 'fulfilled' ? fee.value : null;
    clear(review);
    const c = draft.chain.name;
    const from = agent.wallet_addresses[c] ?? '';
    const facts = h('dl', { class: 'facts-list' });
    const fact = (term: string, ...value: (Node | string)[]) => facts.append(h('dt', {}, term), h('dd', {}, ...value));
    fact('Send', h('strong', { 'data-testid': 'review-amount' }, `${draft.amount} ${draft.asset}`), ` on ${c} (chain id ${draft.chain.chain_id})`);
    fact('To', h('code', { class: 'mono', 'data-testid': 'review-to' }, draft.to));
    const notes: HTMLElement[] = [];
    const delegated = draft.delegation;
    const sponsored = draft.gas === 'sponsored';
    if (delegated) {
      fact(
        'From',
        h('code', { class: 'mono' }, delegated.delegator),
        sponsored
          ? ' (the owner\u2019s account, through a delegation; the operator\u2019s sponsorship pays the network fee)'
          : ' (the owner\u2019s account, through a delegation; this agent\u2019s wallet pays the network fee)',
      );
      fact(
        'Delegation',
        h(
          'span',
          { 'data-testid': 'review-delegation' },
          delegated.available == null
            ? `at most ${delegated.limit} ${draft.asset} ${delegated.per}; what is left cannot be read now`
            : `${roundAmount(delegated.available)} of ${roundAmount(delegated.limit)} ${draft.asset} left ${delegated.per}`,
        ),
      );
      // One figure for what can be spent through it now, and why: the service's, beside the policy's windows.
      const stated = known.status === 'fulfilled' ? known.value.budget : budget;
      const entry = budgetOf(stated, delegated.id, `${c}:${draft.asset}`);
      if (entry?.spendable != null) {
        fact(
          'Can spend now',
          h('span', { 'data-testid': 'review-spendable' }, `${roundAmount(entry.spendable)} ${draft.asset}: ${spendableReason(entry, stated, draft.asset)}`),
        );
      }
      if (delegated.available != null && compareDecimal(draft.amount, delegated.available) === 1) {
        notes.push(h('li', { class: 'bad' }, `More than the delegation leaves (${delegated.available} ${draft.asset}): the service will refuse (delegation_limit).`));
      }
    } else fact('From', h('code', { class: 'mono' }, from), ' (this agent\u2019s wallet)');

    // The balance of that asset (the wallet's: a delegated send reads the owner's account, which the API does not
    // show here; the service refuses with insufficient_funds if it holds too little).
    if (delegated) {
      // nothing: see above
    } else if (balances.status === 'fulfilled') {
      const entry = balances.value.balances[c];
      let have: string | null = null;
      if (entry && !('error' in entry)) {
        if (draft.native) have = entry.formatted;
        else {
          const t = entry.tokens?.[draft.asset];
          if (t && !('error' in t)) have = t.formatted;
        }
      }
      if (have !== null) {
        fact('Balance', amountSpan(have, draft.asset, 'review-balance'));
        if (compareDecimal(draft.amount, have) === 1) {
          notes.push(h('li', { class: 'bad' }, `The wallet holds less than ${draft.amount} ${draft.asset}: the service will refuse (insufficient_funds).`));
        }
      } else fact('Balance', h('span', { class: 'muted' }, 'unavailable for this asset right now'));
    } else fact('Balance', h('span', { class: 'muted' }, `unavailable (${errorText(balances.reason)})`));

    // The network fee is paid in the native coin by this agent's wallet, whatever is sent and from whose account,
    // unless the operator's sponsorship pays it: a wallet that holds none of it cannot send anything, and is said so
    // before, with where to fund it (or the sponsorship, where there is one).
    const entry = balances.status === 'fulfilled' ? balances.value.balances[c] : undefined;
    if (!sponsored && entry && !('error' in entry) && /^0+$/.test(entry.wei)) notes.push(noGas(draft, from, !!delegated));
    if (sponsored) {
      const account = entry && !('error' in entry) ? (entry as { account?: string | null }).account : null;
      notes.push(...sponsoredNotes(draft, account ?? null, parts.status === 'fulfilled' ? parts.value : draft.chain.sponsorship ?? null));
    }

    // The spending cap: per chain, native units; value and fees count.
    // What the cap counted and has left, as the service states it (`GET …/budget`).
    const stated = known.status === 'fulfilled' ? (known.value.budget?.caps?.[c] ?? null) : null;
    if (detail.status === 'fulfilled') {
      const cap = stated?.limit ?? String(detail.value.spending_cap);
      const spent = stated?.counted ?? detail.value.spent?.[c] ?? '0';
      const left = stated?.left ?? null;
      const sym = draft.chain.native_symbol;
      fact(
        'Spending cap',
        h(
          'span',
          { 'data-testid': 'review-cap' },
          `${roundAmount(spent)} of ${roundAmount(cap)} ${sym} counted on ${c}${left === null ? '' : `; ${roundAmount(left)} ${sym} left`}`,
        ),
      );
      fact(
        'Network fee',
        sponsored
          ? sponsoredFee(draft)
          : feeFigure(draft, previewed, fee.status === 'rejected' ? fee.reason : null),
        sponsored
          ? ''
          : delegated
          ? `paid in ${sym} by this agent\u2019s wallet and counted against the cap; the delegated ${draft.asset} is the owner\u2019s and counts against the delegation and the policy, not the cap.`
          : draft.native
          ? `paid in ${sym} on top of the amount and counted against the cap. The service prices it when it signs, and reserves the amount plus twice the maximum fee until the transfer lands; then only what it really cost counts.`
          : `paid in ${sym} by the agent and counted against the cap; the ${draft.asset} amount counts against the policy, not the cap.`,
      );
      if (!delegated && draft.native && left !== null && compareDecimal(draft.amount, left) === 1) {
        notes.push(h('li', { class: 'bad' }, `More than what is left of the cap (${left} ${sym}): the service will refuse (spending_cap_exceeded).`));
      }
    } else fact('Spending cap', h('span', { class: 'muted' }, `unavailable (${errorText(detail.reason)})`));

    // The policy's limits for <chain>:<SYMBOL>.
    let held = false;
    if (policy.status === 'fulfilled') {
      const facts = known.status === 'fulfilled' ? { ...known.value, policy: policy.value } : null;
      // Held only if nothing refuses it first (funds, cap, a limit, a recipient rule).
      held = policyFacts(policy.value, draft, fact, notes, facts);
      if (notes.some((n) => n.classList.contains('bad'))) {
        // A refusal comes before a hold: what would hold it no longer matters.
        held = false;
        for (const n of notes.filter((x) => x.classList.contains('waiting'))) notes.splice(notes.indexOf(n), 1);
      }
    } else fact('Policy', h('span', { class: 'muted' }, `unavailable (${errorText(policy.reason)})`));

    // A transfer the policy will hold is submitted for the owner's approval, not sent: the button says so. One the
    // review expects the service to refuse is not offered as "Confirm and send": the way on is to edit it; sending
    // it anyway (the figures may have moved since they were read) is the lesser button.
    const refuses = notes.some((n) => n.classList.contains('bad'));
    const confirm = h(
      'button',
      { type: 'button', class: refuses ? 'secondary' : null, 'data-will-hold': String(held), 'data-will-refuse': String(refuses) },
      refuses
        ? 'Send anyway (the review expects a refusal)'
        : held
          ? `Submit ${draft.amount} ${draft.asset} for approval`
          : `Confirm and send ${draft.amount} ${draft.asset}`,
    );
    const back = h('button', { type: 'button', class: 'secondary' }, 'Back to edit');
    const sendError = errorLine();
    back.addEventListener('click', () => {
      review.hidden = true;
      clear(review);
      editing(true);
      amount.focus();
    });
    confirm.addEventListener('click', async () => {
      sendError.clear();
      confirm.disabled = true;
      back.disabled = true;
      try {
        const answer = await api.send(agent.id, token, bodyOf(draft), draft.key);
        review.hidden = true;
        clear(review);
        showResult(answer.body, draft);
        hooks.onChange();
      } catch (e) {
        // A refusal is an answer too: the form comes back for a new try (with a new key).
        review.hidden = true;
        clear(review);
        showRefusal(e, draft);
      }
    });
    review.append(
      h('h3', {}, 'Review the transfer'),
      facts,
      notes.length ? h('ul', { class: 'review-notes', 'data-testid': 'review-notes' }, notes) : '',
      h(
        'p',
        { class: refuses ? 'small' : 'muted small', 'data-testid': 'review-outcome' },
        refuses
          ? 'The review expects the service to refuse it (see above): nothing would be signed or sent. Edit the transfer, or send it anyway to see the service\u2019s own answer.'
          : held
            ? 'Nothing is signed when you submit it: it waits for the owner, who approves or rejects it in Approvals.'
            : 'Nothing is sent until you confirm. A transfer on chain cannot be undone.',
      ),
      h('div', { class: 'row' }, refuses ? [back, confirm] : [confirm, back]),
      sendError.el,
    );
    (refuses ? back : confirm).focus();
  }

  /**
   * The review's fee figure for a send the wallet pays: the most the network fee could be, as the service's preview
   * quotes it (gas limit × maximum fee per gas of the transaction it would sign now); or why it is not known.
   */
  function feeFigure(draft: Draft, previewed: TransferPreview | null, failed: unknown): HTMLElement {
    const sym = draft.chain.native_symbol;
    if (previewed?.gas === 'sponsored') {
      return h('span', { 'data-testid': 'review-fee', 'data-gas': 'sponsored' }, 'paid by the operator\u2019s sponsorship. ');
    }
    if (previewed?.max_fee != null) {
      const perGas = previewed.max_fee_per_gas_wei ? gweiOf(previewed.max_fee_per_gas_wei) : null;
      return h(
        'span',
        { 'data-testid': 'review-fee', 'data-max-fee': previewed.max_fee, title: `${previewed.max_fee} ${sym}` },
        h('strong', {}, `at most ${roundAmount(previewed.max_fee)} ${sym}`),
        previewed.gas_limit != null && perGas != null
          ? ` (gas limit ${previewed.gas_limit.toLocaleString('en-US')} \u00d7 at most ${perGas} gwei a unit, at today\u2019s fees). `
          : '. ',
      );
    }
    const why = failed ? errorText(failed) : previewed?.message ?? 'the wallet cannot pay it now';
    return h('span', { 'data-testid': 'review-fee', class: 'muted' }, `not quoted (${why}). `);
  }

  /** The review's fee line for a sponsored send: what the sponsorship has left; not the agent's money. */
  function sponsoredFee(draft: Draft): HTMLElement {
    const s = sponsorshipOn(sponsorships, draft.chain.name);
    return h(
      'span',
      { 'data-testid': 'review-gas', 'data-gas': 'sponsored' },
      'paid by the operator\u2019s sponsorship',
      s ? [' (', leftWords(s, draft.chain.native_symbol), ')'] : '',
      `: not the agent\u2019s money, so it counts neither against the cap nor the wallet\u2019s ${draft.chain.native_symbol}. The service holds the operation\u2019s maximum gas cost in the sponsorship until it lands; then only what it really cost counts.`,
    );
  }

  /** What the review knows will refuse a sponsored send: nothing left today, an account of foreign code, a paymaster not ready. */
  function sponsoredNotes(draft: Draft, account: string | null, paymaster: ChainSponsorship | null): HTMLElement[] {
    const notes: HTMLElement[] = [];
    const s = sponsorshipOn(sponsorships, draft.chain.name);
    if (s && compareDecimal(s.left, '0') !== 1) {
      notes.push(
        h(
          'li',
          { class: 'bad', 'data-testid': 'review-sponsorship-spent' },
          `The sponsorship has nothing left today (${s.counted} of ${s.per_day} ${draft.chain.native_symbol} counted over the last 24 hours): the service will refuse it (sponsorship_limit). Let the wallet pay the gas, or wait.`,
        ),
      );
    }
    if (account === 'foreign') {
      notes.push(
        h('li', { class: 'bad' }, 'This agent\u2019s address designates code agentd did not choose: nothing sponsored is signed for it (account_foreign).'),
      );
    }
    if (paymaster && (!paymaster.trusted || !paymaster.bundler_allowed || compareDecimal(paymaster.deposit, '0') !== 1)) {
      notes.push(
        h(
          'li',
          { class: 'bad' },
          'The operator\u2019s paymaster is not ready (its sponsor is not trusted or allowlisted, or it has no deposit): the service will refuse it for now (sponsor_unfunded). The Gas sponsorship page says what the operator must do.',
        ),
      );
    }
    return notes;
  }

  /** The review's note on a wallet with no native coin: the fee cannot be paid; its address and a QR code to fund it. */
  function noGas(draft: Draft, address: string, delegated: boolean): HTMLElement {
    const sym = draft.chain.native_symbol;
    const uri = `ethereum:${address}@${draft.chain.chain_id}`;
    const s = sponsorshipOn(sponsorships, draft.chain.name);
    return h(
      'li',
      { class: 'bad no-gas', 'data-testid': 'review-no-gas' },
      `This agent\u2019s wallet holds no ${sym} on ${draft.chain.name}, and it pays the network fee of this send`,
      delegated ? ', a delegated one included (the owner\u2019s account pays only the amount)' : '',
      `: the service will refuse it (insufficient_funds). `,
      isActive(s)
        ? 'Go back and choose Gas paid by: the operator\u2019s sponsorship, or send '
        : draft.chain.sponsorship
          ? 'The operator can sponsor its gas here (Gas sponsorship); or send '
          : 'Send ',
      `a little ${sym} to the wallet first:`,
      h(
        'div',
        { class: 'fund-gas' },
        h('div', { class: 'row' }, h('code', { class: 'mono wrap' }, address), copyButton(address, 'Copy the wallet address')),
        qrSvg(uri, `QR code for ${uri}`),
      ),
    );
  }

  function showRefusal(e: unknown, draft: Draft): void {
    clear(result);
    result.hidden = false;
    result.dataset.status = 'refused';
    const code = e instanceof ApiError ? e.code : 'error';
    result.dataset.code = code;
    // What refused it, in words; the code and rule apart, for reference (and a search of the docs).
    const words =
      e instanceof ApiError
        ? errorRefusal(
            e as ApiError & { details?: Record<string, unknown> | null },
            { chain: draft.chain.name, asset: draft.asset, amount: draft.amount, delegation_id: draft.delegation?.id ?? null },
            draft.chain.native_symbol,
          )
        : errorText(e);
    const rule = e instanceof ApiError && typeof e.details?.rule === 'string' ? e.details.rule : null;
    result.append(
      h(
        'p',
        { class: 'form-error', role: 'alert' },
        h('strong', {}, `Not sent: ${draft.amount} ${draft.asset} to ${draft.to}. `),
        h('span', { 'data-testid': 'refusal-words' }, words),
      ),
      e instanceof ApiError ? h('p', { class: 'muted small mono', 'data-testid': 'refusal-code' }, [code, rule].filter(Boolean).join(' \u00b7 ')) : '',
      h('div', { class: 'row' }, h('button', { type: 'button', class: 'secondary', onclick: () => reset(false) }, 'Edit and try again')),
    );
    editing(false);
  }

  function showResult(transfer: Transfer, draft: Draft): void {
    clear(result);
    result.hidden = false;
    result.dataset.status = transfer.status;
    result.dataset.transferId = transfer.id;
    const statusEl = h('span', { class: `status status-${transfer.status}`, 'data-testid': 'send-status' }, transfer.status.replace('_', ' '));
    const line = h('p', { 'data-testid': 'send-line' });
    // Who pays the gas; for a sponsored send its user operation, bundle and gas cost as they become known.
    const gasSlot = h('div', { 'data-testid': 'send-gas-info' });
    const render = (t: Transfer) => {
      result.dataset.status = t.status;
      statusEl.className = `status status-${t.status}`;
      statusEl.textContent = t.status.replace('_', ' ');
      clear(gasSlot);
      const paid = t.status === 'awaiting_approval' ? null : gasInfo(t, chains);
      if (paid) gasSlot.append(paid);
      clear(line);
      if (t.status === 'awaiting_approval') {
        line.append(
          'Waits for the owner\u2019s approval',
          t.expires_at ? ` until ${new Date(t.expires_at).toLocaleString()}` : '',
          '. Nothing is signed yet. ',
          hooks.openApproval
            ? h(
                'a',
                {
                  href: `#/agents/${agent.id}/approvals`,
                  'data-testid': 'approval-link',
                  onclick: (event: Event) => {
                    event.preventDefault();
                    hooks.openApproval?.(t.id);
                  },
                },
                'Review it in Approvals',
              )
            : 'The owner approves or rejects it in the Approvals tab.',
        );
      } else if (t.tx_hash) {
        const hash = txHashLink(t.chain, t.tx_hash, t.explorer_url);
        line.append('Transaction ', hash, t.block_number ? ` in block ${t.block_number}` : '', '.');
      }
    };
    render(transfer);
    const capLine = h('p', { class: 'muted small', 'data-testid': 'send-cap' });
    result.append(
      h(
        'p',
        {},
        h('strong', {}, transfer.status === 'awaiting_approval' ? 'Submitted for approval: ' : 'Sent: '),
        `${transfer.amount} ${transfer.asset} to `,
        h('code', { class: 'mono' }, transfer.to),
        ` on ${transfer.chain} `,
        statusEl,
      ),
      line,
      gasSlot,
      capLine,
      h('div', { class: 'row' }, h('button', { type: 'button', class: 'secondary', onclick: () => reset(true) }, 'New transfer')),
    );
    // What the cap counts now, the reservation of this transfer included.
    void api
      .agent(agent.id, token)
      .then((d) => {
        const spent = d.spent?.[draft.chain.name] ?? '0';
        capLine.textContent = `The cap on ${draft.chain.name} now counts ${roundAmount(spent)} of ${roundAmount(String(d.spending_cap))} ${draft.chain.native_symbol}.`;
        capLine.title = `${spent} ${draft.chain.native_symbol}`;
      })
      .catch(() => {});
    // Follow it until it settles (the watcher confirms it), a few minutes at most.
    if (!FINAL.has(transfer.status)) void follow(transfer.id, render);
  }

  async function follow(transferId: string, render: (t: Transfer) => void): Promise<void> {
    for (let i = 0; i < 150; i++) {
      await new Promise((r) => setTimeout(r, 2000));
      if (!result.isConnected || result.dataset.transferId !== transferId) return;
      try {
        const t = await api.transfer(agent.id, token, transferId);
        render(t);
        if (FINAL.has(t.status)) {
          hooks.onChange();
          return;
        }
      } catch {
        // a failed read is tried again
      }
    }
  }

  function reset(clearFields: boolean): void {
    result.hidden = true;
    clear(result);
    delete result.dataset.transferId;
    if (clearFields) {
      to.value = '';
      amount.value = '';
    }
    editing(true);
    to.focus();
  }

  const heading = uid('send');
  return h(
    'section',
    { class: 'card send', 'aria-labelledby': heading, 'data-testid': 'send-card' },
    h('h2', { id: heading }, 'Send'),
    canSend
      ? h(
          'p',
          { class: 'muted' },
          'Moves funds from this agent\u2019s wallet under its spending cap and policy, as the agent itself would (its token). You review before anything is sent.',
        )
      : h('p', { class: 'warning' }, 'This agent lacks the transact capability, so it cannot send. Add it in Settings (owner authority on a guarded agent).'),
    form,
    review,
    result,
  );
}

/** A send's body as `POST …/transfers` (and its preview) takes it. */
function bodyOf(draft: Draft): NewTransferBody {
  return {
    chain: draft.chain.name,
    to: draft.to,
    amount: draft.amount,
    asset: draft.asset,
    ...(draft.delegation ? { delegation: draft.delegation.id } : {}),
    ...(draft.gas ? { gas: draft.gas } : {}),
  };
}

/** Wei per gas (a decimal string) in gwei, rounded for reading: "2000000000" -> "2". */
function gweiOf(wei: string): string {
  if (!/^\d+$/.test(wei)) return wei;
  const padded = wei.padStart(10, '0');
  const whole = padded.slice(0, -9).replace(/^0+(?=\d)/, '');
  const frac = padded.slice(-9).replace(/0+$/, '');
  return roundAmount(frac ? `${whole}.${frac}` : whole);
}

/** A policy's limits for one asset, in words: "up to 0.5 ETH a transfer · 0.2 ETH a day · approval above 0.05 ETH". */
export function limitsInWords(limits: Partial<Record<'per_transfer' | 'per_day' | 'per_week' | 'approval_above', string | null>>, symbol: string): string {
  const parts: string[] = [];
  if (limits.per_transfer) parts.push(`at most ${limits.per_transfer} ${symbol} a transfer`);
  if (limits.per_day) parts.push(`${limits.per_day} ${symbol} a day`);
  if (limits.per_week) parts.push(`${limits.per_week} ${symbol} a week`);
  if (limits.approval_above) parts.push(`the owner approves anything above ${limits.approval_above} ${symbol}`);
  return parts.join(' · ');
}

/**
 * The policy's limits for the transfer's asset, and what they mean for it, with the windows and the recipients paid
 * from `facts` (null: unknown). True when the service will hold the transfer for the owner's approval.
 */
function policyFacts(
  policy: Policy,
  draft: Draft,
  fact: (term: string, ...value: (Node | string)[]) => void,
  notes: HTMLElement[],
  facts: AgentFacts | null,
): boolean {
  const paid = facts ? paidBefore(facts, draft.to) : null;
  const key = `${draft.chain.name}:${draft.asset}`;
  const what = `${draft.amount} ${draft.asset}`;
  const entries = Object.entries(policy.limits ?? {});
  const limits = entries.find(([k]) => k.toLowerCase() === key.toLowerCase())?.[1];
  let held = false;
  if (entries.length && !limits) {
    fact('Policy', `${draft.asset} on ${draft.chain.name} is not among the assets the policy allows`);
    notes.push(h('li', { class: 'bad' }, `The policy does not allow ${draft.asset} on ${draft.chain.name}: the service will refuse it.`));
  } else if (!limits || !Object.keys(limits).length) {
    fact('Policy', `no limits on ${draft.asset} on ${draft.chain.name}`);
  } else {
    fact('Policy', h('span', { 'data-testid': 'review-policy', title: key }, limitsInWords(limits, draft.asset)));
    if (limits.per_transfer && compareDecimal(draft.amount, limits.per_transfer) === 1) {
      notes.push(h('li', { class: 'bad' }, `${what} is above the per-transfer limit of ${limits.per_transfer} ${draft.asset}: the service will refuse it.`));
    } else if (limits.approval_above && compareDecimal(draft.amount, limits.approval_above) === 1) {
      held = true;
      notes.push(
        h(
          'li',
          { class: 'waiting' },
          `${what} is more than the ${limits.approval_above} ${draft.asset} this agent may send without the owner: it will wait for the owner\u2019s approval, and nothing is signed until then.`,
        ),
      );
    }
    if (facts) {
      // What the daily and weekly windows have counted (sent, pending, waiting) and what this one leaves.
      for (const w of windows(facts, key)) {
        const over = compareDecimal(draft.amount, w.left) === 1;
        notes.push(
          h(
            'li',
            { class: over ? 'bad' : null, 'data-testid': `review-${w.rule === 'per_day' ? 'daily' : 'weekly'}` },
            windowSentence(w, draft.asset),
            over ? ` ${what} would go over it: the service will refuse it.` : '',
          ),
        );
      }
    } else if (limits.per_day || limits.per_week) {
      notes.push(h('li', {}, 'The daily and weekly limits count what was sent in the last 24 hours and 7 days: the History tab shows it.'));
    }
  }
  const lower = draft.to.toLowerCase();
  if (policy.blocked_recipients?.some((a) => a.toLowerCase() === lower)) {
    notes.push(h('li', { class: 'bad' }, 'The policy blocks this recipient: the service will refuse it.'));
  } else if (policy.allowed_recipients && !policy.allowed_recipients.some((a) => a.toLowerCase() === lower)) {
    notes.push(h('li', { class: 'bad' }, 'This recipient is not on the policy\u2019s list of allowed recipients: the service will refuse it.'));
  } else if (policy.approve_new_recipients) {
    if (paid === false) {
      held = true;
      notes.push(h('li', { class: 'waiting' }, 'This agent never paid this recipient, and the policy asks the owner to approve new recipients: it will wait for the owner\u2019s approval.'));
    } else if (paid === null) {
      notes.push(h('li', {}, 'The policy asks the owner to approve recipients never paid before.'));
    }
  }
  return held;
}
