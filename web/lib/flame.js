// A flame graph (icicle, root on top) of weighted stacks, drawn as DOM boxes.
//
// stacks: [{ frames: [outermost … innermost], value, row }]. Boxes narrower than a
// pixel are left out. Click a box to zoom to it (the root or Escape zooms out); the
// search box highlights every frame whose name contains the text and says what share
// of the total they hold. Boxes carry data-name and data-value for tests.
import { el, clear } from './dom.js';

const ROW_PX = 18;

/** Builds the tree: node = { name, value, self, children: Map, parent, depth }. */
export function flameTree(stacks, rootName = 'all') {
  const root = { name: rootName, value: 0, self: 0, children: new Map(), parent: null, depth: 0 };
  for (const s of stacks) {
    if (!(s.value > 0)) continue;
    root.value += s.value;
    let node = root;
    for (const f of s.frames) {
      let next = node.children.get(f);
      if (!next) {
        next = { name: f, value: 0, self: 0, children: new Map(), parent: node, depth: node.depth + 1 };
        node.children.set(f, next);
      }
      next.value += s.value;
      node = next;
    }
    node.self += s.value;
  }
  return root;
}

/** Draws `stacks` into a new element; `label(node)` is a box's tooltip, `fmt(v)` a value. */
export function flameGraph(stacks, { width, fmt = String, rootName = 'all' }) {
  const tree = flameTree(stacks, rootName);
  const box = el('div', { class: 'flame' });
  const search = el('input', { type: 'search', placeholder: 'search frames…', class: 'flame-search' });
  const info = el('span', { class: 'muted flame-info' });
  const reset = el('button', { type: 'button', class: 'flame-reset' }, 'Reset zoom');
  const canvas = el('div', { class: 'flame-boxes' });
  box.append(el('div', { class: 'tablebar' }, search, reset, info), canvas);
  let focus = tree;

  function draw() {
    clear(canvas);
    const q = search.value.trim().toLowerCase();
    let matched = 0;
    let maxDepth = 0;
    // Where a match is inside another match, count the outer one only.
    const countMatches = (n, inside) => {
      const hit = q && n !== tree && n.name.toLowerCase().includes(q);
      if (hit && !inside) matched += n.value;
      for (const c of n.children.values()) countMatches(c, inside || hit);
    };
    countMatches(tree, false);
    // The focused node's ancestors, full width above it.
    const chain = [];
    for (let n = focus; n; n = n.parent) chain.unshift(n);
    const place = (n, x, w) => {
      if (w < 1) return;
      const depth = n.depth;
      maxDepth = Math.max(maxDepth, depth);
      const hit = q && n !== tree && n.name.toLowerCase().includes(q);
      const b = el('div', {
        class: `flame-box${hit ? ' match' : ''}${n === focus ? ' focus' : ''}`,
        title: `${n.name}\n${fmt(n.value)} (${(100 * n.value / tree.value).toFixed(1)}% of all)${n.self ? `, ${fmt(n.self)} self` : ''}`,
        'data-name': n.name,
        'data-value': String(n.value),
      }, w > 30 ? n.name : '');
      // Styles through the CSSOM: the server's CSP refuses style attributes.
      Object.assign(b.style, {
        left: `${x}px`, top: `${depth * ROW_PX}px`, width: `${Math.max(1, w - 1)}px`, background: color(n.name, hit),
      });
      b.addEventListener('click', ev => { ev.stopPropagation(); focus = n; draw(); });
      canvas.append(b);
      return b;
    };
    for (const n of chain.slice(0, -1)) place(n, 0, width);
    const layout = (n, x, w) => {
      place(n, x, w);
      let cx = x;
      const kids = [...n.children.values()].sort((a, b) => b.value - a.value);
      for (const c of kids) {
        const cw = n.value > 0 ? w * c.value / n.value : 0;
        if (cw >= 1) layout(c, cx, cw);
        cx += cw;
      }
    };
    layout(focus, 0, width);
    canvas.style.height = `${(maxDepth + 1) * ROW_PX}px`;
    canvas.style.width = `${width}px`;
    info.textContent = q
      ? `"${search.value.trim()}": ${fmt(matched)} (${tree.value ? (100 * matched / tree.value).toFixed(1) : 0}% of all)`
      : `${fmt(tree.value)} in all${focus !== tree ? ` · zoomed to ${focus.name}` : ''}`;
  }
  search.addEventListener('input', draw);
  reset.addEventListener('click', () => { focus = tree; draw(); });
  box.addEventListener('keydown', ev => { if (ev.key === 'Escape') { focus = tree; draw(); } });
  draw();
  return box;
}

/** A warm colour per name (stable), orange-red; matches in blue-violet. */
function color(name, hit) {
  if (hit) return 'hsl(265 70% 70%)';
  let h = 0;
  for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
  return `hsl(${10 + (h % 40)} 80% ${62 + (h >> 8) % 14}%)`;
}
