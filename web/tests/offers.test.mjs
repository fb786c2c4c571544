// Selling over x402 in headless Chromium against the real binary and anvil (docs/api.md §23): an agent's owner (the
// admin token) offers a stored body from the Offers tab; its URL, linked as "Try it", answers 402 with what to pay;
// a second agent pays it through agentd's own x402 client (what pay_http does), agentd settles the payment from the
// seller's wallet, and the seller's History shows the income beside what it spent (its settlement a transaction of
// gas only), the offer what it earned; closing the offer makes its URL answer 404. Facilitator tokens: created with
// the token shown once, good for `…/x402/supported`, listed with their last use, deleted. The tab fits at 390 px.
// An upstream offer's secret header is never on the page and reaches only the upstream, once paid. And an offer made
// from chat by a scripted OpenAI-compatible model calling `create_offer` on an unguarded agent: the card says where it
// is on sale, and the Offers tab lists it.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { artifactsDir, assertLocalTx, callApi, overflowProblems, startStack, until, watchPage } from './harness.mjs';
import { USDC, mintUsdc, placeUsdc, tokenBalance } from '../../scripts/evm.mjs';

const ADMIN = `adm_${randomBytes(24).toString('hex')}`;
const TIMEOUT = 20000;
const CONTENT = 'the report the selling agent sells';

describe('web console offers, income and facilitator tokens', { timeout: 300000 }, () => {
  let stack;
  let page;
  let seller;
  let buyer;
  let offerUrl;
  let offerId;
  let upstream;
  const upstreamSeen = [];
  const pageErrors = [];

  const api = (method, path, body, headers) => callApi(stack.baseUrl, method, path, body, headers);
  const asAdmin = { authorization: `Bearer ${ADMIN}` };
  const shot = (name) => page.screenshot({ path: join(artifactsDir, `${name}.png`), fullPage: true });
  const createAgent = async (name) => {
    const created = await api(
      'POST',
      '/api/agents',
      { name, chains: ['base'], capabilities: ['read', 'transact', 'analytics'], spending_cap: 1 },
      asAdmin,
    );
    assert.equal(created.status, 201, JSON.stringify(created.body));
    return { id: created.body.id, token: created.body.access_token, address: created.body.wallet_addresses.base };
  };
  const refreshOffers = () => page.locator('.offers-panel > .section-head').getByRole('button', { name: 'Refresh' }).click();
  const openOffers = async () => {
    await page.getByRole('tab', { name: 'Offers' }).click();
    await page.getByRole('heading', { name: 'Offers', exact: true }).waitFor();
  };

  before(async () => {
    // The buyer fetches the offer's URL on 127.0.0.1 (agentd's own address), which the URL guard refuses unless
    // X402_ALLOW_PRIVATE is set.
    // OFFER_ALLOW_PRIVATE: the upstream the second offer fronts is on 127.0.0.1 too (development only).
    stack = await startStack({
      env: { ADMIN_TOKEN: ADMIN, CONFIRMATIONS_BASE: '1', X402_ALLOW_PRIVATE: 'true', OFFER_ALLOW_PRIVATE: 'true' },
    });
    upstream = createServer((req, res) => {
      upstreamSeen.push({ url: req.url, key: req.headers['x-api-key'] ?? null });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ quote: 'from the upstream' }));
    });
    await new Promise((r) => upstream.listen(0, '127.0.0.1', r));
    await placeUsdc(stack.rpc);
    seller = await createAgent('Selling agent');
    buyer = await createAgent('Buying agent');
    // The seller pays its settlements' gas; the buyer pays with a signature and needs USDC only.
    await stack.rpc('anvil_setBalance', [seller.address, '0xDE0B6B3A7640000']);
    await mintUsdc(stack.rpc, buyer.address, 1_000_000n);

    const context = await stack.browser.newContext({ viewport: { width: 1360, height: 900 } });
    // The operator's admin token entered earlier: owner authority over the seller, which offers need.
    await context.addInitScript((admin) => localStorage.setItem('agentd.adminToken', admin), ADMIN);
    page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    // "What a buyer sees" asks the offer's URL without a payment: its 402 is the answer shown, not a page error.
    await watchPage(page, stack.baseUrl, pageErrors, [402]);
  });

  after(async () => {
    if (page) await page.screenshot({ path: join(artifactsDir, 'offers-zz-last-state.png'), fullPage: true }).catch(() => {});
    upstream?.close();
    await stack?.stop();
  });

  it('offers a stored body from the Offers tab; its Try it link answers 402 with what to pay', async () => {
    await page.goto(`${stack.baseUrl}/#/agents/${seller.id}/offers`);
    await page.getByRole('heading', { name: 'Selling agent' }).waitFor();
    await openOffers();
    await page.getByTestId('offers-empty').waitFor();

    const form = page.getByTestId('offer-form');
    await form.getByLabel('Chain').selectOption('base');
    await form.getByLabel('Asset').selectOption('USDC');
    await form.getByLabel('Price (whole units)').fill('0.01');
    await form.getByLabel('Description (shown to buyers in the 402)').fill('A test report');
    await form.getByLabel('A body agentd stores').check();
    await form.getByLabel('Content', { exact: true }).fill(CONTENT);
    await form.getByLabel('Content type', { exact: true }).fill('text/plain');
    await form.getByLabel('Gas a day for its settlements').fill('0.01');
    await shot('o01-offer-form');
    await form.getByRole('button', { name: 'Create offer' }).click();

    const offer = page.getByTestId('offer').filter({ hasText: 'A test report' });
    await offer.waitFor();
    assert.equal(await offer.getAttribute('data-status'), 'active');
    offerId = await offer.getAttribute('data-offer-id');
    offerUrl = (await offer.getByTestId('offer-url').textContent()).trim();
    assert.equal(offerUrl, `${stack.baseUrl}/x402/${offerId}`);
    assert.equal(await offer.getByTestId('offer-try').getAttribute('href'), offerUrl);
    assert.match(await offer.getByTestId('offer-price').textContent(), /0\.01 USDC a request on base/);
    assert.match(await offer.getByTestId('offer-price').locator('code').getAttribute('title'), new RegExp(seller.address, 'i'));
    assert.match(await offer.getByTestId('offer-facts').textContent(), /a stored body \(text\/plain\)/);
    assert.equal((await offer.getByTestId('offer-earned').textContent()).trim(), 'Nothing earned yet');
    await shot('o02-offer-created');

    // What the link shows a buyer: 402, and what to pay in PAYMENT-REQUIRED.
    const unpaid = await fetch(offerUrl);
    assert.equal(unpaid.status, 402);
    const required = JSON.parse(Buffer.from(unpaid.headers.get('payment-required'), 'base64').toString());
    assert.equal(required.x402Version, 2);
    const [entry] = required.accepts;
    assert.equal(entry.scheme, 'exact');
    assert.equal(entry.network, 'eip155:8453');
    assert.equal(entry.amount, '10000');
    assert.equal(entry.asset, USDC);
    assert.equal(entry.payTo.toLowerCase(), seller.address.toLowerCase());
    assert.deepEqual(entry.extra, { name: 'USD Coin', version: '2' });

    // The same, decoded in the console.
    await offer.getByRole('button', { name: 'What a buyer sees' }).click();
    const probe = offer.getByTestId('offer-probe');
    await probe.waitFor();
    assert.equal(await probe.getAttribute('data-status'), '402');
    const terms = await probe.getByTestId('offer-probe-terms').textContent();
    assert.match(terms, /scheme exact on eip155:8453: pay 10000 base units \(0\.01 USDC\)/);
    assert.ok(terms.toLowerCase().includes(seller.address.toLowerCase()), terms);
    assert.match(terms, /USD Coin version 2/);
    await shot('o02b-what-a-buyer-sees');
  });

  it('a second agent pays it; the seller’s History shows the income beside what it spent, the offer what it earned', async () => {
    const paid = await api(
      'POST',
      `/api/agents/${buyer.id}/x402/fetch`,
      { url: offerUrl, max_amount: '0.05' },
      { 'x-agent-access-token': buyer.token },
    );
    assert.equal(paid.status, 200, JSON.stringify(paid.body));
    assert.equal(paid.body.status, 200, JSON.stringify(paid.body));
    assert.equal(paid.body.body, CONTENT);
    assert.equal(await tokenBalance(stack.rpc, USDC, seller.address), 10000n, 'the price reached the seller’s wallet');

    await page.getByRole('tab', { name: 'History' }).click();
    const row = page.getByTestId('income-row').and(page.locator('[data-status="settled"]'));
    // The income settles once the watcher sees the settlement included; the tab reads it again when shown.
    await until('the income settled', async () => {
      if (await row.count()) return true;
      await page.getByRole('tab', { name: 'Offers' }).click();
      await page.getByRole('tab', { name: 'History' }).click();
      await new Promise((r) => setTimeout(r, 500));
      return false;
    });
    assert.equal((await row.getByTestId('income-amount').textContent()).trim(), '+0.01 USDC');
    assert.equal(await row.getAttribute('data-offer-id'), offerId);
    assert.equal((await row.getByTestId('income-for').textContent()).trim(), 'A test report');
    const income = await api('GET', `/api/agents/${seller.id}/income`, undefined, { 'x-agent-access-token': seller.token });
    assert.equal(income.status, 200, JSON.stringify(income.body));
    const [record] = income.body.income;
    assert.equal(record.status, 'settled', JSON.stringify(record));
    assert.equal(record.payer.toLowerCase(), buyer.address.toLowerCase());
    await assertLocalTx(row.getByTestId('income-tx'), record.tx_hash);
    assert.match(await row.getByTestId('income-fee').textContent(), /^0\.0\d* ETH$|^<0\.00000001 ETH$/);

    // Beside what it spent: the seller spent no USDC; its settlement is a transaction of gas only in its history.
    const books = page.locator('[data-testid="earned-spent"][data-asset="base:USDC"]');
    assert.equal(await books.getAttribute('data-earned'), '0.01');
    assert.equal(await books.getAttribute('data-spent'), '0');
    assert.match(await page.getByTestId('settlement-fees').textContent(), /The settlements\u2019 gas cost the agent .* ETH on base/);
    await page.getByTestId('settlement').first().waitFor();
    await shot('o03-history-income');

    await openOffers();
    const offer = page.locator(`[data-testid="offer"][data-offer-id="${offerId}"]`);
    await offer.getByTestId('offer-earned').filter({ hasText: /^Earned 0\.01 USDC from 1 payment$/ }).waitFor();
  });

  it('offers an upstream URL with a secret header, never shown; a buyer gets its answer, the header reached only it', async () => {
    const form = page.getByTestId('offer-form');
    await form.getByLabel('An upstream URL the agent fronts').check();
    const upstreamUrl = `http://127.0.0.1:${upstream.address().port}/quote`;
    await form.getByRole('textbox', { name: 'Upstream URL' }).fill(upstreamUrl);
    await form.getByLabel('Method').selectOption('GET');
    await form.getByLabel(/^Headers sent to the upstream/).fill('X-Api-Key: upstream-secret-value');
    await form.getByLabel('Price (whole units)').fill('0.02');
    await form.getByLabel('Description (shown to buyers in the 402)').fill('A fronted quote');
    await form.getByRole('button', { name: 'Create offer' }).click();
    const offer = page.getByTestId('offer').filter({ hasText: 'A fronted quote' });
    await offer.waitFor();
    assert.match(await offer.getByTestId('offer-facts').textContent(), new RegExp(`fronts GET ${upstreamUrl}.*with headers of its own`));
    assert.doesNotMatch(await page.locator('main').textContent(), /upstream-secret-value/);
    const url = (await offer.getByTestId('offer-url').textContent()).trim();
    assert.equal(upstreamSeen.length, 0, 'nothing fetched before a payment');

    const paid = await api('POST', `/api/agents/${buyer.id}/x402/fetch`, { url, max_amount: '0.05' }, { 'x-agent-access-token': buyer.token });
    assert.equal(paid.body.status, 200, JSON.stringify(paid.body));
    assert.deepEqual(JSON.parse(paid.body.body), { quote: 'from the upstream' });
    assert.deepEqual(upstreamSeen, [{ url: '/quote', key: 'upstream-secret-value' }]);
    await shot('o04a-upstream-offer');
  });

  it('closes the offer after a confirmation: its URL answers 404', async () => {
    const offer = page.locator(`[data-testid="offer"][data-offer-id="${offerId}"]`);
    await offer.getByRole('button', { name: 'Close the offer A test report' }).click();
    await offer.getByRole('button', { name: /^Confirm: close the offer A test report/ }).click();
    await page.locator(`[data-testid="offer"][data-offer-id="${offerId}"][data-status="closed"]`).waitFor();
    assert.equal(await page.locator(`[data-testid="offer"][data-offer-id="${offerId}"]`).getByTestId('offer-try').count(), 0);
    const gone = await fetch(offerUrl);
    assert.equal(gone.status, 404);
    assert.equal((await gone.json()).error.code, 'offer_not_found');
    await shot('o04-offer-closed');
  });

  it('creates a facilitator token shown once, lists it with its last use, and deletes it', async () => {
    const section = page.getByTestId('facilitator');
    assert.equal((await section.getByTestId('facilitator-url').textContent()).trim(), `${stack.baseUrl}/api/agents/${seller.id}/x402`);
    await section.getByTestId('facilitator-tokens-empty').waitFor();
    await section.getByRole('button', { name: 'Create a facilitator token' }).click();
    const reveal = section.getByTestId('facilitator-token-reveal');
    await reveal.waitFor();
    const token = await reveal.getByRole('textbox', { name: 'Facilitator token' }).inputValue();
    assert.match(token, /^fac_/);
    await shot('o05-facilitator-token-shown-once');

    // Good for the agent's facilitator endpoints, and nothing else of the agent.
    const supported = await api('GET', `/api/agents/${seller.id}/x402/supported`, undefined, { authorization: `Bearer ${token}` });
    assert.equal(supported.status, 200, JSON.stringify(supported.body));
    assert.deepEqual(supported.body.kinds, [{ x402Version: 2, scheme: 'exact', network: 'eip155:8453' }]);
    assert.equal((await api('GET', `/api/agents/${seller.id}`, undefined, { authorization: `Bearer ${token}` })).status, 401);

    await reveal.getByRole('button', { name: 'I have saved the token' }).click();
    assert.equal(await section.getByTestId('facilitator-token-reveal').count(), 0, 'the token is not shown again');
    await refreshOffers();
    const row = section.getByTestId('facilitator-token');
    await row.waitFor();
    assert.ok(token.startsWith((await row.locator('code').textContent()).replace('\u2026', '')), 'listed by its prefix');
    assert.doesNotMatch(await section.textContent(), new RegExp(token));
    await until('the last use shown', async () => {
      await refreshOffers();
      return !/never/.test(await row.getByTestId('facilitator-last-used').textContent());
    });

    await row.getByRole('button', { name: /^Delete the facilitator token/ }).click();
    await row.getByRole('button', { name: /^Confirm: delete the facilitator token/ }).click();
    await section.getByTestId('facilitator-tokens-empty').waitFor({ state: 'visible' });
    const refused = await api('GET', `/api/agents/${seller.id}/x402/supported`, undefined, { authorization: `Bearer ${token}` });
    assert.equal(refused.status, 401, JSON.stringify(refused.body));
  });

  it('fits a 390 px screen', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await openOffers();
    await page.getByTestId('offer').first().waitFor();
    assert.deepEqual(await page.evaluate(overflowProblems), []);
    await page.getByRole('tab', { name: 'History' }).click();
    await page.getByTestId('income-row').first().waitFor();
    assert.deepEqual(await page.evaluate(overflowProblems), []);
    await shot('o06-narrow');
    await page.setViewportSize({ width: 1360, height: 900 });
  });

  it('logged no page errors and loaded nothing from elsewhere', () => {
    assert.deepEqual(pageErrors, []);
  });
});

/**
 * A scripted OpenAI-compatible Chat Completions server on 127.0.0.1: each request takes the next reply of `script`
 * (`{tool, args}` for a tool call, `{text}` for a final answer), streamed as chunks when the request streams.
 */
async function scriptedLlm(script) {
  const requests = [];
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const body = JSON.parse(raw || '{}');
      requests.push(body);
      const next = script.shift() ?? { text: 'the script is exhausted' };
      const message = next.tool
        ? { role: 'assistant', content: null, tool_calls: [{ id: `call_${requests.length}`, type: 'function', function: { name: next.tool, arguments: JSON.stringify(next.args) } }] }
        : { role: 'assistant', content: next.text };
      const finish = next.tool ? 'tool_calls' : 'stop';
      const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
      if (!body.stream) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ id: 'cmpl', object: 'chat.completion', model: body.model, choices: [{ index: 0, message, finish_reason: finish }], usage }));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = (delta, finishReason, extra = {}) =>
        res.write(`data: ${JSON.stringify({ id: 'cmpl', object: 'chat.completion.chunk', model: body.model, choices: [{ index: 0, delta, finish_reason: finishReason }], ...extra })}\n\n`);
      if (next.tool) {
        chunk({ role: 'assistant', tool_calls: [{ index: 0, ...message.tool_calls[0] }] }, null);
      } else {
        chunk({ role: 'assistant', content: next.text }, null);
      }
      chunk({}, finish);
      if (body.stream_options?.include_usage) res.write(`data: ${JSON.stringify({ id: 'cmpl', object: 'chat.completion.chunk', choices: [], usage })}\n\n`);
      res.end('data: [DONE]\n\n');
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}/v1`, requests, close: () => server.close() };
}

describe('web console: an offer made from chat (create_offer)', { timeout: 180000 }, () => {
  let stack;
  let llm;
  let page;
  const pageErrors = [];

  before(async () => {
    llm = await scriptedLlm([
      {
        tool: 'create_offer',
        args: { chain: 'base', asset: 'USDC', price: '0.03', description: 'A chat-made note', content: 'a note', content_type: 'text/plain', gas_per_day: '0.001' },
      },
      { text: 'The note is on sale.' },
    ]);
    // No ADMIN_TOKEN and no owner: an unguarded agent, whose own token may make offers (a guarded one's tool refuses).
    stack = await startStack({ env: { LLM_PROVIDER: 'openai', LLM_BASE_URL: llm.url, LLM_API_KEY: 'test-key', LLM_MODEL: 'scripted' } });
    await placeUsdc(stack.rpc);
    const created = await callApi(stack.baseUrl, 'POST', '/api/agents', {
      name: 'Chat seller', chains: ['base'], capabilities: ['read', 'transact'], spending_cap: 1,
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const context = await stack.browser.newContext({ viewport: { width: 1360, height: 900 } });
    await context.addInitScript(([id, token]) => localStorage.setItem(`agentd.token.${id}`, token), [created.body.id, created.body.access_token]);
    page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    await watchPage(page, stack.baseUrl, pageErrors);
    await page.goto(`${stack.baseUrl}/#/agents/${created.body.id}/chat`);
    await page.getByRole('heading', { name: 'Chat seller' }).waitFor();
  });

  after(async () => {
    if (page) await page.screenshot({ path: join(artifactsDir, 'offers-chat-zz-last-state.png'), fullPage: true }).catch(() => {});
    llm?.close();
    await stack?.stop();
  });

  it('shows where the offer is on sale under the create_offer card, and lists it in the Offers tab', async () => {
    await page.getByLabel('Message', { exact: true }).fill('sell a note for 0.03 USDC');
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    const card = page.locator('[data-testid="chain-call"][data-tool="create_offer"]');
    await card.waitFor();
    const made = page.getByTestId('offer-made');
    await made.waitFor();
    const url = await made.locator('a').getAttribute('href');
    assert.match(url, new RegExp(`^${stack.baseUrl}/x402/[0-9a-f-]{36}$`));
    assert.match(await made.textContent(), /On sale: A chat-made note, 0\.03 USDC, at/);
    assert.ok(llm.requests[0].tools.some((t) => t.function.name === 'create_offer'), 'the tool is offered to the model');
    await page.screenshot({ path: join(artifactsDir, 'o07-chat-create-offer.png'), fullPage: true });

    await page.getByRole('tab', { name: 'Offers' }).click();
    const offer = page.getByTestId('offer').filter({ hasText: 'A chat-made note' });
    await offer.waitFor();
    assert.equal(await offer.getByTestId('offer-try').getAttribute('href'), url);
  });

  it('logged no page errors and loaded nothing from elsewhere', () => {
    assert.deepEqual(pageErrors, []);
  });
});
