//! Streaming exporters for decoded profiles.
//!
//! - [`perfetto`]: a Perfetto protobuf trace (`.pftrace`), opened by ui.perfetto.dev;
//! - [`chrome`]: Chrome trace JSON (`.json`, gzip for `.json.gz`), every event, no cap;
//! - [`events`] + [`table`]: the event table (one row per event) as CSV or Parquet;
//! - [`rows`]: an analysis's rows (ops, kernels, steps) as CSV or Parquet;
//! - [`folded`]: device time by Python stack as folded stacks, for flame graphs;
//! - [`op_events`]: one row per op event (an op, or a GPU kernel of one), as the op
//!   profile counts them;
//! - [`tables`]: every table of a host (`stepscope tables`, `stepscope sql`), into
//!   Parquet files or a database.
//!
//! Every exporter walks the decoded columns of [`Space`]s and writes as it goes:
//! nothing the size of the output is ever held in memory (Parquet holds one row
//! group of at most [`table::ROWS_PER_GROUP`] rows).

use stepscope_xspace::{Line, Plane, Stat, StatValue};

pub mod chrome;
pub mod events;
pub mod folded;
pub mod op_events;
pub mod perfetto;
mod proto;
pub mod rows;
pub mod table;
pub mod tables;

pub use stepscope_xspace::Space;

/// A stat value as exporters write it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ArgValue<'a> {
    F64(f64),
    U64(u64),
    I64(i64),
    Str(&'a str),
    /// A bytes value, written as `<N bytes>`.
    Bytes(usize),
}

impl<'a> ArgValue<'a> {
    /// Reads a stat of `plane`.
    pub fn of(plane: &'a Plane, s: &Stat) -> ArgValue<'a> {
        match s.value() {
            StatValue::F64(v) => ArgValue::F64(v),
            StatValue::U64(v) => ArgValue::U64(v),
            StatValue::I64(v) => ArgValue::I64(v),
            StatValue::Str(_) | StatValue::Ref(_) => ArgValue::Str(plane.stat_str(s).unwrap_or("")),
            StatValue::Bytes(span) => ArgValue::Bytes(span.len()),
        }
    }
}

/// Calls `f(name, value)` for each stat of event `i` on `line`: the event's own stats,
/// then its metadata's stats whose name the event does not already have.
pub fn for_each_arg<'a>(plane: &'a Plane, line: &'a Line, i: usize, mut f: impl FnMut(u32, &'a str, ArgValue<'a>)) {
    let own = line.event_stats(i);
    for s in own.clone() {
        f(s.meta(), plane.stat_name(s.meta()), ArgValue::of(plane, &s));
    }
    for s in plane.metadata_stats(line.meta(i)) {
        if own.clone().all(|o| o.meta() != s.meta()) {
            f(s.meta(), plane.stat_name(s.meta()), ArgValue::of(plane, s));
        }
    }
}

/// Writes `v` as JSON text (a number or a string; non-finite floats as `null`).
pub fn write_json_value<W: std::io::Write>(out: &mut W, v: ArgValue) -> std::io::Result<()> {
    match v {
        ArgValue::F64(x) if x.is_finite() => serde_json::to_writer(&mut *out, &x).map_err(std::io::Error::from),
        ArgValue::F64(_) => out.write_all(b"null"),
        ArgValue::U64(x) => write!(out, "{x}"),
        ArgValue::I64(x) => write!(out, "{x}"),
        ArgValue::Str(s) => serde_json::to_writer(&mut *out, s).map_err(std::io::Error::from),
        ArgValue::Bytes(n) => write!(out, "\"<{n} bytes>\""),
    }
}

/// Picoseconds as a decimal number of microseconds, exactly (`1500000` → `1.5`,
/// `-7` → `-0.000007`): Chrome trace JSON times keep their picosecond precision.
pub fn ps_as_us_text(ps: i64, out: &mut String) {
    use std::fmt::Write as _;
    let neg = ps < 0;
    let abs = ps.unsigned_abs();
    let (whole, frac) = (abs / 1_000_000, abs % 1_000_000);
    if neg {
        out.push('-');
    }
    let _ = write!(out, "{whole}");
    if frac != 0 {
        let digits = format!("{frac:06}");
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
}

/// Rounds picoseconds to the nearest nanosecond (halves up), as Perfetto times are in ns.
pub fn ps_to_ns(ps: i64) -> i64 {
    ps.saturating_add(500).div_euclid(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn us_text_is_exact() {
        let t = |ps| {
            let mut s = String::new();
            ps_as_us_text(ps, &mut s);
            s
        };
        assert_eq!(t(0), "0");
        assert_eq!(t(1_500_000), "1.5");
        assert_eq!(t(123_456_789_012), "123456.789012");
        assert_eq!(t(-7), "-0.000007");
        assert_eq!(t(i64::MIN), "-9223372036854.775808");
    }

    #[test]
    fn ns_rounding() {
        assert_eq!(ps_to_ns(1499), 1);
        assert_eq!(ps_to_ns(1500), 2);
        assert_eq!(ps_to_ns(-1), 0);
        assert_eq!(ps_to_ns(-501), -1);
    }
}
