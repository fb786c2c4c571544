// x402 in headless Chromium against the real binary and anvil (docs/api.md §16): an agent fetches a paid resource
// (the node paywall of scripts/evm.mjs, protocol v2, settling through an EIP-3009 token at USDC's base address) whose
// price is above its policy's `approval_above` on base:USDC, so the payment waits unsigned; the approvals inbox shows
// the resource's host and path, the price and payTo, and approves it with the admin token; the service then makes
// the paid request itself, and the agent's history shows the payment confirmed with its settlement link.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { artifactsDir, assertLocalTx, callApi, startStack, watchPage } from './harness.mjs';
import { USDC, mintUsdc, placeUsdc, startPaywall, tokenBalance } from '../../scripts/evm.mjs';

// The payee (EIP-55, as x402 servers send it).
const PAY_TO = '0x52908400098527886E0F7030069857D2E4169EE7';
const ADMIN = `adm_${randomBytes(24).toString('hex')}`;
const TIMEOUT = 20000;
const PRICE = 10000n; // 0.01 USDC

describe('web console x402 approvals', { timeout: 240000 }, () => {
  let stack;
  let paywall;
  let page;
  let agentId;
  let agentToken;
  let address;
  const pageErrors = [];

  const api = (method, path, body, headers) => callApi(stack.baseUrl, method, path, body, headers);
  const asAdmin = { authorization: `Bearer ${ADMIN}` };
  const asAgent = () => ({ 'x-agent-access-token': agentToken });
  const shot = (name) => page.screenshot({ path: join(artifactsDir, `${name}.png`), fullPage: true });

  before(async () => {
    // The paywall is on 127.0.0.1, which the URL guard refuses unless X402_ALLOW_PRIVATE is set.
    stack = await startStack({ env: { ADMIN_TOKEN: ADMIN, CONFIRMATIONS_BASE: '1', X402_ALLOW_PRIVATE: 'true' } });
    const created = await api(
      'POST',
      '/api/agents',
      { name: 'Paying agent', chains: ['base'], capabilities: ['read', 'transact', 'analytics'], spending_cap: 1 },
      asAdmin,
    );
    assert.equal(created.status, 201, JSON.stringify(created.body));
    agentId = created.body.id;
    agentToken = created.body.access_token;
    address = created.body.wallet_addresses.base;

    await placeUsdc(stack.rpc);
    await mintUsdc(stack.rpc, address, 1_000_000n);
    // The facilitator (sends the settlement, pays its gas) is anvil's second dev account.
    const [, facilitator] = await stack.rpc('eth_accounts');
    paywall = await startPaywall({
      rpc: stack.rpc,
      facilitator,
      entry: {
        scheme: 'exact',
        network: 'eip155:8453',
        amount: PRICE.toString(),
        asset: USDC,
        payTo: PAY_TO,
        maxTimeoutSeconds: 300,
        extra: { name: 'USD Coin', version: '2' },
      },
      path: '/paid',
      description: 'a paid resource of the browser tests',
      type: 'text/plain',
      body: () => 'paid content',
    });
    const policy = await api('PUT', `/api/agents/${agentId}/policy`, { limits: { 'base:USDC': { approval_above: '0.005' } } }, asAdmin);
    assert.equal(policy.status, 200, JSON.stringify(policy.body));

    const context = await stack.browser.newContext({ viewport: { width: 1360, height: 900 } });
    // The agent's token saved earlier, and the operator's admin token entered earlier (as the settings tab offers).
    await context.addInitScript(
      ([id, token, admin]) => {
        localStorage.setItem(`agentd.token.${id}`, token);
        localStorage.setItem('agentd.adminToken', admin);
      },
      [agentId, agentToken, ADMIN],
    );
    page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    await watchPage(page, stack.baseUrl, pageErrors);
  });

  after(async () => {
    if (page) await page.screenshot({ path: join(artifactsDir, 'x402-zz-last-state.png'), fullPage: true }).catch(() => {});
    await paywall?.close();
    await stack?.stop();
  });

  it('approves a waiting x402 payment in the inbox; the service pays and the history shows it confirmed', async () => {
    // The agent asks for the paid resource (with a query that holds a key: it is never kept or shown).
    const waiting = await api(
      'POST',
      `/api/agents/${agentId}/x402/fetch`,
      { url: paywall.url('/paid?api_key=secret-query-value'), max_amount: '0.05' },
      asAgent(),
    );
    assert.equal(waiting.status, 202, JSON.stringify(waiting.body));
    assert.equal(waiting.body.status, 402);
    assert.equal(waiting.body.payment.status, 'awaiting_approval', JSON.stringify(waiting.body));
    const transferId = waiting.body.payment.transfer_id;
    assert.equal(paywall.paidRequests(), 0, 'nothing is signed while the payment waits');

    await page.goto(`${stack.baseUrl}/#/agents/${agentId}/chat`);
    await page.getByRole('heading', { name: 'Paying agent' }).waitFor();
    await page.getByTestId('approval-count').filter({ hasText: '1' }).waitFor();
    await page.getByRole('tab', { name: /^Approvals/ }).click();
    const item = page.locator(`[data-testid="approval"][data-transfer-id="${transferId}"]`);
    await item.waitFor();
    const described = await item.getByTestId('approval-x402').textContent();
    const { host } = new URL(paywall.base);
    assert.match(described, new RegExp(`${host.replace(/\./g, '\\.')}/paid`), described);
    assert.match(described, /price 0\.01 USDC/, described);
    assert.doesNotMatch(await item.textContent(), /secret-query-value/);
    assert.match(await item.textContent(), new RegExp(PAY_TO, 'i'));
    await shot('x01-approval-waiting');

    await item.getByRole('button', { name: /^Approve 0\.01 USDC for / }).click();
    await item.getByRole('button', { name: /^Confirm: approve 0\.01 USDC for / }).click();
    await page.getByText('Nothing is waiting for approval.').waitFor();
    // The approval's answer carries what the paid request bought: shown where the decision was taken.
    const boughtHere = page.locator(`[data-testid="approval-bought"][data-transfer-id="${transferId}"]`);
    await boughtHere.getByTestId('paid-answer-body').filter({ hasText: /^paid content$/ }).waitFor();
    await shot('x02-approved');

    // The service made the paid request itself, once, and kept the resource's answer on the transfer.
    assert.equal(paywall.paidRequests(), 1);
    assert.equal(paywall.settlements.length, 1);
    const settlement = paywall.settlements[0].hash;
    assert.equal(await tokenBalance(stack.rpc, USDC, PAY_TO), PRICE);

    await page.getByRole('tab', { name: 'History' }).click();
    const row = page.locator(`[data-testid="history-row"][data-transfer-id="${transferId}"]`);
    await row.and(page.locator('[data-status="confirmed"]')).waitFor();
    assert.equal(await row.getAttribute('data-kind'), 'x402');
    const shown = await row.getByTestId('x402').textContent();
    assert.match(shown, new RegExp(`${host.replace(/\./g, '\\.')}/paid`), shown);
    assert.match(await row.textContent(), /0\.01 USDC/);
    assert.doesNotMatch(await row.textContent(), /secret-query-value/);
    await assertLocalTx(row.getByTestId('tx'), settlement);
    // What it bought: the resource's answer kept on the transfer, shown as text with its status.
    await row.getByTestId('x402-bought').click();
    const bought = row.getByTestId('paid-answer');
    await bought.getByTestId('paid-answer-body').filter({ hasText: /^paid content$/ }).waitFor();
    assert.equal(await bought.getAttribute('data-status'), '200');
    assert.match(await bought.getByTestId('paid-answer-facts').textContent(), /HTTP 200/);
    await shot('x03-history-confirmed');

    const transfer = await api('GET', `/api/agents/${agentId}/transfers/${transferId}`, undefined, asAgent());
    assert.equal(transfer.status, 200);
    assert.equal(transfer.body.status, 'confirmed', JSON.stringify(transfer.body));
    assert.equal(transfer.body.kind, 'x402');
    assert.equal(transfer.body.tx_hash, settlement);
    assert.equal(transfer.body.x402.response.status, 200, JSON.stringify(transfer.body));
    assert.equal(transfer.body.x402.response.body, 'paid content');
  });

  it('logged no page errors and loaded nothing from elsewhere', () => {
    assert.deepEqual(pageErrors, []);
  });
});
