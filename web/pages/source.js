// Source: device time by the user's Python — a flame graph by stack (click to zoom,
// search) and the table by line (`stepscope ops --by stack|line`).
import { el } from '../lib/dom.js';
import { dur, count, pct } from '../lib/format.js';
import { table } from '../lib/table.js';
import { flameGraph } from '../lib/flame.js';

export const title = 'Source';

const base = f => f.split(/[\\/]/).pop();
const shortFn = f => f.replaceAll('.<locals>.', '.');

/** One frame as the flame graph names it: `function (file.py:LINE)`. */
export function frameName(f) {
  const at = `${base(f.file)}:${f.line}`;
  return f.function ? `${shortFn(f.function)} (${at})` : at;
}

export async function render(view, ctx) {
  const [stacks, lines] = await Promise.all([
    ctx.get('ops', { by: 'stack', top: 'all' }),
    ctx.get('ops', { by: 'line', top: 'all' }),
  ]);
  if (ctx.stale()) return;
  view.append(el('h1', {}, 'Device time by source'));
  if (!stacks.ops.length) {
    view.append(el('p', { class: 'muted' }, 'no XLA ops found in this profile'));
    return;
  }
  const sourced = stacks.ops.filter(r => r.stack).reduce((s, r) => s + r.self_ps, 0);
  view.append(el('p', { class: 'muted' },
    `${dur(stacks.op_time_ps)} of device time; ${pct(100 * sourced / Math.max(1, stacks.op_time_ps))} of it from ops whose HLO names the Python that made them. `,
    'Export the stacks for inferno or speedscope with ', el('code', {}, 'stepscope export PATH -o device.folded'), '.'));
  const width = Math.max(400, view.clientWidth - 40);
  view.append(flameGraph(
    stacks.ops.map(r => ({ frames: r.stack ? r.stack.map(frameName) : [r.name], value: r.self_ps, row: r })),
    { width, fmt: dur, rootName: 'device time' }));
  view.append(el('h2', {}, 'By line'));
  const rows = lines.ops.map(r => ({ ...r, function: r.stack ? shortFn(r.stack[0].function) : '' }));
  const t = el('div');
  view.append(t);
  table(t, {
    columns: [
      { key: 'name', label: 'line', title: 'the innermost frame in your code' },
      { key: 'function', label: 'function' },
      { key: 'self_ps', label: 'self', num: true, fmt: dur },
      { key: 'device_time_pct', label: '%', num: true, fmt: v => pct(v) },
      { key: 'count', label: 'count', num: true, fmt: count },
      { key: 'avg_ps', label: 'avg', num: true, fmt: dur },
      { key: 'category', label: 'category' },
    ],
    rows, sort: 'self_ps', csvName: 'ops_by_line.csv',
  });
}
