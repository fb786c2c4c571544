// The console's webhooks tab in headless Chromium against the real binary (ADMIN_TOKEN set, so the agent is
// guarded, and WEBHOOK_ALLOW_PRIVATE=true) and a tiny HTTP receiver started here that answers 200: without owner
// authority the tab says what to do; with the admin token entered in Settings it adds a webhook and shows its
// secret once, the test button's webhook.test event reaches the receiver (signed with that secret) and is listed
// with its status, a redelivery arrives with the same webhook-id, and the webhook is disabled, then deleted.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { createHmac, randomBytes } from 'node:crypto';
import { artifactsDir, callApi, startStack, until, watchPage, openFold } from './harness.mjs';

// anvil's first dev account: the agent's owner address (it makes the agent guarded).
const DEV = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
const ADMIN = `adm_${randomBytes(24).toString('hex')}`;
const TIMEOUT = 20000;

/** A receiver answering 200 to every POST, keeping each request's headers, body and arrival time. */
async function startReceiver() {
  const received = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      received.push({ at: Date.now(), method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks).toString() });
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${server.address().port}/agentd`, received, close: () => new Promise((r) => server.close(r)) };
}

/** The Standard Webhooks check: v1 signature = base64 HMAC-SHA256(secret bytes, "<id>.<timestamp>.<body>"). */
function verify(secret, request) {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const id = request.headers['webhook-id'];
  const timestamp = request.headers['webhook-timestamp'];
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${request.body}`).digest('base64');
  return request.headers['webhook-signature'].split(' ').includes(`v1,${expected}`);
}

describe('web console webhooks', { timeout: 240000 }, () => {
  let stack;
  let receiver;
  let page;
  let agentId;
  let secret;
  let webhookId;
  let testEventId;
  const pageErrors = [];

  const api = (method, path, body) => callApi(stack.baseUrl, method, path, body, { authorization: `Bearer ${ADMIN}` });
  const shot = (name) => page.screenshot({ path: join(artifactsDir, `${name}.png`), fullPage: true });
  const tests = () => receiver.received.filter((r) => r.body.includes('"webhook.test"'));

  before(async () => {
    receiver = await startReceiver();
    stack = await startStack({ env: { ADMIN_TOKEN: ADMIN, WEBHOOK_ALLOW_PRIVATE: 'true' } });
    const created = await api('POST', '/api/agents', {
      name: 'Hooked agent',
      chains: ['base'],
      capabilities: ['read'],
      spending_cap: 0,
      owner_addresses: { base: DEV },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    agentId = created.body.id;

    const context = await stack.browser.newContext({ viewport: { width: 1360, height: 900 } });
    // The user saved the agent's token earlier (as the console offers when it creates one); no admin token yet.
    await context.addInitScript(([id, token]) => localStorage.setItem(`agentd.token.${id}`, token), [agentId, created.body.access_token]);
    page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
      // The refusals without owner authority (401, 403) are logged by the browser itself; the tab shows them.
    await watchPage(page, stack.baseUrl, pageErrors, [401, 403]);
  });

  after(async () => {
    if (page) await page.screenshot({ path: join(artifactsDir, 'webhooks-zz-last-state.png'), fullPage: true }).catch(() => {});
    await stack?.stop();
    await receiver?.close();
  });

  it('says what to do without owner authority, and lists the webhooks once the admin token is entered', async () => {
    await page.goto(`${stack.baseUrl}/#/agents/${agentId}/webhooks`);
    await page.getByRole('heading', { name: 'Webhooks', exact: true }).waitFor();
    const panel = page.locator('.webhooks-panel');
    await panel.getByRole('alert').filter({ hasText: /owner_required/ }).waitFor();
    assert.match(await panel.getByRole('alert').first().textContent(), /sign in as owner or enter the admin token/i);
    assert.match(await page.getByTestId('webhooks-authority').textContent(), /No owner authority/);
    await shot('w01-webhooks-without-owner');

    await page.getByRole('tab', { name: 'Settings' }).click();
    await openFold(page, 'settings-owner');
    const owner = page.getByTestId('owner-authority');
    await owner.getByLabel('Admin token', { exact: true }).fill(ADMIN);
    await owner.getByRole('button', { name: 'Use admin token' }).click();
    await owner.getByTestId('authority-status').filter({ hasText: /admin token/ }).waitFor();
    await page.getByRole('tab', { name: 'Webhooks' }).click();
    await page.getByTestId('webhooks-authority').filter({ hasText: /Using the admin token/ }).waitFor();
    await panel.getByText('No webhooks yet.').waitFor();
    assert.equal(await panel.locator('.form-error:visible').count(), 0, 'the refusal is gone');
  });

  it('offers every event the service lists, delegation.revoked included', async () => {
    // The service's own list, as its OpenAPI document states it (the server's EVENT_TYPES).
    const doc = await api('GET', '/api/openapi.json');
    const listed = doc.body.components.schemas.WebhookEventType.enum.filter((e) => e !== '*' && e !== 'webhook.test');
    assert.ok(listed.includes('delegation.revoked'), listed.join(', '));
    const form = page.getByTestId('webhook-form');
    await form.getByLabel(/All events/).uncheck();
    const offered = await form.locator('fieldset input[type="checkbox"]:not([value="*"])').evaluateAll((boxes) => boxes.map((b) => b.value));
    assert.deepEqual(offered, listed);
    await form.getByLabel(/All events/).check();
  });

  it('adds a webhook and shows its secret once', async () => {
    const form = page.getByTestId('webhook-form');
    await form.getByLabel('URL').fill(receiver.url);
    await form.getByLabel('Description (optional)').fill('The test receiver');
    assert.equal(await form.getByLabel(/All events/).isChecked(), true, 'all events by default');
    await form.getByRole('button', { name: 'Add webhook' }).click();

    const reveal = page.getByTestId('webhook-secret');
    await reveal.waitFor();
    assert.match(await reveal.getByRole('alert').textContent(), /shown only once/);
    secret = await reveal.getByLabel(/Signing secret/).inputValue();
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    await shot('w02-webhook-secret-shown-once');

    const item = page.getByTestId('webhook');
    await item.waitFor();
    webhookId = await item.getAttribute('data-webhook-id');
    assert.equal(await item.getByTestId('webhook-url').textContent(), receiver.url);
    assert.equal(await item.getByTestId('webhook-state').textContent(), 'enabled');
    assert.match(await item.textContent(), /The test receiver/);
    assert.match(await item.textContent(), /all events/);

    await reveal.getByRole('button', { name: 'I have saved the secret' }).click();
    await reveal.waitFor({ state: 'detached' });
    // Nowhere in the page any more, and the list the console reads never holds it.
    const inPage = await page.evaluate(
      (s) => document.body.innerText.includes(s) || [...document.querySelectorAll('input')].some((i) => i.value === s),
      secret,
    );
    assert.equal(inPage, false, 'the secret is shown once');
    const listed = await api('GET', `/api/agents/${agentId}/webhooks`);
    assert.equal(listed.status, 200);
    assert.equal(listed.body.length, 1);
    assert.equal(listed.body[0].id, webhookId);
    assert.equal('secret' in listed.body[0], false);
  });

  it('sends a test event that the receiver gets, signed, and lists its delivery', async () => {
    const item = page.locator(`[data-testid="webhook"][data-webhook-id="${webhookId}"]`);
    await item.getByRole('button', { name: `Send a test event to ${receiver.url}` }).click();
    const row = item.locator('[data-testid="delivery"][data-event-type="webhook.test"]');
    await row.first().waitFor();
    testEventId = await row.first().getAttribute('data-event-id');
    assert.equal(await row.first().getAttribute('data-status-code'), '200');
    const cells = await row.first().locator('td').allTextContents();
    assert.equal(cells[2], '1', 'the first attempt');
    assert.equal(cells[3], '200');
    assert.equal(cells[4], '—', 'no error');
    assert.match(cells[5], /^\d+ ms$/);

    const [request] = await until('the test event at the receiver', () => tests().length && tests());
    assert.equal(request.method, 'POST');
    assert.equal(request.headers['webhook-id'], testEventId);
    assert.equal(request.headers['content-type'], 'application/json');
    assert.ok(verify(secret, request), 'signed with the secret shown');
    const body = JSON.parse(request.body);
    assert.equal(body.type, 'webhook.test');
    assert.equal(body.data.agent_id, agentId);
    await shot('w03-webhook-test-delivered');
  });

  it('redelivers the event with the same webhook-id', async () => {
    const item = page.locator(`[data-testid="webhook"][data-webhook-id="${webhookId}"]`);
    const rows = item.locator(`[data-testid="delivery"][data-event-id="${testEventId}"]`);
    await rows.first().getByRole('button', { name: /^Redeliver/ }).click();
    await until('a second attempt listed', async () => (await rows.count()) === 2);
    assert.equal(await rows.first().getAttribute('data-status-code'), '200');
    const again = await until('the redelivery at the receiver', () => tests().length === 2 && tests()[1]);
    assert.equal(again.headers['webhook-id'], testEventId);
    assert.ok(verify(secret, again));
  });

  it('disables the webhook, then deletes it', async () => {
    const item = page.locator(`[data-testid="webhook"][data-webhook-id="${webhookId}"]`);
    await item.getByRole('button', { name: `Disable ${receiver.url}` }).click();
    await page.locator(`[data-testid="webhook"][data-webhook-id="${webhookId}"][data-enabled="false"]`).waitFor();
    assert.equal(await item.getByTestId('webhook-state').textContent(), 'disabled');
    const read = await api('GET', `/api/agents/${agentId}/webhooks/${webhookId}`);
    assert.equal(read.status, 200);
    assert.equal(read.body.enabled, false);
    await shot('w04-webhook-disabled');

    await item.getByRole('button', { name: `Delete ${receiver.url}` }).click();
    await item.getByRole('button', { name: /^Confirm: delete/ }).click();
    await item.waitFor({ state: 'detached' });
    await page.locator('.webhooks-panel').getByText('No webhooks yet.').waitFor();
    const listed = await api('GET', `/api/agents/${agentId}/webhooks`);
    assert.deepEqual(listed.body, []);
    assert.deepEqual(pageErrors, []);
  });
});
