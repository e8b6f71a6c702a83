// Roofline: each op placed by its FLOPs per byte (x) and achieved FLOP/s (y), log-log,
// sized by its self time, under the device's roofs (`stepscope roofline`).
import { el, svg } from '../lib/dom.js';
import { dur, pct } from '../lib/format.js';
import { opLink, hashFor } from '../lib/nav.js';
import { table } from '../lib/table.js';

export const title = 'Roofline';

/** A rate with an SI prefix and 3 significant digits: `255 TFLOP/s`. */
export function si(v, unit) {
  if (v === null || v === undefined) return '';
  // Three significant digits, trailing zeros after the point dropped (100, 2.5, 0.001).
  const num = x => String(Number(x.toPrecision(3)));
  for (const [p, f] of [['P', 1e15], ['T', 1e12], ['G', 1e9], ['M', 1e6], ['k', 1e3]]) {
    if (Math.abs(v) >= f) return `${num(v / f)} ${p}${unit}`.trim();
  }
  return `${num(v)} ${unit}`.trim();
}

/** Roofs to draw, as `--peak-flops` and `--peak-bandwidth` take them (`2T`, `100G`): kept in the page's address. */
function roofsForm(ctx, given) {
  const flops = el('input', { id: 'roof-flops', size: 8, placeholder: 'e.g. 2T', value: given.peak_flops || '' });
  const bw = el('input', { id: 'roof-bandwidth', size: 8, placeholder: 'e.g. 100G', value: given.peak_bandwidth || '' });
  const apply = el('button', { type: 'submit', id: 'roof-apply' }, 'draw these roofs');
  const form = el('form', { class: 'controls', id: 'roofs-form' },
    el('label', {}, 'peak FLOP/s ', flops), el('label', {}, ' memory bandwidth B/s ', bw), ' ', apply,
    el('span', { class: 'muted small' }, ' (k, M, G, T, P; over the profile\'s and the data sheets\' peaks)'));
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    ctx.go('roofline', { peak_flops: flops.value.trim() || null, peak_bandwidth: bw.value.trim() || null });
  });
  return form;
}

/** Where a peak came from, when not the profile. */
const FROM = { user: ' (yours)', data_sheet: ' (data sheet)' };

export async function render(view, ctx) {
  // Roofs the page was given (kept in its address), over the profile's and data sheets'.
  const given = { peak_flops: ctx.params.get('peak_flops') || null, peak_bandwidth: ctx.params.get('peak_bandwidth') || null };
  const data = await ctx.get('roofline', { top: 'all', ...given });
  if (ctx.stale()) return;
  view.append(el('h1', {}, 'Roofline'));
  for (const d of data.devices) {
    const name = `${d.device}${d.model ? ` (${d.model})` : ''}`;
    const parts = [];
    if (d.peak_flops_per_s) parts.push(`peak ${si(d.peak_flops_per_s, 'FLOP/s')}${FROM[d.peak_flops_source] || ''}`);
    if (d.peak_bytes_per_s) parts.push(`memory ${si(d.peak_bytes_per_s, 'B/s')}${FROM[d.peak_bytes_source] || ''}`);
    if (d.ridge_flops_per_byte) parts.push(`ridge ${d.ridge_flops_per_byte.toFixed(0)} FLOP/byte`);
    view.append(el('p', { class: 'roofs' }, parts.length
      ? `${name}: ${parts.join(' · ')}`
      : `${name}: roofs unknown — the profile records no peaks, it names no CPU or device model with published ones (JAX's CPU captures name none): give them below`));
  }
  view.append(roofsForm(ctx, given));
  if (!data.ops.length) {
    view.append(el('p', { class: 'muted' }, 'no op has FLOPs and bytes: the profile records none and its HLO gave none'));
    return;
  }
  const chartBox = el('div', { class: 'roofline-chart' });
  view.append(chartBox);
  chartBox.append(chart(data, Math.max(480, Math.min(1100, view.clientWidth - 16))));
  view.append(el('p', { class: 'muted' },
    'Each op is a point: its FLOPs per byte across, its achieved FLOP/s up, its area its self time. ',
    'The slanted line is the memory roof (bandwidth × intensity), the flat ones the compute peaks its ops can reach; click a point for its HLO.'));
  const columns = [
    { key: 'name', label: 'op', fmt: (v, r) => opLink(v, r.module) },
    { key: 'self_ps', label: 'self', num: true, fmt: dur },
    { key: 'arithmetic_intensity', label: 'FLOP/byte', num: true, fmt: v => (v === undefined || v === null ? '' : v.toFixed(1)) },
    { key: 'flops_per_s', label: 'achieved', num: true, fmt: v => si(v, 'FLOP/s') },
    { key: 'bytes_per_s', label: 'memory', num: true, fmt: v => si(v, 'B/s') },
    { key: 'roof_flops_per_s', label: 'roof', num: true, fmt: v => si(v, 'FLOP/s') },
    { key: 'roof_pct', label: '% roof', num: true, fmt: v => (v === undefined || v === null ? '' : pct(v)) },
    { key: 'bound', label: 'bound' },
  ];
  const t = el('div');
  view.append(t);
  table(t, { columns, rows: data.ops, sort: 'self_ps', csvName: 'roofline.csv' });
}

/** The log-log chart as an SVG element `width` wide. */
function chart(data, width) {
  const height = Math.round(width * 0.55);
  const m = { l: 70, r: 20, t: 14, b: 44 };
  const ops = data.ops.filter(o => o.arithmetic_intensity > 0 && o.flops_per_s > 0);
  const dev = data.devices.find(d => d.peak_flops_per_s && d.peak_bytes_per_s) || {};
  // Flat roofs: the device's headline peak and each compute-bound op's own (per type).
  const flats = new Set();
  if (dev.peak_flops_per_s) flats.add(dev.peak_flops_per_s);
  for (const o of ops) if (o.bound === 'compute' && o.roof_flops_per_s) flats.add(o.roof_flops_per_s);
  const xs = ops.map(o => o.arithmetic_intensity);
  const ys = ops.map(o => o.flops_per_s).concat([...flats]);
  if (dev.ridge_flops_per_byte) xs.push(dev.ridge_flops_per_byte);
  const decade = (v, up) => 10 ** (up ? Math.ceil(Math.log10(v)) : Math.floor(Math.log10(v)));
  const x0 = decade(Math.min(...xs) / 1.5, false), x1 = decade(Math.max(...xs) * 1.5, true);
  const y0 = decade(Math.min(...ys) / 1.5, false), y1 = decade(Math.max(...ys) * 1.5, true);
  const X = v => m.l + ((Math.log10(v) - Math.log10(x0)) / (Math.log10(x1) - Math.log10(x0))) * (width - m.l - m.r);
  const Y = v => height - m.b - ((Math.log10(v) - Math.log10(y0)) / (Math.log10(y1) - Math.log10(y0))) * (height - m.t - m.b);
  const s = svg('svg', { width, height, viewBox: `0 0 ${width} ${height}`, class: 'roofline', role: 'img', 'aria-label': 'roofline chart' });
  // Axes with a tick at each decade.
  for (let v = x0; v <= x1 * 1.0001; v *= 10) {
    s.append(svg('line', { x1: X(v), x2: X(v), y1: m.t, y2: height - m.b, class: 'grid' }));
    s.append(svg('text', { x: X(v), y: height - m.b + 16, 'text-anchor': 'middle', class: 'tick' }, si(v, '')));
  }
  for (let v = y0; v <= y1 * 1.0001; v *= 10) {
    s.append(svg('line', { x1: m.l, x2: width - m.r, y1: Y(v), y2: Y(v), class: 'grid' }));
    s.append(svg('text', { x: m.l - 6, y: Y(v) + 4, 'text-anchor': 'end', class: 'tick' }, si(v, '')));
  }
  s.append(svg('text', { x: (m.l + width - m.r) / 2, y: height - 6, 'text-anchor': 'middle', class: 'axis-label' }, 'FLOPs per byte'));
  s.append(svg('text', { x: 14, y: (m.t + height - m.b) / 2, 'text-anchor': 'middle', class: 'axis-label', transform: `rotate(-90 14 ${(m.t + height - m.b) / 2})` }, 'FLOP/s'));
  // Roofs: bandwidth × intensity up to each flat peak.
  const bw = dev.peak_bytes_per_s;
  for (const peak of [...flats].sort((a, b) => a - b)) {
    const ridge = bw ? peak / bw : x0;
    const g = svg('g', { class: `roof${peak === dev.peak_flops_per_s ? ' headline' : ''}`, 'data-peak': peak });
    if (bw) g.append(svg('line', { x1: X(Math.max(x0, ridge / 1e6)), y1: Y(Math.max(x0, ridge / 1e6) * bw), x2: X(ridge), y2: Y(peak) }));
    g.append(svg('line', { x1: X(Math.max(ridge, x0)), y1: Y(peak), x2: X(x1), y2: Y(peak) }));
    g.append(svg('text', { x: width - m.r - 4, y: Y(peak) - 4, 'text-anchor': 'end', class: 'roof-label' }, si(peak, 'FLOP/s')));
    g.append(svg('title', {}, `roof ${si(peak, 'FLOP/s')}${bw ? `, ridge ${(peak / bw).toFixed(0)} FLOP/byte` : ''}`));
    s.append(g);
  }
  // Ops: the largest first so the small stay on top and clickable.
  const maxSelf = Math.max(...ops.map(o => o.self_ps));
  for (const o of [...ops].sort((a, b) => b.self_ps - a.self_ps)) {
    const r = 3 + 14 * Math.sqrt(o.self_ps / maxSelf);
    const c = svg('circle', {
      cx: X(o.arithmetic_intensity), cy: Y(o.flops_per_s), r: r.toFixed(1),
      class: `op ${o.bound || ''}`, 'data-name': o.name, 'data-module': o.module || '',
    });
    c.append(svg('title', {}, `${o.name}${o.module ? ` (${o.module})` : ''}\n${dur(o.self_ps)} self · ${o.arithmetic_intensity.toFixed(1)} FLOP/byte\n`
      + `${si(o.flops_per_s, 'FLOP/s')} of ${si(o.roof_flops_per_s, 'FLOP/s')} (${pct(o.roof_pct)})${o.bound ? ` · ${o.bound}-bound` : ''}`));
    c.addEventListener('click', () => { location.hash = hashFor('hlo', { op: o.name, module: o.module || null }); });
    s.append(c);
  }
  return s;
}
