//! Where in the user's Python an HLO instruction came from: its stack (newer JAX:
//! the module's stack frame index) or its one source line (older JAX), and the line
//! in the user's own code that stepscope puts its device time on.

use serde::Serialize;
use stepscope_xspace::hlo::{Frame, HloInstruction, HloModule};

/// One frame of a Python stack, owned.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct SourceFrame {
    pub file: String,
    pub function: String,
    pub line: i32,
}
stepscope_model::wire_struct!(SourceFrame { file, function, line });

impl SourceFrame {
    fn of(f: &Frame) -> SourceFrame {
        SourceFrame { file: f.file.to_string(), function: f.function.to_string(), line: f.line }
    }

    /// `file:line`.
    pub fn location(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }

    /// `function (file:line)`, or `file:line` where the function is unknown: one frame
    /// of a folded stack.
    pub fn folded(&self) -> String {
        if self.function.is_empty() {
            self.location()
        } else {
            format!("{} ({})", self.function, self.location())
        }
    }
}

/// The Python stack of an instruction, outermost first (`<module>` first, the line
/// that made the op last). Older JAX records one line (`source_file`/`source_line`)
/// instead of a stack: that line alone. Empty where the module records neither.
pub fn stack(m: &HloModule, i: &HloInstruction) -> Vec<SourceFrame> {
    if i.stack_frame_id > 0 {
        let mut frames: Vec<SourceFrame> = m.stack_frames.stack(i.stack_frame_id).iter().map(SourceFrame::of).collect();
        if !frames.is_empty() {
            frames.reverse();
            return frames;
        }
    }
    if i.source_file.is_empty() {
        return Vec::new();
    }
    vec![SourceFrame { file: i.source_file.clone(), function: String::new(), line: i.source_line }]
}

/// The stack an op's time goes to. A fusion that does a matmul or convolution is
/// credited to that instruction's stack (XLA gives a fusion the metadata of its
/// root, e.g. the `reduce_max` a matmul fed); other instructions to their own.
pub fn op_stack(m: &HloModule, i: &HloInstruction) -> Vec<SourceFrame> {
    let hero = m.fused_body(i).and_then(|body| {
        body.instructions.iter().find(|f| matches!(f.opcode.as_str(), "dot" | "convolution") && has_source(f))
    });
    stack(m, hero.unwrap_or(i))
}

fn has_source(i: &HloInstruction) -> bool {
    i.stack_frame_id > 0 || !i.source_file.is_empty()
}

/// True for a file of an installed library or of Python itself (`site-packages`,
/// `dist-packages`, the standard library, frozen modules, JAX's own sources), where
/// a user's line is not.
pub fn is_library_file(file: &str) -> bool {
    let f = file.replace('\\', "/");
    f.contains("/site-packages/")
        || f.contains("/dist-packages/")
        || f.starts_with('<')
        || f.contains("/jax/_src/")
        || f.contains("/lib/python3")
        || f.contains("/lib64/python3")
}

/// The frame stepscope puts an op's time on: the innermost frame in the user's own
/// code, else the innermost frame (a stack wholly inside libraries).
pub fn user_frame(stack: &[SourceFrame]) -> Option<&SourceFrame> {
    stack.iter().rev().find(|f| !is_library_file(&f.file)).or_else(|| stack.last())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(file: &str, line: i32) -> SourceFrame {
        SourceFrame { file: file.into(), function: "f".into(), line }
    }

    #[test]
    fn user_frame_skips_libraries() {
        let s = vec![
            frame("/home/me/train.py", 10),
            frame("/home/me/model.py", 42),
            frame("/usr/lib/python3.12/site-packages/flax/linen/module.py", 700),
        ];
        assert_eq!(user_frame(&s).map(|f| f.line), Some(42));
        let libs = vec![frame("/venv/lib/python3.12/site-packages/optax/x.py", 5)];
        assert_eq!(user_frame(&libs).map(|f| f.line), Some(5));
        assert_eq!(user_frame(&[]), None);
        assert_eq!(frame("a.py", 3).folded(), "f (a.py:3)");
    }
}
