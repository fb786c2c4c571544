// Contract calls in the console, in headless Chromium against the real binary (ADMIN_TOKEN set, so the agent is
// guarded) and anvil with the real Uniswap V2 (the npm builds in test-tools): the agent approves the router through
// the calls API (allowed by a rule), then asks a swap that a rule holds for approval; the inbox shows the swap's
// function, arguments and "You send / You receive" lines; the owner (admin token entered in the console) approves
// it; the history shows the call confirmed with its function and changes; the policy editor shows the calls rules
// as a table, keeps the JSON in step, and puts a 422 field error next to the rule's function.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { artifactsDir, callApi, startStack, watchPage, openFold } from './harness.mjs';
import { call, deploy, send, uniswap, word } from '../../scripts/evm.mjs';

// anvil's first dev account (unlocked, the one scripts/evm.mjs sends from): deploys Uniswap, provides liquidity, funds
// the agent.
const DEV = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
const ADMIN = `adm_${randomBytes(24).toString('hex')}`;
const TIMEOUT = 20000;
const SWAP = 'swapExactTokensForETH(uint256,uint256,address[],address,uint256)';
const E18 = 10n ** 18n;
const SWAP_IN = 100n * E18;

describe('web console contract calls', { timeout: 300000 }, () => {
  let stack;
  let page;
  let agentId;
  let agentToken;
  let address;
  let token;
  let weth;
  let router;
  let approveId;
  let swapId;
  const pageErrors = [];

  const api = (method, path, body, headers) => callApi(stack.baseUrl, method, path, body, headers);
  const asAdmin = { authorization: `Bearer ${ADMIN}` };
  const asAgent = () => ({ 'x-agent-access-token': agentToken });
  const shot = (name) => page.screenshot({ path: join(artifactsDir, `${name}.png`), fullPage: true });

  async function waitTransfer(id, status) {
    let last;
    for (let i = 0; i < 200; i += 1) {
      last = await api('GET', `/api/agents/${agentId}/transfers/${id}`, undefined, asAgent());
      if (last.body?.status === status) return last.body;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`transfer ${id} is not ${status}: ${JSON.stringify(last?.body)}`);
  }

  before(async () => {
    stack = await startStack({ env: { ADMIN_TOKEN: ADMIN, CONFIRMATIONS_BASE: '1' } });

    // Uniswap V2 as published on npm: a test ERC-20 (its whole supply minted to the dev account), WETH9, the
    // factory and the router, and a token/WETH pool of 100 000 tokens and 10 ETH.
    token = await deploy(stack.rpc, uniswap('v2-core', 'ERC20.json') + word(1_000_000n * E18));
    weth = await deploy(stack.rpc, uniswap('v2-periphery', 'WETH9.json'));
    const factory = await deploy(stack.rpc, uniswap('v2-core', 'UniswapV2Factory.json') + word(DEV));
    router = await deploy(stack.rpc, uniswap('v2-periphery', 'UniswapV2Router02.json') + word(factory) + word(weth));
    for (const a of [token, weth, factory, router]) assert.match(a, /^0x[0-9a-f]{40}$/i);
    await call(stack.rpc, token, 'approve(address,uint256)', [word(router), word(100_000n * E18)]);
    await call(
      stack.rpc,
      router,
      'addLiquidityETH(address,uint256,uint256,uint256,address,uint256)',
      [word(token), word(100_000n * E18), word(0n), word(0n), word(DEV), word(BigInt(2 ** 40))],
      10n * E18,
    );

    // A guarded agent on base, with 1 000 tokens and 1 ETH, whose policy allows approving the token and holds the
    // router's swap for the owner's approval.
    const created = await api(
      'POST',
      '/api/agents',
      {
        name: 'Swapping agent',
        chains: ['base'],
        capabilities: ['read', 'transact', 'analytics'],
        spending_cap: 1,
        owner_addresses: { base: DEV },
      },
      asAdmin,
    );
    assert.equal(created.status, 201, JSON.stringify(created.body));
    agentId = created.body.id;
    agentToken = created.body.access_token;
    address = created.body.wallet_addresses.base;
    await send(stack.rpc, { to: address, value: `0x${E18.toString(16)}` });
    await call(stack.rpc, token, 'transfer(address,uint256)', [word(address), word(1000n * E18)]);
    const policy = await api(
      'PUT',
      `/api/agents/${agentId}/policy`,
      {
        limits: {},
        calls: {
          default: 'deny',
          rules: [
            { chain: 'base', to: token, function: 'approve(address,uint256)', args: { 0: { eq: router } }, action: 'allow' },
            { chain: 'base', to: router, function: SWAP, action: 'approve' },
          ],
        },
      },
      asAdmin,
    );
    assert.equal(policy.status, 200, JSON.stringify(policy.body));

    // The agent approves the router (allowed), then asks the swap (held).
    const approve = await api(
      'POST',
      `/api/agents/${agentId}/calls`,
      { chain: 'base', to: token, function: 'approve(address,uint256)', args: [router, SWAP_IN.toString()] },
      asAgent(),
    );
    assert.equal(approve.status, 201, JSON.stringify(approve.body));
    assert.equal(approve.body.kind, 'call');
    approveId = approve.body.id;
    await waitTransfer(approveId, 'confirmed');
    const swap = await api(
      'POST',
      `/api/agents/${agentId}/calls`,
      { chain: 'base', to: router, function: SWAP, args: [SWAP_IN.toString(), '0', [token, weth], address, String(2 ** 40)] },
      asAgent(),
    );
    assert.equal(swap.status, 201, JSON.stringify(swap.body));
    assert.equal(swap.body.status, 'awaiting_approval', JSON.stringify(swap.body));
    swapId = swap.body.id;
    const changes = swap.body.simulation.changes;
    assert.ok(changes.some((c) => c.direction === 'out' && c.amount === SWAP_IN.toString()), JSON.stringify(changes));
    assert.ok(changes.some((c) => c.direction === 'in' && c.asset === 'base:ETH'), JSON.stringify(changes));

    const context = await stack.browser.newContext({ viewport: { width: 1360, height: 900 } });
    // The user saved the agent's token earlier (as the console offers when it creates one).
    await context.addInitScript(([id, t]) => localStorage.setItem(`agentd.token.${id}`, t), [agentId, agentToken]);
    page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
      // The 422 the policy test provokes on purpose is logged by the browser itself; the console shows it.
    await watchPage(page, stack.baseUrl, pageErrors, [401, 403, 422]);
  });

  after(async () => {
    if (page) await page.screenshot({ path: join(artifactsDir, 'calls-zz-last-state.png'), fullPage: true }).catch(() => {});
    await stack?.stop();
  });

  it('shows the held swap in the inbox as a function with arguments and what it sends and receives', async () => {
    await page.goto(`${stack.baseUrl}/#/agents/${agentId}/approvals`);
    await page.getByRole('heading', { name: 'Swapping agent' }).waitFor();
    const item = page.locator(`[data-testid="approval"][data-transfer-id="${swapId}"]`);
    await item.waitFor();
    assert.equal((await item.getByTestId('call-function').textContent()).trim(), 'swapExactTokensForETH');
    assert.equal((await item.getByTestId('call-contract').getAttribute('title')).toLowerCase(), router.toLowerCase());
    // The arguments by name (the router's signature is a known one), the path as an array of addresses.
    const args = item.getByTestId('call-args');
    assert.match(await args.locator('[data-arg="amountIn"]').textContent(), new RegExp(`amountIn uint256 = ${SWAP_IN}`));
    assert.match(await args.locator('[data-arg="path"]').textContent(), /path address\[\] = \[0x.{4}….{4}, 0x.{4}….{4}\]/);
    assert.equal(await args.locator('[data-arg="to"] code').getAttribute('title'), address);
    const send = item.getByTestId('effect-send');
    assert.match(await send.textContent(), new RegExp(`^You send ${SWAP_IN} \\(base units\\) of token 0x`));
    assert.equal((await send.locator('code').getAttribute('title')).toLowerCase(), token.toLowerCase());
    assert.match(await item.getByTestId('effect-receive').textContent(), /^You receive 0\.0\d+ ETH$/);
    assert.equal(await item.getByTestId('effect-allow').count(), 0, 'the swap grants no allowance');
    assert.match(await item.getByRole('button', { name: /^Approve/ }).getAttribute('aria-label'), /swapExactTokensForETH on 0x/);
    await shot('c01-inbox-held-swap');
  });

  it('approves the swap with the admin token entered in the console; the history shows the calls confirmed', async () => {
    assert.ok(swapId, 'needs the set-up');
    await page.getByRole('tab', { name: 'Settings' }).click();
    await openFold(page, 'settings-owner');
    const owner = page.getByTestId('owner-authority');
    await owner.getByLabel('Admin token', { exact: true }).fill(ADMIN);
    await owner.getByRole('button', { name: 'Use admin token' }).click();
    await owner.getByTestId('authority-status').filter({ hasText: /admin token/ }).waitFor();

    await page.getByRole('tab', { name: /^Approvals/ }).click();
    const item = page.locator(`[data-testid="approval"][data-transfer-id="${swapId}"]`);
    await item.getByRole('button', { name: /^Approve/ }).click();
    await item.getByRole('button', { name: /^Confirm: approve/ }).click();
    await page.getByText('Nothing is waiting for approval.').waitFor();
    await shot('c02-swap-approved');
    const swap = await waitTransfer(swapId, 'confirmed');
    assert.match(swap.tx_hash, /^0x[0-9a-f]{64}$/);

    await page.getByRole('tab', { name: 'History' }).click();
    const row = page.locator(`[data-testid="history-row"][data-transfer-id="${swapId}"]`);
    await row.and(page.locator('[data-status="confirmed"]')).waitFor();
    assert.equal(await row.getAttribute('data-kind'), 'call');
    await row.getByTestId('call-function').filter({ hasText: 'swapExactTokensForETH' }).waitFor();
    const changes = await row.getByTestId('call-changes').textContent();
    assert.match(changes, new RegExp(`^−${SWAP_IN} token 0x.{4}….{4}, \\+0\\.0\\d+ ETH$`));
    const approveRow = page.locator(`[data-testid="history-row"][data-transfer-id="${approveId}"]`);
    await approveRow.getByTestId('call-function').filter({ hasText: /^approve$/ }).waitFor();
    assert.match(await approveRow.getByTestId('call-changes').textContent(), new RegExp(`^allows 0x.{4}….{4} ${SWAP_IN}$`));
    await shot('c03-history-calls');
  });

  it('shows the calls rules as a table in the policy editor, keeps the JSON in step, and places a 422', async () => {
    assert.ok(agentId, 'needs the set-up');
    await page.getByRole('tab', { name: 'Policy' }).click();
    const rules = page.getByTestId('call-rule');
    await rules.first().waitFor();
    assert.equal(await rules.count(), 2);
    assert.equal(await page.getByRole('textbox', { name: 'Rule 1 function' }).inputValue(), 'approve(address,uint256)');
    assert.equal((await page.getByRole('textbox', { name: 'Rule 1 contract' }).inputValue()).toLowerCase(), token.toLowerCase());
    const conditions = await page.getByRole('textbox', { name: 'Rule 1 argument conditions' }).inputValue();
    assert.deepEqual(JSON.parse(conditions.toLowerCase()), { 0: { eq: router.toLowerCase() } });
    assert.equal(await page.getByRole('textbox', { name: 'Rule 2 function' }).inputValue(), SWAP);
    assert.equal(await page.getByRole('combobox', { name: 'Rule 2 action' }).inputValue(), 'approve');
    assert.equal(await page.getByLabel('When no rule matches').inputValue(), 'deny');
    await shot('c04-policy-calls-table');

    // The swap rule moved first: the JSON view follows.
    await page.getByRole('button', { name: 'Move rule 2 up' }).click();
    assert.equal(await page.getByRole('textbox', { name: 'Rule 1 function' }).inputValue(), SWAP);
    await page.getByText('All contract-call settings as JSON').click();
    const json = JSON.parse(await page.getByTestId('calls-json').inputValue());
    assert.equal(json.rules[0].function, SWAP);
    assert.equal(json.rules[1].function, 'approve(address,uint256)');

    // A function the service cannot parse: the 422 shows next to that rule's function.
    const fn = page.getByRole('textbox', { name: 'Rule 2 function' });
    await fn.fill('approve(address,uint256');
    assert.equal(JSON.parse(await page.getByTestId('calls-json').inputValue()).rules[1].function, 'approve(address,uint256');
    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.getByRole('alert').filter({ hasText: /The policy was not saved/ }).waitFor();
    assert.equal(await fn.getAttribute('aria-invalid'), 'true');
    assert.ok((await page.locator('[data-testid="call-rule"][data-index="1"] .field-error:not([hidden])').count()) > 0);
    await shot('c05-policy-calls-422');

    // Edited in the JSON view instead: the table follows, and the policy saves.
    const fixed = { ...json, rules: [json.rules[1], json.rules[0]], allow_unlimited_approvals: false };
    await page.getByTestId('calls-json').fill(JSON.stringify(fixed, null, 2));
    assert.equal(await page.getByRole('textbox', { name: 'Rule 2 function' }).inputValue(), SWAP);
    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.getByTestId('policy-saved').filter({ hasText: /^Saved/ }).waitFor();
    const saved = await api('GET', `/api/agents/${agentId}/policy`, undefined, asAgent());
    assert.equal(saved.body.calls.rules[0].function, 'approve(address,uint256)', JSON.stringify(saved.body.calls));
    assert.equal(saved.body.calls.rules[1].action, 'approve', JSON.stringify(saved.body.calls));
    await shot('c06-policy-calls-saved');
  });

  it('logged no page errors and loaded nothing from elsewhere', () => {
    assert.deepEqual(pageErrors, []);
  });
});
