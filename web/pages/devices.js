// Devices: per-device and per-host rows with utilisation, and the stragglers.
import { el, card } from '../lib/dom.js';
import { dur, count, pct } from '../lib/format.js';
import { table } from '../lib/table.js';

export const title = 'Devices';

export async function render(view, ctx) {
  const d = await ctx.get('devices');
  if (ctx.stale()) return;
  view.append(el('h1', {}, 'Devices'));
  if (!d.devices.length) {
    view.append(el('p', { class: 'muted' }, 'no device ran XLA ops in this profile'));
    return;
  }
  const a = d.all;
  view.append(el('div', { class: 'cards', id: 'dev-cards' },
    card('devices', count(a.device_count), a.working_device_count === a.device_count
      ? `on ${count(a.host_count)} host(s)`
      : `on ${count(a.host_count)} host(s), ${count(a.working_device_count)} working`),
    card('utilisation', pct(a.utilization_pct), 'busy share of each working device’s window'),
    card('compute', dur(a.compute_ps), 'all devices'),
    card('collectives', dur(a.collective_ps), 'all devices'),
    card('compute spread', pct(a.compute_spread_pct), '(max − min) / median'),
  ));

  if (d.left_out && d.left_out.length) {
    // Devices that only copied: no part of the run's numbers.
    view.append(el('p', { class: 'muted', id: 'dev-left-out' },
      `left out: ${d.left_out.map(l => `${l.host} ${l.device} (${count(l.op_count)} ops, ${dur(l.busy_ps)})`).join(', ')}, which ran only copies (no compute, no collective)`));
  }

  view.append(el('h2', {}, `Stragglers (${d.stragglers.length})`));
  if (!d.stragglers.length) {
    view.append(el('p', { class: 'muted', id: 'dev-no-stragglers' }, 'none: every device computes within the threshold of its peers'));
  } else {
    view.append(el('ul', { class: 'stragglers', id: 'dev-stragglers' }, ...d.stragglers.map(s => el('li', {},
      el('span', { class: 'straggler' }, `${s.host} ${s.device}`),
      ` computes ${dur(s.compute_ps)} vs a median of ${dur(s.peer_median_ps)} for its peers (+${s.excess_pct.toFixed(0)}%); the peers spend ${dur(s.peer_collective_ps)} in collectives`))));
  }

  view.append(el('h2', {}, 'Per device'));
  const box = el('div', { id: 'dev-table' });
  view.append(box);
  // GPUs whose kernels the profile links to their launches: idle split by launch.
  const split = d.devices.some(r => r.idle_queued_ps !== undefined)
    ? [{ key: 'idle_launching_ps', label: 'idle: in launch', num: true, fmt: v => (v === undefined ? '—' : dur(v)) },
       { key: 'idle_queued_ps', label: 'idle: queued', num: true, fmt: v => (v === undefined ? '—' : dur(v)) }]
    : [];
  table(box, {
    columns: [
      { key: 'host', label: 'host' },
      { key: 'device', label: 'device' },
      { key: 'kind', label: 'kind' },
      { key: 'utilization_pct', label: 'util', num: true, fmt: v => pct(v) },
      { key: 'busy_ps', label: 'busy', num: true, fmt: dur },
      { key: 'compute_ps', label: 'compute', num: true, fmt: dur },
      { key: 'collective_ps', label: 'collectives', num: true, fmt: dur },
      { key: 'copy_ps', label: 'copies', num: true, fmt: dur },
      { key: 'async_wait_ps', label: 'async wait', num: true, fmt: dur },
      { key: 'host_callback_ps', label: 'host callbacks', num: true, fmt: dur },
      { key: 'runtime_overhead_ps', label: 'runtime', num: true, fmt: dur },
      { key: 'idle_ps', label: 'idle', num: true, fmt: dur },
      ...split,
      { key: 'window_ps', label: 'window', num: true, fmt: dur },
      { key: 'window_source', label: 'window from', fmt: v => String(v).replace(/_/g, ' ') },
      { key: 'op_count', label: 'ops', num: true, fmt: count },
      { key: 'straggler', label: 'straggler', fmt: (v, r) => (v ? el('span', { class: 'straggler' }, 'straggler') : (r.took_part === false ? 'no work' : '')) },
    ],
    rows: d.devices,
    sort: 'compute_ps',
    csvName: 'devices.csv',
  });

  if (d.hosts.length > 1) {
    view.append(el('h2', {}, 'Per host'));
    const hb = el('div', { id: 'dev-hosts' });
    view.append(hb);
    table(hb, {
      columns: [
        { key: 'host', label: 'host' },
        { key: 'device_count', label: 'devices', num: true },
        { key: 'step_count', label: 'steps', num: true },
        { key: 'step_mean_ps', label: 'mean step', num: true, fmt: dur },
        { key: 'compute_ps', label: 'compute', num: true, fmt: dur },
        { key: 'collective_ps', label: 'collectives', num: true, fmt: dur },
        { key: 'utilization_pct', label: 'util', num: true, fmt: v => pct(v) },
        { key: 'clock_offset_ps', label: 'clock shift', num: true, fmt: dur },
        { key: 'straggler', label: 'straggler', fmt: v => (v ? el('span', { class: 'straggler' }, 'straggler') : '') },
      ],
      rows: d.hosts,
      sort: 'host',
      desc: false,
      csvName: 'hosts.csv',
    });
  }
}
