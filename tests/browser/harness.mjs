// The browser tests' shared harness (every suite imports it; run.mjs keeps its own Chromium
// launch and pages, which record every console error): steps with results and a failure
// screenshot, polling, the spawned etwd (its tokens, HTTPS requests with a token, a clean stop
// checked for sanitizer reports), Debian's Chromium through playwright-core, pages, login and
// downloads.
//
// Env: ETWD_BIN, ETWD_CORPUS (../shared/corpus), ETWD_MANIFESTS (CORPUS/../manifests), CHROMIUM,
// ETWD_BROWSER_WAIT (ms; a smaller value makes a failing run quick).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import https from 'node:https';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const ROOT = path.resolve(HERE, '../..');
export const ART = path.join(HERE, 'artifacts');
export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
export const BIN = process.env.ETWD_BIN || path.join(ROOT, 'build/test/server/etwd');
export const CORPUS = process.env.ETWD_CORPUS || path.resolve(ROOT, '../shared/corpus');
export const MANIFESTS = process.env.ETWD_MANIFESTS || path.resolve(CORPUS, '../manifests');
export const WAIT = Number(process.env.ETWD_BROWSER_WAIT) || 60000;
fs.mkdirSync(ART, { recursive: true });

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const log = (...a) => console.log(...a);
export function assert(c, msg) { if (!c) throw new Error('assertion failed: ' + msg); }
export async function until(fn, what, ms = WAIT, every = 100) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e; }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (last: ${last && last.message ? last.message : JSON.stringify(last)})`);
    await sleep(every);
  }
}

/* a suite's steps: each runs, passes or fails (with a screenshot of suite.page), and is counted */
export function suite(tag) {
  const s = { results: [], page: null };
  s.step = async (name, fn) => {
    const t0 = Date.now();
    try {
      await fn();
      s.results.push([name, true]);
      log(`ok   ${name} (${Date.now() - t0} ms)`);
    } catch (e) {
      s.results.push([name, false]);
      log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
      if (s.page) await s.page.screenshot({ path: path.join(ART, `fail-${tag}-${name.replace(/\W+/g, '_')}.png`), fullPage: true }).catch(() => {});
    }
  };
  return s;
}

const freePort = () => new Promise((res, rej) => {
  const sv = net.createServer();
  sv.listen(0, '127.0.0.1', () => { const p = sv.address().port; sv.close(() => res(p)); });
  sv.on('error', rej);
});

/* one HTTPS request: [status, parsed JSON or text] */
function request(method, url, token, body, ctype) {
  return new Promise((res, rej) => {
    const headers = { Accept: 'application/json' };
    if (token) headers.Authorization = 'Bearer ' + token;
    if (body !== undefined) headers['Content-Type'] = ctype || 'application/json';
    // agent: false — a connection of its own (node 20 keeps idle ones alive, and a request on one
    // the server has closed meanwhile fails with EPIPE)
    const r = https.request(url, { method, rejectUnauthorized: false, headers, timeout: 30000, agent: false }, (x) => {
      const parts = [];
      x.on('data', (d) => parts.push(d));
      x.on('end', () => { const t = Buffer.concat(parts).toString('utf8'); let j = t; try { j = JSON.parse(t); } catch { /* text */ } res([x.statusCode, j]); });
    });
    r.on('error', rej);
    r.on('timeout', () => r.destroy(new Error('timeout')));
    if (body !== undefined) r.write(typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body));
    r.end();
  });
}

/* etwd on a free port with a fresh state directory; its stderr in artifacts/etwd-<tag>.log.
 * Returns {base, tokens, req(method, path, body, ctype) (admin token), stop() → exit text}. */
export async function startEtwd(tag, extra = []) {
  const state = fs.mkdtempSync(path.join(os.tmpdir(), `etwd-${tag}-`));
  const port = await freePort();
  const base = `https://127.0.0.1:${port}`;
  const srv = spawn(BIN, ['--listen', `127.0.0.1:${port}`, '--state-dir', state, ...extra], { stdio: ['ignore', 'ignore', 'pipe'] });
  const logFile = path.join(ART, `etwd-${tag}.log`);
  const srvLog = fs.createWriteStream(logFile);
  srv.stderr.pipe(srvLog);
  const e = { base, tokens: {}, exited: null, logFile };
  srv.on('exit', (c, sg) => { e.exited = `${c ?? sg}`; });
  srv.on('error', (x) => { e.exited = 'not started: ' + x.message; }); // (no binary: no exit event)
  e.req = (method, p, body, ctype) => request(method, base + p, e.tokens.admin, body, ctype);
  e.stop = async () => {
    if (e.exited === null) { srv.kill('SIGTERM'); for (let i = 0; i < 1200 && e.exited === null; i++) await sleep(100); if (e.exited === null) srv.kill('SIGKILL'); }
    await new Promise((r) => srvLog.end(r));
    fs.rmSync(state, { recursive: true, force: true });
    return e.exited;
  };
  try {
    await until(async () => e.exited === null && fs.existsSync(path.join(state, 'tokens')) &&
      (await request('GET', `${base}/api/v1/health`))[0] === 200, 'etwd to answer', 2 * WAIT, 200);
  } catch (err) {
    await e.stop();
    throw new Error(`etwd did not start (${BIN}): ${err.message}`);
  }
  e.tokens = Object.fromEntries(fs.readFileSync(path.join(state, 'tokens'), 'utf8').split('\n')
    .filter((l) => l && !l.startsWith('#')).map((l) => l.split(/\s+/)).map(([, role, secret]) => [role, secret]));
  return e;
}

export async function launchBrowser() {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM}`);
  return chromium.launch({ executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'] });
}
/* a page in a context of its own; script errors and CSP refusals are pushed to errors */
export async function newPage(browser, errors, opt = {}) {
  const ctx = await browser.newContext(Object.assign({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 900 }, acceptDownloads: true }, opt));
  ctx.setDefaultTimeout(WAIT);
  const p = await ctx.newPage();
  p.on('dialog', (d) => d.accept());
  p.on('pageerror', (x) => { errors.push(String(x)); log('page error:', String(x)); });
  p.on('console', (m) => { if (m.type() === 'error' && /Content Security Policy|Refused to/i.test(m.text())) errors.push(m.text()); });
  return p;
}
export async function login(p, token, url) {
  await p.goto(url);
  await p.locator('#token').fill(token);
  await p.getByRole('button', { name: 'Log in' }).click();
  await p.locator('#who').waitFor({ state: 'visible' });
}
/* one export of the viewer's Export menu (kind: ndjson, csv, chrome, folded), as text */
export async function download(p, kind, scope = 'view') {
  const menu = p.locator('#export-menu');
  if ((await menu.getAttribute('open')) === null) await menu.locator('summary').click();
  await p.locator(`input[name="export-scope"][value="${scope}"]`).check();
  const [dl] = await Promise.all([p.waitForEvent('download'), p.locator(`[data-export="${kind}"]`).click()]);
  const f = path.join(ART, 'export-' + dl.suggestedFilename());
  await dl.saveAs(f);
  if ((await menu.getAttribute('open')) !== null) await menu.locator('summary').click();
  return fs.readFileSync(f, 'utf8');
}

/* the suite's end: etwd stopped and checked (exit 0, no sanitizer report), the counts, the exit */
export async function finish(s, name, browser, etwd) {
  try { if (browser) await browser.close(); } catch { /* gone */ }
  if (etwd) {
    const code = await etwd.stop();
    const san = fs.readFileSync(etwd.logFile, 'utf8').split('\n').filter((l) => /ERROR: (Address|Leak|Thread)Sanitizer|runtime error:/.test(l));
    s.results.push(['etwd exits cleanly with no sanitizer report', code === '0' && !san.length]);
    log(`${code === '0' && !san.length ? 'ok  ' : 'FAIL'} etwd exits cleanly with no sanitizer report (exit ${code})${san.length ? '\n' + san.join('\n') : ''}`);
  }
  const failed = s.results.filter((r) => !r[1]).length;
  console.log(`\n${name}: ${s.results.length - failed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}
