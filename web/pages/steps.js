// Steps: every step's duration, device busy and idle time, compile overlap.
import { el } from '../lib/dom.js';
import { dur } from '../lib/format.js';
import { table } from '../lib/table.js';
import { stepChart } from '../lib/charts.js';

export const title = 'Steps';

export async function render(view, ctx) {
  const st = await ctx.get('steps');
  if (ctx.stale()) return;
  view.append(el('h1', {}, 'Steps'), el('p', { class: 'muted' }, `${st.steps.length} steps, found from ${st.source.replace(/_/g, ' ')}`));
  if (!st.steps.length) return;
  const chart = el('div', { class: 'chartbox' });
  view.append(chart);
  stepChart(chart, st.steps);
  const t = el('div');
  view.append(t);
  table(t, {
    columns: [
      { key: 'step_num', label: 'step', num: true },
      { key: 'host', label: 'host' },
      { key: 'name', label: 'name' },
      { key: 'start_ps', label: 'start', num: true, fmt: dur },
      { key: 'duration_ps', label: 'duration', num: true, fmt: dur },
      { key: 'device_busy_ps', label: 'device busy', num: true, fmt: dur },
      { key: 'device_idle_ps', label: 'device idle', num: true, fmt: dur },
      { key: 'compile_ps', label: 'compile', num: true, fmt: dur },
    ],
    rows: st.steps,
    sort: 'step_num',
    desc: false,
    csvName: 'steps.csv',
    onRow: r => ctx.go('timeline', { start_ps: r.start_ps, end_ps: r.start_ps + r.duration_ps }),
  });
}
