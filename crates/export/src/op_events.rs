//! The op-event table: one row per op event as the op profile counts it (an XLA op's
//! event on CPU and TPU, one kernel of an op on GPU), streamed: nothing is kept per
//! event.

use std::io;

use stepscope_analysis::ops::{for_each_op_event, OpEvent};
use stepscope_analysis::steps::Steps;
use stepscope_analysis::Profile;

use crate::events::HostSteps;
use crate::table::{Cell, ColType, Column, RowSink};

/// The op-event table's columns.
pub fn columns() -> Vec<Column> {
    use ColType::*;
    Column::list(&[
        ("host", Str, false),
        ("device", Str, false),
        ("program_id", U64, true),
        ("module", Str, false),
        ("op", Str, false),
        ("category", Str, false),
        ("start_ps", I64, false),
        ("duration_ps", I64, false),
        ("self_ps", I64, false),
        ("flops", I64, true),
        ("bytes_accessed", I64, true),
        ("step_num", I64, true),
    ])
}

/// Writes every op event of `profile` to `table` (made with [`columns`]); `steps` is
/// `stepscope_analysis::steps::steps(profile)`, whose host spans number each event's
/// step by its start.
pub fn write_op_events(profile: &Profile, steps: &Steps, table: &mut dyn RowSink) -> io::Result<()> {
    let mut host: Option<(String, HostSteps)> = None;
    let mut result = Ok(());
    let num = |v: Option<u64>| v.and_then(|v| i64::try_from(v).ok()).map_or(Cell::Null, Cell::I64);
    for_each_op_event(profile, |e: &OpEvent| {
        if result.is_err() {
            return;
        }
        if host.as_ref().is_none_or(|(h, _)| h != e.host) {
            host = Some((e.host.to_string(), HostSteps::of(steps, e.host)));
        }
        let step = host.as_ref().and_then(|(_, s)| s.at(e.start_ps));
        result = table.row(&[
            Cell::Str(e.host),
            Cell::Str(e.device),
            e.program_id.map_or(Cell::Null, Cell::U64),
            Cell::Str(e.module),
            Cell::Str(e.op),
            Cell::Str(e.category),
            Cell::I64(e.start_ps),
            Cell::I64(e.duration_ps),
            Cell::I64(e.self_ps),
            num(e.flops),
            num(e.bytes_accessed),
            step.map_or(Cell::Null, Cell::I64),
        ]);
    });
    result
}
