// Compile: XLA compilation on the host, per module and per compile.
import { el } from '../lib/dom.js';
import { dur, count } from '../lib/format.js';
import { table } from '../lib/table.js';
import { pageLink } from '../lib/nav.js';

export const title = 'Compile';

export async function render(view, ctx) {
  const c = await ctx.get('compile');
  if (ctx.stale()) return;
  view.append(el('h1', {}, 'Compile'));
  if (!c.compiles.length) {
    view.append(el('p', { class: 'muted', id: 'compile-none' }, 'no XLA compilation in this capture (the steady state was captured: good)'));
    return;
  }
  view.append(el('p', { id: 'compile-total' }, `${dur(c.total_ps)} compiling, ${count(c.compiles.length)} time(s)`));
  view.append(el('h2', {}, 'By module'));
  const mb = el('div', { id: 'compile-modules' });
  view.append(mb);
  const named = m => m || '(unknown module)';
  table(mb, {
    columns: [
      { key: 'module', label: 'module', fmt: named },
      { key: 'total_ps', label: 'total', num: true, fmt: dur },
      { key: 'count', label: 'count', num: true, fmt: count },
      { key: 'max_ps', label: 'max', num: true, fmt: dur },
    ],
    rows: c.modules,
    sort: 'total_ps',
    csvName: 'compile_modules.csv',
  });
  view.append(el('h2', {}, 'Each compile'), el('p', { class: 'muted small' }, 'click a start time to see the compile in the timeline'));
  const cb = el('div', { id: 'compile-events' });
  view.append(cb);
  table(cb, {
    columns: [
      { key: 'module', label: 'module', fmt: (v, r) => (r.module_from === 'next_run' ? `${named(v)} (ran next)` : named(v)) },
      { key: 'host', label: 'host' },
      { key: 'start_ps', label: 'at', num: true, fmt: (v, r) => pageLink(dur(v), 'timeline', { start_ps: Math.round(v - r.total_ps * 0.05), end_ps: Math.round(v + r.total_ps * 1.05), mark_start_ps: v, mark_end_ps: v + r.total_ps }) },
      { key: 'lowering_ps', label: 'lowering', num: true, fmt: dur },
      { key: 'backend_ps', label: 'backend', num: true, fmt: dur },
      { key: 'total_ps', label: 'total', num: true, fmt: dur },
    ],
    rows: c.compiles,
    sort: 'start_ps',
    desc: false,
    csvName: 'compiles.csv',
  });
}
