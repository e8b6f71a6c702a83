// A layered graph drawn as SVG (the HLO graph): one column per level, left to right.
// An edge that spans several columns passes through a slot of its own in each column
// between (a dummy node), so no edge runs through a node: every edge is drawn in the
// gaps between columns and through its own slots. The columns are ordered by repeated
// barycentre sweeps (left to right, then back) to cut crossings. The drawing sits in a
// viewport that zooms (wheel, + and −), pans (drag), fits the graph and opens with the
// chosen node in its middle. No layout library: the graphs are small (a few hundred
// nodes at most).
import { el } from './dom.js';
import { elideMiddle as cut } from './format.js';

const NS = 'http://www.w3.org/2000/svg';
export const NODE_W = 210;
export const NODE_H = 50;
/** The height of an edge's slot in a column it passes through. */
const SLOT_H = 10;
const GAP_X = 64;
const GAP_Y = 12;
const PAD = 8;
/** Barycentre sweeps, each left to right then right to left. */
const SWEEPS = 4;
/** The viewport's height, px. */
const VIEW_H = 560;

function svg(tag, attrs = {}, ...children) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) e.setAttribute(k, String(v));
  for (const c of children) e.append(c);
  return e;
}

/**
 * Columns of the graph: each a list of slots, a node (`{ name }`) or an edge's pass
 * through the column (`{ edge, dummy: true }`), in drawing order; and each edge's path
 * as the slots it visits, column by column.
 */
export function layout(nodes, edges) {
  const levels = [...new Set(nodes.map(n => n.level))].sort((a, b) => a - b);
  const colOf = new Map(levels.map((l, i) => [l, i]));
  const cols = levels.map(() => []);
  const slotOf = new Map();
  for (const n of nodes) {
    const s = { name: n.name, col: colOf.get(n.level) };
    cols[s.col].push(s);
    slotOf.set(n.name, s);
  }
  // Each edge's slots: its ends, and a dummy in every column strictly between.
  const paths = [];
  edges.forEach((e, k) => {
    const a = slotOf.get(e.from), b = slotOf.get(e.to);
    if (!a || !b) return;
    const path = [a];
    const step = b.col > a.col ? 1 : -1;
    for (let c = a.col + step; c !== b.col && b.col !== a.col; c += step) {
      const d = { edge: k, dummy: true, col: c };
      cols[c].push(d);
      path.push(d);
    }
    path.push(b);
    paths.push({ edge: e, path });
  });
  // Neighbours of each slot in the columns either side (through the edges' paths).
  const left = new Map(), right = new Map();
  const link = (m, s, t) => { if (!m.has(s)) m.set(s, []); m.get(s).push(t); };
  for (const { path } of paths) {
    for (let i = 0; i + 1 < path.length; i++) {
      const [s, t] = path[i].col < path[i + 1].col ? [path[i], path[i + 1]] : [path[i + 1], path[i]];
      if (s.col === t.col) continue;
      link(right, s, t);
      link(left, t, s);
    }
  }
  const index = () => cols.forEach(c => c.forEach((s, y) => { s.y = y; }));
  index();
  const order = (c, near) => {
    const keyed = c.map((s, i) => {
      const ys = (near.get(s) || []).map(t => t.y);
      return [ys.length ? ys.reduce((a, b) => a + b, 0) / ys.length : s.y, i, s];
    });
    keyed.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    return keyed.map(k => k[2]);
  };
  for (let sweep = 0; sweep < SWEEPS; sweep++) {
    for (let x = 1; x < cols.length; x++) { cols[x] = order(cols[x], left); index(); }
    for (let x = cols.length - 2; x >= 0; x--) { cols[x] = order(cols[x], right); index(); }
  }
  return { cols, paths, slotOf };
}

/**
 * Draws `nodes` and `edges` into a viewport. `label(node)` gives a node's three lines;
 * `onPick(node)`, when given, makes nodes links; `mark` names the node drawn as chosen
 * (the view opens with it in the middle).
 */
export function drawGraph({ nodes, edges, label, onPick, mark, id }) {
  const { cols, paths, slotOf } = layout(nodes, edges);
  const heightOf = s => (s.dummy ? SLOT_H : NODE_H);
  const colH = c => c.reduce((h, s) => h + heightOf(s) + GAP_Y, -GAP_Y);
  const tallest = Math.max(NODE_H, ...cols.map(colH));
  const width = PAD * 2 + cols.length * NODE_W + Math.max(0, cols.length - 1) * GAP_X;
  const height = PAD * 2 + tallest;
  // Each column centred vertically; each slot's top left corner.
  cols.forEach((c, x) => {
    let y = PAD + (tallest - colH(c)) / 2;
    for (const s of c) {
      s.px = PAD + x * (NODE_W + GAP_X);
      s.py = y;
      y += heightOf(s) + GAP_Y;
    }
  });
  const root = svg('svg', { id, class: 'graph', width: '100%', height: Math.min(VIEW_H, height + 2), role: 'img', 'data-width': width, 'data-height': height });
  root.append(svg('defs', {}, svg('marker', { id: `${id}-arrow`, viewBox: '0 0 8 8', refX: 8, refY: 4, markerWidth: 7, markerHeight: 7, orient: 'auto' },
    svg('path', { d: 'M0,0 L8,4 L0,8 z', class: 'graph-arrow' }))));
  const scene = svg('g', { class: 'scene' });
  root.append(scene);
  const edgeLayer = svg('g', { class: 'edges' });
  scene.append(edgeLayer);
  for (const { edge, path } of paths) {
    edgeLayer.append(svg('path', {
      class: 'graph-edge', d: edgePath(path), 'marker-end': `url(#${id}-arrow)`, 'data-from': edge.from, 'data-to': edge.to,
    }));
  }
  for (const n of nodes) {
    const s = slotOf.get(n.name);
    const [a, b, c] = label(n);
    const g = svg('g', { class: `node${n.name === mark ? ' chosen' : ''}${onPick ? ' pick' : ''}`, transform: `translate(${s.px},${s.py})`, 'data-name': n.name, tabindex: onPick ? 0 : null },
      svg('title', {}, [n.name, b, c].filter(Boolean).join('\n')),
      svg('rect', { width: NODE_W, height: NODE_H, rx: 5 }),
      svg('text', { x: 8, y: 15, class: 'name' }, cut(a, 28)),
      svg('text', { x: 8, y: 30 }, cut(b, 30)),
      svg('text', { x: 8, y: 44, class: 'numbers' }, cut(c || '', 30)));
    if (onPick) {
      g.addEventListener('click', ev => { if (!root.dataset.dragged) onPick(n); ev.stopPropagation(); });
      g.addEventListener('keydown', ev => { if (ev.key === 'Enter') onPick(n); });
    }
    scene.append(g);
  }
  const chosen = mark !== undefined ? slotOf.get(mark) : null;
  return viewport(root, scene, { width, height, centre: chosen ? [chosen.px + NODE_W / 2, chosen.py + NODE_H / 2] : null, id });
}

/** An edge through its slots: from its source's side, a curve in each gap between
 * columns, a straight run through each slot it passes. An edge within one column
 * bows out into the gap to the right. */
function edgePath(path) {
  const forward = path[path.length - 1].col >= path[0].col;
  // The points it enters and leaves each slot at, left to right of travel.
  const mid = s => s.py + (s.dummy ? SLOT_H : NODE_H) / 2;
  const pts = [];
  path.forEach((s, i) => {
    const [l, r] = [s.px, s.px + NODE_W];
    if (i === 0) pts.push([forward ? r : l, mid(s)]);
    else if (i === path.length - 1) pts.push([forward ? l : r, mid(s)]);
    else pts.push(forward ? [l, mid(s)] : [r, mid(s)], forward ? [r, mid(s)] : [l, mid(s)]);
  });
  const [a, b] = [path[0], path[path.length - 1]];
  if (a.col === b.col) {
    const [sx, sy, ty] = [a.px + NODE_W, mid(a), mid(b)];
    const out = GAP_X * 0.45;
    return `M${sx},${sy} C${sx + out},${sy} ${sx + out},${ty} ${sx + 2},${ty}`;
  }
  let d = `M${pts[0][0]},${pts[0][1]}`;
  for (let i = 0; i + 1 < pts.length; i++) {
    const [x0, y0] = pts[i], [x1, y1] = pts[i + 1];
    if (y0 === y1 || Math.abs(x1 - x0) === NODE_W) d += ` L${x1},${y1}`;
    else {
      const bend = (x1 - x0) / 2;
      d += ` C${x0 + bend},${y0} ${x1 - bend},${y1} ${x1},${y1}`;
    }
  }
  return d;
}

/** `root` (an <svg> holding `scene`) in a box with zoom, pan and fit; opened with
 * `centre` (a point of the scene) in its middle at full size, else fitted. */
function viewport(root, scene, { width, height, centre, id }) {
  const box = el('div', { class: 'graphbox' });
  const state = { k: 1, x: 0, y: 0 };
  const apply = () => {
    scene.setAttribute('transform', `translate(${state.x},${state.y}) scale(${state.k})`);
    root.dataset.scale = String(state.k);
  };
  const size = () => [root.clientWidth || box.clientWidth || 900, root.clientHeight || Math.min(VIEW_H, height + 2)];
  const fit = () => {
    const [w, h] = size();
    state.k = Math.min(1, w / width, h / height);
    state.x = (w - width * state.k) / 2;
    state.y = (h - height * state.k) / 2;
    apply();
  };
  const centreOn = ([cx, cy]) => {
    const [w, h] = size();
    state.x = w / 2 - cx * state.k;
    state.y = h / 2 - cy * state.k;
    apply();
  };
  const zoom = (factor, at) => {
    const [w, h] = size();
    const [px, py] = at || [w / 2, h / 2];
    const k = Math.min(4, Math.max(0.05, state.k * factor));
    state.x = px - ((px - state.x) * k) / state.k;
    state.y = py - ((py - state.y) * k) / state.k;
    state.k = k;
    apply();
  };
  root.addEventListener('wheel', ev => {
    ev.preventDefault();
    const r = root.getBoundingClientRect();
    zoom(ev.deltaY < 0 ? 1.15 : 1 / 1.15, [ev.clientX - r.left, ev.clientY - r.top]);
  }, { passive: false });
  let drag = null;
  root.addEventListener('mousedown', ev => { drag = { x: ev.clientX, y: ev.clientY, sx: state.x, sy: state.y, moved: false }; delete root.dataset.dragged; });
  window.addEventListener('mousemove', ev => {
    if (!drag || !root.isConnected) return;
    const [dx, dy] = [ev.clientX - drag.x, ev.clientY - drag.y];
    if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
    if (!drag.moved) return;
    state.x = drag.sx + dx; state.y = drag.sy + dy;
    root.classList.add('panning');
    apply();
  });
  window.addEventListener('mouseup', () => {
    if (drag && drag.moved) root.dataset.dragged = '1';
    drag = null;
    root.classList.remove('panning');
  });
  const button = (label, title, act, suffix) => {
    const b = el('button', { type: 'button', class: 'small', id: `${id}-${suffix}`, title }, label);
    b.addEventListener('click', act);
    return b;
  };
  const bar = el('div', { class: 'graph-bar' },
    button('fit', 'the whole graph in view', fit, 'fit'),
    button('+', 'zoom in', () => zoom(1.25), 'in'),
    button('−', 'zoom out', () => zoom(1 / 1.25), 'out'),
    centre ? button('chosen', 'the chosen instruction in the middle, full size', () => { state.k = 1; centreOn(centre); }, 'centre') : '',
    el('span', { class: 'muted small' }, ' wheel zooms · drag pans'));
  box.append(bar, root);
  // Laid out once in the page: the chosen node in the middle, else the whole graph.
  requestAnimationFrame(() => {
    const [w, h] = size();
    if (centre && (width > w || height > h)) centreOn(centre); else fit();
  });
  apply();
  return box;
}
