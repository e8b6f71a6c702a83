// Overview: step time, where the average step went, utilisation, top ops, environment.
import { el, card } from '../lib/dom.js';
import { dur, count, pct } from '../lib/format.js';
import { table } from '../lib/table.js';
import { stepChart, stackedBar, slowAndMedian } from '../lib/charts.js';
import { opColumns } from './ops.js';
import { pageLink } from '../lib/nav.js';

export const title = 'Overview';

export async function render(view, ctx) {
  const got = await Promise.allSettled([ctx.get('summary'), ctx.get('steps'), ctx.get('advise')]);
  const failed = got.find(g => g.status === 'rejected');
  // A run whose hosts do not fit in memory together (507) is not read whole: its
  // summary, steps and findings are read a host at a time (the run's numbers).
  const tooLarge = failed && failed.reason.status === 507 && !ctx.params.get('host');
  if (failed && !tooLarge) throw failed.reason;
  if (ctx.stale()) return;
  if (tooLarge) {
    // Not even a host at a time: each host, read alone.
    const title = el('h1', {}, 'Run');
    view.append(title, el('p', { class: 'error', id: 'run-too-large' },
      `${failed.reason.message.split(' — ')[0]}: each host is read alone below; click one, or pick it above, to see its pages.`));
    const h = await hostsView(view, ctx);
    if (h) title.textContent = `Run ${h.run}`;
    return;
  }
  const [s, st, adv] = got.map(g => g.value);
  const t = s.step_time;
  view.append(el('h1', {}, `Run ${s.run}`));
  if (s.read_a_host_at_a_time) {
    view.append(el('p', { class: 'muted', id: 'run-too-large' },
      'Several hosts, read a host at a time: the numbers and findings of the whole run; '
      + 'each host is a click away in the table of hosts below.'));
  }
  // Without steps there is no step time: "—", and utilisation is over each device's span.
  const stepped = s.step_count > 0;
  const over = stepped ? 'step time' : 'each device’s own span (no steps)';
  const leftOut = (s.devices_left_out || []).length
    ? `; left out: ${s.devices_left_out.map(l => l.device).join(', ')} (only copies)` : '';
  view.append(el('div', { class: 'cards' },
    card('steps', count(s.step_count), stepped ? `from ${s.step_source.replace(/_/g, ' ')}` : 'none found'),
    card('mean step', stepped ? dur(t.mean_ps) : '—', stepped ? `± ${dur(t.std_ps)}` : ''),
    card('median step', stepped ? dur(t.median_ps) : '—', stepped ? `p90 ${dur(t.p90_ps)}` : ''),
    card('min / max', stepped ? `${dur(t.min_ps)} / ${dur(t.max_ps)}` : '—'),
    s.environment.devices.length
      ? card('device utilisation', pct(s.device_utilization_pct),
        `busy share of ${over}; computing ${pct(s.device_compute_pct)}${leftOut}`)
      : card('device utilisation', '—', 'no device activity recorded'),
  ));
  // The capture as a whole, where it holds compilation (the CLI's CAPTURE line): the
  // steps may not show it at all.
  const c = s.capture;
  if (c && c.compile_ps > 0) {
    const where = c.compile_outside_steps_ps === 0 ? 'all of it in steps'
      : c.compile_outside_steps_ps === c.compile_ps ? 'none of it in a step'
        : `${dur(c.compile_outside_steps_ps)} of it outside the steps`;
    view.append(el('p', { class: c.compile_pct >= 50 ? 'unread-host' : 'muted', id: 'capture-compile' },
      `Capture ${dur(c.span_ps)}: XLA compiling ${dur(c.compile_ps)} of it (${c.compile_pct.toFixed(1)}%; ${where}).`));
  }
  // How the steps were timed, and which are left out of the step time.
  const notes = [];
  if (s.host_step_time) {
    notes.push(`The loop dispatches ahead of its device: a step's annotation closes before its work runs `
      + `(device step ${dur(t.median_ps)}, host dispatch ${dur(s.host_step_time.median_ps)}, medians), `
      + `so each step is timed on the device, up to the end of the work it launched.`);
    // Who waits, where the dispatch takes as long as the work (the CLI's note).
    if (s.host_step_time.median_ps * 10 >= t.median_ps * 9) {
      notes.push(s.device_utilization_pct < 90
        ? 'The dispatch takes as long as the work: the device waits for the host, which sets the pace.'
        : 'The dispatch takes as long as the work, and the device is busy: the host waits for room in the '
          + 'device\'s queue, and the device sets the pace.');
    }
  }
  if (s.steps_cut) notes.push(`${count(s.steps_cut)} step(s) left out: the capture holds only part of their work.`);
  if (s.warm_step_time) {
    notes.push(`${count(s.cold_steps)} of ${count(s.step_count)} steps cold (compiled, or a first run after a compile); the warm steps' median is `
      + `${dur(s.warm_step_time.median_ps)} (what compare, diff and check rank by).`);
  }
  const notRun = [];
  if (s.dispatched_not_run) notRun.push(`at least ${count(s.dispatched_not_run)} jitted call(s)`);
  if (s.launches_not_run) notRun.push(`${count(s.launches_not_run)} GPU launch(es)`);
  if (notRun.length) {
    notes.push(`The capture stopped before the work of ${notRun.join(' and of ')} ran: `
      + `those steps' work is not in the profile. Wait for the last step's outputs before stopping.`);
  }
  if (notes.length) view.append(el('p', { class: 'muted', id: 'step-timing' }, notes.join(' ')));
  // Hosts whose files could not be read: the numbers above are the others'.
  for (const u of s.hosts_unread || []) {
    view.append(el('p', { class: 'unread-host' }, `host ${u.host} was not read: ${u.error} — the numbers are the other hosts'`));
  }

  // Whether the capture can be trusted, and for what, before the findings that rest on it.
  if (s.health) view.append(...healthSection(s.health));

  view.append(el('h2', {}, `Findings (${adv.findings.length})`));
  if (!adv.findings.length) view.append(el('p', { class: 'muted', id: 'no-findings' }, 'no findings: every rule is within its threshold'));
  // The what-if panel: a finding's projected gain replays there, or any change typed.
  const whatif = stepped && !s.read_a_host_at_a_time ? whatifPanel(ctx, s.run) : null;
  view.append(el('div', { class: 'findings' }, ...adv.findings.map(f => findingBox(f, whatif, s.run, st))));
  if (whatif) view.append(el('h2', {}, 'What if'), whatif.node);

  const b = s.breakdown;
  view.append(el('h2', {}, 'Average step breakdown'));
  if (!s.environment.devices.length) {
    view.append(el('p', { class: 'muted', id: 'no-breakdown' }, 'no device activity recorded: no breakdown (see the findings)'));
  } else view.append(stackedBar([
    { label: 'device compute', value: b.device_compute_ps, color: '#3b6fd4' },
    { label: 'collectives', value: b.collectives_ps, color: '#c77b28' },
    { label: 'host→device', value: b.host_to_device_ps, color: '#8a5cc2' },
    { label: 'device→host', value: b.device_to_host_ps, color: '#c2459a' },
    { label: 'device↔device', value: b.device_to_device_ps, color: '#5c9ec2' },
    { label: 'async wait', value: b.async_wait_ps, color: '#7a8a3b' },
    { label: 'host callbacks', value: b.host_callback_ps, color: '#c2185b' },
    { label: 'runtime between ops', value: b.runtime_overhead_ps, color: '#8c6d5a' },
    { label: 'compile', value: b.compile_ps, color: '#d4b13b' },
    { label: 'device idle', value: b.device_idle_ps, color: '#b9bec7' },
  ], b.step_ps));
  // GPUs whose kernels the profile links to their launches: what the idle time was.
  if (b.device_idle_queued_ps !== undefined) {
    const launching = b.device_idle_launching_ps ?? 0;
    const nothing = b.device_idle_ps - b.device_idle_queued_ps - launching;
    view.append(el('p', { class: 'muted', id: 'idle-split' },
      `of device idle: host launched nothing ${dur(nothing)} · host in launch calls ${dur(launching)} · launched, not started ${dur(b.device_idle_queued_ps)}`));
  }
  // Where the host recorded input work (data-loading scopes, device_put).
  if (b.device_idle_input_ps !== undefined) {
    const scopes = el('a', { href: '#' }, 'host scopes');
    scopes.addEventListener('click', ev => { ev.preventDefault(); ctx.go('scopes'); });
    view.append(el('p', { class: 'muted', id: 'input-split' },
      `of device idle: waiting on input ${dur(b.device_idle_input_ps)} (${pct(100 * b.device_idle_input_ps / Math.max(1, b.step_ps))} of the step) · host input work ${dur(b.host_input_ps)} a step · `, scopes));
  }

  if (st && st.steps.length) {
    view.append(el('h2', {}, 'Step time'));
    const chart = el('div', { class: 'chartbox' });
    view.append(chart);
    stepChart(chart, st.steps, { busy: s.environment.devices.length > 0, onPick: r => ctx.go('timeline', { start_ps: r.start_ps, end_ps: r.start_ps + r.duration_ps }) });
  }

  view.append(el('h2', {}, 'Top ops by self time'));
  const ops = el('div');
  view.append(ops);
  table(ops, { columns: opColumns('op'), rows: s.top_ops, sort: 'self_ps', csvName: 'top_ops.csv' });
  const more = el('a', { href: '#' }, 'all ops →');
  more.addEventListener('click', e => { e.preventDefault(); ctx.go('ops'); });
  view.append(el('p', {}, more));

  // A run of several hosts, all shown: each host's own summary, a row each
  // (api/summary/hosts, as `summary --per-host`), a click opening that host.
  if (s.environment.hosts.length > 1 && !ctx.params.get('host')) await hostsView(view, ctx);

  const env = s.environment;
  view.append(el('h2', {}, 'Environment'));
  view.append(el('dl', { class: 'env' },
    el('dt', {}, 'hosts'), el('dd', {}, env.hosts.join(', ')),
    el('dt', {}, 'devices'), el('dd', {}, env.devices.map(d => `${d.count} × ${d.kind.toUpperCase()}${d.model ? ` (${d.model})` : ''}`).join(', ') || 'none'),
    ...env.versions.flatMap(v => { const [k, val] = v.split(' = '); return [el('dt', {}, k), el('dd', {}, val ?? '')]; }),
  ));
}

const UNITS = { pct: '%', s: ' s', us: ' µs', count: '' };

function num(v) {
  return Math.abs(v) >= 100 || Number.isInteger(v) ? count(Math.round(v * 10) / 10) : v.toFixed(1);
}

/** The capture's health (the summary's `health`, the CLI's CAPTURE HEALTH): one line
 *  where every check is ok, else each check that is not, with what it affects and the
 *  capture change that fixes it. */
function healthSection(h) {
  const head = el('h2', { id: 'health' }, `Capture health: ${h.status}`);
  if (h.status === 'ok') {
    const steps = h.checks.find(c => c.check === 'steps');
    return [head, el('p', { class: 'muted', id: 'health-ok' },
      `Every check is ok${steps ? `: ${steps.what}` : ''}.`)];
  }
  const rows = h.checks.filter(c => c.status !== 'ok').map(c =>
    el('div', { class: `health-check ${c.status}`, 'data-check': c.check },
      el('div', {}, el('b', {}, `[${c.status}] ${c.check}: `), c.what),
      el('div', { class: 'muted' }, `affects: ${c.affects}`),
      el('div', {}, `fix: ${c.fix}`)));
  return [head, el('p', { class: 'muted' }, 'Read the numbers on this page with these in mind.'),
    el('div', { class: 'health', id: 'health-checks' }, ...rows)];
}

/** One finding of api/advise: severity, title, value against threshold, evidence, advice. */
/**
 * The what-if panel (api/whatif, as `stepscope whatif`): a change in the CLI's words,
 * the projected step beside the measured one, and each part of it; where the folder
 * holds other runs, the projection set beside one of them as measured (the Diff page's
 * what-if: `stepscope diff RUN OTHER --whatif EDIT`).
 */
function whatifPanel(ctx, run) {
  // The folder's other runs, asked for once (at the first projection), not at each.
  let others;
  const otherRuns = () => (others ??= ctx.get('runs').then(rs => rs.map(r => r.run).filter(r => r !== run)).catch(() => []));
  const input = el('input', { type: 'text', id: 'whatif-edit', size: 48, value: '--remove compile',
    'aria-label': 'the change, as stepscope whatif\'s flags' });
  const out = el('div', { id: 'whatif-result' });
  const go = async () => {
    out.replaceChildren(el('p', { class: 'muted' }, 'replaying the steps…'));
    try {
      const p = await ctx.get('whatif', { edit: input.value });
      if (ctx.stale()) return;
      const rows = p.parts.map(n => ({ part: n.name, measured: n.measured_ps, projected: n.projected_ps, change: n.projected_ps - n.measured_ps }));
      const box = el('div', {});
      out.replaceChildren(
        el('p', { id: 'whatif-line' }, `${p.edit}: step ${dur(p.step_ps)} → ${dur(p.projected_step_ps)} projected `
          + `(−${dur(Math.max(p.gain_ps, 0))}, ${p.gain_pct.toFixed(1)}% of the step; medians over ${count(p.steps)} steps; `
          + `replay of the unchanged steps within ${p.replay_error_max_pct.toFixed(2)}%).`),
        box, await besideAnother(ctx, await otherRuns(), run, p.edit));
      table(box, {
        columns: [
          { key: 'part', label: 'part (a step, slowest device)' },
          { key: 'measured', label: 'measured', fmt: dur, num: true },
          { key: 'projected', label: 'projected', fmt: dur, num: true },
          { key: 'change', label: 'change', fmt: v => (v > 0 ? '+' : v < 0 ? '−' : '') + dur(Math.abs(v)), num: true },
        ],
        rows,
        sort: 'measured',
        csvName: 'whatif.csv',
      });
    } catch (e) {
      out.replaceChildren(el('p', { class: 'error' }, e.message || String(e)));
    }
  };
  const button = el('button', { type: 'button', id: 'whatif-go' }, 'project');
  button.addEventListener('click', go);
  input.addEventListener('keydown', e => { if (e.key === 'Enter') go(); });
  const node = el('div', { class: 'whatif' },
    el('p', { class: 'muted small' }, 'Replay the steps with a change: --remove compile|callbacks|input, '
      + '--prefetch copies|input, --scale OP=FACTOR (or OP,OP; compute, collectives, h2d, d2h, d2d; '
      + 'category:C, scope:S, module:M), --jit, --balance, --dispatch-ahead.'),
    el('div', {}, input, ' ', button), out);
  return { node, run: edit => { input.value = edit; node.scrollIntoView({ block: 'nearest' }); go(); } };
}

/** Where the served folder holds other runs: pick one (the run made with the change)
 * and open the Diff page with this run's projection set beside it as measured. */
function besideAnother(ctx, runs, run, edit) {
  if (!runs.length || !run) return '';
  const pick = el('select', { id: 'whatif-beside-run', 'aria-label': 'a run made with the change' },
    ...runs.slice().reverse().map(r => el('option', { value: r }, r)));
  const go = el('button', { type: 'button', id: 'whatif-beside-go' }, 'set beside it');
  go.addEventListener('click', () => ctx.go('diff', { a: run, b: pick.value, whatif: edit }));
  return el('p', { class: 'small', id: 'whatif-beside' }, 'Made this change in another run? ', pick, ' ', go);
}

/** A link that opens the run's slowest step above its median one in the timeline (for
 * the step-jitter finding: the two steps set side by side at their starts). */
function slowBesideMedian(run, st) {
  const pair = st && run ? slowAndMedian(st.steps) : null;
  if (!pair) return '';
  const [slow, median] = pair;
  return el('div', { class: 'compare-steps small' }, pageLink(`compare the slowest step (${slow.step_num}, ${dur(slow.duration_ps)}) with a median one (${median.step_num}, ${dur(median.duration_ps)})`,
    'timeline', { vs: run, step_a: slow.step_num, step_b: median.step_num }, { id: 'compare-slow-median' }));
}

function findingBox(f, whatif, run, st) {
  const unit = UNITS[f.unit] ?? ` ${f.unit}`;
  const ev = el('ul', { class: 'evidence' });
  for (const e of f.evidence) {
    const li = el('li', {}, e.what);
    if (e.start_ps !== null && e.start_ps !== undefined) {
      const d = e.duration_ps || 0;
      const w = Math.max(d, 1e6);
      const at = d > 0 ? `at ${dur(e.start_ps)} for ${dur(d)}` : `at ${dur(e.start_ps)}`;
      // The timeline opens around the interval, with the interval itself selected.
      const mark = d > 0 ? { mark_start_ps: e.start_ps, mark_end_ps: e.start_ps + d } : {};
      li.append(' (', pageLink(at, 'timeline', { start_ps: Math.round(e.start_ps - w * 0.1), end_ps: Math.round(e.start_ps + w * 1.1), ...mark }, { title: 'show in the timeline', class: 'evidence-link' }), ')');
    }
    if (e.detail) li.append(el('div', { class: 'muted small' }, e.detail));
    ev.append(li);
  }
  return el('div', { class: `finding sev-${f.severity}`, 'data-rule': f.rule },
    el('div', { class: 'fhead' },
      el('span', { class: 'sev' }, f.severity),
      el('strong', { class: 'ftitle' }, f.title),
      el('span', { class: 'muted small rule' }, f.rule)),
    el('div', { class: 'fvalue small' }, `${num(f.value)}${unit}, threshold ${num(f.threshold)}${unit}`),
    gainLine(f, whatif),
    ...(f.caveats || []).map(c => el('div', { class: 'caveat small', title: 'its evidence sits in a part of the capture that is not healthy (Capture health, above)' }, '! ', c)),
    f.rule === 'step-jitter' ? slowBesideMedian(run, st) : '',
    ev,
    el('div', { class: 'advice' }, '→ ', f.advice));
}

/** A finding's projected gain, with a button that replays it in the what-if panel. */
function gainLine(f, whatif) {
  if (f.gain_ps === undefined) return '';
  const line = el('div', { class: 'gain' }, `fix this: −${dur(f.gain_ps)} a step (${f.gain_pct.toFixed(1)}% of the step), projected for `,
    el('code', {}, f.gain_edit));
  if (whatif) {
    const b = el('button', { type: 'button', class: 'small replay' }, 'show the replay');
    b.addEventListener('click', () => whatif.run(f.gain_edit));
    line.append(' ', b);
  }
  return line;
}

/** The hosts of the run, a row each (api/summary/hosts); returns that answer (null if the page went stale). */
async function hostsView(view, ctx) {
  const h = await ctx.get('summary/hosts', { top: 1 });
  if (ctx.stale()) return null;
  view.append(el('h2', {}, `Hosts (${count(h.hosts.length)})`));
  const spread = [];
  if (h.step_median) {
    spread.push(`median step across hosts: min ${dur(h.step_median.min_ps)}, median ${dur(h.step_median.median_ps)}, `
      + `max ${dur(h.step_median.max_ps)} (${h.slowest_host}, ${h.slowest_excess_pct >= 0 ? '+' : ''}${h.slowest_excess_pct.toFixed(1)}% over the median host)`);
  }
  for (const u of h.hosts_unread || []) spread.push(`host ${u.host} was not read: ${u.error}`);
  view.append(el('p', { class: 'muted', id: 'hosts-spread' }, `each host read alone, as it is with the host picker. ${spread.join('; ')}`));
  const box = el('div', { id: 'hosts-table' });
  view.append(box);
  const rows = h.hosts.map(r => {
    const s = r.summary, t = s.warm_step_time || s.step_time;
    return {
      host: r.host,
      steps: s.step_count,
      median_ps: s.step_count ? t.median_ps : null,
      p90_ps: s.step_count ? t.p90_ps : null,
      util: s.environment.devices.length ? s.device_utilization_pct : null,
      top_op: (s.top_ops[0] || {}).name || '',
      finding: (s.findings[0] || {}).rule || '',
    };
  });
  table(box, {
    columns: [
      { key: 'host', label: 'host', fmt: v => pageLink(v, 'overview', { host: v }) },
      { key: 'steps', label: 'steps', num: true, fmt: count },
      { key: 'median_ps', label: 'median step', num: true, fmt: v => (v === null ? '—' : dur(v)) },
      { key: 'p90_ps', label: 'p90', num: true, fmt: v => (v === null ? '—' : dur(v)) },
      { key: 'util', label: 'utilisation', num: true, fmt: v => (v === null ? '—' : pct(v)) },
      { key: 'top_op', label: 'top op' },
      { key: 'finding', label: 'top finding', fmt: v => v || '—' },
    ],
    rows,
    sort: 'median_ps',
    csvName: 'hosts.csv',
  });
  return h;
}
