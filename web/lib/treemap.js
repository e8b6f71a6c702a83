// A squarified treemap (Bruls, Huizing, van Wijk) drawn as SVG rectangles.
import { el, svg, color } from './dom.js';
import { elideMiddle } from './format.js';

/** Lays out `items` ([{name, value}], value > 0) in the rectangle x, y, w, h. */
export function layout(items, x, y, w, h) {
  const total = items.reduce((s, i) => s + i.value, 0);
  const out = [];
  if (total <= 0 || w <= 0 || h <= 0) return out;
  const scale = (w * h) / total;
  let rest = items.filter(i => i.value > 0).sort((a, b) => b.value - a.value).map(i => ({ item: i, area: i.value * scale }));
  let rx = x, ry = y, rw = w, rh = h;
  const worst = (row, side) => {
    const s = row.reduce((a, r) => a + r.area, 0);
    const mx = Math.max(...row.map(r => r.area)), mn = Math.min(...row.map(r => r.area));
    return Math.max((side * side * mx) / (s * s), (s * s) / (side * side * mn));
  };
  while (rest.length) {
    const side = Math.min(rw, rh);
    const row = [rest[0]];
    let k = 1;
    while (k < rest.length && worst([...row, rest[k]], side) <= worst(row, side)) row.push(rest[k++]);
    rest = rest.slice(k);
    const s = row.reduce((a, r) => a + r.area, 0);
    if (rw >= rh) {
      const cw = s / rh;
      let cy = ry;
      for (const r of row) { const ch = r.area / cw; out.push({ ...r.item, x: rx, y: cy, w: cw, h: ch }); cy += ch; }
      rx += cw; rw -= cw;
    } else {
      const ch = s / rw;
      let cx = rx;
      for (const r of row) { const cw = r.area / ch; out.push({ ...r.item, x: cx, y: ry, w: cw, h: ch }); cx += cw; }
      ry += ch; rh -= ch;
    }
  }
  return out;
}

/** An SVG treemap of `items`; `label(item)` is the tooltip, `onClick(item)` optional;
 * `group(item)` (an op's category) colours the boxes, one colour a group, named in a
 * legend under it ordered by the groups' totals. A box's label is its name cut in the
 * middle to fit (the whole name in its tooltip). */
export function treemap(items, { width = 900, height = 320, label = i => i.name, onClick, group } = {}) {
  const root = svg('svg', { class: 'treemap', viewBox: `0 0 ${width} ${height}`, width, height });
  const fill = r => color(group ? group(r) || '(none)' : r.name);
  for (const r of layout(items, 0, 0, width, height)) {
    const g = svg('g', { 'data-name': r.name });
    const rect = svg('rect', { x: r.x, y: r.y, width: Math.max(0, r.w - 1), height: Math.max(0, r.h - 1), fill: fill(r) });
    g.append(rect, svg('title', {}, label(r)));
    if (r.w > 30 && r.h > 14) {
      const t = svg('text', { x: r.x + 4, y: r.y + 13, class: 'tmlabel' });
      t.textContent = elideMiddle(r.name, Math.max(3, Math.floor((r.w - 8) / 6.2)));
      g.append(t);
    }
    if (onClick) { g.classList.add('clickable'); g.addEventListener('click', () => onClick(r)); }
    root.append(g);
  }
  if (!group) return root;
  const totals = new Map();
  for (const i of items) totals.set(group(i) || '(none)', (totals.get(group(i) || '(none)') || 0) + i.value);
  const legend = el('div', { class: 'legend treemap-legend' });
  for (const [name, v] of [...totals].sort((a, b) => b[1] - a[1])) {
    const sw = el('span', { class: 'swatch' });
    sw.style.background = color(name);
    legend.append(el('span', { class: 'item', 'data-group': name }, sw, name));
  }
  return el('div', {}, root, legend);
}
