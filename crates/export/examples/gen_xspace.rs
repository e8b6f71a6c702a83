//! Builds a large, realistic XSpace by replicating a real capture in time.
//!
//!     cargo run --release -p stepscope-export --example gen_xspace -- SRC.xplane.pb OUT.xplane.pb --size 4.5G
//!
//! Every line keeps its metadata, stats and event encodings; its events are written N
//! times, copy k with `offset_ps` moved by k × (the capture's time span + 1 ms), so the
//! result looks like one capture N times longer. N is chosen so the file reaches
//! `--size` (K, M, G, T = powers of 1024). The output is streamed: two passes over the
//! source (sizes first, since protobuf lengths precede messages), memory ~ the source.
//! Events that carry `num_occurrences` instead of an offset are copied unshifted.
//! Nothing is checked against stepscope: it only rewrites protobuf framing.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::ops::Range;
use std::process::ExitCode;

type Res<T> = Result<T, String>;

fn varint(buf: &[u8], pos: &mut usize) -> Res<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).ok_or("truncated varint")?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Ok(v);
        }
    }
    Err("varint too long".into())
}

fn varint_len(mut v: u64) -> u64 {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// One field of a message: number, wire type, the value's range (for LEN: the payload),
/// and the whole field's range (key included).
struct Field {
    num: u64,
    wire: u64,
    value: Range<usize>,
    whole: Range<usize>,
}

fn fields(buf: &[u8], range: Range<usize>) -> Res<Vec<Field>> {
    let mut out = Vec::new();
    let mut pos = range.start;
    while pos < range.end {
        let start = pos;
        let key = varint(buf, &mut pos)?;
        let (num, wire) = (key >> 3, key & 7);
        let value = match wire {
            0 => {
                let s = pos;
                varint(buf, &mut pos)?;
                s..pos
            }
            1 => {
                pos += 8;
                pos - 8..pos
            }
            2 => {
                let len = varint(buf, &mut pos)? as usize;
                pos += len;
                pos - len..pos
            }
            5 => {
                pos += 4;
                pos - 4..pos
            }
            w => return Err(format!("unsupported wire type {w} at byte {start}")),
        };
        if pos > range.end {
            return Err(format!("field at byte {start} runs past its message"));
        }
        out.push(Field { num, wire, value, whole: start..pos });
    }
    Ok(out)
}

/// An event: its bytes without `offset_ps`, its offset, and whether it may be shifted.
struct Event {
    rest: Vec<Range<usize>>,
    rest_len: u64,
    offset_ps: i64,
    duration_ps: i64,
    shiftable: bool,
}

struct LineIn {
    other: Vec<Range<usize>>,
    timestamp_ns: i64,
    events: Vec<Event>,
}

struct PlaneIn {
    other: Vec<Range<usize>>,
    lines: Vec<LineIn>,
}

fn parse(buf: &[u8]) -> Res<(Vec<Range<usize>>, Vec<PlaneIn>)> {
    let mut space_other = Vec::new();
    let mut planes = Vec::new();
    for f in fields(buf, 0..buf.len())? {
        if f.num != 1 || f.wire != 2 {
            space_other.push(f.whole);
            continue;
        }
        let mut plane = PlaneIn { other: Vec::new(), lines: Vec::new() };
        for pf in fields(buf, f.value)? {
            if pf.num != 3 || pf.wire != 2 {
                plane.other.push(pf.whole);
                continue;
            }
            let mut line = LineIn { other: Vec::new(), timestamp_ns: 0, events: Vec::new() };
            for lf in fields(buf, pf.value)? {
                match (lf.num, lf.wire) {
                    (4, 2) => {
                        let mut ev =
                            Event { rest: Vec::new(), rest_len: 0, offset_ps: 0, duration_ps: 0, shiftable: true };
                        for ef in fields(buf, lf.value)? {
                            match (ef.num, ef.wire) {
                                (2, 0) => ev.offset_ps = varint(buf, &mut ef.value.start.clone())? as i64,
                                (n, w) => {
                                    if (n, w) == (3, 0) {
                                        ev.duration_ps = varint(buf, &mut ef.value.start.clone())? as i64;
                                    }
                                    if n == 5 {
                                        ev.shiftable = false;
                                    }
                                    ev.rest_len += ef.whole.len() as u64;
                                    ev.rest.push(ef.whole);
                                }
                            }
                        }
                        line.events.push(ev);
                    }
                    (3, 0) => {
                        line.timestamp_ns = varint(buf, &mut lf.value.start.clone())? as i64;
                        line.other.push(lf.whole);
                    }
                    _ => line.other.push(lf.whole),
                }
            }
            plane.lines.push(line);
        }
        planes.push(plane);
    }
    Ok((space_other, planes))
}

/// Encoded size of an event's body with `offset_ps` = `off`.
fn event_body_len(ev: &Event, off: i64) -> u64 {
    let offset_field = if off != 0 { 1 + varint_len(off as u64) } else { 0 };
    ev.rest_len + offset_field
}

fn ranges_len(r: &[Range<usize>]) -> u64 {
    r.iter().map(|r| r.len() as u64).sum()
}

fn parse_size(s: &str) -> Res<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        Some('T' | 't') => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    let v: f64 = num.parse().map_err(|_| format!("bad size {s:?}: use e.g. 512M, 4.5G"))?;
    Ok((v * mult as f64) as u64)
}

fn run() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: gen_xspace SRC.xplane.pb OUT.xplane.pb --size SIZE (e.g. 1G, 4.5G)";
    let (src, out, size) = match args.as_slice() {
        [src, out, flag, size] if flag == "--size" => (src, out, parse_size(size)?),
        _ => return Err(usage.into()),
    };
    let buf = std::fs::read(src).map_err(|e| format!("{src}: {e}"))?;
    let (space_other, planes) = parse(&buf)?;

    // The capture's span: replicas are placed one span (+1 ms) apart.
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    let mut event_bytes = 0u64;
    for l in planes.iter().flat_map(|p| &p.lines) {
        for e in &l.events {
            let start = l.timestamp_ns.saturating_mul(1000).saturating_add(e.offset_ps);
            lo = lo.min(start);
            hi = hi.max(start.saturating_add(e.duration_ps.max(0)));
            let body = event_body_len(e, e.offset_ps);
            event_bytes += 1 + varint_len(body) + body;
        }
    }
    if event_bytes == 0 {
        return Err(format!("{src} has no events to replicate"));
    }
    let period = (hi - lo).max(0) + 1_000_000_000;
    let fixed = buf.len() as u64 - event_bytes;
    let copies = (size.saturating_sub(fixed)).div_ceil(event_bytes).max(1);

    // Pass 1: sizes of every line and plane.
    let shifted = |e: &Event, k: u64| if e.shiftable { e.offset_ps + (k as i64) * period } else { e.offset_ps };
    let mut line_len: Vec<Vec<u64>> = Vec::new();
    let mut plane_len: Vec<u64> = Vec::new();
    for p in &planes {
        let mut ls = Vec::new();
        let mut total = ranges_len(&p.other);
        for l in &p.lines {
            let mut n = ranges_len(&l.other);
            for e in &l.events {
                for k in 0..copies {
                    let body = event_body_len(e, shifted(e, k));
                    n += 1 + varint_len(body) + body;
                }
            }
            total += 1 + varint_len(n) + n;
            ls.push(n);
        }
        line_len.push(ls);
        plane_len.push(total);
    }

    // Pass 2: write.
    let file = File::create(out).map_err(|e| format!("{out}: {e}"))?;
    let mut w = BufWriter::with_capacity(8 << 20, file);
    let mut tmp = Vec::with_capacity(64);
    let write = |w: &mut BufWriter<File>, bytes: &[u8]| w.write_all(bytes).map_err(|e| format!("{out}: {e}"));
    let mut written = 0u64;
    for r in &space_other {
        write(&mut w, &buf[r.clone()])?;
    }
    for (pi, p) in planes.iter().enumerate() {
        tmp.clear();
        tmp.push(0x0a); // XSpace.planes = 1, LEN
        put_varint(&mut tmp, plane_len[pi]);
        write(&mut w, &tmp)?;
        for r in &p.other {
            write(&mut w, &buf[r.clone()])?;
        }
        for (li, l) in p.lines.iter().enumerate() {
            tmp.clear();
            tmp.push(0x1a); // XPlane.lines = 3, LEN
            put_varint(&mut tmp, line_len[pi][li]);
            write(&mut w, &tmp)?;
            for r in &l.other {
                write(&mut w, &buf[r.clone()])?;
            }
            for k in 0..copies {
                for e in &l.events {
                    let off = shifted(e, k);
                    tmp.clear();
                    tmp.push(0x22); // XLine.events = 4, LEN
                    put_varint(&mut tmp, event_body_len(e, off));
                    if off != 0 {
                        tmp.push(0x10); // XEvent.offset_ps = 2, VARINT
                        put_varint(&mut tmp, off as u64);
                    }
                    write(&mut w, &tmp)?;
                    for r in &e.rest {
                        write(&mut w, &buf[r.clone()])?;
                    }
                    written += 1;
                }
            }
        }
    }
    w.flush().map_err(|e| format!("{out}: {e}"))?;
    let bytes = std::fs::metadata(out).map_err(|e| e.to_string())?.len();
    let expected: u64 = ranges_len(&space_other) + plane_len.iter().map(|n| 1 + varint_len(*n) + n).sum::<u64>();
    if bytes != expected {
        return Err(format!("wrote {bytes} bytes, expected {expected}"));
    }
    eprintln!(
        "{out}: {bytes} bytes ({:.2} GiB), {written} events = {copies} copies of {src}, one every {:.3} s",
        bytes as f64 / (1u64 << 30) as f64,
        period as f64 / 1e12
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gen_xspace: {e}");
            ExitCode::from(2)
        }
    }
}
