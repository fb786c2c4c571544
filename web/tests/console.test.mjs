// The console in headless Chromium against the real binary and anvil: create an agent, chat with the builtin
// engine (streamed answer with a chain-call card), fund the wallet and see the balance, send a transfer and see
// its confirmation arrive live. A screenshot of each step goes to the artifacts directory.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { join } from 'node:path';
import { artifactsDir, startStack, watchPage, openFold } from './harness.mjs';

const RECIPIENT = '0x52908400098527886E0F7030069857D2E4169EE7';
const TIMEOUT = 20000;

describe('web console', { timeout: 180000 }, () => {
  let stack;
  let page;
  let agentId;
  let address;
  const pageErrors = [];

  before(async () => {
    stack = await startStack();
    const context = await stack.browser.newContext({ viewport: { width: 1360, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    await watchPage(page, stack.baseUrl, pageErrors);
  });

  after(async () => {
    if (page) await page.screenshot({ path: join(artifactsDir, 'zz-last-state.png'), fullPage: true }).catch(() => {});
    await stack?.stop();
  });

  const shot = (name) => page.screenshot({ path: join(artifactsDir, `${name}.png`), fullPage: true });

  it('serves the console at / and creates an agent, showing its token once', async () => {
    const response = await page.goto(stack.baseUrl + '/');
    assert.equal(response.status(), 200);
    assert.match(response.headers()['content-type'], /text\/html/);
    await page.getByRole('heading', { name: 'New agent' }).waitFor();

    await page.getByLabel('Name', { exact: true }).fill('Browser test agent');
    const chains = page.getByRole('group', { name: 'Chains' });
    for (const box of await chains.getByRole('checkbox').all()) await box.uncheck();
    await chains.getByRole('checkbox', { name: /^base 8453/ }).check();
    const caps = page.getByRole('group', { name: 'Capabilities' });
    await caps.getByRole('checkbox', { name: /^read/ }).check();
    await caps.getByRole('checkbox', { name: /^transact/ }).check();
    await page.getByLabel(/Spending cap/).fill('1');
    await shot('01-create-form');
    await page.getByRole('button', { name: 'Create agent' }).click();

    const reveal = page.getByTestId('token-reveal');
    await reveal.waitFor();
    const token = await reveal.getByRole('textbox', { name: 'Access token' }).inputValue();
    assert.match(token, /^agt_[A-Za-z0-9_-]{43,}$/);
    await reveal.getByText(/shown only once/).waitFor();
    await reveal.getByRole('button', { name: 'Copy access token' }).waitFor();
    await shot('02-token-shown-once');

    agentId = await page.evaluate(() => /#\/agents\/([0-9a-f-]{36})/.exec(location.hash)?.[1]);
    assert.ok(agentId, 'the agent is selected');
    const stored = await page.evaluate((id) => localStorage.getItem(`agentd.token.${id}`), agentId);
    assert.equal(stored, token, 'the token is remembered in local storage');

    await reveal.getByRole('button', { name: 'I have saved the token' }).click();
    await page.getByRole('tab', { name: 'Wallet', selected: true }).waitFor();
    address = (await page.getByTestId('address-base').textContent()).trim();
    assert.match(address, /^0x[0-9a-fA-F]{40}$/);
    const uri = await page.getByTestId('payment-uri-base').textContent();
    assert.ok(uri.startsWith(`ethereum:${address}@8453`), uri);
    await page.getByRole('img', { name: /QR code for ethereum:/ }).waitFor();
    // A token QR code: the EIP-681 call of USDC's transfer to the agent, amount in USDC's base units.
    await page.getByLabel('Asset of the QR codes').selectOption('USDC');
    await page.getByLabel(/Amount to request in the QR codes/).fill('2.5');
    await page.getByRole('button', { name: 'Update QR codes' }).click();
    const usdcUri = `ethereum:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913@8453/transfer?address=${address}&uint256=2500000`;
    await page.getByTestId('payment-uri-base').filter({ hasText: usdcUri }).waitFor();
    await page.getByRole('img', { name: `QR code for ${usdcUri}` }).waitFor();
    await shot('03a-usdc-qr');
    await page.getByLabel('Asset of the QR codes').selectOption('');
    await page.getByLabel(/Amount to request in the QR codes/).fill('');
    await page.getByRole('button', { name: 'Update QR codes' }).click();
    await page.getByTestId('payment-uri-base').filter({ hasText: `ethereum:${address}@8453` }).waitFor();
    await page.getByTestId('balance-base').filter({ hasText: 'ETH' }).waitFor();
    assert.match(await page.getByTestId('balance-base').textContent(), /^0(\.0+)? ETH$/);
    await page.getByRole('listitem').filter({ hasText: 'Browser test agent' }).waitFor();
    // No ADMIN_TOKEN and no owner address: the console says the agent's own token can lift its limits.
    await page.getByTestId('unguarded-warning').filter({ hasText: /its own access token can lift its limits/ }).waitFor();
    await shot('03-wallet');
  });

  it('chats with the builtin engine: a streamed answer with a chain-call card', async () => {
    assert.ok(address, 'needs the agent of the first step');
    await page.getByRole('tab', { name: 'Chat' }).click();
    const composer = page.getByLabel('Message', { exact: true });
    await composer.waitFor();
    // Record every text the answer shows while it streams.
    await page.evaluate(() => {
      window.__streamed = [];
      new MutationObserver((records) => {
        for (const r of records) {
          const el = r.target instanceof Element ? r.target : r.target.parentElement;
          const body = el?.closest('[data-testid="message-content"]');
          if (!body || !body.closest('[data-role="assistant"]')) continue;
          // Each text_delta replaces the text: the added text nodes are the successive states.
          for (const node of r.addedNodes) if (node.nodeType === Node.TEXT_NODE) window.__streamed.push(node.data);
        }
      }).observe(document.querySelector('[role="log"]'), { subtree: true, childList: true, characterData: true });
    });
    await composer.fill('what is my balance on base');
    await page.getByRole('button', { name: 'Send' }).click();

    const answer = page.locator('[data-testid="message"][data-role="assistant"][data-state="done"]').last();
    await answer.waitFor();
    const card = answer.getByTestId('chain-call').first();
    assert.equal(await card.getAttribute('data-tool'), 'get_balance');
    assert.equal(await card.getAttribute('data-state'), 'done');
    await card.locator('summary').click();
    await card.getByTestId('chain-call-args').waitFor();
    assert.deepEqual(JSON.parse(await card.getByTestId('chain-call-args').textContent()), { chain: 'base' });
    assert.match(await card.getByTestId('chain-call-result').textContent(), /"formatted"/);
    assert.match(await card.locator('summary').textContent(), /\d+ ms/);
    const text = (await answer.getByTestId('message-content').textContent()).trim();
    assert.match(text, /0(\.0+)? ETH/, text);
    const streamed = await page.evaluate(() => window.__streamed.filter((t) => t && t.length > 0));
    assert.ok(new Set(streamed).size > 1, `the answer arrived in pieces: ${JSON.stringify(streamed)}`);
    assert.equal(streamed.at(-1).trim(), text);
    await page.getByRole('list', { name: 'Conversations' }).getByRole('button', { name: /^what is my balance on base/ }).waitFor();
    await shot('04-chat-streamed-answer');
  });

  it('shows the balance after the wallet is funded on anvil', async () => {
    assert.ok(address, 'needs the agent of the first step');
    await stack.rpc('anvil_setBalance', [address, '0x8ac7230489e80000']); // 10 ETH
    await page.getByRole('tab', { name: 'Wallet' }).click();
    await page.getByRole('button', { name: 'Refresh balances' }).click();
    await page.getByTestId('balance-base').filter({ hasText: /^10(\.0+)? ETH$/ }).waitFor();
    await shot('05-funded-balance');
  });

  it('sends a transfer and shows its confirmation live in the thread', async () => {
    assert.ok(address, 'needs the agent of the first step');
    await page.getByRole('tab', { name: 'Chat' }).click();
    await page.getByLabel('Message', { exact: true }).fill(`send 0.01 ETH to ${RECIPIENT} on base`);
    await page.getByRole('button', { name: 'Send' }).click();
    const answer = page.locator('[data-testid="message"][data-role="assistant"][data-state="done"]').nth(1);
    await answer.waitFor();
    const card = answer.locator('[data-testid="chain-call"][data-tool="send_native"]');
    assert.equal(await card.getAttribute('data-state'), 'done', await card.textContent());
    const result = JSON.parse(await card.getByTestId('chain-call-result').textContent());
    const hash = result.tx_hash;
    assert.match(hash, /^0x[0-9a-f]{64}$/, JSON.stringify(result));

    const confirmation = page.locator(`[data-testid="tx-confirmation"][data-tx-hash="${hash}"]`);
    await confirmation.waitFor();
    assert.equal(await confirmation.getAttribute('data-status'), 'confirmed');
    await confirmation.getByText('Transaction confirmed on base').waitFor();
    const onChain = await stack.rpc('eth_getBalance', [RECIPIENT, 'latest']);
    assert.equal(BigInt(onChain), 10n ** 16n);
    await shot('06-transfer-confirmed');
  });

  it('edits the agent, reissues its token and soft-deletes it', async () => {
    assert.ok(address, 'needs the agent of the first step');
    await page.getByRole('tab', { name: 'Settings' }).click();
    await page.getByLabel(/Spending cap/).fill('2');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByText(/Spending cap: 2 per chain/).waitFor();
    await shot('07-settings');

    const before = await page.evaluate((id) => localStorage.getItem(`agentd.token.${id}`), agentId);
    await page.getByRole('tab', { name: 'Settings' }).click();
    await openFold(page, 'settings-reissue');
    await page.getByRole('button', { name: 'Reissue with the current token' }).click();
    const reveal = page.getByTestId('token-reveal');
    await reveal.waitFor();
    const fresh = await reveal.getByRole('textbox', { name: 'Access token' }).inputValue();
    assert.notEqual(fresh, before);
    assert.equal(await page.evaluate((id) => localStorage.getItem(`agentd.token.${id}`), agentId), fresh);
    const old = await fetch(`${stack.baseUrl}/api/agents/${agentId}`, { headers: { 'X-Agent-Access-Token': before } });
    assert.equal(old.status, 401, 'the old token stopped working');
    await reveal.getByRole('button', { name: 'I have saved the token' }).click();

    await page.getByRole('tab', { name: 'Settings' }).click();
    await openFold(page, 'settings-delete');
    await page.getByRole('button', { name: 'Delete agent…' }).click();
    await page.getByRole('button', { name: /^Yes, delete/ }).click();
    await page.getByText(/This agent is deleted/).waitFor();
    await page.getByRole('listitem').filter({ hasText: 'deleted' }).waitFor();
    await shot('08-deleted');
  });

  it('logged no page errors and loaded nothing from elsewhere', () => {
    assert.deepEqual(pageErrors, []);
  });
});
