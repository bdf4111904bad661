// Runs bench/page_busy.mjs alternately on two etwd binaries (A, B, A, B, …: the machine's load
// changes, so compare within one run) and prints each run and the medians per binary.
//   node bench/page_busy_ab.mjs A_BIN B_BIN [ROUNDS=3] [RATE=50000] [DUR=20]
// (BUSY_PANELS=0, BUSY_TRACE=1 and the other variables of page_busy.mjs pass through.)
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const [A, B, ROUNDS = '3', RATE = '50000', DUR = '20'] = process.argv.slice(2);
if (!A || !B) { console.error('usage: node bench/page_busy_ab.mjs A_BIN B_BIN [ROUNDS] [RATE] [DUR]'); process.exit(2); }
const KEYS = ['offered_per_s', 'fps', 'longtasks_over_100ms', 'longest_task_ms', 'slowest_input_ms', 'page_events_per_s', 'page_gap_dropped',
  ...(process.env.BUSY_TRACE ? ['traced_main_cpu_ms', 'traced_max_task_cpu_ms', 'traced_max_cpu_of_a_task_over_100ms'] : [])];
const runs = { A: [], B: [] };
for (let i = 0; i < Number(ROUNDS); i++) {
  for (const [name, bin] of [['A', A], ['B', B]]) {
    const load = os.loadavg()[0].toFixed(1);
    const r = spawnSync('node', [path.join(HERE, 'page_busy.mjs'), RATE, DUR], { env: { ...process.env, ETWD_BIN: bin }, encoding: 'utf8' });
    const text = r.stdout || '';
    const j = text.indexOf('\n{');
    let o = null;
    try { o = JSON.parse(text.slice(j + 1)); } catch { console.log(`${name} run ${i + 1}: no result\n${text}\n${r.stderr}`); continue; }
    o.load = Number(load);
    runs[name].push(o);
    console.log(`${name} run ${i + 1} (load ${load}): ` + KEYS.map((k) => `${k} ${o[k]}`).join(', ') + `, all_counted ${o.all_counted}`);
  }
}
const median = (xs) => { const s = xs.slice().sort((a, b) => a - b); return s.length ? (s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2) : NaN; };
for (const name of ['A', 'B']) {
  const rs = runs[name];
  console.log(`${name} (${name === 'A' ? A : B}) medians of ${rs.length}: ` + [...KEYS, 'load'].map((k) => `${k} ${median(rs.map((o) => o[k]))}`).join(', ') +
    `, all counted in ${rs.filter((o) => o.all_counted).length}/${rs.length}`);
}
