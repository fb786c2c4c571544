// The Wallet tab's call composer (docs/api.md §18): a contract (a registry token of the chain, one the deployment
// names in `CONTRACTS_<CHAIN>`, one the agent called before, one the policy names, or a pasted address), a function
// (ERC-20, WETH and Uniswap V2 router functions the console knows, those of an ABI the policy names for that
// contract, or a typed signature), one field per argument
// and an optional value; **Simulate** (`POST …/calls/simulate`, the agent token or owner authority) shows the call
// as decoded, what it would do to the wallet ("You send / You receive / You allow") and the policy's verdict in
// words; **Review and send** then confirms and sends it (`POST …/calls`, the agent's token only, with an
// `Idempotency-Key` made for that review) and follows it to its confirmation. Refusals are the service's own words,
// with a link to the calls rule that made them in Policy. An amount may be typed in its token's units ("2.5 USDC",
// "0.1 ETH"), an address argument picked among the known ones by name, and a swap's minimum output of 0 is warned.
// **Add to a batch** keeps the call composed and starts the next (§22): an `approve` and the swap that uses it are
// simulated, judged and sent together as `calls`, one all-or-nothing operation of the agent's account, whose gas the
// operator's sponsorship pays where the agent has one (the choice defaults as the service does).
import {
  api,
  ApiError,
  type AgentDetail,
  type BatchBody,
  type ChainInfo,
  type GasPayer,
  type SimulatedBatch,
  type SimulatedCall,
  type Sponsorship,
  type Transfer,
} from './api';
import { abiFunctions, argNames, callDetails, functionName, paramTypes, type Abis } from './calls';
import {
  defaultFor,
  isMinimumOut,
  isTime,
  KNOWN_FUNCTIONS,
  knownAddress,
  looksLikeSignature,
  readArgs,
  tidySignature,
  typeHint,
  unitAmount,
  wholeUnits,
  type ArgContext,
} from './call-args';
import { addDecimal } from './amount';
import { clear, field, h, shortHex, uid } from './dom';
import { FINAL, newKey, type SendHooks } from './send';
import { defaultGas, gasInfo, isActive, leftWords, sponsorshipOn } from './sponsorship';
import { agentTokenPrompt, errorLine, errorText, txHashLink } from './ui';

const TYPED = '__typed';

/** The service's words as a sentence: a capital first, a full stop last. */
const sentence = (text: string) => `${text.charAt(0).toUpperCase()}${text.slice(1)}${/[.!?]$/.test(text) ? '' : '.'}`;
/** Functions of a token whose integer argument is an amount of that token. */
const AMOUNT_OF_TOKEN = new Set(['approve(address,uint256)', 'transfer(address,uint256)', 'withdraw(uint256)']);
const OTHER = '';
/** A batch holds 2 to 16 calls (§22). */
const MAX_BATCH = 16;

interface Composed {
  chain: ChainInfo;
  to: string;
  signature: string;
  args: unknown[];
  value: string;
}

/** Contracts worth offering: registry tokens, those the deployment names, contracts called before, contracts the policy names. */
interface Known {
  address: string;
  label: string;
  group: string;
}

export interface CallComposer {
  el: HTMLElement;
  /** Reads what the composer offers (the policy's contracts and ABIs, the contracts called before): once, when shown. */
  load(): void;
}

export interface ComposerHooks extends SendHooks {
  /** Opens the Policy tab at a rule the service named (`calls.rules[0]`, `calls.default`). */
  openPolicyRule?(rule: string): void;
}

export function callComposer(agent: AgentDetail, token: string | null, chains: ChainInfo[], hooks: ComposerHooks): CallComposer {
  const known = chains.filter((c) => agent.chains.includes(c.name));
  let abis: Abis | null = null;
  let policyContracts: Known[] = [];
  let calledBefore: Known[] = [];

  const chain = h('select', { 'data-testid': 'call-chain' }, known.map((c) => h('option', { value: c.name }, c.name)));
  const pick = h('select', { 'data-testid': 'call-contract-pick' });
  const to = h('input', { type: 'text', class: 'mono', placeholder: '0x…', autocomplete: 'off', spellcheck: 'false', 'data-testid': 'call-to' });
  const fnPick = h('select', { 'data-testid': 'call-function-pick' });
  const signature = h('input', {
    type: 'text',
    class: 'mono',
    placeholder: 'mint(address,uint256)',
    autocomplete: 'off',
    spellcheck: 'false',
    'data-testid': 'call-signature',
  });
  const signatureField = field('Function signature', signature, 'name(type,…) with the types only, as Solidity spells them.');
  const fnNote = h('p', { class: 'muted small', 'data-testid': 'call-function-note' });
  const argsBox = h('div', { class: 'call-arg-fields', 'data-testid': 'call-arg-fields' });
  const value = h('input', { type: 'text', inputmode: 'decimal', placeholder: '0', autocomplete: 'off', 'data-testid': 'call-value' });
  const valueField = field('Value sent with the call (optional)', value);
  const formError = errorLine();
  const simulateButton = h('button', { type: 'submit' }, 'Simulate');
  const outcome = h('div', { class: 'call-outcome', 'data-testid': 'call-simulation', hidden: true, 'aria-live': 'polite' });
  const review = h('div', { class: 'send-review', 'data-testid': 'call-review', hidden: true });
  const result = h('div', { class: 'send-result', 'data-testid': 'call-result', hidden: true, role: 'status' });
  let argInputs: HTMLInputElement[] = [];
  let names: (string | null)[] = [];
  /** What was simulated (the calls, in order: one, or a batch) and the service's answer; any edit drops it. */
  let simulated: { calls: Composed[]; answer: SimulatedCall | SimulatedBatch; gas: GasPayer | null } | null = null;
  /** The calls added to a batch so far; the form composes the next one (the batch's last when simulated). */
  let batch: Composed[] = [];
  const batchBox = h('div', { class: 'call-batch', 'data-testid': 'call-batch', hidden: true });
  const addButton = h('button', { type: 'button', class: 'secondary', 'data-testid': 'call-add' }, 'Add to a batch');
  // Who pays the gas of a call or a batch (§22): the operator's sponsorship where the agent has one on the chain (the
  // default, as the service decides), or the wallet.
  let sponsorships: Sponsorship[] | null = null;
  const gas = h('select', { 'data-testid': 'call-gas' });
  const gasField = field('Gas paid by', gas);
  gasField.hidden = true;

  const info = () => known.find((c) => c.name === chain.value) ?? null;
  const ctx = (): ArgContext => ({
    agent: agent.wallet_addresses[chain.value] ?? '',
    tokens: (info()?.tokens ?? []).map((t) => ({ symbol: t.symbol, address: t.address, decimals: t.decimals })),
    native: { symbol: info()?.native_symbol ?? 'ETH', decimals: info()?.decimals ?? 18 },
    contracts: (info()?.contracts ?? []).map((k) => ({ name: k.name, address: k.address })),
  });

  /** The addresses an argument may be given by name: this agent, the chain's tokens and known contracts. */
  function knownArguments(): { label: string; value: string; address: string; group: string }[] {
    const c = info();
    const here = agent.wallet_addresses[chain.value] ?? '';
    const list = [
      { label: 'This agent', value: '$agent', address: here, group: 'This agent' },
      ...(c?.tokens ?? []).map((t) => ({ label: `${t.symbol} token`, value: t.symbol, address: t.address, group: `Tokens on ${c?.name}` })),
      ...(c?.contracts ?? []).map((k) => ({ label: k.name, value: k.name, address: k.address, group: `Contracts of this deployment on ${c?.name}` })),
      ...[...calledBefore, ...policyContracts].map((k) => ({ label: `${k.label} · ${shortHex(k.address, 6, 4)}`, value: k.address, address: k.address, group: k.group })),
    ];
    const seen = new Set<string>();
    return list.filter((k) => {
      const key = k.address.toLowerCase();
      if (!key || seen.has(key)) return false;
      seen.add(key);
      return true;
    });
  }

  /** What the names typed in an address field stand for, and what a pasted address is known as. */
  function resolvedWords(text: string): string {
    const parts = text.split(',').map((t) => t.trim()).filter(Boolean);
    const known = knownArguments();
    const said = parts.map((part) => {
      if (/^0x[0-9a-fA-F]{40}$/.test(part)) {
        const k = known.find((x) => x.address.toLowerCase() === part.toLowerCase());
        return k ? `${shortHex(part, 6, 4)} is ${k.label}` : null;
      }
      const address = knownAddress(part, ctx());
      return address ? `${part} = ${shortHex(address, 6, 4)}` : null;
    });
    return said.some(Boolean) ? said.filter(Boolean).join(' \u00b7 ') : '';
  }

  function fillContracts(): void {
    const c = info();
    const chosen = pick.value;
    clear(pick);
    pick.append(h('option', { value: OTHER }, 'Another contract (paste its address)'));
    const groups: Known[] = [
      ...(c?.tokens ?? []).map((t) => ({ address: t.address, label: `${t.symbol} token`, group: `Tokens on ${c?.name}` })),
      // Those the deployment names (`CONTRACTS_<CHAIN>`; the demo's router): offered before the agent ever calls them.
      ...(c?.contracts ?? []).map((k) => ({ address: k.address, label: k.name, group: `Contracts of this deployment on ${c?.name}` })),
      ...calledBefore,
      ...policyContracts,
    ];
    const seen = new Set<string>();
    const byGroup = new Map<string, HTMLOptGroupElement>();
    for (const k of groups) {
      const key = k.address.toLowerCase();
      if (seen.has(key)) continue;
      seen.add(key);
      let group = byGroup.get(k.group);
      if (!group) {
        group = h('optgroup', { label: k.group });
        byGroup.set(k.group, group);
        pick.append(group);
      }
      group.append(h('option', { value: k.address }, `${k.label} · ${shortHex(k.address, 6, 4)}`));
    }
    if ([...pick.options].some((o) => o.value === chosen)) pick.value = chosen;
  }

  /** The functions offered for the contract: its policy ABI's first, then those the console knows, then typing one. */
  function fillFunctions(): void {
    const chosen = fnPick.value;
    clear(fnPick);
    const fromAbi = /^0x[0-9a-fA-F]{40}$/.test(to.value.trim()) ? abiFunctions(chain.value, to.value.trim(), abis) : [];
    if (fromAbi.length) {
      fnPick.append(h('optgroup', { label: 'From the policy\u2019s ABI of this contract' }, fromAbi.map((f) => h('option', { value: f.signature }, f.signature))));
    }
    const groups = [...new Set(KNOWN_FUNCTIONS.map((f) => f.group))];
    for (const g of groups) {
      fnPick.append(
        h('optgroup', { label: g }, KNOWN_FUNCTIONS.filter((f) => f.group === g).map((f) => h('option', { value: f.signature }, f.signature))),
      );
    }
    fnPick.append(h('option', { value: TYPED }, 'Another function (type its signature)'));
    if ([...fnPick.options].some((o) => o.value === chosen)) fnPick.value = chosen;
  }

  const currentSignature = () => (fnPick.value === TYPED ? tidySignature(signature.value) : fnPick.value);

  /** One field per parameter of the chosen function, kept where the same parameter stays. */
  function renderArgs(): void {
    const sig = currentSignature();
    signatureField.hidden = fnPick.value !== TYPED;
    const knownFn = KNOWN_FUNCTIONS.find((f) => f.signature === sig);
    const fromAbi = abiFunctions(chain.value, to.value.trim(), abis).find((f) => f.signature === sig);
    fnNote.textContent = knownFn?.note ?? '';
    const payable = knownFn?.payable ?? fromAbi?.payable ?? true;
    valueField.querySelector('small')?.remove();
    const symbol = info()?.native_symbol ?? 'ETH';
    const hint = h(
      'small',
      { class: 'hint' },
      payable ? `In whole ${symbol} (e.g. 0.01), sent to the contract with the call.` : `This function does not take ${symbol}; leave it empty.`,
    );
    valueField.append(hint);
    valueField.querySelector('label')!.textContent = `Value in ${symbol} (optional)`;
    const old = new Map(argInputs.map((input, i) => [`${i}:${input.dataset.type}`, input.value]));
    clear(argsBox);
    argInputs = [];
    const types = looksLikeSignature(sig) ? paramTypes(sig) : [];
    names = types.length ? argNames(chain.value, { to: to.value.trim(), selector: null, function: sig, args: null }, abis) : [];
    if (fromAbi) names = fromAbi.names;
    if (!types.length) {
      argsBox.append(h('p', { class: 'muted small' }, sig && !looksLikeSignature(sig) ? 'Type a signature such as mint(address,uint256).' : 'This function takes no arguments.'));
      return;
    }
    argsBox.append(h('h3', { class: 'small-heading' }, 'Arguments'));
    types.forEach((type, i) => {
      const name = names[i] ?? null;
      const input = h('input', {
        type: 'text',
        class: 'mono',
        autocomplete: 'off',
        spellcheck: 'false',
        'data-type': type,
        'data-arg': name ?? String(i),
        value: old.get(`${i}:${type}`) ?? defaultFor(name, type),
      });
      argInputs.push(input);
      const label = `${name ?? `Argument ${i}`} (${type})`;
      const f = field(label, input, typeHint(type, name));
      if (/^uint\d*$/.test(type) && !isTime(name, type)) {
        // An amount: typed with its unit, it reads back in base units; in base units of the registry token called,
        // it reads back in whole units.
        const tokenCalled = info()?.tokens.find((t) => t.address.toLowerCase() === to.value.trim().toLowerCase());
        const units = h('small', { class: 'hint', 'data-testid': 'call-arg-units', 'aria-live': 'polite' });
        const warning = h(
          'p',
          { class: 'warning small', 'data-testid': 'call-arg-warning', role: 'note' },
          'A minimum output of 0 accepts any price: the swap may return almost nothing (a thin pool, or a bot trading around it, takes the rest). Set the least you would accept.',
        );
        const show = () => {
          let base: string | null = null;
          try {
            const typed = unitAmount(input.value, ctx());
            if (typed) {
              base = typed.base;
              units.textContent = `= ${typed.base} base units of ${typed.symbol}`;
            } else {
              base = /^\d+$/.test(input.value.trim()) ? input.value.trim() : null;
              const whole = tokenCalled && AMOUNT_OF_TOKEN.has(sig) && base !== null ? wholeUnits(base, tokenCalled.decimals) : null;
              units.textContent = whole === null ? '' : `= ${whole} ${tokenCalled?.symbol}`;
            }
          } catch (e) {
            units.textContent = `Not an amount: it ${(e as Error).message}.`;
          }
          if (isMinimumOut(name, type) && base !== null && BigInt(base) === 0n) f.append(warning);
          else warning.remove();
        };
        input.addEventListener('input', show);
        f.append(units);
        show();
      }
      if (type === 'address' || /^address\[\d*\]$/.test(type)) {
        // Known addresses by name: this agent, the chain's tokens, the deployment's contracts (its router, its pool).
        const resolved = h('small', { class: 'hint mono-names', 'data-testid': 'call-arg-resolved', 'aria-live': 'polite' });
        const list = type !== 'address';
        const pickKnown = h('select', { 'data-testid': 'call-arg-known', 'aria-label': `A known address for ${name ?? `argument ${i}`}` });
        pickKnown.append(h('option', { value: '' }, list ? 'Add a known address…' : 'Pick a known address…'));
        const groups = new Map<string, HTMLOptGroupElement>();
        for (const k of knownArguments()) {
          let g = groups.get(k.group);
          if (!g) {
            g = h('optgroup', { label: k.group });
            groups.set(k.group, g);
            pickKnown.append(g);
          }
          g.append(h('option', { value: k.value }, k.label));
        }
        const showResolved = () => {
          resolved.textContent = resolvedWords(input.value);
        };
        pickKnown.addEventListener('change', () => {
          if (!pickKnown.value) return;
          const now = input.value.trim();
          input.value = list && now ? `${now.replace(/,\s*$/, '')}, ${pickKnown.value}` : pickKnown.value;
          pickKnown.value = '';
          showResolved();
          stale();
        });
        input.addEventListener('input', showResolved);
        f.append(h('div', { class: 'row tight' }, pickKnown), resolved);
        showResolved();
      }
      argsBox.append(f);
    });
  }

  /** Any edit makes the last simulation stale: sending always follows a simulation of what the form says. */
  function stale(): void {
    simulated = null;
    outcome.hidden = true;
    review.hidden = true;
    clear(review);
  }

  /** Who pays the gas: offered on a chain where the operator sponsors the agent. */
  function fillGas(): void {
    const c = info();
    const s = sponsorshipOn(sponsorships, chain.value);
    const offered = !!c && isActive(s);
    gasField.hidden = !offered;
    if (!offered || !c) return;
    const chosen = gas.options.length ? (gas.value as GasPayer) : defaultGas(sponsorships, chain.value);
    clear(gas);
    gas.append(
      h('option', { value: 'sponsored' }, `The operator\u2019s sponsorship (${leftWords(s, c.native_symbol).textContent})`),
      h('option', { value: 'wallet' }, `This agent\u2019s wallet, in ${c.native_symbol}`),
    );
    gas.value = chosen;
  }

  /** A call of the batch in one line: "approve on USDC token: spender = 0x1234…, amount = 10000000". */
  function batchLine(d: Composed, i: number): HTMLElement {
    const label = knownArguments().find((k) => k.address.toLowerCase() === d.to.toLowerCase())?.label ?? shortHex(d.to, 6, 4);
    const callNames = argNames(d.chain.name, { to: d.to, selector: null, function: d.signature, args: null }, abis);
    const args = d.args.map((a, j) => `${callNames[j] ?? `#${j}`} = ${Array.isArray(a) ? a.join(', ') : String(a)}`).join(' \u00b7 ');
    return h(
      'li',
      { 'data-testid': 'call-batch-item', 'data-function': d.signature, 'data-to': d.to },
      h('strong', { class: 'mono', title: d.signature }, functionName(d.signature)),
      ' on ',
      h('span', { title: d.to }, label),
      args ? h('div', { class: 'small muted mono wrap' }, args) : null,
      d.value !== '0' ? h('div', { class: 'small' }, `with ${d.value} ${d.chain.native_symbol}`) : null,
      h(
        'button',
        {
          type: 'button',
          class: 'link small',
          'aria-label': `Remove call ${i + 1} from the batch`,
          onclick: () => {
            batch.splice(i, 1);
            renderBatch();
            stale();
          },
        },
        'Remove',
      ),
    );
  }

  /** The batch so far, and what the form's call is in it; the chain stays fixed while the batch holds calls. */
  function renderBatch(): void {
    clear(batchBox);
    batchBox.hidden = batch.length === 0;
    chain.disabled = batch.length > 0;
    simulateButton.textContent = batch.length ? `Simulate the batch (${batch.length + 1} calls)` : 'Simulate';
    addButton.disabled = batch.length >= MAX_BATCH - 1;
    fillGas();
    if (!batch.length) return;
    batchBox.append(
      h('h3', { class: 'small-heading' }, `Batch on ${batch[0].chain.name}`),
      h('ol', {}, batch.map(batchLine)),
      h(
        'p',
        { class: 'muted small' },
        `Call ${batch.length + 1} is the one in the form below. The calls run in order as one operation of the agent\u2019s account, all of them or none: an approval and the swap that spends it land together. `,
        h(
          'button',
          {
            type: 'button',
            class: 'link small',
            'data-testid': 'call-batch-clear',
            onclick: () => {
              batch = [];
              renderBatch();
              stale();
            },
          },
          'Clear the batch',
        ),
      ),
    );
  }

  /**
   * Keeps the form's call in the batch and starts the next: after an `approve`, the next call is on the spender it
   * allowed (a known contract, such as the deployment's router, is picked by name), as an approve-and-swap goes.
   */
  function addToBatch(): void {
    formError.clear();
    let composed: Composed;
    try {
      composed = compose();
    } catch (e) {
      formError.show(e);
      return;
    }
    batch.push(composed);
    stale();
    const spender = composed.signature === 'approve(address,uint256)' ? String(composed.args[0] ?? '') : '';
    if (/^0x[0-9a-fA-F]{40}$/.test(spender)) {
      to.value = spender;
      fillContracts();
      pick.value = [...pick.options].find((o) => o.value.toLowerCase() === spender.toLowerCase())?.value ?? OTHER;
      fillFunctions();
      const named = info()?.contracts?.find((k) => k.address.toLowerCase() === spender.toLowerCase());
      if (named && /router/i.test(named.name)) fnPick.value = 'swapExactTokensForTokens(uint256,uint256,address[],address,uint256)';
    }
    argInputs = [];
    renderArgs();
    renderBatch();
    fnPick.focus();
  }
  addButton.addEventListener('click', addToBatch);
  gas.addEventListener('change', stale);

  chain.addEventListener('change', () => {
    fillContracts();
    fillFunctions();
    renderArgs();
    fillGas();
    stale();
  });
  pick.addEventListener('change', () => {
    if (pick.value) to.value = pick.value;
    fillFunctions();
    suggestFunction();
    renderArgs();
    stale();
    if (!pick.value) to.focus();
  });
  to.addEventListener('input', () => {
    fillFunctions();
    renderArgs();
    stale();
  });
  fnPick.addEventListener('change', () => {
    renderArgs();
    stale();
    if (fnPick.value === TYPED) signature.focus();
  });
  signature.addEventListener('input', () => {
    renderArgs();
    stale();
  });
  value.addEventListener('input', stale);
  argsBox.addEventListener('input', stale);

  /** A registry WETH suggests deposit, another registry token approve. */
  function suggestFunction(): void {
    const t = info()?.tokens.find((k) => k.address.toLowerCase() === to.value.trim().toLowerCase());
    if (!t) return;
    fnPick.value = t.symbol === 'WETH' ? 'deposit()' : 'approve(address,uint256)';
  }

  // What the composer learns when it is first shown: the policy's ABIs and contracts, the contracts this agent called.
  const learn = () => {
    void api
      .sponsorships(agent.id, token)
      .then((list) => {
        sponsorships = list;
        fillGas();
      })
      .catch(() => {});
    void api
      .policy(agent.id, token)
      .then((p) => {
        const calls = (p as { calls?: { abis?: Abis; rules?: { to?: unknown; function?: unknown }[] } | null }).calls;
        abis = calls?.abis ?? null;
        const fromRules = (calls?.rules ?? [])
          .filter((r) => typeof r.to === 'string' && /^0x[0-9a-fA-F]{40}$/.test(r.to))
          .map((r) => ({ address: String(r.to), label: typeof r.function === 'string' && r.function !== '*' ? `rule on ${functionName(r.function)}` : 'a rule', group: 'Named in the policy' }));
        const fromAbis = Object.keys(abis ?? {})
          .filter((k) => k.toLowerCase().startsWith(`${chain.value.toLowerCase()}:`))
          .map((k) => ({ address: k.slice(k.indexOf(':') + 1), label: 'ABI in the policy', group: 'Named in the policy' }));
        policyContracts = [...fromRules, ...fromAbis];
        fillContracts();
        fillFunctions();
        renderArgs();
      })
      .catch(() => {});
    void api
      .transactions(agent.id, token, 100, null)
      .then((entries) => {
        calledBefore = entries
          .filter((e) => e.kind === 'call')
          .map((e) => ({ address: e.to, label: `called before (${e.chain})`, group: 'Called by this agent' }));
        fillContracts();
      })
      .catch(() => {});
  };

  function compose(): Composed {
    const c = info();
    if (!c) throw new Error('Choose a chain.');
    const address = to.value.trim();
    if (!/^0x[0-9a-fA-F]{40}$/.test(address)) throw new Error('The contract must be a 0x address of 40 hex digits: pick one or paste it.');
    const sig = currentSignature();
    if (!looksLikeSignature(sig)) throw new Error('The function must be a signature such as mint(address,uint256), types only.');
    const v = value.value.trim();
    if (v && !/^\d+(\.\d+)?$/.test(v)) throw new Error(`The value must be a decimal number of ${c.native_symbol}, such as 0.01.`);
    const args = readArgs(sig, argInputs.map((i) => i.value), names, ctx());
    return { chain: c, to: address, signature: sig, args, value: v || '0' };
  }

  /** One call, with who pays its gas when the form offers the choice. */
  const body = (d: Composed, payer: GasPayer | null) => ({
    chain: d.chain.name,
    to: d.to,
    function: d.signature,
    args: d.args,
    ...(d.value !== '0' ? { value: d.value } : {}),
    ...(payer ? { gas: payer } : {}),
  });
  /** `calls` of a batch (§22), with who pays its gas when the form offers the choice. */
  const batchBody = (calls: Composed[], payer: GasPayer | null): BatchBody => ({
    chain: calls[0].chain.name,
    calls: calls.map((d) => ({ to: d.to, function: d.signature, args: d.args, ...(d.value !== '0' ? { value: d.value } : {}) })),
    ...(payer ? { gas: payer } : {}),
  });
  const chosenGas = (): GasPayer | null => (gasField.hidden ? null : (gas.value as GasPayer));

  const form = h(
    'form',
    { class: 'call-form', 'aria-label': 'Compose a contract call' },
    batchBox,
    h('div', { class: 'inline-form' }, field('Chain', chain), field('Known contract', pick)),
    field('Contract address', to, 'Pick a known contract above, or paste the address of another.'),
    field('Function', fnPick),
    signatureField,
    fnNote,
    argsBox,
    valueField,
    gasField,
    formError.el,
    h('div', { class: 'row' }, simulateButton, addButton),
  );

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    formError.clear();
    result.hidden = true;
    stale();
    let calls: Composed[];
    try {
      calls = [...batch, compose()];
    } catch (e) {
      formError.show(e);
      return;
    }
    const payer = chosenGas();
    simulateButton.disabled = true;
    clear(outcome);
    outcome.hidden = false;
    outcome.append(h('p', { class: 'muted' }, calls.length > 1 ? 'Simulating the batch as the agent\u2019s account runs it…' : 'Simulating from the agent\u2019s wallet…'));
    try {
      const answer =
        calls.length > 1
          ? await api.simulateBatch(agent.id, token, batchBody(calls, payer))
          : await api.simulateCall(agent.id, token, body(calls[0], payer));
      simulated = { calls, answer, gas: payer };
      showOutcome(calls, answer);
    } catch (e) {
      clear(outcome);
      const reverted = e instanceof ApiError && (e.code === 'call_reverted' || e.code === 'simulation_reverted');
      // A batch names the first call that reverted or was refused (`details.index`, from 0).
      const index = e instanceof ApiError ? (e.details as { index?: unknown } | null)?.index : undefined;
      const which = calls.length > 1 && typeof index === 'number' ? `Call ${index + 1} of the batch: ` : '';
      outcome.append(
        h(
          'p',
          { class: 'form-error', role: 'alert', 'data-testid': 'call-verdict', 'data-result': reverted ? 'reverted' : 'error' },
          h('strong', {}, reverted ? 'It would revert: ' : 'Not simulated: '),
          which,
          errorText(e),
        ),
      );
    } finally {
      simulateButton.disabled = false;
    }
  });

  function verdictLine(answer: SimulatedCall | SimulatedBatch): HTMLElement {
    const d = answer.decision;
    const words =
      d.result === 'allow'
        ? [h('strong', {}, 'Allowed: '), 'the policy lets the agent make this call (its limits and the cap included); sending signs and sends it.']
        : d.result === 'approve'
          ? [h('strong', {}, 'Would be held for approval: '), 'sending submits it, and nothing is signed until the owner approves it.']
          : [h('strong', {}, 'Refused: '), h('span', { 'data-testid': 'call-verdict-words' }, sentence(answer.message ?? 'the policy refuses it')), ruleLink(answer)];
    return h('p', { class: d.result === 'deny' ? 'form-error' : 'verdict', 'data-testid': 'call-verdict', 'data-result': d.result }, ...words);
  }

  /** The rule of the policy's calls that refused a call (`rule N (…)` in the service's words), linked in Policy. */
  function ruleLink(answer: SimulatedCall | SimulatedBatch): HTMLElement | string {
    const n = /\brule (\d+) \(/.exec(answer.message ?? '')?.[1];
    const byDefault = !n && /no rule .*default|default/i.test(answer.message ?? '') && answer.decision.rule === 'call_denied';
    if (!n && !byDefault) return '';
    const rule = n ? `calls.rules[${Number(n) - 1}]` : 'calls.default';
    return h(
      'span',
      {},
      ' ',
      h(
        'a',
        {
          href: `#/agents/${agent.id}/policy`,
          'data-testid': 'call-rule-link',
          onclick: (event: Event) => {
            if (!hooks.openPolicyRule) return;
            event.preventDefault();
            hooks.openPolicyRule(rule);
          },
        },
        n ? `See rule ${n} in Policy` : 'See the calls default in Policy',
      ),
    );
  }

  function showOutcome(calls: Composed[], answer: SimulatedCall | SimulatedBatch): void {
    clear(outcome);
    const fields = {
      kind: 'call',
      chain: calls[0].chain.name,
      call: answer.call,
      calls: 'calls' in answer ? answer.calls : null,
      simulation: answer.simulation,
    };
    outcome.append(h('h3', {}, 'What it would do'), callDetails(fields, chains, abis), verdictLine(answer));
    if (answer.decision.result === 'deny') return;
    const next = h('button', { type: 'button', onclick: () => showReview() }, 'Review and send');
    outcome.append(h('div', { class: 'row' }, next));
  }

  function showReview(): void {
    if (!simulated) return;
    const { calls, answer, gas: payer } = simulated;
    const first = calls[0];
    const c = first.chain;
    clear(review);
    review.hidden = false;
    const from = agent.wallet_addresses[c.name] ?? '';
    if (!token) {
      review.append(
        agentTokenPrompt(agent.id, {
          title: 'Sending a call needs the agent\u2019s own token',
          why: 'A call acts as the agent, under its spending cap and policy: the service takes only the agent\u2019s access token for it (the simulation above works with owner authority). Give the token to send from here.',
          testid: 'call-needs-agent-token',
        }),
      );
      return;
    }
    const key = newKey();
    const held = answer.decision.result === 'approve';
    const isBatch = calls.length > 1;
    const confirm = h(
      'button',
      { type: 'button', 'data-testid': 'call-confirm' },
      held ? 'Submit for approval' : isBatch ? `Send the batch of ${calls.length} calls` : 'Send the call',
    );
    const back = h('button', { type: 'button', class: 'secondary', onclick: () => { review.hidden = true; } }, 'Back');
    const sendError = errorLine();
    const what = (d: Composed) => [h('strong', { class: 'mono', title: d.signature }, functionName(d.signature)), ' on ', h('code', { class: 'mono' }, d.to)];
    const value = calls.reduce((sum, d) => addDecimal(sum, d.value) ?? sum, '0');
    const s = sponsorshipOn(sponsorships, c.name);
    review.append(
      h('h3', {}, 'Review'),
      h(
        'dl',
        { class: 'facts-list' },
        h('dt', {}, isBatch ? 'Calls' : 'Call'),
        h('dd', {}, isBatch ? h('ol', { class: 'batch-calls' }, calls.map((d) => h('li', {}, ...what(d)))) : what(first)),
        h('dt', {}, 'From'),
        h('dd', {}, h('code', { class: 'mono' }, from), ` on ${c.name}`, isBatch ? ' (its account runs them as one operation, all or nothing)' : ''),
        h('dt', {}, 'Value'),
        h('dd', {}, `${value} ${c.native_symbol}`),
        h('dt', {}, 'Gas'),
        h(
          'dd',
          { 'data-testid': 'call-review-gas', 'data-gas': payer === 'sponsored' ? 'sponsored' : 'wallet' },
          payer === 'sponsored'
            ? ['paid by the operator\u2019s sponsorship', ...(s ? [' (', leftWords(s, c.native_symbol), ')'] : []), ': not the agent\u2019s money']
            : `paid by the agent\u2019s wallet in ${c.native_symbol}, counted against the cap`,
        ),
      ),
      h('p', { class: 'muted small' }, `The service simulates ${isBatch ? 'the batch' : 'it'} again as it will be signed and judges it by the policy at that moment. A call on chain cannot be undone.`),
      h('div', { class: 'row' }, confirm, back),
      sendError.el,
    );
    confirm.addEventListener('click', async () => {
      confirm.disabled = true;
      sendError.clear();
      try {
        const sent = await api.sendCall(agent.id, token, isBatch ? batchBody(calls, payer) : body(first, payer), key);
        review.hidden = true;
        if (isBatch) {
          // Sent: the batch is done; the form starts again from an empty one.
          batch = [];
          renderBatch();
        }
        showResult(sent.body);
        hooks.onChange();
      } catch (e) {
        review.hidden = true;
        showRefusal(e);
      } finally {
        confirm.disabled = false;
      }
    });
    confirm.focus();
  }

  function showRefusal(e: unknown): void {
    clear(result);
    result.hidden = false;
    result.dataset.status = 'refused';
    result.dataset.code = e instanceof ApiError ? e.code : 'error';
    result.append(h('p', { class: 'form-error', role: 'alert' }, h('strong', {}, 'Not sent: '), errorText(e)));
  }

  function showResult(t: Transfer): void {
    clear(result);
    result.hidden = false;
    result.dataset.transferId = t.id;
    const line = h('p', { 'data-testid': 'call-line' });
    const statusEl = h('span', { 'data-testid': 'call-status' });
    const gasSlot = h('div', { 'data-testid': 'call-gas-info' });
    const render = (x: Transfer) => {
      result.dataset.status = x.status;
      statusEl.className = `status status-${x.status}`;
      statusEl.textContent = x.status.replace('_', ' ');
      clear(gasSlot);
      const paid = x.status === 'awaiting_approval' ? null : gasInfo(x, chains);
      if (paid) gasSlot.append(paid);
      clear(line);
      if (x.status === 'awaiting_approval') {
        line.append('Waits for the owner\u2019s approval; nothing is signed yet. ');
        if (hooks.openApproval) {
          line.append(h('a', { href: `#/agents/${agent.id}/approvals`, onclick: (ev: Event) => { ev.preventDefault(); hooks.openApproval?.(x.id); } }, 'Review it in Approvals'));
        }
      } else if (x.tx_hash) {
        line.append('Transaction ', txHashLink(x.chain, x.tx_hash, x.explorer_url), x.block_number ? ` in block ${x.block_number}` : '', '.');
      }
    };
    render(t);
    const batched = (t as Transfer & { calls?: unknown[] | null }).calls?.length;
    result.append(
      h('p', {}, h('strong', {}, t.status === 'awaiting_approval' ? 'Submitted for approval: ' : 'Sent: '), batched ? `the batch of ${batched} calls on ${t.chain} ` : `the call on ${t.chain} `, statusEl),
      line,
      gasSlot,
    );
    if (!FINAL.has(t.status)) void follow(t.id, render);
  }

  async function follow(id: string, render: (t: Transfer) => void): Promise<void> {
    for (let i = 0; i < 150; i++) {
      await new Promise((r) => setTimeout(r, 1500));
      if (!result.isConnected || result.dataset.transferId !== id) return;
      try {
        const t = await api.transfer(agent.id, token, id);
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

  fillContracts();
  fillFunctions();
  renderArgs();

  const heading = uid('compose-call');
  const el = h(
    'section',
    { class: 'card compose-call', 'aria-labelledby': heading, 'data-testid': 'call-composer' },
    h('h2', { id: heading }, 'Call a contract'),
    h(
      'p',
      { class: 'muted' },
      'Pick a contract and a function and fill in its arguments, then simulate: you see what the call would do to this wallet and what the policy says, before anything is signed. To run several calls as one (an approve and the swap that spends it), add each to a batch.',
      token ? '' : ' Simulating works as the owner; sending needs the agent\u2019s own token.',
    ),
    form,
    outcome,
    review,
    result,
  );
  let learnt = false;
  return {
    el,
    load() {
      if (learnt) return;
      learnt = true;
      learn();
    },
  };
}
