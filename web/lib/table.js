// A sortable, filterable table with a CSV export of its rows.
//
// columns: [{ key, label, fmt?(value, row), num?: bool, title? }]
// Clicking a header sorts by it (again: reverses). The filter keeps rows where any
// text column contains the words typed. CSV exports every filtered row, raw values.
import { el, clear, download } from './dom.js';
import { count } from './format.js';

const MAX_DOM_ROWS = 2000;

export function table(host, { columns, rows, sort, desc = true, csvName = 'table.csv', filter = '', onRow, onFilter }) {
  const state = { sort: sort || columns[0].key, desc, filter };
  const input = el('input', { type: 'search', placeholder: 'filter…', class: 'filter', value: filter });
  const info = el('span', { class: 'muted rowcount' });
  const csvBtn = el('button', { type: 'button', class: 'csv' }, 'CSV');
  const tbl = el('table', { class: 'data' });
  const note = el('p', { class: 'muted' });
  host.append(el('div', { class: 'tablebar' }, input, info, csvBtn), el('div', { class: 'tablewrap' }, tbl), note);

  const textCols = columns.filter(c => !c.num);
  function visible() {
    const words = state.filter.toLowerCase().split(/\s+/).filter(Boolean);
    let out = rows;
    if (words.length) {
      out = rows.filter(r => {
        const hay = textCols.map(c => String(r[c.key] ?? '')).join(' ').toLowerCase();
        return words.every(w => hay.includes(w));
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
    const body = el('tbody');
    for (const r of vis.slice(0, MAX_DOM_ROWS)) {
      const tr = el('tr');
      for (const c of columns) {
        const v = r[c.key];
        tr.append(el('td', { class: c.num ? 'num' : '', title: c.num ? '' : String(v ?? '') }, c.fmt ? c.fmt(v, r) : (v ?? '')));
      }
      if (onRow) { tr.classList.add('clickable'); tr.addEventListener('click', () => onRow(r)); }
      body.append(tr);
    }
    tbl.append(body);
    info.textContent = vis.length === rows.length ? `${count(rows.length)} rows` : `${count(vis.length)} of ${count(rows.length)} rows`;
    note.textContent = vis.length > MAX_DOM_ROWS
      ? `showing the first ${count(MAX_DOM_ROWS)} of ${count(vis.length)} rows — filter to narrow, or export CSV for all`
      : '';
  }

  input.addEventListener('input', () => { state.filter = input.value; if (onFilter) onFilter(input.value); draw(); });
  csvBtn.addEventListener('click', () => download(csvName, toCsv(columns, visible())));
  draw();
  return { redraw: draw, setFilter: f => { state.filter = f; input.value = f; draw(); } };
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
