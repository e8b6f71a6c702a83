// Collectives: time in all-reduce, all-gather, … per op, and how much compute hid it.
import { el, card } from '../lib/dom.js';
import { dur, count, pct } from '../lib/format.js';
import { table } from '../lib/table.js';
import { stackedBar } from '../lib/charts.js';
import { opLink } from '../lib/nav.js';

export const title = 'Collectives';

export async function render(view, ctx) {
  const c = await ctx.get('collectives', { top: 'all' });
  if (ctx.stale()) return;
  view.append(el('h1', {}, 'Collectives'));
  if (!c.ops.length) {
    view.append(el('p', { class: 'muted' }, 'no collectives (all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute) in this profile'));
    return;
  }
  view.append(el('div', { class: 'cards', id: 'coll-cards' },
    card('in collectives', dur(c.total_ps), 'over all devices'),
    card('exposed', dur(c.exposed_ps), 'no compute beside it'),
    card('overlapped', dur(c.overlapped_ps), 'hidden by compute'),
    card('overlap', pct(c.overlap_pct), 'of collective time'),
  ));
  view.append(stackedBar([
    { label: 'exposed', value: c.exposed_ps, color: '#c77b28' },
    { label: 'overlapped', value: c.overlapped_ps, color: '#2a9d5c' },
  ], c.total_ps));
  view.append(el('h2', {}, 'By op'));
  const box = el('div', { id: 'coll-table' });
  view.append(box);
  table(box, {
    columns: [
      { key: 'name', label: 'op', fmt: (v, r) => opLink(v, r.module) },
      { key: 'kind', label: 'kind' },
      { key: 'module', label: 'module' },
      { key: 'is_async', label: 'async', fmt: v => (v ? 'yes' : '') },
      { key: 'exposed_ps', label: 'exposed', num: true, fmt: dur },
      { key: 'total_ps', label: 'total', num: true, fmt: dur },
      { key: 'overlap_pct', label: 'overlap', num: true, fmt: v => pct(v) },
      { key: 'count', label: 'count', num: true, fmt: count },
      { key: 'devices', label: 'devices', num: true, fmt: count },
      { key: 'avg_ps', label: 'avg', num: true, fmt: dur },
      { key: 'max_ps', label: 'max', num: true, fmt: dur },
    ],
    rows: c.ops,
    sort: 'exposed_ps',
    csvName: 'collectives.csv',
  });
}
