// History: the served runs in capture order, their median step time as a trend, and
// the first run that moved beyond run-to-run noise (api/history, `stepscope history`).
import { el, svg } from '../lib/dom.js';
import { dur, pct } from '../lib/format.js';
import { table } from '../lib/table.js';
import { pageLink } from '../lib/nav.js';

export const title = 'History';

export async function render(view, ctx) {
  const under = ctx.params.get('under') || '';
  const h = await ctx.get('history', { run: '', under });
  if (ctx.stale()) return;
  view.append(el('h1', {}, 'History'));
  const input = el('input', { type: 'search', id: 'history-under', value: under, placeholder: 'all runs', size: 40 });
  input.addEventListener('change', () => ctx.go('history', { under: input.value || null }));
  view.append(el('p', {}, el('label', {}, 'runs whose name starts with ', input),
    el('span', { class: 'muted small' }, ` · ${h.runs.length} run(s) in capture order, each set beside the one before it as diff does`)));

  const c = h.change;
  if (c) {
    const st = c.step_time;
    const sign = st.delta_ps > 0 ? '+' : '';
    const by = st.delta_pct === null || st.delta_pct === undefined ? '' : ` (${sign}${st.delta_pct.toFixed(1)}%)`;
    const what = c.cause === 'step_time'
      ? `step time ${sign}${dur(st.delta_ps)}${by}`
      : `ops moved (step time ${sign}${dur(st.delta_ps)}${by}, within noise)`;
    view.append(el('p', { id: 'history-change', class: 'finding' },
      el('b', {}, 'Changed first at '), c.run, `: ${what} against ${c.previous} (noise ${dur(st.noise_ps)}) · `,
      pageLink('diff them', 'diff', { a: c.previous, b: c.run, run: c.run })));
    if (c.ops.length) {
      view.append(el('ul', { id: 'history-ops' }, ...c.ops.map(o =>
        el('li', {}, `${o.name}: ${o.delta_per_step_ps > 0 ? '+' : ''}${dur(o.delta_per_step_ps)} a step`))));
    }
  } else {
    view.append(el('p', { id: 'history-change', class: 'muted' }, 'no run moved beyond run-to-run noise'));
  }
  view.append(trend(h.runs, c ? c.index : -1));
  // Runs that could not be read: named, with why; the others compared around them.
  for (const u of h.runs_unread || []) {
    view.append(el('p', { class: 'unread-run' }, `not read: ${u.run} (${u.error})`));
  }
  // Runs of other programs than the run before them: not compared with it.
  for (const n of h.not_compared || []) {
    view.append(el('p', { class: 'not-compared muted' },
      `not compared: ${n.run} ran other programs than ${n.previous} (their ops match for ${n.matched_op_time_pct.toFixed(0)}% of the op time)`));
  }

  const box = el('div', { id: 'history-table' });
  view.append(box);
  table(box, {
    columns: [
      { key: 'index', label: '#', num: true },
      { key: 'captured', label: 'captured', fmt: v => v || '—' },
      { key: 'run', label: 'run', fmt: v => pageLink(v, 'overview', { run: v }) },
      { key: 'step_count', label: 'steps', num: true },
      { key: 'median_ps', label: 'median step', num: true, fmt: dur },
      { key: 'step_time_vs_first_pct', label: 'vs first', num: true, fmt: v => pct(v, 0) },
      { key: 'device_utilization_pct', label: 'utilisation', num: true, fmt: v => pct(v) },
      { key: 'top_op', label: 'top op' },
    ],
    rows: h.runs.map((r, index) => ({ ...r, index, median_ps: r.step_time.median_ps, top_op: r.top_ops.length ? r.top_ops[0].name : '—' })),
    sort: 'index',
    desc: false,
    csvName: 'history.csv',
  });
}

/** The median step of each run, in capture order; the change point in red. */
function trend(runs, changed) {
  const W = 900, H = 220, L = 70, B = 24, T = 10;
  const ys = runs.map(r => r.step_time.median_ps);
  const top = Math.max(1, ...ys) * 1.1;
  const x = i => L + (runs.length < 2 ? (W - L) / 2 : (i * (W - L - 20)) / (runs.length - 1));
  const y = v => T + (H - T - B) * (1 - v / top);
  const s = svg('svg', { id: 'history-trend', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img' });
  s.append(svg('line', { x1: L, y1: y(0), x2: W - 10, y2: y(0), class: 'axis' }));
  s.append(svg('text', { x: L - 6, y: y(top / 1.1) + 4, 'text-anchor': 'end', class: 'tick' }, dur(top / 1.1)));
  s.append(svg('text', { x: L - 6, y: y(0) + 4, 'text-anchor': 'end', class: 'tick' }, '0'));
  // Each run's capture time (else its place) under it; as many as fit, 90 px apart.
  const every = Math.max(1, Math.ceil(runs.length / Math.floor((W - L) / 90)));
  runs.forEach((r, i) => {
    const last = i === runs.length - 1 && i % every >= every / 2;
    if (i % every && !last) return;
    const when = r.captured ? r.captured.slice(5, 16) : `#${i}`;
    s.append(svg('text', { x: x(i), y: H - 6, 'text-anchor': 'middle', class: 'tick xtick' }, when));
  });
  s.append(svg('polyline', { points: ys.map((v, i) => `${x(i)},${y(v)}`).join(' '), fill: 'none', class: 'trend' }));
  ys.forEach((v, i) => {
    const dot = svg('circle', { cx: x(i), cy: y(v), r: i === changed ? 6 : 4, class: i === changed ? 'changed' : 'run' });
    dot.append(svg('title', {}, `${runs[i].run}: ${dur(v)}`));
    s.append(dot);
  });
  return el('div', { class: 'chart' }, s);
}
