//! Folded stacks (`frame;frame;…;leaf WEIGHT` a line), the input of inferno,
//! speedscope and flamegraph.pl: device time by the Python stack that made each op,
//! the op as the leaf, weighted by its self time in nanoseconds.

use std::io::Write;

use stepscope_analysis::ops::{OpStack, NO_SOURCE};

/// What [`write_folded`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FoldedSummary {
    /// Lines written (one per op with self time of at least 1 ns).
    pub stacks: u64,
    /// Their weights' sum, ns.
    pub total_ns: u64,
}

/// A frame's text with the format's separators taken out (`;` ends a frame, a
/// newline a stack).
fn clean(text: &str) -> String {
    text.replace(';', ",").replace(['\n', '\r'], " ")
}

/// Writes one line per op: its stack outermost first (`function (file:line)`; ops
/// without a source under `(no source)`), the op (`op [module]`), and its self time
/// in whole nanoseconds (rounded; ops under half a nanosecond are left out).
pub fn write_folded(ops: &[OpStack], out: &mut impl Write) -> std::io::Result<FoldedSummary> {
    let mut s = FoldedSummary::default();
    for o in ops {
        let ns = u64::try_from((o.self_ps + 500) / 1000).unwrap_or(0);
        if ns == 0 {
            continue;
        }
        let mut line = String::new();
        if o.stack.is_empty() {
            line.push_str(NO_SOURCE);
        }
        for (i, f) in o.stack.iter().enumerate() {
            if i > 0 {
                line.push(';');
            }
            line.push_str(&clean(&f.folded()));
        }
        line.push(';');
        line.push_str(&clean(&o.op));
        if !o.module.is_empty() {
            line.push_str(&format!(" [{}]", clean(&o.module)));
        }
        writeln!(out, "{line} {ns}")?;
        s.stacks += 1;
        s.total_ns += ns;
    }
    Ok(s)
}
