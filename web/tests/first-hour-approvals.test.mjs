// The first hour of an owner, for approvals and the activity feed, in headless Chromium against the real binary
// (ADMIN_TOKEN set, so agents are guarded) and anvil: a policy set in the console's editor; a transfer asked through
// the API (not the chat) appears by itself in the Approvals tab with the rule that held it, the fee and what is left
// of the daily limit, and is approved through the confirmation step and lands on chain; another is rejected with a
// reason; a request over the daily limit is refused and shows in History, beside the transfers, with the limit
// named and what was left; chat prose follows its transfers' live status and names the model's usage so that it
// does not read as crypto tokens; the chart's daily bars show under a cap far above them; and the inbox shows what
// waits across two agents, one of which the browser reads with the admin token alone, and approves from there.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { artifactsDir, assertHeldAboveThreshold, assertRefusedInHistory, callApi, startStack, until, watchPage, openFold } from './harness.mjs';
import { mined } from '../../scripts/evm.mjs';

const RECIPIENT = '0x52908400098527886E0F7030069857D2E4169EE7';
const RECIPIENT_B = '0x8617E340B3D01FA5F11F306F4090FD50E238070D';
// anvil's first dev account (unlocked: it funds the agents).
const DEV = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
const ADMIN = `adm_${randomBytes(24).toString('hex')}`;
const TIMEOUT = 20000;
const ETH = 10n ** 18n;
const milli = (n) => (BigInt(n) * ETH) / 1000n;

describe('first hour: approvals and activity', { timeout: 300000 }, () => {
  let stack;
  let page;
  const agents = {};
  const pageErrors = [];

  const api = (method, path, body, headers) => callApi(stack.baseUrl, method, path, body, headers);
  const asAdmin = { authorization: `Bearer ${ADMIN}` };
  const asAgent = (name) => ({ 'x-agent-access-token': agents[name].token });
  const shot = (name) => page.screenshot({ path: join(artifactsDir, `${name}.png`), fullPage: true });
  const balanceOf = async (address) => BigInt(await stack.rpc('eth_getBalance', [address, 'latest']));
  const transfer = (name, amount, to = RECIPIENT) =>
    api('POST', `/api/agents/${agents[name].id}/transfers`, { chain: 'base', to, amount }, asAgent(name));
  const statusOf = async (name, id) =>
    (await api('GET', `/api/agents/${agents[name].id}/transfers/${id}`, undefined, asAgent(name))).body;

  before(async () => {
    stack = await startStack({ env: { ADMIN_TOKEN: ADMIN, CONFIRMATIONS_BASE: '1' } });
    // Two guarded agents, as an operator makes them, each funded with 10 ETH from anvil's dev account.
    for (const [key, name] of [
      ['a', 'Treasury agent'],
      ['b', 'Research agent'],
    ]) {
      const created = await api(
        'POST',
        '/api/agents',
        { name, chains: ['base'], capabilities: ['read', 'transact', 'analytics'], spending_cap: 1 },
        asAdmin,
      );
      assert.equal(created.status, 201, JSON.stringify(created.body));
      agents[key] = { id: created.body.id, token: created.body.access_token, address: created.body.wallet_addresses.base, name };
      await mined(stack.rpc, await stack.rpc('eth_sendTransaction', [{ from: DEV, to: created.body.wallet_addresses.base, value: '0x8ac7230489e80000' }]));
    }

    const context = await stack.browser.newContext({ viewport: { width: 1360, height: 900 } });
    // The user kept the treasury agent's token when it was made; the research agent's token is not in this browser.
    await context.addInitScript(([id, token]) => localStorage.setItem(`agentd.token.${id}`, token), [agents.a.id, agents.a.token]);
    page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
      // The sidebar's agent list is refused (401) until the admin token is entered: the console says so itself.
    await watchPage(page, stack.baseUrl, pageErrors, [401, 403]);
  });

  after(async () => {
    if (page) await page.screenshot({ path: join(artifactsDir, 'first-hour-approvals-zz-last-state.png'), fullPage: true }).catch(() => {});
    await stack?.stop();
  });

  it('sets a policy in the console: approval above 0.01 ETH, at most 0.05 ETH a day', async () => {
    await page.goto(`${stack.baseUrl}/#/agents/${agents.a.id}/settings`);
    await page.getByRole('heading', { name: 'Treasury agent' }).waitFor();
    await openFold(page, 'settings-owner');
    const owner = page.getByTestId('owner-authority');
    await owner.getByLabel('Admin token', { exact: true }).fill(ADMIN);
    await owner.getByRole('button', { name: 'Use admin token' }).click();
    await owner.getByTestId('authority-status').filter({ hasText: /admin token/ }).waitFor();

    await page.getByRole('tab', { name: 'Policy' }).click();
    await page.getByRole('button', { name: 'Add asset' }).click();
    await page.getByRole('textbox', { name: 'base:ETH per day' }).fill('0.05');
    await page.getByRole('textbox', { name: 'base:ETH approval above' }).fill('0.01');
    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.getByTestId('policy-saved').filter({ hasText: /^Saved/ }).waitFor();
    const policy = await api('GET', `/api/agents/${agents.a.id}/policy`, undefined, asAgent('a'));
    assert.equal(policy.body.limits['base:ETH'].per_day, '0.05', JSON.stringify(policy.body));
    assert.equal(policy.body.limits['base:ETH'].approval_above, '0.01', JSON.stringify(policy.body));
    // What the day has counted and has left, as the service states it (GET …/budget), under the form.
    const stated = await api('GET', `/api/agents/${agents.a.id}/budget`, undefined, asAgent('a'));
    assert.deepEqual(stated.body.limits['base:ETH'].per_day, { limit: '0.05', counted: '0', left: '0.05' }, JSON.stringify(stated.body));
    const day = page.getByTestId('policy-budget-daily');
    await day.waitFor();
    assert.equal(await day.getAttribute('data-left'), '0.05');
    assert.match(await day.textContent(), /Daily limit 0\.05 ETH \(base:ETH\): 0 counted in the last 24 h, 0\.05 left\./);
    await shot('fa01-policy-set');
  });

  it('shows a transfer asked through the API by itself, with the rule, the fee and the daily limit left; approves it after a confirmation', async () => {
    await page.getByRole('tab', { name: /^Approvals/ }).click();
    await page.getByText('Nothing is waiting for approval.').waitFor();

    // Asked by the agent through the API, not in the open chat: no conversation stream tells the page.
    const asked = await transfer('a', '0.02');
    assert.equal(asked.status, 201, JSON.stringify(asked.body));
    assert.equal(asked.body.status, 'awaiting_approval');
    // The service names the rule that held it and the most its fee could be at the fees of the request.
    assert.deepEqual(asked.body.held_by, ['approval_above']);
    assert.match(asked.body.max_fee, /^0\.\d+$/);
    const id = asked.body.id;
    const card = page.locator(`[data-testid="approval"][data-transfer-id="${id}"]`);
    await card.waitFor();
    await page.getByTestId('approval-count').filter({ hasText: '1' }).waitFor();

    const daily = await assertHeldAboveThreshold(card, { moves: '0.02', threshold: '0.01', limit: '0.05', left: '0.03' });
    assert.match(await daily.textContent(), /Daily limit 0\.05 ETH: 0\.02 counted in the last 24 h, this one included, 0\.03 left/);
    assert.match(
      await card.getByTestId('approval-fee').textContent(),
      /Network fee: at most 0\.\d+ ETH at the fees of the request; paid in ETH at the fees of the moment you approve/,
    );
    assert.match(await card.getByTestId('approval-cap').textContent(), /Spending cap on base: 1 ETH; 0\.02\d* counted so far/);
    assert.match(await card.textContent(), /through the API/);
    await shot('fa02-held-with-rule-and-daily-limit');

    // Approve asks first; nothing is decided before the confirmation.
    await card.getByRole('button', { name: /^Approve 0\.02 ETH/ }).click();
    const confirm = card.getByTestId('approve-confirm');
    await confirm.waitFor();
    assert.match(await confirm.textContent(), /signs it now at the current fees and broadcasts it on base/);
    assert.equal((await statusOf('a', id)).status, 'awaiting_approval', 'not decided before the confirmation');
    await shot('fa03-approve-confirm-step');
    await confirm.getByRole('button', { name: /^Confirm: approve 0\.02 ETH/ }).click();
    await page.getByText('Nothing is waiting for approval.').waitFor();

    const landed = await until('the approved transfer to be confirmed', async () => {
      const t = await statusOf('a', id);
      return t.status === 'confirmed' ? t : null;
    });
    assert.match(landed.tx_hash, /^0x[0-9a-f]{64}$/);
    assert.equal(await balanceOf(RECIPIENT), milli(20), 'the recipient holds the 0.02 ETH on chain');
    await shot('fa04-approved');
  });

  it('rejects another with a reason, kept beside the rejection', async () => {
    const asked = await transfer('a', '0.015');
    assert.equal(asked.body.status, 'awaiting_approval', JSON.stringify(asked.body));
    const id = asked.body.id;
    agents.a.rejected = id;
    const card = page.locator(`[data-testid="approval"][data-transfer-id="${id}"]`);
    await card.waitFor();
    // The confirmed 0.02 and this one: 0.035 of 0.05 counted.
    await card.locator('[data-testid="approval-daily"][data-left="0.015"]').waitFor();

    await card.getByRole('button', { name: /^Reject 0\.015 ETH/ }).click();
    const form = card.getByTestId('reject-form');
    await form.getByLabel('Reason for rejecting (optional)').fill('Not a supplier we know');
    await shot('fa05-reject-with-reason');
    await form.getByRole('button', { name: /^Confirm: reject 0\.015 ETH/ }).click();
    await page.getByText('Nothing is waiting for approval.').waitFor();
    assert.equal((await statusOf('a', id)).status, 'rejected');
    assert.equal(await balanceOf(RECIPIENT), milli(20), 'nothing more moved');
    // The reason is the service's record, in the rejection's audit entry, not a note of this browser.
    const audit = await api('GET', `/api/agents/${agents.a.id}/audit?limit=20`, undefined, asAdmin);
    const rejection = audit.body.find((e) => e.action === 'transfer_rejected' && e.detail.transfer_id === id);
    assert.equal(rejection?.detail.reason, 'Not a supplier we know', JSON.stringify(audit.body));
  });

  it('shows a refused request in History beside the transfers, naming the limit and what was left', async () => {
    // 0.02 confirmed today + 0.04 > 0.05: refused by the daily limit (the rejected one no longer counts).
    const refused = await transfer('a', '0.04');
    assert.equal(refused.status, 403, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, 'policy_denied');
    assert.equal(refused.body.error.details.rule, 'per_day');

    await assertRefusedInHistory(page, { limit: '0.05', counted: '0.02', left: '0.03', asked: '0.04' });

    const rejectedRow = page.locator(`[data-testid="activity-row"][data-activity="rejected"][data-transfer-id="${agents.a.rejected}"]`);
    await rejectedRow.waitFor();
    assert.match(await rejectedRow.getByTestId('activity-reason').textContent(), /Rejected by the operator \(admin token\)/);
    assert.match(await rejectedRow.getByTestId('reject-reason').textContent(), /Not a supplier we know/);

    // One feed, newest first: the refusal, the rejection, then the confirmed transfer.
    const order = await page
      .locator('[data-testid="history"] tbody tr')
      .evaluateAll((rows) => rows.map((r) => r.dataset.activity ?? r.dataset.status));
    assert.deepEqual(order, ['refused', 'rejected', 'confirmed'], order.join(', '));
    assert.match(await page.getByTestId('activity-count').textContent(), /2 refused, rejected or expired/);

    // The chart: the cap (1 ETH) is far above today's 0.02, so it is marked off scale and the bar shows.
    const chart = page.locator('[data-testid="spending-chart"][data-asset="base:ETH"]');
    await chart.waitFor();
    assert.equal(await chart.getByTestId('cap-line').getAttribute('data-off-scale'), 'true');
    assert.equal(await chart.getByTestId('daily-limit-line').getAttribute('data-off-scale'), 'false');
    const bar = chart.getByTestId('day-bar').last();
    assert.equal(await bar.getAttribute('data-amount'), '0.02');
    const box = await bar.boundingBox();
    assert.ok(box && box.height > 30, `today's bar is tall enough to read: ${JSON.stringify(box)}`);
    await page.getByTestId('cap-gauge').filter({ hasText: /Cap: 0\.02\d* of 1 counted/ }).waitFor();
    await shot('fa06-history-activity-and-chart');

    // The audit view shows the reason beside the rejection.
    await page.getByRole('tab', { name: 'Audit' }).click();
    const entry = page.locator('[data-testid="audit-entry"][data-action="transfer_rejected"]');
    await entry.getByTestId('reject-reason').filter({ hasText: /Not a supplier we know/ }).waitFor();
    await page.locator('[data-testid="audit-entry"][data-action="transfer_refused"]').filter({ hasText: /per_day/ }).waitFor();
    await shot('fa07-audit-reason');
  });

  it('keeps chat prose in step with the live status, and names the model usage apart from crypto tokens', async () => {
    await page.getByRole('tab', { name: 'Chat' }).click();
    // Below the approval threshold: sent at once, "pending" in the prose until it confirms.
    await page.getByLabel('Message', { exact: true }).fill(`send 0.005 ETH to ${RECIPIENT} on base`);
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    const sent = page.locator('[data-testid="message"][data-role="assistant"][data-state="done"]').last();
    await sent.waitFor();
    const sentProse = sent.getByTestId('prose-status');
    await sentProse.and(page.locator('[data-transfer-status="confirmed"]')).waitFor();
    assert.match(await sent.getByTestId('message-content').textContent(), /Transaction 0x[0-9a-f]{64} is confirmed/);
    assert.doesNotMatch(await sent.getByTestId('message-content').textContent(), /is pending/);
    // The model's usage decides nothing about money (and the builtin engine only counts words): not in the answer,
    // only in its header's title.
    assert.doesNotMatch(await sent.textContent(), /text units|tokens used/);
    assert.match(await sent.locator('header').getAttribute('title'), /^Language model usage for this answer: \d+ /);

    // Above it: held; approved elsewhere (the API), the prose says so and then that it is confirmed.
    await page.getByLabel('Message', { exact: true }).fill(`send 0.012 ETH to ${RECIPIENT} on base`);
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    const held = page.locator('[data-testid="message"][data-role="assistant"][data-state="done"]').nth(1);
    await held.waitFor();
    const heldProse = held.getByTestId('prose-status');
    await heldProse.and(page.locator('[data-transfer-status="awaiting_approval"]')).waitFor();
    assert.match(await heldProse.textContent(), /waits for an owner's approval/);
    const id = await held.locator('[data-testid="chain-call"][data-tool="send_native"]').getAttribute('data-transfer-id');
    const approved = await api('POST', `/api/agents/${agents.a.id}/transfers/${id}/approve`, undefined, asAdmin);
    assert.equal(approved.status, 200, JSON.stringify(approved.body));
    await heldProse.and(page.locator('[data-transfer-status="confirmed"]')).waitFor();
    assert.match(await heldProse.textContent(), /^This transfer was approved and is confirmed \(block \d+\)$/);
    // No raw ids or UTC times in the prose: a person reads it.
    assert.doesNotMatch(await held.getByTestId('message-content').textContent(), /[0-9a-f]{8}-[0-9a-f]{4}-|\d{4}-\d{2}-\d{2}T/);
    assert.match(await held.locator('[data-testid="chain-call"] summary').textContent(), /confirmed/);

    // Over the daily limit (0.02 + 0.005 + 0.012 counted): refused, and the card says by which limit and what was left.
    await page.getByLabel('Message', { exact: true }).fill(`send 0.02 ETH to ${RECIPIENT} on base`);
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    const refused = page.locator('[data-testid="message"][data-role="assistant"][data-state="done"]').nth(2);
    await refused.waitFor();
    const why = refused.getByTestId('refusal-explained');
    await why.waitFor();
    assert.equal(await why.getAttribute('data-rule'), 'per_day');
    assert.match(
      await why.textContent(),
      /Over the daily limit of 0\.05 ETH: 0\.037 was already counted in the last 24 h, 0\.013 was left, and it asked 0\.02\./,
    );
    await shot('fa08-chat-prose-follows-status');
  });

  it('gathers what waits across two agents in the inbox, one read with the admin token alone, and approves from there', async () => {
    const policy = await api('PUT', `/api/agents/${agents.b.id}/policy`, { limits: { 'base:ETH': { approval_above: '0.001' } } }, asAdmin);
    assert.equal(policy.status, 200, JSON.stringify(policy.body));
    const heldA = await transfer('a', '0.011');
    assert.equal(heldA.body.status, 'awaiting_approval', JSON.stringify(heldA.body));
    const heldB = await transfer('b', '0.002', RECIPIENT_B);
    assert.equal(heldB.body.status, 'awaiting_approval', JSON.stringify(heldB.body));

    await page.getByRole('button', { name: /^Approvals inbox/ }).click();
    await page.getByRole('heading', { name: 'Approvals inbox' }).waitFor();
    const summary = page.getByTestId('inbox-summary');
    await summary.and(page.locator('[data-count="2"]')).waitFor();
    assert.match(await summary.textContent(), /2 waiting for approval across 2 agents/);
    const groupA = page.locator(`[data-testid="inbox-agent"][data-agent-id="${agents.a.id}"]`);
    const groupB = page.locator(`[data-testid="inbox-agent"][data-agent-id="${agents.b.id}"]`);
    await groupA.getByRole('heading', { name: /Treasury agent/ }).waitFor();
    await groupB.getByRole('heading', { name: /Research agent/ }).waitFor();
    const cardA = groupA.locator(`[data-testid="approval"][data-transfer-id="${heldA.body.id}"]`);
    const cardB = groupB.locator(`[data-testid="approval"][data-transfer-id="${heldB.body.id}"]`);
    await cardA.getByTestId('approval-rule').filter({ hasText: /0\.01 ETH/ }).waitFor();
    await cardB.getByTestId('approval-rule').filter({ hasText: /moves 0\.002 ETH, more than the 0\.001 ETH/ }).waitFor();
    assert.match(await cardB.getByTestId('approval-daily').textContent(), /No daily or weekly limit on base:ETH/);
    await page.getByTestId('inbox-count').filter({ hasText: '2' }).waitFor();
    await shot('fa09-inbox-two-agents');

    await cardB.getByRole('button', { name: /^Approve 0\.002 ETH/ }).click();
    await cardB.getByRole('button', { name: /^Confirm: approve 0\.002 ETH/ }).click();
    await summary.and(page.locator('[data-count="1"]')).waitFor();
    assert.equal(await groupB.isHidden(), true, 'an agent with nothing waiting is not shown');
    await until('the research agent transfer to land', async () => (await balanceOf(RECIPIENT_B)) === milli(2));
    await until('the research agent transfer to be confirmed', async () => (await statusOf('b', heldB.body.id)).status === 'confirmed');

    // Decided elsewhere (the API): the inbox follows by itself.
    const rejected = await api('POST', `/api/agents/${agents.a.id}/transfers/${heldA.body.id}/reject`, undefined, asAdmin);
    assert.equal(rejected.status, 200, JSON.stringify(rejected.body));
    await summary.and(page.locator('[data-count="0"]')).waitFor();
    assert.match(await summary.textContent(), /Nothing is waiting for approval in the 2 agents checked/);
    await shot('fa10-inbox-after-decisions');
  });

  it('logged no page errors and loaded nothing from elsewhere', () => {
    assert.deepEqual(pageErrors, []);
  });
});
