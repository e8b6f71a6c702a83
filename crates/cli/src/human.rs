//! Human units for tables: durations, sizes, counts.

/// A duration in picoseconds as `ps`, `ns`, `µs`, `ms` or `s`, three significant digits.
pub fn duration_ps(ps: i64) -> String {
    if ps == 0 {
        return "0".to_string();
    }
    let a = ps.unsigned_abs() as f64;
    let sign = if ps < 0 { "-" } else { "" };
    let (v, unit) = if a >= 1e12 {
        (a / 1e12, "s")
    } else if a >= 1e9 {
        (a / 1e9, "ms")
    } else if a >= 1e6 {
        (a / 1e6, "µs")
    } else if a >= 1e3 {
        (a / 1e3, "ns")
    } else {
        return format!("{sign}{ps_abs} ps", ps_abs = ps.unsigned_abs());
    };
    format!("{sign}{} {unit}", sig3(v))
}

/// A size in bytes with IEC units (KiB, MiB, GiB, TiB: powers of 1024), three
/// significant digits: `115 MiB`. The web UI writes sizes alike (web/lib/format.js).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{} {}", sig3(v), UNITS[unit])
}

/// An integer with thousands separators: 1234567 → "1,234,567".
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Three significant digits, no exponent.
fn sig3(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// At most `width` characters whatever the output, the middle elided (`input_tra…fusion.1`),
/// so names that differ at the end still read apart; [`crate::table::fit`] where tables are cut.
pub fn elide(s: &str, width: usize) -> String {
    let n = s.chars().count();
    if n <= width {
        return s.to_string();
    }
    let keep = width.saturating_sub(1);
    // More of the start, which names the thing; the end tells numbered ones apart.
    let tail = keep / 3;
    let head = keep - tail;
    let mut out: String = s.chars().take(head).collect();
    out.push('…');
    out.extend(s.chars().skip(n - tail));
    out
}

/// At most `width` characters, the start cut (`…main.step:45 (train.py)`): for text
/// whose end matters most, as a stack's innermost frame.
pub fn elide_start(s: &str, width: usize) -> String {
    let n = s.chars().count();
    if n <= width {
        return s.to_string();
    }
    let mut out = String::from("…");
    out.extend(s.chars().skip(n - width.saturating_sub(1)));
    out
}

/// Word-wraps `text` to `width` columns; the first line starts with `first`, the
/// A change of duration with its sign: `+1.20 ms`, `-806 µs`, `0`.
pub fn signed_duration_ps(ps: i64) -> String {
    if ps > 0 {
        format!("+{}", duration_ps(ps))
    } else {
        duration_ps(ps)
    }
}

/// rest are indented by as many spaces.
pub fn wrap(first: &str, text: &str, width: usize) -> String {
    let indent = " ".repeat(first.chars().count());
    let mut out = String::new();
    let mut line = first.to_string();
    let mut empty = true;
    for word in text.split_whitespace() {
        if !empty && line.chars().count() + 1 + word.chars().count() > width {
            out.push_str(line.trim_end());
            out.push('\n');
            line = indent.clone();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}

/// `line` ending in a newline, wrapped at spaces to `width` characters where it is
/// longer (`None`: whole): its later lines are indented two more than its first; a word
/// too long for a line of its own is broken where the line ends.
pub fn wrap_line(line: &str, width: Option<usize>) -> String {
    let Some(width) = width.filter(|&w| line.chars().count() > w) else {
        return format!("{line}\n");
    };
    let lead: String = line.chars().take_while(|c| *c == ' ').collect();
    let hang = format!("{lead}  ");
    let room = width.saturating_sub(hang.chars().count()).max(20);
    let mut out = String::new();
    let mut current = lead.clone();
    let mut empty = true;
    let mut words: std::collections::VecDeque<String> =
        line.split(' ').filter(|w| !w.is_empty()).map(String::from).collect();
    while let Some(word) = words.pop_front() {
        let len = current.chars().count() + usize::from(!empty) + word.chars().count();
        if len <= width {
            if !empty {
                current.push(' ');
            }
            current.push_str(&word);
            empty = false;
            continue;
        }
        if word.chars().count() > room || empty {
            // Too long for any line (or for this one, empty as it is): what fits here,
            // the rest as the next word.
            let fits = width.saturating_sub(current.chars().count() + usize::from(!empty));
            // On a line of its own, at least 10 characters go, however narrow the width.
            let fits = match (empty, fits >= 10) {
                (_, true) => fits,
                (true, false) => 10,
                (false, false) => 0,
            };
            if fits > 0 {
                if !empty {
                    current.push(' ');
                }
                current.extend(word.chars().take(fits));
            }
            let rest: String = word.chars().skip(fits).collect();
            if !rest.is_empty() {
                words.push_front(rest);
            }
        } else {
            words.push_front(word);
        }
        out.push_str(current.trim_end());
        out.push('\n');
        current = hang.clone();
        empty = true;
    }
    out.push_str(current.trim_end());
    out.push('\n');
    out
}

/// A rate with an SI prefix and three significant digits: `255 TFLOP/s`, `812 GB/s`.
pub fn rate(per_s: f64, unit: &str) -> String {
    let (v, prefix) = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .into_iter()
        .find(|(scale, _)| per_s >= *scale)
        .map_or((per_s, ""), |(scale, p)| (per_s / scale, p));
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$} {prefix}{unit}")
}

/// `text` with every character that steers a terminal — C0 controls but newline and
/// tab, DEL, C1 controls — written as `\u001b` (which JSON also reads back as the
/// character, so JSON output stays valid and exact): a host name taken from a file name, or
/// an op name from a profile, can then never move the cursor, retitle the window or
/// hide what follows (OSC and CSI sequences start with ESC or a C1 control).
pub fn clean(text: &str) -> std::borrow::Cow<'_, str> {
    let steers = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(steers) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if steers(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A writer that passes its text through [`clean`] on the way to `out`: for output
/// written in pieces (a query's CSV or JSON, streamed). A character split between two
/// writes is held until its last byte comes.
pub struct CleanWriter<W: std::io::Write> {
    out: W,
    /// The bytes of a character still incomplete.
    carry: Vec<u8>,
}

impl<W: std::io::Write> CleanWriter<W> {
    pub fn new(out: W) -> CleanWriter<W> {
        CleanWriter { out, carry: Vec::new() }
    }
}

impl<W: std::io::Write> std::io::Write for CleanWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.carry.extend_from_slice(buf);
        let mut at = 0;
        while at < self.carry.len() {
            match std::str::from_utf8(&self.carry[at..]) {
                Ok(text) => {
                    self.out.write_all(clean(text).as_bytes())?;
                    at = self.carry.len();
                }
                Err(e) => {
                    let valid = at + e.valid_up_to();
                    // UTF-8 up to `valid`, so read without loss.
                    let text = String::from_utf8_lossy(&self.carry[at..valid]);
                    self.out.write_all(clean(&text).as_bytes())?;
                    match e.error_len() {
                        // Not UTF-8: passed on as it is.
                        Some(n) => {
                            self.out.write_all(&self.carry[valid..valid + n])?;
                            at = valid + n;
                        }
                        // A character whose end is still to come.
                        None => {
                            at = valid;
                            break;
                        }
                    }
                }
            }
        }
        self.carry.drain(..at);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.carry.is_empty() {
            self.out.write_all(&self.carry)?;
            self.carry.clear();
        }
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn wrap_line_fits_the_width_and_keeps_every_character() {
        let line = "  straggler: vm /device:CPU:3 computes 7.62 ms vs a median of 6.27 ms for its peers (+21%)";
        let out = super::wrap_line(line, Some(40));
        assert!(out.lines().all(|l| l.chars().count() <= 40), "{out}");
        assert!(out.lines().skip(1).all(|l| l.starts_with("    ") && !l.starts_with("     ")), "{out}");
        let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(words(&out), words(line));
        assert_eq!(super::wrap_line(line, None), format!("{line}\n"));
        // A word longer than any line is broken, and loses nothing.
        let stack = format!("jax: {}", "jit(train_step)/transpose(jvp(layer1/attention));".repeat(6));
        let out = super::wrap_line(&stack, Some(50));
        assert!(out.lines().all(|l| l.chars().count() <= 50), "{out}");
        assert_eq!(out.split_whitespace().collect::<String>(), stack.split_whitespace().collect::<String>());
        // However narrow the width, it ends and keeps every character.
        assert!(super::wrap_line(&"x".repeat(100), Some(1)).lines().count() >= 10);
        let text = format!("   a {} bb {} c", "y".repeat(37), "z".repeat(81));
        for width in 1..130 {
            let out = super::wrap_line(&text, Some(width));
            assert_eq!(out.split_whitespace().collect::<String>(), text.split_whitespace().collect::<String>());
            assert!(out.lines().all(|l| l.chars().count() <= width.max(15)), "{width}: {out}");
        }
    }

    use super::*;

    #[test]
    fn a_clean_writer_cleans_characters_split_between_writes() {
        use std::io::Write;
        let text = "a\u{1b}]0;x\u{7}é\u{9b}2J€";
        let mut w = CleanWriter::new(Vec::new());
        for b in text.as_bytes() {
            w.write_all(std::slice::from_ref(b)).unwrap();
        }
        w.flush().unwrap();
        assert_eq!(String::from_utf8(w.out).unwrap(), clean(text));
    }

    #[test]
    fn units() {
        assert_eq!(duration_ps(1_234_000_000), "1.23 ms");
        assert_eq!(duration_ps(999), "999 ps");
        assert_eq!(duration_ps(-15_000_000), "-15.0 µs");
        assert_eq!(duration_ps(2_500_000_000_000), "2.50 s");
        assert_eq!(bytes(120_400_000), "115 MiB");
        assert_eq!(bytes(1024), "1.00 KiB");
        assert_eq!(bytes(16_106_127_360), "15.0 GiB");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(count(26_723), "26,723");
        assert_eq!(count(7), "7");
        assert_eq!(elide("abcdef", 4), "ab…f");
        assert_eq!(elide("abcdef", 6), "abcdef");
        assert_eq!(wrap("  → ", "one two three", 12), "  → one two\n    three\n");
    }

    #[test]
    fn clean_escapes_what_steers_a_terminal_and_keeps_the_rest() {
        assert_eq!(clean("host\u{1b}]0;owned\u{7}a\u{9b}2J\tb\nc"), "host\\u001b]0;owned\\u0007a\\u009b2J\tb\nc");
        assert!(matches!(clean("plain · µs"), std::borrow::Cow::Borrowed(_)));
        let json = serde_json::to_string(&"x\u{9b}y\u{7f}").unwrap();
        let back: String = serde_json::from_str(&clean(&json)).unwrap();
        assert_eq!(back, "x\u{9b}y\u{7f}", "JSON stays exact");
    }
}
