// The console's history tab in headless Chromium against the real binary and anvil: confirmed transfers with
// their explorer links, paging through `?limit=&before=`, a pending transfer cancelled with the Cancel button
// (anvil with automine off, then one block mined) shown `cancelled` with the hash it replaced, the spending chart
// with the cap and the daily limit, and the policy editor round-tripping `allowed_hosts`.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { join } from 'node:path';
import { artifactsDir, assertLocalTx, startStack, watchPage } from './harness.mjs';
import { mined } from '../../scripts/evm.mjs';

const RECIPIENT = '0x52908400098527886E0F7030069857D2E4169EE7';
// anvil's first dev account (unlocked: it funds the agent).
const DEV = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
const TIMEOUT = 20000;
const CONFIRMED = 12;

describe('web console history', { timeout: 240000 }, () => {
  let stack;
  let page;
  let agentId;
  let agentToken;
  let cancelledId;
  let cancelledHash;
  const pageErrors = [];

  const api = async (method, path, body) => {
    const response = await fetch(stack.baseUrl + path, {
      method,
      headers: { 'content-type': 'application/json', ...(agentToken ? { 'x-agent-access-token': agentToken } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : null };
  };
  const shot = (name) => page.screenshot({ path: join(artifactsDir, `${name}.png`), fullPage: true });
  const rows = () => page.getByTestId('history-row');

  before(async () => {
    stack = await startStack({ env: { CONFIRMATIONS_BASE: '1' } });
    const created = await api('POST', '/api/agents', {
      name: 'History agent',
      chains: ['base'],
      capabilities: ['read', 'transact', 'analytics'],
      spending_cap: 1,
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    agentId = created.body.id;
    agentToken = created.body.access_token;
    const hash = await stack.rpc('eth_sendTransaction', [
      { from: DEV, to: created.body.wallet_addresses.base, value: '0x8ac7230489e80000' },
    ]);
    assert.match(hash, /^0x[0-9a-f]{64}$/);
    // anvil answers with the hash before its miner seals the block: the first transfer must see the funds.
    await mined(stack.rpc, hash);
    const policy = await api('PUT', `/api/agents/${agentId}/policy`, { limits: { 'base:ETH': { per_day: '0.5' } } });
    assert.equal(policy.status, 200, JSON.stringify(policy.body));

    // Twelve transfers that land at once (automine), one after the other so their order is known.
    for (let i = 0; i < CONFIRMED; i += 1) {
      const sent = await api('POST', `/api/agents/${agentId}/transfers`, { chain: 'base', to: RECIPIENT, amount: '0.001' });
      assert.equal(sent.status, 201, JSON.stringify(sent.body));
    }
    // The thirteenth stays pending: anvil stops mining until the test mines a block.
    await stack.rpc('evm_setAutomine', [false]);
    const pending = await api('POST', `/api/agents/${agentId}/transfers`, { chain: 'base', to: RECIPIENT, amount: '0.002' });
    assert.equal(pending.status, 201, JSON.stringify(pending.body));
    assert.equal(pending.body.status, 'pending');
    cancelledId = pending.body.id;
    cancelledHash = pending.body.tx_hash;

    const context = await stack.browser.newContext({ viewport: { width: 1360, height: 900 } });
    await context.addInitScript(([id, token]) => localStorage.setItem(`agentd.token.${id}`, token), [agentId, agentToken]);
    page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    await watchPage(page, stack.baseUrl, pageErrors);
  });

  after(async () => {
    if (page) await page.screenshot({ path: join(artifactsDir, 'history-zz-last-state.png'), fullPage: true }).catch(() => {});
    await stack?.stop();
  });

  it('cancels a pending transfer with its Cancel button; once mined it shows cancelled with the hash it replaced', async () => {
    await page.goto(`${stack.baseUrl}/#/agents/${agentId}/history`);
    await page.getByRole('heading', { name: 'History agent' }).waitFor();
    const row = page.locator(`[data-testid="history-row"][data-transfer-id="${cancelledId}"]`);
    await row.and(page.locator('[data-status="pending"]')).waitFor();
    assert.match(await row.textContent(), /0\.002 ETH/);
    await shot('h01-history-pending');

    await row.getByRole('button', { name: /^Cancel the transfer of 0\.002 ETH/ }).click();
    await row.getByText('cancel sent').waitFor();
    const transfer = await api('GET', `/api/agents/${agentId}/transfers/${cancelledId}`);
    assert.deepEqual(transfer.body.replaced_hashes, [cancelledHash], JSON.stringify(transfer.body));
    await stack.rpc('evm_setAutomine', [true]);
    await stack.rpc('anvil_mine', ['0x1']);

    // The tab reads pending transfers again by itself until they settle.
    const settled = page.locator(`[data-testid="history-row"][data-transfer-id="${cancelledId}"][data-status="cancelled"]`);
    await settled.waitFor();
    assert.match(await settled.locator('td').nth(1).textContent(), /cancelled/);
    await assertLocalTx(settled.getByTestId('replaced'), cancelledHash);
    assert.equal(await settled.getByRole('button', { name: /^Cancel/ }).count(), 0, 'a settled transfer has no Cancel button');
    const after = await api('GET', `/api/agents/${agentId}/transfers/${cancelledId}`);
    assert.equal(after.body.status, 'cancelled', JSON.stringify(after.body));
    await assertLocalTx(settled.getByTestId('tx'), after.body.tx_hash);
    await shot('h02-history-cancelled');
  });

  it('lists confirmed transfers with their hashes (a local node: no explorer link), a page at a time', async () => {
    assert.ok(agentId, 'needs the set-up');
    await page.getByLabel('Per page').selectOption('10');
    await page.getByTestId('history-count').filter({ hasText: /^10 transfers shown$/ }).waitFor();
    assert.equal(await rows().count(), 10);
    // Newest first: the cancelled one, then the confirmed ones.
    assert.equal(await rows().first().getAttribute('data-transfer-id'), cancelledId);

    const listed = await api('GET', `/api/agents/${agentId}/transactions?limit=500`);
    assert.equal(listed.body.length, CONFIRMED + 1);
    const confirmed = listed.body.find((t) => t.status === 'confirmed');
    const confirmedRow = page.locator(`[data-testid="history-row"][data-transfer-id="${confirmed.id}"]`);
    await confirmedRow.and(page.locator('[data-status="confirmed"]')).waitFor();
    assert.match(await confirmedRow.textContent(), /0\.001 ETH/);
    assert.match(await confirmedRow.textContent(), /0x529084/);
    await assertLocalTx(confirmedRow.getByTestId('tx'), confirmed.tx_hash);
    await shot('h03-history-page-1');

    await page.getByRole('button', { name: 'Older transfers' }).click();
    await page.getByTestId('history-count').filter({ hasText: /^13 transfers shown$/ }).waitFor();
    const ids = await rows().evaluateAll((els) => els.map((e) => e.dataset.transferId));
    assert.deepEqual(ids, listed.body.map((t) => t.id), 'both pages together: the whole history, newest first, once each');
    assert.equal(await page.getByRole('button', { name: 'Older transfers' }).isHidden(), true, 'the short page is the last');
    await shot('h04-history-page-2');
  });

  it('charts spending per day against the daily limit and the cap', async () => {
    assert.ok(agentId, 'needs the set-up');
    const chart = page.locator('[data-testid="spending-chart"][data-asset="base:ETH"]');
    await chart.waitFor();
    assert.equal(await chart.getByTestId('cap-line').getAttribute('data-value'), '1');
    assert.equal(await chart.getByTestId('daily-limit-line').getAttribute('data-value'), '0.5');
    // Today's bar holds the twelve confirmed transfers; the cancelled one moved nothing.
    const bars = chart.getByTestId('day-bar');
    assert.equal(await bars.count(), 14);
    assert.equal(await bars.last().getAttribute('data-amount'), '0.012');
    const capY = Number(await chart.getByTestId('cap-line').getAttribute('y1'));
    const limitY = Number(await chart.getByTestId('daily-limit-line').getAttribute('y1'));
    const barY = Number(await bars.last().getAttribute('y'));
    assert.ok(capY < limitY && limitY < barY, `cap above the limit above today's bar: ${capY} ${limitY} ${barY}`);
    assert.match(await chart.getAttribute('aria-label'), /base:ETH: 0\.012 today, daily limit 0\.5, cap 1/);
    await shot('h05-spending-chart');
  });

  it('round-trips allowed_hosts through the policy editor', async () => {
    assert.ok(agentId, 'needs the set-up');
    await page.getByRole('tab', { name: 'Policy' }).click();
    await page.getByLabel('Only pay the hosts listed here').check();
    await page.getByLabel('Allowed hosts').fill('api.example.com\nData.Example.org:8443');
    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.getByTestId('policy-saved').filter({ hasText: /^Saved/ }).waitFor();
    const policy = await api('GET', `/api/agents/${agentId}/policy`);
    assert.equal(policy.status, 200);
    assert.deepEqual(
      policy.body.allowed_hosts.map((h) => h.toLowerCase()),
      ['api.example.com', 'data.example.org:8443'],
      JSON.stringify(policy.body),
    );
    assert.equal(policy.body.limits['base:ETH'].per_day, '0.5', 'the other rules are kept');

    await page.reload();
    await page.getByLabel('Allowed hosts').waitFor();
    assert.equal(await page.getByLabel('Only pay the hosts listed here').isChecked(), true);
    assert.equal(
      (await page.getByLabel('Allowed hosts').inputValue()).toLowerCase(),
      'api.example.com\ndata.example.org:8443',
    );

    // Back to any host.
    await page.getByLabel('Only pay the hosts listed here').uncheck();
    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.getByTestId('policy-saved').filter({ hasText: /^Saved/ }).waitFor();
    assert.equal((await api('GET', `/api/agents/${agentId}/policy`)).body.allowed_hosts, null);
    await shot('h06-policy-allowed-hosts');
  });

  it('logged no page errors and loaded nothing from elsewhere', () => {
    assert.deepEqual(pageErrors, []);
  });
});
