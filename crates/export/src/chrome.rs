//! Chrome trace JSON writer: every event, no cap, streamed.
//!
//! - one `pid` per plane (in profile order, from 1) named by a `process_name` `M`
//!   event (the plane name; `HOST PLANE` when the profile has several hosts), one
//!   `tid` per line (from 1) named by a `thread_name` `M` event — planes and lines
//!   without events are named too, so the file lists the same planes and lines;
//! - an event with a duration is an `X` event, one without an `i` event (`"s":"t"`);
//!   counter lines (read from trace JSON) are `C` events;
//! - `ts`/`dur` are microseconds written exactly from picoseconds (`12.345678`), so
//!   no precision is lost; `args` holds the event's stats, then its metadata's.

use std::io::{self, Write};

use stepscope_xspace::{Line, Plane, Space};

use crate::{for_each_arg, ps_as_us_text, write_json_value};

/// What a Chrome trace export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ChromeSummary {
    pub complete_events: u64,
    pub instant_events: u64,
    pub counter_events: u64,
    pub processes: u64,
    pub threads: u64,
}

/// Writes `hosts` as Chrome trace JSON to `out` (wrap it in a `BufWriter`, and in a
/// gzip encoder for `.json.gz`).
pub fn write_chrome<W: Write>(hosts: &[Space], mut out: W) -> io::Result<ChromeSummary> {
    let mut sum = ChromeSummary::default();
    let several = hosts.len() > 1;
    out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
    let mut first = true;
    let mut sep = |out: &mut W| -> io::Result<()> {
        if first {
            first = false;
            Ok(())
        } else {
            out.write_all(b",\n")
        }
    };
    let mut pid = 0u64;
    let mut text = String::new();
    for space in hosts {
        for plane in &space.planes {
            pid += 1;
            sum.processes += 1;
            sep(&mut out)?;
            write!(out, "{{\"ph\":\"M\",\"pid\":{pid},\"name\":\"process_name\",\"args\":{{\"name\":")?;
            let name = if several { format!("{} {}", space.host, plane.name) } else { plane.name.clone() };
            serde_json::to_writer(&mut out, &name)?;
            out.write_all(b"}}")?;
            for (li, line) in plane.lines.iter().enumerate() {
                let tid = li + 1;
                if !line.is_counter {
                    sum.threads += 1;
                    sep(&mut out)?;
                    write!(
                        out,
                        "{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_name\",\"args\":{{\"name\":"
                    )?;
                    serde_json::to_writer(&mut out, &line.name)?;
                    out.write_all(b"}}")?;
                }
                for i in 0..line.len() {
                    sep(&mut out)?;
                    event(&mut out, &mut text, plane, line, i, pid, tid, &mut sum)?;
                }
            }
        }
    }
    out.write_all(b"\n]}\n")?;
    out.flush()?;
    Ok(sum)
}

#[allow(clippy::too_many_arguments)]
fn event<W: Write>(
    out: &mut W,
    text: &mut String,
    plane: &Plane,
    line: &Line,
    i: usize,
    pid: u64,
    tid: usize,
    sum: &mut ChromeSummary,
) -> io::Result<()> {
    text.clear();
    ps_as_us_text(line.start_ps(i), text);
    let dur = line.duration_ps(i);
    if line.is_counter {
        sum.counter_events += 1;
        write!(out, "{{\"ph\":\"C\",\"pid\":{pid},\"ts\":{text},\"name\":")?;
        serde_json::to_writer(&mut *out, &line.name)?;
        out.write_all(b",\"args\":{")?;
        let mut first = true;
        let mut err = Ok(());
        for s in line.event_stats(i) {
            if err.is_err() {
                break;
            }
            err = (|| {
                if !std::mem::take(&mut first) {
                    out.write_all(b",")?;
                }
                serde_json::to_writer(&mut *out, plane.stat_name(s.meta()))?;
                out.write_all(b":")?;
                write_json_value(out, crate::ArgValue::of(plane, &s))
            })();
        }
        err?;
        return out.write_all(b"}}");
    }
    if dur > 0 {
        sum.complete_events += 1;
        write!(out, "{{\"ph\":\"X\",\"pid\":{pid},\"tid\":{tid},\"ts\":{text},\"dur\":")?;
        text.clear();
        ps_as_us_text(dur, text);
        out.write_all(text.as_bytes())?;
    } else {
        sum.instant_events += 1;
        write!(out, "{{\"ph\":\"i\",\"s\":\"t\",\"pid\":{pid},\"tid\":{tid},\"ts\":{text}")?;
    }
    out.write_all(b",\"name\":")?;
    serde_json::to_writer(&mut *out, plane.event_name(line.meta(i)))?;
    let mut first = true;
    let mut err = Ok(());
    for_each_arg(plane, line, i, |_, name, v| {
        if err.is_err() {
            return;
        }
        err = (|| {
            out.write_all(if std::mem::take(&mut first) { b",\"args\":{" } else { b"," })?;
            serde_json::to_writer(&mut *out, name)?;
            out.write_all(b":")?;
            write_json_value(out, v)
        })();
    });
    err?;
    if !first {
        out.write_all(b"}")?;
    }
    out.write_all(b"}")
}
