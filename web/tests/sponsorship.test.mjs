// Gas the agent does not pay (docs/api.md §22) in the console, in headless Chromium against the real binary and anvil
// with the real, unmodified parts: the demo's chain (scripts/demo-chain.mjs setup: test USDC, WETH, Uniswap V2 with a
// USDC/WETH pool, the MetaMask Delegation Framework v1.3 with its EntryPoint v0.7 and EIP7702StatelessDeleGator) and
// Pimlico's SingletonPaymaster v0.7 from npm @pimlico/mock-paymaster 0.0.7 (scripts/paymaster.mjs), as the demo sets
// them up. The operator's Gas sponsorship page shows what is missing and what the operator must do (addSigner,
// updateBundlerAllowlist, deposit()), warns of a low sponsor balance, of sponsorships adding up to more than the
// deposit and of a shared paymaster, and sets an agent's sponsorship with the admin token (refused without it). An
// agent that holds USDC and not a wei of ETH then: shows who pays its gas and what is left today, and its account
// (eoa, then smart); sends USDC from the Send form with the gas sponsored by default, the answer showing the user
// operation, its bundle and the gas cost; History marks it sponsored; and the call composer builds an approve and
// the swap that spends it as one batch, sponsored, which lands as one operation: WETH received, still no ETH.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { call, mintUsdc, tokenBalance, USDC, word } from '../../scripts/evm.mjs';
import { deployPaymaster, depositOf, entryPointOf, operatorSteps } from '../../scripts/paymaster.mjs';
import { artifactsDir, callApi, overflowProblems, repoRoot, startStack, until, watchPage } from './harness.mjs';

const ADMIN = `adm_${randomBytes(24).toString('hex')}`;
const RECIPIENT = '0x000000000000000000000000000000000000dEaD';
const OTHER_SIGNER = '0x52908400098527886E0F7030069857D2E4169EE7';
const WETH = '0x4200000000000000000000000000000000000006';
const SWAP = 'swapExactTokensForTokens(uint256,uint256,address[],address,uint256)';
const TIMEOUT = 30000;

describe('web console gas sponsorship', { timeout: 420000 }, () => {
  let stack;
  let page;
  let parts;
  let paymaster;
  let entryPoint;
  let sponsor;
  let agentId;
  let agentToken;
  let wallet;
  const pageErrors = [];
  const asAdmin = { authorization: `Bearer ${ADMIN}` };
  const shot = (p, name) => p.screenshot({ path: join(artifactsDir, `sponsorship-${name}.png`), fullPage: true });
  const ethOf = async (address) => BigInt(await stack.rpc('eth_getBalance', [address, 'latest']));

  before(async () => {
    stack = await startStack({
      env: { ADMIN_TOKEN: ADMIN, CONFIRMATIONS_BASE: '1' },
      prepare: async (rpc, rpcUrl) => {
        parts = JSON.parse(execFileSync('node', [join(repoRoot, 'scripts', 'demo-chain.mjs'), 'setup', rpcUrl], { maxBuffer: 16 * 1024 * 1024 }).toString());
        entryPoint = await entryPointOf(rpc, parts.delegator_implementation);
        paymaster = await deployPaymaster(rpc, entryPoint);
        return {
          DELEGATION_MANAGER_BASE: parts.delegation_manager,
          DELEGATION_ENFORCERS_BASE: parts.delegation_enforcers,
          ENTRY_POINT_BASE: entryPoint,
          ACCOUNT_IMPLEMENTATION_BASE: parts.delegator_implementation,
          PAYMASTER_BASE: paymaster,
          CONTRACTS_BASE: `Uniswap V2 router=${parts.router}`,
        };
      },
    });
    const chains = await callApi(stack.baseUrl, 'GET', '/api/chains');
    sponsor = chains.body.find((c) => c.name === 'base').sponsorship?.sponsor;
    assert.match(sponsor ?? '', /^0x[0-9a-fA-F]{40}$/, 'base checks out as sponsorable at start');

    // An agent with 100 test USDC and no ETH at all, whose policy allows approving the router and swapping there.
    const created = await callApi(
      stack.baseUrl,
      'POST',
      '/api/agents',
      { name: 'Gasless agent', chains: ['base'], capabilities: ['read', 'transact', 'analytics'], spending_cap: 1 },
      asAdmin,
    );
    assert.equal(created.status, 201, JSON.stringify(created.body));
    agentId = created.body.id;
    agentToken = created.body.access_token;
    wallet = created.body.wallet_addresses.base;
    await mintUsdc(stack.rpc, wallet, 100_000_000n);
    const policy = await callApi(
      stack.baseUrl,
      'PUT',
      `/api/agents/${agentId}/policy`,
      {
        calls: {
          default: 'deny',
          rules: [
            { chain: 'base', to: USDC, function: 'approve(address,uint256)', args: { 0: { eq: parts.router } }, action: 'allow' },
            { chain: 'base', to: parts.router, function: SWAP, args: { 3: { eq: '$agent' } }, action: 'allow' },
          ],
        },
      },
      asAdmin,
    );
    assert.equal(policy.status, 200, JSON.stringify(policy.body));

    const context = await stack.browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.addInitScript(
      ([id, token, admin]) => {
        localStorage.setItem(`agentd.token.${id}`, token);
        localStorage.setItem('agentd.adminToken', admin);
      },
      [agentId, agentToken, ADMIN],
    );
    page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    await watchPage(page, stack.baseUrl, pageErrors, [401, 403]);
  });

  after(async () => {
    if (page) await shot(page, 'zz-last-state').catch(() => {});
    await stack?.stop();
  });

  it('shows the operator what the paymaster lacks, and sets a sponsorship with the admin token', async () => {
    await page.goto(`${stack.baseUrl}/#/sponsorship`);
    const card = page.locator('[data-testid="sponsor-chain"][data-chain="base"]');
    await card.waitFor();
    const warnings = async () => card.locator('[data-warning]').evaluateAll((els) => els.map((e) => e.dataset.warning));
    const refresh = () => page.getByTestId('sponsorship-page').getByRole('button', { name: 'Refresh' }).click();
    // A fresh paymaster: the sponsor neither trusted nor allowlisted, no deposit, a sponsor with nothing.
    assert.deepEqual(await warnings(), ['untrusted', 'not_allowlisted', 'no_deposit', 'sponsor_low']);
    assert.equal(await card.getAttribute('data-ready'), 'false');
    assert.equal(await card.getByTestId('sponsor-address').textContent(), sponsor);
    assert.match(await card.locator('[data-warning="untrusted"]').textContent(), new RegExp(`addSigner\\(${sponsor}\\)`));
    assert.match(await card.locator('[data-warning="not_allowlisted"]').textContent(), new RegExp(`updateBundlerAllowlist\\(\\[${sponsor}\\], true\\)`));
    assert.match(await card.locator('[data-warning="no_deposit"]').textContent(), /deposit\(\)/);
    await shot(page, 'a1-paymaster-not-ready');

    // The operator's part on chain, with a deposit smaller than what the sponsorship will allow a day.
    await operatorSteps.trust(stack.rpc, paymaster, sponsor);
    await operatorSteps.allowlist(stack.rpc, paymaster, sponsor);
    await operatorSteps.deposit(stack.rpc, paymaster, '0.01');
    await refresh();
    await until('the warnings after the operator trusted, allowlisted and funded', async () => (await warnings()).join() === 'sponsor_low');
    assert.equal(await card.getByTestId('sponsor-deposit').getAttribute('data-value'), '0.01');

    // The agent's row: no sponsorship yet; set 0.05 ETH a day, more than the deposit of 0.01.
    const row = page.locator(`[data-testid="sponsorship-row"][data-agent-id="${agentId}"][data-chain="base"]`);
    await row.getByText('none: its wallet pays').waitFor();
    await row.getByTestId('sponsorship-per-day').fill('0.05');
    await row.getByRole('button', { name: 'Sponsor' }).click();
    await row.locator('[data-testid="sponsorship-today"][data-per-day="0.05"]').waitFor();
    assert.equal(await row.getByTestId('sponsorship-today').getAttribute('data-left'), '0.05');
    await until('the over-committed warning', async () => (await warnings()).includes('over_committed'));
    assert.match(
      await card.locator('[data-warning="over_committed"]').textContent(),
      /The sponsorships add up to 0\.05 ETH a day, more than the deposit of 0\.01 ETH/,
    );
    assert.equal(await card.getByTestId('sponsor-committed').getAttribute('data-value'), '0.05');
    const set = await callApi(stack.baseUrl, 'GET', `/api/agents/${agentId}/sponsorship`, undefined, asAdmin);
    assert.deepEqual(set.body.sponsorships, [{ chain: 'base', per_day: '0.05', counted: '0', left: '0.05' }]);

    // A paymaster that trusts another signer too is shared; removing it ends the warning.
    await call(stack.rpc, paymaster, 'addSigner(address)', [word(OTHER_SIGNER)]);
    await refresh();
    await until('the shared warning', async () => (await warnings()).includes('shared'));
    assert.match(await card.locator('[data-warning="shared"]').textContent(), /also trusts another signer/);
    await shot(page, 'a2-over-committed-and-shared');
    await call(stack.rpc, paymaster, 'removeSigner(address)', [word(OTHER_SIGNER)]);

    // The deposit topped up and the sponsor funded: ready.
    await operatorSteps.deposit(stack.rpc, paymaster, '0.99');
    await operatorSteps.fundSponsor(stack.rpc, sponsor, '1');
    await refresh();
    await until('a ready paymaster', async () => (await card.getAttribute('data-ready')) === 'true' && (await warnings()).length === 0);
    assert.equal(await card.getByTestId('sponsor-deposit').getAttribute('data-value'), '1');
    assert.equal(await card.getByTestId('sponsor-balance').getAttribute('data-value'), '1');

    // The page fits a phone.
    await page.setViewportSize({ width: 390, height: 900 });
    assert.deepEqual(await page.evaluate(overflowProblems), []);
    await shot(page, 'a3-ready-390');
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('refuses the sponsorship form to a browser holding the agent token alone', async () => {
    const context = await stack.browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      await context.addInitScript(([id, token]) => localStorage.setItem(`agentd.token.${id}`, token), [agentId, agentToken]);
      const other = await context.newPage();
      other.setDefaultTimeout(TIMEOUT);
      const errors = [];
      await watchPage(other, stack.baseUrl, errors, [401, 403]);
      await other.goto(`${stack.baseUrl}/#/agents/${agentId}/wallet`);
      const box = other.getByTestId('sponsor-agent-base');
      await box.locator('summary').click();
      await box.getByTestId('sponsorship-per-day').fill('5');
      await box.getByRole('button', { name: 'Change' }).click();
      await box.locator('.form-error:not([hidden])').waitFor();
      assert.match(await box.locator('.form-error').textContent(), /\((unauthorized|forbidden)\)/);
      const still = await callApi(stack.baseUrl, 'GET', `/api/agents/${agentId}/sponsorship`, undefined, asAdmin);
      assert.equal(still.body.sponsorships[0].per_day, '0.05', 'the agent token set nothing');
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
    }
  });

  it('sends USDC with the gas sponsored by default, from a wallet with no ETH, and shows the user operation', async () => {
    const before = await depositOf(stack.rpc, entryPoint, paymaster);
    await page.goto(`${stack.baseUrl}/#/agents/${agentId}/wallet`);
    const payer = page.getByTestId('gas-payer-base');
    await payer.locator('text=sponsored by the operator').waitFor();
    assert.equal(await payer.getAttribute('data-payer'), 'sponsored');
    assert.match(await payer.textContent(), /0\.05 of 0\.05 ETH left today/);
    assert.equal(await page.getByTestId('account-base').getAttribute('data-account'), 'eoa');

    const send = page.getByTestId('send-card');
    await send.getByLabel('Asset').selectOption('USDC');
    const gas = send.getByTestId('send-gas');
    await until('the gas choice', async () => (await gas.isVisible()) && (await gas.inputValue()) === 'sponsored');
    // The wallet paying instead, with no ETH: the review says so, and points back to the sponsorship.
    await gas.selectOption('wallet');
    await send.getByLabel('Recipient').fill(RECIPIENT);
    await send.getByLabel('Amount').fill('2');
    await send.getByRole('button', { name: 'Review' }).click();
    const review = send.getByTestId('send-review');
    await review.getByTestId('review-no-gas').waitFor();
    assert.match(await review.getByTestId('review-no-gas').textContent(), /choose Gas paid by: the operator\u2019s sponsorship/);
    await review.getByRole('button', { name: 'Back to edit' }).click();

    await gas.selectOption('sponsored');
    await send.getByRole('button', { name: 'Review' }).click();
    await review.getByTestId('review-gas').waitFor();
    assert.equal(await review.getByTestId('review-no-gas').count(), 0, 'a sponsored send needs no ETH');
    assert.match(await review.getByTestId('review-gas').textContent(), /paid by the operator\u2019s sponsorship \(0\.05 of 0\.05 ETH left today\)/);
    await shot(page, 'b1-send-review-sponsored');
    await review.getByRole('button', { name: 'Confirm and send 2 USDC' }).click();

    const result = send.getByTestId('send-result');
    await until('the sponsored send confirmed', async () => (await result.getAttribute('data-status')) === 'confirmed', 60000);
    const info = result.getByTestId('gas-info');
    await until('its gas cost', async () => (await info.getAttribute('data-gas-cost')) !== '');
    assert.equal(await info.getAttribute('data-gas'), 'sponsored');
    const transfer = await callApi(stack.baseUrl, 'GET', `/api/agents/${agentId}/transfers/${await result.getAttribute('data-transfer-id')}`, undefined, {
      'x-agent-access-token': agentToken,
    });
    assert.equal(transfer.body.gas, 'sponsored');
    const op = transfer.body.sponsorship;
    assert.equal(await info.getByTestId('user-op-hash').getAttribute('title'), op.user_op_hash);
    assert.equal(await info.locator('[data-testid="bundle-hash"] code').getAttribute('title'), op.bundle_hash);
    assert.equal(await info.getAttribute('data-gas-cost'), op.gas_cost);
    await shot(page, 'b2-send-sponsored-confirmed');

    // On chain: the USDC moved, the agent holds no wei, the deposit paid exactly the operation's gas cost.
    assert.equal(await tokenBalance(stack.rpc, USDC, RECIPIENT), 2_000_000n);
    assert.equal(await ethOf(wallet), 0n);
    const [whole, frac = ''] = op.gas_cost.split('.');
    assert.equal(before - (await depositOf(stack.rpc, entryPoint, paymaster)), BigInt(whole) * 10n ** 18n + BigInt(frac.padEnd(18, '0')));

    // The wallet now shows a smart account and what the sponsorship has left.
    await page.getByRole('button', { name: 'Refresh balances' }).click();
    await until('the smart account', async () => (await page.getByTestId('account-base').getAttribute('data-account')) === 'smart');
    await until('what is left', async () => !/0\.05 of 0\.05/.test(await payer.textContent()));

    // History marks it sponsored, with its operation and cost.
    await page.getByRole('tab', { name: 'History' }).click();
    const row = page.locator(`[data-testid="history-row"][data-transfer-id="${transfer.body.id}"]`);
    const marked = row.getByTestId('gas-info');
    await marked.waitFor();
    assert.equal(await marked.getAttribute('data-gas'), 'sponsored');
    assert.equal(await marked.getAttribute('data-gas-cost'), op.gas_cost);
    assert.match(await marked.textContent(), /gas sponsored/);
  });

  it('composes an approve and the swap that spends it as one sponsored batch', async () => {
    const usdcBefore = await tokenBalance(stack.rpc, USDC, wallet);
    await page.goto(`${stack.baseUrl}/#/agents/${agentId}/wallet`);
    const composer = page.getByTestId('call-composer');
    await composer.waitFor();
    const usdc = composer.locator('optgroup[label="Tokens on base"] option', { hasText: 'USDC' }).first();
    await composer.getByTestId('call-contract-pick').selectOption(await usdc.getAttribute('value'));
    assert.equal(await composer.getByTestId('call-function-pick').inputValue(), 'approve(address,uint256)');
    // A single call can be sponsored too: who pays is offered, the sponsorship by default, as for a batch.
    await composer.getByTestId('call-gas').waitFor();
    assert.equal(await composer.getByTestId('call-gas').inputValue(), 'sponsored', 'a call is sponsored by default');
    await composer.locator('input[data-arg="spender"]').fill(parts.router);
    await composer.locator('input[data-arg="amount"]').fill('10 USDC');
    await composer.getByTestId('call-add').click();

    // The batch holds the approve; the next call is on the router it allowed, its swap picked.
    const batch = composer.getByTestId('call-batch');
    await batch.getByTestId('call-batch-item').first().waitFor();
    assert.equal(await batch.getByTestId('call-batch-item').getAttribute('data-function'), 'approve(address,uint256)');
    assert.equal((await composer.getByTestId('call-to').inputValue()).toLowerCase(), parts.router.toLowerCase());
    assert.equal(await composer.getByTestId('call-function-pick').inputValue(), SWAP);
    await composer.locator('input[data-arg="amountIn"]').fill('10 USDC');
    await composer.locator('input[data-arg="amountOutMin"]').fill('1');
    await composer.locator('input[data-arg="path"]').fill('USDC, WETH');
    assert.equal(await composer.locator('input[data-arg="to"]').inputValue(), '$agent');
    assert.equal(await composer.getByTestId('call-gas').inputValue(), 'sponsored', 'a batch is sponsored by default');
    await composer.getByRole('button', { name: 'Simulate the batch (2 calls)' }).click();

    const verdict = composer.getByTestId('call-verdict');
    await verdict.waitFor();
    assert.equal(await verdict.getAttribute('data-result'), 'allow', await verdict.textContent());
    const simulation = composer.getByTestId('call-simulation');
    assert.deepEqual(
      await simulation.getByTestId('batch-call').evaluateAll((els) => els.map((e) => e.querySelector('[data-testid="call-function"]').textContent.trim())),
      ['approve', 'swapExactTokensForTokens'],
    );
    assert.match(await simulation.getByTestId('call-effects').textContent(), /10 USDC/);
    await shot(page, 'c1-batch-simulated');
    await composer.getByRole('button', { name: 'Review and send' }).click();
    const review = composer.getByTestId('call-review');
    assert.equal(await review.getByTestId('call-review-gas').getAttribute('data-gas'), 'sponsored');
    await review.getByRole('button', { name: 'Send the batch of 2 calls' }).click();

    const result = composer.getByTestId('call-result');
    await until('the batch confirmed', async () => (await result.getAttribute('data-status')) === 'confirmed', 60000);
    const info = result.getByTestId('gas-info');
    await until('its gas cost', async () => (await info.getAttribute('data-gas-cost')) !== '');
    assert.equal(await info.getAttribute('data-gas'), 'sponsored');
    assert.equal(await composer.getByTestId('call-batch').isHidden(), true, 'a sent batch starts again empty');
    await shot(page, 'c2-batch-sent');

    // On chain, one operation: 10 USDC out, WETH in, no allowance left over, and still not a wei of ETH.
    assert.equal(usdcBefore - (await tokenBalance(stack.rpc, USDC, wallet)), 10_000_000n);
    assert.ok((await tokenBalance(stack.rpc, WETH, wallet)) > 0n, 'WETH received');
    const allowance = BigInt(
      await stack.rpc('eth_call', [{ to: USDC, data: `0xdd62ed3e${word(wallet)}${word(parts.router)}` }, 'latest']),
    );
    assert.equal(allowance, 0n, 'the swap spent the whole approval');
    assert.equal(await ethOf(wallet), 0n);

    // History shows the batch with its calls, sponsored.
    await page.getByRole('tab', { name: 'History' }).click();
    const row = page.locator(`[data-testid="history-row"][data-transfer-id="${await result.getAttribute('data-transfer-id')}"]`);
    await row.locator('[data-testid="call-function"][data-batch="2"]').waitFor();
    assert.equal((await row.getByTestId('call-function').textContent()).trim(), 'approve + swapExactTokensForTokens');
    await row.getByTestId('gas-info').waitFor();

    await page.setViewportSize({ width: 390, height: 900 });
    await page.getByRole('tab', { name: 'Wallet' }).click();
    await page.getByTestId('gas-payer-base').waitFor();
    assert.deepEqual(await page.evaluate(overflowProblems), []);
    await shot(page, 'c3-wallet-390');
    await page.setViewportSize({ width: 1280, height: 900 });
    assert.deepEqual(pageErrors, []);
  });
});
