// Op profile: every op (or category, module, scope) by self time, with a treemap.
import { el } from '../lib/dom.js';
import { dur, count, pct, rate } from '../lib/format.js';
import { table } from '../lib/table.js';
import { treemap } from '../lib/treemap.js';
import { opLink } from '../lib/nav.js';

export const title = 'Op profile';

/** Columns of an op table grouped `by`. */
export function opColumns(by) {
  const first = { op: 'op', category: 'category', module: 'module', scope: 'scope', line: 'line', stack: 'stack' }[by] || 'op';
  // An op several programs hold: its row's program (`jit_dot(49)`) stands for the module.
  const cols = [by === 'op' ? { key: 'name', label: first, fmt: (v, r) => opLink(v, r.program || r.module) } : { key: 'name', label: first }];
  if (by === 'op') cols.push({ key: 'module', label: 'module', fmt: (v, r) => r.program || v }, { key: 'category', label: 'category' });
  cols.push(
    { key: 'self_ps', label: 'self', num: true, fmt: dur },
    { key: 'device_time_pct', label: '%', num: true, fmt: v => pct(v), title: 'share of the op time: every op\'s time summed' },
    { key: 'total_ps', label: 'total', num: true, fmt: dur },
    // Executions (a GPU GEMM and the memset before it are one), as the CLI's COUNT.
    { key: 'executions', label: 'count', num: true, fmt: count },
    { key: 'avg_ps', label: 'avg', num: true, fmt: dur },
    { key: 'min_ps', label: 'min', num: true, fmt: dur },
    { key: 'max_ps', label: 'max', num: true, fmt: dur },
    { key: 'flops_per_s', label: 'FLOP rate', num: true, fmt: v => rate(v, 'FLOP') },
    { key: 'bytes_per_s', label: 'memory rate', num: true, fmt: v => rate(v, 'B') },
    { key: 'bound', label: 'bound' },
  );
  return cols;
}

export async function render(view, ctx) {
  const by = ctx.params.get('by') || 'op';
  const depth = ctx.params.get('depth') || '0';
  const [data, devices] = await Promise.all([ctx.get('ops', { by, depth, top: 'all' }), ctx.get('devices').catch(() => null)]);
  if (ctx.stale()) return;

  const bySel = el('select', { id: 'ops-by' }, ...['op', 'category', 'module', 'scope', 'line', 'stack'].map(b => el('option', { value: b, selected: b === by }, b)));
  bySel.addEventListener('change', () => ctx.go('ops', { by: bySel.value, depth: bySel.value === 'scope' ? depth : null }));
  const depthIn = el('input', { type: 'number', min: 0, max: 64, value: depth, id: 'ops-depth', disabled: by !== 'scope' });
  depthIn.addEventListener('change', () => ctx.go('ops', { by, depth: depthIn.value }));
  view.append(el('h1', {}, 'Op profile'));
  view.append(el('div', { class: 'controls' },
    el('label', {}, 'group by ', bySel),
    el('label', { title: 'name-stack levels kept with group by scope (0 = all)' }, ' scope depth ', depthIn),
    el('span', { class: 'muted' }, ` ${dur(data.op_time_ps)} of op time in ${count(data.ops.length)} rows`)));
  // What the op time and the % column are shares of (as the CLI's ops says).
  view.append(el('p', { class: 'muted small', id: 'ops-sum-note' },
    `%: each row's share of the ${dur(data.op_time_ps)} of op time, every op's time summed (ops that ran at once each count)`
    + (devices ? `; the devices were busy ${dur(devices.all.busy_ps)} (each device's ops merged, summed over devices)` : '')));

  if (!data.ops.length) {
    view.append(el('p', { class: 'muted' }, 'no XLA ops found in this profile'));
    return;
  }
  const tm = el('div', { class: 'treemapbox' });
  view.append(tm);
  let tbl;
  const width = Math.max(400, view.clientWidth - 40);
  tm.append(treemap(data.ops.map(o => ({ name: o.name, value: o.self_ps, row: o })), {
    width, height: 300,
    label: r => `${r.name}\n${r.row.category || ''}\n${dur(r.value)} self (${pct(r.row.device_time_pct)})`,
    group: r => r.row.category,
    onClick: r => tbl.setFilter(r.name),
  }));
  const t = el('div');
  view.append(t);
  tbl = table(t, { columns: opColumns(by), rows: data.ops, sort: 'self_ps', csvName: `ops_by_${by}.csv`, filter: ctx.params.get('q') || '', onFilter: q => ctx.setParams({ q }) });
}
