// The timeline: every plane line a track, drawn on a canvas from server tiles that are
// already merged per pixel (api/timeline/tiles, the tracks on screen in one request),
// so any window of any profile draws from O(width) boxes and nothing is dropped when
// zoomed in. Each tile is rendered once into a bitmap; a frame draws one image per track.
//
// Keys: W/S zoom in/out, A/D pan. Mouse (as in Perfetto): the wheel scrolls the tracks,
// ctrl+wheel zooms at the pointer, shift+wheel pans, drag pans, a drag in the ruler (or
// shift+drag) selects an area, click shows an event's stats (a merged box zooms in).
import { api } from '../lib/api.js';
import { el, clear, colorRgb, inkOn } from '../lib/dom.js';
import { dur, count, bytes, pathWords, elideMiddle } from '../lib/format.js';
import { opLink, pageLink } from '../lib/nav.js';
import { slowAndMedian } from '../lib/charts.js';

export const title = 'Timeline';

const LABEL_W = 230;
const AXIS_H = 24;
const ROW_H = 16;
const TRACK_GAP = 6;
const PLANE_H = 20;
const MAX_ROWS = 48;
const COUNTER_H = 34; // a counter track's chart
const ICONS_W = 30; // a track label's pin and hide glyphs
const SEARCH_PAGE = 1000; // search matches asked for at a time
const BAR_W = 8; // the vertical scrollbar
const OVERSCAN = 0.5; // view widths fetched on each side, so short pans draw at once

/** A tick's time in the unit of its magnitude, with as many decimals as the tick step
 * needs: ticks 100 ns apart at 6.96 ms read 6.9581 ms, 6.9582 ms, never the same. */
export function tickLabel(t, step) {
  const units = [[1e12, 's'], [1e9, 'ms'], [1e6, 'µs'], [1e3, 'ns'], [1, 'ps']];
  const [u, name] = units.find(([f]) => Math.abs(t) >= f) || units[units.length - 1];
  const decimals = Math.min(9, Math.max(0, Math.ceil(-Math.log10(step / u) - 1e-9)));
  return `${(t / u).toFixed(decimals)} ${name}`;
}

/** The step two runs are aligned at: `want` (a step number) where both have it, else
 * the first step number both have, else none. */
export function alignStep(stepsA, stepsB, want) {
  const inB = new Map(stepsB.map(s => [s.step_num, s]));
  const both = stepsA.filter(s => inB.has(s.step_num));
  const a = both.find(s => String(s.step_num) === String(want)) || both[0];
  return a ? { step_num: a.step_num, step_a: a.step_num, step_b: a.step_num, a: a.start_ps, b: inB.get(a.step_num).start_ps } : null;
}

/** Each pane's own step, where the address names one (`step_a`, `step_b`), the other
 * pane's defaulting to the same number where it has it, else its first; for one run
 * in both panes with none named, its slowest step above its median one. Null where
 * neither applies (then the panes align at one step number: [`alignStep`]). */
export function paneSteps(stepsA, stepsB, wantA, wantB, sameRun) {
  const find = (steps, n) => (n === null || n === undefined ? null : steps.find(s => String(s.step_num) === String(n)) || null);
  let a = find(stepsA, wantA), b = find(stepsB, wantB);
  if (!a && !b) {
    const pair = sameRun ? slowAndMedian(stepsA) : null;
    if (!pair) return null;
    [a, b] = pair;
    b = find(stepsB, b.step_num) || b;
  }
  a = a || find(stepsA, b.step_num) || stepsA[0];
  b = b || find(stepsB, a.step_num) || stepsB[0];
  if (!a || !b) return null;
  return { step_num: a.step_num, step_a: a.step_num, step_b: b.step_num, a: a.start_ps, b: b.start_ps };
}

export async function render(view, ctx) {
  const vs = ctx.params.get('vs');
  if (!vs) return timeline(view, ctx, null);
  // Two runs one above the other, their times aligned at the start of one step: both
  // panes show the same stretch of their runs' step time, and move together.
  const run = ctx.params.get('run') || '';
  const [stA, stB, runs] = await Promise.all([ctx.get('steps'), api('steps', { run: vs }), ctx.get('runs')]);
  if (ctx.stale()) return;
  // The run of pane A: the one named, else the newest (as the run picker opens).
  const runA = run || (runs.length ? runs[runs.length - 1].run : '');
  // Each pane may take its own step (`step_a`, `step_b`: a slow step beside a median
  // one of the same run); else both the step number `align`, or the first both have.
  const picked = paneSteps(stA.steps, stB.steps, ctx.params.get('step_a'), ctx.params.get('step_b'), vs === runA);
  const at = picked || alignStep(stA.steps, stB.steps, ctx.params.get('align'));
  const link = { panes: [], active: 0, offsets: at ? [at.a, at.b] : [0, 0], step: at && !picked ? at.step_num : null };
  const close = el('a', { href: '#', id: 'tl-compare-close' }, 'close');
  close.addEventListener('click', e => { e.preventDefault(); ctx.go('timeline', { vs: null, align: null, step_a: null, step_b: null }); });
  const common = stA.steps.filter(s => stB.steps.some(t => t.step_num === s.step_num)).map(s => s.step_num);
  const align = el('select', { id: 'tl-align', title: 'the step whose starts line up', hidden: common.length < 2 || !!picked },
    ...common.map(n => el('option', { value: n, selected: at && n === at.step_num }, `step ${n}`)));
  align.addEventListener('change', () => ctx.go('timeline', { vs, align: align.value, step_a: null, step_b: null }));
  // A click on a step both runs have aligns the panes at it.
  link.alignAt = n => { if (common.includes(n) && (picked || n !== link.step)) ctx.go('timeline', { vs, align: n, step_a: null, step_b: null }); };
  // Either pane's step, picked apart.
  const stepPick = (id, steps, chosen, key) => {
    const sel = el('select', { id, title: `the step of pane ${key === 'step_a' ? 'A' : 'B'} aligned with the other pane's` },
      ...steps.map(s => el('option', { value: s.step_num, selected: chosen !== null && s.step_num === chosen }, `step ${s.step_num} · ${dur(s.duration_ps)}`)));
    sel.addEventListener('change', () => ctx.go('timeline', {
      vs, align: null,
      step_a: key === 'step_a' ? sel.value : (at ? at.step_a : null),
      step_b: key === 'step_b' ? sel.value : (at ? at.step_b : null),
    }));
    return sel;
  };
  const what = !at ? 'no step in both: aligned at the captures\' starts'
    : picked ? `step ${at.step_a} of A aligned with step ${at.step_b} of B, at their starts`
      : `aligned at the start of step ${at.step_num}`;
  view.append(el('p', { id: 'tl-compare', class: 'small' },
    el('strong', {}, 'A '), run || '(newest run)', el('strong', {}, ' above, B '), vs, ' below — ', what, ' ', align,
    ' · A at ', stepPick('tl-step-a', stA.steps, at ? at.step_a : null, 'step_a'),
    ' B at ', stepPick('tl-step-b', stB.steps, at ? at.step_b : null, 'step_b'), ' · ', close));
  const panes = [el('div', { class: 'tl-pane' }), el('div', { class: 'tl-pane' })];
  view.append(...panes);
  const params = new URLSearchParams(ctx.params);
  params.set('run', vs);
  // The view in the address is pane A's (its track ids, its selection).
  const own = ['y', 'event', 'mark_tracks', 'q', 'filter', 'pins', 'hidden', 'folded'];
  for (const k of ['vs', 'start_ps', 'end_ps', 'mark_start_ps', 'mark_end_ps', 'host', ...own]) params.delete(k);
  const ctxB = { ...ctx, params, get: (path, extra = {}) => api(path, { run: vs, ...extra }), setParams: () => {} };
  await Promise.all([timeline(panes[0], ctx, { index: 0, link, label: 'A' }), timeline(panes[1], ctxB, { index: 1, link, label: 'B' })]);
  if (link.panes[0]) link.panes[0].push();
}

/** One run's timeline in `view`; `pane` links it to another ({ index, link, label }). */
async function timeline(view, ctx, pane) {
  const [tr, stepData, mem, runList] = await Promise.all([ctx.get('timeline/tracks'), ctx.get('steps'), ctx.get('memory', { top: 1 }),
    pane ? null : ctx.get('runs')]);
  if (ctx.stale()) return;
  const steps = stepData.steps;
  // Counter tracks: each allocator's bytes in use over time.
  const counters = mem.allocators.filter(a => a.timeline.length > 1);
  // Busy counters: each device's share of time running an op, per pixel (api/timeline/busy).
  const busyCounters = tr.derived.filter(d => d.source === 'api/timeline/busy');
  const sel = { run: ctx.params.get('run') || '', host: ctx.params.get('host') || '' };
  const listeners = new AbortController();
  const alive = () => {
    if (ctx.stale()) { listeners.abort(); return false; }
    return true;
  };

  // ---- layout of the page ----
  const search = el('input', { type: 'search', id: 'tl-search', placeholder: 'search events…' });
  const prevHit = el('button', { type: 'button', id: 'tl-prev', title: 'previous match (shift+Enter)', disabled: true }, '‹');
  const nextHit = el('button', { type: 'button', id: 'tl-next', title: 'next match (Enter)', disabled: true }, '›');
  const hitCount = el('span', { id: 'tl-hits', class: 'muted' });
  const trackFilter = el('input', { type: 'search', id: 'tl-filter', placeholder: 'filter tracks…', title: 'show only the tracks whose host, plane or line holds this text' });
  const foldAll = el('button', { type: 'button', id: 'tl-fold', title: 'fold every plane, or unfold them all' }, 'collapse all');
  const showHidden = el('button', { type: 'button', id: 'tl-unhide', hidden: true }, '');
  const tip = el('div', { id: 'tl-tip', class: 'tl-tip', hidden: true });
  const range = el('span', { id: 'tl-range', class: 'muted' });
  const fit = el('button', { type: 'button', id: 'tl-fit' }, 'fit');
  // Downloads of the whole run (or the selected host), written by the server's exporter.
  const exportLink = (format, label, hint) => {
    const url = new URL('api/export', document.baseURI);
    for (const [k, v] of Object.entries({ run: sel.run, host: sel.host, format })) if (v) url.searchParams.set(k, v);
    return el('a', { class: 'tl-export', id: `tl-export-${format}`, href: url.href, download: true, title: hint }, label);
  };
  // A run too large to hold whole is read a host at a time: the hosts on screen are
  // read, each alone; it is exported a host at a time (pick one above).
  const exports = tr.read_a_host_at_a_time
    ? el('span', { class: 'muted', id: 'tl-by-host', title: 'a search, or an area over every track, reads every host in turn' },
      'too large to read whole: each host is read when its tracks are on screen; pick a host above to export it')
    : el('span', { class: 'tl-exports' }, 'export ',
      exportLink('perfetto', 'Perfetto', 'Perfetto trace (.pftrace) for ui.perfetto.dev'),
      exportLink('chrome', 'Chrome JSON', 'Chrome trace JSON, gzip (.trace.json.gz), every event'));
  // Another run of the folder to draw below this one, aligned by step.
  const others = (runList || []).map(r => r.run).filter(r => r !== tr.run);
  const compare = el('select', { id: 'tl-vs', title: 'draw another run, or another step of this one, below it, aligned at a step', hidden: !!pane },
    el('option', { value: '' }, 'compare with…'), el('option', { value: tr.run }, 'this run: its slowest step beside its median one'),
    ...others.map(r => el('option', { value: r }, r)));
  compare.addEventListener('change', () => { if (compare.value) ctx.go('timeline', { vs: compare.value, start_ps: null, end_ps: null }); });
  const help = el('span', { class: 'muted help' }, 'W/S or ctrl+wheel zoom · A/D or shift+wheel pan · wheel scrolls · drag pan · drag the ruler (or shift+drag) to select · click an event or a step · ⤒ pins a track, × hides it');
  const canvas = el('canvas', { id: 'tl-canvas', tabindex: 0 });
  const wrap = el('div', { class: 'tl-wrap' }, canvas, tip);
  const side = el('aside', { id: 'tl-side', class: 'tl-side' }, el('p', { class: 'muted' }, 'click an event to see its stats'));
  view.append(
    el('div', { class: 'tl-bar' }, el('strong', {}, `${pane ? `${pane.label}: ` : ''}${count(tr.events)} events in ${tr.tracks.length} tracks`), search, prevHit, nextHit, hitCount, trackFilter, foldAll, showHidden, fit, compare, range, help, exports),
    el('div', { class: 'tl-body' }, wrap, side),
  );
  // The lower of two panes: its elements' ids end in -b, and the keys' help is above.
  if (pane && pane.index === 1) {
    for (const e of view.querySelectorAll('[id]')) e.id = `${e.id}-b`;
    help.hidden = true;
  }
  if (!tr.tracks.length) {
    side.textContent = 'this profile has no events';
    return;
  }

  // ---- state ----
  const span0 = tr.start_ps, span1 = Math.max(tr.end_ps, tr.start_ps + 1);
  const margin = (span1 - span0) * 0.01;
  let t0 = Number(ctx.params.get('start_ps')) || span0 - margin;
  let t1 = Number(ctx.params.get('end_ps')) || span1 + margin;
  if (!(t1 > t0)) { t0 = span0 - margin; t1 = span1 + margin; }
  let scrollY = 0;
  let W = 0, H = 0;
  let selected = null; // { track, index, detail }
  let query = ''; // the search, lower case: boxes whose name holds it are outlined
  // The search's matches in time order, a page at a time (every one can be reached):
  // the page loaded, where it starts, how many there are, and the one shown.
  let hits = [];
  let hitsFrom = 0, hitsTotal = 0;
  let hitAt = -1;
  let results = null; // the search's list, kept in the side panel above an event's stats
  let area = null; // { a, b, y0, y1, tracks: ids|null (all), result } — an area selection
  const collapsed = new Set();
  const hidden = new Set(); // track ids (and counters' ids, see counterId) hidden by the user
  const pinned = []; // track ids (and counters' ids) pinned to the top, in pin order
  let filterText = '';
  const tiles = new Map(); // track id (a busy counter: 'busy:' + device) -> { start, end, pspx, data, ctl }
  let items = []; // layout: { kind: 'plane'|'track', y, h, track?, key? }
  let contentH = 0;

  /** A counter's id for pins, hiding and links: `m:HOST/ALLOCATOR` or `b:DEVICE`. */
  function counterId(item) {
    return item.kind === 'counter' ? `m:${item.counter.host}/${item.counter.name}` : `b:${item.busy.device}`;
  }

  /** A track's or counter's glyphs at the right of its label: pin to the top (or
   * unpin), hide. */
  function glyphs(y, isPinned) {
    g.fillStyle = isPinned ? '#3b6fd4' : '#99a';
    g.fillText(isPinned ? '⤓' : '⤒', LABEL_W - ICONS_W, y + 8);
    g.fillStyle = '#99a';
    g.fillText('×', LABEL_W - ICONS_W / 2, y + 8);
  }

  function relayout() {
    items = [];
    let y = 0;
    if (steps.length) {
      items.push({ kind: 'steps', y, h: ROW_H + TRACK_GAP });
      y += ROW_H + TRACK_GAP;
    }
    const shown = t => !hidden.has(t.id)
      && (!filterText || `${t.host} ${t.plane} ${t.line}`.toLowerCase().includes(filterText));
    const byId = new Map(tr.tracks.map(t => [t.id, t]));
    // The planes in track order, each with its shown tracks and its device's counters
    // (its busy share and its allocator's bytes), which fold with it.
    const groups = [], at = new Map();
    for (const t of tr.tracks) {
      const key = `${t.host}\u0000${t.plane}`;
      if (!at.has(key)) {
        at.set(key, groups.length);
        groups.push({ key, host: t.host, plane: t.plane, label: `${t.host} · ${t.plane}`, tracks: [], counters: [] });
      }
      if (shown(t) && !pinned.includes(t.id)) groups[at.get(key)].tracks.push(t);
    }
    const loose = [], pinnedCounters = [];
    const place = (item, key, text) => {
      const g = key !== null && at.has(key) ? groups[at.get(key)] : null;
      const hay = `${g ? `${g.host} ${g.plane} ` : ''}${text}`.toLowerCase();
      const id = counterId(item);
      // Counters are pinned and hidden as tracks are.
      if (hidden.has(id) || (filterText && !hay.includes(filterText))) return;
      if (pinned.includes(id)) pinnedCounters.push({ ...item, pinned: true });
      else (g ? g.counters : loose).push(item);
    };
    for (const a of counters) {
      // An allocator named for a GPU (GPU_3_bfc) is that device's.
      const m = /^GPU_(\d+)_bfc$/.exec(a.name);
      place({ kind: 'counter', counter: a }, m ? `${a.host}\u0000/device:GPU:${m[1]}` : null, `${a.host} ${a.name}`);
    }
    for (const b of busyCounters) {
      const plane = b.device && b.device.startsWith(b.host) ? b.device.slice(b.host.length) : null;
      place({ kind: 'busy', busy: b }, plane ? `${b.host}\u0000${plane}` : null, `${b.host} ${b.name}`);
    }
    const counter = item => {
      items.push({ ...item, y, h: COUNTER_H + TRACK_GAP });
      y += COUNTER_H + TRACK_GAP;
    };
    loose.forEach(counter);
    // Pinned tracks first, under a header of their own, then the rest by plane.
    const pins = pinned.map(id => byId.get(id)).filter(t => t && !hidden.has(t.id));
    if (pins.length || pinnedCounters.length) {
      items.push({ kind: 'plane', y, h: PLANE_H, key: '\u0000pinned', label: `pinned (${pins.length + pinnedCounters.length})` });
      y += PLANE_H;
      if (!collapsed.has('\u0000pinned')) pinnedCounters.forEach(counter);
      for (const t of collapsed.has('\u0000pinned') ? [] : pins) {
        const rows = Math.max(1, Math.min(t.depth, MAX_ROWS));
        items.push({ kind: 'track', y, h: rows * ROW_H + TRACK_GAP, track: t, rows, pinned: true });
        y += rows * ROW_H + TRACK_GAP;
      }
    }
    for (const g of groups) {
      if (!g.tracks.length && !g.counters.length) continue;
      items.push({ kind: 'plane', y, h: PLANE_H, key: g.key, label: g.label });
      y += PLANE_H;
      if (collapsed.has(g.key)) continue;
      g.counters.forEach(counter);
      for (const t of g.tracks) {
        const rows = Math.max(1, Math.min(t.depth, MAX_ROWS));
        const h = rows * ROW_H + TRACK_GAP;
        items.push({ kind: 'track', y, h, track: t, rows });
        y += h;
      }
    }
    contentH = y;
  }
  relayout();

  const pspx = () => (t1 - t0) / Math.max(1, W - LABEL_W);
  const xOf = t => LABEL_W + (t - t0) / pspx();
  const tOf = x => t0 + (x - LABEL_W) * pspx();

  function clampView() {
    const full = (span1 - span0) * 1.5 + 1;
    const minW = Math.max(1000, W - LABEL_W); // at least 1 ps per pixel
    let w = Math.min(Math.max(t1 - t0, minW), full);
    let c = (t0 + t1) / 2;
    c = Math.min(Math.max(c, span0 - full / 4), span1 + full / 4);
    t0 = c - w / 2; t1 = c + w / 2;
    scrollY = Math.max(0, Math.min(scrollY, Math.max(0, contentH - (H - AXIS_H) + 20)));
  }

  // ---- tiles ----
  let fetchTimer = null, lastAsked = -Infinity;
  // Asks at once when the tiles on screen can no longer draw the view (a zoom past
  // their resolution, a pan past their overscan) and no tile was asked for in the last
  // 40 ms, or a track on screen has nothing to draw; and again 40 ms after the last
  // input, as when a key is held.
  let lastW = NaN, zoomDir = 0; // the view's last width; the way it last changed: -1 in, 1 out, 0 a pan
  let settled = true; // no input for 40 ms: bitmaps are redrawn at the view's resolution
  function scheduleFetch() {
    settled = false;
    const w = t1 - t0;
    zoomDir = w < lastW * 0.999 ? -1 : w > lastW * 1.001 ? 1 : 0;
    lastW = w;
    clearTimeout(fetchTimer);
    // A track that came on screen with nothing to draw is asked for at once.
    const blank = () => visibleTracks().some(it => { const cur = tiles.get(tileKey(it)); return !cur || (!cur.data && !cur.req); });
    if ((performance.now() - lastAsked > 40 || blank()) && !fresh()) fetchVisible();
    fetchTimer = setTimeout(() => {
      fetchVisible();
      settled = true;
      if (shownTiles.some(st => st.tile.bitmap && !bitmapFits(st.tile, pspx()))) drawSoon();
    }, 40);
  }
  const busyKey = device => `busy:${device}`;
  const tileKey = it => (it.track ? it.track.id : busyKey(it.busy.device));
  /** Every track on screen is drawn from a tile of the current window and zoom. */
  function fresh() {
    return visibleTracks().every(it => tileOk(tiles.get(tileKey(it))));
  }
  function visibleTracks() {
    return items.filter(it => (it.kind === 'track' || it.kind === 'busy') && it.y - scrollY + it.h > 0 && it.y - scrollY < H - AXIS_H);
  }
  function tileOk(tile) {
    const p = pspx();
    return tile && tile.start <= t0 && tile.end >= t1 && tile.pspx <= p * 1.5 && tile.pspx >= p / 1.5;
  }
  function fetchVisible() {
    if (!alive()) return;
    // During a zoom, tiles are asked for ahead of it: at a resolution 1.4 times finer
    // (zooming in, over a window with less overscan) or coarser (out, over a wider one),
    // so that one answer serves the next few steps of the zoom too.
    const lead = zoomDir < 0 ? 0.7 : zoomDir > 0 ? 1.4 : 1;
    const px = Math.min(16384, Math.round((W - LABEL_W) * (1 + 2 * OVERSCAN)));
    const half = (px * pspx() * lead) / 2, mid = (t0 + t1) / 2;
    const start = Math.floor(mid - half), end = Math.ceil(mid + half);
    const want = { start, end, pspx: (end - start) / px };
    // Nothing is asked while every track on screen is drawn, or asked for, at a window
    // and resolution that serve this view. Else every track on screen is asked for
    // (but those whose request in flight serves the view), so that they all keep the
    // same window and reach its edge at the same time, not one after another.
    const visible = visibleTracks();
    const wanting = cur => cur && cur.req && tileOk(cur.want);
    if (visible.every(it => { const cur = tiles.get(tileKey(it)); return tileOk(cur) || wanting(cur); })) return;
    // A tile drawn over this same window at this same resolution is not asked again.
    const same = cur => cur && cur.data && !cur.req && cur.start <= want.start && cur.end >= want.end
      && Math.abs(Math.log(cur.pspx / want.pspx)) < 0.1;
    const need = visible.filter(it => { const cur = tiles.get(tileKey(it)); return !wanting(cur) && !same(cur); });
    lastAsked = performance.now();
    // The tracks' tiles in one request: a browser opens at most 6 connections to a
    // server, and one request per track waited on each other. (A request holds at most
    // 64 tracks and 64 × 16,384 rows × px, the server's bounds.) Each busy counter is a
    // request of its own.
    const batches = [];
    let batch = null;
    for (const it of need.filter(it => it.track)) {
      if (!batch || batch.ids.length === 64 || (batch.rows + it.rows) * px > 64 * 16384) batches.push(batch = { ids: [], rows: 0 });
      batch.ids.push(it.track.id);
      batch.rows += it.rows;
    }
    for (const { ids } of batches) {
      const q = { ...sel, tracks: ids.join(','), start_ps: start, end_ps: end, px, rows: MAX_ROWS };
      ask(ids, want, signal => api('timeline/tiles', q, signal).then(d => d.tiles));
    }
    for (const it of need.filter(it => it.busy)) {
      ask([tileKey(it)], want, signal => api('timeline/busy', { ...sel, device: it.busy.device, start_ps: start, end_ps: end, px }, signal)
        .then(d => [d]));
    }
  }

  /** Asks `request` for the tiles of `keys` (its answer: their data, in that order). A
   * request is cancelled when none of its tracks still wants it; while it is out, a
   * track keeps drawing the tile it has. */
  function ask(keys, want, request) {
    const req = { ctl: new AbortController(), wanted: keys.length };
    for (const key of keys) {
      const cur = tiles.get(key);
      release(cur);
      tiles.set(key, { ...(cur || {}), req, want });
    }
    const mine = key => { const cur = tiles.get(key); return cur && cur.req === req ? cur : null; };
    request(req.ctl.signal)
      .then(data => {
        if (!alive()) return;
        keys.forEach((key, k) => {
          if (mine(key)) tiles.set(key, { start: want.start, end: want.end, pspx: want.pspx, data: data[k], req: null });
        });
        drawSoon();
      })
      .catch(e => {
        if (e.name === 'AbortError') return;
        for (const key of keys) {
          const cur = mine(key);
          if (cur) tiles.set(key, { ...cur, req: null, want: null, error: String(e.message || e) });
        }
        drawSoon();
      });
  }

  /** A track's tile entry no longer wants the request it is waiting on. */
  function release(entry) {
    if (entry && entry.req && --entry.req.wanted === 0) entry.req.ctl.abort();
  }

  // ---- drawing ----
  const g = canvas.getContext('2d');
  function resize() {
    // The tracks and the side panel fill the window below the header and bar, however
    // many lines those wrap to (set through the CSSOM: the CSP refuses style attributes).
    const body = wrap.parentElement;
    const room = window.innerHeight - body.getBoundingClientRect().top - window.scrollY;
    // The upper of two panes leaves half the room (and the lower pane's bar) below it.
    const fill = `${Math.max(240, Math.floor(pane && pane.index === 0 ? room / 2 - 30 : room))}px`;
    if (body.style.height !== fill) body.style.height = fill;
    const r = wrap.getBoundingClientRect();
    W = Math.max(300, Math.floor(r.width));
    H = Math.max(200, Math.floor(r.height));
    dpr = window.devicePixelRatio || 1;
    canvas.width = W * dpr; canvas.height = H * dpr;
    canvas.style.width = `${W}px`; canvas.style.height = `${H}px`;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    clampView();
    draw();
    scheduleFetch();
  }

  function niceStep(raw) {
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }

  let highlighted = 0; // boxes outlined as search matches in the last draw
  let stepBoxes = []; // the Steps track's boxes in the last draw
  let sticky = null; // the plane header held at the top in the last draw
  let barDrag = null; // a drag of the scrollbar's thumb: { y, scrollY }
  // Tiles that come back together are drawn once, in the next frame.
  let drawQueued = false;
  function drawSoon() {
    if (drawQueued) return;
    drawQueued = true;
    requestAnimationFrame(() => { drawQueued = false; draw(); });
  }
  let drawMs = 0; // how long the last draw took
  function draw() {
    if (!alive()) return;
    const began = performance.now();
    g.clearRect(0, 0, W, H);
    g.font = '11px system-ui, sans-serif';
    g.textBaseline = 'middle';
    shownTiles = [];
    highlighted = 0;
    const p = pspx();
    // Tracks.
    g.save();
    g.beginPath(); g.rect(0, AXIS_H, W, H - AXIS_H); g.clip();
    drawStepShading();
    for (const it of items) {
      const y = AXIS_H + it.y - scrollY;
      if (y + it.h < AXIS_H || y > H) continue;
      if (it.kind === 'steps') { drawSteps(y, it.h); continue; }
      if (it.kind === 'counter') { drawCounter(it.counter, y, it.h); glyphs(y, it.pinned); continue; }
      if (it.kind === 'busy') { drawBusy(it.busy, y, it.h); glyphs(y, it.pinned); continue; }
      if (it.kind === 'plane') {
        g.fillStyle = '#e8ebf0'; g.fillRect(0, y, W, it.h);
        g.fillStyle = '#223'; g.font = 'bold 11px system-ui, sans-serif';
        g.fillText(`${collapsed.has(it.key) ? '▸' : '▾'} ${it.label}`, 6, y + it.h / 2);
        g.font = '11px system-ui, sans-serif';
        continue;
      }
      const t = it.track;
      const tile = tiles.get(t.id);
      g.save();
      g.beginPath(); g.rect(LABEL_W, y, W - LABEL_W, it.h); g.clip();
      if (tile && tile.data) drawTile(tile, y, it.rows, p, t.id);
      g.restore();
      g.fillStyle = '#fff'; g.fillRect(0, y, LABEL_W - 1, it.h);
      g.fillStyle = '#223';
      g.fillText(fitText(t.line, LABEL_W - 12 - ICONS_W), 8, y + 8);
      glyphs(y, it.pinned);
      g.fillStyle = '#778';
      const more = t.depth > it.rows ? ` · ${t.depth - it.rows} rows hidden` : '';
      const status = !tile || !tile.data ? (tile && tile.error ? ' · error' : ' · loading') : '';
      if (it.h > 2 * ROW_H - 2) g.fillText(`${count(t.events)} events${more}${status}`, 8, y + 8 + ROW_H);
      g.strokeStyle = '#e3e6ea'; g.beginPath(); g.moveTo(0, y + it.h - 0.5); g.lineTo(W, y + it.h - 0.5); g.stroke();
    }
    // Bitmaps are kept only for the tiles on screen.
    const shown = new Set(shownTiles.map(st => st.tile));
    for (const tile of tiles.values()) if (tile.bitmap && !shown.has(tile)) tile.bitmap = null;
    drawSticky();
    drawFlows();
    g.restore();
    drawScrollbar();
    canvas.dataset.highlighted = String(highlighted);
    g.strokeStyle = '#ccd'; g.beginPath(); g.moveTo(LABEL_W - 0.5, AXIS_H); g.lineTo(LABEL_W - 0.5, H); g.stroke();
    drawAxis();
    drawArea();
    const tenth = (t1 - t0) / 10;
    const perPx = p >= 1000 ? dur(p) : `${Number(p.toPrecision(3))} ps`;
    range.textContent = `${tickLabel(Math.max(0, t0), tenth)} – ${tickLabel(t1, tenth)} (${dur(t1 - t0)} shown, ${perPx} per pixel)`;
    range.dataset.startPs = String(Math.round(t0));
    range.dataset.endPs = String(Math.round(t1));
    drawMs = performance.now() - began;
  }

  /** The plane whose tracks fill the top of the view keeps its header on screen. */
  function drawSticky() {
    sticky = null;
    let last = null; // the last plane header at or above the top of the view
    for (const it of items) {
      if (it.y - scrollY > 0) break;
      if (it.kind === 'plane') last = it;
    }
    // A header exactly at the top is drawn in place; one scrolled past is held there.
    if (!last || last.y - scrollY >= 0) return;
    sticky = last;
    g.fillStyle = '#e8ebf0'; g.fillRect(0, AXIS_H, W, PLANE_H);
    g.fillStyle = '#223'; g.font = 'bold 11px system-ui, sans-serif';
    g.fillText(`${collapsed.has(sticky.key) ? '▸' : '▾'} ${sticky.label}`, 6, AXIS_H + PLANE_H / 2);
    g.font = '11px system-ui, sans-serif';
    g.strokeStyle = '#ccd'; g.beginPath(); g.moveTo(0, AXIS_H + PLANE_H - 0.5); g.lineTo(W, AXIS_H + PLANE_H - 0.5); g.stroke();
  }

  /** The vertical scrollbar's thumb, when the tracks overflow: [top, height] or null. */
  function thumb() {
    const view = H - AXIS_H;
    if (contentH <= view) return null;
    const h = Math.max(24, (view * view) / contentH);
    const max = Math.max(1, contentH - view + 20);
    return [AXIS_H + (Math.min(scrollY, max) / max) * (view - h), h];
  }

  function drawScrollbar() {
    const th = thumb();
    if (!th) return;
    g.fillStyle = '#f0f2f5'; g.fillRect(W - BAR_W, AXIS_H, BAR_W, H - AXIS_H);
    g.fillStyle = barDrag ? '#7a8394' : '#a9b0bd'; g.fillRect(W - BAR_W + 1, th[0], BAR_W - 2, th[1]);
  }

  /** A counter track: an allocator's bytes in use as a step chart, scaled to its peak. */
  function drawCounter(a, y, h) {
    const top = y + 3, bottom = y + COUNTER_H - 1, peak = Math.max(1, a.peak_in_use_bytes);
    const yOf = v => bottom - (v / peak) * (bottom - top);
    g.save();
    g.beginPath(); g.rect(LABEL_W, y, W - LABEL_W, h); g.clip();
    g.beginPath();
    g.moveTo(LABEL_W, bottom);
    let last = a.first_in_use_bytes;
    g.lineTo(LABEL_W, yOf(last));
    for (const p of a.timeline) {
      const x = xOf(p.time_ps);
      if (x < LABEL_W) { last = p.in_use_bytes; g.lineTo(LABEL_W, yOf(last)); continue; }
      if (x > W) break;
      g.lineTo(x, yOf(last));
      last = p.in_use_bytes;
      g.lineTo(x, yOf(last));
    }
    g.lineTo(W, yOf(last));
    g.lineTo(W, bottom);
    g.closePath();
    g.fillStyle = 'rgba(42, 157, 92, 0.25)'; g.fill();
    g.strokeStyle = '#2a9d5c'; g.stroke();
    g.restore();
    g.fillStyle = '#fff'; g.fillRect(0, y, LABEL_W - 1, h);
    g.fillStyle = '#223'; g.fillText(fitText(`${a.name} in use`, LABEL_W - 12 - ICONS_W), 8, y + 8);
    g.fillStyle = '#778'; g.fillText(`peak ${bytes(a.peak_in_use_bytes)}`, 8, y + 8 + ROW_H);
    g.strokeStyle = '#e3e6ea'; g.beginPath(); g.moveTo(0, y + h - 0.5); g.lineTo(W, y + h - 0.5); g.stroke();
  }

  /** A busy counter: a device's share of each pixel's time running an op, 0 to 100%. */
  function drawBusy(b, y, h) {
    const tile = tiles.get(busyKey(b.device));
    const top = y + 3, bottom = y + COUNTER_H - 1;
    if (tile && tile.data) {
      const d = tile.data, n = d.busy_pct.length;
      g.save();
      g.beginPath(); g.rect(LABEL_W, y, W - LABEL_W, h); g.clip();
      g.beginPath();
      g.moveTo(xOf(d.start_ps), bottom);
      d.busy_pct.forEach((v, k) => {
        const yv = bottom - (v / 100) * (bottom - top);
        g.lineTo(xOf(d.start_ps + k * d.ps_per_px), yv);
        g.lineTo(xOf(d.start_ps + (k + 1) * d.ps_per_px), yv);
      });
      g.lineTo(xOf(d.start_ps + n * d.ps_per_px), bottom);
      g.closePath();
      g.fillStyle = 'rgba(59, 111, 212, 0.25)'; g.fill();
      g.strokeStyle = '#3b6fd4'; g.stroke();
      g.restore();
    }
    g.fillStyle = '#fff'; g.fillRect(0, y, LABEL_W - 1, h);
    g.fillStyle = '#223'; g.fillText(fitText(b.name, LABEL_W - 12 - ICONS_W), 8, y + 8);
    const status = !tile || !tile.data ? (tile && tile.error ? ' · error' : ' · loading') : '';
    g.fillStyle = '#778'; g.fillText(`${b.host} · 0–100%${status}`, 8, y + 8 + ROW_H);
    g.strokeStyle = '#e3e6ea'; g.beginPath(); g.moveTo(0, y + h - 0.5); g.lineTo(W, y + h - 0.5); g.stroke();
  }

  /** A busy counter's share at time `t` (null before its data came). */
  function busyAt(b, t) {
    const tile = tiles.get(busyKey(b.device));
    if (!tile || !tile.data) return null;
    const d = tile.data, k = Math.floor((t - d.start_ps) / d.ps_per_px);
    return k >= 0 && k < d.busy_pct.length ? d.busy_pct[k] : null;
  }

  /** A counter's value at time `t`: the last point at or before it. */
  function counterAt(a, t) {
    let lo = 0, hi = a.timeline.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (a.timeline[m].time_ps <= t) lo = m + 1; else hi = m; }
    return lo === 0 ? a.first_in_use_bytes : a.timeline[lo - 1].in_use_bytes;
  }

  /** Every other step shaded across the tracks, behind the events. */
  function drawStepShading() {
    g.fillStyle = 'rgba(59, 111, 212, 0.05)';
    steps.forEach((st, k) => {
      if (k % 2 || st.start_ps > t1 || st.start_ps + st.duration_ps < t0) return;
      const xa = Math.max(LABEL_W, xOf(st.start_ps)), xb = Math.min(W, xOf(st.start_ps + st.duration_ps));
      if (xb > xa) g.fillRect(xa, AXIS_H, xb - xa, H - AXIS_H);
    });
  }

  /** The Steps track: one box a step, labelled with its number and length. */
  function drawSteps(y, h) {
    stepBoxes = [];
    g.save();
    g.beginPath(); g.rect(LABEL_W, y, W - LABEL_W, h); g.clip();
    steps.forEach((st, k) => {
      if (st.start_ps > t1 || st.start_ps + st.duration_ps < t0) return;
      const x = Math.max(LABEL_W - 2, xOf(st.start_ps));
      const w = Math.max(1, Math.min(W, xOf(st.start_ps + st.duration_ps)) - x);
      g.fillStyle = k % 2 ? '#8fa9dc' : '#6d8fd0';
      g.fillRect(x, y + 1, w, ROW_H - 2);
      if (w > 40) { g.fillStyle = '#fff'; g.fillText(fitText(`step ${st.step_num} · ${dur(st.duration_ps)}`, w - 6), x + 3, y + (ROW_H - 2) / 2 + 1); }
      stepBoxes.push({ x, y: y + 1, w, h: ROW_H - 2, k });
    });
    g.restore();
    g.fillStyle = '#fff'; g.fillRect(0, y, LABEL_W - 1, h);
    g.fillStyle = '#223'; g.fillText(`Steps (${count(steps.length)})`, 8, y + 8);
    g.strokeStyle = '#e3e6ea'; g.beginPath(); g.moveTo(0, y + h - 0.5); g.lineTo(W, y + h - 0.5); g.stroke();
  }

  /** What drawing a tile needs, worked out once per tile: each box's name as a dense
   * slot (`names` is keyed by the run's sparse name ids), and per slot its name, its
   * lower-case form for the search, and its pixels (one box, and its last column;
   * merged boxes, and their stripes) as little-endian RGBA words. */
  function tileStyle(d) {
    if (d.slot) return;
    const ids = Object.keys(d.names), slotOf = new Map(ids.map((id, i) => [Number(id), i]));
    d.slotName = ids.map(id => d.names[id]).concat(['']);
    d.lower = d.slotName.map(nm => nm.toLowerCase());
    const word = ([r, gr, b]) => ((255 << 24) | (b << 16) | (gr << 8) | r) >>> 0;
    const stripe = ([r, gr, b]) => [r, gr, b].map(v => Math.round(v + (255 - v) * 0.45));
    d.px = d.slotName.map(nm => word(colorRgb(nm)));
    d.pxMerged = d.slotName.map(nm => word(colorRgb(nm, 14)));
    d.pxStripe = d.slotName.map(nm => word(stripe(colorRgb(nm, 14))));
    d.pxEdge = d.slotName.map(nm => word(colorRgb(nm, 9)));
    // Labels: black or white, whichever reads on the box (one box, or merged ones).
    d.ink = d.slotName.map(nm => inkOn(colorRgb(nm)));
    d.inkMerged = d.slotName.map(nm => inkOn(colorRgb(nm, 14)));
    d.slot = Int32Array.from(d.box_name, id => (slotOf.has(id) ? slotOf.get(id) : ids.length));
  }

  let dpr = 1; // device pixels per CSS pixel
  let shownTiles = []; // the tiles the last draw showed: { tile, y, rows, track }

  /** A tile's bitmap is at the resolution it would be made at for a view of `p` ps per pixel. */
  const bitmapFits = (tile, p) => Math.abs(Math.log(tile.bitmap.pxPs / Math.max(tile.pspx, p))) < 0.05;

  /** A tile's boxes as a bitmap, times the device's pixel ratio, written pixel by pixel:
   * drawing a frame is then one image per track, however many boxes, and a bitmap is
   * made only when a tile arrives or the view comes to rest. It is at the tile's own
   * resolution (one pixel per pixel asked for), or at the view's when that is coarser
   * and the view is still (while the view moves, the bitmap it has is drawn shrunk).
   * Boxes are at least a pixel wide; merged boxes 3 px or wider are striped. */
  function tileBitmap(tile, rows, p) {
    const d = tile.data;
    const pxPs = Math.max(tile.pspx, p); // ps per CSS pixel of the bitmap
    const b = tile.bitmap;
    if (b && b.rows === rows && b.dpr === dpr && (!settled || bitmapFits(tile, p))) return b.canvas;
    tileStyle(d);
    const span = tile.end - tile.start;
    const bw = Math.max(1, Math.min(16384, Math.round((span / pxPs) * dpr))), bh = rows * ROW_H * dpr;
    const kx = bw / span, one = kx * pxPs; // device px per ps, per CSS px
    // Each row's line of pixels first, then copied down the row's height.
    const lines = new Uint32Array(rows * bw);
    const n = d.box_start_ps.length, period = 4 * one, minW = Math.max(1, Math.round(one));
    for (let k = 0; k < n; k++) {
      const depth = d.box_depth[k];
      if (depth >= rows) continue;
      const s = d.box_start_ps[k] - tile.start;
      const c0 = Math.max(0, Math.round(s * kx));
      const c1 = Math.min(bw, Math.max(c0 + minW, Math.round((s + d.box_duration_ps[k]) * kx)));
      if (c1 <= c0) continue;
      const merged = d.box_count[k] > 1, slot = d.slot[k], at = depth * bw;
      const fill = merged ? d.pxMerged[slot] : d.px[slot];
      if (c1 - c0 > 8) lines.fill(fill, at + c0, at + c1);
      else for (let c = c0; c < c1; c++) lines[at + c] = fill;
      // An event 4 px or wider ends in a lighter column, so that events back to back
      // (a step's events, one after the other) read as several.
      if (!merged && c1 - c0 >= 4 * one) lines[at + c1 - 1] = d.pxEdge[slot];
      if (merged && c1 - c0 >= 3 * one) {
        const sf = d.pxStripe[slot];
        for (let c = c0 + one; c < c1; c += period) lines.fill(sf, at + Math.round(c), at + Math.min(c1, Math.round(c + one)));
      }
    }
    const img = new ImageData(bw, bh), pix = new Uint32Array(img.data.buffer);
    for (let depth = 0; depth < rows; depth++) {
      const line = lines.subarray(depth * bw, (depth + 1) * bw);
      const r0 = (depth * ROW_H + 1) * dpr;
      for (let r = r0; r < r0 + (ROW_H - 2) * dpr; r++) pix.set(line, r * bw);
    }
    const canvas = document.createElement('canvas');
    canvas.width = bw; canvas.height = bh;
    canvas.getContext('2d').putImageData(img, 0, 0);
    tile.bitmap = { canvas, rows, dpr, pxPs };
    return canvas;
  }

  /** Where box `k` of a tile drawn at `y` lies on screen, or null when it is not in view. */
  function boxAt(d, k, y, rows, p, track) {
    const depth = d.box_depth[k];
    if (depth >= rows) return null;
    const s = d.box_start_ps[k], du = d.box_duration_ps[k];
    if (s + du < t0 || s > t1) return null;
    let x = xOf(s), w = du / p;
    if (x < LABEL_W - 2) { w -= LABEL_W - 2 - x; x = LABEL_W - 2; }
    w = Math.min(Math.max(w, 1), W - x + 2);
    return { x, y: y + depth * ROW_H + 1, w, h: ROW_H - 2, track, index: d.box_index[k], count: d.box_count[k], start: s, dur: du, name: d.slotName[d.slot[k]] };
  }

  /** The boxes the last draw showed (for tests, flows, hover and clicks): of the boxes
   * `where(shown tile, k)` lets through (every one when absent), those `keep` keeps. */
  function drawnBoxes(keep = () => true, where = () => true) {
    const out = [];
    const p = pspx();
    for (const st of shownTiles) {
      const d = st.tile.data;
      for (let k = 0; k < d.box_start_ps.length; k++) {
        if (!where(st, k)) continue;
        const b = boxAt(d, k, st.y, st.rows, p, st.track);
        if (b && keep(b)) out.push(b);
      }
    }
    return out;
  }

  /** Track `track`'s box of event `index` in the last draw, if it showed one. */
  const drawnEvent = (track, index) => drawnBoxes(b => b.index === index, st => st.track === track)[0];

  /** The box under (x, y) in the last draw, or null: the last drawn of those within a
   * pixel (only the boxes of the depth row under y are placed). */
  function boxUnder(x, y) {
    const inRow = (st, k) => st.tile.data.box_depth[k] === Math.floor((y - st.y - 1) / ROW_H);
    const hits = drawnBoxes(b => x >= b.x - 1 && x <= b.x + b.w + 1 && y >= b.y && y <= b.y + b.h, inRow);
    return hits.length ? hits[hits.length - 1] : null;
  }

  function drawTile(tile, y, rows, p, trackId) {
    const d = tile.data;
    const bitmap = tileBitmap(tile, rows, p);
    shownTiles.push({ tile, y, rows, track: trackId });
    // The part of the view the tile covers, from its bitmap: stretched without
    // smoothing (while a zoom waits for the next tile), or shrunk with it.
    const a = Math.max(t0, tile.start), b = Math.min(t1, tile.end);
    if (b > a) {
      const kx = bitmap.width / (tile.end - tile.start);
      g.imageSmoothingEnabled = tile.bitmap.pxPs < p * 0.99; // shrunk: blended, so no 1 px box vanishes
      g.drawImage(bitmap, (a - tile.start) * kx, 0, (b - a) * kx, bitmap.height, xOf(a), y, (b - a) / p, rows * ROW_H);
      g.imageSmoothingEnabled = true;
    }
    // Over it, each frame: search matches and the selection outlined, and labels.
    for (let k = 0; k < d.box_start_ps.length; k++) {
      const hit = query && d.lower[d.slot[k]].includes(query);
      const isSel = selected && selected.track === trackId && d.box_count[k] === 1 && d.box_index[k] === selected.index;
      if (!hit && !isSel && d.box_duration_ps[k] <= 36 * p) continue;
      const bx = boxAt(d, k, y, rows, p, trackId);
      if (!bx) continue;
      if (hit) {
        g.strokeStyle = '#f59e0b'; g.lineWidth = 2; g.strokeRect(bx.x + 1, bx.y + 1, Math.max(bx.w - 2, 1), ROW_H - 4); g.lineWidth = 1;
        highlighted++;
      }
      if (isSel) {
        g.strokeStyle = '#000'; g.lineWidth = 2; g.strokeRect(bx.x + 1, bx.y + 1, Math.max(bx.w - 2, 1), ROW_H - 4); g.lineWidth = 1;
        // An XLA:CPU op runs on after its box (its dispatch) until its pool work is
        // done: that span, dashed, is the time the op profile credits it.
        const done = selected.detail && selected.detail.until_done;
        const ex = done ? xOf(done.end_ps) : 0;
        if (done && ex > bx.x + bx.w + 1) {
          g.setLineDash([4, 3]); g.strokeStyle = '#000';
          g.strokeRect(bx.x + bx.w, bx.y + 3, Math.min(ex, W) - bx.x - bx.w, ROW_H - 8);
          g.setLineDash([]);
        }
      }
      if (bx.w > 36) {
        const label = bx.count > 1 ? `${count(bx.count)} × ${bx.name}` : bx.name;
        g.fillStyle = (bx.count > 1 ? d.inkMerged : d.ink)[d.slot[k]];
        g.fillText(fitText(label, bx.w - 6), bx.x + 3, bx.y + (ROW_H - 2) / 2);
      }
    }
  }

  function trackY(id) {
    const it = items.find(i => i.kind === 'track' && i.track.id === id);
    return it ? AXIS_H + it.y - scrollY : null;
  }

  function drawFlows() {
    if (!selected || !selected.detail || !selected.detail.flows.length) return;
    const d = selected.detail;
    const y0 = trackY(d.track);
    if (y0 === null) return;
    const from = drawnEvent(d.track, d.index);
    const fx = from ? from.x : xOf(d.start_ps), fy = from ? from.y + from.h / 2 : y0 + ROW_H / 2;
    g.strokeStyle = '#c0392b'; g.fillStyle = '#c0392b'; g.lineWidth = 1.5;
    for (const f of d.flows) {
      const y1 = trackY(f.track);
      if (y1 === null) continue;
      const to = drawnEvent(f.track, f.index);
      const tx = to ? to.x : xOf(f.start_ps), ty = to ? to.y + to.h / 2 : y1 + ROW_H / 2;
      const [ax, ay, bx, by] = f.direction === 'out' ? [fx, fy, tx, ty] : [tx, ty, fx, fy];
      g.beginPath(); g.moveTo(ax, ay); g.bezierCurveTo(ax + 30, ay, bx - 30, by, bx, by); g.stroke();
      g.beginPath(); g.moveTo(bx, by); g.lineTo(bx - 6, by - 4); g.lineTo(bx - 6, by + 4); g.fill();
    }
    g.lineWidth = 1;
  }

  function drawAxis() {
    g.fillStyle = '#f7f8fa'; g.fillRect(0, 0, W, AXIS_H);
    g.strokeStyle = '#ccd'; g.beginPath(); g.moveTo(0, AXIS_H - 0.5); g.lineTo(W, AXIS_H - 0.5); g.stroke();
    const step = niceStep((t1 - t0) / Math.max(1, (W - LABEL_W) / 110));
    g.fillStyle = '#445';
    const labels = [];
    for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
      const x = xOf(t);
      if (x < LABEL_W) continue;
      g.strokeStyle = '#99a'; g.beginPath(); g.moveTo(x + 0.5, AXIS_H - 6); g.lineTo(x + 0.5, AXIS_H); g.stroke();
      if (x + 60 < W) {
        const label = tickLabel(t, step);
        g.fillText(label, x + 3, AXIS_H / 2);
        labels.push(label);
      }
    }
    canvas.dataset.ticks = JSON.stringify(labels);
    g.fillStyle = '#445';
    g.fillText('time since capture start', 8, AXIS_H / 2);
  }

  const charW = 6.2;
  function fitText(s, w) {
    const n = Math.floor(w / charW);
    if (n <= 1) return '';
    return s.length > n ? s.slice(0, n - 1) + '…' : s;
  }

  // ---- interaction ----
  let paramTimer = null;
  function changed() {
    clampView();
    draw();
    scheduleFetch();
    saveView();
    if (pane) push();
  }

  // ---- the view in the address, so that a link opens it as it was (Perfetto's
  // permalinks): the window, the scroll, the selected event or area, the search, the
  // track filter, and the pinned, hidden and folded tracks ----
  function viewParams() {
    const list = xs => [...xs].map(x => encodeURIComponent(String(x))).join(',') || null;
    const marked = area && !area.selecting;
    return {
      start_ps: Math.round(t0),
      end_ps: Math.round(t1),
      y: scrollY > 0 ? Math.round(scrollY) : null,
      event: selected ? `${selected.track}:${selected.index}` : null,
      mark_start_ps: marked ? Math.round(Math.min(area.a, area.b)) : null,
      mark_end_ps: marked ? Math.round(Math.max(area.a, area.b)) : null,
      mark_tracks: marked && area.tracks && area.tracks.length ? area.tracks.join(',') : null,
      q: query ? search.value.trim() : null,
      filter: trackFilter.value.trim() || null,
      pins: list(pinned),
      hidden: list(hidden),
      folded: list(collapsed),
    };
  }
  function saveView() {
    clearTimeout(paramTimer);
    paramTimer = setTimeout(() => alive() && ctx.setParams(viewParams()), 300);
  }
  // Linked panes: each shows the same stretch of its run's time after the aligned step.
  function push() {
    const off = pane.link.offsets[pane.index];
    pane.link.panes.forEach((p, k) => { if (k !== pane.index && p) p.follow(t0 - off, t1 - off); });
  }
  if (pane) {
    pane.link.panes[pane.index] = {
      push,
      follow(a, b) {
        const off = pane.link.offsets[pane.index];
        t0 = a + off; t1 = b + off;
        clampView(); draw(); scheduleFetch();
      },
    };
    const activate = () => { pane.link.active = pane.index; };
    canvas.addEventListener('mouseenter', activate, { signal: listeners.signal });
    canvas.addEventListener('mousedown', activate, { signal: listeners.signal });
  }
  function zoom(factor, atX) {
    const x = atX === undefined ? (LABEL_W + W) / 2 : Math.max(LABEL_W, atX);
    const t = tOf(x);
    t0 = t - (t - t0) * factor;
    t1 = t + (t1 - t) * factor;
    changed();
  }
  function pan(fraction) {
    const d = (t1 - t0) * fraction;
    t0 += d; t1 += d;
    changed();
  }
  let mouseX;
  window.addEventListener('keydown', e => {
    if (!alive()) return;
    if (e.target instanceof HTMLInputElement || e.ctrlKey || e.metaKey || e.altKey) return;
    // Of two linked panes, the one the pointer was last in takes the keys.
    if (pane && pane.link.active !== pane.index) return;
    const k = e.key.toLowerCase();
    if (k === 'w') zoom(0.8, mouseX);
    else if (k === 's') zoom(1.25, mouseX);
    else if (k === 'a') pan(-0.15);
    else if (k === 'd') pan(0.15);
    // Escape clears the area selection and the selected event, as in Perfetto.
    else if (k === 'escape' && (area || selected)) {
      area = null;
      selected = null;
      clear(side);
      side.append(el('p', { class: 'muted' }, 'click an event to see its stats'));
      saveView();
      draw();
    }
    else return;
    e.preventDefault();
  }, { signal: listeners.signal });

  // As in Perfetto: the wheel scrolls the tracks, ctrl+wheel (a trackpad's pinch)
  // zooms at the pointer, shift+wheel and sideways swipes pan.
  canvas.addEventListener('wheel', e => {
    e.preventDefault();
    // What was under the pointer has moved: the tooltip waits for the next move.
    tip.hidden = true;
    if (e.ctrlKey || e.metaKey) {
      const r = canvas.getBoundingClientRect();
      zoom(Math.exp(e.deltaY * 0.0015), e.clientX - r.left);
      return;
    }
    if (e.shiftKey) { pan((e.deltaY || e.deltaX) / Math.max(1, W - LABEL_W)); return; }
    if (Math.abs(e.deltaX) > Math.abs(e.deltaY)) { pan(e.deltaX / Math.max(1, W - LABEL_W)); return; }
    scrollY += e.deltaY;
    changed();
  }, { passive: false });

  let drag = null;
  canvas.addEventListener('mousedown', e => {
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    canvas.focus();
    const th = thumb();
    if (th && x >= W - BAR_W && y > AXIS_H) {
      // On the thumb: drag it; elsewhere on the bar: jump there.
      if (y < th[0] || y > th[0] + th[1]) {
        scrollY = ((y - AXIS_H - th[1] / 2) / (H - AXIS_H - th[1])) * (contentH - (H - AXIS_H) + 20);
        changed();
      }
      barDrag = { y: e.clientY, scrollY };
      return;
    }
    // A drag in the ruler selects a span of every track; shift+drag, the tracks under it.
    if (x > LABEL_W && (y < AXIS_H || e.shiftKey)) {
      area = { a: inCapture(tOf(x)), b: inCapture(tOf(x)), y0: y, y1: y, all: y < AXIS_H, result: null, selecting: true };
      draw();
      return;
    }
    drag = { x: e.clientX, y: e.clientY, t0, t1, scrollY, moved: false };
  });
  window.addEventListener('mousemove', e => {
    if (!alive()) return;
    const r = canvas.getBoundingClientRect();
    mouseX = e.clientX >= r.left && e.clientX <= r.right ? e.clientX - r.left : undefined;
    if (barDrag) {
      const th = thumb();
      if (th) scrollY = barDrag.scrollY + ((e.clientY - barDrag.y) / Math.max(1, H - AXIS_H - th[1])) * (contentH - (H - AXIS_H) + 20);
      changed();
      return;
    }
    if (area && area.selecting) {
      area.b = inCapture(tOf(Math.max(LABEL_W, Math.min(W, e.clientX - r.left))));
      area.y1 = Math.max(AXIS_H, Math.min(H, e.clientY - r.top));
      draw();
      return;
    }
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
    if (!drag.moved) return;
    const p = (drag.t1 - drag.t0) / Math.max(1, W - LABEL_W);
    t0 = drag.t0 - dx * p; t1 = drag.t1 - dx * p;
    scrollY = drag.scrollY - dy;
    changed();
  }, { signal: listeners.signal });
  window.addEventListener('mouseup', e => {
    if (!alive()) return;
    if (barDrag) { barDrag = null; draw(); return; }
    if (area && area.selecting) {
      area.selecting = false;
      if (Math.abs(xOf(area.b) - xOf(area.a)) < 3) { area = null; draw(); return; }
      selectArea();
      return;
    }
    if (!drag) return;
    const wasDrag = drag.moved;
    drag = null;
    if (!wasDrag) click(e);
  }, { signal: listeners.signal });

  function click(e) {
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    if (y < AXIS_H) return;
    const it = sticky && y < AXIS_H + PLANE_H ? sticky : items.find(i => AXIS_H + i.y - scrollY <= y && y < AXIS_H + i.y - scrollY + i.h);
    if (it && ['track', 'counter', 'busy'].includes(it.kind) && x < LABEL_W && x >= LABEL_W - ICONS_W - 4) {
      const id = it.kind === 'track' ? it.track.id : counterId(it);
      if (x < LABEL_W - ICONS_W / 2) {
        const at = pinned.indexOf(id);
        if (at >= 0) pinned.splice(at, 1); else pinned.push(id);
      } else {
        hidden.add(id);
        const at = pinned.indexOf(id);
        if (at >= 0) pinned.splice(at, 1);
      }
      showHiddenCount();
      relayout(); changed();
      return;
    }
    if (it && it.kind === 'plane') {
      if (collapsed.has(it.key)) collapsed.delete(it.key); else collapsed.add(it.key);
      relayout(); changed();
      return;
    }
    if (it && it.kind === 'steps') {
      const b = stepBoxes.find(b => x >= b.x && x <= b.x + b.w);
      if (b) showStep(steps[b.k]);
      if (b && pane && pane.link.alignAt) pane.link.alignAt(steps[b.k].step_num);
      return;
    }
    const hit = boxUnder(x, y);
    if (!hit) return;
    if (hit.count > 1) {
      const pad = Math.max(hit.dur * 0.1, pspx() * 4);
      t0 = hit.start - pad; t1 = hit.start + hit.dur + pad;
      changed();
      return;
    }
    selectEvent(hit.track, hit.index);
  }

  /** The track ids an area covers: every track from the ruler, else those under it. */
  function areaTracks() {
    if (area.all) return [];
    const lo = Math.min(area.y0, area.y1), hi = Math.max(area.y0, area.y1);
    return items.filter(i => i.kind === 'track' && AXIS_H + i.y - scrollY < hi && AXIS_H + i.y - scrollY + i.h > lo).map(i => i.track.id);
  }

  /** `t` within the capture: an area is of its events, never before or after it. */
  function inCapture(t) {
    return Math.max(span0, Math.min(span1, t));
  }

  async function selectArea() {
    area.a = inCapture(area.a); area.b = inCapture(area.b);
    const a = Math.round(Math.min(area.a, area.b)), b = Math.round(Math.max(area.a, area.b));
    if (!(b > a)) { area = null; draw(); return; }
    const mine = area;
    // An area from a link names its tracks; one drawn takes those under it.
    const ids = mine.tracks || areaTracks();
    mine.tracks = ids;
    saveView();
    clear(side);
    side.append(el('p', { class: 'muted' }, 'loading…'));
    try {
      const q = { ...sel, start_ps: a, end_ps: b };
      if (ids.length) q.tracks = ids.join(',');
      const d = await api('timeline/select', q);
      if (!alive() || area !== mine) return;
      mine.result = d;
      showArea(d);
      draw();
    } catch (err) {
      clear(side);
      side.append(el('p', { class: 'error' }, String(err.message || err)));
    }
  }

  function showArea(d) {
    clear(side);
    side.append(el('h3', { id: 'tl-area', 'data-start-ps': d.start_ps, 'data-end-ps': d.end_ps }, `selection: ${dur(d.span_ps)}`));
    side.append(kv([
      ['span', `${dur(d.start_ps)} – ${dur(d.end_ps)}`],
      ['tracks', d.tracks.length === tr.tracks.length ? `all ${d.tracks.length}` : String(d.tracks.length)],
      ['events', count(d.events)],
    ]));
    const t = el('table', { class: 'data area-rows' },
      el('thead', {}, el('tr', {}, ...['name', 'count', 'in span', 'avg'].map(h => el('th', {}, h)))),
      el('tbody', {}, ...d.rows.slice(0, 500).map(r => el('tr', {
        title: `${r.name}\n${count(r.count)} on ${r.tracks} track(s) · in span ${dur(r.in_span_ps)} · total ${dur(r.total_ps)}\n`
          + `avg ${dur(r.avg_ps)} · min ${dur(r.min_ps)} · max ${dur(r.max_ps)}`,
      },
      el('td', {}, r.name), el('td', { class: 'num' }, count(r.count)),
      el('td', { class: 'num' }, dur(r.in_span_ps)), el('td', { class: 'num' }, dur(r.avg_ps))))));
    side.append(t);
    if (d.rows.length > 500) side.append(el('p', { class: 'muted' }, `first 500 of ${count(d.rows.length)} names`));
  }

  function drawArea() {
    if (!area) return;
    const xa = Math.max(LABEL_W, Math.min(xOf(area.a), xOf(area.b))), xb = Math.min(W, Math.max(xOf(area.a), xOf(area.b)));
    if (xb <= xa) return;
    const [ya, yb] = area.all ? [AXIS_H, H] : [Math.min(area.y0, area.y1), Math.max(area.y0, area.y1)];
    g.fillStyle = 'rgba(59, 111, 212, 0.12)'; g.fillRect(xa, ya, xb - xa, yb - ya);
    g.strokeStyle = '#3b6fd4'; g.strokeRect(xa + 0.5, ya + 0.5, xb - xa - 1, yb - ya - 1);
    // Its length on the ruler.
    g.fillStyle = '#3b6fd4'; g.fillRect(xa, AXIS_H - 14, xb - xa, 14);
    g.fillStyle = '#fff'; g.fillText(dur(Math.abs(area.b - area.a)), xa + 4, AXIS_H - 7);
  }

  /** Zooms to a step and lists what it spent. */
  function showStep(st) {
    const pad = st.duration_ps * 0.05;
    t0 = st.start_ps - pad; t1 = st.start_ps + st.duration_ps + pad;
    changed();
    clear(side);
    side.append(el('h3', { id: 'tl-step' }, `step ${st.step_num}`));
    const rows = [
      ['host', st.host],
      ['start', dur(st.start_ps)],
      ['duration', dur(st.duration_ps)],
      ['device busy', dur(st.device_busy_ps)],
      ['device idle', dur(st.device_idle_ps)],
      ['compile', dur(st.compile_ps)],
    ];
    if (st.device_work_ps !== undefined) rows.push(['launched', dur(st.device_work_ps)]);
    if (st.flops_utilization_pct !== undefined) rows.push(['FLOPs utilisation', `${st.flops_utilization_pct.toFixed(1)}%`]);
    side.append(kv(rows));
  }

  async function selectEvent(track, index) {
    selected = { track, index, detail: null };
    saveView();
    draw();
    clear(side);
    keepResults();
    side.append(el('p', { class: 'muted' }, 'loading…'));
    try {
      const d = await api('timeline/event', { ...sel, track, index });
      if (!alive() || !selected || selected.track !== track || selected.index !== index) return;
      selected.detail = d;
      showDetail(d);
      draw();
    } catch (err) {
      clear(side);
      side.append(el('p', { class: 'error' }, String(err.message || err)));
    }
  }

  function focusEvent(track, index, start, duration) {
    // The event in the middle, with context: the window as it is where the event is
    // under a twentieth of it, else twenty times the event (three where it fills it).
    const cur = t1 - t0;
    const w = duration > cur * 0.8 ? Math.max(duration * 3, 2000) : Math.min(cur, Math.max(duration * 20, 2000, W - LABEL_W));
    t0 = start + duration / 2 - w / 2; t1 = t0 + w;
    const it = items.find(i => i.kind === 'track' && i.track.id === track);
    if (it) scrollY = Math.max(0, it.y - (H - AXIS_H) / 3);
    changed();
    selectEvent(track, index);
  }

  function kv(rows) {
    return el('table', { class: 'kv' }, ...rows.map(([k, v]) => el('tr', {}, el('th', {}, k), el('td', {}, v))));
  }

  /** The search's list, back at the top of the side panel while the search stands. */
  function keepResults() {
    if (results && query) side.append(results);
  }

  function showDetail(d) {
    clear(side);
    keepResults();
    side.append(el('h3', { id: 'tl-event-name' }, d.display_name || d.name));
    if (d.name && d.name !== d.display_name) side.append(el('p', { class: 'mono small' }, d.name));
    side.append(kv([
      ['track', `${d.host} · ${d.plane} · ${d.line}`],
      ['start', dur(d.start_ps)],
      ['duration', dur(d.duration_ps)],
      ['step', d.step_num === null ? '—' : String(d.step_num)],
    ]));
    // Every event of this name, and where the op it ran is described.
    const o = d.occurrences;
    // Of a run read a host at a time, the event's host's.
    // Of an XLA:CPU op, the boxes are its dispatches: the op profile's time is below.
    const boxes = d.until_done ? ' (boxes: dispatches)' : '';
    side.append(el('h4', { id: 'tl-occurrences' }, `${o.host ? `all occurrences on ${o.host}` : 'all occurrences'}${boxes}`));
    side.append(kv([
      ['count', `${count(o.count)} on ${o.tracks} track${o.tracks === 1 ? '' : 's'}`],
      ['total', dur(o.total_ps)],
      ['min / avg / max', `${dur(o.min_ps)} / ${dur(o.avg_ps)} / ${dur(o.max_ps)}`],
    ]));
    // An XLA:CPU op: its run until its intra-op work was done, and every run so, as
    // the op profile sums them (the boxes above are its dispatches).
    const u = d.until_done;
    if (u) {
      side.append(el('h4', { id: 'tl-until-done' }, 'until done (as the op profile counts it)'));
      side.append(kv([
        ['this run', `${dur(u.duration_ps)}, done at ${dur(u.end_ps)} (dashed in the track)`],
        ['every run', `${count(u.op_count)} · total ${dur(u.op_total_ps)} · avg ${dur(u.op_avg_ps)}`],
      ]));
    }
    const stat = n => (d.stats.find(s => s.name === n) || d.metadata_stats.find(s => s.name === n) || {}).value;
    const op = stat('hlo_op') || (d.line === 'XLA Ops' ? d.display_name : '');
    if (op) {
      side.append(el('p', { id: 'tl-op-links' }, opLink(op, stat('hlo_module') || ''), ' · ',
        pageLink('op profile row', 'ops', { q: op, run: sel.run || null })));
    }
    const statTable = (label, stats) => {
      if (!stats.length) return;
      side.append(el('h4', {}, label));
      side.append(el('table', { class: 'kv stats' }, ...stats.map(s => el('tr', {}, el('th', {}, s.name), el('td', { class: 'mono' }, s.value)))));
    };
    statTable('event stats', d.stats);
    statTable('metadata stats', d.metadata_stats);
    if (d.flows.length) {
      side.append(el('h4', {}, 'flows'));
      const ul = el('ul', { class: 'flows' });
      for (const f of d.flows) {
        const a = el('a', { href: '#' }, `${f.direction === 'out' ? '→' : '←'} ${f.name} @ ${dur(f.start_ps)}`);
        a.addEventListener('click', ev => { ev.preventDefault(); focusEvent(f.track, f.index, f.start_ps, f.duration_ps); });
        ul.append(el('li', {}, a));
      }
      side.append(ul);
    }
  }

  search.addEventListener('keydown', async e => {
    if (e.key !== 'Enter') return;
    const q = search.value.trim();
    // Enter again on the same search steps through its matches.
    if (q && q.toLowerCase() === query && hitsTotal) { step(e.shiftKey ? -1 : 1); return; }
    await runSearch(q);
  });

  /** Searches the run for `q` (as the search box does), listing the matches. */
  async function runSearch(q) {
    query = q.toLowerCase();
    saveView();
    hits = []; hitsFrom = 0; hitsTotal = 0; hitAt = -1; results = null;
    showHits();
    clear(side);
    draw();
    if (!q) return;
    side.append(el('p', { class: 'muted' }, 'searching…'));
    try {
      const res = await api('timeline/search', { ...sel, q, offset: 0, limit: SEARCH_PAGE });
      if (!alive() || query !== q.toLowerCase()) return;
      hits = res.matches; hitsFrom = 0; hitsTotal = res.total; hitAt = -1;
      const byId = new Map(tr.tracks.map(t => [t.id, t]));
      const ul = el('ul', { class: 'results', id: 'tl-results' });
      for (const m of res.matches.slice(0, 200)) {
        const t = byId.get(m.track);
        const a = el('a', { href: '#' }, `${m.name}`, el('span', { class: 'muted' }, ` ${dur(m.start_ps)} · ${dur(m.duration_ps)} · ${t ? t.line : ''}`));
        a.addEventListener('click', ev => { ev.preventDefault(); focusEvent(m.track, m.index, m.start_ps, m.duration_ps); });
        ul.append(el('li', {}, a));
      }
      results = el('div', { id: 'tl-search-results' },
        el('h3', {}, `${count(res.total)} events match “${res.query}”`),
        ...(res.total > 200 ? [el('p', { class: 'muted small' }, `the first ${count(Math.min(200, res.matches.length))} in time listed; ‹ › step through all ${count(res.total)}`)] : []),
        ul);
      clear(side);
      side.append(results);
      showHits();
      draw();
    } catch (err) {
      clear(side);
      side.append(el('p', { class: 'error' }, String(err.message || err)));
    }
  }

  /** The search's counter and buttons. */
  function showHits() {
    prevHit.disabled = nextHit.disabled = !hitsTotal;
    hitCount.textContent = !query ? '' : hitsTotal ? `${hitAt < 0 ? '–' : count(hitAt + 1)} / ${count(hitsTotal)}` : '';
  }

  /** Shows the next (`by` 1) or previous (-1) match in time order, loading the page it
   * is on where that is not the page loaded. */
  async function step(by) {
    if (!hitsTotal) return;
    const at = hitAt < 0 ? (by > 0 ? 0 : hitsTotal - 1) : (hitAt + by + hitsTotal) % hitsTotal;
    if (at < hitsFrom || at >= hitsFrom + hits.length) {
      const q = query, from = Math.floor(at / SEARCH_PAGE) * SEARCH_PAGE;
      const res = await api('timeline/search', { ...sel, q: search.value.trim(), offset: from, limit: SEARCH_PAGE });
      if (!alive() || query !== q) return;
      hits = res.matches; hitsFrom = from; hitsTotal = res.total;
      if (at >= hitsFrom + hits.length) return;
    }
    hitAt = at;
    const m = hits[at - hitsFrom];
    showHits();
    focusEvent(m.track, m.index, m.start_ps, m.duration_ps);
  }
  trackFilter.addEventListener('input', () => {
    filterText = trackFilter.value.trim().toLowerCase();
    relayout(); changed();
  });
  foldAll.addEventListener('click', () => {
    const keys = [...new Set(items.filter(i => i.kind === 'plane').map(i => i.key))];
    const fold = keys.some(k => !collapsed.has(k));
    for (const k of keys) if (fold) collapsed.add(k); else collapsed.delete(k);
    foldAll.textContent = fold ? 'expand all' : 'collapse all';
    relayout(); changed();
  });
  function showHiddenCount() {
    showHidden.hidden = !hidden.size;
    showHidden.textContent = `show ${hidden.size} hidden`;
  }
  showHidden.addEventListener('click', () => { hidden.clear(); showHiddenCount(); relayout(); changed(); });
  prevHit.addEventListener('click', () => step(-1));
  nextHit.addEventListener('click', () => step(1));

  // Hover: the box under the pointer, in a tooltip.
  canvas.addEventListener('mousemove', e => {
    const r = canvas.getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    const free = !drag && !barDrag && !(area && area.selecting) && y > AXIS_H;
    const row = free && x > LABEL_W ? items.find(i => AXIS_H + i.y - scrollY <= y && y < AXIS_H + i.y - scrollY + i.h) : null;
    if (row && row.kind === 'counter') {
      const t = tOf(x);
      clear(tip);
      tip.append(el('strong', {}, `${row.counter.name}: ${bytes(counterAt(row.counter, t))} in use`), el('div', {}, `at ${dur(t)}`));
      tip.hidden = false;
      tip.style.left = `${Math.min(x + 12, W - 260)}px`;
      tip.style.top = `${Math.min(y + 14, H - 40)}px`;
      return;
    }
    if (row && row.kind === 'busy') {
      const t = tOf(x), v = busyAt(row.busy, t);
      clear(tip);
      tip.append(el('strong', {}, `${row.busy.name}: ${v === null ? '…' : `${v.toFixed(1)}%`}`), el('div', {}, `at ${dur(t)}, over ${dur(pspx())}`));
      tip.hidden = false;
      tip.style.left = `${Math.min(x + 12, W - 260)}px`;
      tip.style.top = `${Math.min(y + 14, H - 40)}px`;
      return;
    }
    const stepHit = row && row.kind === 'steps' ? stepBoxes.find(b => x >= b.x && x < b.x + b.w) : null;
    if (stepHit) {
      const st = steps[stepHit.k];
      clear(tip);
      tip.append(el('strong', {}, `step ${st.step_num} · ${dur(st.duration_ps)}`));
      if (st.critical_path) tip.append(el('div', { class: 'step-path' }, `critical path: ${pathWords(st.critical_path)}`));
      tip.hidden = false;
      tip.style.left = `${Math.min(x + 12, W - 260)}px`;
      tip.style.top = `${Math.min(y + 14, H - 40)}px`;
      return;
    }
    const hit = free ? boxUnder(x, y) : null;
    if (!hit) { tip.hidden = true; return; }
    clear(tip);
    tip.append(el('strong', {}, hit.count > 1 ? `${count(hit.count)} events` : elideMiddle(hit.name)),
      el('div', {}, hit.count > 1 ? `mostly ${elideMiddle(hit.name)} · click to zoom in` : `${dur(hit.dur)} at ${dur(hit.start)}`));
    tip.hidden = false;
    // Placed through the CSSOM (the CSP refuses style attributes), inside the canvas.
    tip.style.left = `${Math.min(x + 12, W - 260)}px`;
    tip.style.top = `${Math.min(y + 14, H - 40)}px`;
  }, { signal: listeners.signal });
  canvas.addEventListener('mouseleave', () => { tip.hidden = true; }, { signal: listeners.signal });
  fit.addEventListener('click', () => { t0 = span0 - margin; t1 = span1 + margin; changed(); });

  // A link's view (see viewParams): the tracks' state and the scroll first, so the
  // first layout is the link's.
  const P = ctx.params;
  const trackIds = new Set(tr.tracks.map(t => t.id));
  // Lists in the address: each value percent-encoded (see viewParams); one that does
  // not decode is not one this page wrote, and is left out.
  const listed = k => (P.get(k) || '').split(',').filter(Boolean).flatMap(w => {
    try { return [decodeURIComponent(w)]; } catch (_) { return []; }
  });
  // Track ids, and counters' ids (see counterId), of this run.
  const counterIds = new Set([...counters.map(a => counterId({ kind: 'counter', counter: a })),
    ...busyCounters.map(b => counterId({ kind: 'busy', busy: b }))]);
  const trackList = k => listed(k).filter(v => /^\d+$/.test(v) && trackIds.has(Number(v))).map(Number);
  const anyIds = k => [...trackList(k), ...listed(k).filter(v => counterIds.has(v))];
  for (const id of anyIds('pins')) if (!pinned.includes(id)) pinned.push(id);
  for (const id of anyIds('hidden')) hidden.add(id);
  for (const k of listed('folded')) collapsed.add(k);
  if (P.get('filter')) { trackFilter.value = P.get('filter'); filterText = trackFilter.value.trim().toLowerCase(); }
  showHiddenCount();
  relayout();
  if (Number(P.get('y')) > 0) scrollY = Number(P.get('y'));

  new ResizeObserver(() => alive() && resize()).observe(wrap);
  window.addEventListener('resize', () => alive() && resize(), { signal: listeners.signal });
  resize();
  // A link from a finding (or a compile) marks the interval it talks about: selected.
  const markA = Number(ctx.params.get('mark_start_ps')), markB = Number(ctx.params.get('mark_end_ps'));
  // The search, then the area, then the event: the last to answer fills the side panel.
  (async () => {
    if (P.get('q')) { search.value = P.get('q'); await runSearch(search.value.trim()); }
    if (!alive()) return;
    if (Number.isFinite(markA) && Number.isFinite(markB) && markB > markA && P.get('mark_start_ps')) {
      const ids = trackList('mark_tracks');
      area = { a: markA, b: markB, y0: AXIS_H, y1: AXIS_H, all: !ids.length, tracks: ids.length ? ids : null, result: null, selecting: false };
      await selectArea();
      draw();
    }
    const ev = /^(\d+):(\d+)$/.exec(P.get('event') || '');
    if (alive() && ev && trackIds.has(Number(ev[1]))) selectEvent(Number(ev[1]), Number(ev[2]));
  })();

  // For tests and scripts: the window shown and the events drawn (CSS px in the canvas).
  window[pane && pane.index === 1 ? 'stepscopeTimelineB' : 'stepscopeTimeline'] = {
    view: () => ({ start_ps: t0, end_ps: t1, scroll_y: scrollY }),
    events: () => drawnBoxes(b => b.count === 1),
    boxes: () => drawnBoxes(),
    steps: () => stepBoxes.map(b => ({ ...b, step_num: steps[b.k].step_num })),
    layout: () => items.map(i => ({ kind: i.kind, y: i.y - scrollY, h: i.h, track: i.track ? i.track.id : null, label: i.label || null, pinned: !!i.pinned, device: i.busy ? i.busy.device : null, counter: i.counter ? i.counter.name : null })),
    busy: device => { const t = tiles.get(busyKey(device)); return t && t.data ? t.data : null; },
    sticky: () => (sticky ? sticky.label : null),
    thumb: () => thumb(),
    pending: () => [...tiles.values()].some(t => t.req),
    drawMs: () => drawMs,
    fresh: () => !drawQueued && fresh(),
  };
}
