// A layered graph drawn as SVG (the HLO graph): one column per level, left to right,
// nodes ordered in each column by where their neighbours in the column before sit
// (one barycentre pass), edges as curves from an operand's right side to its user's
// left side. No layout library: the graphs are small (at most a few hundred nodes).
import { el } from './dom.js';

const NS = 'http://www.w3.org/2000/svg';
export const NODE_W = 210;
export const NODE_H = 50;
const GAP_X = 56;
const GAP_Y = 12;
const PAD = 8;

function svg(tag, attrs = {}, ...children) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) e.setAttribute(k, String(v));
  for (const c of children) e.append(c);
  return e;
}

/** `text` cut to `n` characters, its middle replaced by an ellipsis. */
function cut(text, n) {
  return text.length <= n ? text : `${text.slice(0, Math.ceil(n / 2) - 1)}…${text.slice(text.length - Math.floor(n / 2))}`;
}

/** Column and row of each node: columns by level, rows by barycentre of the node's
 * operands (or, in the first column, its users) in the neighbouring column. */
export function layout(nodes, edges) {
  const levels = [...new Set(nodes.map(n => n.level))].sort((a, b) => a - b);
  const cols = levels.map(l => nodes.filter(n => n.level === l).map(n => n.name));
  const pos = new Map();
  const place = () => cols.forEach((c, x) => c.forEach((name, y) => pos.set(name, { x, y })));
  place();
  const into = new Map(), out = new Map();
  for (const e of edges) {
    if (!into.has(e.to)) into.set(e.to, []);
    into.get(e.to).push(e.from);
    if (!out.has(e.from)) out.set(e.from, []);
    out.get(e.from).push(e.to);
  }
  const centre = (names, x) => {
    const ys = (names || []).map(n => pos.get(n)).filter(p => p && p.x === x).map(p => p.y);
    return ys.length ? ys.reduce((a, b) => a + b, 0) / ys.length : null;
  };
  const order = (c, key) => {
    const keyed = c.map((name, i) => [key(name) ?? i, i, name]);
    keyed.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    return keyed.map(k => k[2]);
  };
  // Left to right by operands, then the first column by its users.
  for (let x = 1; x < cols.length; x++) {
    cols[x] = order(cols[x], name => centre(into.get(name), x - 1));
    place();
  }
  if (cols.length > 1) {
    cols[0] = order(cols[0], name => centre(out.get(name), 1));
    place();
  }
  return { cols, pos };
}

/**
 * Draws `nodes` and `edges` into a new <svg>. `label(node)` gives a node's three lines;
 * `onPick(node)`, when given, makes nodes links; `mark` names the node drawn as chosen.
 */
export function drawGraph({ nodes, edges, label, onPick, mark, id }) {
  const { cols, pos } = layout(nodes, edges);
  const tallest = Math.max(1, ...cols.map(c => c.length));
  const width = PAD * 2 + cols.length * NODE_W + (cols.length - 1) * GAP_X;
  const height = PAD * 2 + tallest * NODE_H + (tallest - 1) * GAP_Y;
  // Each column centred vertically.
  const xy = name => {
    const p = pos.get(name);
    const top = (tallest - cols[p.x].length) * (NODE_H + GAP_Y) / 2;
    return [PAD + p.x * (NODE_W + GAP_X), PAD + top + p.y * (NODE_H + GAP_Y)];
  };
  const root = svg('svg', { id, class: 'graph', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img' });
  root.append(svg('defs', {}, svg('marker', { id: `${id}-arrow`, viewBox: '0 0 8 8', refX: 8, refY: 4, markerWidth: 7, markerHeight: 7, orient: 'auto' },
    svg('path', { d: 'M0,0 L8,4 L0,8 z', class: 'graph-arrow' }))));
  const edgeLayer = svg('g', { class: 'edges' });
  root.append(edgeLayer);
  for (const e of edges) {
    if (!pos.has(e.from) || !pos.has(e.to)) continue;
    const [x0, y0] = xy(e.from), [x1, y1] = xy(e.to);
    const [sx, sy, tx, ty] = [x0 + NODE_W, y0 + NODE_H / 2, x1, y1 + NODE_H / 2];
    // A forward edge bows right; one within a column or backward loops around.
    const bend = tx > sx ? (tx - sx) / 2 : GAP_X;
    edgeLayer.append(svg('path', {
      class: 'graph-edge', d: `M${sx},${sy} C${sx + bend},${sy} ${tx - bend},${ty} ${tx},${ty}`,
      'marker-end': `url(#${id}-arrow)`, 'data-from': e.from, 'data-to': e.to,
    }));
  }
  for (const n of nodes) {
    const [x, y] = xy(n.name);
    const [a, b, c] = label(n);
    const g = svg('g', { class: `node${n.name === mark ? ' chosen' : ''}${onPick ? ' pick' : ''}`, transform: `translate(${x},${y})`, 'data-name': n.name, tabindex: onPick ? 0 : null },
      svg('title', {}, [n.name, b, c].filter(Boolean).join('\n')),
      svg('rect', { width: NODE_W, height: NODE_H, rx: 5 }),
      svg('text', { x: 8, y: 15, class: 'name' }, cut(a, 28)),
      svg('text', { x: 8, y: 30 }, cut(b, 30)),
      svg('text', { x: 8, y: 44, class: 'numbers' }, cut(c || '', 30)));
    if (onPick) {
      g.addEventListener('click', () => onPick(n));
      g.addEventListener('keydown', ev => { if (ev.key === 'Enter') onPick(n); });
    }
    root.append(g);
  }
  return el('div', { class: 'graphbox' }, root);
}
