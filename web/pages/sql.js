// SQL: one read-only query over the profile's tables (api/sql, `stepscope sql`), on
// this run or every served run. The query is kept in the address (q=), so a link
// brings it back; Ctrl+Enter runs it.
import { el, clear } from '../lib/dom.js';
import { table } from '../lib/table.js';

export const title = 'SQL';

// Queries to start from (docs/sql.md has these and more).
const EXAMPLES = [
  ['top ops by self time', 'SELECT module, name, category, count, self_ps\nFROM ops\nORDER BY self_ps DESC\nLIMIT 20'],
  ['step time per run', 'SELECT run, count(*) AS steps, avg(duration_ps) AS avg_step_ps, max(duration_ps) AS max_step_ps\nFROM steps\nGROUP BY run\nORDER BY run'],
  ['op time per step', 'SELECT step_num, category, sum(self_ps) AS self_ps\nFROM op_events\nWHERE step_num IS NOT NULL\nGROUP BY step_num, category\nORDER BY step_num, self_ps DESC'],
  ['findings', 'SELECT severity, rule, title\nFROM findings\nORDER BY severity'],
  ['tables and columns', 'SELECT name, sql FROM sqlite_schema'],
];

export async function render(view, ctx) {
  const q = ctx.params.get('q') || EXAMPLES[0][1];
  const every = ctx.params.get('all') === '1';
  view.append(el('h1', {}, 'SQL'));
  const text = el('textarea', { id: 'sql-query', rows: 8, cols: 100, spellcheck: 'false' });
  text.value = q;
  const pick = el('select', { id: 'sql-example' }, el('option', { value: '' }, 'examples…'),
    ...EXAMPLES.map(([name], i) => el('option', { value: String(i) }, name)));
  pick.addEventListener('change', () => {
    if (pick.value !== '') text.value = EXAMPLES[Number(pick.value)][1];
    pick.value = '';
  });
  const all = el('input', { type: 'checkbox', id: 'sql-all', checked: every });
  const runBtn = el('button', { type: 'button', id: 'sql-run' }, 'Run');
  const status = el('span', { id: 'sql-status', class: 'muted small', role: 'status' });
  view.append(
    el('p', { class: 'muted small' },
      'One read-only query (SQLite\'s SQL) over the tables runs, steps, ops, op_events, kernels, collectives, scopes, ',
      'devices, findings, memory and events; each has run and host columns. Times are picoseconds (_ps).'),
    text,
    el('p', {}, runBtn, ' ', pick, ' ', el('label', {}, all, ' every served run'), ' ', status),
  );
  const error = el('p', { id: 'sql-error', class: 'error', hidden: true });
  const box = el('div', { id: 'sql-result' });
  view.append(error, box);

  let seq = 0;
  async function run() {
    const mine = ++seq;
    ctx.setParams({ q: text.value, all: all.checked ? '1' : null });
    error.hidden = true;
    clear(box);
    status.textContent = 'running…';
    const started = performance.now();
    let r;
    try {
      // This run: the one the picker shows (the newest where the address names none).
      const run = all.checked ? '' : (ctx.params.get('run') || document.getElementById('run').value);
      r = await ctx.get('sql', { q: text.value, run, host: '' });
    } catch (e) {
      if (mine !== seq || ctx.stale()) return;
      status.textContent = '';
      error.textContent = e.message;
      error.hidden = false;
      return;
    }
    if (mine !== seq || ctx.stale()) return;
    const s = ((performance.now() - started) / 1000).toFixed(2);
    status.textContent = `${r.row_count} row(s) in ${s} s${r.rows_cut ? ' — cut: add a LIMIT, or use stepscope sql for every row' : ''}`;
    show(box, r);
  }
  runBtn.addEventListener('click', run);
  text.addEventListener('keydown', ev => {
    if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) {
      ev.preventDefault();
      run();
    }
  });
  if (ctx.params.get('q')) await run();
}

/** The result as a table in the query's row order (#), sortable by any column. */
function show(box, r) {
  const keys = r.columns.map((_, i) => `c${i}`);
  const numeric = keys.map((_, i) => r.rows.length > 0 && r.rows.every(row => row[i] === null || typeof row[i] === 'number'));
  table(box, {
    columns: [
      { key: 'i', label: '#', num: true },
      ...r.columns.map((name, i) => ({ key: keys[i], label: name, num: numeric[i], fmt: v => (v === null ? 'NULL' : String(v)) })),
    ],
    rows: r.rows.map((row, i) => Object.fromEntries([['i', i + 1], ...row.map((v, j) => [keys[j], v])])),
    sort: 'i',
    desc: false,
    csvName: 'query.csv',
  });
}
