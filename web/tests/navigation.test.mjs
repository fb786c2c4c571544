// Every screen of the console has its address (issue 54 point 4), in headless Chromium against the real binary and
// anvil: Overview → an agent → its Wallet tab, then Back and Forward walk the same screens (before, Back from the
// Wallet left the console for a blank page); an address edited by hand (another tab, the inbox, the New agent form,
// another agent) opens that screen; a reload stays where it was.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { join } from 'node:path';
import { artifactsDir, callApi, startStack, watchPage } from './harness.mjs';

const TIMEOUT = 20000;

describe('web console addresses: Back, Forward, edited and reloaded', { timeout: 180000 }, () => {
  let stack;
  let page;
  const agents = [];
  const pageErrors = [];
  const shot = (name) => page.screenshot({ path: join(artifactsDir, `navigation-${name}.png`), fullPage: true });

  /** The console shows agent `index`'s `tab`, at its own address. */
  async function showsAgentTab(index, tab, label) {
    const { id, name } = agents[index];
    await page.getByRole('tab', { name: label, selected: true }).waitFor();
    await page.getByRole('heading', { name }).waitFor();
    assert.equal(await page.evaluate(() => location.hash), `#/agents/${id}/${tab}`);
    assert.equal(await page.getByRole('tabpanel').count(), 1, 'one visible panel');
  }

  async function showsOverview() {
    await page.getByTestId('overview').waitFor();
    await page.getByTestId('overview-row').first().waitFor();
    assert.equal(await page.evaluate(() => location.hash), '#/overview');
  }

  before(async () => {
    stack = await startStack();
    for (const name of ['Navigator one', 'Navigator two']) {
      const created = await callApi(stack.baseUrl, 'POST', '/api/agents', {
        name,
        chains: ['base'],
        capabilities: ['read', 'transact'],
        spending_cap: 1,
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      agents.push({ id: created.body.id, name, token: created.body.access_token });
    }
    const context = await stack.browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.addInitScript((saved) => {
      for (const a of saved) localStorage.setItem(`agentd.token.${a.id}`, a.token);
    }, agents);
    page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    await watchPage(page, stack.baseUrl, pageErrors);
  });

  after(async () => {
    if (page) await page.screenshot({ path: join(artifactsDir, 'navigation-zz-last-state.png'), fullPage: true }).catch(() => {});
    await stack?.stop();
  });

  it('walks Overview, an agent and its Wallet with Back and Forward', async () => {
    await page.goto(`${stack.baseUrl}/`);
    await showsOverview();
    await page.getByTestId('overview-row').filter({ hasText: agents[0].name }).getByRole('button', { name: agents[0].name }).click();
    await showsAgentTab(0, 'history', 'History');
    await page.getByRole('tab', { name: 'Wallet' }).click();
    await showsAgentTab(0, 'wallet', 'Wallet');
    await page.getByTestId('address-base').waitFor();

    await page.goBack();
    await showsAgentTab(0, 'history', 'History');
    await page.goBack();
    await showsOverview();
    await shot('01-back-to-overview');
    await page.goForward();
    await showsAgentTab(0, 'history', 'History');
    await page.goForward();
    await showsAgentTab(0, 'wallet', 'Wallet');
    await page.getByTestId('address-base').waitFor();
    await shot('02-forward-to-wallet');
    assert.deepEqual(pageErrors, []);
  });

  it('opens the screen of an address edited by hand, and a reload stays on it', async () => {
    const [one, two] = agents;
    await page.evaluate((id) => (location.hash = `#/agents/${id}/policy`), one.id);
    await showsAgentTab(0, 'policy', 'Policy');
    await page.evaluate(() => (location.hash = '#/approvals'));
    await page.getByRole('heading', { name: 'Approvals inbox' }).waitFor();
    assert.equal(await page.getByRole('tablist').count(), 0, 'no agent open');
    await page.evaluate(() => (location.hash = '#/new'));
    await page.getByRole('heading', { name: 'New agent' }).waitFor();
    await page.evaluate((id) => (location.hash = `#/agents/${id}/settings`), two.id);
    await showsAgentTab(1, 'settings', 'Settings');
    await shot('03-edited-to-settings');

    await page.reload();
    await showsAgentTab(1, 'settings', 'Settings');
    // Back walks the edited addresses too.
    await page.goBack();
    await page.getByRole('heading', { name: 'New agent' }).waitFor();
    await page.goBack();
    assert.equal(await page.evaluate(() => location.hash), '#/approvals');
    await page.goBack();
    await showsAgentTab(0, 'policy', 'Policy');
    assert.deepEqual(pageErrors, []);
  });
});
