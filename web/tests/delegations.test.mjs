// The console's Delegations tab (docs/api.md §21) in headless Chromium against the real binary and anvil, with the
// real MetaMask Delegation Framework v1.3 deployed there (web/tests/delegation-framework.mjs) and an owner EOA
// upgraded to its delegator by EIP-7702: a browser wallet (an injected EIP-1193 provider whose key only this test
// holds) grants the agent a daily USDC budget from the console — the console builds the delegation, the wallet signs
// it (eth_signTypedData_v4), the console posts it; a wallet account that is no smart account (no code on the chain) is
// refused before it is asked to sign, with the routes to a delegating account. The delegation appears with its limit; a transfer through it (the API, `"delegation": id`) lands
// on chain, from the owner's account to the recipient; the console shows what is left this day; the Wallet tab's
// send form pays 1 USDC more from the owner's account through it, reviewed with what the delegation leaves; the revoke call it
// shows is the ABI encoding cast makes, and sent with the wallet it disables the delegation on chain, which the
// console then shows; removed from agentd with owner authority (the admin token), it shows removed. Then 0.1 ETH a
// week to one recipient until a set time: the native caveats the console builds are the ones the service reads.
// A wallet on another network is asked to switch before it signs a grant or sends a revocation, and one that stays
// there is asked for neither. History marks delegated sends and words their refusals (a revoked delegation as
// revoked); chat's "using the delegation" sends through the only one; GET …/budget and the console give one "can
// spend now" per delegation with its reason; a wallet with no ETH for the gas is warned before the send. Last, a new
// owner whose account is a plain EOA: the console reads its code, explains, and offers the wallet's own route, ERC-7715
// (the test wallet answers wallet_requestExecutionPermissions as MetaMask's Advanced Permissions do: it upgrades the
// account by EIP-7702 to the framework's delegator and returns a delegation to the agent's wallet it built and signed
// with the framework's real types); the console registers it, the agent spends under it, a send past the period is
// refused, and the wallet revokes it.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { join } from 'node:path';
import { mintUsdc, placeUsdc, tokenBalance, selector, word, USDC, mined } from '../../scripts/evm.mjs';
import { artifactsDir, callApi, overflowProblems, startStack, until, watchPage } from './harness.mjs';
import { castBin, deployFramework, newKey, signTypedData, upgradeToDelegator } from './delegation-framework.mjs';

// anvil's first dev account (unlocked): it deploys the framework and funds the agent.
const DEV = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
const RECIPIENT = '0x52908400098527886E0F7030069857D2E4169EE7';
const ADMIN = `adm_${randomBytes(24).toString('hex')}`;
const TIMEOUT = 20000;

describe('web console delegations', { timeout: 300000 }, () => {
  let stack;
  let page;
  let framework;
  let agentId;
  let agentToken;
  let wallet;
  // The owner's account (upgraded to the delegator) and one that is not: the test wallet's keys, held here only.
  const owner = newKey();
  const plain = newKey();
  const keys = new Map([owner, plain].map((k) => [k.address.toLowerCase(), k]));
  let account = plain.address;
  // The network the test wallet is on (anvil's base, 8453, unless a test moves it), whether it agrees to switch
  // when asked (wallet_switchEthereumChain), and what it was asked to do.
  let walletChain = '0x2105';
  let switchAllowed = true;
  const asked = [];
  // Whether the test wallet offers Advanced Permissions (ERC-7715), as MetaMask does: off until the last test.
  let permissionsOn = false;
  // What it was last asked to grant (wallet_requestExecutionPermissions), as it was asked.
  let permissionAsked = null;
  // The first daily USDC delegation (used twice, then revoked and removed by the first test).
  let usdcDelegation;
  const pageErrors = [];

  const api = (method, path, body) => callApi(stack.baseUrl, method, path, body, { 'x-agent-access-token': agentToken });
  const shot = (name) => page.screenshot({ path: join(artifactsDir, `${name}.png`), fullPage: true });

  before(async () => {
    stack = await startStack({
      env: { ADMIN_TOKEN: ADMIN, CONFIRMATIONS_BASE: '1' },
      prepare: async (rpc, rpcUrl) => {
        framework = await deployFramework(rpc);
        await rpc('anvil_setBalance', [owner.address, '0x8ac7230489e80000']);
        const code = await upgradeToDelegator(rpc, rpcUrl, owner, framework.delegator);
        assert.equal(code.toLowerCase(), `0xef0100${framework.delegator.slice(2).toLowerCase()}`, 'a 7702 designation');
        await placeUsdc(rpc);
        await mintUsdc(rpc, owner.address, 100_000_000n);
        return framework.env;
      },
    });
    const created = await callApi(
      stack.baseUrl,
      'POST',
      '/api/agents',
      { name: 'Delegated agent', chains: ['base'], capabilities: ['read', 'transact', 'analytics'], spending_cap: 1 },
      { authorization: `Bearer ${ADMIN}` },
    );
    assert.equal(created.status, 201, JSON.stringify(created.body));
    agentId = created.body.id;
    agentToken = created.body.access_token;
    wallet = created.body.wallet_addresses.base;
    // The agent's wallet pays the redemption's gas.
    await mined(stack.rpc, await stack.rpc('eth_sendTransaction', [{ from: DEV, to: wallet, value: '0xde0b6b3a7640000' }]));

    const context = await stack.browser.newContext({ viewport: { width: 1280, height: 900 } });
    // The browser holds the agent's token and, as its owner, the admin token (Remove needs owner authority).
    await context.addInitScript(
      ([id, token, admin]) => {
        localStorage.setItem(`agentd.token.${id}`, token);
        localStorage.setItem('agentd.adminToken', admin);
      },
      [agentId, agentToken, ADMIN],
    );
    // The test wallet: its account, typed data signed with that account's key (cast), transactions sent by anvil
    // from the account (impersonated: the node holds no key of it).
    await context.exposeBinding('__testWallet', async (_source, method, params) => {
      asked.push(method);
      if (method === 'eth_requestAccounts' || method === 'eth_accounts') return [account];
      if (method === 'eth_chainId') return walletChain;
      if (method === 'wallet_switchEthereumChain') {
        if (!switchAllowed) throw Object.assign(new Error('User rejected the request.'), { code: 4001 });
        walletChain = params[0].chainId;
        return null;
      }
      // A wallet on another network than the node's signs for, and sends to, that other network: the test holds the
      // console to never asking it to.
      if ((method === 'eth_signTypedData_v4' || method === 'eth_sendTransaction') && walletChain !== '0x2105') {
        throw new Error(`the test wallet was asked to ${method} while on chain ${walletChain}`);
      }
      if (method === 'eth_signTypedData_v4') {
        const key = keys.get(String(params[0]).toLowerCase());
        if (!key) throw new Error(`the test wallet holds no key of ${params[0]}`);
        return signTypedData(key, params[1]);
      }
      if (method === 'eth_sendTransaction') {
        await stack.rpc('anvil_impersonateAccount', [params[0].from]);
        return stack.rpc('eth_sendTransaction', params);
      }
      if (method === 'wallet_getSupportedExecutionPermissions' || method === 'wallet_requestExecutionPermissions') {
        if (!permissionsOn) throw Object.assign(new Error(`The method "${method}" does not exist / is not available.`), { code: -32601 });
        if (method === 'wallet_getSupportedExecutionPermissions') {
          return { 'erc20-token-periodic': { chainIds: ['0x2105'], ruleTypes: ['expiry'] } };
        }
        permissionAsked = params[0];
        return [await grantPermission(params[0])];
      }
      return stack.rpc(method, params ?? []);
    });
    await context.addInitScript(() => {
      window.ethereum = { request: ({ method, params }) => window.__testWallet(method, params ?? []) };
    });
    page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    // The console shows the 422 of the refused grant; the browser logs it itself.
    await watchPage(page, stack.baseUrl, pageErrors, [422]);
  });

  /**
   * The test wallet's ERC-7715 grant, as MetaMask's Advanced Permissions make one: the account, if plain, upgraded
   * by EIP-7702 to the framework's EIP7702StatelessDeleGator (a type-4 transaction the account signs itself), then a
   * delegation from it to the permission's `to` (the agent's wallet) with the framework's real types — an
   * ERC20PeriodTransferEnforcer caveat of the asked token, amount, period and start — signed with its key (EIP-712
   * under the DelegationManager), and returned ABI-encoded as the permission's `context` (cast's encoding).
   */
  async function grantPermission(request) {
    const key = keys.get(String(request.from).toLowerCase());
    if (!key) throw new Error(`the test wallet holds no key of ${request.from}`);
    assert.equal(request.permission.type, 'erc20-token-periodic');
    if ((await stack.rpc('eth_getCode', [key.address, 'latest'])) === '0x') {
      await upgradeToDelegator(stack.rpc, stack.rpcUrl, key, framework.delegator);
    }
    const { tokenAddress, periodAmount, periodDuration, startTime } = request.permission.data;
    const terms = `0x${tokenAddress.slice(2).toLowerCase()}${word(BigInt(periodAmount))}${word(BigInt(periodDuration))}${word(BigInt(startTime))}`;
    const unsigned = {
      delegate: request.to,
      delegator: key.address,
      authority: `0x${'f'.repeat(64)}`,
      caveats: [{ enforcer: framework.enforcers.erc20_period_transfer, terms, args: '0x' }],
      salt: BigInt(`0x${randomBytes(8).toString('hex')}`).toString(),
    };
    const typed = {
      types: {
        EIP712Domain: [
          { name: 'name', type: 'string' },
          { name: 'version', type: 'string' },
          { name: 'chainId', type: 'uint256' },
          { name: 'verifyingContract', type: 'address' },
        ],
        Delegation: [
          { name: 'delegate', type: 'address' },
          { name: 'delegator', type: 'address' },
          { name: 'authority', type: 'bytes32' },
          { name: 'caveats', type: 'Caveat[]' },
          { name: 'salt', type: 'uint256' },
        ],
        Caveat: [
          { name: 'enforcer', type: 'address' },
          { name: 'terms', type: 'bytes' },
        ],
      },
      primaryType: 'Delegation',
      domain: { name: 'DelegationManager', version: '1', chainId: 8453, verifyingContract: framework.manager },
      message: { ...unsigned, caveats: unsigned.caveats.map((c) => ({ enforcer: c.enforcer, terms: c.terms })) },
    };
    const d = { ...unsigned, signature: signTypedData(key, JSON.stringify(typed)) };
    const tuple = `(${d.delegate},${d.delegator},${d.authority},[${d.caveats.map((c) => `(${c.enforcer},${c.terms},${c.args})`).join(',')}],${d.salt},${d.signature})`;
    const context = execFileSync(castBin, ['abi-encode', 'f((address,address,bytes32,(address,bytes,bytes)[],uint256,bytes)[])', `[${tuple}]`])
      .toString()
      .trim();
    return { ...request, context, delegationManager: framework.manager, dependencies: [] };
  }

  after(async () => {
    if (page) await page.screenshot({ path: join(artifactsDir, 'delegations-zz-last-state.png'), fullPage: true }).catch(() => {});
    await stack?.stop();
  });

  it('grants a daily USDC budget with the browser wallet, sees it used on chain and what is left, and revokes it', async () => {
    await page.goto(`${stack.baseUrl}/#/agents/${agentId}/delegations`);
    const panel = page.getByTestId('delegations-panel');
    await panel.getByText(/No delegations yet/).waitFor();
    const form = page.getByTestId('grant-form');
    await form.getByLabel('Chain').selectOption('base');
    await form.getByLabel('Asset').selectOption('USDC');
    await form.getByLabel('Amount per period').fill('5');
    await form.getByLabel('Period', { exact: true }).selectOption({ label: 'a day' });
    await shot('delegations-01-form');

    // A wallet account that is neither a smart account nor upgraded: refused before the wallet is asked to sign
    // (its code on the chain is read first), with the ways to a delegating account.
    asked.length = 0;
    await form.getByRole('button', { name: 'Sign with my wallet and grant' }).click();
    const refusal = form.getByTestId('grant-plain-account');
    await refusal.waitFor();
    const said = await refusal.textContent();
    assert.ok(said.includes(`Your account ${plain.address} is a plain account on base: it has no code`), said);
    assert.ok(said.includes('Nothing was signed'), said);
    assert.match(said, /EIP-7702/);
    assert.match(said, /OWNER_KEY/, 'the demo route');
    assert.ok(asked.includes('eth_getCode'), asked.join(', '));
    assert.ok(!asked.includes('eth_signTypedData_v4'), `no signature asked: ${asked.join(', ')}`);
    await shot('delegations-02-refused');
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForTimeout(150);
    const narrow = await page.evaluate(overflowProblems);
    assert.deepEqual(narrow, [], `the refusal at 390 px does not fit:\n${narrow.join('\n')}`);
    await page.setViewportSize({ width: 1280, height: 900 });

    // The owner's account, upgraded to the delegator: granted.
    account = owner.address;
    await form.getByLabel('Amount per period').fill('5');
    await form.getByRole('button', { name: 'Sign with my wallet and grant' }).click();
    await form.getByTestId('grant-done').waitFor();
    assert.match(await form.getByTestId('grant-done').textContent(), /Granted: 5 USDC a day/);
    const card = panel.locator('[data-testid="delegation"][data-status="active"]');
    await card.waitFor();
    const id = await card.getAttribute('data-delegation-id');
    usdcDelegation = id;
    const hash = await card.getAttribute('data-hash');
    const limit = card.getByTestId('delegation-limit');
    assert.equal(await limit.getAttribute('data-asset'), 'base:USDC');
    assert.equal(await limit.getAttribute('data-amount'), '5');
    assert.equal(await limit.getAttribute('data-available'), '5');
    assert.match(await limit.textContent(), /5 USDC a day — left this day: 5 of 5 USDC/);
    assert.match(await card.textContent(), new RegExp(owner.address));
    assert.match(await card.textContent(), new RegExp(wallet));

    // The service holds what the console built: the agent's wallet as delegate, the owner as delegator, the limit.
    const listed = await api('GET', `/api/agents/${agentId}/delegations`);
    assert.equal(listed.status, 200, JSON.stringify(listed.body));
    assert.equal(listed.body.length, 1);
    assert.equal(listed.body[0].delegator, owner.address);
    assert.equal(listed.body[0].delegate, wallet);
    assert.deepEqual(
      listed.body[0].limits.map((l) => [l.asset, l.amount, l.period_seconds]),
      [['base:USDC', '5', 86400]],
    );

    // The revoke call shown is the manager and cast's own ABI encoding of disableDelegation(delegation).
    const revoke = form.getByTestId('revoke-call');
    assert.equal((await revoke.getByTestId('revoke-to').textContent()).toLowerCase(), framework.manager.toLowerCase());
    const granted = JSON.parse(await page.evaluate((h) => localStorage.getItem(`agentd.delegation.${h}`), hash.toLowerCase()));
    const d = granted.delegation;
    const tuple = `(${d.delegate},${d.delegator},${d.authority},[${d.caveats.map((c) => `(${c.enforcer},${c.terms},${c.args})`).join(',')}],${d.salt},${d.signature})`;
    const expected = execFileSync(castBin, ['calldata', 'disableDelegation((address,address,bytes32,(address,bytes,bytes)[],uint256,bytes))', tuple])
      .toString()
      .trim();
    assert.equal(await revoke.getByTestId('revoke-data').textContent(), expected);
    await shot('delegations-03-granted');

    // A transfer through the delegation: 1.5 USDC leave the owner's account for the recipient, on chain.
    const sent = await api('POST', `/api/agents/${agentId}/transfers`, {
      chain: 'base',
      to: RECIPIENT,
      amount: '1.5',
      asset: 'USDC',
      delegation: id,
    });
    assert.equal(sent.status, 201, JSON.stringify(sent.body));
    assert.equal(sent.body.from, owner.address);
    await until('the recipient holds 1.5 USDC on chain', async () => (await tokenBalance(stack.rpc, USDC, RECIPIENT)) === 1_500_000n);
    assert.equal(await tokenBalance(stack.rpc, USDC, owner.address), 98_500_000n, "it left the owner's account");

    // The console shows what is left this day.
    await until('the console shows 3.5 USDC left', async () => {
      await panel.getByRole('button', { name: 'Refresh' }).click();
      return (await panel.locator('[data-testid="delegation-limit"][data-available="3.5"]').count()) === 1;
    });
    assert.match(await panel.getByTestId('delegation-limit').textContent(), /left this day: 3\.5 of 5 USDC/);
    await shot('delegations-04-used');

    // The Wallet tab's send form offers to pay from the owner's account through the delegation: 1 USDC more.
    await page.getByRole('tab', { name: 'Wallet' }).click();
    const send = page.getByTestId('send-card');
    await send.getByLabel('Asset').selectOption('USDC');
    await send.getByLabel('Recipient').click();
    await until('the send form offers the delegation', async () => (await send.locator(`[data-testid="send-source"] option[value="${id}"]`).count()) === 1);
    await send.getByLabel('Pay from').selectOption(id);
    await send.getByLabel('Recipient').fill(RECIPIENT);
    await send.getByLabel('Amount', { exact: true }).fill('1');
    await send.getByRole('button', { name: 'Review' }).click();
    const review = send.getByTestId('send-review');
    await review.getByTestId('review-delegation').waitFor();
    assert.equal(await review.getByTestId('review-delegation').textContent(), '3.5 of 5 USDC left this day');
    assert.match(await review.textContent(), new RegExp(`From${owner.address}`));
    // The fee figure of the redemption the agent's wallet would sign (issue 54 point 6): its gas is the agent's.
    assert.match(await review.getByTestId('review-fee').textContent(), /^at most 0\.0\d+ ETH \(gas limit [\d,]+ × at most [\d.]+ gwei a unit/);
    await shot('delegations-05-send-review');
    await review.getByRole('button', { name: 'Confirm and send 1 USDC' }).click();
    await send.getByTestId('send-result').and(page.locator('[data-status="confirmed"]')).waitFor();
    assert.equal(await tokenBalance(stack.rpc, USDC, RECIPIENT), 2_500_000n, 'the recipient holds 2.5 USDC on chain');
    assert.equal(await tokenBalance(stack.rpc, USDC, owner.address), 97_500_000n, "from the owner's account");
    await page.getByRole('tab', { name: 'Delegations' }).click();
    await until('the console shows 2.5 USDC left', async () => {
      await panel.getByRole('button', { name: 'Refresh' }).click();
      return (await panel.locator('[data-testid="delegation-limit"][data-available="2.5"]').count()) === 1;
    });

    // What this browser remembered of the grant is gone (another browser; a delegation registered through the API):
    // the revoke call is built from the service's own view of the delegation, the same bytes, and revokes it below.
    await page.evaluate((h) => localStorage.removeItem(`agentd.delegation.${h}`), hash.toLowerCase());
    // The tab fits 1280 px and a phone (390 px): nothing past the right edge (checked as layout.test.mjs checks).
    for (const width of [390, 1280]) {
      await page.setViewportSize({ width, height: 844 });
      await page.reload();
      await panel.getByTestId('delegation-limit').waitFor();
      // With the revoke call (the manager's address and the calldata) open.
      await panel.getByTestId('revoke-call').locator('summary').click();
      await panel.getByTestId('revoke-data').waitFor();
      assert.equal(await panel.getByTestId('revoke-data').textContent(), expected);
      await page.waitForTimeout(150);
      const problems = await page.evaluate(overflowProblems);
      assert.deepEqual(problems, [], `the Delegations tab (freshly loaded) at ${width} px does not fit:\n${problems.join('\n')}`);
      await shot(`delegations-06-${width}px`);
    }

    // Revoked on chain with the wallet, from the delegator's account: the manager says so, and so does the console.
    const listedRevoke = card.getByTestId('revoke-call');
    await listedRevoke.getByRole('button', { name: 'Revoke it now with my wallet' }).click();
    await listedRevoke.getByTestId('revoke-status').filter({ hasText: /^Sent: transaction 0x/ }).waitFor();
    const disabled = await stack.rpc('eth_call', [
      { to: framework.manager, data: `0x${await selector(stack.rpc, 'disabledDelegations(bytes32)')}${word(hash)}` },
      'latest',
    ]);
    assert.equal(BigInt(disabled), 1n, 'the manager holds the delegation disabled');
    await until('the console shows the delegation revoked', async () => {
      await panel.getByRole('button', { name: 'Refresh' }).click();
      return (await panel.locator('[data-testid="delegation"][data-status="revoked"]').count()) === 1;
    });
    assert.match(await panel.getByTestId('delegation-status').textContent(), /Revoked on chain/);
    assert.match(await panel.getByTestId('delegation-limit').textContent(), /5 USDC a day — nothing can be spent through it now/);
    await shot('delegations-07-revoked');

    // Removed from agentd with owner authority (the admin token): listed as removed, and the service says so.
    page.once('dialog', (dialog) => dialog.accept());
    await panel.getByTestId('delegation-remove').click();
    await panel.locator('[data-testid="delegation"][data-status="removed"]').waitFor();
    assert.match(await panel.getByTestId('delegation-status').textContent(), /Removed from agentd/);
    const removed = await api('GET', `/api/agents/${agentId}/delegations/${id}`);
    assert.equal(removed.body.status, 'removed', JSON.stringify(removed.body));
    await shot('delegations-08-removed');

    // The native coin: 0.1 ETH a week to one recipient only, until a time two days ahead (local time): the console
    // adds exact_calldata with empty terms (plain sends), allowed_targets and timestamp caveats, which the service
    // reads back as the limit, the targets and the end.
    const end = new Date(Date.now() + 2 * 86400 * 1000);
    end.setSeconds(0, 0);
    const pad = (n) => String(n).padStart(2, '0');
    const local = `${end.getFullYear()}-${pad(end.getMonth() + 1)}-${pad(end.getDate())}T${pad(end.getHours())}:${pad(end.getMinutes())}`;
    await form.getByLabel('Asset').selectOption('ETH');
    await form.getByLabel('Amount per period').fill('0.1');
    await form.getByLabel('Period', { exact: true }).selectOption({ label: 'a week' });
    await form.getByLabel('Only to these recipients').fill(RECIPIENT);
    await form.getByLabel('Usable until').fill(local);
    await form.getByRole('button', { name: 'Sign with my wallet and grant' }).click();
    await form.getByTestId('grant-done').filter({ hasText: 'Granted: 0.1 ETH a week' }).waitFor();
    const native = panel.locator('[data-testid="delegation"][data-status="active"]');
    await native.waitFor();
    const nativeLimit = native.getByTestId('delegation-limit');
    assert.equal(await nativeLimit.getAttribute('data-asset'), 'base:ETH');
    assert.equal(await nativeLimit.getAttribute('data-available'), '0.1');
    assert.match(await nativeLimit.textContent(), /0\.1 ETH a week — left this week: 0\.1 of 0\.1 ETH/);
    assert.match(await native.textContent(), new RegExp(`Only to these contracts or addresses: ${RECIPIENT}`));
    const nativeId = await native.getAttribute('data-delegation-id');
    const read = await api('GET', `/api/agents/${agentId}/delegations/${nativeId}`);
    assert.equal(read.status, 200, JSON.stringify(read.body));
    assert.deepEqual(read.body.caveats.map((c) => c.kind), ['native_token_period_transfer', 'exact_calldata', 'allowed_targets', 'timestamp']);
    assert.deepEqual(read.body.targets, [RECIPIENT]);
    assert.equal(read.body.expires_at, Math.floor(end.getTime() / 1000));
    // In the browser's own local time and words.
    const shown = await page.evaluate((ms) => new Date(ms).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' }), end.getTime());
    assert.ok((await native.textContent()).includes(`usable until ${shown}`), await native.textContent());
    await shot('delegations-09-native');

    assert.deepEqual(pageErrors, []);
  });

  it('asks a wallet on another network to switch to the delegation\'s chain, and signs or sends nothing elsewhere', async () => {
    await page.goto(`${stack.baseUrl}/#/agents/${agentId}/delegations`);
    const panel = page.getByTestId('delegations-panel');
    const form = page.getByTestId('grant-form');
    const native = panel.locator('[data-testid="delegation"][data-status="active"]');
    await native.waitFor();
    account = owner.address;
    // The wallet is on Ethereum (chain 1) and declines to switch: the grant stops before any signature.
    walletChain = '0x1';
    switchAllowed = false;
    asked.length = 0;
    await form.getByLabel('Asset').selectOption('USDC');
    await form.getByLabel('Amount per period').fill('1');
    await form.getByRole('button', { name: 'Sign with my wallet and grant' }).click();
    const refusal = form.getByRole('alert').filter({ hasText: /network/ });
    await refusal.waitFor();
    const words = await refusal.textContent();
    assert.ok(words.includes('Your wallet is on chain 1, not on base (chain 8453)'), words);
    assert.ok(words.includes('Nothing was signed'), words);
    assert.ok(asked.includes('eth_chainId') && asked.includes('wallet_switchEthereumChain'), asked.join(', '));
    assert.ok(!asked.includes('eth_signTypedData_v4'), `nothing signed: ${asked.join(', ')}`);
    await shot('delegations-10-wrong-network-grant');

    // "Revoke it now with my wallet" on that network: not sent, and said why.
    asked.length = 0;
    const revoke = native.getByTestId('revoke-call');
    await revoke.locator('summary').click();
    await revoke.getByRole('button', { name: 'Revoke it now with my wallet' }).click();
    const status = revoke.getByTestId('revoke-status');
    await status.filter({ hasText: /^Not sent/ }).waitFor();
    assert.ok((await status.textContent()).includes('Your wallet is on chain 1, not on base (chain 8453)'), await status.textContent());
    assert.ok(!asked.includes('eth_sendTransaction'), `nothing sent: ${asked.join(', ')}`);

    // The wallet agrees to switch: the console asks for base's chain id, then sends the revocation there.
    switchAllowed = true;
    asked.length = 0;
    await revoke.getByRole('button', { name: 'Revoke it now with my wallet' }).click();
    await status.filter({ hasText: /^Sent: transaction 0x/ }).waitFor();
    assert.equal(walletChain, '0x2105');
    assert.ok(asked.indexOf('wallet_switchEthereumChain') < asked.indexOf('eth_sendTransaction'), asked.join(', '));
    await until('the console shows the native delegation revoked', async () => {
      await panel.getByRole('button', { name: 'Refresh' }).click();
      return (await panel.locator('[data-testid="delegation"][data-status="active"]').count()) === 0;
    });
    await shot('delegations-11-switched-and-revoked');
    assert.deepEqual(pageErrors, []);
  });

  it('marks delegated sends in History and words the refusals of delegated sends, a revoked delegation as revoked', async () => {
    // A fresh daily budget of 2 USDC, granted from the console (the wallet is on base again).
    await page.goto(`${stack.baseUrl}/#/agents/${agentId}/delegations`);
    await page.reload();
    const form = page.getByTestId('grant-form');
    account = owner.address;
    await form.getByLabel('Asset').selectOption('USDC');
    await form.getByLabel('Amount per period').fill('2');
    await form.getByLabel('Period', { exact: true }).selectOption({ label: 'a day' });
    await form.getByRole('button', { name: 'Sign with my wallet and grant' }).click();
    await form.getByTestId('grant-done').waitFor();
    const listed = await api('GET', `/api/agents/${agentId}/delegations`);
    const budget = listed.body.find((d) => d.status === 'active' && d.limits[0].asset === 'base:USDC');
    const revokedNative = listed.body.find((d) => d.status === 'revoked' && d.limits[0].asset === 'base:ETH');
    assert.ok(budget && revokedNative, JSON.stringify(listed.body.map((d) => [d.status, d.limits[0].asset])));

    // More than the delegation leaves this period: refused by agentd before anything is signed.
    const over = await api('POST', `/api/agents/${agentId}/transfers`, { chain: 'base', to: RECIPIENT, amount: '3', asset: 'USDC', delegation: budget.id });
    assert.equal(over.status, 403, JSON.stringify(over.body));
    assert.equal(over.body.error.details.rule, 'delegation_limit');
    // Through the delegation its owner revoked on chain (agentd recorded it revoked).
    const stale = await api('POST', `/api/agents/${agentId}/transfers`, { chain: 'base', to: RECIPIENT, amount: '0.01', delegation: revokedNative.id });
    assert.equal(stale.status, 422, JSON.stringify(stale.body));
    assert.equal(stale.body.error.code, 'delegation_not_active');

    await page.getByRole('tab', { name: 'History' }).click();
    // The two delegated sends of the first test: marked, from the owner's account, not the agent's wallet.
    const delegated = page.locator('[data-testid="history-row"][data-delegation]');
    await until('two delegated sends in History', async () => (await delegated.count()) === 2);
    for (const row of await delegated.all()) {
      assert.equal(await row.getAttribute('data-delegation'), usdcDelegation);
      const mark = row.getByTestId('delegated-from');
      assert.ok((await mark.textContent()).includes('from the owner\u2019s account'), await mark.textContent());
      assert.equal(await mark.locator('code').getAttribute('title'), owner.address);
    }
    const own = page.locator('[data-testid="history-row"]:not([data-delegation])');
    assert.equal(await own.getByTestId('delegated-from').count(), 0, "the agent's own sends are not marked");

    // The refusals, in words: what the delegation left, and the delegation revoked, never a bare code.
    const refused = page.locator('[data-testid="activity-row"][data-activity="refused"]');
    await until('two refusals', async () => (await refused.count()) >= 2);
    const overRow = refused.filter({ has: page.locator('[data-rule="delegation_limit"]') });
    await overRow.waitFor();
    const overWords = await overRow.getByTestId('activity-reason').textContent();
    assert.ok(overWords.includes('More than the delegation leaves this period'), overWords);
    assert.ok(overWords.includes('the delegation leaves 2 USDC this period'), overWords);
    assert.ok((await overRow.getByTestId('delegated-from').textContent()).includes('from the owner\u2019s account'));
    const staleRow = refused.filter({ has: page.locator('[data-code="delegation_not_active"]') });
    const staleWords = await staleRow.getByTestId('activity-reason').textContent();
    assert.ok(staleWords.includes('The delegation was revoked on chain by its delegator'), staleWords);
    for (const words of [overWords, staleWords]) {
      assert.doesNotMatch(words, /Refused: |unknown, removed or expired/, words);
    }
    for (const width of [390, 1280]) {
      await page.setViewportSize({ width, height: 844 });
      await page.waitForTimeout(150);
      const problems = await page.evaluate(overflowProblems);
      assert.deepEqual(problems, [], `History with delegated sends at ${width} px does not fit:\n${problems.join('\n')}`);
      await shot(`delegations-12-history-${width}px`);
    }
    assert.deepEqual(pageErrors, []);
  });

  it('sends through the only delegation when chat asks "using the delegation" (the builtin engine)', async () => {
    const listed = await api('GET', `/api/agents/${agentId}/delegations`);
    const budget = listed.body.find((d) => d.status === 'active' && d.limits[0].asset === 'base:USDC');
    assert.ok(budget, 'the 2 USDC a day budget of the test before');
    const before = await tokenBalance(stack.rpc, USDC, owner.address);
    await page.getByRole('tab', { name: 'Chat' }).click();
    const composer = page.getByLabel('Message', { exact: true });
    await composer.fill(`send 1 USDC to ${RECIPIENT} on base using the delegation`);
    await page.getByRole('button', { name: 'Send' }).click();
    const answer = page.locator('[data-testid="message"][data-role="assistant"][data-state="done"]').last();
    await answer.waitFor();
    const sendCard = answer.locator('[data-testid="chain-call"][data-tool="send_token"]');
    await sendCard.waitFor();
    await sendCard.locator('summary').click();
    const args = JSON.parse(await sendCard.getByTestId('chain-call-args').textContent());
    assert.equal(args.delegation, budget.id, JSON.stringify(args));
    await until("1 USDC left the owner's account", async () => (await tokenBalance(stack.rpc, USDC, owner.address)) === before - 1_000_000n);
    const history = await api('GET', `/api/agents/${agentId}/transactions?limit=1`);
    assert.equal(history.body[0].delegation?.id, budget.id, JSON.stringify(history.body[0]));
    await shot('delegations-13-chat-through-the-delegation');
    assert.deepEqual(pageErrors, []);
  });

  it('shows one "can spend now" per delegation with its reason, as GET …/budget states it beside the windows', async () => {
    // The agent's own daily USDC limit: 4, of which the delegated sends of the day counted 3.5 (1.5 + 1 through the
    // first delegation, 1 through the second): 0.5 left, below the 1 USDC the second delegation leaves.
    const policy = await callApi(stack.baseUrl, 'PUT', `/api/agents/${agentId}/policy`, { limits: { 'base:USDC': { per_day: '4' } } }, { authorization: `Bearer ${ADMIN}` });
    assert.equal(policy.status, 200, JSON.stringify(policy.body));
    const listed = await api('GET', `/api/agents/${agentId}/delegations`);
    const budget = listed.body.find((d) => d.status === 'active' && d.limits[0].asset === 'base:USDC');
    const stated = await api('GET', `/api/agents/${agentId}/budget`);
    assert.equal(stated.status, 200, JSON.stringify(stated.body));
    assert.equal(stated.body.limits['base:USDC'].per_day.left, '0.5', JSON.stringify(stated.body));
    const entry = stated.body.delegations.find((d) => d.delegation_id === budget.id);
    assert.deepEqual(
      [entry.asset, entry.available, entry.spendable, entry.bound_by, entry.delegator],
      ['base:USDC', '1', '0.5', 'per_day', owner.address],
      JSON.stringify(stated.body.delegations),
    );

    // The Delegations tab: what the delegation leaves, and what can be spent now, with the reason.
    await page.goto(`${stack.baseUrl}/#/agents/${agentId}/delegations`);
    await page.reload();
    const card = page.locator(`[data-testid="delegation"][data-delegation-id="${budget.id}"]`);
    const spend = card.getByTestId('delegation-spendable');
    await spend.waitFor();
    assert.equal(await spend.getAttribute('data-bound-by'), 'per_day');
    assert.equal(await spend.getAttribute('data-spendable'), '0.5');
    const words = await spend.textContent();
    assert.match(words, /Can spend now: 0\.5 USDC/);
    assert.match(words, /the agent.s own daily limit of 4 USDC has 0\.5 left/);

    // The send form: the same figure for that source, in the choice and in the review.
    await page.getByRole('tab', { name: 'Wallet' }).click();
    const send = page.getByTestId('send-card');
    await send.getByLabel('Asset').selectOption('USDC');
    await send.getByLabel('Recipient').click();
    const option = send.locator(`[data-testid="send-source"] option[value="${budget.id}"]`);
    await until('the send form offers the delegation', async () => (await option.count()) === 1);
    assert.match(await option.textContent(), /0\.5 USDC can be spent now \(daily limit\)/);
    await send.getByLabel('Pay from').selectOption(budget.id);
    await send.getByLabel('Recipient').fill(RECIPIENT);
    await send.getByLabel('Amount', { exact: true }).fill('0.4');
    await send.getByRole('button', { name: 'Review' }).click();
    const review = send.getByTestId('send-review');
    const can = review.getByTestId('review-spendable');
    await can.waitFor();
    assert.match(await can.textContent(), /^0\.5 USDC: the agent.s own daily limit of 4 USDC has 0\.5 left, delegated sends counted \(the delegation leaves 1\)/);
    for (const width of [390, 1280]) {
      await page.setViewportSize({ width, height: 844 });
      await page.waitForTimeout(150);
      const problems = await page.evaluate(overflowProblems);
      assert.deepEqual(problems, [], `the send review at ${width} px does not fit:\n${problems.join('\n')}`);
      await shot(`delegations-14-can-spend-now-${width}px`);
    }
    assert.deepEqual(pageErrors, []);
  });

  it('warns before a send when the agent holds no ETH for the gas, with its address and a QR code to fund it', async () => {
    // The agent's wallet pays the gas of every send, a delegated one too: with 0 ETH, a delegated USDC send is refused.
    await stack.rpc('anvil_setBalance', [wallet, '0x0']);
    const listed = await api('GET', `/api/agents/${agentId}/delegations`);
    const budget = listed.body.find((d) => d.status === 'active' && d.limits[0].asset === 'base:USDC');
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${stack.baseUrl}/#/agents/${agentId}/wallet`);
    await page.reload();
    const send = page.getByTestId('send-card');
    await send.getByLabel('Asset').selectOption('USDC');
    await send.getByLabel('Recipient').click();
    const option = send.locator(`[data-testid="send-source"] option[value="${budget.id}"]`);
    await until('the send form offers the delegation', async () => (await option.count()) === 1);
    await send.getByLabel('Pay from').selectOption(budget.id);
    await send.getByLabel('Recipient').fill(RECIPIENT);
    await send.getByLabel('Amount', { exact: true }).fill('0.1');
    await send.getByRole('button', { name: 'Review' }).click();
    const review = send.getByTestId('send-review');
    const warning = review.getByTestId('review-no-gas');
    await warning.waitFor();
    const words = await warning.textContent();
    assert.match(words, /holds no ETH on base/);
    assert.match(words, /pays the network fee/);
    assert.ok(words.includes(wallet), `the address to fund: ${words}`);
    await warning.getByRole('img', { name: new RegExp(`QR code for ethereum:${wallet}@8453`) }).waitFor();
    // The review expects the refusal: not offered as "Confirm and send".
    await review.getByRole('button', { name: 'Send anyway (the review expects a refusal)' }).waitFor();
    for (const width of [390, 1280]) {
      await page.setViewportSize({ width, height: 844 });
      await page.waitForTimeout(150);
      const problems = await page.evaluate(overflowProblems);
      assert.deepEqual(problems, [], `the review warning at ${width} px does not fit:\n${problems.join('\n')}`);
      await shot(`delegations-15-no-gas-${width}px`);
    }
    // Funded again: no warning.
    await stack.rpc('anvil_setBalance', [wallet, '0xde0b6b3a7640000']);
    await review.getByRole('button', { name: 'Back to edit' }).click();
    await send.getByRole('button', { name: 'Review' }).click();
    await review.getByTestId('review-spendable').waitFor();
    assert.equal(await review.getByTestId('review-no-gas').count(), 0);
    assert.deepEqual(pageErrors, []);
  });

  it('takes a plain account to a delegation through the wallet\'s permission request (ERC-7715): upgraded, granted, spent, refused past its period, revoked', async () => {
    // A new owner whose account is a plain EOA on the chain (no code), holding 20 USDC and ETH for its own upgrade.
    const fresh = newKey();
    keys.set(fresh.address.toLowerCase(), fresh);
    account = fresh.address;
    await stack.rpc('anvil_setBalance', [fresh.address, '0xde0b6b3a7640000']);
    await mintUsdc(stack.rpc, fresh.address, 20_000_000n);
    assert.equal(await stack.rpc('eth_getCode', [fresh.address, 'latest']), '0x', 'a plain account');
    // The agent's own daily USDC limit of an earlier test would bind first: the owner lifts it.
    const lifted = await callApi(stack.baseUrl, 'PUT', `/api/agents/${agentId}/policy`, {}, { authorization: `Bearer ${ADMIN}` });
    assert.equal(lifted.status, 200, JSON.stringify(lifted.body));
    permissionsOn = true;
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${stack.baseUrl}/#/agents/${agentId}/delegations`);
    await page.reload();
    const panel = page.getByTestId('delegations-panel');
    const form = page.getByTestId('grant-form');
    await form.getByLabel('Chain').selectOption('base');
    await form.getByLabel('Asset').selectOption('USDC');
    await form.getByLabel('Amount per period').fill('3');
    await form.getByLabel('Period', { exact: true }).selectOption({ label: 'a day' });
    asked.length = 0;
    await form.getByRole('button', { name: 'Sign with my wallet and grant' }).click();
    // The console reads the account's code and explains, then offers the wallet's own route: nothing signed yet.
    const refusal = form.getByTestId('grant-plain-account');
    await refusal.waitFor();
    assert.ok((await refusal.textContent()).includes(`Your account ${fresh.address} is a plain account on base`));
    const offer = refusal.getByTestId('permission-offer');
    await offer.waitFor();
    assert.match(await offer.textContent(), /Advanced Permissions \(ERC-7715\)/);
    assert.ok(asked.includes('wallet_getSupportedExecutionPermissions'), asked.join(', '));
    assert.ok(!asked.includes('eth_signTypedData_v4') && !asked.includes('wallet_requestExecutionPermissions'), asked.join(', '));
    for (const width of [390, 1280]) {
      await page.setViewportSize({ width, height: 844 });
      await page.waitForTimeout(150);
      const problems = await page.evaluate(overflowProblems);
      assert.deepEqual(problems, [], `the permission offer at ${width} px does not fit:\n${problems.join('\n')}`);
      await shot(`delegations-16-permission-offer-${width}px`);
    }
    await page.setViewportSize({ width: 1280, height: 900 });

    // The wallet is asked for the permission (as MetaMask would be): the agent's wallet as `to`, the budget asked.
    await offer.getByRole('button', { name: 'Ask my wallet for this permission instead' }).click();
    await form.getByTestId('grant-done').filter({ hasText: /Granted through your wallet.s permission request: 3 USDC a day/ }).waitFor();
    assert.equal(permissionAsked.to, wallet);
    assert.equal(permissionAsked.from, fresh.address);
    assert.equal(permissionAsked.chainId, '0x2105');
    assert.equal(permissionAsked.permission.data.tokenAddress.toLowerCase(), USDC.toLowerCase());
    assert.equal(BigInt(permissionAsked.permission.data.periodAmount), 3_000_000n);
    assert.equal(permissionAsked.permission.data.periodDuration, 86400);
    // The account is a delegating account now (an EIP-7702 designation of the framework's delegator), and the
    // service holds the wallet's delegation, from it to the agent's wallet.
    const code = await stack.rpc('eth_getCode', [fresh.address, 'latest']);
    assert.equal(code.toLowerCase(), `0xef0100${framework.delegator.slice(2).toLowerCase()}`);
    const listed = await api('GET', `/api/agents/${agentId}/delegations`);
    const mine = listed.body.find((d) => d.delegator === fresh.address);
    assert.ok(mine, JSON.stringify(listed.body));
    assert.equal(mine.status, 'active');
    assert.equal(mine.delegate, wallet);
    assert.deepEqual(mine.limits.map((l) => [l.asset, l.amount, l.period_seconds, l.available]), [['base:USDC', '3', 86400, '3']]);
    const card = panel.locator(`[data-testid="delegation"][data-delegation-id="${mine.id}"]`);
    await card.waitFor();
    await shot('delegations-17-permission-granted');

    // The agent spends under it: 2 USDC leave the new owner's account, on chain.
    const held = await tokenBalance(stack.rpc, USDC, RECIPIENT);
    const sent = await api('POST', `/api/agents/${agentId}/transfers`, { chain: 'base', to: RECIPIENT, amount: '2', asset: 'USDC', delegation: mine.id });
    assert.equal(sent.status, 201, JSON.stringify(sent.body));
    assert.equal(sent.body.from, fresh.address);
    await until('the recipient got 2 USDC on chain', async () => (await tokenBalance(stack.rpc, USDC, RECIPIENT)) === held + 2_000_000n);
    assert.equal(await tokenBalance(stack.rpc, USDC, fresh.address), 18_000_000n, "from the new owner's account");
    // A send past what the period leaves (1 USDC) is refused before anything is signed.
    const nonce = await stack.rpc('eth_getTransactionCount', [wallet, 'latest']);
    const over = await api('POST', `/api/agents/${agentId}/transfers`, { chain: 'base', to: RECIPIENT, amount: '2', asset: 'USDC', delegation: mine.id });
    assert.equal(over.status, 403, JSON.stringify(over.body));
    assert.equal(over.body.error.details.rule, 'delegation_limit');
    assert.equal(await stack.rpc('eth_getTransactionCount', [wallet, 'latest']), nonce, 'nothing was signed');
    assert.equal(await tokenBalance(stack.rpc, USDC, fresh.address), 18_000_000n);

    // Revoked on chain with the wallet, from the new owner's account: the console shows it revoked.
    const revoke = form.getByTestId('revoke-call');
    await revoke.getByRole('button', { name: 'Revoke it now with my wallet' }).click();
    await revoke.getByTestId('revoke-status').filter({ hasText: /^Sent: transaction 0x/ }).waitFor();
    await until('the console shows the delegation revoked', async () => {
      await panel.getByRole('button', { name: 'Refresh' }).click();
      return (await panel.locator(`[data-testid="delegation"][data-delegation-id="${mine.id}"][data-status="revoked"]`).count()) === 1;
    });
    const late = await api('POST', `/api/agents/${agentId}/transfers`, { chain: 'base', to: RECIPIENT, amount: '0.5', asset: 'USDC', delegation: mine.id });
    assert.ok(late.status >= 400, JSON.stringify(late.body));
    assert.equal(await tokenBalance(stack.rpc, USDC, fresh.address), 18_000_000n, 'nothing moved after the revocation');
    await shot('delegations-18-permission-revoked');
    permissionsOn = false;
    assert.deepEqual(pageErrors, []);
  });
});
