// Kernel table: GPU kernels with launch configuration.
import { el } from '../lib/dom.js';
import { dur, count, pct, bytes } from '../lib/format.js';
import { table } from '../lib/table.js';
import { opLink } from '../lib/nav.js';

export const title = 'Kernels';

const dims = d => (d && d.some(x => x) ? d.join('×') : '');

export async function render(view, ctx) {
  const k = await ctx.get('kernels', { top: 'all' });
  if (ctx.stale()) return;
  view.append(el('h1', {}, 'Kernels'));
  if (!k.kernels.length) {
    view.append(el('p', { class: 'muted' }, 'no GPU kernels in this profile (kernels are recorded on GPU captures)'));
    return;
  }
  view.append(el('p', { class: 'muted' }, `${dur(k.kernel_time_ps)} of kernel time in ${count(k.kernels.length)} kernels`));
  const t = el('div');
  view.append(t);
  table(t, {
    columns: [
      { key: 'name', label: 'kernel' },
      // The op's HLO view, in the kernel's own program where its id is known.
      { key: 'op', label: 'op', fmt: (v, r) => (v && r.module ? opLink(v, r.program || (r.program_id !== undefined && r.program_id !== null ? `${r.module}(${r.program_id})` : r.module)) : v) },
      { key: 'total_ps', label: 'total', num: true, fmt: dur },
      { key: 'time_pct', label: '%', num: true, fmt: v => pct(v) },
      { key: 'count', label: 'launches', num: true, fmt: count },
      { key: 'avg_ps', label: 'avg', num: true, fmt: dur },
      { key: 'min_ps', label: 'min', num: true, fmt: dur },
      { key: 'max_ps', label: 'max', num: true, fmt: dur },
      { key: 'grid', label: 'grid', fmt: dims, sortValue: r => r.grid[0] * r.grid[1] * r.grid[2] },
      { key: 'block', label: 'block', fmt: dims, sortValue: r => r.block[0] * r.block[1] * r.block[2] },
      { key: 'registers_per_thread', label: 'regs', num: true },
      { key: 'shared_mem_bytes', label: 'shared mem', num: true, fmt: bytes },
      { key: 'occupancy_pct', label: 'occupancy', num: true, fmt: v => pct(v, 0) },
      { key: 'tensor_core', label: 'tensor core', fmt: v => (v ? 'yes' : '') },
      { key: 'module', label: 'module' },
    ],
    rows: k.kernels,
    sort: 'total_ps',
    csvName: 'kernels.csv',
  });
}
