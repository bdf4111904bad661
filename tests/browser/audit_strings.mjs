// Provider strings in the web page (issue 20 item 4: "wherever providers are given (API, CLI, web
// page)"), in Debian's Chromium (playwright-core) against the built etwd on the real kernel:
// a session started from the new-session form with the provider string
// `sched:sched_process_exec` (beside a provider picked in the list, signal) is created with the JSON form
// of both, and streams the exec of /bin/true; a malformed string is refused by the server and its
// message is shown next to the provider-strings field (aria-invalid, focus), not at the search box.
//
// Env: ETWD_BIN (etwd binary), CHROMIUM (/usr/bin/chromium).
import { spawn } from 'node:child_process';
import { log, assert, until, suite, startEtwd, launchBrowser, newPage, login, finish, WAIT } from './harness.mjs';

const S = suite('strings');
const step = S.step;
const etwd = await startEtwd('strings');
const browser = await launchBrowser();
const errors = [];
const page = await newPage(browser, errors);
S.page = page;
log(`etwd on ${etwd.base}`);

await step('login and open the new-session form', async () => {
  await login(page, etwd.tokens.admin, etwd.base + '/');
  await page.getByRole('button', { name: 'New session' }).click();
  await page.locator('#f-prov-strings').waitFor({ state: 'visible' });
});

await step('a malformed string: the message is next to the strings field', async () => {
  await page.locator('#prov-search').fill('signal');
  await page.locator('#prov-results button[data-name="signal"]').click();
  await page.locator('.prov-card').first().waitFor();
  await page.locator('#f-prov-strings').fill('irq:a:b');
  await page.getByRole('button', { name: 'Start session' }).click();
  const err = page.locator('[data-field="/providers/strings"] .field-error');
  await err.waitFor({ timeout: WAIT });
  const t = await err.textContent();
  assert(/providers\/1/.test(t) || /':'/.test(t), 'the server message is shown: ' + t);
  assert((await page.locator('#f-prov-strings').getAttribute('aria-invalid')) === 'true', 'aria-invalid on the strings field');
  assert((await page.locator('#prov-search').getAttribute('aria-invalid')) !== 'true', 'not on the search box');
  assert(await page.evaluate(() => document.activeElement && document.activeElement.id === 'f-prov-strings'), 'focus on the strings field');
  const [st, list] = await etwd.req('GET', '/api/v1/sessions');
  assert(st === 200 && Array.isArray(list) && list.length === 0, 'no session was created: ' + JSON.stringify(list));
});

let sid = 0;
await step('a string beside a picked provider: the session has the JSON form of both and streams', async () => {
  await page.locator('.prov-card .ev-cb[value="signal_deliver"]').check();
  await page.locator('#f-prov-strings').fill('sched:sched_process_exec\n');
  await page.getByRole('button', { name: 'Start session' }).click();
  await page.locator('#viewer').waitFor({ state: 'visible' });
  sid = Number((/Session (\d+)/.exec(await page.locator('#viewer-h').textContent()) || [])[1]);
  assert(sid > 0, 'session id');
  const [st, s] = await etwd.req('GET', `/api/v1/sessions/${sid}`);
  const provs = s.spec && s.spec.providers.map((p) => ({ name: p.name, events: p.events }));
  assert(st === 200 && JSON.stringify(provs) === JSON.stringify([{ name: 'signal', events: ['signal_deliver'] },
    { name: 'sched', events: ['sched_process_exec'] }]), 'the spec: ' + JSON.stringify(provs));
  await until(async () => (await page.locator('#viewer-conn').textContent()) === 'streaming', 'the stream');
  const pids = [];
  await until(async () => {
    pids.push(spawn('/bin/true').pid);
    const txt = await page.locator('#grid-rows').textContent();
    return pids.some((p) => txt.includes(String(p)) && /sched_process_exec/.test(txt));
  }, 'an exec row of our /bin/true', 15000, 300);
});

await step('no page errors', async () => {
  assert(!errors.length, errors.join('\n'));
});
if (sid) await etwd.req('DELETE', `/api/v1/sessions/${sid}`);
await finish(S, 'strings', browser, etwd);
