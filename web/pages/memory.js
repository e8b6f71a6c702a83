// Memory: each allocator's in-use timeline with its peak marked; click the chart to
// list the allocations live at that time (api/memory/live). Below, the device-memory
// pprof by device, kind and allocating call site, and a program's memory as XLA
// planned it (api/memory/buffers, XProf's memory viewer): the heap over program
// order, its peak and the buffers live there.
import uPlot from '../vendor/uPlot.esm.js';
import { el, svg, clear, card, color } from '../lib/dom.js';
import { dur, count, bytes, pct } from '../lib/format.js';
import { table } from '../lib/table.js';
import { opLink } from '../lib/nav.js';

export const title = 'Memory';

const LIVE_TOP = 200;
// Axis steps in bytes: 1, 2, 4, … × 1, 1 Ki, 1 Mi, 1 Gi, 1 Ti, so ticks read 256 MiB, 512 MiB.
const BINARY_STEPS = [0, 1, 2, 3, 4].flatMap(k => [1, 2, 4, 8, 16, 32, 64, 128, 256, 512].map(m => m * 1024 ** k));

const liveColumns = [
  { key: 'bytes', label: 'size', num: true, fmt: bytes },
  { key: 'requested_bytes', label: 'requested', num: true, fmt: bytes },
  // No op recorded: the program whose run made it, and what it is in that program's plan.
  { key: 'op', label: 'op', fmt: (v, r) => v || (r.program ? `${r.program}: ${r.planned_as || 'size not in its plan'}` : '(unknown op)') },
  { key: 'shape', label: 'shape' },
  { key: 'data_type', label: 'type' },
  { key: 'region_type', label: 'region' },
  { key: 'allocated_at_ps', label: 'allocated at', num: true, fmt: dur },
];

export async function render(view, ctx) {
  const m = await ctx.get('memory', { top: LIVE_TOP });
  if (ctx.stale()) return;
  view.append(el('h1', {}, 'Memory'));
  if (!m.allocators.length) {
    view.append(el('p', { class: 'muted', id: 'mem-none' },
      'no allocator events (MemoryAllocation) in this profile: XLA:CPU does not record them; GPU and TPU captures do with the default host tracer level (2)'));
  } else {
    allocatorView(view, ctx, m);
  }
  if (m.device_memory_profile) pprofView(view, m.device_memory_profile);
  await programView(view, ctx);
}

function allocatorView(view, ctx, m) {
  const key = a => `${a.host}\u0000${a.name}`;
  const want = `${ctx.params.get('allocator_host') || ''}\u0000${ctx.params.get('allocator') || ''}`;
  const a = m.allocators.find(x => key(x) === want) || m.allocators[0];
  const pick = el('select', { id: 'mem-allocator' },
    ...m.allocators.map(x => el('option', { value: key(x), selected: x === a }, `${x.host} · ${x.name} (peak ${bytes(x.peak_in_use_bytes)})`)));
  pick.addEventListener('change', () => {
    const [h, n] = pick.value.split('\u0000');
    ctx.go('memory', { allocator_host: h, allocator: n });
  });
  view.append(el('div', { class: 'controls' }, el('label', {}, 'allocator ', pick)));

  view.append(el('div', { class: 'cards', id: 'mem-cards' },
    card('peak in use', bytes(a.peak_in_use_bytes), `at ${dur(a.peak_time_ps)}`),
    card('capacity', a.capacity_bytes === null ? '—' : bytes(a.capacity_bytes),
      a.capacity_bytes ? `peak is ${pct((100 * a.peak_in_use_bytes) / a.capacity_bytes)}` : 'not reported'),
    card('lifetime peak', bytes(a.lifetime_peak_bytes), 'since the process started'),
    card('fragmentation', a.fragmentation_at_peak.toFixed(2), `at the peak; max ${a.max_fragmentation.toFixed(2)}`),
    card('allocations', count(a.allocations), `${count(a.deallocations)} frees`),
  ));

  view.append(el('h2', {}, 'In use over time'),
    el('p', { class: 'muted small' }, 'the dot marks the peak; click the chart to list the allocations live at that time (drag to zoom, double-click to reset)'));
  const chartBox = el('div', { class: 'chartbox', id: 'mem-chart' });
  view.append(chartBox);

  const liveHead = el('h2', { id: 'mem-live-title' });
  const liveInfo = el('p', { class: 'muted', id: 'mem-live-info' });
  const liveBox = el('div', { id: 'mem-live' });
  view.append(liveHead, liveInfo, liveBox);

  let marked = null; // time (ps) of the live list shown, drawn as a line
  const showLive = (rows, head, info, timePs) => {
    clear(liveBox);
    liveHead.textContent = head;
    liveInfo.textContent = info;
    liveBox.dataset.timePs = timePs === null ? '' : String(timePs);
    table(liveBox, { columns: liveColumns, rows, sort: 'bytes', csvName: `live_${a.name}.csv` });
  };
  const showPeak = () => {
    marked = null;
    showLive(a.live_at_peak, `Live at the peak (${bytes(a.peak_in_use_bytes)} at ${dur(a.peak_time_ps)})`,
      `largest ${count(a.live_at_peak.length)} listed; ${bytes(a.untracked_at_peak_bytes)} in use was not seen allocated in the capture`, null);
  };
  let seq = 0;
  const showAt = async timePs => {
    const mine = ++seq;
    marked = timePs;
    u.redraw(false);
    ctx.setParams({ t_ps: timePs });
    const live = await ctx.get('memory/live', { allocator_host: a.host, allocator: a.name, time_ps: timePs, top: LIVE_TOP });
    if (mine !== seq || ctx.stale()) return;
    const shown = live.live.length < live.live_count ? `largest ${count(live.live.length)} of ${count(live.live_count)} listed` : `${count(live.live_count)} allocations`;
    showLive(live.live, `Live at ${dur(timePs)}: ${bytes(live.in_use_bytes)} in use`,
      `${shown}; ${bytes(live.untracked_bytes)} in use was not seen allocated in the capture`, timePs);
  };

  const xs = a.timeline.map(p => p.time_ps / 1e9);
  const ys = a.timeline.map(p => p.in_use_bytes);
  const peakX = a.peak_time_ps / 1e9, peakY = a.peak_in_use_bytes;
  const u = new uPlot({
    width: Math.max(320, chartBox.clientWidth - 16 || view.clientWidth - 40),
    height: 280,
    scales: { x: { time: false } },
    axes: [
      { label: 'time', values: (_, vals) => vals.map(v => dur(v * 1e9)) },
      { label: 'in use', size: 80, incrs: BINARY_STEPS, values: (_, vals) => vals.map(v => bytes(v)) },
    ],
    series: [
      { label: 'time', value: (_, v) => (v === null ? '' : dur(v * 1e9)) },
      { label: 'in use', stroke: '#3b6fd4', fill: 'rgba(59,111,212,0.12)', width: 1.5, paths: uPlot.paths.stepped({ align: 1 }), points: { show: false }, value: (_, v) => (v === null ? '' : bytes(v)) },
    ],
    hooks: {
      draw: [plot => {
        const c = plot.ctx;
        c.save();
        const px = plot.valToPos(peakX, 'x', true), py = plot.valToPos(peakY, 'y', true);
        c.fillStyle = '#b42318';
        c.beginPath();
        c.arc(px, py, 5 * devicePixelRatio, 0, 2 * Math.PI);
        c.fill();
        c.font = `${11 * devicePixelRatio}px system-ui, sans-serif`;
        c.textAlign = px > plot.bbox.left + plot.bbox.width * 0.8 ? 'right' : 'left';
        c.fillText(` peak ${bytes(peakY)} `, px, py - 8 * devicePixelRatio);
        if (marked !== null) {
          const mx = plot.valToPos(marked / 1e9, 'x', true);
          c.strokeStyle = '#c77b28';
          c.setLineDash([4 * devicePixelRatio, 3 * devicePixelRatio]);
          c.lineWidth = devicePixelRatio;
          c.beginPath();
          c.moveTo(mx, plot.bbox.top);
          c.lineTo(mx, plot.bbox.top + plot.bbox.height);
          c.stroke();
        }
        c.restore();
      }],
    },
  }, [xs, ys], chartBox);
  // A click (not a drag) picks a time.
  let down = null;
  u.over.addEventListener('mousedown', e => { down = [e.clientX, e.clientY]; });
  u.over.addEventListener('click', e => {
    if (down && Math.hypot(e.clientX - down[0], e.clientY - down[1]) > 3) return;
    const ms = u.posToVal(u.cursor.left, 'x');
    if (Number.isFinite(ms)) showAt(Math.round(ms * 1e9));
  });
  window.stepscopeMemory = { chart: u };

  const t = Number(ctx.params.get('t_ps'));
  if (ctx.params.get('t_ps') && Number.isFinite(t)) showAt(t); else showPeak();
}

function pprofView(view, p) {
  view.append(el('h2', {}, 'Device memory profile'),
    el('p', { class: 'muted', id: 'mem-pprof' }, `${p.path}: ${bytes(Math.max(0, p.total_bytes))} in ${count(Math.max(0, p.buffer_count))} buffers`));
  const shares = (label, v) => el('p', {}, el('strong', {}, `${label}: `), v.map(s => `${s.name || '?'} ${bytes(s.bytes)}`).join(', ') || '—');
  view.append(shares('by device', p.by_device), shares('by kind', p.by_kind));
  const box = el('div', { id: 'mem-sites' });
  view.append(box);
  const total = Math.max(1, p.total_bytes);
  table(box, {
    columns: [
      { key: 'site', label: 'allocated at' },
      { key: 'bytes', label: 'bytes', num: true, fmt: bytes },
      { key: 'share', label: 'share', num: true, fmt: v => pct(v) },
      { key: 'stack', label: 'stack (leaf first)', fmt: v => v.join(' ← ') },
    ],
    rows: p.by_site.map(s => ({ ...s, share: (100 * s.bytes) / total })),
    sort: 'bytes',
    csvName: 'memory_by_site.csv',
  });
}

// A program's memory plan. A profile without HLO (trace JSON) has none: said in a line.
async function programView(view, ctx) {
  const box = el('section', { id: 'mem-program' });
  view.append(box);
  const params = { top: LIVE_TOP, program: ctx.params.get('program') || '', memory_space: ctx.params.get('memory_space') || '' };
  let b;
  try {
    b = await ctx.get('memory/buffers', params);
  } catch (err) {
    if (ctx.stale()) return;
    box.append(el('h2', {}, 'Program memory plan'), el('p', { class: 'muted', id: 'mem-program-none' }, String(err.message || err)));
    return;
  }
  if (ctx.stale()) return;
  box.append(el('h2', {}, 'Program memory plan'),
    el('p', { class: 'muted small' }, 'what XLA planned for one program: its allocations, and its temporaries replayed over program order from the heap simulator (XProf\'s memory viewer)'));
  const pick = el('select', { id: 'mem-program-pick' },
    ...b.programs.map(p => el('option', { value: p.program, selected: p.program === b.program }, `${p.program} (${bytes(p.allocated_bytes)})`)));
  pick.addEventListener('change', () => ctx.go('memory', { ...Object.fromEntries(ctx.params), program: pick.value }));
  const controls = el('div', { class: 'controls' }, el('label', {}, 'program ', pick));
  const spaces = [b.memory_space, ...(b.other_memory_spaces || []).map(s => s.memory_space)].sort((x, y) => x - y);
  if (spaces.length > 1) {
    const space = el('select', { id: 'mem-space-pick' },
      ...spaces.map(n => el('option', { value: String(n), selected: n === b.memory_space }, n === 0 ? '0 (device memory)' : String(n))));
    space.addEventListener('change', () => ctx.go('memory', { ...Object.fromEntries(ctx.params), program: b.program, memory_space: space.value }));
    controls.append(el('label', {}, ' memory space ', space));
  }
  box.append(controls);
  const h = b.heap;
  box.append(el('div', { class: 'cards', id: 'mem-program-cards' },
    card('peak', bytes(b.peak_bytes), h ? `at ${h.peak_instruction || 'event ' + h.peak_event}` : 'every buffer held throughout'),
    card('allocated', bytes(b.allocated_bytes), `${count(b.allocation_count)} allocations`),
    card('parameters', bytes(b.parameter_bytes), `outputs ${bytes(b.output_bytes)}`),
    card('temporaries', bytes(b.temporary_bytes), h ? `heap peak ${bytes(h.peak_live_bytes)} live` : 'no heap trace'),
    card('constants', bytes(b.constant_bytes), `thread-local ${bytes(b.thread_local_bytes)}`),
  ));
  if (h && h.usage.length) {
    box.append(el('h3', {}, 'Held over program order'),
      el('p', { class: 'muted small' }, `after each of the heap's ${count(h.events)} events: the held allocations plus the live temporaries; the dot marks the peak`));
    const chartBox = el('div', { class: 'chartbox', id: 'mem-program-chart' });
    box.append(chartBox);
    const xs = h.usage.map(p => p.event), ys = h.usage.map(p => p.bytes);
    const u = new uPlot({
      width: Math.max(320, chartBox.clientWidth - 16 || view.clientWidth - 40),
      height: 240,
      scales: { x: { time: false }, y: { range: (_, lo, hi) => [0, hi * 1.05] } },
      axes: [
        { label: 'heap event (program order)' },
        { label: 'held', size: 80, incrs: BINARY_STEPS, values: (_, vals) => vals.map(v => bytes(v)) },
      ],
      series: [
        { label: 'event', value: (_, v) => (v === null ? '' : `${v} ${h.usage[xs.indexOf(v)]?.instruction || ''}`) },
        { label: 'held', stroke: '#3b6fd4', fill: 'rgba(59,111,212,0.12)', width: 1.5, paths: uPlot.paths.stepped({ align: 1 }), points: { show: false }, value: (_, v) => (v === null ? '' : bytes(v)) },
      ],
      hooks: {
        draw: [plot => {
          const c = plot.ctx;
          c.save();
          const px = plot.valToPos(h.peak_event, 'x', true), py = plot.valToPos(b.peak_bytes, 'y', true);
          c.fillStyle = '#b42318';
          c.beginPath();
          c.arc(px, py, 5 * devicePixelRatio, 0, 2 * Math.PI);
          c.fill();
          c.restore();
        }],
      },
    }, [xs, ys], chartBox);
    window.stepscopeProgramMemory = { chart: u };
  }
  if (h && h.lifetimes && h.lifetimes.length) box.append(lifetimeChart(b, h));
  const shown = b.live_at_peak.length < b.live_at_peak_count ? `largest ${count(b.live_at_peak.length)} of ${count(b.live_at_peak_count)}` : `${count(b.live_at_peak_count)} buffers`;
  box.append(el('h3', {}, `Live at the peak (${bytes(b.live_at_peak_bytes)})`), el('p', { class: 'muted small' }, `${shown}; buffers that share memory are counted once`));
  const liveBox = el('div', { id: 'mem-program-live' });
  box.append(liveBox);
  table(liveBox, {
    columns: [
      { key: 'size_bytes', label: 'size', num: true, fmt: bytes },
      { key: 'kind', label: 'kind', fmt: v => v.replace('_', '-') },
      { key: 'instruction', label: 'instruction', fmt: (v, r) => r.shape_index ? el('span', {}, opLink(v, b.program), el('span', { class: 'muted' }, ` {${r.shape_index.join(',')}}`)) : opLink(v, b.program) },
      { key: 'opcode', label: 'opcode' },
      { key: 'shape', label: 'shape' },
      { key: 'source', label: 'source' },
      { key: 'op_name', label: 'jax name' },
    ],
    rows: b.live_at_peak,
    sort: 'size_bytes',
    csvName: `buffers_${b.program}.csv`,
  });
}

/** The heap's buffers over program order (XProf's buffer lifetimes): a bar each, from
 * the event that took its memory to the one that freed it, in order of birth; its
 * height by size; the peak event a red line; hover for its HLO value and shape. */
function lifetimeChart(b, h) {
  const lives = h.lifetimes.slice().sort((x, y) => x.from_event - y.from_event || y.size_bytes - x.size_bytes);
  const W = 900, L = 10, R = 10, ROW = 4, T = 6;
  const H = T + lives.length * ROW + 22;
  const x = e => L + ((W - L - R) * e) / Math.max(1, h.events - 1);
  const root = svg('svg', { id: 'mem-lifetimes', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img' });
  lives.forEach((l, i) => {
    const bar = svg('rect', {
      x: x(l.from_event), y: T + i * ROW, width: Math.max(1, x(l.to_event) - x(l.from_event)), height: ROW - 1,
      fill: color(l.kind === 'temporary' ? l.opcode || 'temporary' : l.kind), class: 'lifetime',
      'data-buffer': l.buffer_id, 'data-from': l.from_event, 'data-to': l.to_event,
    });
    bar.append(svg('title', {}, `${l.instruction}${l.shape ? ` ${l.shape}` : ''} · ${bytes(l.size_bytes)}\nevents ${l.from_event}–${l.to_event}${l.op_name ? `\n${l.op_name}` : ''}`));
    root.append(bar);
  });
  const px = x(h.peak_event);
  root.append(svg('line', { x1: px, y1: 0, x2: px, y2: H - 18, class: 'peak-line', stroke: '#b42318', 'stroke-width': 1.5 }));
  root.append(svg('text', { x: Math.min(px + 4, W - 140), y: H - 6, class: 'tick' }, `peak: event ${h.peak_event}`));
  const listed = h.lifetimes.length < h.lifetime_count ? `the largest ${count(h.lifetimes.length)} of ${count(h.lifetime_count)}` : `all ${count(h.lifetime_count)}`;
  return el('div', {},
    el('h3', {}, 'Buffer lifetimes'),
    el('p', { class: 'muted small', id: 'mem-lifetimes-note' }, `the heap's buffers (${listed}; those sharing memory as one) over its ${count(h.events)} events, in order of birth; hover a bar for its HLO value and shape; the red line is the peak`),
    el('div', { class: 'chart' }, root));
}
