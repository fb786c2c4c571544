// An offer held for its owner's approval, in headless Chromium against the real binary and anvil (docs/api.md §23
// Tools, §11): a guarded agent (the operator's ADMIN_TOKEN) is asked in chat to sell a note; the scripted
// OpenAI-compatible model calls `create_offer`, and the card says it waits for the owner; its URL answers 404. The
// Approvals inbox shows it in words ("Sell “…” for 0.03 USDC …") with Approve/Reject; approved, it is active on the
// Offers tab and its URL answers 402 with what to pay. A second one, rejected, never sells.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { artifactsDir, callApi, startStack, watchPage } from './harness.mjs';
import { placeUsdc } from '../../scripts/evm.mjs';

const ADMIN = `adm_${randomBytes(24).toString('hex')}`;
const TIMEOUT = 20000;
const note = (description) => ({
  chain: 'base',
  asset: 'USDC',
  price: '0.03',
  description,
  content: 'a note',
  content_type: 'text/plain',
  gas_per_day: '0.001',
});

/** A scripted OpenAI-compatible server: each request takes the next reply (`{tool, args}` or `{text}`), streamed. */
async function scriptedLlm(script) {
  const requests = [];
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const body = JSON.parse(raw || '{}');
      requests.push(body);
      const next = script.shift() ?? { text: 'the script is exhausted' };
      const call = next.tool
        ? { id: `call_${requests.length}`, type: 'function', function: { name: next.tool, arguments: JSON.stringify(next.args) } }
        : null;
      const finish = call ? 'tool_calls' : 'stop';
      const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
      if (!body.stream) {
        const message = call ? { role: 'assistant', content: null, tool_calls: [call] } : { role: 'assistant', content: next.text };
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ id: 'cmpl', object: 'chat.completion', model: body.model, choices: [{ index: 0, message, finish_reason: finish }], usage }));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = (delta, finishReason, extra = {}) =>
        res.write(`data: ${JSON.stringify({ id: 'cmpl', object: 'chat.completion.chunk', model: body.model, choices: [{ index: 0, delta, finish_reason: finishReason }], ...extra })}\n\n`);
      chunk(call ? { role: 'assistant', tool_calls: [{ index: 0, ...call }] } : { role: 'assistant', content: next.text }, null);
      chunk({}, finish);
      if (body.stream_options?.include_usage) res.write(`data: ${JSON.stringify({ id: 'cmpl', object: 'chat.completion.chunk', choices: [], usage })}\n\n`);
      res.end('data: [DONE]\n\n');
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}/v1`, requests, close: () => server.close() };
}

describe('web console: an offer held for the owner (create_offer on a guarded agent)', { timeout: 180000 }, () => {
  let stack;
  let llm;
  let page;
  let agent;
  const pageErrors = [];
  const shot = (name) => page.screenshot({ path: join(artifactsDir, `${name}.png`), fullPage: true });
  const buy = (id) => fetch(`${stack.baseUrl}/x402/${id}`);

  before(async () => {
    llm = await scriptedLlm([
      { tool: 'create_offer', args: note('A held note') },
      { text: 'The note waits for your approval.' },
      { tool: 'create_offer', args: note('A rejected note') },
      { text: 'This one waits too.' },
    ]);
    stack = await startStack({
      env: { ADMIN_TOKEN: ADMIN, LLM_PROVIDER: 'openai', LLM_BASE_URL: llm.url, LLM_API_KEY: 'test-key', LLM_MODEL: 'scripted' },
    });
    await placeUsdc(stack.rpc);
    const created = await callApi(
      stack.baseUrl,
      'POST',
      '/api/agents',
      { name: 'Guarded seller', chains: ['base'], capabilities: ['read', 'transact'], spending_cap: 1 },
      { authorization: `Bearer ${ADMIN}` },
    );
    assert.equal(created.status, 201, JSON.stringify(created.body));
    agent = { id: created.body.id, token: created.body.access_token };
    const context = await stack.browser.newContext({ viewport: { width: 1360, height: 900 } });
    // The agent's token (chat acts as the agent) and the operator's admin token (owner authority to decide).
    await context.addInitScript(
      ([id, token, admin]) => {
        localStorage.setItem(`agentd.token.${id}`, token);
        localStorage.setItem('agentd.adminToken', admin);
      },
      [agent.id, agent.token, ADMIN],
    );
    page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    // A held offer's URL answers 404 until it is approved: asked from this test, never by the page.
    await watchPage(page, stack.baseUrl, pageErrors);
    await page.goto(`${stack.baseUrl}/#/agents/${agent.id}/chat`);
    await page.getByRole('heading', { name: 'Guarded seller' }).waitFor();
  });

  after(async () => {
    if (page) await page.screenshot({ path: join(artifactsDir, 'held-offers-zz-last-state.png'), fullPage: true }).catch(() => {});
    llm?.close();
    await stack?.stop();
  });

  /** Asks in chat; returns the held offer's id from the card's result. */
  async function askInChat(message, description) {
    await page.getByLabel('Message', { exact: true }).fill(message);
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    const held = page.getByTestId('offer-held').filter({ hasText: description });
    await held.waitFor();
    assert.match(await held.textContent(), new RegExp(`Waiting for the owner's approval: ${description}, 0\\.03 USDC`));
    const card = page.locator('[data-testid="chain-call"][data-tool="create_offer"]').last();
    const result = JSON.parse(await card.getByTestId('chain-call-result').textContent());
    assert.equal(result.status, 'awaiting_approval');
    assert.equal(result.offer.description, description);
    return result.offer_id;
  }

  it('says in chat that the offer waits for the owner, and its URL sells nothing', async () => {
    const id = await askInChat('sell my note for 0.03 USDC', 'A held note');
    assert.equal((await buy(id)).status, 404);
    await shot('h01-chat-offer-held');
  });

  it('shows the held offer in the Approvals inbox in words; approved, it sells', async () => {
    await page.goto(`${stack.baseUrl}/#/approvals`);
    const card = page.getByTestId('approval').filter({ hasText: 'A held note' });
    await card.waitFor();
    assert.match(await card.getByTestId('approval-offer').textContent(), /Sell “A held note” for 0\.03 USDC \(a stored text\/plain body\)/);
    assert.match(await card.getByTestId('approval-rule').textContent(), /the agent is guarded/);
    const id = await card.getAttribute('data-transfer-id');
    await shot('h02-inbox-held-offer');

    await card.getByRole('button', { name: /^Approve Sell/ }).click();
    const confirm = card.getByTestId('approve-confirm');
    assert.match(await confirm.textContent(), /It starts selling at once: anyone may pay 0\.03 USDC at its URL/);
    assert.equal((await confirm.getByRole('button', { name: /^Confirm: approve Sell/ }).textContent()).trim(), 'Yes, approve: start selling');
    await confirm.getByRole('button', { name: /^Confirm: approve Sell/ }).click();
    await page.getByTestId('approval').filter({ hasText: 'A held note' }).waitFor({ state: 'detached' });
    const answer = await buy(id);
    assert.equal(answer.status, 402, 'approved, its URL asks for a payment');
    assert.ok(answer.headers.get('payment-required'));

    await page.goto(`${stack.baseUrl}/#/agents/${agent.id}/offers`);
    const offer = page.getByTestId('offer').filter({ hasText: 'A held note' });
    await offer.waitFor();
    assert.equal(await offer.getAttribute('data-status'), 'active');
    await shot('h03-offer-approved-active');
  });

  it('a rejected one never sells and the Offers tab says so', async () => {
    await page.goto(`${stack.baseUrl}/#/agents/${agent.id}/chat`);
    await page.getByRole('heading', { name: 'Guarded seller' }).waitFor();
    const id = await askInChat('and another note', 'A rejected note');
    await page.goto(`${stack.baseUrl}/#/agents/${agent.id}/approvals`);
    const card = page.getByTestId('approval').filter({ hasText: 'A rejected note' });
    await card.waitFor();
    await card.getByRole('button', { name: /^Reject Sell/ }).click();
    await card.getByTestId('reject-form').getByLabel('Reason for rejecting (optional)').fill('not for sale');
    await card.getByTestId('reject-form').getByRole('button', { name: /^Confirm: reject/ }).click();
    await page.getByTestId('approval').filter({ hasText: 'A rejected note' }).waitFor({ state: 'detached' });
    assert.equal((await buy(id)).status, 404);
    await page.goto(`${stack.baseUrl}/#/agents/${agent.id}/offers`);
    const offer = page.getByTestId('offer').filter({ hasText: 'A rejected note' });
    await offer.waitFor();
    assert.equal(await offer.getAttribute('data-status'), 'rejected');
  });

  it('logged no page errors and loaded nothing from elsewhere', () => {
    assert.deepEqual(pageErrors, []);
  });
});
