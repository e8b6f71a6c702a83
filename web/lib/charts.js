// Charts: the step-time line chart (uPlot) and a stacked breakdown bar.
import uPlot from '../vendor/uPlot.esm.js';
import { el, color } from './dom.js';
import { dur } from './format.js';

/** Step time per step (ms) with device busy time (unless `busy` is false: a run with
 * no device activity recorded), as a uPlot chart in `host`. */
/** The median of `xs` (numbers), null for none. */
function median(xs) {
  const v = (xs || []).filter(x => x !== null && x !== undefined).slice().sort((a, b) => a - b);
  if (!v.length) return null;
  const m = (v.length - 1) / 2;
  return (v[Math.floor(m)] + v[Math.ceil(m)]) / 2;
}

/** A run's slowest step and a median one (`[slow, median]`), or null where they are one. */
export function slowAndMedian(steps) {
  if (!steps || steps.length < 2) return null;
  const byTime = steps.slice().sort((x, y) => x.duration_ps - y.duration_ps);
  const slow = byTime[byTime.length - 1], median = byTime[Math.floor((byTime.length - 1) / 2)];
  return slow === median ? null : [slow, median];
}

export function stepChart(host, steps, { width, height = 260, busy = true, onPick } = {}) {
  const xs = steps.map((_, i) => i);
  const ms = v => v / 1e9;
  const data = [xs, steps.map(s => ms(s.duration_ps))];
  if (busy) data.push(steps.map(s => ms(s.device_busy_ps)));
  const w = width || Math.max(320, host.clientWidth - 16);
  const opts = {
    width: w,
    height,
    scales: { x: { time: false } },
    axes: [
      { label: 'step', values: (u, vals) => vals.map(v => (steps[v] ? steps[v].step_num : '')) },
      { label: 'ms', size: 60 },
    ],
    // Off the chart, the legend gives each series' median (uPlot would leave it blank).
    series: [
      { label: 'step', value: (u, v) => (steps[v] ? `${steps[v].step_num} (${steps[v].host})` : 'median of all') },
      { label: 'step time', stroke: '#3b6fd4', width: 2, points: { show: steps.length < 200 }, value: (u, v) => dur((v ?? median(data[1])) * 1e9) },
      { label: 'device busy', stroke: '#2a9d5c', width: 1.5, value: (u, v) => dur((v ?? median(data[2])) * 1e9) },
    ].slice(0, data.length),
  };
  const box = el('div', { class: 'chart' });
  host.append(box);
  const u = new uPlot(opts, data, box);
  if (onPick) {
    // A click picks the step under the cursor (uPlot snaps it to the nearest point).
    box.classList.add('pickable');
    u.over.addEventListener('click', () => {
      const i = u.cursor.idx;
      if (i !== null && i !== undefined && steps[i]) onPick(steps[i]);
    });
  }
  return u;
}

/** A horizontal bar of `parts` ([{label, value}]) with a legend; widths set through CSSOM. */
export function stackedBar(parts, total) {
  const bar = el('div', { class: 'stack' });
  const legend = el('div', { class: 'legend' });
  for (const p of parts) {
    if (!(p.value > 0)) continue;
    const share = total > 0 ? (100 * p.value) / total : 0;
    const seg = el('div', { class: 'seg', title: `${p.label}: ${dur(p.value)} (${share.toFixed(1)}%)` });
    seg.style.width = `${share}%`;
    seg.style.background = p.color || color(p.label);
    bar.append(seg);
    const sw = el('span', { class: 'swatch' });
    sw.style.background = p.color || color(p.label);
    legend.append(el('span', { class: 'item' }, sw, `${p.label} ${dur(p.value)} (${share.toFixed(1)}%)`));
  }
  return el('div', { class: 'breakdown' }, bar, legend);
}
