// Number formatting: durations from ps, counts, percentages, bytes, rates.

export function dur(ps) {
  if (ps === null || ps === undefined || Number.isNaN(ps)) return '';
  const a = Math.abs(ps);
  if (a >= 1e12) return `${(ps / 1e12).toFixed(3)} s`;
  if (a >= 1e9) return `${(ps / 1e9).toFixed(a >= 1e11 ? 1 : 2)} ms`;
  if (a >= 1e6) return `${(ps / 1e6).toFixed(a >= 1e8 ? 1 : 2)} µs`;
  if (a >= 1e3) return `${(ps / 1e3).toFixed(a >= 1e5 ? 1 : 2)} ns`;
  return `${ps} ps`;
}

const COUNT = new Intl.NumberFormat('en-US'); // made once: toLocaleString makes one per call

export function count(n) {
  if (n === null || n === undefined) return '';
  return COUNT.format(Number(n));
}

export function pct(x, digits = 1) {
  if (x === null || x === undefined) return '';
  return `${Number(x).toFixed(digits)}%`;
}

/** A size with IEC units (KiB, MiB, GiB, TiB), three significant digits, as the CLI
 * writes it: `115 MiB`. */
export function bytes(n) {
  if (n === null || n === undefined) return '';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = Number(n), i = 0;
  while (Math.abs(v) >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  if (i === 0) return `${v} B`;
  const a = Math.abs(v);
  return `${v.toFixed(a >= 100 ? 0 : a >= 10 ? 1 : 2)} ${u[i]}`;
}

/** A FLOP count: `6.32 MFLOP` (three significant digits, as the CLI writes it). */
export function flops(n) {
  if (n === null || n === undefined) return '';
  const p = [['P', 1e15], ['T', 1e12], ['G', 1e9], ['M', 1e6], ['k', 1e3]];
  let [v, s] = [Number(n), ''];
  for (const [prefix, f] of p) if (v >= f) { [v, s] = [v / f, prefix]; break; }
  return `${v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)} ${s}FLOP`;
}

export function rate(perSecond, unit) {
  if (perSecond === null || perSecond === undefined) return '';
  const p = [['T', 1e12], ['G', 1e9], ['M', 1e6], ['k', 1e3]];
  for (const [s, f] of p) if (Math.abs(perSecond) >= f) return `${(perSecond / f).toFixed(1)} ${s}${unit}/s`;
  return `${perSecond.toFixed(1)} ${unit}/s`;
}

/** A step's critical path in words, its two largest parts with their shares:
 * `waiting for dispatch 64% · compute 30%` (docs/whatif.md). */
export function pathWords(path) {
  if (!path || !path.length) return '';
  const total = path.reduce((a, p) => a + p.ps, 0) || 1;
  return path.slice(0, 2).map(p => `${p.name} ${Math.round(100 * p.ps / total)}%`).join(' · ');
}

/** `s` cut to at most `n` characters by its middle (`Cijk_Ailk…ISA942`): names that
 * differ at either end still read apart, and a 1,000-character kernel name stays a few
 * lines (the whole name is in the event's panel). */
export function elideMiddle(s, n = 160) {
  const t = String(s ?? '');
  if (t.length <= n) return t;
  const head = Math.ceil((n - 1) / 2);
  return `${t.slice(0, head)}…${t.slice(t.length - (n - 1 - head))}`;
}
