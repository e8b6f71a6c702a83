// HLO view of one op (api/hlo?op=…&module=…): its instruction, where it came from,
// its op-profile row, operands and fusion body, and its neighbourhood as a graph
// (api/hlo/graph: operands and users `depth` levels out, the fused body), each node
// with its time and FLOPs; a node opens its own view.
import { el } from '../lib/dom.js';
import { dur, count, pct, bytes, flops } from '../lib/format.js';
import { table } from '../lib/table.js';
import { drawGraph } from '../lib/graph.js';

export const title = 'HLO';

export async function render(view, ctx) {
  const op = ctx.params.get('op') || '';
  const module = ctx.params.get('module') || '';
  const input = el('input', { type: 'search', id: 'hlo-op', placeholder: 'op name, e.g. fusion.12', value: op });
  input.addEventListener('keydown', e => { if (e.key === 'Enter' && input.value.trim()) ctx.go('hlo', { op: input.value.trim() }); });
  view.append(el('h1', {}, 'HLO'), el('div', { class: 'controls' }, el('label', {}, 'op ', input)));
  if (!op) {
    view.append(el('p', { class: 'muted' }, 'type an op name, or click one in the op profile'));
    return;
  }
  const h = await ctx.get('hlo', { op, module });
  if (ctx.stale()) return;
  // The op's program, to ask for its neighbours in: a program kept apart from another
  // host's of its number by its label with its host, as the op profile names it
  // (`jit_f(10) on host2`); any other by its own name (`jit_f(14)`).
  const program = module.includes(') on ') ? module : h.program;
  view.append(el('h2', { id: 'hlo-name' }, h.instruction.name),
    el('p', { class: 'muted' }, `module ${h.module} · computation ${h.computation} · host ${h.host}`),
    el('pre', { class: 'hlo', id: 'hlo-text' }, h.instruction.text));
  view.append(where(h.instruction));
  if (h.profile) {
    const r = h.profile;
    view.append(el('table', { class: 'kv', id: 'hlo-profile' }, ...[
      ['ran', `${count(r.executions)} time(s)` + (r.executions !== r.count ? ` as ${count(r.count)} kernels` : '')],
      ['total', dur(r.total_ps)],
      ['self', `${dur(r.self_ps)} (${pct(r.device_time_pct)} of op time)`],
      ['average', dur(r.avg_ps)],
      ['category', r.category || '—'],
      ['bound', r.bound || '—'],
    ].map(([k, v]) => el('tr', {}, el('th', {}, k), el('td', {}, v)))));
  } else {
    view.append(el('p', { class: 'muted' }, 'did not run in this capture'));
  }
  if (h.operands.length) {
    view.append(el('h2', {}, 'Operands'));
    const box = el('div', { id: 'hlo-operands' });
    view.append(box);
    table(box, {
      columns: [
        { key: 'name', label: 'operand', fmt: v => el('a', { href: '#', class: 'oplink', onclick: e => { e.preventDefault(); ctx.go('hlo', { op: v, module: program }); } }, v) },
        { key: 'opcode', label: 'opcode' },
        { key: 'shape', label: 'shape' },
        { key: 'shape_bytes', label: 'size', num: true, fmt: bytes },
        { key: 'op_name', label: 'jax name' },
      ],
      rows: h.operands,
      sort: 'name',
      desc: false,
      csvName: `${h.instruction.name}_operands.csv`,
    });
  }
  if (h.fused_body.length) {
    view.append(el('h2', {}, `Fused body (${h.fused_body.length} instructions, root last)`));
    view.append(el('pre', { class: 'hlo', id: 'hlo-fused' }, h.fused_body.map(i => i.text).join('\n')));
  }
  await graphView(view, ctx, h, program);
}

/** A node's three lines: name; opcode and shape; time where it ran, and FLOPs. In a
 * fused body (`fused`), a parameter says which of the fusion's operands it reads. */
function nodeLabel(n, fused) {
  const numbers = [];
  if (n.total_ps !== undefined) numbers.push(`${dur(n.total_ps)} × ${count(n.executions)}`);
  if (n.flops) numbers.push(flops(n.flops));
  const param = fused && n.parameter_number !== undefined ? `operand ${n.parameter_number}: ` : '';
  return [n.name, `${param}${n.opcode} ${n.shape}`, numbers.join(' · ')];
}

async function graphView(view, ctx, h, program) {
  const depth = Math.min(6, Math.max(1, Number(ctx.params.get('depth')) || 2));
  const g = await ctx.get('hlo/graph', { op: h.instruction.name, module: program, depth });
  if (ctx.stale()) return;
  const pick = el('select', { id: 'hlo-depth' }, ...[1, 2, 3, 4, 5, 6].map(d => el('option', { value: String(d), selected: d === depth }, String(d))));
  pick.addEventListener('change', () => ctx.go('hlo', { ...Object.fromEntries(ctx.params), depth: pick.value }));
  const cutNote = g.nodes_cut ? ` · ${count(g.nodes_cut)} more left out` : '';
  view.append(el('h2', {}, 'Graph'),
    el('div', { class: 'controls' }, el('label', {}, 'levels of operands and users ', pick)),
    el('p', { class: 'muted small', id: 'hlo-graph-info' }, `${count(g.nodes.length)} instructions of ${g.computation}, operands left, users right${cutNote}; click one for its view`));
  const open = n => ctx.go('hlo', { op: n.name, module: program, depth: depth === 2 ? null : depth });
  view.append(drawGraph({ nodes: g.nodes, edges: g.edges, label: n => nodeLabel(n, false), onPick: open, mark: g.op, id: 'hlo-graph' }));
  if (g.fused) {
    const more = g.fused.nodes_cut ? ` (${count(g.fused.nodes_cut)} more left out)` : '';
    // The fusion's body, folded away with a click on its heading.
    view.append(el('details', { open: true, id: 'hlo-fused-fold' },
      el('summary', {}, el('h3', { class: 'inline' }, `Fused body ${g.fused.computation}${more}`)),
      drawGraph({ nodes: g.fused.nodes, edges: g.fused.edges, label: n => nodeLabel(n, true), id: 'hlo-fused-graph' })));
  }
}

function where(i) {
  const rows = [];
  if (i.op_name) rows.push(['jax', i.op_name]);
  if (i.source_file) rows.push(['source', `${i.source_file}:${i.source_line}`]);
  return el('table', { class: 'kv' }, ...rows.map(([k, v]) => el('tr', {}, el('th', {}, k), el('td', { class: 'mono' }, v))));
}
