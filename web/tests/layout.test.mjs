// Every main screen of the console fits the screen at 1280 and 390 pixels wide (issue 37, point 3): no page that
// scrolls sideways, no element past the right edge, no box that hides part of its content behind a sideways
// scrollbar (the tab bar excepted: it scrolls on purpose, with a visible cue). With real data: a guarded agent with
// a confirmed transfer, one held for approval, one refused by the daily limit and a chat. On the way it checks how
// the console orients a newcomer (point 8): the admin token asked up front, then the overview; an agent opens on its
// History, where the held transfer links to its approval (point 6), with the inbox badge right from the start; and
// the send review's words for a transfer that will only be held (point 7); a window shrunk from 1280 to 390 without a
// reload fits as a fresh load does; the Delegations grant form's answer to a plain account, with the wallet's
// ERC-7715 permission offer (issue 54 point 1), fits too. Screenshots: layout-<screen>-<width>.png.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { artifactsDir, callApi, overflowProblems, startStack, until, watchPage } from './harness.mjs';
import { mined } from '../../scripts/evm.mjs';
import { deployFramework, newKey } from './delegation-framework.mjs';

const RECIPIENT = '0x52908400098527886E0F7030069857D2E4169EE7';
const DEV = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
const ADMIN = `adm_${randomBytes(24).toString('hex')}`;
const TIMEOUT = 20000;
const WIDTHS = [
  { width: 1280, height: 800 },
  { width: 390, height: 844 },
];

describe('web console layout at 1280 and 390 pixels', { timeout: 420000 }, () => {
  let stack;
  let context;
  let page;
  let agentId;
  let agentToken;
  let otherId;
  let heldId;
  let conversationId;
  let framework;
  const pageErrors = [];
  const api = (method, path, body, headers) => callApi(stack.baseUrl, method, path, body, headers);
  const asAdmin = { authorization: `Bearer ${ADMIN}` };
  const asAgent = () => ({ 'x-agent-access-token': agentToken });
  const shot = (name, width) => page.screenshot({ path: join(artifactsDir, `layout-${name}-${width}.png`), fullPage: true });

  /** Fails naming what sticks out, after the screen settled. */
  async function assertFits(screen, width) {
    await page.waitForTimeout(150);
    const problems = await page.evaluate(overflowProblems);
    assert.deepEqual(problems, [], `${screen} at ${width} px does not fit:\n${problems.join('\n')}`);
  }

  /** A fresh load of a console address (not only a change of its hash, which the console follows too). */
  async function open(hash) {
    await page.goto('about:blank');
    await page.goto(`${stack.baseUrl}/${hash}`);
  }

  before(async () => {
    // The Delegation Framework on the node (as delegations.test.mjs deploys it), so the Delegations tab can grant.
    stack = await startStack({
      env: { ADMIN_TOKEN: ADMIN, CONFIRMATIONS_BASE: '1' },
      prepare: async (rpc) => (framework = await deployFramework(rpc)).env,
    });
    const created = await api(
      'POST',
      '/api/agents',
      {
        name: 'Treasury agent',
        description: 'Pays suppliers on base within a daily budget.',
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
    await mined(stack.rpc, await stack.rpc('eth_sendTransaction', [{ from: DEV, to: created.body.wallet_addresses.base, value: '0x8ac7230489e80000' }]));
    const other = await api('POST', '/api/agents', { name: 'Research agent', chains: ['base'], capabilities: ['read'], spending_cap: 0 }, asAdmin);
    assert.equal(other.status, 201, JSON.stringify(other.body));
    otherId = other.body.id;
    const policy = await api(
      'PUT',
      `/api/agents/${agentId}/policy`,
      { limits: { 'base:ETH': { per_transfer: '0.5', per_day: '0.1', approval_above: '0.01' } } },
      asAdmin,
    );
    assert.equal(policy.status, 200, JSON.stringify(policy.body));
    // A transfer sent at once, one held above the approval threshold, one refused by the daily limit, and a chat.
    const sent = await api('POST', `/api/agents/${agentId}/transfers`, { chain: 'base', to: RECIPIENT, amount: '0.005' }, asAgent());
    assert.equal(sent.status, 201, JSON.stringify(sent.body));
    const held = await api('POST', `/api/agents/${agentId}/transfers`, { chain: 'base', to: RECIPIENT, amount: '0.02' }, asAgent());
    assert.equal(held.body.status, 'awaiting_approval', JSON.stringify(held.body));
    heldId = held.body.id;
    const refused = await api('POST', `/api/agents/${agentId}/transfers`, { chain: 'base', to: RECIPIENT, amount: '0.08' }, asAgent());
    assert.equal(refused.status, 403, JSON.stringify(refused.body));
    const chat = await api('POST', '/api/chat', { agent_id: agentId, message: `send 0.015 ETH to ${RECIPIENT} on base` }, asAgent());
    assert.equal(chat.status, 200, JSON.stringify(chat.body));
    conversationId = chat.body.conversation_id;
    await until('the first transfer to confirm', async () => (await api('GET', `/api/agents/${agentId}/transfers/${sent.body.id}`, undefined, asAgent())).body.status === 'confirmed');

    context = await stack.browser.newContext({ viewport: WIDTHS[0] });
    page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    // The list is refused (401) until the admin token is given.
    await watchPage(page, stack.baseUrl, pageErrors, [401]);
  });

  after(async () => {
    await stack?.stop();
  });

  it('asks for the admin token up front, then opens on the overview with the inbox badge counted', async () => {
    await open('');
    const signIn = page.getByTestId('sign-in');
    await signIn.waitFor();
    assert.equal(await page.getByText('No agents yet').count(), 0, 'a list the server refused is not said to be empty');
    assert.equal(await page.getByRole('heading', { name: 'New agent' }).count(), 0, 'not the New agent form');
    for (const size of WIDTHS) {
      await page.setViewportSize(size);
      await assertFits('the sign-in screen', size.width);
      await shot('sign-in', size.width);
    }
    await page.setViewportSize(WIDTHS[0]);
    await signIn.getByLabel('Admin token').fill(ADMIN);
    await signIn.getByRole('button', { name: 'Continue' }).click();
    // Accepted: the console moves on to the overview, which reads both agents with the admin token alone.
    const row = page.getByTestId('overview-row').filter({ hasText: 'Treasury agent' });
    await row.getByTestId('overview-balance-base').waitFor();
    await page.getByTestId('overview-row').filter({ hasText: 'Research agent' }).waitFor();
    // Two transfers wait (one through the API, one from the chat): the sidebar's inbox badge says so without the
    // inbox having been opened.
    await page.getByTestId('inbox-count').filter({ hasText: /^2$/ }).waitFor();
  });

  it('the admin token alone opens an agent: History, Approvals, Policy, Audit and Webhooks; chat and send ask for its token', async () => {
    // Issue 37, point 5: owner authority (§10) opens every view an owner needs without the agent's secret.
    await page.getByRole('list', { name: 'Agent list' }).getByRole('button', { name: /Treasury agent/ }).click();
    await page.getByRole('heading', { name: 'Treasury agent' }).waitFor();
    assert.match(await page.getByTestId('opened-as-owner').textContent(), /Opened as owner with the admin token/);
    assert.equal(await page.getByRole('button', { name: 'Use token' }).count(), 0, 'no token form blocks the agent');
    assert.equal(await page.evaluate((id) => localStorage.getItem(`agentd.token.${id}`), agentId), null, 'no agent token held');
    // History: the confirmed transfer, the held one and the refused request.
    await page.getByRole('tab', { name: 'History', selected: true }).waitFor();
    await page.locator(`[data-testid="history-row"][data-transfer-id="${heldId}"][data-status="awaiting_approval"]`).waitFor();
    await page.locator('[data-testid="history-row"][data-status="confirmed"]').waitFor();
    await page.locator('[data-testid="activity-row"][data-activity="refused"]').waitFor();
    await shot('owner-history', 1280);
    // Approvals: the held cards, with what held them.
    await page.getByRole('tab', { name: /^Approvals/ }).click();
    await page.locator(`[data-testid="approval"][data-transfer-id="${heldId}"]`).getByTestId('approval-rule').waitFor();
    // Policy: the limits set through the API.
    await page.getByRole('tab', { name: 'Policy' }).click();
    await page.getByTestId('policy-saved').waitFor({ state: 'attached' });
    await until('the policy read as the owner', async () => (await page.getByRole('tabpanel').locator('input').evaluateAll((els) => els.map((e) => e.value))).includes('0.01'));
    // Audit: the agent's entries.
    await page.getByRole('tab', { name: 'Audit' }).click();
    await page.getByTestId('audit-entry').first().waitFor();
    assert.ok((await page.getByTestId('audit-entry').count()) >= 4);
    // Webhooks: listed, and the form to add one.
    await page.getByRole('tab', { name: 'Webhooks' }).click();
    await page.getByTestId('webhook-form').waitFor();
    await page.locator('.webhooks-panel').getByText('No webhooks yet.').waitFor();
    assert.equal(await page.locator('.webhooks-panel .form-error:visible').count(), 0, 'nothing refused');
    // Chat and sending act as the agent: each says so, with a field for the token, and nothing else is blocked.
    await page.getByRole('tab', { name: 'Chat' }).click();
    const chatAsk = page.getByRole('tabpanel').getByTestId('needs-agent-token');
    await chatAsk.filter({ hasText: /Chat needs the agent.s own token/ }).waitFor();
    await page.getByRole('tab', { name: 'Wallet' }).click();
    await page.getByTestId('balance-base').filter({ hasText: /ETH/ }).waitFor();
    const sendAsk = page.getByTestId('send-card').getByTestId('needs-agent-token');
    await sendAsk.filter({ hasText: /Sending needs the agent.s own token/ }).waitFor();
    for (const size of WIDTHS) {
      await page.setViewportSize(size);
      await assertFits('the wallet opened as owner', size.width);
      await shot('owner-wallet', size.width);
    }
    await page.setViewportSize(WIDTHS[0]);
    // A wrong token is refused in place; the agent's own is taken and the agent re-opens on the same tab with it.
    await sendAsk.getByLabel('Access token').fill('agt_not_this_agents_token_at_all_0000000000000000');
    await sendAsk.getByRole('button', { name: 'Use token' }).click();
    await sendAsk.getByRole('alert').filter({ hasText: /refused this token/ }).waitFor();
    await sendAsk.getByLabel('Access token').fill(agentToken);
    await sendAsk.getByRole('button', { name: 'Use token' }).click();
    await page.getByRole('tab', { name: 'Wallet', selected: true }).waitFor();
    await page.getByTestId('send-card').getByLabel('Recipient').waitFor();
    assert.equal(await page.getByTestId('opened-as-owner').count(), 0);
  });

  it('opens an agent on its History, where the held transfer links to its approval', async () => {
    await open(`#/agents/${agentId}`);
    await page.getByRole('tab', { name: 'History', selected: true }).waitFor();
    const held = page.locator(`[data-testid="history-row"][data-transfer-id="${heldId}"]`);
    await held.and(page.locator('[data-status="awaiting_approval"]')).waitFor();
    assert.match(await held.getByTestId('held-note').textContent(), /Waits for the owner.s approval/);
    await page.locator('[data-testid="activity-row"][data-activity="refused"]').waitFor();
    await page.locator('[data-testid="history-row"][data-status="confirmed"]').waitFor();
    assert.match(await page.getByTestId('held-count').textContent(), /2 waiting for approval/);
    await held.getByTestId('approval-link').click();
    await page.getByRole('tab', { name: /^Approvals/, selected: true }).waitFor();
    const card = page.locator(`[data-testid="approval"][data-transfer-id="${heldId}"]`);
    await card.and(page.locator('.highlight')).waitFor();
    await until('the held card in view', () => card.evaluate((el) => {
      const r = el.getBoundingClientRect();
      return r.top >= 0 && r.bottom <= window.innerHeight + r.height;
    }));
  });

  it('says in words what a send above the approval threshold will do, and submits it for approval', async () => {
    await page.getByRole('tab', { name: 'Wallet' }).click();
    const send = page.getByTestId('send-card');
    await send.getByLabel('Recipient').fill(RECIPIENT);
    await send.getByLabel('Amount').fill('0.012');
    await send.getByRole('button', { name: 'Review' }).click();
    const review = page.getByTestId('send-review');
    await review.getByTestId('review-policy').waitFor();
    assert.equal(
      await review.getByTestId('review-policy').textContent(),
      'at most 0.5 ETH a transfer · 0.1 ETH a day · the owner approves anything above 0.01 ETH',
    );
    assert.doesNotMatch(await review.textContent(), /approval_above|per_transfer|policy_denied/);
    await review.getByTestId('review-notes').filter({ hasText: /wait for the owner.s approval/ }).waitFor();
    // The fee figure (issue 54 point 6) fits with the rest.
    await review.getByTestId('review-fee').filter({ hasText: /^at most [\d.]+ ETH \(gas limit 21,000/ }).waitFor();
    for (const size of WIDTHS) {
      await page.setViewportSize(size);
      await assertFits('the send review', size.width);
      await shot('send-review', size.width);
    }
    await page.setViewportSize(WIDTHS[0]);
    // Within the daily limit (0.005 sent, 0.02 and 0.015 waiting, 0.012 more: 0.052 of 0.1), above the threshold.
    await review.getByTestId('review-daily').filter({ hasText: /Daily limit 0\.1 ETH: 0\.04 counted in the last 24 h, 0\.06 left/ }).waitFor();
    await review.getByRole('button', { name: 'Submit 0.012 ETH for approval' }).waitFor();
    assert.equal(await review.getByRole('button', { name: /Confirm and send/ }).count(), 0);
    await review.getByRole('button', { name: 'Back to edit' }).click();
    await send.getByLabel('Amount').fill('0.002');
    await send.getByRole('button', { name: 'Review' }).click();
    await review.getByRole('button', { name: 'Confirm and send 0.002 ETH' }).click();
    const result = page.getByTestId('send-result');
    await result.getByTestId('send-status').waitFor();
    assert.doesNotMatch(await result.textContent(), /HTTP/);
  });

  it('fits every main screen at 1280 and 390 pixels (and 1024, between the two layouts)', async () => {
    const base = `#/agents/${agentId}`;
    const screens = [
      { name: 'overview', hash: '#/overview', ready: () => page.getByTestId('overview-row').first().getByTestId('overview-balance-base').waitFor() },
      { name: 'inbox', hash: '#/approvals', ready: () => page.getByTestId('inbox').getByTestId('approval-rule').first().waitFor() },
      { name: 'new-agent', hash: '#/new', ready: () => page.getByRole('heading', { name: 'New agent' }).waitFor() },
      { name: 'agent-as-owner', hash: `#/agents/${otherId}/chat`, ready: () => page.getByTestId('opened-as-owner').waitFor() },
      {
        // A browser without the admin token: the agent's token form, and opening it as its owner with a session.
        name: 'agent-token',
        hash: `#/agents/${otherId}`,
        ready: async () => {
          await page.evaluate(() => localStorage.removeItem('agentd.adminToken'));
          await page.reload();
          await page.getByTestId('open-as-owner').waitFor();
          await page.getByRole('button', { name: 'Use token' }).waitFor();
        },
        done: () => page.evaluate((admin) => localStorage.setItem('agentd.adminToken', admin), ADMIN),
      },
      {
        name: 'history',
        hash: `${base}/history`,
        ready: async () => {
          await page.locator('[data-testid="history-row"][data-status="awaiting_approval"]').first().waitFor();
          await page.locator('[data-testid="activity-row"]').first().waitFor();
          await page.getByTestId('spending-charts').locator('figure').first().waitFor();
        },
      },
      { name: 'approvals', hash: `${base}/approvals`, ready: () => page.getByRole('tabpanel').getByTestId('approval-rule').first().waitFor() },
      { name: 'wallet', hash: `${base}/wallet`, ready: () => page.getByTestId('balance-base').filter({ hasText: /ETH/ }).waitFor() },
      {
        name: 'chat',
        hash: `${base}/chat`,
        ready: async () => {
          await page.getByRole('list', { name: 'Conversations' }).getByRole('button').first().click();
          await page.getByTestId('held-link').first().waitFor();
        },
      },
      { name: 'policy', hash: `${base}/policy`, ready: () => page.getByTestId('policy-saved').waitFor({ state: 'attached' }) },
      { name: 'webhooks', hash: `${base}/webhooks`, ready: () => page.getByTestId('webhook-form').waitFor() },
      { name: 'audit', hash: `${base}/audit`, ready: () => page.getByTestId('audit-entry').first().waitFor() },
      { name: 'settings', hash: `${base}/settings`, ready: () => page.getByTestId('settings-delete').waitFor() },
      {
        name: 'settings-open',
        hash: `${base}/settings`,
        ready: async () => {
          await page.getByTestId('settings-delete').waitFor();
          await page.locator('details.fold').evaluateAll((folds) => folds.forEach((f) => (f.open = true)));
          await page.getByRole('button', { name: 'Delete agent…' }).waitFor();
        },
      },
    ];
    const failures = [];
    for (const size of [...WIDTHS, { width: 1024, height: 768 }]) {
      await page.setViewportSize(size);
      for (const screen of screens) {
        await open(screen.hash);
        await screen.ready();
        await shot(screen.name, size.width);
        try {
          await assertFits(screen.name, size.width);
        } catch (e) {
          failures.push(e.message);
        }
        if (screen.done) await screen.done();
      }
    }
    assert.deepEqual(failures, []);
  });

  it('fits the grant form\'s answer to a plain account, with the wallet\'s permission offer (ERC-7715), at 1280 and 390 pixels', async () => {
    // A browser wallet whose account is a plain EOA and which offers Advanced Permissions: the grant form reads its
    // code, explains, and offers the wallet's permission request (issue 54 point 1). Only its answers matter here.
    const plain = newKey();
    const walled = await stack.browser.newContext({ viewport: WIDTHS[0] });
    await walled.addInitScript(
      ([id, token, admin]) => {
        localStorage.setItem(`agentd.token.${id}`, token);
        localStorage.setItem('agentd.adminToken', admin);
      },
      [agentId, agentToken, ADMIN],
    );
    await walled.exposeBinding('__testWallet', async (_source, method, params) => {
      if (method === 'eth_requestAccounts' || method === 'eth_accounts') return [plain.address];
      if (method === 'eth_chainId') return '0x2105';
      if (method === 'wallet_getSupportedExecutionPermissions') return { 'erc20-token-periodic': { chainIds: ['0x2105'] } };
      if (method === 'eth_getCode') return stack.rpc(method, params);
      throw new Error(`the layout test's wallet was asked to ${method}`);
    });
    await walled.addInitScript(() => {
      window.ethereum = { request: ({ method, params }) => window.__testWallet(method, params ?? []) };
    });
    const tab = await walled.newPage();
    tab.setDefaultTimeout(TIMEOUT);
    await watchPage(tab, stack.baseUrl, pageErrors, []);
    try {
      await tab.goto(`${stack.baseUrl}/#/agents/${agentId}/delegations`);
      const form = tab.getByTestId('grant-form');
      await form.getByLabel('Asset').selectOption('USDC');
      await form.getByLabel('Amount per period').fill('5');
      await form.getByRole('button', { name: 'Sign with my wallet and grant' }).click();
      await form.getByTestId('permission-offer').waitFor();
      assert.equal(framework.manager.length, 42);
      for (const size of WIDTHS) {
        await tab.setViewportSize(size);
        await tab.waitForTimeout(150);
        const problems = await tab.evaluate(overflowProblems);
        assert.deepEqual(problems, [], `the grant form's plain-account answer at ${size.width} px does not fit:\n${problems.join('\n')}`);
        await tab.screenshot({ path: join(artifactsDir, `layout-grant-plain-account-${size.width}.png`), fullPage: true });
      }
    } finally {
      await walled.close();
    }
  });

  it('marks that the tab bar scrolls at 390 pixels, and the cue scrolls it', async () => {
    await page.setViewportSize(WIDTHS[1]);
    await open(`#/agents/${agentId}/history`);
    const wrap = page.getByTestId('tabs-wrap');
    await wrap.and(page.locator('[data-more-right="true"]')).waitFor();
    const cue = wrap.getByRole('button', { name: 'Scroll the sections right' });
    assert.ok(await cue.isVisible(), 'the cue is visible');
    await cue.click();
    await wrap.and(page.locator('[data-more-left="true"]')).waitFor();
    await shot('tabs-scrolled', 390);
    // Choosing a tab off screen brings it into view.
    await page.getByRole('tab', { name: 'Settings' }).click();
    await page.getByTestId('settings-delete').waitFor();
    assert.ok(await page.getByRole('tab', { name: 'Settings' }).isVisible());
    await page.setViewportSize(WIDTHS[0]);
    await open(`#/agents/${agentId}/history`);
    await page.getByRole('tab', { name: 'History', selected: true }).waitFor();
    assert.equal(await wrap.getAttribute('data-more-right'), 'false', 'nothing to scroll at 1280 px');
  });

  it('fits at 390 pixels after the window shrinks from 1280 without a reload, tab bar included', async () => {
    // An earlier session saw a window shrunk from 1280 keep the tab bar about 32 px too wide where a fresh load at
    // 390 fitted. Not reproduced since (Chromium 1280 -> 390 by emulation and by a real window resize both fit, on
    // the code before `contain: inline-size` too): this keeps the case checked.
    const failures = [];
    for (const tab of ['history', 'wallet', 'policy']) {
      await page.setViewportSize(WIDTHS[0]);
      await open(`#/agents/${agentId}/${tab}`);
      await page.getByRole('tab', { selected: true }).waitFor();
      await page.waitForTimeout(300);
      await page.setViewportSize(WIDTHS[1]);
      await page.waitForTimeout(300);
      await shot(`resized-${tab}`, 390);
      const bar = await page.evaluate(() => {
        const vw = document.documentElement.clientWidth;
        const box = (sel) => document.querySelector(sel)?.getBoundingClientRect();
        return { vw, wrap: box('[data-testid="tabs-wrap"]')?.right, tabs: box('.tabs')?.right };
      });
      if (!(bar.wrap <= bar.vw + 1 && bar.tabs <= bar.vw + 1)) {
        failures.push(`${tab}: the tab bar ends at ${Math.round(bar.tabs)} px (its frame ${Math.round(bar.wrap)} px) in ${bar.vw} px`);
      }
      try {
        await assertFits(`${tab} after the resize`, 390);
      } catch (e) {
        failures.push(e.message);
      }
    }
    await page.setViewportSize(WIDTHS[0]);
    assert.deepEqual(failures, []);
  });

  it('filters the audit log and never prints a field without a value', async () => {
    await open(`#/agents/${agentId}/audit`);
    const entries = page.getByTestId('audit-entry');
    await entries.first().waitFor();
    assert.doesNotMatch(await page.getByTestId('audit').textContent(), /: null\b/);
    await page.getByTestId('audit-kind').selectOption('policy');
    const visible = page.locator('[data-testid="audit-entry"]:visible');
    await until('only policy changes', async () => {
      const actions = await visible.evaluateAll((rows) => rows.map((r) => r.dataset.action));
      return actions.length > 0 && actions.every((a) => a === 'policy_updated');
    });
    assert.match(await page.getByTestId('audit-shown').textContent(), /^1 of the \d+ entries read match/);
    await page.getByTestId('audit-kind').selectOption('');
    await page.getByTestId('audit-words').fill(RECIPIENT.toLowerCase());
    await until('the entries naming the recipient', async () => {
      const actions = await visible.evaluateAll((rows) => rows.map((r) => r.dataset.action));
      return actions.includes('transfer_refused') && !actions.includes('policy_updated');
    });
    await shot('audit-filtered', 1280);
  });

  it('logged no page errors and loaded nothing from elsewhere', () => {
    assert.deepEqual(pageErrors, []);
  });
});
