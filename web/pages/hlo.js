// HLO view of one op (api/hlo?op=…&module=…): its instruction, where it came from,
// its op-profile row, operands and fusion body.
import { el } from '../lib/dom.js';
import { dur, count, pct, bytes } from '../lib/format.js';
import { table } from '../lib/table.js';

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
        { key: 'name', label: 'operand', fmt: v => el('a', { href: '#', class: 'oplink', onclick: e => { e.preventDefault(); ctx.go('hlo', { op: v, module: h.module }); } }, v) },
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
}

function where(i) {
  const rows = [];
  if (i.op_name) rows.push(['jax', i.op_name]);
  if (i.source_file) rows.push(['source', `${i.source_file}:${i.source_line}`]);
  return el('table', { class: 'kv' }, ...rows.map(([k, v]) => el('tr', {}, el('th', {}, k), el('td', { class: 'mono' }, v))));
}
