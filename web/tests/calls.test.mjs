// Contract calls in the console, in headless Chromium against the real binary (ADMIN_TOKEN set, so the agent is
// guarded) and anvil with the real Uniswap V2 (the npm builds in test-tools): the agent approves the router through
// the calls API (allowed by a rule), then asks a swap that a rule holds for approval; the inbox shows the swap's
// function, arguments and "You send / You receive" lines; the owner (admin token entered in the console) approves
// it; the history shows the call confirmed with its function and changes; the policy editor shows the calls rules
// as a table, keeps the JSON in step, and puts a 422 field error next to the rule's function. Then (issue 37) the
// rules' conditions are written as fields (argument, operator, values) and a WETH deposit rule is added so; the Wallet
// tab's call composer offers the router the deployment names (CONTRACTS_BASE) to an agent that never called it,
// composes the token's approve of the router from the contract the agent called before,
// simulates it (the allowance it grants, allowed), sends it and the chain shows the allowance; an approve to another
// spender is refused naming the rule and the condition with the value it had; a WETH deposit with a value is
// simulated, sent and shows on chain, and one over the rule's value condition is refused naming it. The policy and
// the composer fit at 1280 and 390 px.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { artifactsDir, callApi, overflowProblems, startStack, watchPage, openFold } from './harness.mjs';
import { call, deploy, selector, send, tokenBalance, uniswap, word } from '../../scripts/evm.mjs';

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
    // Uniswap V2 as published on npm, deployed before agentd starts so that the deployment names its router
    // (`CONTRACTS_BASE`, as scripts/demo.sh does): a test ERC-20 (its whole supply minted to the dev account),
    // WETH9, the factory and the router, and a token/WETH pool of 100 000 tokens and 10 ETH.
    const prepare = async (rpc) => {
      token = await deploy(rpc, uniswap('v2-core', 'ERC20.json') + word(1_000_000n * E18));
      weth = await deploy(rpc, uniswap('v2-periphery', 'WETH9.json'));
      const factory = await deploy(rpc, uniswap('v2-core', 'UniswapV2Factory.json') + word(DEV));
      router = await deploy(rpc, uniswap('v2-periphery', 'UniswapV2Router02.json') + word(factory) + word(weth));
      for (const a of [token, weth, factory, router]) assert.match(a, /^0x[0-9a-f]{40}$/i);
      await call(rpc, token, 'approve(address,uint256)', [word(router), word(100_000n * E18)]);
      await call(
        rpc,
        router,
        'addLiquidityETH(address,uint256,uint256,uint256,address,uint256)',
        [word(token), word(100_000n * E18), word(0n), word(0n), word(DEV), word(BigInt(2 ** 40))],
        10n * E18,
      );
      return { CONTRACTS_BASE: `Uniswap V2 router=${router}` };
    };
    stack = await startStack({ env: { ADMIN_TOKEN: ADMIN, CONFIRMATIONS_BASE: '1' }, prepare });

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
        // A day's limit on the token (base units: not a registry token) and on ETH: the approve and the swap are
        // counted against it, and the console states what the service counted.
        limits: { [`base:${token.toLowerCase()}`]: { per_day: (1000n * E18).toString() }, 'base:ETH': { per_day: '10' } },
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

  it('shows the calls rules in the policy editor, keeps the JSON in step, and places a 422', async () => {
    assert.ok(agentId, 'needs the set-up');
    await page.getByRole('tab', { name: 'Policy' }).click();
    // After the approve and the swap through it, the day has counted the amount once (the swap pulled within the
    // allowance the approve counted), and the console shows the service's own figure of what is left.
    const key = `base:${token.toLowerCase()}`;
    const stated = (await api('GET', `/api/agents/${agentId}/budget`, undefined, asAgent())).body.limits[key].per_day;
    assert.deepEqual(stated, {
      limit: (1000n * E18).toString(),
      counted: SWAP_IN.toString(),
      left: (1000n * E18 - SWAP_IN).toString(),
    });
    const day = page.locator(`[data-testid="policy-budget-daily"][data-asset="${key}"]`);
    await day.waitFor();
    assert.equal(await day.getAttribute('data-left'), stated.left);
    const rules = page.getByTestId('call-rule');
    await rules.first().waitFor();
    assert.equal(await rules.count(), 2);
    assert.equal(await page.getByRole('textbox', { name: 'Rule 1 function' }).inputValue(), 'approve(address,uint256)');
    assert.equal((await page.getByRole('textbox', { name: 'Rule 1 contract' }).inputValue()).toLowerCase(), token.toLowerCase());
    assert.equal(await page.getByRole('combobox', { name: 'Rule 1 condition 1 argument' }).inputValue(), '0');
    assert.equal(await page.getByRole('combobox', { name: 'Rule 1 condition 1 operator' }).inputValue(), 'eq');
    assert.equal((await page.getByRole('textbox', { name: 'Rule 1 condition 1 value' }).inputValue()).toLowerCase(), router.toLowerCase());
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

  /** Fails naming what sticks out at 1280 and 390 px; a screenshot at each. */
  async function assertFits(name) {
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 900 });
      await page.waitForTimeout(200);
      const problems = await page.evaluate(overflowProblems);
      assert.deepEqual(problems, [], `${name} at ${width} px does not fit:\n${problems.join('\n')}`);
      await shot(`${name}-${width}`);
    }
    await page.setViewportSize({ width: 1360, height: 900 });
  }

  async function allowance(owner, spender) {
    const data = `0x${await selector(stack.rpc, 'allowance(address,address)')}${word(owner)}${word(spender)}`;
    return BigInt(await stack.rpc('eth_call', [{ to: token, data }, 'latest']));
  }

  it('writes call-rule conditions as fields, keeps the JSON in step, and fits the rules in their card', async () => {
    assert.ok(agentId, 'needs the set-up');
    await page.getByRole('tab', { name: 'Policy' }).click();
    // The saved rule's condition reads as fields: argument 0, eq, the router.
    const arg = page.getByRole('combobox', { name: 'Rule 1 condition 1 argument' });
    await arg.waitFor();
    assert.equal(await arg.inputValue(), '0');
    // The argument field offers the function's parameters (known names for approve).
    const offered = page.locator('[data-testid="call-rule"][data-index="0"] datalist option[value="0"]');
    assert.equal(await offered.getAttribute('label'), 'spender (address)');
    const op = page.getByRole('combobox', { name: 'Rule 1 condition 1 operator' });
    assert.equal(await op.inputValue(), 'eq');
    const operand = page.getByRole('textbox', { name: 'Rule 1 condition 1 value' });
    assert.equal((await operand.inputValue()).toLowerCase(), router.toLowerCase());
    // The spender may be the router or the agent itself: "in" with a comma-separated list.
    await op.selectOption('in');
    await operand.fill(`${router}, $agent`);
    let json = JSON.parse(await page.getByTestId('calls-json').inputValue());
    assert.deepEqual(json.rules[0].args, { 0: { in: [router, '$agent'] } });

    // A new rule: WETH's deposit() with a value of at most 0.5, written in fields.
    await page.getByRole('button', { name: 'Add call rule' }).click();
    await page.getByRole('textbox', { name: 'Rule 3 contract' }).fill(weth);
    await page.getByRole('textbox', { name: 'Rule 3 function' }).fill('deposit()');
    const rule3 = page.locator('[data-testid="call-rule"][data-index="2"]');
    await rule3.getByRole('button', { name: 'Add value condition' }).click();
    await page.getByRole('combobox', { name: 'Rule 3 value condition 1 operator' }).selectOption('lte');
    await page.getByRole('textbox', { name: 'Rule 3 value condition 1 value' }).fill('0.5');
    // A condition added and removed leaves nothing behind.
    await rule3.getByRole('button', { name: 'Add argument condition' }).click();
    await page.getByRole('button', { name: 'Remove rule 3 condition 1' }).click();
    json = JSON.parse(await page.getByTestId('calls-json').inputValue());
    assert.deepEqual(json.rules[2], { chain: 'base', to: weth, function: 'deposit()', action: 'allow', value: { lte: '0.5' } });
    // Every rule's action and buttons are on screen, at both widths.
    for (const n of [1, 2, 3]) assert.ok(await page.getByRole('combobox', { name: `Rule ${n} action` }).isVisible());
    await assertFits('c07-policy-conditions');

    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.getByTestId('policy-saved').filter({ hasText: /^Saved/ }).waitFor();
    const saved = (await api('GET', `/api/agents/${agentId}/policy`, undefined, asAgent())).body.calls;
    assert.equal(saved.rules[0].args[0].in.length, 2, JSON.stringify(saved));
    assert.equal(saved.rules[0].args[0].in[1], '$agent', JSON.stringify(saved));
    assert.deepEqual(saved.rules[2].value, { lte: '0.5' }, JSON.stringify(saved));
    assert.equal(saved.rules[2].function, 'deposit()', JSON.stringify(saved));
  });

  it('offers the contracts the deployment names from the start, to an agent that never called them', async () => {
    // A new agent: no policy names the router and it has called nothing.
    const created = await api(
      'POST',
      '/api/agents',
      { name: 'Fresh agent', chains: ['base'], capabilities: ['read', 'transact'], spending_cap: 1, owner_addresses: { base: DEV } },
      asAdmin,
    );
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const fresh = created.body.id;
    // In a page of its own, with that agent's token saved, so that the other steps' page stays as it is.
    const other = await page.context().newPage();
    other.setDefaultTimeout(TIMEOUT);
    try {
      await other.addInitScript(([id, t]) => localStorage.setItem(`agentd.token.${id}`, t), [fresh, created.body.access_token]);
      await other.goto(`${stack.baseUrl}/#/agents/${fresh}/wallet`);
      await other.getByRole('heading', { name: 'Fresh agent' }).waitFor();
      const composer = other.getByTestId('call-composer');
      await composer.waitFor();
      const named = composer
        .getByTestId('call-contract-pick')
        .locator('optgroup[label="Contracts of this deployment on base"] option', { hasText: 'Uniswap V2 router' });
      await named.waitFor({ state: 'attached' });
      assert.equal((await named.getAttribute('value')).toLowerCase(), router.toLowerCase());
      await composer.getByTestId('call-contract-pick').selectOption(await named.getAttribute('value'));
      assert.equal((await composer.getByTestId('call-to').inputValue()).toLowerCase(), router.toLowerCase());
      await other.screenshot({ path: join(artifactsDir, 'c07b-compose-named-contract.png'), fullPage: true });
    } finally {
      await other.close();
    }
  });

  it('composes an approve in the Wallet tab, simulates it, sends it, and the chain shows the allowance', async () => {
    assert.ok(agentId, 'needs the set-up');
    await page.getByRole('tab', { name: 'Wallet' }).click();
    const composer = page.getByTestId('call-composer');
    await composer.waitFor();
    // A registry token is offered (approve suggested), and an amount of it reads back in whole units.
    const usdc = composer.locator('optgroup[label="Tokens on base"] option', { hasText: 'USDC' }).first();
    await composer.getByTestId('call-contract-pick').selectOption(await usdc.getAttribute('value'));
    assert.equal(await composer.getByTestId('call-function-pick').inputValue(), 'approve(address,uint256)');
    await composer.locator('input[data-arg="amount"]').fill('2500000');
    assert.equal(await composer.getByTestId('call-arg-units').textContent(), '= 2.5 USDC');
    // The token the agent called before is offered among the known contracts.
    const offered = await page.waitForFunction(
      (t) => [...document.querySelectorAll('[data-testid="call-contract-pick"] option')].find((o) => o.value.toLowerCase() === t)?.value,
      token.toLowerCase(),
    );
    await composer.getByTestId('call-contract-pick').selectOption(await offered.jsonValue());
    assert.equal((await composer.getByTestId('call-to').inputValue()).toLowerCase(), token.toLowerCase());
    await composer.getByTestId('call-function-pick').selectOption('approve(address,uint256)');
    await composer.locator('input[data-arg="spender"]').fill(router);
    await composer.locator('input[data-arg="amount"]').fill((5n * E18).toString());
    await composer.getByRole('button', { name: 'Simulate' }).click();

    const verdict = composer.getByTestId('call-verdict');
    await verdict.waitFor();
    assert.equal(await verdict.getAttribute('data-result'), 'allow', await verdict.textContent());
    assert.match(await verdict.textContent(), /^Allowed: /);
    assert.equal((await composer.getByTestId('call-function').textContent()).trim(), 'approve');
    const allow = composer.getByTestId('effect-allow');
    assert.match(await allow.textContent(), new RegExp(`^You allow 0x.{4}….{4} to spend ${5n * E18} \\(base units\\) of token 0x`));
    assert.equal((await allow.locator('code').first().getAttribute('title')).toLowerCase(), router.toLowerCase());
    await assertFits('c08-compose-simulated');

    await composer.getByRole('button', { name: 'Review and send' }).click();
    const review = composer.getByTestId('call-review');
    assert.match(await review.textContent(), /approve on 0x/);
    await review.getByRole('button', { name: 'Send the call' }).click();
    const result = composer.getByTestId('call-result');
    await result.and(page.locator('[data-status="confirmed"]')).waitFor({ timeout: 30000 });
    assert.match(await result.getByTestId('call-line').textContent(), /^Transaction 0x/);
    assert.equal(await allowance(address, router), 5n * E18, 'the chain shows the allowance the console sent');
    await shot('c09-compose-sent');
  });

  it('refuses a composed call naming the rule and the condition it did not meet', async () => {
    assert.ok(agentId, 'needs the set-up');
    const composer = page.getByTestId('call-composer');
    await composer.locator('input[data-arg="spender"]').fill(DEV);
    assert.equal(await composer.getByTestId('call-simulation').isHidden(), true, 'an edit hides the last simulation');
    await composer.getByRole('button', { name: 'Simulate' }).click();
    const verdict = composer.getByTestId('call-verdict');
    await verdict.and(page.locator('[data-result="deny"]')).waitFor();
    const text = await verdict.getByTestId('call-verdict-words').textContent();
    const hex = '0x[0-9a-fA-F]{40}';
    assert.match(
      text,
      new RegExp(
        `^The agent's policy refuses this call \\(rule call_denied\\): rule 1 \\(approve\\(address,uint256\\) on ${hex}\\) ` +
          `did not allow it: argument 0 must be in \\[${hex}, \\$agent \\(${hex}\\)\\]; it was ${DEV}\\.$`,
      ),
    );
    assert.doesNotMatch(await verdict.textContent(), /policy_denied/, 'the code is not the sentence');
    // The refusal links to the rule that made it, in Policy.
    const link = verdict.getByRole('link', { name: 'See rule 1 in Policy' });
    assert.equal(await link.getAttribute('href'), `#/agents/${agentId}/policy`);
    assert.equal(await composer.getByRole('button', { name: 'Review and send' }).count(), 0, 'a refused call is not offered for sending');
    await assertFits('c10-compose-refused');

    // The agent asks the same through the API: refused in the same words, and History shows them from the audit.
    const refused = await api(
      'POST',
      `/api/agents/${agentId}/calls`,
      { chain: 'base', to: token, function: 'approve(address,uint256)', args: [DEV, '1'] },
      asAgent(),
    );
    assert.equal(refused.status, 403, JSON.stringify(refused.body));
    assert.equal(refused.body.error.details.rule, 'call_denied');
    const words = /\(rule call_denied\): (.*)$/.exec(refused.body.error.message)?.[1];
    assert.ok(words?.startsWith('rule 1 (approve(address,uint256) on '), refused.body.error.message);
    assert.ok(text.includes(words), `the simulation said the same: ${text}`);
    await page.getByRole('tab', { name: 'History' }).click();
    const row = page.locator('[data-testid="activity-row"][data-activity="refused"]');
    await row.first().waitFor();
    const reason = row.first().getByTestId('activity-reason');
    assert.equal(await reason.getAttribute('data-rule'), 'call_denied');
    assert.equal((await reason.textContent()).includes(`Refused by the calls rules: ${words}.`), true, await reason.textContent());
    await shot('c10-history-refused-call');
    await page.getByRole('tab', { name: 'Wallet' }).click();
  });

  it('wraps ETH with a composed deposit and a value; over the rule\'s value condition it is refused naming it', async () => {
    assert.ok(agentId, 'needs the set-up');
    const composer = page.getByTestId('call-composer');
    await composer.getByTestId('call-contract-pick').selectOption('');
    await composer.getByTestId('call-to').fill(weth);
    await composer.getByTestId('call-function-pick').selectOption('deposit()');
    await composer.getByTestId('call-value').fill('0.6');
    await composer.getByRole('button', { name: 'Simulate' }).click();
    const verdict = composer.getByTestId('call-verdict');
    await verdict.and(page.locator('[data-result="deny"]')).waitFor();
    assert.match(await verdict.textContent(), /rule 3 \(deposit\(\) on 0x[0-9a-fA-F]{40}\) did not allow it: value must be at most 0\.5; it was 0\.6/);

    await composer.getByTestId('call-value').fill('0.1');
    await composer.getByRole('button', { name: 'Simulate' }).click();
    await verdict.and(page.locator('[data-result="allow"]')).waitFor();
    assert.match(await composer.getByTestId('effect-send').textContent(), /^You send 0\.1 ETH$/);
    assert.match(await composer.getByTestId('effect-receive').textContent(), new RegExp(`^You receive ${E18 / 10n} \\(base units\\) of token 0x`));
    await composer.getByRole('button', { name: 'Review and send' }).click();
    await composer.getByTestId('call-review').getByRole('button', { name: 'Send the call' }).click();
    await composer.getByTestId('call-result').and(page.locator('[data-status="confirmed"]')).waitFor({ timeout: 30000 });
    assert.equal(await tokenBalance(stack.rpc, weth, address), E18 / 10n, 'the chain shows the WETH the deposit made');
    await shot('c11-compose-deposit-sent');
  });

  it('takes amounts in token units, names known contracts as arguments, warns at a minimum output of 0, links a refusal to its rule', async () => {
    assert.ok(agentId, 'needs the set-up');
    await page.getByRole('tab', { name: 'Wallet' }).click();
    const composer = page.getByTestId('call-composer');
    // The option of a known contract, whatever the case its address is spelled in.
    const pickContract = async (address) => {
      const value = await page.waitForFunction(
        (a) => [...document.querySelectorAll('[data-testid="call-contract-pick"] option')].find((o) => o.value.toLowerCase() === a)?.value,
        address.toLowerCase(),
      );
      await composer.getByTestId('call-contract-pick').selectOption(await value.jsonValue());
    };
    await pickContract(router);
    await composer.getByTestId('call-function-pick').selectOption(SWAP);
    // The deadline is a time, not an amount: its hint says so, and it is filled in twenty minutes ahead.
    const deadline = composer.locator('.field').filter({ has: page.locator('input[data-arg="deadline"]') });
    assert.match(await deadline.locator('small.hint').first().textContent(), /Unix time in seconds/);
    assert.doesNotMatch(await deadline.textContent(), /base units/);
    const filled = Number(await composer.locator('input[data-arg="deadline"]').inputValue());
    assert.ok(Math.abs(filled - (Date.now() / 1000 + 1200)) < 120, `deadline ${filled}`);
    // Amounts in a token's units, with its decimals: 2.5 USDC (6), 0.5 ETH (18).
    const amountIn = composer.locator('input[data-arg="amountIn"]');
    const inField = composer.locator('.field').filter({ has: page.locator('input[data-arg="amountIn"]') });
    await amountIn.fill('2.5 USDC');
    assert.equal(await inField.getByTestId('call-arg-units').textContent(), '= 2500000 base units of USDC');
    await amountIn.fill('0.5 ETH');
    assert.equal(await inField.getByTestId('call-arg-units').textContent(), `= ${E18 / 2n} base units of ETH`);
    // A minimum output of 0: warned.
    const minOut = composer.locator('input[data-arg="amountOutMin"]');
    await minOut.fill('0');
    const warning = composer.getByTestId('call-arg-warning');
    await warning.waitFor();
    assert.match(await warning.textContent(), /A minimum output of 0 accepts any price/);
    await minOut.fill('1 ETH');
    assert.equal(await warning.count(), 0, 'no warning once a minimum is set');
    // Known contracts by name as arguments: the path from the registry's tokens, the recipient as this agent.
    const path = composer.locator('input[data-arg="path"]');
    const pathField = composer.locator('.field').filter({ has: page.locator('input[data-arg="path"]') });
    await path.fill('');
    await pathField.getByTestId('call-arg-known').selectOption({ label: 'USDC token' });
    await pathField.getByTestId('call-arg-known').selectOption({ label: 'WETH token' });
    assert.equal(await path.inputValue(), 'USDC, WETH');
    const usdcAddress = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
    assert.ok((await pathField.getByTestId('call-arg-resolved').textContent()).includes(usdcAddress.slice(0, 6)));
    const toField = composer.locator('.field').filter({ has: page.locator('input[data-arg="to"]') });
    await toField.getByTestId('call-arg-known').selectOption({ label: 'Uniswap V2 router' });
    assert.equal(await composer.locator('input[data-arg="to"]').inputValue(), 'Uniswap V2 router');
    assert.ok((await toField.getByTestId('call-arg-resolved').textContent()).toLowerCase().includes(router.slice(0, 6).toLowerCase()));
    await assertFits('c12-compose-units-and-names');

    // The refusal of the approve to another spender links to its rule in Policy, which opens at that rule.
    await pickContract(token);
    await composer.getByTestId('call-function-pick').selectOption('approve(address,uint256)');
    await composer.locator('input[data-arg="spender"]').fill(DEV);
    await composer.locator('input[data-arg="amount"]').fill('1');
    await composer.getByTestId('call-value').fill('');
    await composer.getByRole('button', { name: 'Simulate' }).click();
    const verdict = composer.getByTestId('call-verdict');
    await verdict.and(page.locator('[data-result="deny"]')).waitFor();
    await verdict.getByRole('link', { name: 'See rule 1 in Policy' }).click();
    await page.getByRole('tab', { name: 'Policy', selected: true }).waitFor();
    assert.equal(await page.evaluate(() => location.hash), `#/agents/${agentId}/policy`);
    const rule = page.locator('[data-testid="call-rule"][data-index="0"]');
    await rule.and(page.locator('.revealed')).waitFor();
    assert.ok(await rule.evaluate((el) => { const r = el.getBoundingClientRect(); return r.top < innerHeight && r.bottom > 0; }), 'the rule is on screen');
    await shot('c13-refusal-opens-its-rule');
  });

  it('logged no page errors and loaded nothing from elsewhere', () => {
    assert.deepEqual(pageErrors, []);
  });
});
