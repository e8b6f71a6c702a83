// Diff: what changed from run A to run B (api/diff?a=…&b=…): step time, the average
// step's parts, then ops and kernels ranked by their effect on one step.
import { el, card } from '../lib/dom.js';
import { bytes, count, dur, pct } from '../lib/format.js';
import { table } from '../lib/table.js';
import { opLink } from '../lib/nav.js';

export const title = 'Diff';

const signed = ps => (ps > 0 ? `+${dur(ps)}` : dur(ps));
const delta = ps => el('span', { class: ps > 0 ? 'delta-up' : ps < 0 ? 'delta-down' : '' }, signed(ps));

/** Runs tried, newest first, for a baseline of B's program when none is asked for. */
const COMPARABLE_TRIES = 4;

/** The run to diff B against when the address names none: the newest other run that
 * ran B's program (api/diff's same_program), of the few nearest; else the newest other. */
async function comparable(ctx, names, b) {
  const others = names.filter(n => n !== b).reverse();
  for (const a of others.slice(0, COMPARABLE_TRIES)) {
    let d = null;
    try { d = await ctx.get('diff', { a, b, top: 1 }); } catch { /* a run it cannot read: not this one */ }
    if (ctx.stale()) return others[0];
    if (d?.same_program) return a;
  }
  return others[0];
}

export async function render(view, ctx) {
  const runs = await ctx.get('runs');
  if (ctx.stale()) return;
  view.append(el('h1', {}, 'Diff of two runs'));
  if (runs.length < 2) {
    view.append(el('p', { class: 'muted' }, 'the served folder holds one run: serve a folder with two or more runs to compare them'));
    return;
  }
  const names = runs.map(r => r.run);
  const cur = ctx.params.get('run');
  const b = names.includes(ctx.params.get('b')) ? ctx.params.get('b') : (names.includes(cur) ? cur : names[names.length - 1]);
  const a = names.includes(ctx.params.get('a')) ? ctx.params.get('a') : await comparable(ctx, names, b);
  if (ctx.stale()) return;
  const picker = (id, value) => el('select', { id }, ...names.slice().reverse().map(n => el('option', { value: n, selected: n === value }, n)));
  const pa = picker('diff-a', a), pb = picker('diff-b', b);
  const swap = el('button', { type: 'button', id: 'diff-swap' }, 'swap');
  pa.addEventListener('change', () => ctx.go('diff', { a: pa.value, b: pb.value }));
  pb.addEventListener('change', () => ctx.go('diff', { a: pa.value, b: pb.value }));
  swap.addEventListener('click', () => ctx.go('diff', { a: pb.value, b: pa.value }));
  view.append(el('div', { class: 'controls' }, el('label', {}, 'A (baseline) ', pa), el('label', {}, 'B ', pb), swap));

  const d = await ctx.get('diff', { a, b, top: 'all' });
  if (ctx.stale()) return;
  if (!d.same_program) {
    view.append(el('p', { class: 'warn', id: 'diff-programs' },
      `These ran different programs (${d.matched_op_time_pct.toFixed(1)}% of op time matched): their difference is not a change of one program.`));
  }
  const t = d.step_time;
  view.append(el('div', { class: 'cards', id: 'diff-cards' },
    card('median step A', dur(t.a_median_ps), `${count(d.a.step_count)} steps, mean ${dur(t.a_mean_ps)}`),
    card('median step B', dur(t.b_median_ps), `${count(d.b.step_count)} steps, mean ${dur(t.b_mean_ps)}`),
    card('change', el('span', { class: t.delta_ps > 0 ? 'delta-up' : t.delta_ps < 0 ? 'delta-down' : '' }, signed(t.delta_ps)), t.delta_pct == null ? 'a run has no steps' : `${t.delta_pct >= 0 ? '+' : ''}${pct(t.delta_pct)}`),
    d.memory.a_peak_bytes !== null && d.memory.b_peak_bytes !== null
      ? card('memory peak', `${bytes(d.memory.a_peak_bytes)} → ${bytes(d.memory.b_peak_bytes)}`) : null,
  ));

  view.append(whatifBeside(ctx, a, b));

  view.append(el('h2', {}, 'Average step'));
  const bb = el('div', { id: 'diff-breakdown' });
  view.append(bb);
  table(bb, {
    columns: [
      { key: 'part', label: 'part', fmt: v => v.replace(/_/g, ' ') },
      { key: 'a_ps', label: 'A', num: true, fmt: dur },
      { key: 'b_ps', label: 'B', num: true, fmt: dur },
      { key: 'delta_ps', label: 'change', num: true, fmt: delta },
    ],
    rows: d.breakdown,
    sort: 'a_ps',
    csvName: 'diff_breakdown.csv',
  });

  const rowsTable = (heading, id, rows, kind) => {
    view.append(el('h2', {}, heading));
    if (!rows.length) { view.append(el('p', { class: 'muted' }, `no ${kind} in either run`)); return; }
    const box = el('div', { id });
    view.append(box);
    table(box, {
      columns: [
        { key: 'name', label: kind === 'ops' ? 'op' : 'kernel', fmt: (v, r) => (kind === 'ops' ? opLink(v, r.module, { run: r.status === 'removed' ? a : b }) : v) },
        { key: 'b_name', label: 'name in B', fmt: (v, r) => (v && kind === 'ops' ? opLink(v, r.module, { run: b }) : v || '') },
        { key: 'status', label: 'status', fmt: v => el('span', { class: `status status-${v}` }, v) },
        { key: 'delta_per_step_ps', label: 'change / step', num: true, fmt: delta, sortValue: r => Math.abs(r.delta_per_step_ps) },
        { key: 'a_per_step_ps', label: 'A / step', num: true, fmt: dur },
        { key: 'b_per_step_ps', label: 'B / step', num: true, fmt: dur },
        { key: 'a_count', label: 'A count', num: true },
        { key: 'b_count', label: 'B count', num: true },
        { key: 'category', label: 'category' },
        { key: 'module', label: 'module' },
        { key: 'matched_by', label: 'matched by' },
      ],
      rows,
      sort: 'delta_per_step_ps',
      csvName: `diff_${kind}.csv`,
    });
  };
  rowsTable('Ops by effect on step time', 'diff-ops', d.ops, 'ops');
  if (d.kernels.length) rowsTable('Kernels by effect on step time', 'diff-kernels', d.kernels, 'kernels');
}

/** The sign of a share as the CLI prints it: +12.3% / -4.5%. */
const signedPct = v => `${v >= 0 ? '+' : '-'}${Math.abs(v).toFixed(1)}%`;

/**
 * A what-if beside the real change (api/diff's `whatif`, as `stepscope diff A B --whatif
 * EDIT`): A's steps replayed with a change, the gain projected beside the gain B measured.
 * The change is the address's `whatif`, else the one A's first finding with a gain assumed.
 */
function whatifBeside(ctx, a, b) {
  const asked = ctx.params.get('whatif');
  const input = el('input', { type: 'text', id: 'diff-whatif-edit', size: 40, value: asked || '',
    placeholder: '--remove input', 'aria-label': 'the change, as stepscope whatif\'s flags' });
  const out = el('div', { id: 'diff-whatif' });
  const go = () => ctx.go('diff', { a, b, whatif: input.value.trim() || null });
  const button = el('button', { type: 'button', id: 'diff-whatif-go' }, 'project A');
  button.addEventListener('click', go);
  input.addEventListener('keydown', e => { if (e.key === 'Enter') go(); });
  const node = el('div', { class: 'whatif' },
    el('h2', {}, 'What if A had the change'),
    el('p', { class: 'muted small' }, 'A\'s steps replayed with a change (--remove compile|callbacks|input, '
      + '--prefetch copies|input, --scale OP=FACTOR, --jit, --balance, --dispatch-ahead), its projection beside B as measured: '
      + 'has B made the change the model says is worth it, and gained what it said?'),
    el('div', {}, input, ' ', button), out);
  (async () => {
    let edit = asked;
    if (!edit) {
      try {
        const adv = await ctx.get('advise', { run: a });
        edit = adv.findings.find(f => f.gain_edit)?.gain_edit;
      } catch { /* A's findings cannot be read: the user writes the change */ }
      if (ctx.stale()) return;
      if (!edit) {
        out.append(el('p', { class: 'muted' }, 'no finding of A names a change with a gain: write one'));
        return;
      }
      input.value = edit;
    }
    out.replaceChildren(el('p', { class: 'muted' }, `replaying A's steps with ${edit}…`));
    try {
      const w = (await ctx.get('diff', { a, b, top: 1, whatif: edit })).whatif;
      if (ctx.stale()) return;
      const verdict = w.within_noise ? 'B is within the noise of the projection'
        : `the projection is ${Math.abs(w.projected_less_measured_pct).toFixed(1)} points ${w.projected_less_measured_pct >= 0 ? 'over' : 'under'} B's gain`;
      out.replaceChildren(el('p', { id: 'diff-whatif-line' },
        `What if A (${w.edit}): ${dur(w.a_step_ps)} → ${dur(w.projected_step_ps)} projected (${signedPct(-w.projected_gain_pct)}); `
        + `B measured ${dur(w.b_step_ps)} (${signedPct(-w.measured_gain_pct)}): ${verdict}.`));
    } catch (e) {
      if (!ctx.stale()) out.replaceChildren(el('p', { class: 'error' }, e.message || String(e)));
    }
  })();
  return node;
}
