// Browser tests of `stepscope serve` against the real captures in tests/fixtures:
// Debian's Chromium driven by playwright-core. Every number a page shows is checked
// against the JSON API of the same server. Run by scripts/test_web.sh (node --test).
import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../..');
const bin = process.env.STEPSCOPE_BIN || path.join(repo, 'target/debug/stepscope');
const shots = path.join(here, 'screenshots');
mkdirSync(shots, { recursive: true });

// The page's own number formatting (an ES module with no DOM use), to compare shown text.
const fmt = await import('data:text/javascript,' + encodeURIComponent(readFileSync(path.join(repo, 'web/lib/format.js'), 'utf8')));

const CPU = 'cpu-transformer/plugins/profile/2026_11_21_22_29_17';
const ROCM = 'rocm-mi300x-gemm';
const TPU = 'tpu-v6e-inference';

let server, base, browser, page, profileDir;
const pageErrors = [];

/** Starts `stepscope serve ROOT` (with `env` added to this process's); resolves to [process, its URL]. */
async function startServer(root, env = {}) {
  const proc = spawn(bin, ['serve', root, '--port', '0', '--no-open'],
    { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env } });
  const url = await new Promise((resolve, reject) => {
    let buf = '';
    proc.stdout.on('data', d => {
      buf += d;
      const line = buf.split('\n')[0];
      if (buf.includes('\n')) {
        const m = line.match(/^stepscope: serving (http:\/\/127\.0\.0\.1:\d+\/[0-9a-f]{32}\/)$/);
        m ? resolve(m[1]) : reject(new Error(`unexpected first line ${JSON.stringify(line)}`));
      }
    });
    proc.on('exit', code => reject(new Error(`server exited with ${code}`)));
    const timer = setTimeout(() => reject(new Error('server did not print its URL in 20 s')), 20000);
    timer.unref();
  });
  return [proc, url];
}

before(async () => {
  [server, base] = await startServer(path.join(repo, 'tests/fixtures'));
  profileDir = mkdtempSync(path.join(tmpdir(), 'stepscope-chromium-'));
  // A fresh, empty profile folder (Chromium's --user-data-dir).
  browser = await chromium.launchPersistentContext(profileDir, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    acceptDownloads: true,
    viewport: { width: 1400, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  page = browser.pages()[0] || await browser.newPage();
  page.on('pageerror', e => pageErrors.push(String(e.stack || e)));
});

afterEach(() => {
  const errs = pageErrors.splice(0);
  assert.deepEqual(errs, [], 'the page threw');
});

after(async () => {
  if (browser) await browser.close();
  if (server) server.kill();
  if (profileDir) rmSync(profileDir, { recursive: true, force: true });
});

/** GET base + api/path?params as JSON, straight from node. */
async function api(p, params = {}) {
  const u = new URL(`api/${p}`, base);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  const r = await fetch(u);
  assert.equal(r.status, 200, `${u}: ${r.status}`);
  return r.json();
}

async function open(hash) {
  // A new document each time: going to another hash of the same page keeps the old
  // view's elements until the new one renders, and a test could read them.
  await page.goto('about:blank');
  await page.goto(`${base}#/${hash}`);
  await page.waitForLoadState('networkidle');
}

const cellTexts = async (col) => page.$$eval(`table.data tbody tr td:nth-child(${col})`, tds => tds.map(t => t.textContent));

test('overview shows the run\'s real step count, breakdown, chart and top ops', async () => {
  const s = await api('summary', { run: CPU });
  assert.ok(s.step_count > 0);
  await open(`overview?run=${encodeURIComponent(CPU)}`);
  await page.waitForSelector('.cards .card');
  const cards = await page.$$eval('.cards .card', cs => cs.map(c => [c.querySelector('.label').textContent, c.querySelector('.value').textContent]));
  const steps = cards.find(c => c[0] === 'steps');
  assert.equal(steps[1], String(s.step_count));
  const util = cards.find(c => c[0] === 'device utilisation');
  assert.equal(util[1], `${s.device_utilization_pct.toFixed(1)}%`);
  // The uPlot chart drew a canvas; the breakdown has a segment per non-zero part.
  assert.ok(await page.$('.chartbox .uplot canvas'));
  // (The idle split of GPU captures is a note under the bar, not a segment.)
  const parts = Object.entries(s.breakdown)
    .filter(([k, v]) => k !== 'step_ps' && k !== 'host_input_ps' && !k.startsWith('device_idle_') && v > 0).length
    + (s.breakdown.device_idle_ps > 0 ? 1 : 0);
  assert.equal(await page.$$eval('.breakdown .seg', s => s.length), parts);
  // Top ops: same names, in self-time order.
  const names = await cellTexts(1);
  assert.deepEqual(names, s.top_ops.map(o => o.name));
  await page.screenshot({ path: path.join(shots, 'overview.png'), fullPage: true });
});

test('op profile lists every op, sorts on header clicks and filters', async () => {
  const ops = await api('ops', { run: CPU, top: 'all' });
  await open(`ops?run=${encodeURIComponent(CPU)}`);
  await page.waitForSelector('table.data tbody tr');
  assert.equal(await page.textContent('.rowcount'), `${ops.ops.length.toLocaleString('en-US')} rows`);
  assert.equal(await page.$$eval('svg.treemap rect', r => r.length), ops.ops.filter(o => o.self_ps > 0).length);
  // What the op time and the % column are shares of, beside the devices' busy time.
  const devs = await api('devices', { run: CPU });
  assert.equal(await page.textContent('#ops-sum-note'),
    `%: each row's share of the ${fmt.dur(ops.op_time_ps)} of op time, every op's time summed (ops that ran at once each count); the devices were busy ${fmt.dur(devs.all.busy_ps)} (each device's ops merged, summed over devices)`);
  // Boxes coloured by category: one colour a category, named in the legend by total.
  const fills = await page.$$eval('svg.treemap g', gs => gs.map(g => [g.dataset.name, g.querySelector('rect').getAttribute('fill')]));
  const catOf = new Map(ops.ops.map(o => [o.name, o.category || '(none)']));
  const byCat = new Map();
  for (const [name, fill] of fills) {
    const c = catOf.get(name);
    assert.equal(byCat.get(c) ?? fill, fill, `${name} (${c})`);
    byCat.set(c, fill);
  }
  assert.equal(new Set(byCat.values()).size, byCat.size, 'categories apart');
  const totals = new Map();
  for (const o of ops.ops.filter(o => o.self_ps > 0)) totals.set(catOf.get(o.name), (totals.get(catOf.get(o.name)) || 0) + o.self_ps);
  assert.deepEqual(await page.$$eval('.treemap-legend .item', is => is.map(i => i.dataset.group)),
    [...totals].sort((a, b) => b[1] - a[1]).map(([c]) => c));
  // Sort by count (executions, as the CLI's COUNT): descending first, then ascending.
  await page.click('table.data th[data-key=executions]');
  const counts = ops.ops.map(o => o.executions);
  let first = (await cellTexts(7))[0];
  assert.equal(first, Math.max(...counts).toLocaleString('en-US'));
  await page.click('table.data th[data-key=executions]');
  first = (await cellTexts(7))[0];
  assert.equal(first, Math.min(...counts).toLocaleString('en-US'));
  // Sort by name ascending.
  await page.click('table.data th[data-key=name]');
  const shown = await cellTexts(1);
  const sorted = ops.ops.map(o => o.name).sort((a, b) => a.localeCompare(b));
  assert.deepEqual(shown, sorted.slice(0, shown.length));
  // Filter.
  const target = ops.ops[0].name;
  await page.fill('.tablebar .filter', target);
  const filtered = await cellTexts(1);
  assert.ok(filtered.length >= 1 && filtered.every(n => n.toLowerCase().includes(target.toLowerCase())), filtered.join());
  await page.fill('.tablebar .filter', '');
  await page.screenshot({ path: path.join(shots, 'ops.png') });
  // Group by category.
  await page.selectOption('#ops-by', 'category');
  await page.waitForFunction(() => location.hash.includes('by=category'));
  await page.waitForSelector('table.data th[data-key=name]');
  await page.waitForLoadState('networkidle');
  const cats = await api('ops', { run: CPU, top: 'all', by: 'category' });
  const catNames = await cellTexts(1);
  assert.deepEqual(catNames.slice().sort(), cats.ops.map(o => o.name).sort());
  await page.screenshot({ path: path.join(shots, 'ops-by-category.png'), fullPage: true });
});

test('a wide table at 1,024 px: the header and first column stay in view, a cue names the columns past the edge, columns can be picked, long names are cut in the middle', async () => {
  const k = await api('kernels', { run: ROCM, top: 'all' });
  await page.setViewportSize({ width: 1024, height: 768 });
  try {
    await open(`kernels?run=${encodeURIComponent(ROCM)}`);
    await page.waitForSelector('table.data th[data-key=registers_per_thread]');
    const past = () => page.$eval('.tablewrap', w => {
      const edge = w.getBoundingClientRect().right;
      return [...w.querySelectorAll('thead th')].filter(th => th.getBoundingClientRect().right > edge + 1).length;
    });
    const n = await past();
    assert.ok(n > 0, 'the kernels table is wider than 1,024 px');
    await page.waitForFunction(t => document.querySelector('.more-cols').textContent === t, `${n} more column${n === 1 ? '' : 's'} →`);
    assert.equal(await page.$eval('.more-cols', b => b.hidden), false);
    // Its click scrolls to them; the first column and the header stay where they were.
    await page.click('.more-cols');
    await page.waitForFunction(() => document.querySelector('.tablewrap').scrollLeft > 0);
    await page.waitForFunction(() => document.querySelector('.more-cols').hidden);
    const [wrapLeft, thLeft, tdLeft] = await page.$eval('.tablewrap', w => [w.getBoundingClientRect().left,
      w.querySelector('thead th').getBoundingClientRect().left, w.querySelector('tbody td').getBoundingClientRect().left]);
    assert.ok(Math.abs(thLeft - wrapLeft) < 1 && Math.abs(tdLeft - wrapLeft) < 1, `${wrapLeft} ${thLeft} ${tdLeft}`);
    await page.$eval('.tablewrap', w => { w.scrollTop = 200; });
    const [wrapTop, headTop] = await page.$eval('.tablewrap', w => [w.getBoundingClientRect().top, w.querySelector('thead th').getBoundingClientRect().top]);
    assert.ok(Math.abs(headTop - wrapTop) < 1, `header at ${headTop}, table at ${wrapTop}`);
    // A long kernel name: cut in its middle, the whole in its tooltip.
    const long = k.kernels.find(r => r.name.length > 50);
    const cell = await page.$$eval('table.data tbody tr td:first-child', (tds, name) => {
      const td = tds.find(t => t.title === name);
      return td && td.textContent;
    }, long.name);
    assert.equal(cell, fmt.elideMiddle(long.name, 50));
    // Columns picked: one hidden stays hidden when the page opens again, then comes back.
    await page.click('.column-picker summary');
    await page.uncheck('.column-picker input[data-key=registers_per_thread]');
    assert.equal(await page.$('table.data th[data-key=registers_per_thread]'), null);
    await open(`kernels?run=${encodeURIComponent(ROCM)}`);
    await page.waitForSelector('table.data tbody tr');
    assert.equal(await page.$('table.data th[data-key=registers_per_thread]'), null);
    await page.click('.column-picker summary');
    await page.check('.column-picker input[data-key=registers_per_thread]');
    await page.waitForSelector('table.data th[data-key=registers_per_thread]');
  } finally {
    await page.setViewportSize({ width: 1400, height: 900 });
  }
});

test('kernel table shows the GPU capture\'s kernels', async () => {
  const k = await api('kernels', { run: ROCM, top: 'all' });
  assert.ok(k.kernels.length > 0);
  await open(`kernels?run=${encodeURIComponent(ROCM)}`);
  // The hash changes in the same page: wait for this table, not the op profile's rows.
  await page.waitForSelector('table.data th[data-key=registers_per_thread]');
  await page.waitForFunction(n => document.querySelectorAll('table.data tbody tr').length === n, k.kernels.length);
  assert.equal((await cellTexts(1)).length, k.kernels.length);
  await page.click('table.data th[data-key=count]');
  const launches = await cellTexts(5);
  assert.equal(launches[0], Math.max(...k.kernels.map(r => r.count)).toLocaleString('en-US'));
  await page.screenshot({ path: path.join(shots, 'kernels.png'), fullPage: true });
  // A CPU capture has none, and says so.
  await open(`kernels?run=${encodeURIComponent(CPU)}`);
  await page.waitForSelector('text=no GPU kernels');
});

test('steps page lists every step; the run picker switches runs', async () => {
  const st = await api('steps', { run: TPU });
  await open(`steps?run=${encodeURIComponent(TPU)}`);
  await page.waitForSelector('table.data tbody tr');
  assert.equal((await cellTexts(1)).length, st.steps.length);
  assert.deepEqual((await cellTexts(1)).slice(0, 5), st.steps.slice(0, 5).map(s => String(s.step_num)));
  assert.ok(await page.$('.chartbox .uplot canvas'));
  await page.screenshot({ path: path.join(shots, 'steps.png'), fullPage: true });
  const cpuSteps = await api('steps', { run: CPU });
  await page.selectOption('#run', CPU);
  await page.waitForFunction(n => document.querySelectorAll('table.data tbody tr').length === n, cpuSteps.steps.length);
  // Each step's critical path, its largest parts first, with their shares of the path.
  const heads = await page.$$eval('table.data thead th', ths => ths.map(t => t.textContent));
  const col = heads.findIndex(h => h.startsWith('critical path')) + 1;
  assert.ok(col > 0, heads.join(' | '));
  const want = cpuSteps.steps.map(s => {
    const total = s.critical_path.reduce((a, p) => a + p.ps, 0);
    return s.critical_path.slice(0, 2).map(p => `${p.name} ${Math.round(100 * p.ps / total)}%`).join(' · ');
  });
  assert.deepEqual(await cellTexts(col), want);
  assert.match(want[0], /^compute \d+%/);
});

test('steps: the filter finds steps by number, range and bound; a click on the chart\'s spike opens that step', async () => {
  const st = await api('steps', { run: TPU });
  await open(`steps?run=${encodeURIComponent(TPU)}`);
  await page.waitForSelector('table.data tbody tr');
  const nums = async () => (await cellTexts(1)).map(Number);
  const want = test => st.steps.map(s => s.step_num).filter(test).sort((x, y) => x - y);
  const last = st.steps[st.steps.length - 1].step_num;
  for (const [typed, test] of [[String(last), n => n === last], ['10-19', n => n >= 10 && n <= 19], ['19..10', n => n >= 10 && n <= 19], [`>${last - 5}`, n => n > last - 5], ['<=3', n => n <= 3]]) {
    await page.fill('.filter', typed);
    await page.waitForFunction(n => document.querySelector('.rowcount').textContent.startsWith(`${n} of`), want(test).length);
    assert.deepEqual(await nums(), want(test), typed);
  }
  await page.fill('.filter', '');
  // Off the chart, its legend gives each series' median, not blanks.
  const med = xs => { const v = xs.slice().sort((a, b) => a - b), m = (v.length - 1) / 2; return (v[Math.floor(m)] + v[Math.ceil(m)]) / 2; };
  assert.deepEqual(await page.$$eval('#steps-chart .u-legend .u-series .u-value', vs => vs.map(v => v.textContent)),
    ['median of all', fmt.dur(med(st.steps.map(s => s.duration_ps / 1e9)) * 1e9), fmt.dur(med(st.steps.map(s => s.device_busy_ps / 1e9)) * 1e9)]);
  // The spike: the slowest step, at its place on the chart's x axis (the steps in order).
  const i = st.steps.reduce((m, s, k) => (s.duration_ps > st.steps[m].duration_ps ? k : m), 0);
  const box = await page.$eval('#steps-chart .u-over', o => { const r = o.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; });
  await page.mouse.move(box[0] + box[2] * i / (st.steps.length - 1), box[1] + box[3] / 2);
  await page.mouse.down();
  await page.mouse.up();
  await page.waitForFunction(() => location.hash.startsWith('#/timeline'));
  const q = new URLSearchParams(new URL(page.url()).hash.split('?')[1]);
  assert.equal(Number(q.get('start_ps')), st.steps[i].start_ps);
  assert.equal(Number(q.get('end_ps')), st.steps[i].start_ps + st.steps[i].duration_ps);
});

test('timeline: a 641-character kernel name makes a tooltip of a few lines, cut in its middle', async () => {
  const run = await runIn(ROCM);
  const hits = await api('timeline/search', { run, q: 'Cijk_', limit: 1 });
  assert.ok(hits.total > 0);
  await open(`timeline?run=${encodeURIComponent(run)}`);
  await settle();
  await page.fill('#tl-search', 'Cijk_');
  await page.press('#tl-search', 'Enter');
  await page.waitForSelector('#tl-results li');
  await page.click('#tl-next');
  await page.waitForFunction(() => (document.querySelector('#tl-event-name') || {}).textContent);
  await settle();
  const box = (await page.evaluate(() => window.stepscopeTimeline.boxes())).find(b => b.count === 1 && b.w > 4 && b.name.length > 600);
  assert.ok(box, 'the long-named kernel is drawn');
  const c = await page.$eval('#tl-canvas', e => { const r = e.getBoundingClientRect(); return [r.left, r.top]; });
  await page.mouse.move(c[0] + box.x + box.w / 2, c[1] + box.y + box.h / 2);
  await page.waitForSelector('#tl-tip:not([hidden])');
  const shown = await page.textContent('#tl-tip strong');
  assert.equal(shown.length, 160);
  assert.equal(shown, `${box.name.slice(0, 80)}…${box.name.slice(-79)}`);
  const h = await page.$eval('#tl-tip', t => t.getBoundingClientRect().height);
  assert.ok(h < 140, `${h} px tall`);
});

test('timeline: an XLA:CPU op\'s event says how long it ran until done, as the op profile sums it', async () => {
  const ops = (await api('ops', { run: CPU, top: 'all' })).ops;
  await open(`timeline?run=${encodeURIComponent(CPU)}`);
  await settle();
  const name = ops[0].name;
  await page.fill('#tl-search', name);
  await page.press('#tl-search', 'Enter');
  await page.waitForSelector('#tl-results li');
  await page.click('#tl-next');
  await page.waitForSelector('#tl-until-done');
  const m = (await api('timeline/search', { run: CPU, q: name, limit: 100 })).matches.filter(x => x.name === name);
  const d = await api('timeline/event', { run: CPU, track: m[0].track, index: m[0].index });
  const u = d.until_done;
  const rows = await page.$$eval('#tl-until-done + table.kv tr', trs => trs.map(tr => tr.children[1].textContent));
  assert.deepEqual(rows, [`${fmt.dur(u.duration_ps)}, done at ${fmt.dur(u.end_ps)} (dashed in the track)`,
    `${fmt.count(u.op_count)} · total ${fmt.dur(u.op_total_ps)} · avg ${fmt.dur(u.op_avg_ps)}`]);
  assert.equal(u.op_total_ps, ops[0].total_ps, 'the op profile\'s total');
});

test('timeline: a search for an XLA:CPU op counts its runs once, not their end markers; a GPU plane draws XProf\'s framework lines', async () => {
  const runs = await api('timeline/search', { run: CPU, q: 'dot.27', limit: 1 });
  const ends = await api('timeline/search', { run: CPU, q: 'end: dot.27', limit: 1 });
  assert.ok(runs.total > 0 && ends.total === runs.total, `${runs.total} runs, ${ends.total} markers`);
  await open(`timeline?run=${encodeURIComponent(CPU)}`);
  await settle();
  await page.fill('#tl-search', 'dot.27');
  await page.press('#tl-search', 'Enter');
  await page.waitForSelector('#tl-results li');
  assert.equal(await page.textContent('#tl-hits'), `– / ${fmt.count(runs.total)}`);
  // A GPU's plane: XLA Modules, XLA Ops, then the framework's lines, then its streams.
  const gpu = await runIn('gpu-transformer');
  await open(`timeline?run=${encodeURIComponent(gpu)}`);
  await settle();
  const tracks = (await api('timeline/tracks', { run: gpu })).tracks.filter(t => t.plane.startsWith('/device:GPU'));
  assert.deepEqual(tracks.slice(0, 5).map(t => t.line), ['XLA Modules', 'XLA Ops', 'Framework Name Scope', 'Framework Ops', 'Source code']);
  const drawn = new Set((await page.evaluate(() => window.stepscopeTimeline.layout())).filter(i => i.kind === 'track').map(i => i.track));
  for (const t of tracks.slice(2, 5)) assert.ok(drawn.has(t.id), `${t.line} is drawn`);
});

test('a ROCm capture\'s finding names the HIP launch calls in the overview', async () => {
  const run = await runIn('rocm-mi300x-conv-8gpu');
  await open(`overview?run=${encodeURIComponent(run)}`);
  await page.waitForSelector('.finding[data-rule="host-bound-gaps"]');
  const text = await page.textContent('.finding[data-rule="host-bound-gaps"]');
  assert.ok(text.includes('hipModuleLaunchKernel') && !text.includes('cuLaunchKernel'), text);
});

async function timelineWindow() {
  return page.$eval('#tl-range', e => [Number(e.dataset.startPs), Number(e.dataset.endPs)]);
}

async function settle() {
  await page.waitForFunction(() => window.stepscopeTimeline && !window.stepscopeTimeline.pending());
  await page.waitForTimeout(100);
  await page.waitForFunction(() => !window.stepscopeTimeline.pending());
}

test('timeline zooms and pans with W/A/S/D, wheel and drag; a click shows the event\'s stats', async () => {
  const tracks = await api('timeline/tracks', { run: CPU });
  await open(`timeline?run=${encodeURIComponent(CPU)}`);
  await page.waitForSelector('#tl-canvas');
  await settle();
  const [a0, b0] = await timelineWindow();
  assert.ok(a0 <= tracks.start_ps && b0 >= tracks.end_ps, 'starts on the whole capture');
  await page.screenshot({ path: path.join(shots, 'timeline.png') });

  await page.mouse.move(900, 400);
  await page.keyboard.press('w');
  await page.keyboard.press('w');
  const [a1, b1] = await timelineWindow();
  assert.ok(b1 - a1 < (b0 - a0) * 0.7, `W zooms in: ${b0 - a0} → ${b1 - a1}`);
  await page.keyboard.press('d');
  const [a2, b2] = await timelineWindow();
  assert.ok(a2 > a1 && Math.abs((b2 - a2) - (b1 - a1)) < 2, 'D pans right, same width');
  await page.keyboard.press('a');
  await page.keyboard.press('a');
  const [a3] = await timelineWindow();
  assert.ok(a3 < a2, 'A pans left');
  await page.keyboard.press('s');
  const [a4, b4] = await timelineWindow();
  assert.ok(b4 - a4 > b2 - a2, 'S zooms out');
  // Ctrl+wheel zooms in at the pointer (the wheel alone scrolls the tracks); drag pans.
  await page.mouse.move(700, 300);
  await page.keyboard.down('Control');
  await page.mouse.wheel(0, -400);
  await page.keyboard.up('Control');
  const [a5, b5] = await timelineWindow();
  assert.ok(b5 - a5 < b4 - a4, 'ctrl+wheel zooms in');
  await page.mouse.wheel(0, 120);
  const [a5b, b5b] = await timelineWindow();
  assert.deepEqual([a5b, b5b], [a5, b5], 'the wheel does not zoom');

  await page.mouse.move(900, 300);
  await page.mouse.down();
  await page.mouse.move(700, 300, { steps: 5 });
  await page.mouse.up();
  const [a6, b6] = await timelineWindow();
  assert.ok(a6 > a5 && Math.abs((b6 - a6) - (b5 - a5)) < 2, 'dragging left moves the window later');

  // Zoom into the first step, then click the widest event drawn.
  const st = await api('steps', { run: CPU });
  await open(`timeline?run=${encodeURIComponent(CPU)}&start_ps=${st.steps[0].start_ps}&end_ps=${st.steps[0].start_ps + st.steps[0].duration_ps}`);
  await settle();
  const events = await page.evaluate(() => window.stepscopeTimeline.events());
  assert.ok(events.length > 10, `${events.length} events drawn`);
  const ev = events.filter(e => e.w > 8).sort((x, y) => y.w - x.w)[0];
  const box = await page.$eval('#tl-canvas', c => { const r = c.getBoundingClientRect(); return [r.left, r.top]; });
  await page.mouse.click(box[0] + ev.x + Math.min(ev.w / 2, 20), box[1] + ev.y + ev.h / 2);
  const expect = await api('timeline/event', { run: CPU, track: ev.track, index: ev.index });
  await page.waitForSelector('#tl-event-name');
  assert.equal(await page.textContent('#tl-event-name'), expect.display_name);
  const statNames = await page.$$eval('#tl-side table.stats th', t => t.map(x => x.textContent));
  assert.deepEqual(statNames, [...expect.stats, ...expect.metadata_stats].map(s => s.name));
  await page.screenshot({ path: path.join(shots, 'timeline-event.png') });
  // Escape clears the selected event, as it clears an area.
  await page.keyboard.press('Escape');
  assert.equal(await page.$('#tl-event-name'), null);
  assert.equal(await page.textContent('#tl-side'), 'click an event to see its stats');
});

test('timeline search lists the matches and jumps to one', async () => {
  const res = await api('timeline/search', { run: CPU, q: 'dot', offset: 0, limit: 200 });
  assert.ok(res.total > 0);
  await open(`timeline?run=${encodeURIComponent(CPU)}`);
  await settle();
  await page.fill('#tl-search', 'dot');
  await page.press('#tl-search', 'Enter');
  await page.waitForSelector('#tl-results li');
  assert.ok((await page.textContent('#tl-side h3')).startsWith(`${res.total.toLocaleString('en-US')} events match`));
  assert.equal(await page.$$eval('#tl-results li', l => l.length), res.matches.length);
  await page.click('#tl-results li a');
  await page.waitForSelector('#tl-event-name');
  assert.equal(await page.textContent('#tl-event-name'), res.matches[0].name);
  // The side panel lists the event's stats, HLO op included, as the API has them.
  const detail = await api('timeline/event', { run: CPU, track: res.matches[0].track, index: res.matches[0].index });
  await page.waitForSelector('#tl-side table.stats');
  const stats = await page.$$eval('#tl-side table.stats tr', rows => rows.map(r => [r.querySelector('th').textContent, r.querySelector('td').textContent]));
  assert.deepEqual(stats, [...detail.stats, ...detail.metadata_stats].map(s => [s.name, s.value]));
  assert.ok(stats.some(([k]) => k === 'hlo_op'), JSON.stringify(stats));
  const [a, b] = await timelineWindow();
  assert.ok(a <= res.matches[0].start_ps && b >= res.matches[0].start_ps, 'the window shows the match');
  // All occurrences of its name, as the API counts them, and links to its HLO and op row.
  const occ = await page.$$eval('#tl-side table.kv tr', trs => Object.fromEntries(trs.map(tr => [tr.children[0].textContent, tr.children[1].textContent])));
  const o = detail.occurrences;
  assert.equal(occ.count, `${fmt.count(o.count)} on ${o.tracks} track${o.tracks === 1 ? '' : 's'}`);
  assert.equal(occ['min / avg / max'], `${fmt.dur(o.min_ps)} / ${fmt.dur(o.avg_ps)} / ${fmt.dur(o.max_ps)}`);
  assert.ok(o.count > 1);
  await settle();
  await page.screenshot({ path: path.join(shots, 'timeline-search.png') });
  assert.equal(await page.textContent('#tl-op-links a.oplink'), res.matches[0].name);
  await page.click('#tl-op-links a.oplink');
  await page.waitForSelector('#hlo-name');
  assert.equal(await page.textContent('#hlo-name'), res.matches[0].name);
});

test('timeline of a TPU capture draws its device tracks', async () => {
  const tracks = await api('timeline/tracks', { run: TPU });
  await open(`timeline?run=${encodeURIComponent(TPU)}`);
  await settle();
  const drawnTracks = new Set((await page.evaluate(() => window.stepscopeTimeline.events())).map(e => e.track));
  assert.ok(drawnTracks.size >= 1 && [...drawnTracks].every(t => t < tracks.tracks.length));
  await page.screenshot({ path: path.join(shots, 'timeline-tpu.png') });
  // Its tracks overflow the window: the wheel scrolls them, the window stays.
  const before = await timelineWindow();
  await page.mouse.move(700, 400);
  await page.mouse.wheel(0, 300);
  const view = await page.evaluate(() => window.stepscopeTimeline.view());
  assert.ok(view.scroll_y > 0, 'the wheel scrolls the tracks');
  assert.deepEqual(await timelineWindow(), before);
});

test('timeline export buttons download the run as Perfetto and Chrome JSON', async () => {
  const tracks = await api('timeline/tracks', { run: CPU });
  await open(`timeline?run=${encodeURIComponent(CPU)}`);
  await settle();
  for (const [format, suffix] of [['perfetto', '.pftrace'], ['chrome', '.trace.json.gz']]) {
    const link = page.locator(`#tl-export-${format}`);
    assert.equal(await link.count(), 1, `no ${format} export button`);
    const [download] = await Promise.all([page.waitForEvent('download'), link.click()]);
    assert.equal(download.suggestedFilename(), `2026_11_21_22_29_17${suffix}`);
    assert.equal(await download.failure(), null);
    const got = readFileSync(await download.path());
    // The same bytes as the API answers from node.
    const u = new URL('api/export', base);
    u.searchParams.set('run', CPU);
    u.searchParams.set('format', format);
    const res = await fetch(u);
    assert.equal(res.status, 200);
    const want = Buffer.from(await res.arrayBuffer());
    assert.ok(got.length > 100000 && got.equals(want), `${format}: downloaded ${got.length} bytes, API ${want.length}`);
    if (format === 'chrome') {
      const doc = JSON.parse(gunzipSync(got).toString('utf8'));
      const events = doc.traceEvents.filter(e => e.ph === 'X' || e.ph === 'i').length;
      assert.equal(events, tracks.events, 'every timeline event is in the Chrome trace');
    }
  }
});

/** The run under tests/fixtures/`dir` as api/runs names it. */
async function runIn(dir) {
  const runs = await api('runs');
  const r = runs.find(x => x.run === dir || x.run.startsWith(`${dir}/`));
  assert.ok(r, `no run in ${dir}`);
  return r.run;
}

const cards = async (sel) => Object.fromEntries(await page.$$eval(`${sel} .card`, cs => cs.map(c => [c.querySelector('.label').textContent, c.querySelector('.value').textContent])));
const tableCells = async (sel, col) => page.$$eval(`${sel} table.data tbody tr td:nth-child(${col})`, tds => tds.map(t => t.textContent));

test('overview of a capture without device activity says so instead of drawing a breakdown', async () => {
  const run = await runIn('cpu-jax0431');
  const [s, adv] = await Promise.all([api('summary', { run }), api('advise', { run })]);
  assert.deepEqual(s.environment.devices, []);
  assert.ok(adv.findings.some(f => f.rule === 'no-device-activity'), adv.findings.map(f => f.rule).join());
  await open(`overview?run=${encodeURIComponent(run)}`);
  await page.waitForSelector('#no-breakdown');
  assert.equal(await page.$$eval('.breakdown', b => b.length), 0);
  assert.equal((await cards('.cards'))['device utilisation'], '—');
  assert.ok(await page.$('.finding[data-rule="no-device-activity"]'));
  // The step chart draws step time alone, no device-busy line at zero.
  const series = await page.$$eval('.chartbox .u-legend .u-series', s => s.map(x => x.textContent));
  assert.equal(series.length, 2, series.join('|'));
  assert.ok(!series.some(x => x.includes('device busy')), series.join('|'));
  await page.screenshot({ path: path.join(shots, 'overview-no-device-activity.png'), fullPage: true });
});

test('overview lists the run\'s findings with evidence and advice', async () => {
  const run = await runIn('cpu-tiny-ops');
  const adv = await api('advise', { run });
  assert.ok(adv.findings.length > 0);
  await open(`overview?run=${encodeURIComponent(run)}`);
  await page.waitForSelector('.finding');
  const shown = await page.$$eval('.finding', fs => fs.map(f => [f.dataset.rule, f.querySelector('.ftitle').textContent, f.querySelector('.advice').textContent, f.querySelectorAll('.evidence li').length]));
  assert.deepEqual(shown, adv.findings.map(f => [f.rule, f.title, `→ ${f.advice}`, f.evidence.length]));
  await page.screenshot({ path: path.join(shots, 'overview-findings.png'), fullPage: true });
  // A piece of evidence with an interval opens the timeline with that interval selected
  // and its events listed, as api/timeline/select counts them.
  const e = adv.findings.flatMap(f => f.evidence).find(e => e.duration_ps > 0);
  assert.ok(e, 'some evidence names an interval');
  await page.click(`a.evidence-link[href*="mark_start_ps=${e.start_ps}&"]`);
  await page.waitForSelector('#tl-area');
  const [a, b] = await page.$eval('#tl-area', h => [Number(h.dataset.startPs), Number(h.dataset.endPs)]);
  assert.deepEqual([a, b], [e.start_ps, e.start_ps + e.duration_ps]);
  const sel = await api('timeline/select', { run, start_ps: a, end_ps: b });
  const info = await page.$$eval('#tl-side table.kv tr', trs => Object.fromEntries(trs.map(tr => [tr.children[0].textContent, tr.children[1].textContent])));
  assert.equal(info.events, fmt.count(sel.events));
});

test('memory page charts in-use bytes with the peak marked; a click lists the allocations live then', async () => {
  for (const run of [ROCM, TPU]) {
    const m = await api('memory', { run, top: 200 });
    const a = m.allocators[0];
    assert.ok(a && a.timeline.length > 1, `${run} has allocator events`);
    await open(`memory?run=${encodeURIComponent(run)}`);
    await page.waitForSelector('#mem-chart .uplot canvas');
    const c = await cards('#mem-cards');
    assert.equal(c['peak in use'], fmt.bytes(a.peak_in_use_bytes));
    assert.equal(c.allocations, fmt.count(a.allocations));
    // The peak's dot is drawn in red where the chart puts the peak.
    const px = await page.evaluate(([x, y]) => {
      const u = window.stepscopeMemory.chart;
      const cx = Math.round(u.valToPos(x, 'x', true)), cy = Math.round(u.valToPos(y, 'y', true));
      return Array.from(u.ctx.getImageData(cx, cy, 1, 1).data);
    }, [a.peak_time_ps / 1e9, a.peak_in_use_bytes]);
    assert.ok(px[0] > 150 && px[1] < 80 && px[2] < 80, `peak marker pixel ${px}`);
    // The live list starts at the peak, as api/memory has it.
    assert.equal((await tableCells('#mem-live', 1)).length, a.live_at_peak.length);
    assert.deepEqual(await tableCells('#mem-live', 1), a.live_at_peak.map(l => fmt.bytes(l.bytes)));
    await page.screenshot({ path: path.join(shots, `memory-${run.split(/[./]/)[0]}.png`), fullPage: true });

    // Click a third of the way across the plot: the allocations live at that time.
    const over = await page.$eval('#mem-chart .u-over', e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; });
    await page.mouse.click(over[0] + over[2] / 3, over[1] + over[3] / 2);
    await page.waitForFunction(() => document.querySelector('#mem-live').dataset.timePs);
    await page.waitForLoadState('networkidle');
    const t = Number(await page.$eval('#mem-live', e => e.dataset.timePs));
    const [x0, x1] = [a.timeline[0].time_ps, a.timeline[a.timeline.length - 1].time_ps];
    assert.ok(t > x0 - (x1 - x0) && t < x1 + (x1 - x0), `clicked time ${t} within the chart`);
    const live = await api('memory/live', { run, allocator_host: a.host, allocator: a.name, time_ps: t, top: 200 });
    assert.equal(await page.textContent('#mem-live-title'), `Live at ${fmt.dur(t)}: ${fmt.bytes(live.in_use_bytes)} in use`);
    assert.deepEqual(await tableCells('#mem-live', 1), live.live.map(l => fmt.bytes(l.bytes)));
    assert.ok(live.live.length > 0 || live.in_use_bytes === 0 || live.untracked_bytes > 0);
    assert.ok(new URL(page.url()).hash.includes(`t_ps=${t}`), 'the chosen time is in the URL');
    await page.screenshot({ path: path.join(shots, `memory-live-${run.split(/[./]/)[0]}.png`), fullPage: true });
  }
  // A CPU capture has no allocator events and says so; its pprof is summarised.
  const run = await runIn('cpu-compile');
  const m = await api('memory', { run, top: 200 });
  await open(`memory?run=${encodeURIComponent(run)}`);
  await page.waitForSelector('#mem-none');
  assert.equal((await tableCells('#mem-sites', 1)).length, m.device_memory_profile.by_site.length);
});

test('memory: the page opens on the allocator the summary names for a tied peak, its size written as the CLI writes it', async () => {
  // rocm-mi300x-conv-8gpu: seven GPUs' allocators tie at one peak.
  const run = await runIn('rocm-mi300x-conv-8gpu');
  const [s, m] = await Promise.all([api('summary', { run }), api('memory', { run })]);
  const top = m.allocators.filter(a => a.peak_in_use_bytes === m.allocators[0].peak_in_use_bytes);
  assert.ok(top.length > 1, 'a tie');
  assert.equal(s.memory_peak.allocator, top[0].name);
  await open(`memory?run=${encodeURIComponent(run)}`);
  await page.waitForSelector('#mem-allocator');
  const shown = await page.$eval('#mem-allocator', sel => sel.options[sel.selectedIndex].textContent);
  assert.ok(shown.includes(s.memory_peak.allocator), shown);
  // The CLI's summary writes the same size, in the same units (IEC).
  const cli = execFileSync(bin, ['summary', path.join(repo, 'tests/fixtures/rocm-mi300x-conv-8gpu')], { encoding: 'utf8' });
  const size = shown.match(/\(peak (.+)\)$/)[1];
  assert.match(size, /^[\d.]+ (KiB|MiB|GiB|TiB)$/);
  assert.ok(cli.includes(`peak ${size} of `) && cli.includes(s.memory_peak.allocator), cli);
});

test('devices and collectives pages show the data-parallel capture\'s rows', async () => {
  const run = await runIn('cpu-dp4');
  const d = await api('devices', { run });
  await open(`devices?run=${encodeURIComponent(run)}`);
  await page.waitForSelector('#dev-table table.data tbody tr');
  const c = await cards('#dev-cards');
  assert.equal(c.devices, fmt.count(d.all.device_count));
  assert.equal(c.utilisation, fmt.pct(d.all.utilization_pct));
  const rows = await page.$$eval('#dev-table table.data tbody tr', trs => trs.map(tr => [...tr.children].map(td => td.textContent)));
  assert.equal(rows.length, d.devices.length);
  const byDev = new Map(d.devices.map(r => [`${r.host} ${r.device}`, r]));
  for (const r of rows) {
    const want = byDev.get(`${r[0]} ${r[1]}`);
    assert.ok(want, r.join());
    assert.deepEqual([r[3], r[5], r[7], r[r.length - 1]], [fmt.pct(want.utilization_pct), fmt.dur(want.compute_ps), fmt.dur(want.copy_ps), want.straggler ? 'straggler' : '']);
  }
  assert.equal(await page.$$eval('#dev-stragglers li', l => l.length).catch(() => 0), d.stragglers.length);
  await page.screenshot({ path: path.join(shots, 'devices.png'), fullPage: true });

  const col = await api('collectives', { run, top: 'all' });
  await open(`collectives?run=${encodeURIComponent(run)}`);
  await page.waitForSelector('#coll-table table.data tbody tr');
  const cc = await cards('#coll-cards');
  assert.equal(cc['in collectives'], fmt.dur(col.total_ps));
  assert.equal(cc.overlap, fmt.pct(col.overlap_pct));
  const most = col.ops.reduce((x, y) => (y.exposed_ps > x.exposed_ps ? y : x));
  assert.equal((await tableCells('#coll-table', 1))[0], most.name, 'sorted by exposed time');
  assert.equal((await tableCells('#coll-table', 1)).length, col.ops.length);
  assert.deepEqual((await tableCells('#coll-table', 5)).sort(), col.ops.map(o => fmt.dur(o.exposed_ps)).sort());
  await page.screenshot({ path: path.join(shots, 'collectives.png'), fullPage: true });
});

test('compile page lists each compile and the modules', async () => {
  const run = await runIn('cpu-compile');
  const c = await api('compile', { run });
  assert.ok(c.compiles.length > 0);
  await open(`compile?run=${encodeURIComponent(run)}`);
  await page.waitForSelector('#compile-events table.data tbody tr');
  assert.equal(await page.textContent('#compile-total'), `${fmt.dur(c.total_ps)} compiling, ${fmt.count(c.compiles.length)} time(s)`);
  assert.equal((await tableCells('#compile-events', 1)).length, c.compiles.length);
  assert.deepEqual(await tableCells('#compile-events', 6), c.compiles.slice().sort((x, y) => x.start_ps - y.start_ps).map(e => fmt.dur(e.total_ps)));
  assert.deepEqual((await tableCells('#compile-modules', 1)).sort(), c.modules.map(m => m.module || '(unknown module)').sort());
  await page.screenshot({ path: path.join(shots, 'compile.png'), fullPage: true });
});

test('diff page compares two runs picked from the list and ranks the top op change first', async () => {
  const [a, b] = [await runIn('cpu-clean'), await runIn('cpu-slow')];
  const d = await api('diff', { a, b, top: 'all' });
  await open(`diff?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`);
  await page.waitForSelector('#diff-ops table.data tbody tr');
  assert.equal(await page.$eval('#diff-a', s => s.value), a);
  assert.equal(await page.$eval('#diff-b', s => s.value), b);
  const c = await cards('#diff-cards');
  assert.equal(c['median step A'], fmt.dur(d.step_time.a_median_ps));
  assert.equal(c['median step B'], fmt.dur(d.step_time.b_median_ps));
  const sign = v => (v > 0 ? `+${fmt.dur(v)}` : fmt.dur(v));
  assert.equal(c.change, sign(d.step_time.delta_ps));
  // The top op change: the API ranks by |change per step|; the page shows it first.
  const first = await page.$eval('#diff-ops table.data tbody tr', tr => [...tr.children].map(td => td.textContent));
  assert.equal(first[0], d.ops[0].name);
  assert.equal(first[2], d.ops[0].status);
  assert.equal(first[3], sign(d.ops[0].delta_per_step_ps));
  assert.equal((await tableCells('#diff-ops', 1)).length, d.ops.length);
  await page.screenshot({ path: path.join(shots, 'diff.png') });
  // Swapping A and B flips the sign of the change.
  await page.click('#diff-swap');
  await page.waitForFunction(v => document.querySelector('#diff-a') && document.querySelector('#diff-a').value === v, b);
  await page.waitForSelector('#diff-cards');
  await page.waitForLoadState('networkidle');
  const back = await api('diff', { a: b, b: a, top: 'all' });
  assert.equal(back.step_time.delta_ps, -d.step_time.delta_ps);
  assert.equal((await cards('#diff-cards')).change, sign(back.step_time.delta_ps));
});

test('diff defaults A to the newest run of B\'s program, and says when two runs ran different programs', async () => {
  const root = logDir({
    '2026_11_01_00_00_00': [['vm', 'cpu-clean']],
    '2026_11_02_00_00_00': [['vm', 'cpu-sort']],
    '2026_11_03_00_00_00': [['vm', 'cpu-slow']],
  });
  const [proc, url] = await startServer(root);
  try {
    const get = async (p, q) => (await fetch(new URL(`api/${p}?${new URLSearchParams(q)}`, url))).json();
    const runs = await get('runs', {});
    const [clean, sort, slow] = ['2026_11_01_00_00_00', '2026_11_02_00_00_00', '2026_11_03_00_00_00']
      .map(d => runs.find(r => r.run.endsWith(d)).run);
    assert.equal((await get('diff', { a: sort, b: slow })).same_program, false);
    assert.equal((await get('diff', { a: clean, b: slow })).same_program, true);
    await page.goto('about:blank');
    await page.goto(new URL(`#/diff?run=${encodeURIComponent(slow)}`, url).href);
    await page.waitForSelector('#diff-cards');
    assert.equal(await page.$eval('#diff-a', s => s.value), clean, 'the newest run of the same program, not the newest run');
    assert.equal(await page.$('#diff-programs'), null);
    const other = await get('diff', { a: sort, b: slow, top: 'all' });
    await page.goto('about:blank');
    await page.goto(new URL(`#/diff?a=${encodeURIComponent(sort)}&b=${encodeURIComponent(slow)}`, url).href);
    await page.waitForSelector('#diff-programs');
    assert.equal(await page.textContent('#diff-programs'),
      `These ran different programs (${other.matched_op_time_pct.toFixed(1)}% of op time matched): their difference is not a change of one program.`);
  } finally {
    proc.kill();
  }
});

test('a what-if of A is set beside B as measured: from the overview\'s panel, and on the Diff page by itself', async () => {
  const root = logDir({
    '2026_11_01_00_00_00': [['vm', 'cpu-sleep-step']],
    '2026_11_02_00_00_00': [['vm', 'cpu-sleep-step-fixed']],
  });
  const [proc, url] = await startServer(root);
  try {
    const get = async (p, q) => (await fetch(new URL(`api/${p}?${new URLSearchParams(q)}`, url))).json();
    const runs = await get('runs', {});
    const [a, b] = ['2026_11_01_00_00_00', '2026_11_02_00_00_00'].map(d => runs.find(r => r.run.endsWith(d)).run);
    const first = (await get('advise', { run: a })).findings.find(f => f.gain_edit);
    const w = (await get('diff', { a, b, top: 1, whatif: first.gain_edit })).whatif;
    const signed = v => `${v >= 0 ? '+' : '-'}${Math.abs(v).toFixed(1)}%`;
    const verdict = w.within_noise ? 'B is within the noise of the projection'
      : `the projection is ${Math.abs(w.projected_less_measured_pct).toFixed(1)} points ${w.projected_less_measured_pct >= 0 ? 'over' : 'under'} B's gain`;
    const line = `What if A (${first.gain_edit}): ${fmt.dur(w.a_step_ps)} → ${fmt.dur(w.projected_step_ps)} projected `
      + `(${signed(-w.projected_gain_pct)}); B measured ${fmt.dur(w.b_step_ps)} (${signed(-w.measured_gain_pct)}): ${verdict}.`;
    // The Diff page takes A's first finding's change by itself.
    await page.goto('about:blank');
    await page.goto(new URL(`#/diff?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`, url).href);
    await page.waitForSelector('#diff-whatif-line');
    assert.equal(await page.inputValue('#diff-whatif-edit'), first.gain_edit);
    assert.equal(await page.textContent('#diff-whatif-line'), line);
    // From A's overview: the finding's replay, then set beside B.
    await page.goto('about:blank');
    await page.goto(new URL(`#/overview?run=${encodeURIComponent(a)}`, url).href);
    await page.click(`.finding[data-rule="${first.rule}"] .gain button.replay`);
    await page.waitForSelector('#whatif-beside');
    await page.selectOption('#whatif-beside-run', b);
    await page.click('#whatif-beside-go');
    await page.waitForSelector('#diff-whatif-line');
    assert.equal(new URLSearchParams(new URL(page.url()).hash.split('?')[1]).get('whatif'), first.gain_edit);
    assert.equal(await page.textContent('#diff-whatif-line'), line);
    // A change that names nothing says so, where the line would be.
    await page.fill('#diff-whatif-edit', '--scale no.such.op=0');
    await page.click('#diff-whatif-go');
    await page.waitForSelector('#diff-whatif .error');
    assert.match(await page.textContent('#diff-whatif .error'), /no op named "no.such.op"/);
    await page.screenshot({ path: path.join(shots, 'diff-whatif.png'), fullPage: true });
  } finally {
    proc.kill();
  }
});

test('an op name in the op profile opens its HLO view', async () => {
  const ops = await api('ops', { run: CPU });
  const op = ops.ops[0];
  await open(`ops?run=${encodeURIComponent(CPU)}`);
  await page.waitForSelector('table.data tbody tr a.oplink');
  await page.click(`table.data tbody tr a.oplink >> text="${op.name}"`);
  await page.waitForSelector('#hlo-text');
  const h = await api('hlo', { run: CPU, op: op.name, module: op.module });
  assert.equal(await page.textContent('#hlo-name'), h.instruction.name);
  assert.equal(await page.textContent('#hlo-text'), h.instruction.text);
  assert.ok(new URL(page.url()).hash.includes(`op=${encodeURIComponent(op.name)}`));
  if (h.fused_body.length) assert.equal(await page.textContent('#hlo-fused'), h.fused_body.map(i => i.text).join('\n'));
  assert.equal((await tableCells('#hlo-operands', 1)).length, h.operands.length);
  await page.screenshot({ path: path.join(shots, 'hlo.png'), fullPage: true });
});

test('a page shows its loading state at once, and an error with a retry when a request fails', async () => {
  // Slow: the overview's summary answers after 1.5 s; the page says it is loading meanwhile.
  let release;
  const held = new Promise(r => { release = r; });
  await page.route(/\/api\/summary\?/, async route => { await held; await route.continue(); });
  await page.goto('about:blank');
  await page.goto(`${base}#/overview?run=${encodeURIComponent(CPU)}`);
  await page.waitForSelector('#view .loading[role=status]', { timeout: 5000 });
  assert.match(await page.textContent('#view .loading'), /^Loading Overview of .*…/);
  await page.waitForTimeout(1500);
  assert.match(await page.textContent('#view .loading'), /… [12] s$/, 'it counts the seconds');
  release();
  await page.waitForSelector('.cards .card');
  assert.equal(await page.$('#view .loading'), null, 'the loading line goes once the page is there');
  await page.unroute(/\/api\/summary\?/);

  // Failing: the server answers 500; the page says so and offers a retry that works.
  await page.route(/\/api\/summary\?/, route => route.fulfill({ status: 500, contentType: 'application/json', body: '{"error":"the run could not be read"}' }));
  await page.goto('about:blank');
  await page.goto(`${base}#/overview?run=${encodeURIComponent(CPU)}`);
  await page.waitForSelector('#view .error[role=alert] button');
  assert.match(await page.textContent('#view .error[role=alert]'), /the run could not be read/);
  assert.equal(await page.$('#view .loading'), null);
  await page.unroute(/\/api\/summary\?/);
  await page.click('#view .error[role=alert] button');
  await page.waitForSelector('.cards .card');
  assert.equal(await page.$('#view .error[role=alert]'), null);

  // Gone: a server that is not there says so, not a blank page.
  await page.route(/\/api\/steps\?/, route => route.abort('connectionrefused'));
  await page.goto('about:blank');
  await page.goto(`${base}#/steps?run=${encodeURIComponent(CPU)}`);
  await page.waitForSelector('#view .error[role=alert]');
  assert.match(await page.textContent('#view .error[role=alert]'), /cannot reach the server for api\/steps/);
  await page.unroute(/\/api\/steps\?/);
});

test('a GPU capture\'s idle time is split by launch on the overview and devices pages', async () => {
  const run = await runIn('gpu-transformer');
  const s = await api('summary', { run });
  const b = s.breakdown;
  assert.ok(b.device_idle_queued_ps !== undefined && b.device_idle_launching_ps > 0, JSON.stringify(b));
  await open(`overview?run=${encodeURIComponent(run)}`);
  await page.waitForSelector('#idle-split');
  const text = await page.$eval('#idle-split', p => p.textContent);
  const nothing = b.device_idle_ps - b.device_idle_queued_ps - b.device_idle_launching_ps;
  assert.equal(text, `of device idle: host launched nothing ${fmt.dur(nothing)} · host in launch calls ${fmt.dur(b.device_idle_launching_ps)} · launched, not started ${fmt.dur(b.device_idle_queued_ps)}`);
  const d = await api('devices', { run });
  await open(`devices?run=${encodeURIComponent(run)}`);
  await page.waitForSelector('#dev-table table.data tbody tr');
  const head = await page.$$eval('#dev-table table.data thead th', ths => ths.map(t => t.textContent.trim()));
  const row = await page.$$eval('#dev-table table.data tbody tr:first-child td', tds => tds.map(t => t.textContent));
  const at = label => head.findIndex(h => h.startsWith(label));
  assert.ok(at('idle: queued') > 0 && at('idle: in launch') > 0, head.join('|'));
  assert.equal(row[at('idle: queued')], fmt.dur(d.devices[0].idle_queued_ps));
  assert.equal(row[at('idle: in launch')], fmt.dur(d.devices[0].idle_launching_ps));
});

test('a one-off capture says it is mostly compilation, and a host callback is its own part, as the CLI says', async () => {
  const run = await runIn('cpu-oneoff');
  const s = await api('summary', { run });
  const c = s.capture;
  assert.ok(c.compile_pct > 50 && c.compile_outside_steps_ps === c.compile_ps, JSON.stringify(c));
  await open(`overview?run=${encodeURIComponent(run)}`);
  await page.waitForSelector('#capture-compile');
  assert.equal(await page.textContent('#capture-compile'),
    `Capture ${fmt.dur(c.span_ps)}: XLA compiling ${fmt.dur(c.compile_ps)} of it (${c.compile_pct.toFixed(1)}%; none of it in a step).`);
  // The first finding names it.
  const adv = await api('advise', { run });
  assert.equal(adv.findings[0].rule, 'captured-compilation');
  await page.waitForSelector('.findings');
  assert.match(await page.textContent('.findings'), /this capture is mostly XLA compilation/);

  const cb = await runIn('cpu-callback');
  const b = (await api('summary', { run: cb })).breakdown;
  assert.ok(b.host_callback_ps > 0.3 * b.step_ps, JSON.stringify(b));
  await open(`overview?run=${encodeURIComponent(cb)}`);
  await page.waitForSelector('.findings');
  assert.match(await page.textContent('#view'), /host callbacks/);
  assert.equal((await api('advise', { run: cb })).findings[0].rule, 'host-callbacks');
});

test('the overview shows the capture\'s health before the findings: each check not ok, what it affects and its fix', async () => {
  const run = await runIn('cpu-oneoff');
  const s = await api('summary', { run });
  const adv = await api('advise', { run });
  // api/advise carries the same health as api/summary.
  assert.deepEqual(adv.health, s.health);
  const bad = s.health.checks.filter(c => c.status !== 'ok');
  assert.ok(bad.some(c => c.check === 'compilation' && c.status === 'bad'), JSON.stringify(s.health));
  await open(`overview?run=${encodeURIComponent(run)}`);
  await page.waitForSelector('#health-checks');
  assert.equal(await page.textContent('#health'), `Capture health: ${s.health.status}`);
  const shown = await page.$$eval('#health-checks .health-check', ds => ds.map(d => [d.dataset.check, d.textContent]));
  assert.deepEqual(shown.map(([c]) => c), bad.map(c => c.check));
  for (const [i, [, text]] of shown.entries()) {
    const c = bad[i];
    assert.equal(text, `[${c.status}] ${c.check}: ${c.what}affects: ${c.affects}fix: ${c.fix}`);
  }
  // Before the findings.
  assert.ok(await page.$eval('#health', h => h.compareDocumentPosition(document.querySelector('.findings')) & Node.DOCUMENT_POSITION_FOLLOWING));

  // A healthy capture: one line.
  const clean = await runIn('cpu-transformer');
  const h = (await api('summary', { run: clean })).health;
  await open(`overview?run=${encodeURIComponent(clean)}`);
  await page.waitForSelector('#health');
  if (h.status === 'ok') {
    assert.equal(await page.textContent('#health-ok'), `Every check is ok: ${h.checks.find(c => c.check === 'steps').what}.`);
  } else {
    assert.equal(await page.$$eval('#health-checks .health-check', ds => ds.length), h.checks.filter(c => c.status !== 'ok').length);
  }
});

test('a finding whose evidence sits in a cold step says so under its title', async () => {
  const run = await runIn('cpu-compile');
  const adv = await api('advise', { run });
  const told = adv.findings.filter(f => f.caveats);
  assert.ok(told.some(f => f.caveats.some(c => c.startsWith('step 0 of its evidence is cold'))), JSON.stringify(adv.findings));
  assert.ok(adv.findings.some(f => !f.caveats), 'captured-compilation rests on its cold step: no caveat');
  await open(`overview?run=${encodeURIComponent(run)}`);
  await page.waitForSelector('.findings');
  const shown = await page.$$eval('.findings .finding', ds => ds.map(d => [d.dataset.rule, [...d.querySelectorAll('.caveat')].map(c => c.textContent)]));
  assert.ok(shown.length > 0);
  for (const [rule, caveats] of shown) {
    const f = adv.findings.find(f => f.rule === rule);
    assert.deepEqual(caveats, (f.caveats || []).map(c => `! ${c}`), rule);
  }
  assert.ok(shown.some(([, c]) => c.length > 0));
});

test('a finding shows what fixing it gains, and its replay is the what-if panel\'s', async () => {
  const cb = await runIn('cpu-callback');
  const first = (await api('advise', { run: cb })).findings[0];
  assert.equal(first.rule, 'host-callbacks');
  assert.ok(first.gain_pct > 10 && first.gain_edit === '--remove callbacks', JSON.stringify(first));
  await open(`overview?run=${encodeURIComponent(cb)}`);
  await page.waitForSelector('.finding .gain');
  const gain = await page.textContent('.finding[data-rule="host-callbacks"] .gain');
  assert.ok(gain.startsWith(`fix this: −${fmt.dur(first.gain_ps)} a step (${first.gain_pct.toFixed(1)}% of the step)`), gain);
  await page.click('.finding[data-rule="host-callbacks"] .gain button.replay');
  await page.waitForSelector('#whatif-line');
  assert.equal(await page.inputValue('#whatif-edit'), first.gain_edit);
  const p = await api('whatif', { run: cb, edit: first.gain_edit });
  assert.equal(p.gain_ps, first.gain_ps);
  assert.match(await page.textContent('#whatif-line'), new RegExp(`step ${fmt.dur(p.step_ps)} → ${fmt.dur(p.projected_step_ps)} projected`));
  // A change typed by hand; a bad one says what is wrong.
  await page.fill('#whatif-edit', '--scale compute=0.5');
  await page.click('#whatif-go');
  await page.waitForFunction(() => /--scale compute=0.5/.test(document.querySelector('#whatif-line')?.textContent || ''));
  await page.fill('#whatif-edit', '--scale no.such.op=0.5');
  await page.click('#whatif-go');
  await page.waitForSelector('#whatif-result .error');
  assert.match(await page.textContent('#whatif-result .error'), /no op named "no.such.op"/);
  await page.screenshot({ path: path.join(shots, 'overview-whatif.png'), fullPage: true });
});

const GUIDE = 'cpu-guide-adam/plugins/profile/2026_11_25_03_32_42';

test('scopes page shows the host scopes nested, with the input work of an input-bound loop', async () => {
  const s = await api('scopes', { run: GUIDE });
  await open(`scopes?run=${encodeURIComponent(GUIDE)}`);
  await page.waitForSelector('table.data tbody tr');
  // Every scope, in the API's depth-first order, indented by depth, input ones tagged.
  const names = await page.$$eval('table.data tbody tr td:first-child span.scope-name', ss => ss.map(s => [s.firstChild.textContent, s.style.paddingLeft, !!s.querySelector('.tag')]));
  assert.deepEqual(names, s.scopes.map(r => [r.name, `${r.depth * 16}px`, r.input]));
  assert.deepEqual(await cellTexts(5), s.scopes.map(r => fmt.dur(r.per_step_ps)));
  const note = await page.textContent('.input-note');
  assert.ok(note.includes(fmt.dur(s.input.host_input_ps)) && note.includes(fmt.pct(s.input.device_idle_input_pct)), note);
  assert.ok(await page.$('.input-note.warn'), 'an input-bound loop is flagged');
  // The overview says it too, and links here.
  const b = (await api('summary', { run: GUIDE })).breakdown;
  await open(`overview?run=${encodeURIComponent(GUIDE)}`);
  const split = await page.textContent('#input-split');
  assert.ok(split.includes(`waiting on input ${fmt.dur(b.device_idle_input_ps)}`) && split.includes(fmt.dur(b.host_input_ps)), split);
  await page.click('#input-split a');
  await page.waitForSelector('.input-note');
  await page.screenshot({ path: path.join(shots, 'scopes.png'), fullPage: true });
});

test('source page draws device time by Python stack: click zooms, search sums the matches', async () => {
  const stacks = await api('ops', { run: CPU, by: 'stack', top: 'all' });
  const lines = await api('ops', { run: CPU, by: 'line', top: 'all' });
  await open(`source?run=${encodeURIComponent(CPU)}`);
  await page.waitForSelector('.flame-box');
  // The root holds all device time; the by-line table every line.
  const root = await page.$eval('.flame-box[data-name="device time"]', b => Number(b.dataset.value));
  assert.equal(root, stacks.op_time_ps);
  assert.deepEqual((await cellTexts(1)).sort(), lines.ops.map(r => r.name).sort());
  // Search: the share of the rows whose stack passes through a frame named like mlp.
  const want = stacks.ops.filter(r => (r.stack || []).some(f => f.function.includes('mlp'))).reduce((a, r) => a + r.self_ps, 0);
  assert.ok(want > 0);
  await page.fill('.flame-search', 'mlp');
  const info = await page.textContent('.flame-info');
  assert.ok(info.includes(fmt.dur(want)), `${info} vs ${fmt.dur(want)}`);
  assert.ok((await page.$$('.flame-box.match')).length > 0);
  await page.fill('.flame-search', '');
  // Click the widest frame below the root: it fills the width.
  const widest = await page.$$eval('.flame-box', bs => bs.filter(b => b.style.top === '18px')
    .sort((a, b) => parseFloat(b.style.width) - parseFloat(a.style.width))[0].dataset.name);
  const full = await page.$eval('.flame-boxes', b => parseFloat(b.style.width));
  await page.$$eval('.flame-box', (bs, name) => bs.find(b => b.style.top === '18px' && b.dataset.name === name).click(), widest);
  const w = await page.$eval('.flame-box.focus', b => parseFloat(b.style.width));
  assert.ok(w >= full - 2, `${w} of ${full}`);
  assert.ok((await page.textContent('.flame-info')).includes(`zoomed to ${widest}`));
  await page.screenshot({ path: path.join(shots, 'source.png'), fullPage: true });
});

test('roofline page draws each op under the device\'s roofs; a click opens its HLO', async () => {
  const GPU_NOCB = 'gpu-nocb/plugins/profile/2026_11_23_08_00_08';
  const r = await api('roofline', { run: GPU_NOCB, top: 'all' });
  await open(`roofline?run=${encodeURIComponent(GPU_NOCB)}`);
  await page.waitForSelector('svg.roofline circle.op');
  // The roofs line: the H100's data-sheet peaks, as the API gives them.
  const d = r.devices[0];
  const roofs = await page.textContent('p.roofs');
  assert.ok(roofs.includes('H100 SXM') && roofs.includes('(data sheet)') && roofs.includes(`ridge ${d.ridge_flops_per_byte.toFixed(0)} FLOP/byte`), roofs);
  // One point per op with an intensity and a rate, larger for more self time.
  const drawn = await page.$$eval('svg.roofline circle.op', cs => cs.map(c => [c.dataset.name, Number(c.getAttribute('r'))]));
  const want = r.ops.filter(o => o.arithmetic_intensity > 0 && o.flops_per_s > 0);
  assert.equal(drawn.length, want.length);
  assert.deepEqual(drawn.map(([n]) => n).sort(), want.map(o => o.name).sort());
  const radius = Object.fromEntries(drawn);
  const [big, small] = [want[0], want[want.length - 1]];
  assert.ok(big.self_ps > small.self_ps && radius[big.name] > radius[small.name]);
  // The headline roof and each compute-bound op's own flat roof.
  const peaks = await page.$$eval('svg.roofline g.roof', gs => gs.map(g => Number(g.dataset.peak)));
  const flats = new Set([d.peak_flops_per_s, ...want.filter(o => o.bound === 'compute').map(o => o.roof_flops_per_s)]);
  assert.deepEqual(peaks.sort((a, b) => a - b), [...flats].sort((a, b) => a - b));
  // Every op of the API in the table below.
  assert.equal((await cellTexts(1)).length, r.ops.length);
  await page.locator('.roofline-chart').screenshot({ path: path.join(shots, 'roofline.png') });
  // A real click on the smallest point (drawn last, on top) opens that op's HLO.
  await page.click(`svg.roofline circle.op[data-name="${small.name}"]`);
  await page.waitForSelector('#hlo-name');
  assert.equal(await page.textContent('#hlo-name'), small.name);
});

test('timeline: an area dragged from before the capture starts at the capture\'s first instant', async () => {
  const tl = await api('timeline/tracks', { run: CPU });
  await open(`timeline?run=${encodeURIComponent(CPU)}`);
  await page.waitForSelector('#tl-canvas');
  await page.waitForFunction(() => document.querySelector('#tl-range').dataset.startPs !== undefined);
  const r0 = await page.$eval('#tl-range', r => [Number(r.dataset.startPs), Number(r.dataset.endPs)]);
  assert.ok(r0[0] < tl.start_ps, 'the whole run is shown with a margin before it');
  const box = await page.$eval('#tl-canvas', c => { const r = c.getBoundingClientRect(); return { x: r.left, y: r.top, w: r.width }; });
  await page.mouse.move(box.x + 232, box.y + 8);
  await page.mouse.down();
  await page.mouse.move(box.x + 500, box.y + 8, { steps: 5 });
  await page.mouse.up();
  await page.waitForSelector('#tl-area');
  const [start, end] = await page.$eval('#tl-area', h => [Number(h.dataset.startPs), Number(h.dataset.endPs)]);
  assert.equal(start, tl.start_ps);
  assert.ok(end > start);
  const info = await page.$$eval('#tl-side table.kv tr', trs => Object.fromEntries(trs.map(tr => [tr.children[0].textContent, tr.children[1].textContent])));
  assert.ok(!info.span.startsWith('-') && !info.span.startsWith('−'), info.span);
  await page.keyboard.press('Escape');
});

test('roofline: a CPU capture\'s roofs given in the page are drawn and kept in its link', async () => {
  await open(`roofline?run=${encodeURIComponent(CPU)}`);
  await page.waitForSelector('#roofs-form');
  assert.match(await page.textContent('p.roofs'), /roofs unknown/);
  await page.fill('#roof-flops', '2T');
  await page.fill('#roof-bandwidth', '100G');
  await page.click('#roof-apply');
  await page.waitForFunction(() => location.hash.includes('peak_flops=2T') && location.hash.includes('peak_bandwidth=100G'));
  await page.waitForFunction(() => /yours/.test((document.querySelector('p.roofs') || {}).textContent || ''));
  const r = await api('roofline', { run: CPU, top: 'all', peak_flops: '2T', peak_bandwidth: '100G' });
  const d = r.devices[0];
  assert.equal(d.peak_flops_source, 'user');
  assert.equal(await page.textContent('p.roofs'),
    `${d.device}: peak 2 TFLOP/s (yours) · memory 100 GB/s (yours) · ridge ${d.ridge_flops_per_byte.toFixed(0)} FLOP/byte`);
  // The address alone opens the same roofs.
  const link = page.url();
  await page.goto('about:blank');
  await page.goto(link);
  await page.waitForFunction(() => /yours/.test((document.querySelector('p.roofs') || {}).textContent || ''));
  assert.equal(await page.$eval('#roof-flops', i => i.value), '2T');
});

test('timeline: a drag in the ruler selects a span and lists its events as the API counts them', async () => {
  await open(`timeline?run=${encodeURIComponent(CPU)}`);
  await page.waitForSelector('#tl-canvas');
  await page.waitForFunction(() => document.querySelector('#tl-range').dataset.startPs !== undefined);
  const box = await page.$eval('#tl-canvas', c => { const r = c.getBoundingClientRect(); return { x: r.left, y: r.top, w: r.width }; });
  // Real mouse input: press in the ruler, move, release.
  const y = box.y + 8, xa = box.x + 400, xb = box.x + 700;
  await page.mouse.move(xa, y);
  await page.mouse.down();
  await page.mouse.move(xa + 150, y, { steps: 5 });
  await page.mouse.move(xb, y, { steps: 5 });
  await page.mouse.up();
  await page.waitForSelector('#tl-area');
  // The span the page asked for: from the request it made.
  const heading = await page.textContent('#tl-area');
  const rows = await page.$$eval('table.area-rows tbody tr', trs => trs.map(tr => [...tr.children].map(td => td.textContent)));
  const info = await page.$$eval('#tl-side table.kv tr', trs => Object.fromEntries(trs.map(tr => [tr.children[0].textContent, tr.children[1].textContent])));
  const [a, b] = info.span.split(' – ');
  assert.ok(info.tracks.startsWith('all '), info.tracks);
  // The span the page asked for lies under the drag (within a pixel), and its
  // numbers equal the API's for that span.
  const [start, end] = await page.$eval('#tl-area', h => [Number(h.dataset.startPs), Number(h.dataset.endPs)]);
  const r0 = await page.$eval('#tl-range', r => [Number(r.dataset.startPs), Number(r.dataset.endPs)]);
  const pspx = (r0[1] - r0[0]) / (box.w - 230);
  assert.ok(Math.abs(start - (r0[0] + (xa - box.x - 230) * pspx)) <= 2 * pspx, `${start}`);
  assert.ok(Math.abs(end - (r0[0] + (xb - box.x - 230) * pspx)) <= 2 * pspx, `${end}`);
  const d = await api('timeline/select', { run: CPU, start_ps: start, end_ps: end });
  assert.equal(heading, `selection: ${fmt.dur(d.span_ps)}`);
  assert.equal(a, fmt.dur(d.start_ps));
  assert.equal(b, fmt.dur(d.end_ps));
  assert.equal(info.events, fmt.count(d.events));
  assert.ok(d.events > 0);
  assert.deepEqual(rows.map(r => [r[0], r[1]]), d.rows.slice(0, 500).map(r => [r.name, fmt.count(r.count)]));
  await page.screenshot({ path: path.join(shots, 'timeline-area.png') });
  // Escape clears it.
  await page.keyboard.press('Escape');
  assert.equal(await page.$('#tl-area'), null);

  // Shift+drag over the tracks selects the span on the tracks under the drag only.
  const layout = await page.evaluate(() => window.stepscopeTimeline.layout());
  const under = layout.filter(i => i.kind === 'track' && i.h > 30).slice(0, 2);
  assert.equal(under.length, 2, 'two tracks to drag across');
  const ya = box.y + 24 + under[0].y + 10, yb = box.y + 24 + under[1].y + 10;
  await page.keyboard.down('Shift');
  await page.mouse.move(xa, ya);
  await page.mouse.down();
  await page.mouse.move(xb, yb, { steps: 8 });
  await page.mouse.up();
  await page.keyboard.up('Shift');
  await page.waitForSelector('#tl-area');
  const ids = layout.filter(i => i.kind === 'track' && i.y + i.h > under[0].y + 10 && i.y < under[1].y + 10).map(i => i.track);
  const [s2, e2] = await page.$eval('#tl-area', h => [Number(h.dataset.startPs), Number(h.dataset.endPs)]);
  const d2 = await api('timeline/select', { run: CPU, start_ps: s2, end_ps: e2, tracks: ids.join(',') });
  const info2 = await page.$$eval('#tl-side table.kv tr', trs => Object.fromEntries(trs.map(tr => [tr.children[0].textContent, tr.children[1].textContent])));
  assert.equal(info2.tracks, String(ids.length));
  assert.equal(info2.events, fmt.count(d2.events));
  assert.ok(d2.events > 0 && d2.events < d.events, `${d2.events} of ${d.events}`);
  const rows2 = await page.$$eval('table.area-rows tbody tr', trs => trs.map(tr => [...tr.children].map(td => td.textContent)));
  assert.deepEqual(rows2.map(r => [r[0], r[1]]), d2.rows.slice(0, 500).map(r => [r.name, fmt.count(r.count)]));
  await page.keyboard.press('Escape');
});

test('at 1,024 px the header fits, the timeline keeps its width, and deep zoom keeps tick labels apart', async () => {
  await page.setViewportSize({ width: 1024, height: 768 });
  try {
    await open(`timeline?run=${encodeURIComponent(CPU)}`);
    await settle();
    // Every header link on screen, none over another.
    const links = await page.$$eval('header nav a, header .picker label', as => as.map(a => { const r = a.getBoundingClientRect(); return [r.left, r.right, r.top, r.bottom]; }));
    assert.ok(links.length > 10);
    for (const [l, r] of links) assert.ok(l >= 0 && r <= 1024, `${l}-${r}`);
    for (let i = 0; i < links.length; i++) for (let j = i + 1; j < links.length; j++) {
      const [a, b] = [links[i], links[j]];
      assert.ok(a[1] <= b[0] || b[1] <= a[0] || a[3] <= b[2] || b[3] <= a[2], `header items ${i} and ${j} overlap`);
    }
    // The side panel goes below: the events get the width less the track labels.
    const w = await page.$eval('#tl-canvas', c => c.getBoundingClientRect().width);
    assert.ok(w >= 1000, `canvas ${w} px`);
    const side = await page.$eval('#tl-side', e => { const r = e.getBoundingClientRect(); return [r.top, r.bottom]; });
    assert.ok(side[0] > 300 && side[1] <= 768 + 1, `the side panel is on screen: ${side}`);
    // Zoom far in at the pointer: tick labels stay distinct.
    await page.mouse.move(600, 400);
    for (let i = 0; i < 60; i++) await page.keyboard.press('w');
    await settle();
    const [a, b] = await timelineWindow();
    assert.ok(b - a < 1e6, `zoomed to ${b - a} ps`);
    const ticks = JSON.parse(await page.$eval('#tl-canvas', c => c.dataset.ticks));
    assert.ok(ticks.length >= 3, JSON.stringify(ticks));
    assert.equal(new Set(ticks).size, ticks.length, JSON.stringify(ticks));
    await page.screenshot({ path: path.join(shots, 'timeline-1024.png') });
    // A favicon.
    const icon = await page.$eval('link[rel=icon]', l => l.href);
    const r = await fetch(icon);
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('content-type'), 'image/svg+xml');
  } finally {
    await page.setViewportSize({ width: 1400, height: 900 });
  }
});

test('timeline search outlines its matches, steps through them in time order, and boxes show a tooltip on hover', async () => {
  const res = await api('timeline/search', { run: CPU, q: 'dot', limit: 10000 });
  const inTime = [...res.matches].sort((a, b) => a.start_ps - b.start_ps || a.track - b.track || a.index - b.index);
  // The pages the UI asks for are the same matches, in the same time order.
  const paged = await api('timeline/search', { run: CPU, q: 'dot', offset: 0, limit: 10000 });
  assert.deepEqual(paged.matches, inTime);
  assert.equal(paged.offset, 0);
  await open(`timeline?run=${encodeURIComponent(CPU)}`);
  await settle();
  await page.fill('#tl-search', 'dot');
  await page.press('#tl-search', 'Enter');
  await page.waitForSelector('#tl-results li');
  assert.equal(await page.textContent('#tl-hits'), `– / ${fmt.count(inTime.length)}`);
  await settle();
  assert.ok(Number(await page.$eval('#tl-canvas', c => c.dataset.highlighted)) > 0, 'matches are outlined');
  // Next, next, previous: the first and second matches in time, then the first again.
  for (const [button, k] of [['#tl-next', 0], ['#tl-next', 1], ['#tl-prev', 0]]) {
    await page.click(button);
    await page.waitForFunction(want => document.querySelector('#tl-hits').textContent.startsWith(want), `${k + 1} /`);
    await page.waitForFunction(name => (document.querySelector('#tl-event-name') || {}).textContent === name, inTime[k].name);
    const [a, b] = await timelineWindow();
    assert.ok(a <= inTime[k].start_ps && inTime[k].start_ps <= b, `match ${k} is in view`);
  }
  // Enter again steps on.
  await page.press('#tl-search', 'Enter');
  await page.waitForFunction(() => document.querySelector('#tl-hits').textContent.startsWith('2 /'));
  // Hover a box: its name in the tooltip.
  await settle();
  const box = (await page.evaluate(() => window.stepscopeTimeline.boxes())).find(b => b.count === 1 && b.w > 20);
  const c = await page.$eval('#tl-canvas', e => { const r = e.getBoundingClientRect(); return [r.left, r.top]; });
  await page.mouse.move(c[0] + box.x + box.w / 2, c[1] + box.y + box.h / 2);
  await page.waitForSelector('#tl-tip:not([hidden])');
  assert.equal(await page.textContent('#tl-tip strong'), box.name);
  await page.screenshot({ path: path.join(shots, 'timeline-hover.png') });
  await page.mouse.move(c[0] + 5, c[1] + 5);
  await page.waitForSelector('#tl-tip[hidden]', { state: 'attached' });
});

test('timeline: each box the page lists is drawn in its name\'s colour there, merged boxes lighter', async () => {
  // Read in the page: the pixel at the middle of each box with no label (36 px or less)
  // and of each merged box 1.5 px or wider, and the colour Chromium itself gives the hsl()
  // that dom.js's color() names for it.
  const look = () => page.evaluate(async () => {
    const { color } = await import(new URL('lib/dom.js', document.baseURI).href);
    const dpr = window.devicePixelRatio || 1;
    const g = document.querySelector('#tl-canvas').getContext('2d');
    const at = (x, y) => Array.from(g.getImageData(Math.floor(x * dpr), Math.floor(y * dpr), 1, 1).data).slice(0, 3).join();
    const probe = document.createElement('canvas').getContext('2d', { willReadFrequently: true });
    const expect = (name, light) => {
      probe.fillStyle = color(name, light);
      probe.fillRect(0, 0, 1, 1);
      return Array.from(probe.getImageData(0, 0, 1, 1).data).slice(0, 3).join();
    };
    const boxes = window.stepscopeTimeline.boxes().filter(b => b.x > 240);
    return {
      plain: boxes.filter(b => b.count === 1 && b.w >= 4 && b.w <= 36)
        .map(b => ({ name: b.name, got: at(b.x + b.w / 2, b.y + b.h / 2), want: expect(b.name, 0) })),
      merged: boxes.filter(b => b.count > 1 && b.w >= 1.5)
        .map(b => ({ name: b.name, got: at(b.x + b.w / 2, b.y + b.h / 2), want: expect(b.name, 14) })),
    };
  });
  const near = (a, b) => a.split(',').every((v, k) => Math.abs(v - b.split(',')[k]) <= 2);
  const st = await api('steps', { run: CPU });
  const s0 = st.steps[0];
  await open(`timeline?run=${encodeURIComponent(CPU)}&start_ps=${s0.start_ps}&end_ps=${s0.start_ps + s0.duration_ps}`);
  await settle();
  await page.waitForFunction(() => window.stepscopeTimeline.fresh());
  const { plain } = await look();
  assert.ok(plain.length >= 10, `${plain.length} unlabelled single boxes in step ${s0.step_num}`);
  for (const b of plain) assert.ok(near(b.got, b.want), `${b.name}: pixel ${b.got}, its colour ${b.want}`);
  // The whole run: events merge into boxes of a lighter fill (3 px or wider: striped).
  await open(`timeline?run=${encodeURIComponent(CPU)}`);
  await settle();
  await page.waitForFunction(() => window.stepscopeTimeline.fresh());
  const { merged } = await look();
  assert.ok(merged.length >= 10, `${merged.length} merged boxes 1.5 px or wider`);
  const stripe = c => c.split(',').map(v => Math.round(Number(v) + (255 - v) * 0.45)).join();
  for (const b of merged) assert.ok(near(b.got, b.want) || near(b.got, stripe(b.want)), `${b.name}: pixel ${b.got}, its colour ${b.want}`);
});

test('timeline: a kernel\'s flow from its host launch is drawn as an arrow and followed by a click', async () => {
  const run = await runIn('gpu-nocb');
  const tracks = await api('timeline/tracks', { run });
  const stream = tracks.tracks.find(t => t.plane === '/device:GPU:0' && t.line.startsWith('Stream #14'));
  // From the middle of the run on, the first kernel of 20 µs or more (a few pixels wide).
  let at = Math.floor(stream.events / 2), kernel;
  for (; at < stream.events; at++) {
    kernel = await api('timeline/event', { run, track: stream.id, index: at });
    if (kernel.duration_ps >= 20e6) break;
  }
  const launch = kernel.flows.find(f => f.direction === 'in');
  assert.ok(launch, `the kernel has a launch: ${JSON.stringify(kernel.flows)}`);
  // A window holding both the launch and the kernel.
  const a = Math.min(launch.start_ps, kernel.start_ps), b = Math.max(kernel.start_ps + kernel.duration_ps, launch.start_ps + launch.duration_ps);
  const pad = (b - a) * 0.3;
  await open(`timeline?run=${encodeURIComponent(run)}&start_ps=${Math.round(a - pad)}&end_ps=${Math.round(b + pad)}`);
  await settle();
  // Pin the kernel's and the launch's tracks to the top (filter to each, click its ⤒).
  const byId = new Map(tracks.tracks.map(t => [t.id, t]));
  const canvasAt = () => page.$eval('#tl-canvas', e => { const r = e.getBoundingClientRect(); return [r.left, r.top]; });
  for (const id of [launch.track, stream.id]) {
    await page.fill('#tl-filter', byId.get(id).line);
    const it = (await page.evaluate(() => window.stepscopeTimeline.layout())).find(i => i.kind === 'track' && i.track === id && !i.pinned);
    const c = await canvasAt();
    await page.mouse.click(c[0] + 230 - 27, c[1] + 24 + it.y + 8);
  }
  await page.fill('#tl-filter', '');
  await settle();
  const c = await canvasAt();
  const box = (await page.evaluate(() => window.stepscopeTimeline.events())).find(x => x.track === stream.id && x.index === at);
  assert.ok(box, 'the kernel is drawn');
  await page.mouse.click(c[0] + box.x + Math.max(1, box.w / 2), c[1] + box.y + box.h / 2);
  const shown = e => e.display_name || e.name;
  await page.screenshot({ path: path.join(shots, 'timeline-flow.png') });
  await page.waitForFunction(name => (document.querySelector('#tl-event-name') || {}).textContent === name, shown(kernel));
  const links = await page.$$eval('#tl-side ul.flows a', as => as.map(x => x.textContent));
  assert.ok(links.includes(`← ${launch.name} @ ${fmt.dur(launch.start_ps)}`), links.join(' | '));
  // The arrow ends at the kernel: its head, in the flow's red, just left of the box.
  const px = await page.evaluate(([x, y]) => {
    const dpr = window.devicePixelRatio || 1;
    const g = document.querySelector('#tl-canvas').getContext('2d');
    return Array.from(g.getImageData(Math.floor(x * dpr), Math.floor(y * dpr), 1, 1).data);
  }, [box.x - 3, box.y + box.h / 2]);
  assert.ok(px[0] > 150 && px[1] < 110 && px[2] < 110, `arrow head pixel ${px}`);
  // Following the flow selects the launch, which flows out to the kernel.
  await page.click(`#tl-side ul.flows a >> text=${launch.name}`);
  await page.waitForFunction(name => (document.querySelector('#tl-event-name') || {}).textContent === name, launch.name);
  const [w0, w1] = await timelineWindow();
  assert.ok(w0 <= launch.start_ps && launch.start_ps + launch.duration_ps <= w1, 'the launch is in view');
  const back = await page.$$eval('#tl-side ul.flows a', as => as.map(x => x.textContent));
  assert.ok(back.includes(`→ ${shown(kernel)} @ ${fmt.dur(kernel.start_ps)}`), back.join(' | '));
});

test('timeline: a Steps track and shading mark each step; clicking a step zooms to it', async () => {
  const st = (await api('steps', { run: CPU })).steps;
  await open(`timeline?run=${encodeURIComponent(CPU)}`);
  await settle();
  const boxes = await page.evaluate(() => window.stepscopeTimeline.steps());
  assert.deepEqual(boxes.map(b => b.step_num), st.map(s => s.step_num), 'every step of the run is in view at first');
  const b = boxes[3];
  const c = await page.$eval('#tl-canvas', e => { const r = e.getBoundingClientRect(); return [r.left, r.top]; });
  await page.mouse.click(c[0] + b.x + b.w / 2, c[1] + b.y + b.h / 2);
  await page.waitForSelector('#tl-step');
  assert.equal(await page.textContent('#tl-step'), `step ${st[3].step_num}`);
  const [a, e] = await timelineWindow();
  assert.ok(a <= st[3].start_ps && e >= st[3].start_ps + st[3].duration_ps, 'the step is in view');
  assert.ok(e - a < st[3].duration_ps * 1.2, 'and fills it');
  const info = await page.$$eval('#tl-side table.kv tr', trs => Object.fromEntries(trs.map(tr => [tr.children[0].textContent, tr.children[1].textContent])));
  assert.equal(info.duration, fmt.dur(st[3].duration_ps));
  assert.equal(info['device busy'], fmt.dur(st[3].device_busy_ps));
  await settle();
  await page.screenshot({ path: path.join(shots, 'timeline-steps.png') });
});

test('timeline tracks: filter, collapse all, hide, pin to top, a scrollbar and plane headers that stay on screen', async () => {
  const tracks = (await api('timeline/tracks', { run: TPU })).tracks;
  await open(`timeline?run=${encodeURIComponent(TPU)}`);
  await settle();
  const layout = () => page.evaluate(() => window.stepscopeTimeline.layout());
  const shownTracks = async () => (await layout()).filter(i => i.kind === 'track').map(i => i.track);
  assert.equal((await shownTracks()).length, tracks.length);
  // Filter: only the tracks whose host, plane or line holds the text.
  await page.fill('#tl-filter', 'xla ops');
  const want = tracks.filter(t => `${t.host} ${t.plane} ${t.line}`.toLowerCase().includes('xla ops')).map(t => t.id);
  assert.ok(want.length >= 4 && want.length < tracks.length);
  assert.deepEqual(await shownTracks(), want);
  await page.fill('#tl-filter', '');
  // Collapse all, then expand all.
  await page.click('#tl-fold');
  assert.deepEqual(await shownTracks(), []);
  assert.equal(await page.textContent('#tl-fold'), 'expand all');
  await page.click('#tl-fold');
  assert.equal((await shownTracks()).length, tracks.length);
  // Hide the first track with its ×, pin the second with its ⤒ (real clicks on the label column).
  // (The canvas moves when the toolbar wraps: its place is read before each click.)
  const canvasAt = () => page.$eval('#tl-canvas', e => { const r = e.getBoundingClientRect(); return [r.left, r.top]; });
  let c = await canvasAt();
  const at = async id => (await layout()).find(i => i.kind === 'track' && i.track === id);
  const [first, second] = (await shownTracks()).slice(0, 2);
  let it = await at(first);
  await page.mouse.click(c[0] + 230 - 8, c[1] + 24 + it.y + 8);
  assert.ok(!(await shownTracks()).includes(first), 'hidden');
  assert.equal(await page.textContent('#tl-unhide'), 'show 1 hidden');
  it = await at(second);
  c = await canvasAt();
  await page.mouse.click(c[0] + 230 - 27, c[1] + 24 + it.y + 8);
  const l = await layout();
  const firstTrack = l.find(i => i.kind === 'track');
  assert.ok(firstTrack.track === second && firstTrack.pinned, 'pinned to the top');
  assert.ok(l.some(i => i.kind === 'plane' && i.label === 'pinned (1)'));
  await page.click('#tl-unhide');
  assert.ok((await shownTracks()).includes(first));
  // The scrollbar: drag its thumb down; the plane header of the tracks at the top stays there.
  const th = await page.evaluate(() => window.stepscopeTimeline.thumb());
  assert.ok(th, 'the TPU capture\'s tracks overflow the window');
  c = await canvasAt();
  const w = await page.$eval('#tl-canvas', e => e.getBoundingClientRect().width);
  await page.mouse.move(c[0] + w - 4, c[1] + th[0] + th[1] / 2);
  await page.mouse.down();
  await page.mouse.move(c[0] + w - 4, c[1] + th[0] + th[1] / 2 + 300, { steps: 5 });
  await page.mouse.up();
  const view = await page.evaluate(() => window.stepscopeTimeline.view());
  assert.ok(view.scroll_y > 300, `scrolled ${view.scroll_y}`);
  const top = (await layout()).filter(i => i.kind === 'plane' && i.y < 0).pop();
  assert.equal(await page.evaluate(() => window.stepscopeTimeline.sticky()), top.label);
  await settle();
  await page.screenshot({ path: path.join(shots, 'timeline-tracks.png') });
});

test('timeline: counter tracks show each allocator\'s bytes in use; hovering reads the value then', async () => {
  const run = 'gpu-nocb/plugins/profile/2026_11_23_08_00_08';
  const mem = await api('memory', { run, top: 1 });
  const want = mem.allocators.filter(a => a.timeline.length > 1);
  assert.ok(want.length >= 1);
  await open(`timeline?run=${encodeURIComponent(run)}`);
  await settle();
  const counters = (await page.evaluate(() => window.stepscopeTimeline.layout())).filter(i => i.kind === 'counter');
  assert.deepEqual(counters.map(c => c.counter).sort(), want.map(a => a.name).sort());
  // The first counter drawn (a device's allocator sits in its device's group).
  const first = want.find(a => a.name === counters[0].counter);
  // Hover the middle of the first counter: the value in use at that time, by the API's points.
  const c = await page.$eval('#tl-canvas', e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.width]; });
  const x = 230 + (c[2] - 230) / 2;
  await page.mouse.move(c[0] + x, c[1] + 24 + counters[0].y + 12);
  await page.waitForSelector('#tl-tip:not([hidden])');
  const [a, b] = await timelineWindow();
  const t = a + (x - 230) * (b - a) / (c[2] - 230);
  const pts = first.timeline;
  const at = pts.filter(p => p.time_ps <= t).pop();
  const value = at ? at.in_use_bytes : first.first_in_use_bytes;
  assert.equal(await page.textContent('#tl-tip strong'), `${first.name}: ${fmt.bytes(value)} in use`);
  await page.screenshot({ path: path.join(shots, 'timeline-counters.png') });
});

test('timeline: a busy counter per device draws its share of time running ops; hovering reads the column\'s share', async () => {
  const run = 'gpu-nocb/plugins/profile/2026_11_23_08_00_08';
  const devices = await api('devices', { run });
  await open(`timeline?run=${encodeURIComponent(run)}`);
  await settle();
  const busy = (await page.evaluate(() => window.stepscopeTimeline.layout())).filter(i => i.kind === 'busy');
  assert.deepEqual(busy.map(b => b.device), devices.devices.map(d => `${d.host}${d.device}`));
  const data = await page.evaluate(d => window.stepscopeTimeline.busy(d), busy[0].device);
  assert.ok(data && data.busy_pct.length > 100, 'the page fetched the busy share');
  // The columns the page drew add up to the device's busy time (its ops lie inside the
  // window the page asked for).
  const busyPs = data.busy_pct.reduce((a, v) => a + v, 0) / 100 * data.ps_per_px;
  assert.ok(Math.abs(busyPs - devices.devices[0].busy_ps) / devices.devices[0].busy_ps < 0.01, `${busyPs} vs ${devices.devices[0].busy_ps}`);
  // Hover the middle of the counter: the share of the column under the pointer.
  const c = await page.$eval('#tl-canvas', e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.width]; });
  const x = 230 + (c[2] - 230) / 2;
  await page.mouse.move(c[0] + x, c[1] + 24 + busy[0].y + 12);
  await page.waitForSelector('#tl-tip:not([hidden])');
  const [a, b] = await timelineWindow();
  const t = a + (x - 230) * (b - a) / (c[2] - 230);
  const k = Math.floor((t - data.start_ps) / data.ps_per_px);
  const text = await page.textContent('#tl-tip strong');
  assert.equal(text, `${devices.devices[0].device} busy: ${data.busy_pct[k].toFixed(1)}%`);
  await page.screenshot({ path: path.join(shots, 'timeline-busy.png') });
});

test('timeline: a slow step beside a median one of the same run, from the step-jitter finding, aligned at their starts', async () => {
  const adv = await api('advise', { run: CPU });
  assert.ok(adv.findings.some(f => f.rule === 'step-jitter'));
  const st = (await api('steps', { run: CPU })).steps;
  const byTime = st.slice().sort((x, y) => x.duration_ps - y.duration_ps);
  const slow = byTime[byTime.length - 1], median = byTime[Math.floor((byTime.length - 1) / 2)];
  await open(`overview?run=${encodeURIComponent(CPU)}`);
  await page.waitForSelector('#compare-slow-median');
  await page.click('#compare-slow-median');
  await page.waitForSelector('#tl-canvas-b');
  await page.waitForFunction(() => window.stepscopeTimelineB && !window.stepscopeTimelineB.pending() && !window.stepscopeTimeline.pending());
  assert.match(await page.textContent('#tl-compare'), new RegExp(`step ${slow.step_num} of A aligned with step ${median.step_num} of B, at their starts`));
  assert.equal(await page.$eval('#tl-step-a', s => s.value), String(slow.step_num));
  assert.equal(await page.$eval('#tl-step-b', s => s.value), String(median.step_num));
  const [va, vb] = await page.evaluate(() => [window.stepscopeTimeline.view(), window.stepscopeTimelineB.view()]);
  assert.ok(Math.abs((va.start_ps - slow.start_ps) - (vb.start_ps - median.start_ps)) < 2, JSON.stringify([va, vb]));
  // The steps' boxes start at one x.
  const boxA = (await page.evaluate(() => window.stepscopeTimeline.steps())).find(b => b.step_num === slow.step_num);
  const boxB = (await page.evaluate(() => window.stepscopeTimelineB.steps())).find(b => b.step_num === median.step_num);
  assert.ok(Math.abs(boxA.x - boxB.x) <= 1, `${boxA.x} vs ${boxB.x}`);
  // Pane B takes another step on its own: pane A keeps its step.
  const other = st.find(s => s.step_num !== slow.step_num && s.step_num !== median.step_num);
  await page.selectOption('#tl-step-b', String(other.step_num));
  await page.waitForFunction(n => (document.querySelector('#tl-compare') || {}).textContent?.includes(`with step ${n} of B`), other.step_num);
  assert.equal(await page.$eval('#tl-step-a', s => s.value), String(slow.step_num));
  await page.screenshot({ path: path.join(shots, 'timeline-slow-vs-median.png') });
  await page.click('#tl-compare-close');
  await page.waitForFunction(() => !document.querySelector('#tl-canvas-b'));
});

test('timeline: two runs one above the other, aligned at a step, move together', async () => {
  const A = 'cpu-guide-adam/plugins/profile/2026_11_25_03_32_42';
  const B = 'cpu-guide-sgd/plugins/profile/2026_11_25_03_32_46';
  const [sa, sb] = [(await api('steps', { run: A })).steps, (await api('steps', { run: B })).steps];
  await open(`timeline?run=${encodeURIComponent(A)}`);
  await settle();
  await page.selectOption('#tl-vs', B);
  await page.waitForSelector('#tl-canvas-b');
  await page.waitForFunction(() => window.stepscopeTimelineB && !window.stepscopeTimelineB.pending() && !window.stepscopeTimeline.pending());
  // Aligned at the first step number both runs have.
  const first = sa.find(s => sb.some(t => t.step_num === s.step_num));
  assert.match(await page.textContent('#tl-compare'), new RegExp(`aligned at the start of step ${first.step_num}`));
  const offA = first.start_ps, offB = sb.find(t => t.step_num === first.step_num).start_ps;
  const views = () => page.evaluate(() => [window.stepscopeTimeline.view(), window.stepscopeTimelineB.view()]);
  let [va, vb] = await views();
  assert.ok(Math.abs((vb.start_ps - offB) - (va.start_ps - offA)) < 2, JSON.stringify([va, vb]));
  // The aligned step's box starts at the same x in both panes.
  const boxA = (await page.evaluate(() => window.stepscopeTimeline.steps())).find(b => b.step_num === first.step_num);
  const boxB = (await page.evaluate(() => window.stepscopeTimelineB.steps())).find(b => b.step_num === first.step_num);
  assert.ok(Math.abs(boxA.x - boxB.x) <= 1, `${boxA.x} vs ${boxB.x}`);
  // Zoom with W over pane B: both zoom, still aligned.
  const rb = await page.$eval('#tl-canvas-b', e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; });
  await page.mouse.move(rb[0] + 400, rb[1] + rb[3] / 2);
  for (let i = 0; i < 3; i++) await page.keyboard.press('w');
  const [va2, vb2] = await views();
  assert.ok(va2.end_ps - va2.start_ps < 0.6 * (va.end_ps - va.start_ps), 'pane A zoomed with pane B');
  assert.ok(Math.abs((vb2.start_ps - offB) - (va2.start_ps - offA)) < 2 && Math.abs((vb2.end_ps - offB) - (va2.end_ps - offA)) < 2);
  // An event of pane B opens in pane B's panel, from run B. (Read once the pane has
  // drawn the tiles of this view: on a busy machine a redraw could move the boxes
  // between the read and the click.)
  // A click that a late redraw sent past its box is made again, as a user would.
  let ev = null;
  for (let attempt = 0; attempt < 3 && !ev; attempt++) {
    await page.waitForFunction(() => !window.stepscopeTimelineB.pending() && window.stepscopeTimelineB.fresh());
    await page.waitForTimeout(100);
    await page.waitForFunction(() => !window.stepscopeTimelineB.pending() && window.stepscopeTimelineB.fresh());
    await page.waitForFunction(() => window.stepscopeTimelineB.events().some(b => b.w > 4 && b.y > 40));
    const at = (await page.evaluate(() => window.stepscopeTimelineB.events())).find(b => b.w > 4 && b.y > 40);
    await page.mouse.click(rb[0] + at.x + at.w / 2, rb[1] + at.y + at.h / 2);
    const opened = await page.waitForSelector('#tl-side-b table.kv', { timeout: 10000 }).then(() => true, () => false);
    if (opened) ev = at;
  }
  assert.ok(ev, 'an event of pane B opened in its panel');
  assert.ok((await page.textContent('#tl-side-b')).includes(ev.name));
  await page.screenshot({ path: path.join(shots, 'timeline-compare.png') });
  // Aligned at another step: its boxes start at the same x.
  const other = sa.filter(s => sb.some(t => t.step_num === s.step_num))[2];
  await page.selectOption('#tl-align', String(other.step_num));
  await page.waitForFunction(n => (document.querySelector('#tl-compare') || {}).textContent?.includes(`aligned at the start of step ${n}`), other.step_num);
  // Once both panes are drawn again, the step's boxes line up.
  await page.waitForFunction(n => {
    const [a, b] = [window.stepscopeTimeline, window.stepscopeTimelineB].map(t => t && t.steps().find(x => x.step_num === n));
    return a && b && Math.abs(a.x - b.x) <= 1;
  }, other.step_num);
  await page.click('#tl-compare-close');
  await page.waitForFunction(() => !document.querySelector('#tl-canvas-b'));
});

test('a GPU that only copied is named and left out; a capture without steps shows no step time', async () => {
  // rocm-mi300x-conv-2gpu: GPU 0 ran only copies, GPU 7 the convolution; no steps.
  const run = await runIn('rocm-mi300x-conv-2gpu');
  const d = await api('devices', { run });
  assert.equal(d.left_out.length, 1, JSON.stringify(d.left_out));
  await open(`devices?run=${encodeURIComponent(run)}`);
  await page.waitForSelector('#dev-left-out');
  const note = await page.textContent('#dev-left-out');
  const l = d.left_out[0];
  assert.equal(note, `left out: ${l.host} ${l.device} (${fmt.count(l.op_count)} ops, ${fmt.dur(l.busy_ps)}), which ran only copies (no compute, no collective)`);
  const c = await cards('#dev-cards');
  assert.equal(c.utilisation, fmt.pct(d.all.utilization_pct));
  const rows = await page.$$eval('#dev-table table.data tbody tr', trs => trs.map(tr => [...tr.children].map(td => td.textContent)));
  const idle = rows.find(r => r.includes(l.device));
  assert.equal(idle[idle.length - 1], 'no work', idle.join('|'));
  const s = await api('summary', { run });
  assert.equal(s.step_count, 0);
  await open(`overview?run=${encodeURIComponent(run)}`);
  await page.waitForSelector('.cards .card');
  const o = await cards('.cards');
  assert.equal(o['mean step'], '—');
  assert.equal(o['device utilisation'], fmt.pct(s.device_utilization_pct));
  const sub = await page.$$eval('.cards .card', cs => cs.map(c => c.querySelector('.sub').textContent).find(t => t.startsWith('busy share')));
  assert.equal(sub, `busy share of each device’s own span (no steps); computing ${fmt.pct(s.device_compute_pct)}; left out: ${l.device} (only copies)`);
});

test('a loop that dispatches ahead is timed on its device, and the pages say so', async () => {
  const run = await runIn('cpu-nosync');
  const [s, st] = await Promise.all([api('summary', { run }), api('steps', { run })]);
  assert.equal(s.step_timing, 'device');
  assert.equal(st.timing, 'device');
  await open(`overview?run=${encodeURIComponent(run)}`);
  const note = await page.$eval('#step-timing', e => e.textContent);
  assert.ok(note.includes(`device step ${fmt.dur(s.step_time.median_ps)}`), note);
  assert.ok(note.includes(`host dispatch ${fmt.dur(s.host_step_time.median_ps)}`), note);
  assert.ok(!note.includes('sets the pace'), note);
  assert.equal((await cards('.cards'))['median step'], fmt.dur(s.step_time.median_ps));
  // A small model's dispatch takes as long as its work: the page says who waits, as the CLI does.
  const paced = await runIn('gpu-async');
  await open(`overview?run=${encodeURIComponent(paced)}`);
  const pacedNote = await page.$eval('#step-timing', e => e.textContent);
  assert.ok(pacedNote.includes('the device waits for the host, which sets the pace'), pacedNote);
  await open(`steps?run=${encodeURIComponent(run)}`);
  await page.waitForSelector('table.data tbody tr');
  assert.ok((await page.$eval('#steps-timing', e => e.textContent)).includes('timed on the device'));
  const heads = await page.$$eval('table.data thead th', th => th.map(t => t.textContent.trim().toLowerCase()));
  const at = name => heads.findIndex(h => h.startsWith(name)) + 1;
  assert.ok(at('dispatch') > 0 && at('launched') > 0, heads.join('|'));
  // Rows sorted by step: each shows its device step, its dispatch and its work.
  const byNum = [...st.steps].sort((a, b) => a.step_num - b.step_num);
  assert.deepEqual(await cellTexts(at('dispatch')), byNum.map(r => fmt.dur(r.host_duration_ps)));
  assert.deepEqual(await cellTexts(at('launched')), byNum.map(r => fmt.dur(r.device_work_ps)));
});

test('history page charts the runs\' median step in capture order and names the first that moved', async () => {
  const h = await api('history', { under: 'cpu-guide' });
  assert.ok(h.runs.length >= 3, JSON.stringify(h.runs.map(r => r.run)));
  const captured = h.runs.map(r => r.captured);
  assert.deepEqual(captured, captured.slice().sort(), 'capture order');
  await open('history?under=cpu-guide');
  await page.waitForSelector('#history-table table.data tbody tr');
  assert.equal(await page.inputValue('#history-under'), 'cpu-guide');
  // Names longer than 50 characters are cut in their middle, whole in the cell's tooltip.
  assert.deepEqual(await tableCells('#history-table', 3), h.runs.map(r => fmt.elideMiddle(r.run, 50)));
  assert.deepEqual(await page.$$eval('#history-table table.data tbody tr td:nth-child(3)', tds => tds.map(t => t.title)), h.runs.map(r => r.run));
  assert.deepEqual(await tableCells('#history-table', 5), h.runs.map(r => fmt.dur(r.step_time.median_ps)));
  // One point a run; the change point, where there is one, in red, and linked to its diff.
  assert.equal(await page.locator('#history-trend circle').count(), h.runs.length);
  const red = await page.locator('#history-trend circle.changed').count();
  const change = await page.textContent('#history-change');
  if (h.change) {
    assert.equal(red, 1);
    assert.ok(change.includes(h.change.run) && change.includes(fmt.dur(h.change.step_time.noise_ps)), change);
    const href = await page.getAttribute('#history-change a', 'href');
    const q = new URLSearchParams(href.split('?')[1]);
    assert.deepEqual([q.get('a'), q.get('b')], [h.change.previous, h.change.run]);
  } else {
    assert.equal(red, 0);
    assert.match(change, /no run moved/);
  }
  await page.screenshot({ path: path.join(shots, 'history.png'), fullPage: true });
  // A prefix no run has is a one-line error with the fix.
  await open('history?under=nope');
  await page.waitForSelector('.error');
  assert.match(await page.textContent('.error p'), /no run's name starts with "nope"/);
});

test('SQL page runs the query in its address on the run shown, and says what is wrong with a bad one', async () => {
  const q = 'SELECT module, name, count, self_ps FROM ops ORDER BY self_ps DESC, name LIMIT 7';
  const r = await api('sql', { q, run: CPU });
  assert.equal(r.rows.length, 7);
  await open(`sql?run=${encodeURIComponent(CPU)}&q=${encodeURIComponent(q)}`);
  await page.waitForSelector('#sql-result table.data tbody tr');
  assert.equal(await page.inputValue('#sql-query'), q);
  // The query's own row order; each column as the API answered.
  assert.deepEqual(await tableCells('#sql-result', 1), r.rows.map((_, i) => String(i + 1)));
  assert.deepEqual(await tableCells('#sql-result', 3), r.rows.map(row => row[1]));
  assert.deepEqual(await tableCells('#sql-result', 5), r.rows.map(row => String(row[3])));
  assert.match(await page.textContent('#sql-status'), /^7 row\(s\)/);
  await page.screenshot({ path: path.join(shots, 'sql.png'), fullPage: true });
  // A query that would write: refused, the server's one line shown, no table.
  await page.fill('#sql-query', 'DELETE FROM ops');
  await page.press('#sql-query', 'Control+Enter');
  await page.waitForSelector('#sql-error:not([hidden])');
  assert.match(await page.textContent('#sql-error'), /read-only/);
  assert.equal(await page.locator('#sql-result table').count(), 0);
  // Every served run: the address keeps the query and the choice, for a link.
  const all = 'SELECT count(DISTINCT run) AS runs FROM steps';
  await page.fill('#sql-query', all);
  await page.check('#sql-all');
  await page.click('#sql-run');
  await page.waitForSelector('#sql-result table.data tbody tr');
  const runs = (await api('runs')).length;
  const counted = Number((await tableCells('#sql-result', 2))[0]);
  assert.ok(counted > 1 && counted <= runs, `${counted} of ${runs}`);
  const hash = new URLSearchParams(page.url().split('?')[1]);
  assert.equal(hash.get('q'), all);
  assert.equal(hash.get('all'), '1');
});

test('a timeline link with a window that is not a number opens on the whole run', async () => {
  const tr = await api('timeline/tracks', { run: CPU });
  await open(`timeline?run=${encodeURIComponent(CPU)}&start_ps=abc&end_ps=`);
  await settle();
  const [a, b] = await timelineWindow();
  assert.ok(Number.isFinite(a) && Number.isFinite(b) && b > a, `${a} ${b}`);
  assert.ok(a <= tr.start_ps && b >= tr.end_ps, `${a}..${b} holds ${tr.start_ps}..${tr.end_ps}`);
  assert.ok((await page.evaluate(() => window.stepscopeTimeline.events())).length > 0);
});

test('a table of 2,000 rows keeps only the rows in view in the DOM, and scrolling and sorting reach every row', async () => {
  // A real run's steps, repeated to 2,000 (no bundled capture has that many).
  const real = await api('steps', { run: CPU });
  const first = real.steps[0];
  const steps = Array.from({ length: 2000 }, (_, i) => ({
    ...real.steps[i % real.steps.length], step_num: i, start_ps: first.start_ps + i * first.duration_ps,
  }));
  await page.route(/\/api\/steps\?/, route => route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify({ ...real, steps }) }));
  try {
    await open(`steps?run=${encodeURIComponent(CPU)}`);
    await page.waitForSelector('.tablewrap.virtual table.data tbody tr:not(.spacer)');
    const rendered = async () => page.$$eval('table.data tbody tr:not(.spacer) td:first-child', tds => tds.map(t => Number(t.textContent)));
    const top = await rendered();
    assert.ok(top.length > 10 && top.length < 300, `${top.length} rows in the DOM`);
    assert.deepEqual(top, top.map((_, i) => i), 'the first rows, in step order');
    assert.equal(await page.textContent('.rowcount'), '2,000 rows');
    assert.ok((await page.textContent('#steps-timing')).startsWith('2,000 steps, found from'));
    // The last row, by scrolling to the end.
    await page.$eval('.tablewrap.virtual', w => { w.scrollTop = w.scrollHeight; });
    await page.waitForFunction(() => [...document.querySelectorAll('table.data tbody tr:not(.spacer) td:first-child')].some(td => td.textContent === '1999'));
    assert.ok((await rendered()).length < 300);
    // Sorted the other way, from the top: step 1,999 first.
    await page.$eval('.tablewrap.virtual', w => { w.scrollTop = 0; });
    await page.click('table.data th[data-key="step_num"]');
    await page.waitForFunction(() => document.querySelector('table.data tbody tr:not(.spacer) td').textContent === '1999');
    // The filter narrows the rows; a short result is drawn whole.
    await page.fill('.filter', 'no such step name');
    await page.waitForFunction(() => document.querySelector('.rowcount').textContent === '0 of 2,000 rows');
    assert.equal(await page.$('.tablewrap.virtual'), null);
    await page.screenshot({ path: path.join(shots, 'steps-2000.png') });
  } finally {
    await page.unroute(/\/api\/steps\?/);
  }
});

test('a capture written into the served folder shows up in the run picker without a reload', async () => {
  const root = mkdtempSync(path.join(tmpdir(), 'stepscope-runs-'));
  const [proc, url] = await startServer(root);
  try {
    await page.goto('about:blank');
    await page.goto(url);
    await page.waitForFunction(() => document.getElementById('view').textContent.includes('no profile found'));
    // The first capture arrives: the page renders it.
    cpSync(path.join(repo, 'tests/fixtures/cpu-clean'), path.join(root, 'clean'), { recursive: true });
    await page.evaluate(() => window.stepscopePollRuns());
    await page.waitForSelector('.cards .card');
    // A second one: the picker lists it (newest first), the page shown stays.
    cpSync(path.join(repo, 'tests/fixtures/cpu-slow'), path.join(root, 'slow'), { recursive: true });
    await page.evaluate(() => window.stepscopePollRuns());
    await page.waitForFunction(() => document.querySelectorAll('#run option').length === 2);
    const options = await page.$$eval('#run option', os => os.map(o => [o.value, o.textContent, o.title]));
    const runs = await (await fetch(new URL('api/runs', url))).json();
    assert.deepEqual(options.map(o => o[0]).sort(), runs.map(r => r.run).sort());
    // Labels leave out plugins/profile/, keeping the capture time that tells runs apart.
    for (const [value, label, title] of options) {
      assert.equal(title, value);
      assert.equal(label, value.replace('/plugins/profile/', '/'));
      assert.match(label, /\/\d{4}_\d\d_\d\d_\d\d_\d\d_\d\d$/);
    }
    assert.ok(await page.$('.cards .card'), 'the page shown stayed');
  } finally {
    proc.kill();
    rmSync(root, { recursive: true, force: true });
  }
});

test('a timeline link keeps the view: window, scroll, pins, hidden and folded tracks, filter, search and the selected event', async () => {
  const st = await api('steps', { run: CPU });
  const step = st.steps[1];
  await open(`timeline?run=${encodeURIComponent(CPU)}&start_ps=${step.start_ps}&end_ps=${step.start_ps + step.duration_ps}`);
  await settle();
  const layout = () => page.evaluate(() => window.stepscopeTimeline.layout());
  const box = await page.$eval('#tl-canvas', c => { const r = c.getBoundingClientRect(); return { x: r.left, y: r.top }; });
  const AXIS = 24;
  const tracks = (await layout()).filter(i => i.kind === 'track' && i.h > 20);
  assert.ok(tracks.length >= 3, `${tracks.length} tracks`);
  // Pin the second track, hide the third: the two glyphs at the right end of a track's
  // label (230 px wide; pin from 196 px, hide from 215 px).
  const pinAt = t => ({ x: box.x + 200, y: box.y + AXIS + t.y + 8 });
  const hideAt = t => ({ x: box.x + 222, y: box.y + AXIS + t.y + 8 });
  const [toPin, toHide] = [tracks[1].track, tracks[2].track];
  let p = pinAt(tracks[1]);
  await page.mouse.click(p.x, p.y);
  await settle();
  const hideTarget = (await layout()).find(i => i.kind === 'track' && i.track === toHide && !i.pinned);
  p = hideAt(hideTarget);
  await page.mouse.click(p.x, p.y);
  await settle();
  let now = await layout();
  assert.ok(now.some(i => i.track === toPin && i.pinned), 'pinned');
  assert.ok(!now.some(i => i.track === toHide), 'hidden');
  // Fold the last plane (its tracks go), and filter the tracks by the host's name.
  const planes = (await layout()).filter(i => i.kind === 'plane' && !i.label.startsWith('pinned') && i.y > 0);
  const fold = planes[planes.length - 1];
  await page.mouse.click(box.x + 40, box.y + AXIS + fold.y + 5);
  await settle();
  const folded = await layout();
  assert.ok(folded.length < now.length, `${folded.length} items after folding ${fold.label}, ${now.length} before`);
  await page.fill('#tl-filter', 'vm');
  await settle();
  // Select the widest event drawn, and search.
  const events = await page.evaluate(() => window.stepscopeTimeline.events());
  const ev = events.filter(e => e.w > 8).sort((x, y) => y.w - x.w)[0];
  await page.fill('#tl-search', 'dot');
  await page.press('#tl-search', 'Enter');
  await page.waitForSelector('#tl-results li');
  await page.mouse.click(box.x + ev.x + Math.min(ev.w / 2, 20), box.y + ev.y + ev.h / 2);
  const expect = await api('timeline/event', { run: CPU, track: ev.track, index: ev.index });
  await page.waitForFunction(name => (document.querySelector('#tl-event-name') || {}).textContent === name, expect.display_name);
  // The address says all of it once the page has written it (a moment after the last change).
  await page.waitForFunction(t => new URLSearchParams(location.hash.split('?')[1]).get('event') === t, `${ev.track}:${ev.index}`);
  const link = page.url();
  const q = new URLSearchParams(link.split('?')[1]);
  assert.equal(q.get('q'), 'dot');
  assert.equal(q.get('pins'), String(toPin));
  assert.equal(q.get('hidden'), String(toHide));
  const view = await page.evaluate(() => window.stepscopeTimeline.view());

  // The link, opened anew, shows the same.
  await page.goto('about:blank');
  await page.goto(link);
  await page.waitForLoadState('networkidle');
  await settle();
  await page.waitForFunction(name => (document.querySelector('#tl-event-name') || {}).textContent === name, expect.display_name);
  const again = await page.evaluate(() => window.stepscopeTimeline.view());
  assert.ok(Math.abs(again.start_ps - view.start_ps) <= 1 && Math.abs(again.end_ps - view.end_ps) <= 1, JSON.stringify([view, again]));
  now = await layout();
  assert.ok(now.some(i => i.track === toPin && i.pinned), 'pinned after the link');
  assert.ok(!now.some(i => i.track === toHide), 'hidden after the link');
  assert.equal(await page.inputValue('#tl-search'), 'dot');
  assert.equal(await page.inputValue('#tl-filter'), 'vm');
  assert.deepEqual(now.map(i => [i.kind, i.label, i.track]), folded.map(i => [i.kind, i.label, i.track]), 'the same tracks, folded alike');
  assert.match(await page.textContent('#tl-hits'), /\/ /);
  // Escape clears the event, and the address forgets it.
  await page.keyboard.press('Escape');
  await page.waitForFunction(() => !new URLSearchParams(location.hash.split('?')[1]).get('event'));
});

test('on an 8-GPU run each device\'s counters sit in its group, fold with it and follow the track filter', async () => {
  const run = 'rocm-mi300x-conv-8gpu';
  const tr = await api('timeline/tracks', { run });
  const devices = [...new Set(tr.tracks.filter(t => t.plane.startsWith('/device:GPU:')).map(t => t.plane))];
  assert.equal(devices.length, 8);
  await open(`timeline?run=${run}`);
  await settle();
  const layout = () => page.evaluate(() => window.stepscopeTimeline.layout());
  let items = await layout();
  // The first slice track is on the first screen, under its device's header and counters.
  const firstTrack = items.find(i => i.kind === 'track');
  assert.ok(firstTrack.y < 200, `first track at y=${firstTrack.y}`);
  for (const [k, plane] of devices.entries()) {
    const h = items.findIndex(i => i.kind === 'plane' && i.label.endsWith(` · ${plane}`));
    assert.ok(h >= 0, plane);
    const next = items.slice(h + 1).findIndex(i => i.kind === 'plane');
    const group = items.slice(h + 1, next < 0 ? undefined : h + 1 + next);
    const busy = group.filter(i => i.kind === 'busy').map(i => i.device);
    const mem = group.filter(i => i.kind === 'counter').map(i => i.counter);
    assert.deepEqual(busy, [`tw003${plane}`], `${plane}: its busy share`);
    assert.deepEqual(mem, [`GPU_${k}_bfc`], `${plane}: its allocator`);
    assert.equal(group[0].kind === 'busy' || group[0].kind === 'counter', true, 'counters before its tracks');
  }
  // No device counter is left above the groups.
  const firstPlane = items.findIndex(i => i.kind === 'plane');
  assert.deepEqual(items.slice(0, firstPlane).filter(i => i.kind === 'busy' || (i.kind === 'counter' && /^GPU_/.test(i.counter))), []);
  await page.screenshot({ path: path.join(shots, 'timeline-8gpu.png') });
  // Collapse all: the counters fold with their groups.
  await page.click('#tl-fold');
  await settle();
  items = await layout();
  assert.deepEqual(items.filter(i => i.kind === 'busy' || (i.kind === 'counter' && /^GPU_/.test(i.counter))), []);
  await page.click('#tl-fold');
  // The track filter keeps one device's group, its counters with it.
  await page.fill('#tl-filter', 'GPU:3');
  await settle();
  items = await layout();
  assert.deepEqual(items.filter(i => i.kind === 'plane').map(i => i.label), ['tw003 · /device:GPU:3']);
  assert.deepEqual(items.filter(i => i.kind === 'busy').map(i => i.device), ['tw003/device:GPU:3']);
  assert.deepEqual(items.filter(i => i.kind === 'counter').map(i => i.counter), ['GPU_3_bfc']);
});

test('box labels are black or white, whichever reaches WCAG\'s 4.5:1 on the box\'s colour', async () => {
  const dom = await import('data:text/javascript,' + encodeURIComponent(readFileSync(path.join(repo, 'web/lib/dom.js'), 'utf8')));
  // Every name of a real run's ops, and enough made-up ones to cover every hue.
  const ops = (await api('ops', { run: CPU, top: 'all' })).ops.map(o => o.name);
  const names = [...ops, ...Array.from({ length: 5000 }, (_, i) => `op.${i}`)];
  let worst = Infinity;
  for (const n of names) {
    for (const light of [0, 14]) {
      const box = dom.colorRgb(n, light);
      const ink = dom.inkOn(box) === '#000' ? [0, 0, 0] : [255, 255, 255];
      worst = Math.min(worst, dom.contrast(box, ink));
    }
  }
  assert.ok(worst >= 4.5, `lowest contrast ${worst.toFixed(2)}:1`);
  // The contrast of #111 text, as drawn before, on the same boxes: below 4.5 for some.
  const before = Math.min(...names.map(n => dom.contrast(dom.colorRgb(n), [17, 17, 17])));
  assert.ok(before < 4.5, `#111 text reached ${before.toFixed(2)}:1`);
});

test('a wheel scroll hides the tooltip of the box that was under the pointer', async () => {
  const st = await api('steps', { run: CPU });
  await open(`timeline?run=${encodeURIComponent(CPU)}&start_ps=${st.steps[0].start_ps}&end_ps=${st.steps[0].start_ps + st.steps[0].duration_ps}`);
  await settle();
  const ev = (await page.evaluate(() => window.stepscopeTimeline.events())).filter(e => e.w > 8)[0];
  const box = await page.$eval('#tl-canvas', c => { const r = c.getBoundingClientRect(); return [r.left, r.top]; });
  await page.mouse.move(box[0] + ev.x + Math.min(ev.w / 2, 10), box[1] + ev.y + ev.h / 2);
  await page.waitForSelector('#tl-tip:not([hidden])');
  await page.mouse.wheel(0, 200);
  await page.waitForSelector('#tl-tip', { state: 'hidden' });
});

test('in two runs one above the other, a click on a step aligns the panes at it', async () => {
  const A = 'cpu-guide-adam/plugins/profile/2026_11_25_03_32_42';
  const B = 'cpu-guide-sgd/plugins/profile/2026_11_25_03_32_46';
  await open(`timeline?run=${encodeURIComponent(A)}&vs=${encodeURIComponent(B)}`);
  await page.waitForSelector('#tl-canvas-b');
  await page.waitForFunction(() => window.stepscopeTimelineB && !window.stepscopeTimelineB.pending() && !window.stepscopeTimeline.pending());
  const stepsA = await page.evaluate(() => window.stepscopeTimeline.steps());
  const sb = (await api('steps', { run: B })).steps.map(s => s.step_num);
  const now = Number((await page.textContent('#tl-compare')).match(/aligned at the start of step (\d+)/)[1]);
  const target = stepsA.find(b => b.step_num !== now && sb.includes(b.step_num) && b.w > 6);
  assert.ok(target, JSON.stringify(stepsA));
  const box = await page.$eval('#tl-canvas', c => { const r = c.getBoundingClientRect(); return [r.left, r.top]; });
  await page.mouse.click(box[0] + target.x + target.w / 2, box[1] + target.y + target.h / 2);
  await page.waitForFunction(n => (document.querySelector('#tl-compare') || {}).textContent?.includes(`aligned at the start of step ${n}`), target.step_num);
  assert.equal(new URLSearchParams(page.url().split('?')[1]).get('align'), String(target.step_num));
});

test('timeline search reaches every match a page at a time, keeps its list beside the event, and shows the event with context', async () => {
  const q = 'fusion';
  const first = await api('timeline/search', { run: CPU, q, offset: 0, limit: 10 });
  assert.ok(first.total > 1000, `${first.total} matches: more than a page`);
  const last = (await api('timeline/search', { run: CPU, q, offset: first.total - 1, limit: 10 })).matches;
  assert.equal(last.length, 1);
  // The pages join up: offset 995 with 10 spans the first page's end and the second's start.
  const a = await api('timeline/search', { run: CPU, q, offset: 990, limit: 20 });
  const b = await api('timeline/search', { run: CPU, q, offset: 1000, limit: 10 });
  assert.deepEqual(a.matches.slice(10), b.matches);
  await open(`timeline?run=${encodeURIComponent(CPU)}`);
  await settle();
  await page.fill('#tl-search', q);
  await page.press('#tl-search', 'Enter');
  await page.waitForSelector('#tl-results li');
  // Back from the first: the last match in time, on the last page.
  await page.click('#tl-prev');
  await page.waitForFunction(want => document.querySelector('#tl-hits').textContent === want, `${fmt.count(first.total)} / ${fmt.count(first.total)}`);
  await page.waitForFunction(name => (document.querySelector('#tl-event-name') || {}).textContent === name, last[0].name);
  // The list stays above the event's stats.
  assert.ok(await page.$('#tl-side #tl-results li'));
  // With context: the event is under a twentieth of the window, in its middle.
  const [t0, t1] = await timelineWindow();
  const m = last[0];
  assert.ok(t0 < m.start_ps && m.start_ps + m.duration_ps < t1, 'in view');
  assert.ok(m.duration_ps <= (t1 - t0) / 19, `${m.duration_ps} ps in a ${t1 - t0} ps window`);
  // Next wraps around to the first.
  await page.click('#tl-next');
  await page.waitForFunction(() => document.querySelector('#tl-hits').textContent.startsWith('1 /'));
  await page.waitForFunction(name => (document.querySelector('#tl-event-name') || {}).textContent === name, first.matches[0].name);
});

test('counters are pinned and hidden as tracks are, and a link keeps them so', async () => {
  const run = 'gpu-nocb/plugins/profile/2026_11_23_08_00_08';
  await open(`timeline?run=${encodeURIComponent(run)}`);
  await settle();
  const layout = () => page.evaluate(() => window.stepscopeTimeline.layout());
  const box = await page.$eval('#tl-canvas', c => { const r = c.getBoundingClientRect(); return { x: r.left, y: r.top }; });
  let items = await layout();
  const mem = items.find(i => i.kind === 'counter');
  const busy = items.find(i => i.kind === 'busy');
  assert.ok(mem && busy, JSON.stringify(items.slice(0, 6)));
  // The pin glyph of the allocator's counter (196–215 px), then the hide glyph of the busy one (215–230 px).
  await page.mouse.click(box.x + 200, box.y + 24 + mem.y + 8);
  await settle();
  items = await layout();
  const pinnedHead = items.findIndex(i => i.kind === 'plane' && i.label.startsWith('pinned'));
  assert.ok(pinnedHead >= 0 && items[pinnedHead + 1].kind === 'counter' && items[pinnedHead + 1].counter === mem.counter && items[pinnedHead + 1].pinned);
  const busyNow = items.find(i => i.kind === 'busy' && i.device === busy.device);
  await page.mouse.click(box.x + 222, box.y + 24 + busyNow.y + 8);
  await settle();
  items = await layout();
  assert.ok(!items.some(i => i.kind === 'busy' && i.device === busy.device), 'the busy counter is hidden');
  assert.equal(await page.textContent('#tl-unhide'), 'show 1 hidden');
  // The address keeps both; opened anew, the same.
  await page.waitForFunction(() => new URLSearchParams(location.hash.split('?')[1]).get('hidden'));
  const link = page.url();
  await page.goto('about:blank');
  await page.goto(link);
  await page.waitForLoadState('networkidle');
  await settle();
  const again = await layout();
  assert.deepEqual(again.map(i => [i.kind, i.counter, i.device, i.pinned]), items.map(i => [i.kind, i.counter, i.device, i.pinned]));
  // Showing the hidden brings it back.
  await page.click('#tl-unhide');
  await settle();
  assert.ok((await layout()).some(i => i.kind === 'busy' && i.device === busy.device));
});

test('memory page: a program\'s memory plan charts the heap over program order and lists the buffers live at its peak', async () => {
  const run = await runIn('gpu-transformer');
  const b = await api('memory/buffers', { run, top: 200 });
  assert.ok(b.heap && b.heap.usage.length > 10, 'the longest-running program has a heap trace');
  await open(`memory?run=${encodeURIComponent(run)}`);
  await page.waitForSelector('#mem-program-chart .uplot canvas');
  const c = await cards('#mem-program-cards');
  assert.equal(c.peak, fmt.bytes(b.peak_bytes));
  assert.equal(c.allocated, fmt.bytes(b.allocated_bytes));
  assert.equal(c.temporaries, fmt.bytes(b.temporary_bytes));
  // The peak's dot is drawn in red where the chart puts the peak.
  const px = await page.evaluate(([x, y]) => {
    const u = window.stepscopeProgramMemory.chart;
    const cx = Math.round(u.valToPos(x, 'x', true)), cy = Math.round(u.valToPos(y, 'y', true));
    return Array.from(u.ctx.getImageData(cx, cy, 1, 1).data);
  }, [b.heap.peak_event, b.peak_bytes]);
  assert.ok(px[0] > 150 && px[1] < 80 && px[2] < 80, `peak marker pixel ${px}`);
  assert.deepEqual(await tableCells('#mem-program-live', 1), b.live_at_peak.map(l => fmt.bytes(l.size_bytes)));
  // A value of a tuple-shaped instruction says which: `{1}`.
  assert.deepEqual(await tableCells('#mem-program-live', 3), b.live_at_peak.map(l => (l.shape_index ? `${l.instruction} {${l.shape_index.join(',')}}` : l.instruction)));
  assert.ok(b.live_at_peak.some(l => l.shape_index), 'a multi-output fusion\'s values are live at the peak');
  // Buffer lifetimes: a bar a heap buffer; those across the red peak line hold the heap's peak.
  const bars = await page.$$eval('#mem-lifetimes rect.lifetime', rs => rs.map(r => [Number(r.dataset.buffer), Number(r.dataset.from), Number(r.dataset.to), r.querySelector('title').textContent]));
  assert.equal(bars.length, b.heap.lifetimes.length);
  const sizeOf = new Map(b.heap.lifetimes.map(l => [l.buffer_id, l]));
  const across = bars.filter(([, from, to]) => from <= b.heap.peak_event && b.heap.peak_event < to);
  assert.equal(across.reduce((n, [id]) => n + sizeOf.get(id).size_bytes, 0), b.heap.peak_live_bytes);
  const [id, , , title] = bars[0];
  assert.ok(title.startsWith(`${sizeOf.get(id).instruction} ${sizeOf.get(id).shape} · ${fmt.bytes(sizeOf.get(id).size_bytes)}`), title);
  assert.ok(await page.$('#mem-lifetimes line.peak-line'));
  await page.screenshot({ path: path.join(shots, 'memory-program-gpu.png'), fullPage: true });
  // Another program from the picker: its plan, with the choice kept in the address.
  const other = b.programs.find(p => p.program !== b.program);
  await page.selectOption('#mem-program-pick', other.program);
  await page.waitForFunction(p => document.querySelector('#mem-program-pick')?.value === p && new URL(location.href).hash.includes('program='), other.program);
  await page.waitForSelector('#mem-program-cards');
  const o = await api('memory/buffers', { run, top: 200, program: other.program });
  assert.equal((await cards('#mem-program-cards')).allocated, fmt.bytes(o.allocated_bytes));
  // An instruction links to its HLO.
  await page.selectOption('#mem-program-pick', b.program);
  await page.waitForFunction(p => document.querySelector('#mem-program-pick')?.value === p, b.program);
  await page.waitForSelector('#mem-program-live a.oplink');
  await page.click('#mem-program-live a.oplink');
  await page.waitForSelector('#hlo-name');
  assert.equal(await page.textContent('#hlo-name'), b.live_at_peak[0].instruction);
  // A CPU capture records no allocator events, but its programs' plans are there.
  const cpu = await runIn('cpu-compile');
  const p = await api('memory/buffers', { run: cpu, top: 200 });
  await open(`memory?run=${encodeURIComponent(cpu)}`);
  await page.waitForSelector('#mem-none');
  await page.waitForSelector('#mem-program-cards');
  assert.equal((await cards('#mem-program-cards')).peak, fmt.bytes(p.peak_bytes));
});

test('HLO graph: the op\'s operands and users as the API has them, its fused body, a node opens its own view; kernels link their op', async () => {
  const run = await runIn('gpu-transformer');
  const op = 'gemm_fusion_dot.8';
  const g = await api('hlo/graph', { run, op });
  await open(`hlo?run=${encodeURIComponent(run)}&op=${op}`);
  await page.waitForSelector('#hlo-graph g.node');
  const names = await page.$$eval('#hlo-graph g.node', gs => gs.map(x => x.dataset.name).sort());
  assert.deepEqual(names, g.nodes.map(n => n.name).sort());
  assert.equal(await page.$$eval('#hlo-graph path.graph-edge', ps => ps.length), g.edges.length);
  assert.deepEqual(await page.$$eval('#hlo-graph g.node.chosen', gs => gs.map(x => x.dataset.name)), [op]);
  // Operands sit left of the op, users right.
  const x = await page.$$eval('#hlo-graph g.node', gs => Object.fromEntries(gs.map(n => [n.dataset.name, n.getBoundingClientRect().left])));
  for (const n of g.nodes) {
    if (n.level < 0) assert.ok(x[n.name] < x[op], `${n.name} left of ${op}`);
    if (n.level > 0) assert.ok(x[n.name] > x[op], `${n.name} right of ${op}`);
  }
  // A node that ran shows its time and count; the fused body is drawn whole.
  const me = g.nodes.find(n => n.name === op);
  assert.ok(me.total_ps > 0);
  assert.ok((await page.textContent(`#hlo-graph g.node[data-name="${op}"]`)).includes(`${fmt.dur(me.total_ps)} × ${fmt.count(me.executions)}`));
  assert.equal(await page.$$eval('#hlo-fused-graph g.node', gs => gs.length), g.fused.nodes.length);
  await page.screenshot({ path: path.join(shots, 'hlo-graph.png'), fullPage: true });
  // A deeper graph from the picker, kept in the address.
  await page.selectOption('#hlo-depth', '3');
  await page.waitForFunction(() => new URL(location.href).hash.includes('depth=3'));
  const deeper = await api('hlo/graph', { run, op, depth: 3 });
  await page.waitForFunction(n => document.querySelectorAll('#hlo-graph g.node').length === n, deeper.nodes.length);
  // A user opens its own view.
  const user = g.nodes.find(n => n.level === 1);
  await page.click(`#hlo-graph g.node[data-name="${user.name}"]`);
  await page.waitForFunction(u => document.querySelector('#hlo-name')?.textContent === u, user.name);
  // The kernels page links a kernel's op to its HLO view.
  await open(`kernels?run=${encodeURIComponent(run)}`);
  await page.waitForSelector('table.data a.oplink');
  const first = await page.$eval('table.data a.oplink', a => a.textContent);
  await page.click('table.data a.oplink');
  await page.waitForFunction(o => document.querySelector('#hlo-name')?.textContent === o, first);
});

test('HLO graph at depth 6: no edge runs through a node, the chosen op opens in the middle, fit/zoom/pan', async () => {
  // The CPU transformer's top op: the fixtures' largest neighbourhood at depth 6.
  const run = CPU;
  const op = 'ynn_fusion.47';
  const g = await api('hlo/graph', { run, op, depth: 6 });
  assert.ok(g.nodes.length > 80 && g.edges.length > 200, `${g.nodes.length} nodes, ${g.edges.length} edges`);
  await open(`hlo?run=${encodeURIComponent(run)}&op=${op}&depth=6`);
  await page.waitForFunction(n => document.querySelectorAll('#hlo-graph g.node').length === n, g.nodes.length);
  await page.waitForTimeout(100);
  // Every edge, sampled along its length, stays out of every node but its own two.
  const through = await page.$eval('#hlo-graph', svgEl => {
    const rects = [...svgEl.querySelectorAll('g.node')].map(n => {
      const m = n.getAttribute('transform').match(/translate\(([-\d.]+),([-\d.]+)\)/);
      const r = n.querySelector('rect');
      return { name: n.dataset.name, x: Number(m[1]), y: Number(m[2]), w: Number(r.getAttribute('width')), h: Number(r.getAttribute('height')) };
    });
    const bad = [];
    for (const p of svgEl.querySelectorAll('path.graph-edge')) {
      const len = p.getTotalLength();
      for (let t = 0; t <= len; t += 4) {
        const q = p.getPointAtLength(t);
        const hit = rects.find(r => r.name !== p.dataset.from && r.name !== p.dataset.to
          && q.x > r.x + 1 && q.x < r.x + r.w - 1 && q.y > r.y + 1 && q.y < r.y + r.h - 1);
        if (hit) { bad.push(`${p.dataset.from}→${p.dataset.to} through ${hit.name}`); break; }
      }
    }
    return bad;
  });
  assert.deepEqual(through, []);
  // The chosen op is in view, in the middle.
  const [box, me] = await page.$eval('#hlo-graph', (svgEl, name) => {
    const b = svgEl.getBoundingClientRect(), m = svgEl.querySelector(`g.node[data-name="${name}"]`).getBoundingClientRect();
    return [[b.left, b.top, b.width, b.height], [m.left + m.width / 2, m.top + m.height / 2]];
  }, op);
  assert.ok(Math.abs(me[0] - (box[0] + box[2] / 2)) < 2 && Math.abs(me[1] - (box[1] + box[3] / 2)) < 2, `${me} in ${box}`);
  // Fit: the whole graph inside the box; zoom in and out change the scale.
  await page.click('#hlo-graph-fit');
  const inside = await page.$eval('#hlo-graph', svgEl => {
    const b = svgEl.getBoundingClientRect(), s = svgEl.querySelector('g.scene').getBoundingClientRect();
    return s.left >= b.left - 1 && s.right <= b.right + 1 && s.top >= b.top - 1 && s.bottom <= b.bottom + 1;
  });
  assert.ok(inside, 'fitted');
  const scale = () => page.$eval('#hlo-graph', s => Number(s.dataset.scale));
  const k = await scale();
  await page.click('#hlo-graph-in');
  assert.ok(Math.abs(await scale() - k * 1.25) < 1e-9);
  await page.click('#hlo-graph-out');
  assert.ok(Math.abs(await scale() - k) < 1e-9);
  // A drag pans the view.
  const before = await page.$eval('#hlo-graph g.scene', s => s.getAttribute('transform'));
  await page.$eval('#hlo-graph', s => s.scrollIntoView({ block: 'center' }));
  const b2 = await page.$eval('#hlo-graph', s => { const r = s.getBoundingClientRect(); return [r.left, r.top]; });
  await page.mouse.move(b2[0] + 20, b2[1] + 20);
  await page.mouse.down();
  await page.mouse.move(b2[0] + 120, b2[1] + 60, { steps: 5 });
  await page.mouse.up();
  assert.notEqual(await page.$eval('#hlo-graph g.scene', s => s.getAttribute('transform')), before);
  await page.click('#hlo-graph-centre');
  await page.screenshot({ path: path.join(shots, 'hlo-graph-depth6.png') });
});

test('a pod\'s program numbered apart on its host: the op profile names its host, and its HLO view, graph and neighbours are that host\'s program', async () => {
  // cpu-pod3: host1 and host2 both number their norm 10, over shards of 64 and 32 rows.
  const run = await runIn('cpu-pod3');
  const ops = await api('ops', { run, top: 0 });
  const apart = ops.ops.find(r => r.name === 'ynn_fusion' && (r.program || '').endsWith(' on host2'));
  assert.ok(apart, JSON.stringify(ops.ops.map(r => [r.name, r.program])));
  await open(`ops?run=${encodeURIComponent(run)}`);
  await page.waitForSelector('table.data tbody tr a.oplink');
  const cell = await page.$$eval('table.data tbody tr', (rows, label) => rows.findIndex(r => r.textContent.includes(label)), apart.program);
  assert.ok(cell >= 0, `no row names ${apart.program}`);
  await page.click(`table.data tbody tr:nth-child(${cell + 1}) a.oplink`);
  await page.waitForSelector('#hlo-text');
  const h = await api('hlo', { run, op: 'ynn_fusion', module: apart.program });
  assert.equal(h.host, 'host2');
  assert.match(await page.textContent('#view'), /host host2/);
  assert.deepEqual(await tableCells('#hlo-operands', 3), ['f32[32,256]']);
  const g = await api('hlo/graph', { run, op: 'ynn_fusion', module: apart.program });
  await page.waitForSelector('#hlo-graph g.node');
  assert.deepEqual(await page.$$eval('#hlo-graph g.node', gs => gs.map(x => x.dataset.name).sort()), g.nodes.map(n => n.name).sort());
  // Its operand's own view is host2's too: the 32-row shard.
  await page.click('#hlo-graph g.node[data-name="shard.1"]');
  await page.waitForFunction(() => document.querySelector('#hlo-name')?.textContent === 'shard.1');
  assert.match(await page.textContent('#hlo-text'), /f32\[32,256\]/);
  assert.match(await page.textContent('#view'), /host host2/);
});

/** A fixture's XSpace file. */
function fixtureFile(dir) {
  const d = path.join(repo, 'tests/fixtures', dir, 'plugins/profile');
  return path.join(d, readdirSync(d)[0], 'vm.xplane.pb');
}

/** A new log directory whose runs (`plugins/profile/RUN`) hold hosts copied from
 * fixtures: `runs` maps a run's name to [[host, fixture], …]. Returns the directory. */
function logDir(runs) {
  const root = mkdtempSync(path.join(tmpdir(), 'stepscope-logs-'));
  for (const [name, hosts] of Object.entries(runs)) {
    const run = path.join(root, 'plugins/profile', name);
    mkdirSync(run, { recursive: true });
    for (const [host, dir] of hosts) cpSync(fixtureFile(dir), path.join(run, `${host}.xplane.pb`));
  }
  return root;
}

/** A log directory of one run of three CPU hosts (a, b, c: three fixtures). */
function threeHostRun() {
  return logDir({ '2026_11_01_00_00_00': [['a', 'cpu-clean'], ['b', 'cpu-slow'], ['c', 'cpu-dp4']] });
}

test('a run of several hosts: the overview lists each host\'s own summary, a click opens that host', async () => {
  const root = threeHostRun();
  const [proc, url] = await startServer(root);
  try {
    const hosts = await (await fetch(new URL('api/summary/hosts', url))).json();
    await page.goto('about:blank');
    await page.goto(url);
    await page.waitForSelector('#hosts-table table.data tbody tr');
    const shown = await page.$$eval('#hosts-table table.data tbody tr', trs => trs.map(tr => [...tr.children].map(td => td.textContent)));
    const byHost = Object.fromEntries(hosts.hosts.map(h => [h.host, h.summary]));
    assert.equal(shown.length, 3);
    for (const row of shown) {
      const s = byHost[row[0]];
      assert.equal(row[1], fmt.count(s.step_count), row[0]);
      assert.equal(row[2], fmt.dur((s.warm_step_time || s.step_time).median_ps), row[0]);
      assert.equal(row[5], s.top_ops[0].name, row[0]);
    }
    // Sorted by median step, the slowest host first; the spread names it.
    assert.equal(shown[0][0], hosts.slowest_host);
    assert.ok((await page.textContent('#hosts-spread')).includes(`(${hosts.slowest_host}, +`));
    await page.screenshot({ path: path.join(shots, 'overview-hosts.png'), fullPage: true });
    await page.click(`#hosts-table a:text-is("${hosts.slowest_host}")`);
    await page.waitForFunction(h => new URL(location.href).hash.includes(`host=${h}`) && document.querySelector('#host').value === h, hosts.slowest_host);
    // That host alone: no host table.
    await page.waitForSelector('.cards .card');
    assert.equal(await page.$('#hosts-table'), null);
  } finally {
    proc.kill();
    rmSync(root, { recursive: true, force: true });
  }
});

test('a run whose hosts do not fit in memory together: the overview is read a host at a time, and offers each host', async () => {
  // 30 copies of the CPU transformer's file (1.1 MB each) under a limit of 30 MB: any
  // one host fits, the 30 together do not.
  const hostsOf = Array.from({ length: 30 }, (_, h) => [`h${h}`, 'cpu-transformer']);
  const root = logDir({ '2026_11_01_00_00_00': hostsOf });
  assert.ok(30 * statSync(fixtureFile('cpu-transformer')).size > 30e6);
  const [proc, url] = await startServer(root, { STEPSCOPE_MEMORY_LIMIT: '30MB' });
  try {
    const whole = await fetch(new URL('api/export?format=chrome', url));
    assert.equal(whole.status, 507);
    const why = (await whole.json()).error;
    assert.match(why, /^reading the run's 30 hosts together needs about \d+ MB, and STEPSCOPE_MEMORY_LIMIT is 30 MB — /);
    const s = await (await fetch(new URL('api/summary', url))).json();
    assert.equal(s.environment.hosts.length, 30);
    const hosts = await (await fetch(new URL('api/summary/hosts', url))).json();
    assert.equal(hosts.hosts.length, 30);
    await page.goto('about:blank');
    await page.goto(url);
    await page.waitForSelector('#hosts-table table.data tbody tr');
    assert.ok(s.read_a_host_at_a_time);
    assert.match(await page.textContent('#run-too-large'), /^Several hosts, read a host at a time: the numbers and findings of the whole run/);
    assert.equal(await page.textContent('h1'), `Run ${hosts.run}`);
    // The run's numbers, steps and findings, read a host at a time.
    assert.equal(await page.textContent('.cards .card:first-child .value'), s.step_count.toLocaleString('en-US'));
    const adv = await (await fetch(new URL('api/advise', url))).json();
    assert.ok(adv.findings.length > 0);
    const findings = await page.$$eval('.finding', fs => fs.map(f => [f.dataset.rule, f.querySelector('.ftitle').textContent]));
    assert.deepEqual(findings, adv.findings.map(f => [f.rule, f.title]));
    assert.ok(await page.$('.chartbox canvas'));
    const shown = await page.$$eval('#hosts-table table.data tbody tr td:first-child', tds => tds.map(td => td.textContent));
    assert.deepEqual(shown.sort(), hosts.hosts.map(h => h.host).sort());
    await page.screenshot({ path: path.join(shots, 'overview-too-large.png') });
    // The op profile and scopes are read a host at a time too.
    await page.goto(`${url}#/ops`);
    await page.waitForSelector('table.data tbody tr');
    await page.goto(`${url}#/scopes`);
    await page.waitForSelector('table.data tbody tr');
    // So is the timeline: every host's tracks listed, the hosts on screen read; an
    // event's occurrences are its host's.
    const tracks = await (await fetch(new URL('api/timeline/tracks', url))).json();
    assert.equal(tracks.read_a_host_at_a_time, true);
    assert.equal(new Set(tracks.tracks.map(t => t.host)).size, 30);
    const st = (await (await fetch(new URL('api/steps', url))).json()).steps[0];
    await page.goto('about:blank');
    await page.goto(`${url}#/timeline?start_ps=${st.start_ps}&end_ps=${st.start_ps + st.duration_ps}`);
    await settle();
    assert.equal(await page.textContent('.tl-bar strong'), `${tracks.events.toLocaleString('en-US')} events in ${tracks.tracks.length} tracks`);
    assert.match(await page.textContent('#tl-by-host'), /^too large to read whole: each host is read when its tracks are on screen/);
    assert.equal(await page.$('#tl-export-perfetto'), null);
    const events = await page.evaluate(() => window.stepscopeTimeline.events());
    assert.ok(events.length > 10, `${events.length} events drawn`);
    const ev = events.filter(e => e.w > 8).sort((x, y) => y.w - x.w)[0];
    const box = await page.$eval('#tl-canvas', c => { const r = c.getBoundingClientRect(); return [r.left, r.top]; });
    await page.mouse.click(box[0] + ev.x + Math.min(ev.w / 2, 20), box[1] + ev.y + ev.h / 2);
    const detail = await (await fetch(new URL(`api/timeline/event?track=${ev.track}&index=${ev.index}`, url))).json();
    await page.waitForSelector('#tl-event-name');
    assert.equal(await page.textContent('#tl-event-name'), detail.display_name);
    assert.equal(await page.textContent('#tl-occurrences'), `all occurrences on ${detail.host}`);
    await page.screenshot({ path: path.join(shots, 'timeline-too-large.png') });
    // An op's HLO, from the first host that holds it, beside the run's op profile.
    const hlo = await (await fetch(new URL('api/hlo?op=dot.31', url))).json();
    assert.equal(hlo.host, 'h0');
    await page.goto(`${url}#/hlo?op=dot.31`);
    await page.waitForSelector('#hlo-profile');
    assert.equal(await page.textContent('#hlo-name'), 'dot.31');
    await page.goto(url);
    await page.waitForSelector('#hosts-table table.data tbody tr');
    // A host, read alone, fits: its overview as usual (once the page has gone to it).
    await page.click('#hosts-table a:text-is("h3")');
    await page.waitForFunction(() => location.hash.includes('host=h3') && document.querySelector('#host').value === 'h3');
    await page.waitForSelector('.cards .card');
    await page.waitForFunction(() => !document.querySelector('#run-too-large'));
    assert.equal(await page.$('#run-too-large'), null);
    assert.equal(await page.$('#hosts-table'), null);
  } finally {
    proc.kill();
    rmSync(root, { recursive: true, force: true });
  }
});

test('the history page names a run it could not read, and one of another program, and charts the others', async () => {
  const root = logDir({
    '2026_11_01_02_00_00': [['vm', 'cpu-clean']],
    '2026_11_02_02_00_00': [['vm', 'cpu-clean']],
    '2026_11_03_02_00_00': [['vm', 'cpu-slow']],
    '2026_11_04_02_00_00': [['vm', 'gpu-sync']],
  });
  const cut = path.join(root, 'plugins/profile/2026_11_02_02_00_00/vm.xplane.pb');
  const whole = readFileSync(cut);
  writeFileSync(cut, whole.subarray(0, Math.floor(whole.length / 3)));
  const [proc, url] = await startServer(root);
  try {
    const h = await (await fetch(new URL('api/history', url))).json();
    assert.equal(h.runs.length, 3);
    assert.equal(h.runs_unread.length, 1);
    assert.equal(h.not_compared.length, 1);
    await page.goto('about:blank');
    await page.goto(`${url}#/history`);
    await page.waitForSelector('#history-table table.data tbody tr');
    assert.equal(await page.locator('#history-trend circle').count(), 3);
    // Each run's capture time under its point.
    assert.deepEqual(await page.$$eval('#history-trend text.xtick', ts => ts.map(t => t.textContent)),
      h.runs.map(r => r.captured.slice(5, 16)));
    assert.equal(await page.textContent('.unread-run'), `not read: ${h.runs_unread[0].run} (${h.runs_unread[0].error})`);
    assert.ok(h.runs_unread[0].run.endsWith('2026_11_02_02_00_00'));
    const n = h.not_compared[0];
    assert.ok(n.run.endsWith('2026_11_04_02_00_00') && n.previous.endsWith('2026_11_03_02_00_00'));
    assert.equal(await page.textContent('.not-compared'),
      `not compared: ${n.run} ran other programs than ${n.previous} (their ops match for ${n.matched_op_time_pct.toFixed(0)}% of the op time)`);
  } finally {
    proc.kill();
    rmSync(root, { recursive: true, force: true });
  }
});
