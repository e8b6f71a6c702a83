// Scopes: the user's host scopes (TraceAnnotation) nested, per step, with the device
// time each kept busy or launched, and the step's input work (`stepscope scopes`).
import { el } from '../lib/dom.js';
import { dur, count, pct } from '../lib/format.js';
import { table } from '../lib/table.js';

export const title = 'Scopes';

export async function render(view, ctx) {
  const data = await ctx.get('scopes');
  if (ctx.stale()) return;
  view.append(el('h1', {}, 'Host scopes'));
  if (!data.scopes.length) {
    view.append(el('p', { class: 'muted' },
      'no host scopes found: name the parts of your step with ',
      el('code', {}, 'with jax.profiler.TraceAnnotation("data_loading"):'),
      ' (or stepscope.scope / profile_scope) inside the step annotation, with host tracing on'));
    return;
  }
  view.append(el('p', { class: 'muted' }, data.step_count
    ? `${count(data.scopes.length)} scope paths over ${count(data.step_count)} steps of ${dur(data.step_ps)} on average`
      + (Math.abs(data.host_step_ps - data.step_ps) * 100 > data.step_ps
        ? `; ${dur(data.host_step_ps)} on the host, where scopes run (% step is of that)` : '')
    : `${count(data.scopes.length)} scope paths; no steps, so no per-step figures`));
  const i = data.input;
  if (data.step_count && i.host_input_ps > 0) {
    view.append(el('p', { class: `input-note${i.device_idle_input_pct > 20 ? ' warn' : ''}` },
      `Input work (${i.names.join(', ')}): ${dur(i.host_input_ps)} a step on the host (${pct(i.host_input_pct)}); `,
      `the device had nothing to run for ${dur(i.device_idle_input_ps)} of it (${pct(i.device_idle_input_pct)} of the step).`));
  }
  const work = data.scopes.some(r => r.device_work_ps !== undefined);
  const rows = data.scopes.map((r, order) => ({ ...r, order }));
  const columns = [
    { key: 'path', label: 'scope', sortValue: r => r.order,
      fmt: (v, r) => {
        const s = el('span', { class: 'scope-name', title: v }, r.name, r.input ? el('span', { class: 'tag' }, 'input') : null);
        s.style.paddingLeft = `${r.depth * 16}px`; // through the CSSOM: the CSP refuses style attributes
        return s;
      } },
    { key: 'count', label: 'count', num: true, fmt: count },
    { key: 'total_ps', label: 'total', num: true, fmt: dur },
    { key: 'self_ps', label: 'self', num: true, fmt: dur },
    { key: 'per_step_ps', label: 'per step', num: true, fmt: dur },
    { key: 'step_pct', label: '% step', num: true, fmt: v => (v === undefined ? '' : pct(v)) },
    { key: 'device_busy_ps', label: 'device busy', num: true, fmt: dur, title: 'an op ran on a device while the scope was open' },
  ];
  if (work) columns.push({ key: 'device_work_ps', label: 'launched', num: true, fmt: dur, title: 'device time of the work launched inside the scope' });
  if (new Set(data.scopes.map(r => r.host)).size > 1) columns.push({ key: 'host', label: 'host' });
  const t = el('div');
  view.append(t);
  table(t, { columns, rows, sort: 'path', desc: false, csvName: 'scopes.csv' });
}
