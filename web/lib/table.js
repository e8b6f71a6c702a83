// A sortable, filterable table with a CSV export of its rows.
//
// columns: [{ key, label, fmt?(value, row), num?: bool, title? }]
// The header and the first column stay in view as the table scrolls; a cue says how
// many columns lie past its right edge (a click scrolls to them); "columns" picks the
// columns shown (kept per table, by its CSV name, in this browser). Text longer than
// LONG_TEXT characters is cut in its middle, the whole in its tooltip.
// Clicking a header sorts by it (again: reverses). The filter keeps rows where any
// text column contains the words typed; with `numKey`, a word that is a number (1999),
// a range (100-200, 100..200) or a bound (>1990, <=5) matches the rows whose `numKey`
// value is it instead. CSV exports every filtered row, raw values.
import { el, clear, download } from './dom.js';
import { count, elideMiddle } from './format.js';

// Tables longer than this keep only the rows in view in the DOM.
export const VIRTUAL_ROWS = 400;
// Cell text longer than this is cut in its middle (the whole on hover).
export const LONG_TEXT = 50;

/** A filter word as a test of a number: `1999`, `100-200`, `100..200`, `>1990`, `<=5`; null otherwise. */
export function numberTest(word) {
  let m = word.match(/^(-?\d+)$/);
  if (m) return v => v === Number(m[1]);
  m = word.match(/^(-?\d+)(?:-|\.\.)(-?\d+)$/);
  if (m) {
    const [lo, hi] = [Number(m[1]), Number(m[2])].sort((x, y) => x - y);
    return v => v >= lo && v <= hi;
  }
  m = word.match(/^(<=|>=|<|>)(-?\d+)$/);
  if (m) {
    const n = Number(m[2]);
    return { '<': v => v < n, '<=': v => v <= n, '>': v => v > n, '>=': v => v >= n }[m[1]];
  }
  return null;
}

export function table(host, { columns, rows, sort, desc = true, csvName = 'table.csv', filter = '', onRow, onFilter, numKey, placeholder = 'filter…' }) {
  const state = { sort: sort || columns[0].key, desc, filter };
  const allColumns = columns;
  const hiddenKey = `stepscope.columns.${csvName}`;
  const hidden = new Set(readHidden(hiddenKey).filter(k => k !== allColumns[0].key));
  columns = allColumns.filter(c => !hidden.has(c.key));
  const input = el('input', { type: 'search', placeholder, class: 'filter', value: filter });
  const info = el('span', { class: 'muted rowcount' });
  const csvBtn = el('button', { type: 'button', class: 'csv' }, 'CSV');
  const tbl = el('table', { class: 'data' });
  const note = el('p', { class: 'muted' });
  const wrap = el('div', { class: 'tablewrap' }, tbl);
  const more = el('button', { type: 'button', class: 'more-cols', hidden: true, title: 'scroll to the columns past the right edge' });
  more.addEventListener('click', () => { wrap.scrollLeft = wrap.scrollWidth; });
  const picker = columnPicker(allColumns, hidden, () => {
    writeHidden(hiddenKey, [...hidden]);
    columns = allColumns.filter(c => !hidden.has(c.key));
    draw();
  });
  host.append(el('div', { class: 'tablebar' }, input, info, csvBtn, picker, more), wrap, note);
  // How many columns lie past the visible right edge: said in the bar, shadowed on the edge.
  function cue() {
    const ths = [...tbl.querySelectorAll('thead th')];
    const edge = wrap.getBoundingClientRect().right;
    const past = ths.filter(th => th.getBoundingClientRect().right > edge + 1).length;
    more.hidden = past === 0;
    more.textContent = `${past} more column${past === 1 ? '' : 's'} →`;
    wrap.classList.toggle('more-right', past > 0);
  }
  wrap.addEventListener('scroll', () => cue(), { passive: true });
  window.addEventListener('resize', () => { if (host.isConnected) cue(); });

  const textCols = columns.filter(c => !c.num);
  function visible() {
    const words = state.filter.toLowerCase().split(/\s+/).filter(Boolean);
    let out = rows;
    if (words.length) {
      const tests = words.map(w => (numKey ? numberTest(w) : null));
      out = rows.filter(r => {
        const hay = textCols.map(c => String(r[c.key] ?? '')).join(' ').toLowerCase();
        return words.every((w, i) => (tests[i] ? tests[i](r[numKey]) : hay.includes(w)));
      });
    }
    const col = columns.find(c => c.key === state.sort) || columns[0];
    const key = col.sortValue || (r => r[col.key]);
    const dir = state.desc ? -1 : 1;
    return out.slice().sort((a, b) => {
      const x = key(a), y = key(b);
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y))) * dir;
    });
  }

  function draw() {
    clear(tbl);
    const head = el('tr');
    for (const c of columns) {
      const mark = c.key === state.sort ? (state.desc ? ' ▼' : ' ▲') : '';
      const th = el('th', { class: c.num ? 'num' : '', title: c.title || '', 'data-key': c.key }, c.label + mark);
      th.addEventListener('click', () => {
        if (state.sort === c.key) state.desc = !state.desc;
        else { state.sort = c.key; state.desc = !!c.num; }
        draw();
      });
      head.append(th);
    }
    tbl.append(el('thead', {}, head));
    const vis = visible();
    shown = vis;
    const body = el('tbody');
    tbl.append(body);
    if (vis.length > VIRTUAL_ROWS) {
      // Long tables: only the rows in view (and a screen either side) are in the DOM,
      // between two spacers as tall as the rows left out; scrolling redraws them.
      wrap.classList.add('virtual');
      fill(body, vis);
    } else {
      wrap.classList.remove('virtual');
      for (const r of vis) body.append(rowOf(r));
    }
    info.textContent = vis.length === rows.length ? `${count(rows.length)} rows` : `${count(vis.length)} of ${count(rows.length)} rows`;
    note.textContent = '';
    requestAnimationFrame(cue);
  }

  function rowOf(r) {
    const tr = el('tr');
    for (const c of columns) {
      const v = r[c.key];
      let shown = c.fmt ? c.fmt(v, r) : (v ?? '');
      if (typeof shown === 'string' && shown.length > LONG_TEXT) shown = elideMiddle(shown, LONG_TEXT);
      else if (shown instanceof Element && shown.textContent.length > LONG_TEXT) shown.textContent = elideMiddle(shown.textContent, LONG_TEXT);
      tr.append(el('td', { class: c.num ? 'num' : '', title: c.num ? '' : String(v ?? '') }, shown));
    }
    if (onRow) { tr.classList.add('clickable'); tr.addEventListener('click', () => onRow(r)); }
    return tr;
  }

  // The rows of `vis` in the scrolled window of the table, at `rowH` px a row.
  let shown = [];
  let rowH = 24;
  function fill(body, vis) {
    // Read before the rows go: a body emptied, once laid out, would pull the scroll
    // position back to the top. The table may not have its full height yet: a
    // window's height is the least shown.
    const top = wrap.scrollTop;
    const view = Math.max(wrap.clientHeight, window.innerHeight || 800);
    const first = Math.max(0, Math.floor(top / rowH) - Math.ceil(view / rowH));
    const last = Math.min(vis.length, first + 3 * Math.ceil(view / rowH));
    clear(body);
    const spacer = h => {
      const td = el('td', { colspan: columns.length });
      td.style.height = `${h}px`;
      return el('tr', { class: 'spacer' }, td);
    };
    body.append(spacer(first * rowH));
    for (const r of vis.slice(first, last)) body.append(rowOf(r));
    body.append(spacer((vis.length - last) * rowH));
    if (wrap.scrollTop !== top) wrap.scrollTop = top;
    const one = body.children[1];
    const measured = one ? one.getBoundingClientRect().height : 0;
    if (measured > 0 && Math.abs(measured - rowH) > 0.5) {
      rowH = measured;
      fill(body, vis);
    }
  }
  let pending = false;
  wrap.addEventListener('scroll', () => {
    if (pending || shown.length <= VIRTUAL_ROWS) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      const body = tbl.querySelector('tbody');
      if (body) fill(body, shown);
    });
  }, { passive: true });

  input.addEventListener('input', () => { state.filter = input.value; if (onFilter) onFilter(input.value); draw(); });
  csvBtn.addEventListener('click', () => download(csvName, toCsv(allColumns, visible())));
  draw();
  return { redraw: draw, setFilter: f => { state.filter = f; input.value = f; draw(); } };
}

/** The column keys hidden in a table, as this browser kept them (none where it keeps none). */
function readHidden(key) {
  try { return JSON.parse(localStorage.getItem(key) || '[]').filter(k => typeof k === 'string'); } catch (_) { return []; }
}

function writeHidden(key, keys) {
  try { localStorage.setItem(key, JSON.stringify(keys)); } catch (_) { /* storage off: for this page only */ }
}

/** "columns": a checkbox a column (the first always shown); `changed()` after each. */
function columnPicker(columns, hidden, changed) {
  const list = el('div', { class: 'column-list' });
  for (const [i, c] of columns.entries()) {
    const box = el('input', { type: 'checkbox', 'data-key': c.key, checked: !hidden.has(c.key), disabled: i === 0 });
    box.addEventListener('change', () => {
      if (box.checked) hidden.delete(c.key); else hidden.add(c.key);
      changed();
    });
    list.append(el('label', {}, box, ` ${c.label}`));
  }
  return el('details', { class: 'column-picker' }, el('summary', {}, 'columns'), list);
}

function cell(v) {
  if (v === null || v === undefined) return '';
  const s = Array.isArray(v) ? v.join(',') : String(v);
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function toCsv(columns, rows) {
  const lines = [columns.map(c => cell(c.key)).join(',')];
  for (const r of rows) lines.push(columns.map(c => cell(r[c.key])).join(','));
  return lines.join('\n') + '\n';
}
