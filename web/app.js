// The shell: run/host picker, hash routes (#/page?run=…&host=…&…) and page loading.
// A page is one module in pages/ exporting `title` and `render(el, ctx)`; add it to PAGES.
import { api } from './lib/api.js';
import { el, clear } from './lib/dom.js';
import { hashFor } from './lib/nav.js';

const PAGES = {
  overview: () => import('./pages/overview.js'),
  ops: () => import('./pages/ops.js'),
  source: () => import('./pages/source.js'),
  roofline: () => import('./pages/roofline.js'),
  scopes: () => import('./pages/scopes.js'),
  kernels: () => import('./pages/kernels.js'),
  steps: () => import('./pages/steps.js'),
  timeline: () => import('./pages/timeline.js'),
  memory: () => import('./pages/memory.js'),
  devices: () => import('./pages/devices.js'),
  collectives: () => import('./pages/collectives.js'),
  compile: () => import('./pages/compile.js'),
  diff: () => import('./pages/diff.js'),
  history: () => import('./pages/history.js'),
  sql: () => import('./pages/sql.js'),
  hlo: () => import('./pages/hlo.js'),
};
const TITLES = {
  overview: 'Overview', ops: 'Op profile', source: 'Source', roofline: 'Roofline', scopes: 'Scopes', kernels: 'Kernels', steps: 'Steps', timeline: 'Timeline',
  memory: 'Memory', devices: 'Devices', collectives: 'Collectives', compile: 'Compile', diff: 'Diff', history: 'History', sql: 'SQL', hlo: 'HLO',
};
// Pages reached from links only, not listed in the header.
const UNLISTED = new Set(['hlo']);

let runs = [];
let renderSeq = 0;

/** The current route: page name and its parameters. */
export function route() {
  const h = location.hash.replace(/^#\/?/, '');
  const [page, query] = h.split('?');
  return { page: PAGES[page] ? page : 'overview', params: new URLSearchParams(query || '') };
}

/** Navigates to `page` with `params` (run and host are kept unless given). */
export function go(page, params = {}) {
  location.hash = hashFor(page, params);
}

/** Replaces page parameters without adding a history entry or re-rendering. */
export function setParams(params) {
  const { page, params: p } = route();
  for (const [k, v] of Object.entries(params)) {
    if (v === null || v === undefined || v === '') p.delete(k); else p.set(k, String(v));
  }
  history.replaceState(null, '', `#/${page}?${p.toString()}`);
}

function fillPicker(params) {
  const runSel = document.getElementById('run');
  const hostSel = document.getElementById('host');
  clear(runSel);
  const want = params.get('run');
  const current = runs.find(r => r.run === want) || runs[runs.length - 1];
  for (const r of runs.slice().reverse()) {
    runSel.append(el('option', { value: r.run, selected: r === current, title: r.run }, runLabel(r.run)));
  }
  clear(hostSel);
  hostSel.append(el('option', { value: '' }, 'all hosts'));
  for (const h of current ? current.hosts : []) {
    hostSel.append(el('option', { value: h.host, selected: h.host === params.get('host') }, h.host));
  }
  hostSel.disabled = !current || current.hosts.length < 2;
}

/** A run's name in the picker: `plugins/profile/` left out, so that the capture time,
 * which tells runs apart, shows however narrow the picker (the full name is its title). */
export function runLabel(run) {
  return run.replace(/(^|\/)plugins\/profile\//, '$1').replace(/\/$/, '') || run;
}

function fillNav(page) {
  const nav = document.getElementById('nav');
  clear(nav);
  for (const [name, title] of Object.entries(TITLES)) {
    if (UNLISTED.has(name) && name !== page) continue;
    const a = el('a', { href: '#', class: name === page ? 'active' : '' }, title);
    a.addEventListener('click', ev => { ev.preventDefault(); go(name); });
    nav.append(a);
  }
}

async function render() {
  const seq = ++renderSeq;
  const { page, params } = route();
  fillNav(page);
  fillPicker(params);
  const view = document.getElementById('view');
  // The loading state shows at once, and says how long it has waited.
  clear(view);
  view.className = `page-${page}`;
  document.title = `${TITLES[page]} · stepscope`;
  const what = `${TITLES[page]}${params.get('run') ? ` of ${params.get('run')}` : ''}`;
  const loading = el('p', { class: 'loading', role: 'status' }, `Loading ${what}…`);
  view.append(loading);
  const started = performance.now();
  const tick = setInterval(() => {
    loading.textContent = `Loading ${what}… ${Math.round((performance.now() - started) / 1000)} s`;
  }, 1000);
  let mod;
  try {
    mod = await PAGES[page]();
  } catch (e) {
    clearInterval(tick);
    if (seq === renderSeq) showError(view, loading, e);
    return;
  }
  if (seq !== renderSeq) {
    clearInterval(tick);
    return;
  }
  const sel = { run: params.get('run') || '', host: params.get('host') || '' };
  const ctx = {
    params,
    get: (path, extra = {}) => api(path, { ...sel, ...extra }),
    go,
    setParams,
    stale: () => seq !== renderSeq,
  };
  try {
    await mod.render(view, ctx);
    loading.remove();
  } catch (e) {
    if (seq !== renderSeq) return;
    showError(view, loading, e);
  } finally {
    clearInterval(tick);
  }
}

/** Puts the page's error where its loading line was: the message and a retry button. */
function showError(view, loading, e) {
  const retry = el('button', { type: 'button' }, 'Retry');
  retry.addEventListener('click', () => render());
  // A run too large to read whole (507): each host can still be read alone.
  const text = e.status === 507
    ? `${e.message.split(' — ')[0]}: pick one host in the host picker above; each is read alone.`
    : String(e.message || e);
  const box = el('div', { class: 'error', role: 'alert' }, el('p', {}, text), retry);
  if (loading.isConnected) loading.replaceWith(box); else view.prepend(box);
}

/** How often the served runs are listed again, so that a new capture shows up. */
const RUNS_POLL_MS = 10000;

/** Lists the runs again; where they changed, refills the picker (the page shown
 * stays), or renders the first page once the first run appears. */
async function pollRuns() {
  let now;
  try {
    now = await api('runs');
  } catch (_) {
    return; // the server may be restarting: the next poll asks again
  }
  const key = rs => rs.map(r => `${r.run}:${r.hosts.length}`).join('\n');
  if (key(now) === key(runs)) return;
  const first = runs.length === 0;
  runs = now;
  if (first && runs.length) render();
  else fillPicker(route().params);
}

function noRuns() {
  document.getElementById('view').textContent = 'no profile found under the served folder yet — a capture written there shows up here';
}

async function main() {
  try {
    runs = await api('runs');
  } catch (e) {
    document.getElementById('view').textContent = `cannot list runs: ${e.message}`;
    return;
  }
  document.getElementById('run').addEventListener('change', ev => go(route().page, { run: ev.target.value, host: '' }));
  document.getElementById('host').addEventListener('change', ev => go(route().page, { host: ev.target.value }));
  window.addEventListener('hashchange', () => { if (runs.length) render(); });
  setInterval(pollRuns, RUNS_POLL_MS);
  // Tests list the runs again without waiting for the timer.
  window.stepscopePollRuns = pollRuns;
  if (runs.length) render(); else noRuns();
}

main();
