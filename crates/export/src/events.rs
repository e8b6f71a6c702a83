//! The event table: one row per event of every line (counter samples included),
//! in profile order (host, plane, line, then the line's event order).
//!
//! Columns: `host`, `plane`, `plane_id`, `line`, `line_id`, `name`, `display_name`,
//! `start_ps`, `duration_ps`, `is_counter`, `hlo_op`, `hlo_module`, `tf_op`, `scope`,
//! `step_num`, `stats`.
//! - `start_ps` is picoseconds since the session start, as every stepscope time;
//! - `hlo_op`, `hlo_module`, `tf_op` are those stats (event first, then its metadata);
//!   `scope` is `tf_op`'s name-stack scope (`jit(f)/jvp(mlp)/dot` → `f/mlp`);
//! - `step_num` is the step (see `stepscope steps`) of the same host whose time span
//!   holds the event's start, when one does;
//! - `stats` is a JSON object of all the event's stats (bytes values as `"<N bytes>"`).

use std::collections::HashMap;
use std::io::{self, Write};

use stepscope_analysis::ops::scope_of;
use stepscope_analysis::steps::Steps;
use stepscope_analysis::Keys;
use stepscope_xspace::Space;

use crate::table::{Cell, ColType, Column, RowSink};
use crate::{for_each_arg, write_json_value};

/// The event table's columns.
pub fn columns() -> Vec<Column> {
    use ColType::*;
    Column::list(&[
        ("host", Str, false),
        ("plane", Str, false),
        ("plane_id", I64, false),
        ("line", Str, false),
        ("line_id", I64, false),
        ("name", Str, false),
        ("display_name", Str, true),
        ("start_ps", I64, false),
        ("duration_ps", I64, false),
        ("is_counter", Bool, false),
        ("hlo_op", Str, true),
        ("hlo_module", Str, true),
        ("tf_op", Str, true),
        ("scope", Str, true),
        ("step_num", I64, true),
        ("stats", Str, false),
    ])
}

/// Steps of one host as sorted `(start_ps, end_ps, step_num)`.
pub(crate) struct HostSteps(Vec<(i64, i64, i64)>);

impl HostSteps {
    /// Host `host`'s steps (their host spans).
    pub(crate) fn of(steps: &Steps, host: &str) -> HostSteps {
        let mut spans: Vec<(i64, i64, i64)> = (steps.steps.iter())
            .filter(|s| s.host == host)
            .map(|s| (s.host_span().0, s.host_span().1, s.step_num))
            .collect();
        spans.sort_unstable();
        HostSteps(spans)
    }

    /// The step whose span holds `t`: the latest-starting step starting at or before `t`.
    pub(crate) fn at(&self, t: i64) -> Option<i64> {
        let n = self.0.partition_point(|s| s.0 <= t);
        let s = self.0.get(n.checked_sub(1)?)?;
        (t < s.1 || (s.0 == s.1 && t == s.0)).then_some(s.2)
    }
}

/// Writes every event of `profile` to `table` (made with [`columns`]); `steps` is
/// `stepscope_analysis::steps::steps(profile)`. Returns the number of rows.
/// The longest host, plane, line or event name written whole, bytes: a name is
/// repeated on each of its events' rows, and one plane named with 1 MB made an 8 GB
/// CSV. Longer names are cut at a character boundary, with `…` after.
pub const MAX_NAME_BYTES: usize = 4096;

/// `name`, cut to [`MAX_NAME_BYTES`] (with `…`) when longer.
fn capped(name: &str) -> std::borrow::Cow<'_, str> {
    if name.len() <= MAX_NAME_BYTES {
        return std::borrow::Cow::Borrowed(name);
    }
    let mut end = MAX_NAME_BYTES;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}…", &name[..end]))
}

/// How many host, plane, line and event names of `hosts` are longer than
/// [`MAX_NAME_BYTES`] (and so cut in the events table).
pub fn long_names(hosts: &[Space]) -> usize {
    let long = |s: &str| usize::from(s.len() > MAX_NAME_BYTES);
    hosts
        .iter()
        .map(|space| {
            long(&space.host)
                + space
                    .planes
                    .iter()
                    .map(|p| {
                        long(&p.name)
                            + p.lines.iter().map(|l| long(&l.name)).sum::<usize>()
                            + p.event_meta.iter().map(|m| long(p.text(m.name))).sum::<usize>()
                    })
                    .sum::<usize>()
        })
        .sum()
}

/// Writes every event of `hosts` to `table` (made with [`columns`]); `steps` numbers
/// each event's step by its start.
pub fn write_events(hosts: &[Space], steps: &Steps, table: &mut dyn RowSink) -> io::Result<()> {
    let mut stats_json: Vec<u8> = Vec::new();
    for space in hosts {
        let host_steps = HostSteps::of(steps, &space.host);
        let host = capped(&space.host);
        for plane in &space.planes {
            let keys = Keys::of(plane);
            let mut scopes: HashMap<&str, String> = HashMap::new();
            let plane_name = capped(&plane.name);
            for line in &plane.lines {
                let line_name = capped(&line.name);
                for i in 0..line.len() {
                    let meta = plane.event_meta.get(line.meta(i) as usize);
                    let display = meta.map(|m| plane.text(m.display_name)).filter(|d| !d.is_empty());
                    let stat = |key: Option<u32>| {
                        key.and_then(|k| plane.event_stat(line, i, k)).and_then(|s| plane.stat_str(&s))
                    };
                    let (hlo_op, hlo_module, tf_op) = (stat(keys.hlo_op), stat(keys.hlo_module), stat(keys.tf_op));
                    let scope = tf_op.map(|t| scopes.entry(t).or_insert_with(|| scope_of(t)).as_str());
                    stats_json.clear();
                    stats_json.push(b'{');
                    let mut err = Ok(());
                    for_each_arg(plane, line, i, |_, name, v| {
                        if err.is_ok() {
                            if stats_json.len() > 1 {
                                stats_json.push(b',');
                            }
                            err = serde_json::to_writer(&mut stats_json, name)
                                .map_err(io::Error::from)
                                .and_then(|_| stats_json.write_all(b":"))
                                .and_then(|_| write_json_value(&mut stats_json, v));
                        }
                    });
                    err?;
                    stats_json.push(b'}');
                    let stats_text = std::str::from_utf8(&stats_json).unwrap_or("{}");
                    let step = host_steps.at(line.start_ps(i));
                    table.row(&[
                        Cell::Str(&host),
                        Cell::Str(&plane_name),
                        Cell::I64(plane.id),
                        Cell::Str(&line_name),
                        Cell::I64(line.id),
                        Cell::Str(&capped(plane.event_name(line.meta(i)))),
                        opt(display.map(capped).as_deref()),
                        Cell::I64(line.start_ps(i)),
                        Cell::I64(line.duration_ps(i)),
                        Cell::Bool(line.is_counter),
                        opt(hlo_op),
                        opt(hlo_module),
                        opt(tf_op),
                        scope.map_or(Cell::Null, Cell::Str),
                        step.map_or(Cell::Null, Cell::I64),
                        Cell::Str(stats_text),
                    ])?;
                }
            }
        }
    }
    Ok(())
}

/// A string cell, or null.
fn opt(s: Option<&str>) -> Cell<'_> {
    s.map_or(Cell::Null, Cell::Str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_lookup() {
        let s = HostSteps(vec![(0, 10, 1), (10, 20, 2), (30, 40, 3)]);
        assert_eq!(s.at(-1), None);
        assert_eq!(s.at(0), Some(1));
        assert_eq!(s.at(10), Some(2));
        assert_eq!(s.at(25), None);
        assert_eq!(s.at(39), Some(3));
        assert_eq!(s.at(40), None);
    }
}
