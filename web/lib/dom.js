// Tiny DOM helpers (no innerHTML: text is always set as text).

/** Makes an element: el('td', {class: 'num', title: 'x'}, 'text', child, …). */
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (k === 'selected' || k === 'checked' || k === 'disabled') e[k] = !!v;
    else if (k === 'value') e.value = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

/** SVG element. */
export function svg(tag, attrs = {}, ...children) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

/** Saves `text` as a file download. */
export function download(name, text, type = 'text/csv') {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = el('a', { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** A stable hue for a name, 0–359. */
function hue(name) {
  let h = 2166136261;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
  return (h >>> 0) % 360;
}

/** A stable colour for a name (`light`: percentage points lighter). */
export function color(name, light = 0) {
  return `hsl(${hue(name)}, 55%, ${62 + light}%)`;
}

/** `color(name, light)` as [r, g, b], 0–255, for writing pixels. */
export function colorRgb(name, light = 0) {
  const s = 0.55, l = (62 + light) / 100, h = hue(name);
  const a = s * Math.min(l, 1 - l);
  const f = n => {
    const k = (n + h / 30) % 12;
    return Math.round(255 * (l - a * Math.max(-1, Math.min(k - 3, 9 - k, 1))));
  };
  return [f(0), f(8), f(4)];
}

/** WCAG's relative luminance of an sRGB colour [r, g, b], 0–255. */
function luminance(rgb) {
  const lin = v => { const c = v / 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
  const [r, g, b] = rgb.map(lin);
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

/** WCAG's contrast ratio of two colours, [r, g, b] each. */
export function contrast(a, b) {
  const [la, lb] = [luminance(a), luminance(b)];
  return (Math.max(la, lb) + 0.05) / (Math.min(la, lb) + 0.05);
}

/** The text colour for a box of colour `rgb`: black or white, whichever reads better
 * (of the two, one always reaches 4.58:1, above WCAG's 4.5:1). */
export function inkOn(rgb) {
  return contrast(rgb, [0, 0, 0]) >= contrast(rgb, [255, 255, 255]) ? '#000' : '#fff';
}

/** A summary card: a label, a big value and a muted line under it. */
export function card(label, value, sub = '') {
  return el('div', { class: 'card' }, el('div', { class: 'label' }, label), el('div', { class: 'value' }, value), el('div', { class: 'sub muted' }, sub));
}
