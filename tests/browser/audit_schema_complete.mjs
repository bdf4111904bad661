// Browser test of the field filter's completion from the session's event schemas (issue 22 item
// 2: "completion from the selected events' schemas") in Debian's Chromium: a live Linux session of
// syscalls sys_enter_openat for a process that makes no syscall, so the page has no event to learn
// fields from: typing "EventData.fil" still offers EventData.filename (the providers API's
// format of that event), and not the fields of the provider's other events (sys_enter_read's
// "count"). Needs root (tracefs).
//
// Env: ETWD_BIN, CHROMIUM.
import { spawn } from 'node:child_process';
import { assert, until, suite, startEtwd, launchBrowser, newPage, login, finish } from './harness.mjs';

const S = suite('schema-complete');
let etwd, browser;
try {
  etwd = await startEtwd('schema-complete');
  browser = await launchBrowser();
} catch (e) { console.error('FATAL: ' + e.message); if (etwd) await etwd.stop(); process.exit(2); }
const pageErrors = [];
const page = S.page = await newPage(browser, pageErrors);

await S.step('a session without events yet: completion offers the selected events\' schema fields', async () => {
  const child = spawn('sleep', ['60'], { stdio: 'ignore' });
  try {
    const [st, s] = await etwd.req('POST', '/api/v1/sessions', { name: 'quiet', pids: [child.pid], providers: [{ name: 'syscalls', events: ['sys_enter_openat'] }] });
    assert(st === 201, 'session ' + st + JSON.stringify(s));
    await login(page, etwd.tokens.admin, `${etwd.base}/#session=${s.id}`);
    await page.locator('#viewer').waitFor({ state: 'visible' });
    const box = page.locator('#field-filter'), sug = page.locator('#field-suggest');
    await box.click();
    await box.pressSequentially('EventData.fil');
    await until(async () => (await sug.isVisible()) && (await sug.locator('li').allTextContents()).includes('EventData.filename'), 'EventData.filename offered');
    await box.fill('');
    await box.pressSequentially('EventData.');
    await until(async () => (await sug.isVisible()) && (await sug.locator('li').count()) > 0, 'EventData fields offered');
    const all = await sug.locator('li').allTextContents();
    assert(all.includes('EventData.flags') && all.includes('EventData.dfd') && !all.includes('EventData.count'), 'only sys_enter_openat\'s fields: ' + all);
    assert(/^0 rows/.test(await page.locator('#ev-status').textContent()), 'no event arrived: ' + await page.locator('#ev-status').textContent());
    // Esc closes the list; a late answer (the worker's seen fields, the schemas) must not open it
    // again, or the next Enter takes a suggestion instead of applying what was typed (CI once
    // saw the flame test's "clear the filter" do that)
    const where = () => page.evaluate(() => S.viewer.where);
    await box.fill('EventData.flags == 1');
    await box.press('Escape');
    await box.press('Enter');
    await until(async () => (await where()) === 'EventData.flags == 1', 'Enter applied the filter');
    await box.fill(''); // an empty box offers every field
    await box.press('Escape');
    assert(!(await sug.isVisible()), 'Esc closed the list');
    await page.evaluate((sid) => {
      seenFields = ['EventData.zzz']; // the worker's answer ([]) now differs: a refresh is due
      knownFields('field-filter');
      return loadSchemaFields(sid);
    }, s.id);
    await until(async () => !(await page.evaluate(() => askingFields)), 'the worker\'s fields answer');
    assert(!(await sug.isVisible()), 'the late answers left the list closed');
    await box.press('Enter');
    await until(async () => (await where()) === '', 'Enter cleared the filter, as typed (where: ' + await where() + ')');
    assert((await box.inputValue()) === '', 'the box kept its text: ' + await box.inputValue());
    // a key typed again opens the list again
    await box.fill('');
    await box.pressSequentially('EventData.fl');
    await until(async () => (await sug.isVisible()) && (await sug.locator('li').allTextContents()).includes('EventData.flags'), 'typing offers fields again');
    await etwd.req('POST', `/api/v1/sessions/${s.id}/stop`);
  } finally { child.kill(); }
});

await S.step('no script errors', async () => { assert(!pageErrors.length, pageErrors.join('\n')); });
await finish(S, 'schema-complete', browser, etwd);
