// The first hour against the real demo (issue 26): `scripts/demo.sh` is started as a stranger starts it (with
// `AGENTD_BIN` passed through, so it builds nothing), its printed variables (`export NAME=value` before
// `DEMO_READY`) and its console URL, admin token, agent and access token are read from its output, and the console
// is walked in headless Chromium against it, a screenshot of each step kept as an artifact (`first-hour-demo-*.png`):
// 1. the console the demo printed: it asks for the admin token, lists the demo agent once given it, opens it with the
//    printed access token; the wallet shows the test USDC (the 0.05 it earned from the demo's sale included, §23)
//    and not a wei of ETH, its gas sponsored by the operator (§22), its sale's settlement included, and its address
//    a smart account, the chain marked "local node", the call composer offering the demo's
//    router from the start, and the demo's own transfer in History with its hash, no explorer link, and the gas
//    sponsored;
// 2. owner authority: a wrong admin token refused, the demo's accepted; an owner session opened through the API with
//    the demo's owner key (`cast wallet sign`, as docs/guide.md does) pasted in Settings;
// 3. a policy set in the editor: base:USDC per transfer, per day and approval above, and the host 127.0.0.1 allowed
//    for x402 (the guide's §4);
// 4. a send of test USDC from the Wallet tab, its gas sponsored: review → confirm → confirmed, the recipient's
//    balance checked on the demo's anvil;
// 5. a transfer the agent asks through the API above `approval_above`: its card in Approvals names the rule and the
//    daily limit left; approved through the confirmation step, as the owner; landed on anvil;
// 6. a send over the daily limit refused, and shown in History with the limit named and what was left;
// 7. a new guarded agent from the New agent form with the demo's owner address (the API says `guarded`), funded
//    from the local node as the demo says;
// 8. the sample paywall paid from the chat ("pay up to 0.05 USDC for <PAYWALL_URL>", the builtin engine's x402
//    phrase): the paywall's payee holds the test USDC on anvil and the payment is confirmed in the API and History;
// 9. a delegation granted from a browser wallet (an EIP-1193 test wallet) whose account starts as a plain EOA: the
//    console reads its code and gives the demo's route, the owner runs the printed `demo-chain.mjs upgrade` (EIP-7702
//    to the printed DELEGATOR_IMPLEMENTATION), grants from the console, the agent spends under it (from the owner's
//    account, on chain), a send past the period is refused, and the wallet revokes it;
// then the demo is stopped with SIGTERM to its process group, and nothing of it is left running or on disk.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { agentdBin, artifactsDir, assertHeldAboveThreshold, assertLocalTx, assertRefusedInHistory, callApi, launchBrowser, repoRoot, until, watchPage, openFold } from './harness.mjs';
import { jsonRpc, tokenBalance, USDC } from '../../scripts/evm.mjs';

const TIMEOUT = 20000;
const cast = join(repoRoot, 'test-tools', 'node_modules', '.bin', 'cast');

function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolvePort(port));
    });
  });
}

/**
 * Starts `scripts/demo.sh` in its own process group, with its temporary files under a directory of the test's own
 * (TMPDIR), and resolves at `DEMO_READY` with what it printed: the `export` variables and the lines a person reads.
 */
async function startDemo() {
  const tmp = mkdtempSync(join(tmpdir(), 'agentd-demo-test-'));
  const env = { ...process.env, AGENTD_BIN: agentdBin, DEMO_PORT: String(await freePort()), TMPDIR: tmp };
  delete env.DEMO_EXIT_AFTER_SETUP;
  const child = spawn('bash', [join(repoRoot, 'scripts', 'demo.sh')], {
    cwd: repoRoot,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  // Read on until the end: a closed pipe would end the demo at its next line of output.
  child.stdout.on('data', (c) => (output = (output + c.toString()).slice(-200000)));
  child.stderr.on('data', (c) => (output = (output + c.toString()).slice(-200000)));
  const exited = new Promise((r) => child.once('exit', (code, signal) => r({ code, signal })));
  // Should the test runner itself be ended, the demo (its own process group) goes with it.
  const orphaned = () => {
    try {
      process.kill(-child.pid, 'SIGTERM');
    } catch {
      // already ended
    }
  };
  process.once('exit', orphaned);
  exited.then(() => process.off('exit', orphaned));
  const demo = { child, tmp, exited, output: () => output };
  await new Promise((resolveReady, reject) => {
    const timer = setTimeout(() => reject(new Error(`the demo did not print DEMO_READY within 300 s:\n${output}`)), 300000);
    const check = () => {
      if (/^DEMO_READY$/m.test(output)) {
        clearTimeout(timer);
        resolveReady();
      }
    };
    child.stdout.on('data', check);
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`the demo ended (${code ?? signal}) before DEMO_READY:\n${output}`));
    });
  }).catch(async (e) => {
    await stopDemo(demo).catch(() => {});
    rmSync(tmp, { recursive: true, force: true });
    throw e;
  });
  const printed = output.slice(0, output.search(/^DEMO_READY$/m));
  demo.vars = Object.fromEntries([...printed.matchAll(/^export ([A-Z_][A-Z0-9_]*)=(.*)$/gm)].map((m) => [m[1], m[2]]));
  const line = (label) => {
    const match = new RegExp(`^\\s+${label}:\\s+(\\S+)`, 'm').exec(printed);
    assert.ok(match, `the demo printed no "${label}:" line:\n${printed}`);
    return match[1];
  };
  demo.console = line('Console');
  demo.agentId = line('Agent');
  demo.agentToken = line('Access token');
  demo.transferId = line('Transfer').replace(/,$/, '');
  demo.transferHash = /^\s+Transfer:.*\((0x[0-9a-f]{64})\)$/m.exec(printed)?.[1];
  return demo;
}

/** SIGTERM to the demo's process group; resolves once the script and everything it started have ended. */
async function stopDemo(demo) {
  const pgid = demo.child.pid;
  const groupAlive = () => {
    try {
      process.kill(-pgid, 0);
      return true;
    } catch {
      return false;
    }
  };
  if (groupAlive()) process.kill(-pgid, 'SIGTERM');
  const ended = await Promise.race([demo.exited.then(() => true), new Promise((r) => setTimeout(() => r(false), 20000))]);
  for (let i = 0; i < 100 && groupAlive(); i++) await new Promise((r) => setTimeout(r, 100));
  const left = groupAlive();
  if (left) process.kill(-pgid, 'SIGKILL');
  return { ended, left };
}

describe('the first hour against the demo (scripts/demo.sh)', { timeout: 600000 }, () => {
  let demo;
  let browser;
  let page;
  let stopped = false;
  // The steps build on each other: after a failed one, the rest are skipped rather than failing in its wake.
  let broken = null;
  const step = (name, fn) =>
    it(name, async (t) => {
      if (broken) return t.skip(`after the failed step: ${broken}`);
      try {
        await fn(t);
      } catch (e) {
        broken = name;
        throw e;
      }
    });
  let newAgentId;
  const pageErrors = [];
  const v = (name) => demo.vars[name];

  const api = (method, path, body, headers) => callApi(v('API'), method, path, body, headers);
  const asAgent = () => ({ 'x-agent-access-token': demo.agentToken });
  const shot = (name) => page.screenshot({ path: join(artifactsDir, `first-hour-demo-${name}.png`), fullPage: true });
  const rpc = (method, params) => jsonRpc(v('DEMO_RPC'), method, params);
  const balanceOf = async (address) => BigInt(await rpc('eth_getBalance', [address, 'latest']));
  const openAgent = async (name) => {
    await page.getByRole('list', { name: 'Agent list' }).getByRole('button', { name: new RegExp(name) }).click();
    await page.getByRole('heading', { name }).waitFor();
  };
  const wallet = () => page.getByTestId('send-card');
  /** The demo agent's test USDC (base units): it holds no ETH, so its sends are USDC with the gas sponsored. */
  const usdcOf = (holder) => tokenBalance(rpc, USDC, holder);
  async function reviewSend(amount) {
    await page.getByRole('tab', { name: 'Wallet' }).click();
    const card = wallet();
    const newTransfer = card.getByRole('button', { name: 'New transfer' });
    if (await newTransfer.count()) await newTransfer.click();
    await card.getByLabel('Chain').selectOption('base');
    await card.getByLabel('Asset').selectOption('USDC');
    // The operator sponsors the demo agent's gas: the form's choice says so, as the service's default.
    await until('the sponsored gas choice', async () => (await card.getByTestId('send-gas').isVisible()) && (await card.getByTestId('send-gas').inputValue()) === 'sponsored');
    await card.getByLabel('Recipient').fill(v('RECIPIENT'));
    await card.getByLabel('Amount').fill(amount);
    await card.getByRole('button', { name: 'Review' }).click();
    const review = card.getByTestId('send-review');
    await review.getByRole('heading', { name: 'Review the transfer' }).waitFor();
    return review;
  }

  before(async () => {
    demo = await startDemo();
    for (const name of ['API', 'ADMIN_TOKEN', 'OWNER_ADDRESS', 'OWNER_KEY', 'RECIPIENT', 'DEMO_RPC', 'PAYWALL_URL']) {
      assert.ok(v(name), `the demo exported no ${name}:\n${demo.output()}`);
    }
    assert.equal(demo.console, `${v('API')}/`, 'the console is at the API base');
    browser = await launchBrowser(v('API'));
    const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    // The agent list is refused (401) until the admin token is given, a made-up admin token is refused (401), and
    // the refused send answers 403: the console says each in words.
    await watchPage(page, v('API'), pageErrors, [401, 403]);
  });

  after(async () => {
    if (page) await shot('zz-last-state').catch(() => {});
    await browser?.close().catch(() => {});
    if (demo && !stopped) await stopDemo(demo).catch(() => {});
    if (demo) rmSync(demo.tmp, { recursive: true, force: true });
  });

  step('opens the console the demo printed: the demo agent, its test USDC and no ETH on a local node, gas sponsored, its first transfer', async () => {
    await page.goto(demo.console);
    // The demo sets ADMIN_TOKEN: the console opens on a screen that asks for it, not on an empty agent form.
    const signIn = page.getByTestId('sign-in');
    await signIn.waitFor();
    assert.equal(await page.getByText('No agents yet').count(), 0);
    await shot('01-console-asks-for-the-admin-token');

    await signIn.getByLabel('Admin token').fill('adm_not_the_demos');
    await signIn.getByRole('button', { name: 'Continue' }).click();
    await signIn.getByRole('alert').filter({ hasText: /refused this admin token/ }).waitFor();
    await signIn.getByLabel('Admin token').fill(v('ADMIN_TOKEN'));
    await signIn.getByRole('button', { name: 'Continue' }).click();
    // Accepted: on to the overview, which lists the demo agent.
    await page.getByTestId('overview-row').filter({ hasText: 'Demo agent' }).waitFor();
    const item = page.getByRole('list', { name: 'Agent list' }).getByRole('button', { name: /Demo agent/ });
    await item.waitFor();
    await shot('02-demo-agent-listed');

    // The admin token alone opens the agent as its owner; the access token the demo printed is given for the rest.
    await item.click();
    await page.getByTestId('opened-as-owner').getByRole('button', { name: 'Add the agent token' }).click();
    const given = page.getByTestId('header-agent-token');
    await given.getByRole('textbox', { name: 'Access token' }).fill(demo.agentToken);
    await given.getByRole('button', { name: 'Use token' }).click();
    await page.getByRole('heading', { name: 'Demo agent' }).waitFor();
    await page.getByRole('tab', { name: 'Wallet' }).click();
    const card = page.getByTestId('wallet-base');
    // 1000 test USDC funded, 1 sent by the demo and 10 swapped for WETH, 0.05 earned from the demo's sale (§23); not a
    // wei of ETH, ever: the operator pays its gas (its sale's settlement included), and its address became a smart
    // account with its first sponsored operation.
    await card.getByTestId('balance-base').filter({ hasText: /^0 ETH$/ }).waitFor();
    await card.getByTestId('token-base-USDC').filter({ hasText: /^989\.05 USDC$/ }).waitFor();
    await card.getByTestId('token-base-WETH').filter({ hasText: /^0\.00\d+ WETH$/ }).waitFor();
    const payer = card.getByTestId('gas-payer-base');
    await payer.filter({ hasText: /sponsored by the operator/ }).waitFor();
    assert.equal(await payer.getAttribute('data-payer'), 'sponsored');
    assert.equal(await card.getByTestId('account-base').getAttribute('data-account'), 'smart');
    // A stablecoin's dollar value, at the peg (said so), beside it; none for ETH (no price source).
    assert.equal(await card.getByTestId('tokens-base').getByTestId('usd').textContent(), '\u2248 $989.05 (at the peg)');
    assert.equal(await card.getByTestId('balance-base').getByTestId('usd').count(), 0);
    await card.getByTestId('local-node-base').filter({ hasText: /local node/ }).waitFor();
    assert.equal(await card.locator('a[href*="basescan"]').count(), 0, 'no explorer link for the local node');
    // The call composer offers the demo's router from the start (the demo names it in CONTRACTS_BASE), beside the
    // registry's tokens, though the agent never called it and no policy names it.
    const composer = page.getByTestId('call-composer');
    // (The contract choice's options; the argument fields offer the same contracts by name.)
    const router = composer
      .getByTestId('call-contract-pick')
      .locator('optgroup[label="Contracts of this deployment on base"] option', { hasText: 'Uniswap V2 router' });
    await router.waitFor({ state: 'attached' });
    assert.equal((await router.getAttribute('value')).toLowerCase(), v('ROUTER').toLowerCase());
    await composer.getByTestId('call-contract-pick').locator('optgroup[label="Tokens on base"] option', { hasText: 'WETH' }).first().waitFor({ state: 'attached' });
    await shot('03-wallet-eth-usdc-local-node');

    // The demo's own transfer, in History: its hash marked "local node", with no explorer link.
    assert.match(demo.transferHash ?? '', /^0x[0-9a-f]{64}$/, 'the demo printed its transfer hash');
    await page.getByRole('tab', { name: 'History' }).click();
    const row = page.locator(`[data-testid="history-row"][data-transfer-id="${demo.transferId}"]`);
    await row.and(page.locator('[data-status="confirmed"]')).waitFor();
    await assertLocalTx(row.getByTestId('tx'), demo.transferHash);
    const gas = row.getByTestId('gas-info');
    await gas.waitFor();
    assert.equal(await gas.getAttribute('data-gas'), 'sponsored');
    assert.match(await gas.getAttribute('data-gas-cost'), /^0\.0\d+$/);
    await shot('04-history-demo-transfer-local-node');

    // Money both ways under one ledger (§23): the report the demo agent sold to the demo's second agent, settled by
    // agentd, in its income beside what it spent in USDC; its offer in the Offers tab with a link to try it.
    const sale = page.getByTestId('income-row').and(page.locator('[data-status="settled"]'));
    await sale.waitFor();
    assert.equal((await sale.getByTestId('income-amount').textContent()).trim(), '+0.05 USDC');
    assert.equal((await sale.getByTestId('income-fee').textContent()).trim(), 'none: the operator\u2019s sponsorship paid');
    await assertLocalTx(sale.getByTestId('income-tx'), (await sale.getByTestId('income-tx').locator('code').getAttribute('title')) ?? '');
    const books = page.locator('[data-testid="earned-spent"][data-asset="base:USDC"]');
    assert.equal(await books.getAttribute('data-earned'), '0.05');
    assert.equal(await books.getAttribute('data-spent'), '11', 'the 1 USDC transfer and the 10 swapped');
    await shot('04b-history-income-beside-spending');
    await page.getByRole('tab', { name: 'Offers' }).click();
    const offer = page.getByTestId('offer').filter({ hasText: 'market report' });
    await offer.waitFor();
    assert.equal(await offer.getByTestId('offer-try').getAttribute('href'), v('OFFER_URL'));
    assert.match(await offer.getByTestId('offer-earned').textContent(), /^Earned 0\.05 USDC from 1 payment$/);
  });

  step('gives owner authority from the console: the admin token, and an owner session opened with the owner key', async () => {
    await page.getByRole('tab', { name: 'Settings' }).click();
    await openFold(page, 'settings-owner');
    const owner = page.getByTestId('owner-authority');
    // The admin token given in the sidebar is the agent's owner authority too.
    await owner.getByTestId('authority-status').filter({ hasText: /admin token/ }).waitFor();
    await shot('05-owner-authority-admin-token');

    // As docs/guide.md does: the challenge, signed with the demo's owner key by cast, opens an owner session.
    const challenge = await api('GET', `/api/agents/${demo.agentId}/owner-challenge?chain=base&address=${v('OWNER_ADDRESS')}`);
    assert.equal(challenge.status, 200, JSON.stringify(challenge.body));
    const signature = execFileSync(cast, ['wallet', 'sign', '--private-key', v('OWNER_KEY'), challenge.body.message]).toString().trim();
    const session = await api('POST', `/api/agents/${demo.agentId}/owner-session`, {
      chain: 'base',
      message: challenge.body.message,
      signature,
    });
    assert.equal(session.status, 200, JSON.stringify(session.body));
    assert.match(session.body.owner_token, /^own_/);
    const form = owner.getByTestId('owner-token-form');
    await form.getByLabel('Owner session token').fill(session.body.owner_token);
    await form.getByRole('button', { name: 'Use owner token' }).click();
    await owner.getByTestId('authority-status').filter({ hasText: /Using a pasted owner session/ }).waitFor();
    await shot('06-owner-session-pasted');
  });

  step('sets a policy in the editor: limits on base:USDC, x402 host 127.0.0.1', async () => {
    await page.getByRole('tab', { name: 'Policy' }).click();
    await page.getByRole('button', { name: 'Add asset' }).click();
    await page.getByRole('textbox', { name: 'Asset (<chain>:<SYMBOL>)' }).last().fill('base:USDC');
    await page.getByRole('textbox', { name: 'base:USDC per transfer' }).fill('50');
    await page.getByRole('textbox', { name: 'base:USDC per day' }).fill('20');
    await page.getByRole('textbox', { name: 'base:USDC approval above' }).fill('2');
    await page.getByLabel('Only pay the hosts listed here').check();
    await page.getByLabel('Allowed hosts').fill('127.0.0.1');
    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.getByTestId('policy-saved').filter({ hasText: /^Saved/ }).waitFor();
    await shot('07-policy-set');

    const policy = await api('GET', `/api/agents/${demo.agentId}/policy`, undefined, asAgent());
    assert.equal(policy.status, 200, JSON.stringify(policy.body));
    assert.deepEqual(policy.body.limits['base:USDC'], { per_transfer: '50', per_day: '20', approval_above: '2' });
    // The demo's calls rules (its approve-and-swap) are kept beside the limits.
    assert.equal(policy.body.calls?.rules?.length, 2, JSON.stringify(policy.body));
    assert.deepEqual(policy.body.allowed_hosts, ['127.0.0.1']);
    // Set by the owner session pasted in Settings.
    const audit = await api('GET', `/api/agents/${demo.agentId}/audit?limit=10`, undefined, asAgent());
    const changed = audit.body.find((e) => e.action === 'policy_updated');
    assert.ok(changed, JSON.stringify(audit.body));
    assert.equal(changed.actor, 'owner');
  });

  step('sends test USDC from the Wallet tab, the gas sponsored: review, confirm, landed on the demo chain', async () => {
    const before = await usdcOf(v('RECIPIENT'));
    const agentAddress = (await api('GET', `/api/agents/${demo.agentId}`, undefined, asAgent())).body.wallet_addresses.base;
    const review = await reviewSend('1');
    assert.equal((await review.getByTestId('review-amount').textContent()).trim(), '1 USDC');
    assert.equal((await review.getByTestId('review-to').textContent()).trim(), v('RECIPIENT'));
    assert.equal(
      await review.getByTestId('review-policy').textContent(),
      'at most 50 USDC a transfer · 20 USDC a day · the owner approves anything above 2 USDC',
    );
    assert.match(await review.getByTestId('review-gas').textContent(), /^paid by the operator\u2019s sponsorship/);
    assert.equal(await review.getByTestId('review-no-gas').count(), 0, 'no ETH needed: the gas is sponsored');
    assert.equal(await usdcOf(v('RECIPIENT')), before, 'nothing is sent before the confirm');
    await shot('08-send-review');

    await review.getByRole('button', { name: 'Confirm and send 1 USDC' }).click();
    const result = wallet().getByTestId('send-result');
    await result.and(page.locator('[data-status="confirmed"]')).waitFor({ timeout: 60000 });
    assert.match(await result.textContent(), /Sent: 1 USDC to/);
    assert.equal(await result.getByTestId('gas-info').getAttribute('data-gas'), 'sponsored');
    assert.equal((await usdcOf(v('RECIPIENT'))) - before, 1_000_000n, 'the recipient got 1 USDC on the demo chain');
    assert.equal(await balanceOf(agentAddress), 0n, 'still no ETH');
    await shot('09-send-confirmed');
  });

  step('holds a transfer the agent asks above approval_above, shows the rule, and approves it after a confirmation', async () => {
    const before = await usdcOf(v('RECIPIENT'));
    // Asked by the agent with its token, as an agent would (docs/guide.md §4).
    const asked = await api('POST', `/api/agents/${demo.agentId}/transfers`, { chain: 'base', to: v('RECIPIENT'), amount: '3', asset: 'USDC' }, asAgent());
    assert.equal(asked.status, 201, JSON.stringify(asked.body));
    assert.equal(asked.body.status, 'awaiting_approval');
    const id = asked.body.id;

    await page.getByTestId('approval-count').filter({ hasText: '1' }).waitFor();
    await page.getByRole('tab', { name: /^Approvals/ }).click();
    const card = page.locator(`[data-testid="approval"][data-transfer-id="${id}"]`);
    await card.waitFor();
    // The day counts the demo's 1 USDC sent and 10 swapped, the Wallet tab's 1 and this 3: 15 of 20.
    await assertHeldAboveThreshold(card, { moves: '3', threshold: '2', limit: '20', left: '5', symbol: 'USDC' });
    await shot('10-held-with-its-rule');

    await card.getByRole('button', { name: /^Approve 3 USDC/ }).click();
    const confirm = card.getByTestId('approve-confirm');
    await confirm.waitFor();
    assert.equal((await api('GET', `/api/agents/${demo.agentId}/transfers/${id}`, undefined, asAgent())).body.status, 'awaiting_approval');
    await shot('11-approve-confirm-step');
    await confirm.getByRole('button', { name: /^Confirm: approve 3 USDC/ }).click();
    // Its toast names the full recipient address, wrapped inside the toast: nothing of it (nor its Dismiss button)
    // runs off the screen.
    const toast = page.locator('.toast').filter({ hasText: /Approved: 3 USDC to 0x0+dEaD/ });
    await toast.waitFor();
    const fits = await toast.evaluate((el) => {
      const box = el.getBoundingClientRect();
      const dismiss = el.querySelector('button').getBoundingClientRect();
      return { right: box.right, dismiss: dismiss.right, viewport: document.documentElement.clientWidth };
    });
    assert.ok(fits.right <= fits.viewport && fits.dismiss <= fits.right, `the toast fits the screen: ${JSON.stringify(fits)}`);
    await page.getByText('Nothing is waiting for approval.').waitFor();

    await until('the approved transfer to be confirmed', async () => {
      const t = await api('GET', `/api/agents/${demo.agentId}/transfers/${id}`, undefined, asAgent());
      return t.body.status === 'confirmed';
    });
    assert.equal((await usdcOf(v('RECIPIENT'))) - before, 3_000_000n, 'the recipient got 3 USDC on the demo chain');
    const audit = await api('GET', `/api/agents/${demo.agentId}/audit?limit=10`, undefined, asAgent());
    const approved = audit.body.find((e) => e.action === 'transfer_approved');
    assert.ok(approved, JSON.stringify(audit.body));
    assert.equal(approved.actor, 'owner', 'approved with the owner session opened with the owner key');
    await shot('12-approved-and-landed');
  });

  step('refuses a send over the daily limit and shows it in History with the limit named', async () => {
    const before = await usdcOf(v('RECIPIENT'));
    const review = await reviewSend('6');
    // The review expects the refusal: it is not offered as "Confirm and send".
    await review.getByRole('button', { name: 'Send anyway (the review expects a refusal)' }).click();
    const result = wallet().getByTestId('send-result');
    await result.and(page.locator('[data-status="refused"]')).waitFor();
    assert.match(await result.getByTestId('refusal-words').textContent(), /^Over the daily limit of 20 USDC/);
    assert.equal(await result.getByTestId('refusal-code').textContent(), 'policy_denied · per_day');
    await shot('13-send-refused');
    assert.equal(await usdcOf(v('RECIPIENT')), before, 'nothing moved');

    await assertRefusedInHistory(page, { limit: '20', counted: '15', left: '5', asked: '6', symbol: 'USDC' });
    await shot('14-history-refused-with-its-limit');
  });

  step('makes a new guarded agent from the New agent form with the demo owner address, funded from the local node', async () => {
    await page.getByRole('button', { name: 'New agent' }).first().click();
    await page.getByRole('heading', { name: 'New agent' }).waitFor();
    await page.getByLabel('Name', { exact: true }).fill('Shop agent');
    const chains = page.getByRole('group', { name: 'Chains' });
    for (const box of await chains.getByRole('checkbox').all()) await box.uncheck();
    await chains.getByRole('checkbox', { name: /^base 8453/ }).check();
    await page.getByRole('group', { name: 'Capabilities' }).getByRole('checkbox', { name: /^transact/ }).check();
    await page.getByLabel('Owner wallet address (recommended)').fill(v('OWNER_ADDRESS'));
    await shot('15-new-agent-with-owner');
    await page.getByRole('button', { name: 'Create agent' }).click();

    const reveal = page.getByTestId('token-reveal');
    await reveal.waitFor();
    const token = await reveal.getByRole('textbox', { name: 'Access token' }).inputValue();
    assert.match(token, /^agt_/);
    assert.match(await reveal.textContent(), new RegExp(`owner wallet ${v('OWNER_ADDRESS')} can sign a challenge to reissue`, 'i'));
    newAgentId = await page.evaluate(() => /#\/agents\/([0-9a-f-]{36})/.exec(location.hash)?.[1]);
    assert.ok(newAgentId);
    await shot('16-new-agent-token');
    const detail = await api('GET', `/api/agents/${newAgentId}`, undefined, { 'x-agent-access-token': token });
    assert.equal(detail.status, 200, JSON.stringify(detail.body));
    assert.equal(detail.body.guarded, true, JSON.stringify(detail.body));
    assert.equal(detail.body.owner_addresses.base.toLowerCase(), v('OWNER_ADDRESS').toLowerCase());

    await reveal.getByRole('button', { name: 'I have saved the token' }).click();
    await page.getByRole('tab', { name: 'Wallet', selected: true }).waitFor();
    assert.equal(await page.getByTestId('unguarded-warning').count(), 0, 'a guarded agent shows no warning');
    // Funded from the local node, as the demo prints.
    execFileSync('node', [join(repoRoot, 'scripts', 'demo-chain.mjs'), 'fund', v('DEMO_RPC'), detail.body.wallet_addresses.base, '1', '100']);
    await page.getByRole('button', { name: 'Refresh balances' }).click();
    await page.getByTestId('balance-base').filter({ hasText: /^1 ETH$/ }).waitFor();
    await page.getByTestId('token-base-USDC').filter({ hasText: /^100 USDC$/ }).waitFor();
    await shot('17-new-agent-funded');
  });

  step('pays the sample paywall from the chat: the payee holds the test USDC, the payment is confirmed', async () => {
    // What the paywall asks (an unpaid request): its price and payee, from its PAYMENT-REQUIRED header.
    const unpaid = await fetch(v('PAYWALL_URL'));
    assert.equal(unpaid.status, 402);
    const [offer] = JSON.parse(Buffer.from(unpaid.headers.get('payment-required'), 'base64').toString('utf8')).accepts;
    const payee = offer.payTo;
    const price = BigInt(offer.amount);
    const usdc = usdcOf;
    const before = await usdc(payee);

    await openAgent('Demo agent');
    await page.getByRole('tab', { name: 'Chat' }).click();
    await page.getByLabel('Message', { exact: true }).fill(`pay up to 0.05 USDC for ${v('PAYWALL_URL')}`);
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    const answer = page.locator('[data-testid="message"][data-role="assistant"][data-state="done"]').last();
    await answer.waitFor({ timeout: 60000 });
    const call = answer.locator('[data-testid="chain-call"][data-tool="pay_http"]');
    await call.and(page.locator('[data-state="done"]')).waitFor();
    assert.match(await call.getByTestId('chain-call-result').textContent(), /the paid sample report/);
    // What the payment bought, readable under the card: the paywall's answer as text, with its status.
    const bought = answer.getByTestId('paid-answer');
    assert.equal(await bought.getAttribute('data-status'), '200');
    assert.match(await bought.getByTestId('paid-answer-body').textContent(), /the paid sample report/);
    await shot('18-paywall-paid-in-chat');

    assert.equal((await usdc(payee)) - before, price, "the paywall's payee got the test USDC on the demo chain");
    const payment = await until('the x402 payment to be confirmed', async () => {
      const list = await api('GET', `/api/agents/${demo.agentId}/transactions?limit=20`, undefined, asAgent());
      return list.body.find((t) => t.kind === 'x402' && t.status === 'confirmed');
    });
    assert.equal(payment.to.toLowerCase(), payee.toLowerCase(), JSON.stringify(payment));

    await page.getByRole('tab', { name: 'History' }).click();
    const row = page.locator(`[data-testid="history-row"][data-transfer-id="${payment.id}"]`);
    await row.and(page.locator('[data-status="confirmed"]')).waitFor();
    assert.equal(await row.getAttribute('data-kind'), 'x402');
    assert.match(await row.getByTestId('x402').textContent(), /127\.0\.0\.1:\d+\/report/);
    await assertLocalTx(row.getByTestId('tx'), payment.tx_hash);
    // "What it bought" reads the payment's kept answer (x402.response on GET …/transfers/{id}).
    await row.getByTestId('x402-bought').click();
    await row.getByTestId('paid-answer-body').filter({ hasText: /the paid sample report/ }).waitFor();
    await shot('19-history-x402-confirmed');
  });

  step('grants a delegation from a wallet that starts as a plain EOA, spends under it, is refused past its period, revokes it', async () => {
    // The owner's browser wallet (an EIP-1193 provider whose key only this test holds) on a fresh account: a plain EOA
    // on the demo's node, funded from it as the demo prints. Typed data is signed with the key (cast); the wallet's
    // transactions are sent by the node from the account (anvil's impersonation: the node holds no key of it).
    const [made] = JSON.parse(execFileSync(cast, ['wallet', 'new', '--json']).toString());
    const owner = { address: made.address, privateKey: made.private_key };
    const asked = [];
    execFileSync('node', [join(repoRoot, 'scripts', 'demo-chain.mjs'), 'fund', v('DEMO_RPC'), owner.address, '1', '20']);
    assert.equal(await rpc('eth_getCode', [owner.address, 'latest']), '0x', 'a plain account');
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.addInitScript(
      ([id, token, admin]) => {
        localStorage.setItem(`agentd.token.${id}`, token);
        localStorage.setItem('agentd.adminToken', admin);
      },
      [demo.agentId, demo.agentToken, v('ADMIN_TOKEN')],
    );
    await context.exposeBinding('__testWallet', async (_source, method, params) => {
      asked.push(method);
      if (method === 'eth_requestAccounts' || method === 'eth_accounts') return [owner.address];
      if (method === 'eth_chainId') return '0x2105';
      if (method === 'wallet_switchEthereumChain') return null;
      if (method === 'eth_signTypedData_v4') {
        assert.equal(String(params[0]).toLowerCase(), owner.address.toLowerCase());
        return execFileSync(cast, ['wallet', 'sign', '--private-key', owner.privateKey, '--data', params[1]]).toString().trim();
      }
      if (method === 'eth_sendTransaction') {
        await rpc('anvil_impersonateAccount', [params[0].from]);
        return rpc('eth_sendTransaction', params);
      }
      if (method.startsWith('wallet_')) throw Object.assign(new Error(`The method "${method}" is not available.`), { code: -32601 });
      return rpc(method, params ?? []);
    });
    await context.addInitScript(() => {
      window.ethereum = { request: ({ method, params }) => window.__testWallet(method, params ?? []) };
    });
    const owned = await context.newPage();
    owned.setDefaultTimeout(TIMEOUT);
    await watchPage(owned, v('API'), pageErrors, []);
    const ownedShot = (name) => owned.screenshot({ path: join(artifactsDir, `first-hour-demo-${name}.png`), fullPage: true });
    try {
      await owned.goto(`${v('API')}/#/agents/${demo.agentId}/delegations`);
      const panel = owned.getByTestId('delegations-panel');
      const form = owned.getByTestId('grant-form');
      await form.getByLabel('Asset').selectOption('USDC');
      await form.getByLabel('Amount per period').fill('3');
      await form.getByLabel('Period', { exact: true }).selectOption({ label: 'a day' });
      await form.getByRole('button', { name: 'Sign with my wallet and grant' }).click();
      // The console reads the account's code before any signature, explains, and gives the demo's route.
      const refusal = form.getByTestId('grant-plain-account');
      await refusal.waitFor();
      const said = await refusal.textContent();
      assert.ok(said.includes(`Your account ${owner.address} is a plain account on base`), said);
      assert.match(said, /node scripts\/demo-chain\.mjs upgrade/);
      assert.ok(asked.includes('eth_getCode') && !asked.includes('eth_signTypedData_v4'), asked.join(', '));
      await ownedShot('20-delegation-plain-account');

      // The owner takes that route: the demo's command upgrades the account by EIP-7702 (a type-4 transaction it
      // signs itself) to the framework's delegator, the DELEGATOR_IMPLEMENTATION the demo printed.
      execFileSync('node', [join(repoRoot, 'scripts', 'demo-chain.mjs'), 'upgrade', v('DEMO_RPC'), owner.privateKey, v('DELEGATOR_IMPLEMENTATION')]);
      const code = await rpc('eth_getCode', [owner.address, 'latest']);
      assert.equal(code.toLowerCase(), `0xef0100${v('DELEGATOR_IMPLEMENTATION').slice(2).toLowerCase()}`);
      await form.getByRole('button', { name: 'Sign with my wallet and grant' }).click();
      await form.getByTestId('grant-done').filter({ hasText: /Granted: 3 USDC a day/ }).waitFor();
      const listed = await api('GET', `/api/agents/${demo.agentId}/delegations`, undefined, asAgent());
      const granted = listed.body.find((d) => d.delegator === owner.address);
      assert.ok(granted, JSON.stringify(listed.body));
      assert.deepEqual(granted.limits.map((l) => [l.asset, l.amount, l.available]), [['base:USDC', '3', '3']]);
      await panel.locator(`[data-testid="delegation"][data-delegation-id="${granted.id}"][data-status="active"]`).waitFor();
      await ownedShot('21-delegation-granted');

      // The agent spends 2 USDC under it (its gas sponsored): they leave the new owner's account, on chain.
      const [shop] = JSON.parse(execFileSync(cast, ['wallet', 'new', '--json']).toString());
      const order = (amount) => ({ chain: 'base', asset: 'USDC', to: shop.address, amount, delegation: granted.id });
      const sent = await api('POST', `/api/agents/${demo.agentId}/transfers`, order('2'), asAgent());
      assert.equal(sent.status, 201, JSON.stringify(sent.body));
      assert.equal(sent.body.from, owner.address);
      await until('the shop holds 2 test USDC', async () => (await usdcOf(shop.address)) === 2_000_000n);
      assert.equal(await usdcOf(owner.address), 18_000_000n, "from the new owner's account");
      // Past what the period leaves (1): refused before anything is signed.
      const refused = await api('POST', `/api/agents/${demo.agentId}/transfers`, order('2'), asAgent());
      assert.equal(refused.status, 403, JSON.stringify(refused.body));
      assert.equal(refused.body.error.details.rule, 'delegation_limit');
      assert.equal(refused.body.error.details.available, '1');

      // Revoked with the wallet from the owner's account; the console shows it, and the service refuses it.
      const revoke = form.getByTestId('revoke-call');
      await revoke.getByRole('button', { name: 'Revoke it now with my wallet' }).click();
      await revoke.getByTestId('revoke-status').filter({ hasText: /^Sent: transaction 0x/ }).waitFor();
      await until('the console shows the delegation revoked', async () => {
        await panel.getByRole('button', { name: 'Refresh' }).click();
        return (await panel.locator(`[data-testid="delegation"][data-delegation-id="${granted.id}"][data-status="revoked"]`).count()) === 1;
      });
      const late = await api('POST', `/api/agents/${demo.agentId}/transfers`, order('0.5'), asAgent());
      assert.ok(late.status >= 400, JSON.stringify(late.body));
      assert.equal(await usdcOf(owner.address), 18_000_000n, 'nothing moved after the revocation');
      await ownedShot('22-delegation-revoked');
    } finally {
      await context.close();
    }
  });

  it('logged no page errors and loaded nothing from elsewhere', () => {
    assert.deepEqual(pageErrors, []);
  });

  it('stops the demo with SIGTERM to its process group, leaving nothing running or on disk', async () => {
    await browser.close();
    browser = null;
    const { ended, left } = await stopDemo(demo);
    stopped = true;
    assert.ok(ended, `the demo script did not end within 20 s of SIGTERM:\n${demo.output().slice(-3000)}`);
    assert.equal(left, false, 'a process of the demo was still running after it ended');
    for (const url of [`${v('API')}/health`, v('DEMO_RPC'), v('PAYWALL_URL')]) {
      await assert.rejects(fetch(url, { signal: AbortSignal.timeout(2000) }), `${url} still answers`);
    }
    assert.deepEqual(readdirSync(demo.tmp), [], 'the demo removed its temporary directory');
  });
});
