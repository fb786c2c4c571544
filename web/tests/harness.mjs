// Starts what the browser tests need: anvil (chain id 8453, as "base"), the real agentd binary, and headless
// Chromium from Debian (never a downloaded browser).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { chromium } from 'playwright-core';
import { client } from '../../scripts/evm.mjs';

const here = dirname(fileURLToPath(import.meta.url));
export const repoRoot = resolve(here, '..', '..');
const targetDir = process.env.CARGO_TARGET_DIR || join(homedir(), '.cache', 'agentd-target');
export const agentdBin = process.env.AGENTD_BIN || join(targetDir, 'debug', 'agentd');
export const anvilBin = process.env.ANVIL_BIN || join(repoRoot, 'test-tools', 'node_modules', '.bin', 'anvil');
export const chromiumBin = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
export const artifactsDir = process.env.BROWSER_ARTIFACTS || join(targetDir, 'browser-artifacts');

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--no-first-run',
  '--disable-sync',
];

/** Spawns a process and resolves with the first match of `pattern` in its output (stdout or stderr). */
function startAndWait(cmd, args, options, pattern, what, timeoutMs = 30000) {
  const child = spawn(cmd, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${what} did not start within ${timeoutMs} ms. Output:\n${output}`));
    }, timeoutMs);
    const onData = (chunk) => {
      output += chunk.toString();
      // Strip ANSI colours before matching.
      const match = pattern.exec(output.replace(/\x1b\[[0-9;]*m/g, ''));
      if (match) {
        clearTimeout(timer);
        resolvePromise({ child, match, output: () => output });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited early (code ${code}). Output:\n${output}`));
    });
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  }).then((started) => {
    // Keep draining output so a full pipe never blocks the child; keep a bounded tail for failure reports.
    child.removeAllListeners('exit');
    child.stdout.on('data', (c) => (output = (output + c.toString()).slice(-20000)));
    child.stderr.on('data', (c) => (output = (output + c.toString()).slice(-20000)));
    return started;
  });
}

/**
 * With `CONSOLE_FROM_DIST=1`, every browser context gets the console from the checkout's `web/dist/` instead of the
 * copy the binary embeds (same headers, Content-Security-Policy included: only the bodies change): the way to test a
 * console change against a binary built before it (a prebuilt `AGENTD_BIN`) without rebuilding the server. CI builds
 * the binary from the same checkout, so there both are the same.
 */
function serveDistIn(browser, baseUrl) {
  const dist = join(repoRoot, 'web', 'dist');
  const files = { '/': 'index.html', '/assets/console.js': 'assets/console.js', '/assets/console.css': 'assets/console.css' };
  const newContext = browser.newContext.bind(browser);
  browser.newContext = async (options) => {
    const context = await newContext(options);
    await context.route(
      (url) => url.href.startsWith(baseUrl) && Object.hasOwn(files, url.pathname),
      async (route) => {
        const response = await route.fetch();
        const file = files[new URL(route.request().url()).pathname];
        await route.fulfill({ response, body: readFileSync(join(dist, file)) });
      },
    );
    return context;
  };
}

/**
 * Headless Chromium for a console served at `baseUrl` (with `CONSOLE_FROM_DIST=1`, its pages get the checkout's
 * `web/dist/`): for a test that starts the server otherwise than `startStack` does (the demo).
 */
export async function launchBrowser(baseUrl) {
  if (!existsSync(chromiumBin)) throw new Error(`missing ${chromiumBin}: install it: web/tests/setup.sh`);
  mkdirSync(artifactsDir, { recursive: true });
  const browser = await chromium.launch({ executablePath: chromiumBin, args: CHROMIUM_ARGS, headless: true });
  if (process.env.CONSOLE_FROM_DIST) serveDistIn(browser, baseUrl);
  return browser;
}

/** Collects the page's errors, console errors and any request that leaves the stack (the page must load nothing
 * from elsewhere: such a request is aborted and recorded). */
export async function watchPage(page, baseUrl, errors, expected = []) {
  // `expected`: statuses a test provokes on purpose (a refusal the console shows to the user), which the browser
  // itself logs as "Failed to load resource".
  const provoked = new RegExp(`Failed to load resource: the server responded with a status of (${expected.join('|')})\\b`);
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !(expected.length && provoked.test(m.text()))) errors.push(`console: ${m.text()}`);
  });
  await page.route(
    (url) => !url.href.startsWith(baseUrl),
    (route) => {
      errors.push(`external request: ${route.request().url()}`);
      return route.abort();
    },
  );
}

/** Polls `check` every 100 ms until it gives a truthy value, which it returns; after `ms`, fails naming `what`. */
export async function until(what, check, ms = 30000) {
  const end = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** One JSON request to the stack under test: `{status, body}` with the body parsed (null when empty). */
export async function callApi(baseUrl, method, path, body, headers = {}) {
  const response = await fetch(baseUrl + path, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

/**
 * Starts anvil, agentd and Chromium. `env` adds to agentd's environment (e.g. `ADMIN_TOKEN`); `prepare(rpc, rpcUrl)`, when
 * given, runs on the node before agentd starts and may answer more environment (contracts deployed there and named in
 * agentd's configuration, e.g. the delegation framework). `page` options are not needed here: each test file opens
 * its own context.
 */
export async function startStack({ env = {}, prepare = null } = {}) {
  for (const [path, hint] of [
    [agentdBin, 'build it first: cargo build (or set AGENTD_BIN)'],
    [anvilBin, 'install it: npm ci --prefix test-tools'],
    [chromiumBin, 'install it: web/tests/setup.sh'],
  ]) {
    if (!existsSync(path)) throw new Error(`missing ${path}: ${hint}`);
  }
  mkdirSync(artifactsDir, { recursive: true });
  const dir = mkdtempSync(join(tmpdir(), 'agentd-browser-'));
  const stopped = [];

  const anvil = await startAndWait(
    anvilBin,
    ['--host', '127.0.0.1', '--port', '0', '--chain-id', '8453'],
    {},
    /Listening on ([\d.]+:\d+)/,
    'anvil',
  );
  stopped.push(anvil.child);
  const rpcUrl = `http://${anvil.match[1]}`;
  let prepared = {};
  try {
    if (prepare) prepared = await prepare(client(rpcUrl), rpcUrl);
  } catch (e) {
    anvil.child.kill('SIGKILL');
    throw e;
  }

  const agentd = await startAndWait(
    agentdBin,
    ['serve'],
    {
      cwd: dir,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        DATABASE_URL: `sqlite://${join(dir, 'a.db')}`,
        BIND_ADDR: '127.0.0.1:0',
        RPC_URL_BASE: rpcUrl,
        WATCHER_INTERVAL_MS: '100',
        ENCRYPTION_KEY: randomBytes(32).toString('hex'),
        RUST_LOG: 'info',
        NO_COLOR: '1',
        ...env,
        ...prepared,
      },
    },
    /listening on ([\d.]+:\d+)/,
    'agentd',
  );
  stopped.push(agentd.child);
  const baseUrl = `http://${agentd.match[1]}`;

  const browser = await launchBrowser(baseUrl);

  return {
    rpcUrl,
    baseUrl,
    browser,
    agentdOutput: agentd.output,
    rpc: client(rpcUrl),
    async stop() {
      await browser.close().catch(() => {});
      for (const child of stopped.reverse()) {
        if (child.exitCode === null) {
          child.kill('SIGTERM');
          await new Promise((r) => {
            const t = setTimeout(() => {
              child.kill('SIGKILL');
              r();
            }, 10000);
            child.once('exit', () => {
              clearTimeout(t);
              r();
            });
          });
        }
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A transaction hash shown for a chain on a local node (the tests' anvil, `local_node` in `/api/chains`): the hash in
 * full in the title, marked "local node", and no explorer link (no public explorer knows the transaction).
 */
export async function assertLocalTx(cell, hash) {
  const shown = cell.locator('.local-tx').first();
  await shown.waitFor();
  assert.equal(await shown.locator('code').getAttribute('title'), hash);
  assert.match(await shown.textContent(), /local node/);
  assert.equal(await shown.locator('a').count(), 0, 'no explorer link for a transaction on a local node');
}

/**
 * The History tab's row for a request the daily limit refused: the rule named, and the limit, what was counted, what
 * was left and what was asked, as the service worded them in its refusal (the audit entry's `limit`; amounts as
 * decimal strings, e.g. `'0.05'`).
 */
export async function assertRefusedInHistory(page, { limit, counted, left, asked, symbol = 'ETH' }) {
  await page.getByRole('tab', { name: 'History' }).click();
  const row = page.locator('[data-testid="activity-row"][data-activity="refused"]');
  await row.waitFor();
  const reason = row.getByTestId('activity-reason');
  assert.equal(await reason.getAttribute('data-rule'), 'per_day');
  const words =
    `Over the daily limit of ${limit} ${symbol}: ${counted} was already counted in the last 24 h, ` +
    `${left} was left, and it asked ${asked}.`;
  assert.ok((await reason.textContent()).includes(words), `${await reason.textContent()} should say: ${words}`);
  assert.ok((await row.textContent()).includes(`${asked} ${symbol}`));
  return row;
}

/**
 * An approval card held by `approval_above`: the rule named (as the service recorded it), what it moves against the
 * threshold, and the daily limit with what is left of it, this request included (amounts as decimal strings).
 */
export async function assertHeldAboveThreshold(card, { moves, threshold, limit, left, symbol = 'ETH' }) {
  const rule = card.getByTestId('approval-rule');
  await rule.filter({ hasText: /Why it waits/ }).waitFor();
  assert.equal(await rule.getAttribute('data-rules'), 'approval_above');
  assert.ok((await rule.textContent()).includes(`moves ${moves} ${symbol}, more than the ${threshold} ${symbol}`), await rule.textContent());
  const daily = card.getByTestId('approval-daily');
  assert.equal(await daily.getAttribute('data-limit'), limit);
  assert.equal(await daily.getAttribute('data-left'), left, await daily.textContent());
  return daily;
}

/** Opens one of Settings' folded blocks (`details.fold`, by its test id) unless it is open, and returns it. */
export async function openFold(page, testid) {
  const fold = page.getByTestId(testid);
  await fold.waitFor();
  if (!(await fold.evaluate((el) => el.open))) await fold.locator(':scope > summary').click();
  return fold;
}

/** Runs in the page: what sticks out sideways, described (empty when everything fits). */
export function overflowProblems() {
  const vw = document.documentElement.clientWidth;
  const problems = [];
  const name = (el) =>
    `${el.tagName.toLowerCase()}${el.dataset.testid ? `[data-testid=${el.dataset.testid}]` : ''}${
      typeof el.className === 'string' && el.className ? `.${el.className.trim().split(/\s+/).join('.')}` : ''
    }`;
  if (document.documentElement.scrollWidth > vw + 1) {
    problems.push(`the page scrolls sideways: ${document.documentElement.scrollWidth} px wide in ${vw} px`);
  }
  for (const el of document.querySelectorAll('body *')) {
    // The tab bar scrolls sideways on purpose (with its cue); toasts, visually hidden labels and closed details do
    // not take part in the layout.
    if (el.closest('.tabs, .toasts, .visually-hidden, .offscreen, details:not([open]) > :not(summary)')) continue;
    // A table's header row hidden for the eye (a card per row) but kept for screen readers.
    const thead = el.closest('thead');
    if (thead && getComputedStyle(thead).position === 'absolute') continue;
    const style = getComputedStyle(el);
    if (style.display === 'none' || style.visibility === 'hidden' || style.position === 'fixed') continue;
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) continue;
    if (box.right > vw + 1) problems.push(`${name(el)} ends at ${Math.round(box.right)} px, past the ${vw} px screen`);
    const scrolls = ['auto', 'scroll'].includes(style.overflowX);
    // A box that scrolls sideways hides part of what it shows (the history's recipient and hash were cut so); code
    // blocks and form controls may scroll.
    if (scrolls && el.scrollWidth > el.clientWidth + 1 && !el.matches('pre, textarea, input, select')) {
      problems.push(`${name(el)} scrolls sideways: ${el.scrollWidth} px of content in ${el.clientWidth} px`);
    }
  }
  return [...new Set(problems)].slice(0, 12);
}
