// The console's guardrails in headless Chromium against the real binary (with ADMIN_TOKEN set, so agents are
// guarded) and anvil: a chat transfer above the policy's approval threshold waits, its card says so, the approvals
// inbox approves it with the admin token entered in the console, and the card follows it to confirmed; the policy
// editor saves a daily limit (and shows a field's validation error next to it); the audit view lists the change;
// an owner signs in with a (test) browser wallet and changes the policy as the owner.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { artifactsDir, callApi, startStack, watchPage, openFold } from './harness.mjs';
import { mined } from '../../scripts/evm.mjs';

const RECIPIENT = '0x52908400098527886E0F7030069857D2E4169EE7';
// anvil's first dev account (unlocked: it funds the agent, and signs as its owner).
const DEV = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
const ADMIN = `adm_${randomBytes(24).toString('hex')}`;
const TIMEOUT = 20000;

describe('web console guardrails', { timeout: 240000 }, () => {
  let stack;
  let page;
  let agentId;
  let agentToken;
  let address;
  const pageErrors = [];

  const api = (method, path, body, headers) => callApi(stack.baseUrl, method, path, body, headers);
  const asAdmin = { authorization: `Bearer ${ADMIN}` };
  const shot = (name) => page.screenshot({ path: join(artifactsDir, `${name}.png`), fullPage: true });

  before(async () => {
    stack = await startStack({ env: { ADMIN_TOKEN: ADMIN, CONFIRMATIONS_BASE: '1' } });

    // Set-up through the API, as an operator would: a guarded agent that may transact on base, funded from
    // anvil's dev account, whose policy asks for approval above 0.01 ETH.
    const created = await api(
      'POST',
      '/api/agents',
      {
        name: 'Guarded agent',
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
    const hash = await stack.rpc('eth_sendTransaction', [{ from: DEV, to: address, value: '0x8ac7230489e80000' }]);
    assert.match(hash, /^0x[0-9a-f]{64}$/);
    await mined(stack.rpc, hash);
    const policy = await api('PUT', `/api/agents/${agentId}/policy`, { limits: { 'base:ETH': { approval_above: '0.01' } } }, asAdmin);
    assert.equal(policy.status, 200, JSON.stringify(policy.body));

    const context = await stack.browser.newContext({ viewport: { width: 1360, height: 900 } });
    // The user saved the agent's token earlier (as the console offers when it creates one).
    await context.addInitScript(([id, token]) => localStorage.setItem(`agentd.token.${id}`, token), [agentId, agentToken]);
    // A browser wallet (EIP-1193) holding the owner's key: anvil signs for its unlocked dev account.
    await context.exposeBinding('__anvilRpc', (_source, method, params) => stack.rpc(method, params));
    await context.addInitScript((owner) => {
      window.ethereum = {
        request: async ({ method, params }) =>
          method === 'eth_requestAccounts' || method === 'eth_accounts' ? [owner] : window.__anvilRpc(method, params ?? []),
      };
    }, DEV);
    page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
      // The browser logs the requests these tests make fail on purpose (401, 403, 422) itself; the console shows
      // them to the user, which the tests check.
    await watchPage(page, stack.baseUrl, pageErrors, [401, 403, 422]);
  });

  after(async () => {
    if (page) await page.screenshot({ path: join(artifactsDir, 'guardrails-zz-last-state.png'), fullPage: true }).catch(() => {});
    await stack?.stop();
  });

  it('shows a waiting transfer in chat, approves it in the inbox with the admin token, and the card confirms', async () => {
    await page.goto(`${stack.baseUrl}/#/agents/${agentId}/chat`);
    await page.getByRole('heading', { name: 'Guarded agent' }).waitFor();
    assert.equal(await page.getByTestId('unguarded-warning').count(), 0, 'a guarded agent shows no warning');

    await page.getByLabel('Message', { exact: true }).fill(`send 0.02 ETH to ${RECIPIENT} on base`);
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    const answer = page.locator('[data-testid="message"][data-role="assistant"][data-state="done"]').last();
    await answer.waitFor();
    const card = answer.locator('[data-testid="chain-call"][data-tool="send_native"]');
    await card.and(page.locator('[data-transfer-status="awaiting_approval"]')).waitFor();
    const result = JSON.parse(await card.getByTestId('chain-call-result').textContent());
    assert.equal(result.status, 'awaiting_approval', JSON.stringify(result));
    const transferId = result.transfer_id;
    assert.equal(await card.getAttribute('data-transfer-id'), transferId);
    assert.match(await card.locator('summary').textContent(), /awaiting approval/);
    // The approval_required event reached the inbox's count on its tab.
    await page.getByTestId('approval-count').filter({ hasText: '1' }).waitFor();
    await shot('g01-chat-awaiting-approval');

    // Without owner authority the approval is refused, in words that say what to do.
    await page.getByRole('tab', { name: /^Approvals/ }).click();
    const item = page.locator(`[data-testid="approval"][data-transfer-id="${transferId}"]`);
    await item.waitFor();
    assert.match(await item.textContent(), /0\.02 ETH/);
    assert.match(await item.textContent(), new RegExp(RECIPIENT, 'i'));
    await item.getByRole('button', { name: /^Approve/ }).click();
    await item.getByRole('button', { name: /^Confirm: approve/ }).click();
    await item.getByRole('alert').filter({ hasText: /sign in as owner or enter the admin token/i }).waitFor();
    assert.match(await item.getByRole('alert').textContent(), /owner_required/);
    await shot('g02-approve-refused-without-owner');

    // The admin token, entered in the agent's settings.
    await page.getByRole('tab', { name: 'Settings' }).click();
    await openFold(page, 'settings-owner');
    const owner = page.getByTestId('owner-authority');
    await owner.getByLabel('Admin token', { exact: true }).fill(ADMIN);
    await owner.getByRole('button', { name: 'Use admin token' }).click();
    await owner.getByTestId('authority-status').filter({ hasText: /admin token/ }).waitFor();
    // The sidebar, which needs the admin token to list agents, now lists them.
    await page.getByRole('list', { name: 'Agent list' }).getByText('Guarded agent').waitFor();
    assert.equal(await page.evaluate(() => localStorage.getItem('agentd.adminToken')), ADMIN, 'remembered as asked');
    await shot('g03-admin-token-entered');

    await page.getByRole('tab', { name: /^Approvals/ }).click();
    // The confirmation the refused attempt opened is still there: confirm again, now with the admin token.
    await item.getByRole('button', { name: /^Confirm: approve/ }).click();
    await page.getByText('Nothing is waiting for approval.').waitFor();
    await shot('g04-approved');

    await page.getByRole('tab', { name: 'Chat' }).click();
    await card.and(page.locator('[data-transfer-status="confirmed"]')).waitFor();
    assert.match(await card.locator('summary').textContent(), /confirmed/);
    const transfer = await api('GET', `/api/agents/${agentId}/transfers/${transferId}`, undefined, {
      'x-agent-access-token': agentToken,
    });
    assert.equal(transfer.status, 200);
    assert.equal(transfer.body.status, 'confirmed', JSON.stringify(transfer.body));
    assert.match(transfer.body.tx_hash, /^0x[0-9a-f]{64}$/);
    await page.locator(`[data-testid="tx-confirmation"][data-tx-hash="${transfer.body.tx_hash}"]`).waitFor();
    assert.equal(BigInt(await stack.rpc('eth_getBalance', [RECIPIENT, 'latest'])), 2n * 10n ** 16n);
    await shot('g05-card-confirmed');
  });

  it('follows transfers decided elsewhere (through the API) live: one approved to confirmed, one rejected', async () => {
    assert.ok(agentId, 'needs the set-up');
    await page.getByRole('tab', { name: 'Chat' }).click();
    const cards = [];
    for (const amount of ['0.03', '0.04']) {
      const waiting = page.locator('[data-testid="chain-call"][data-tool="send_native"][data-transfer-status="awaiting_approval"]');
      const before = await waiting.count();
      await page.getByLabel('Message', { exact: true }).fill(`send ${amount} ETH to ${RECIPIENT} on base`);
      await page.getByRole('button', { name: 'Send', exact: true }).click();
      const card = waiting.nth(before);
      await card.waitFor();
      const id = await card.getAttribute('data-transfer-id');
      cards.push({ id, card: page.locator(`[data-testid="chain-call"][data-transfer-id="${id}"]`) });
    }
    await page.getByTestId('approval-count').filter({ hasText: '2' }).waitFor();

    const [approved, rejected] = cards;
    assert.notEqual(approved.id, rejected.id);
    const approve = await api('POST', `/api/agents/${agentId}/transfers/${approved.id}/approve`, undefined, asAdmin);
    assert.equal(approve.status, 200, JSON.stringify(approve.body));
    const reject = await api('POST', `/api/agents/${agentId}/transfers/${rejected.id}/reject`, undefined, asAdmin);
    assert.equal(reject.status, 200, JSON.stringify(reject.body));

    // Only the conversation's stream tells the page: approval_resolved, then tx_confirmation for the approved one.
    await page.locator(`[data-transfer-id="${approved.id}"][data-transfer-status="confirmed"]`).waitFor();
    await page.locator(`[data-transfer-id="${rejected.id}"][data-transfer-status="rejected"]`).waitFor();
    assert.match(await rejected.card.locator('summary').textContent(), /rejected/);
    await page.locator(`[data-testid="tx-confirmation"][data-tx-hash="${approve.body.tx_hash}"]`).waitFor();
    await page.getByTestId('approval-count').filter({ hasText: /^$/ }).waitFor({ state: 'attached' });
    assert.equal(await page.getByTestId('approval-count').textContent(), '');
    await shot('g05b-decided-elsewhere');
  });

  it('edits the policy: a field error shows next to its field, then a daily limit is saved', async () => {
    assert.ok(agentId, 'needs the set-up');
    await page.getByRole('tab', { name: 'Policy' }).click();
    const perDay = page.getByRole('textbox', { name: 'base:ETH per day' });
    await perDay.waitFor();
    assert.equal(await page.getByRole('textbox', { name: 'base:ETH approval above' }).inputValue(), '0.01');

    await perDay.fill('a lot');
    await page.getByRole('button', { name: 'Save policy' }).click();
    const problem = page.locator('td .field-error').filter({ hasText: /amount/ });
    await problem.waitFor();
    assert.equal(await perDay.getAttribute('aria-invalid'), 'true');
    await page.getByRole('alert').filter({ hasText: /The policy was not saved/ }).waitFor();
    await shot('g06-policy-field-error');

    await perDay.fill('0.5');
    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.getByTestId('policy-saved').filter({ hasText: /^Saved/ }).waitFor();
    assert.equal(await perDay.getAttribute('aria-invalid'), null);
    const policy = await api('GET', `/api/agents/${agentId}/policy`, undefined, { 'x-agent-access-token': agentToken });
    assert.equal(policy.status, 200);
    assert.equal(policy.body.limits['base:ETH'].per_day, '0.5', JSON.stringify(policy.body));
    assert.equal(policy.body.limits['base:ETH'].approval_above, '0.01', JSON.stringify(policy.body));
    await shot('g07-policy-saved');
  });

  it('lists the change in the audit view, newest first, by the admin', async () => {
    assert.ok(agentId, 'needs the set-up');
    await page.getByRole('tab', { name: 'Audit' }).click();
    const entries = page.getByTestId('audit-entry');
    await entries.first().waitFor();
    const newest = entries.first();
    assert.equal(await newest.getAttribute('data-action'), 'policy_updated');
    assert.equal((await newest.locator('td').nth(1).textContent()).trim(), 'admin');
    assert.match(await newest.textContent(), /0\.5/);
    const actions = await entries.evaluateAll((rows) => rows.map((r) => r.dataset.action));
    assert.ok(actions.includes('transfer_approved'), actions.join(', '));
    assert.equal(actions.at(-1), 'agent_created', actions.join(', '));
    const ids = await entries.evaluateAll((rows) => rows.map((r) => Number(r.dataset.id)));
    assert.deepEqual(ids, [...ids].sort((a, b) => b - a), 'newest first');
    await shot('g08-audit');
  });

  it('signs in as the owner with a browser wallet and changes the policy as the owner', async () => {
    assert.ok(agentId, 'needs the set-up');
    await page.getByRole('tab', { name: 'Settings' }).click();
    await openFold(page, 'settings-owner');
    const owner = page.getByTestId('owner-authority');
    await owner.getByRole('button', { name: 'Forget admin token' }).click();
    await owner.getByTestId('authority-status').filter({ hasText: /No owner authority/ }).waitFor();
    await owner.getByRole('button', { name: 'Sign in with browser wallet' }).click();
    await owner.getByTestId('authority-status').filter({ hasText: new RegExp(`Signed in as owner ${DEV}`, 'i') }).waitFor();
    const stored = await page.evaluate((id) => JSON.parse(sessionStorage.getItem(`agentd.ownerSession.${id}`)), agentId);
    assert.match(stored.token, /^own_/);
    assert.equal(await page.evaluate(() => localStorage.getItem('agentd.adminToken')), null);
    await shot('g09-owner-signed-in');

    await page.getByRole('tab', { name: 'Policy' }).click();
    await page.getByRole('textbox', { name: 'base:ETH per week' }).fill('2');
    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.getByTestId('policy-saved').filter({ hasText: /^Saved/ }).waitFor();
    const policy = await api('GET', `/api/agents/${agentId}/policy`, undefined, { 'x-agent-access-token': agentToken });
    assert.equal(policy.body.limits['base:ETH'].per_week, '2', JSON.stringify(policy.body));

    await page.getByRole('tab', { name: 'Audit' }).click();
    const newest = page.locator('[data-testid="audit-entry"][data-action="policy_updated"]').first();
    await newest.filter({ hasText: /per_week/ }).waitFor();
    assert.equal((await newest.locator('td').nth(1).textContent()).trim(), 'owner');
    await shot('g10-owner-policy-audited');
  });

  it('logged no page errors and loaded nothing from elsewhere', () => {
    assert.deepEqual(pageErrors, []);
  });
});
