// Steps: every step's duration, device busy and idle time, compile overlap.
import { el } from '../lib/dom.js';
import { count, dur, pathWords } from '../lib/format.js';
import { table } from '../lib/table.js';
import { stepChart } from '../lib/charts.js';

export const title = 'Steps';

export async function render(view, ctx) {
  const st = await ctx.get('steps');
  if (ctx.stale()) return;
  const device = st.timing === 'device';
  const how = device
    ? '; the loop dispatches ahead of its device, so each step is timed on the device, up to the end of the work it launched (dispatch: its host span)'
    : '';
  view.append(el('h1', {}, 'Steps'), el('p', { class: 'muted', id: 'steps-timing' }, `${count(st.steps.length)} steps, found from ${st.source.replace(/_/g, ' ')}${how}`));
  if (!st.steps.length) return;
  const chart = el('div', { class: 'chartbox', id: 'steps-chart', title: 'click a point: that step in the timeline' });
  view.append(chart);
  const openStep = r => ctx.go('timeline', { start_ps: r.start_ps, end_ps: r.start_ps + r.duration_ps });
  stepChart(chart, st.steps, { onPick: openStep });
  const t = el('div');
  view.append(t);
  table(t, {
    columns: [
      { key: 'step_num', label: 'step', num: true },
      { key: 'host', label: 'host' },
      { key: 'name', label: 'name' },
      { key: 'start_ps', label: 'start', num: true, fmt: dur },
      { key: 'duration_ps', label: 'duration', num: true, fmt: (v, r) => r && r.cut ? `${dur(v)} (cut)` : dur(v) },
      ...(device ? [{ key: 'host_duration_ps', label: 'dispatch', num: true, fmt: dur }] : []),
      { key: 'device_busy_ps', label: 'device busy', num: true, fmt: dur },
      ...(st.steps.some(s => s.device_work_ps != null) ? [{ key: 'device_work_ps', label: 'launched', num: true, fmt: dur }] : []),
      { key: 'device_idle_ps', label: 'device idle', num: true, fmt: dur },
      { key: 'compile_ps', label: 'compile', num: true, fmt: dur },
      ...(st.steps.some(s => s.critical_path) ? [{ key: 'critical_path', label: 'critical path', fmt: pathWords }] : []),
    ],
    rows: st.steps,
    sort: 'step_num',
    desc: false,
    csvName: 'steps.csv',
    numKey: 'step_num',
    placeholder: 'filter: 1999, 100-200, >1990, or a name…',
    onRow: openStep,
  });
}

