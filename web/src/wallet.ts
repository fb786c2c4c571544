// The wallet tab: addresses with copy buttons, EIP-681 QR codes (native coin or a registry token such as USDC),
// balances per chain with their tokens (with per-chain and per-token errors), who pays the gas there (the operator's
// sponsorship with what it has left today, or the wallet) and what the address holds as code (§22), with the
// operator's form to sponsor it where the chain is sponsorable.
import { api, type AgentDetail, type BalanceEntry, type ChainInfo, type Deposit, type Sponsorship } from './api';
import { clear, copyButton, field, h, uid } from './dom';
import { qrSvg } from './qr';
import { roundAmount } from './amount';
import { keysPanel } from './keys';
import { usdValue } from './usd';
import { sendPanel } from './send';
import { callComposer } from './compose-call';
import { errorLine, errorText, isLocalChain } from './ui';
import { accountLine, gasPayerLine, sponsorshipEditor, sponsorshipOn } from './sponsorship';

export interface WalletPanel {
  el: HTMLElement;
  load(): void;
  refreshBalances(): Promise<void>;
}

export function walletPanel(
  agent: AgentDetail,
  token: string | null,
  chains: ChainInfo[],
  onMoved: () => void = () => {},
  openApproval: (transferId: string) => void = () => {},
  openPolicyRule: (rule: string) => void = () => {},
): WalletPanel {
  const byName = new Map(chains.map((c) => [c.name, c]));
  const balanceEls = new Map<string, HTMLElement>();
  const qrEls = new Map<string, HTMLElement>();
  const tokenEls = new Map<string, HTMLElement>();
  // Who pays the gas on each chain, and what the address holds as code (§22): filled with the balances.
  const gasEls = new Map<string, HTMLElement>();
  const accountEls = new Map<string, HTMLElement>();
  let sponsorships: Sponsorship[] | null = null;
  // The registry tokens of the agent's chains, for the funding QR codes.
  const tokenSymbols = [
    ...new Set(agent.chains.flatMap((chain) => (byName.get(chain)?.tokens ?? []).map((t) => t.symbol))),
  ];
  const cards = agent.chains.map((chain) => {
    const info = byName.get(chain);
    const address = agent.wallet_addresses[chain] ?? '';
    const balance = h('p', { class: 'balance', 'data-testid': `balance-${chain}`, 'aria-live': 'polite' }, '…');
    balanceEls.set(chain, balance);
    const tokens = h('ul', { class: 'token-balances small', 'data-testid': `tokens-${chain}` });
    tokenEls.set(chain, tokens);
    const qr = h('div', { class: 'qr-box', 'data-testid': `qr-${chain}` }, h('p', { class: 'muted' }, 'Loading QR code…'));
    qrEls.set(chain, qr);
    const cap = agent.spending_cap;
    const spent = agent.spent?.[chain];
    const gas = h('div', { class: 'gas-box', 'data-testid': `gas-${chain}` });
    gasEls.set(chain, gas);
    const account = h('div', { class: 'account-box' });
    accountEls.set(chain, account);
    return h(
      'article',
      { class: 'card wallet', 'data-testid': `wallet-${chain}`, 'aria-label': `Wallet on ${chain}` },
      h(
        'div',
        { class: 'wallet-main' },
        h(
          'h3',
          {},
          chain,
          info ? h('small', { class: 'muted' }, ` · chain id ${info.chain_id}`) : null,
          info?.local_node
            ? h('span', { class: 'badge local', 'data-testid': `local-node-${chain}`, title: 'This chain runs on a local node (a test network): its coins and transactions exist only there' }, ' local node')
            : null,
        ),
        h(
          'div',
          { class: 'address-row' },
          h('code', { class: 'mono address', 'data-testid': `address-${chain}` }, address),
          copyButton(address, `Copy ${chain} address`),
        ),
        h('div', { class: 'stat' }, h('span', { class: 'muted' }, 'Balance'), balance),
        tokens,
        h(
          'p',
          { class: 'muted small', title: `${spent ?? '0'} of ${cap} ${info?.native_symbol ?? ''}`.trim() },
          `Spent ${roundAmount(spent ?? '0')} of the cap ${roundAmount(String(cap))} ${info?.native_symbol ?? ''}`.trim(),
          info && !info.configured ? ' · no RPC URL is configured for this chain' : '',
        ),
        gas,
        account,
      ),
      qr,
    );
  });

  const amount = h('input', { type: 'text', inputmode: 'decimal', placeholder: 'e.g. 0.05', autocomplete: 'off' });
  const asset = h(
    'select',
    {},
    h('option', { value: '' }, 'Native coin'),
    ...tokenSymbols.map((symbol) => h('option', { value: symbol }, symbol)),
  ) as HTMLSelectElement;
  const fundError = errorLine();
  const instructions = h('p', { class: 'muted small' });
  const refreshButton = h('button', { type: 'button', class: 'secondary' }, 'Refresh balances');
  const heading = uid('wallets');

  async function refreshBalances(): Promise<void> {
    refreshButton.disabled = true;
    const read = api.sponsorships(agent.id, token).then(
      (list) => list,
      () => null,
    );
    try {
      const result = await api.balances(agent.id, token);
      for (const chain of agent.chains) showBalance(chain, result.balances[chain]);
      sponsorships = await read;
      for (const chain of agent.chains) showGas(chain);
    } catch (e) {
      for (const el of balanceEls.values()) {
        el.textContent = `Unavailable: ${errorText(e)}`;
        el.classList.add('error');
      }
    } finally {
      refreshButton.disabled = false;
    }
  }

  /** Who pays the gas on `chain`, and on a sponsorable chain the operator's form (the admin token) to change it. */
  function showGas(chain: string): void {
    const box = gasEls.get(chain);
    const info = byName.get(chain);
    if (!box || !info) return;
    const open = box.querySelector('details')?.open ?? false;
    clear(box);
    box.append(gasPayerLine(info, sponsorships));
    if (!info.sponsorship) return;
    const editor = sponsorshipEditor(agent.id, info, sponsorshipOn(sponsorships, chain), (saved) => {
      sponsorships = [...(sponsorships ?? []).filter((s) => s.chain !== saved.chain), saved];
      showGas(chain);
    });
    box.append(
      h(
        'details',
        { class: 'operator-sponsor', open: open ? true : null, 'data-testid': `sponsor-agent-${chain}` },
        h('summary', { class: 'small' }, 'Operator: sponsor this agent’s gas'),
        h('p', { class: 'muted small' }, 'With the admin token only: an owner must not make the operator pay. The Gas sponsorship page shows the paymaster’s deposit and every agent’s sponsorship.'),
        editor,
      ),
    );
  }

  function showBalance(chain: string, entry: BalanceEntry | undefined): void {
    const account = accountEls.get(chain);
    if (account) {
      clear(account);
      // `account` (§22) is absent where no account implementation is configured, or on servers before it.
      const state = entry && !('error' in entry) ? (entry as { account?: string | null }).account : null;
      const line = accountLine(chain, state);
      if (line) account.append(line);
    }
    const el = balanceEls.get(chain);
    if (!el) return;
    el.classList.remove('error');
    if (!entry) {
      el.textContent = 'No answer for this chain';
      el.classList.add('error');
    } else if ('error' in entry) {
      el.textContent = `Unavailable: ${entry.error.message} (${entry.error.code})`;
      el.classList.add('error');
    } else {
      // Rounded for reading; the exact amount stays in the title.
      el.textContent = `${roundAmount(entry.formatted)} ${entry.symbol}`;
      el.title = `${entry.formatted} ${entry.symbol} (${entry.wei} wei)`;
    }
    const list = tokenEls.get(chain);
    if (!list) return;
    clear(list);
    const tokens = entry && !('error' in entry) ? Object.entries(entry.tokens ?? {}) : [];
    for (const [symbol, token] of tokens) {
      const text =
        'error' in token ? `${symbol}: unavailable (${token.error.code})` : `${roundAmount(token.formatted)} ${symbol}`;
      const title = 'error' in token ? token.error.message : `${token.formatted} ${symbol} (${token.units} base units)`;
      // The USD value of a stablecoin sits beside the amount, outside the element that names the amount.
      list.append(
        h(
          'li',
          { class: 'error' in token ? 'error' : '' },
          h('span', { 'data-testid': `token-${chain}-${symbol}`, title }, text),
          'error' in token ? null : usdValue(token.formatted, symbol),
        ),
      );
    }
  }

  async function loadQr(): Promise<void> {
    fundError.clear();
    const value = amount.value.trim();
    const symbol = asset.value;
    try {
      const funding = await api.fund(agent.id, token, {
        ...(value ? { amount: value } : {}),
        ...(symbol ? { asset: symbol } : {}),
      });
      instructions.textContent = funding.instructions;
      for (const chain of agent.chains) {
        const deposit = funding.deposits.find((d) => d.chain === chain);
        if (deposit) showDeposit(deposit);
        else {
          const box = qrEls.get(chain);
          if (!box) continue;
          clear(box);
          box.append(h('p', { class: 'muted' }, `No ${symbol} on ${chain}.`));
        }
      }
    } catch (e) {
      fundError.show(e);
    }
  }

  function showDeposit(deposit: Deposit): void {
    const box = qrEls.get(deposit.chain);
    if (!box) return;
    clear(box);
    box.append(
      qrSvg(deposit.payment_uri, `QR code for ${deposit.payment_uri}`),
      h(
        'div',
        { class: 'uri-row' },
        h('code', { class: 'mono small uri', 'data-testid': `payment-uri-${deposit.chain}` }, deposit.payment_uri),
        copyButton(deposit.payment_uri, `Copy ${deposit.chain} payment link`),
      ),
      deposit.explorer_url && !isLocalChain(deposit.chain)
        ? h('a', { href: deposit.explorer_url, target: '_blank', rel: 'noopener noreferrer', class: 'small' }, 'View on explorer')
        : '',
    );
  }

  const form = h(
    'form',
    { class: 'inline-form' },
    field('Asset of the QR codes', asset),
    field('Amount to request in the QR codes (optional, whole units of the asset)', amount),
    h('button', { type: 'submit', class: 'secondary' }, 'Update QR codes'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void loadQr();
  });
  refreshButton.addEventListener('click', () => void refreshBalances());

  const composer = callComposer(agent, token, chains, {
    onChange: () => {
      void refreshBalances();
      onMoved();
    },
    openApproval,
    openPolicyRule,
  });
  const el = h(
    'section',
    { 'aria-labelledby': heading },
    h('div', { class: 'section-head' }, h('h2', { id: heading }, 'Wallets'), refreshButton),
    h(
      'p',
      { class: 'muted' },
      'Fund the agent by sending native coins or a registry token (USDC, …) to its address. The QR codes are EIP-681 payment links for wallet apps.',
    ),
    cards,
    form,
    fundError.el,
    instructions,
    sendPanel(agent, token, chains, {
      onChange: () => {
        void refreshBalances();
        onMoved();
      },
      openApproval,
    }),
    composer.el,
    keysPanel(agent, token, chains, () => {
      void refreshBalances();
      onMoved();
    }),
  );

  let loaded = false;
  return {
    el,
    load() {
      if (loaded) return;
      loaded = true;
      composer.load();
      void refreshBalances();
      void loadQr();
    },
    refreshBalances,
  };
}
