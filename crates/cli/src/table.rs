//! Text tables that fit the terminal, and CSV.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};

/// A table: a header and rows of cells. The first column is the one cut to fit.
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Cut the first column's long cells at their start (`…main.step:45 (train.py)`),
    /// keeping the end: a Python stack's leaf frame, the one a user needs.
    pub keep_end: bool,
    /// Columns that may be left out where the table would not fit the terminal, the
    /// first to go first; a line under the table names them.
    pub optional: Vec<usize>,
    /// Columns after the first that are aligned left too (text among numbers).
    pub left: Vec<usize>,
}

/// `--wide`: never cut.
static WIDE: AtomicBool = AtomicBool::new(false);

/// Sets `--wide`.
pub fn set_wide(wide: bool) {
    WIDE.store(wide, Ordering::Relaxed);
}

/// The width text tables are cut to fit: `$COLUMNS`, else the terminal's when standard
/// output is one; `None` (nothing cut) with `--wide`, or when the output goes to a
/// file or a pipe and `$COLUMNS` is unset.
pub fn width() -> Option<usize> {
    if WIDE.load(Ordering::Relaxed) {
        return None;
    }
    if let Some(c) = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<usize>().ok()) {
        return Some(c.max(40));
    }
    if std::io::stdout().is_terminal() {
        let cols = crossterm::terminal::size().map(|(w, _)| w as usize).unwrap_or(80);
        return Some(cols.max(40));
    }
    None
}

/// Cuts `s` to at most `width` characters where tables are cut to fit ([`width`];
/// else whole), keeping its start and end: the middle becomes `…`
/// ([`crate::human::elide`]).
pub fn fit(s: &str, width: usize) -> String {
    match self::width() {
        Some(_) => crate::human::elide(s, width),
        None => s.to_string(),
    }
}

/// The width prose (findings, notes) is wrapped to: the terminal's, else 80.
pub fn prose_width() -> usize {
    width().unwrap_or(80).min(120)
}

impl Table {
    pub fn new<S: Into<String>>(header: Vec<S>) -> Table {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
            keep_end: false,
            optional: Vec::new(),
            left: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// Renders with the first column (and those of `left`) left-aligned and the rest
    /// right-aligned. Where the
    /// table is wider than [`width`], the first column's long cells lose their middle
    /// (`input_tra…fusion.1`), never so far that two different cells read the same.
    pub fn text(&self) -> String {
        self.text_at(width())
    }

    /// [`Table::text`] cut to fit `width` columns (`None`: nothing cut).
    fn text_at(&self, width: Option<usize>) -> String {
        let n = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        // Optional columns left out, first to go first, while the table cannot fit
        // with its first column as narrow as it can be (its cells still read apart).
        let mut hidden: Vec<usize> = Vec::new();
        let first: Vec<String> = match width {
            None => self.rows.iter().map(|r| r.first().cloned().unwrap_or_default()).collect(),
            Some(total) => {
                let rest =
                    |hidden: &[usize]| -> usize { (1..n).filter(|i| !hidden.contains(i)).map(|i| widths[i] + 2).sum() };
                let (_, narrowest) = self.first_cells(widths[0].min(20));
                for &c in self.optional.iter().filter(|&&c| c > 0 && c < n) {
                    if narrowest + rest(&hidden) <= total {
                        break;
                    }
                    hidden.push(c);
                }
                let (cells, fit) = self.first_cells(widths[0].min(total.saturating_sub(rest(&hidden)).max(20)));
                widths[0] = fit.max(self.header[0].chars().count());
                cells
            }
        };
        let mut out = String::new();
        let mut line = |cells: Vec<&str>| {
            let mut s = String::new();
            // Padded by hand: `format!`'s widths stop at 65,535 and panic past it.
            for (i, cell) in cells.iter().enumerate().take(n).filter(|(i, _)| !hidden.contains(i)) {
                let pad = " ".repeat(widths[i].saturating_sub(cell.chars().count()));
                if i == 0 {
                    s.push_str(cell);
                    s.push_str(&pad);
                } else if self.left.contains(&i) {
                    s.push_str("  ");
                    s.push_str(cell);
                    s.push_str(&pad);
                } else {
                    s.push_str("  ");
                    s.push_str(&pad);
                    s.push_str(cell);
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        };
        line(self.header.iter().map(String::as_str).collect());
        for (row, first) in self.rows.iter().zip(&first) {
            line(std::iter::once(first.as_str()).chain(row.iter().skip(1).map(String::as_str)).collect());
        }
        if !hidden.is_empty() {
            let names: Vec<&str> = hidden.iter().map(|&i| self.header[i].as_str()).collect();
            out.push_str(&format!("(left out to fit: {} — --wide shows every column)\n", names.join(", ")));
        }
        out
    }
}

impl Table {
    /// The first column's cells cut to `from` characters, or as many more as it takes
    /// for different cells to read apart; and that width.
    fn first_cells(&self, from: usize) -> (Vec<String>, usize) {
        let full = self.rows.iter().map(|r| r.first().map_or(0, |c| c.chars().count())).max().unwrap_or(0);
        let mut fit = from;
        loop {
            let cut = |c: &str| {
                if self.keep_end {
                    crate::human::elide_start(c, fit)
                } else {
                    crate::human::elide(c, fit)
                }
            };
            let cells: Vec<String> = self.rows.iter().map(|r| cut(r.first().map_or("", |c| c))).collect();
            if fit >= full || distinct(&self.rows, &cells) {
                return (cells, fit);
            }
            fit += 1;
        }
    }
}

/// True when no two rows whose first cells differ show the same `shown` text.
fn distinct(rows: &[Vec<String>], shown: &[String]) -> bool {
    let mut seen: HashMap<&str, &str> = HashMap::new();
    rows.iter().zip(shown).all(|(row, shown)| {
        let whole = row.first().map_or("", |c| c.as_str());
        *seen.entry(shown.as_str()).or_insert(whole) == whole
    })
}

/// Writes rows as CSV (RFC 4180 quoting).
pub fn csv(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    let esc = |s: &str| {
        if s.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    out.push_str(&header.iter().map(|h| esc(h)).collect::<Vec<_>>().join(","));
    out.push('\n');
    for row in rows {
        out.push_str(&row.iter().map(|c| esc(c)).collect::<Vec<_>>().join(","));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes() {
        let s = csv(&["a", "b"], &[vec!["x,y".into(), "say \"hi\"".into()]]);
        assert_eq!(s, "a,b\n\"x,y\",\"say \"\"hi\"\"\"\n");
    }

    #[test]
    fn text_fits_and_never_reads_two_names_the_same() {
        let mut t = Table::new(vec!["NAME", "TIME"]);
        t.push(vec!["x".repeat(200), "1.00 ms".into()]);
        assert!(t.text_at(Some(80)).lines().all(|l| l.chars().count() <= 80));
        // Two names alike but for their ends: both lose their middle, and still differ.
        let mut t = Table::new(vec!["OP", "TIME"]);
        let long = "input_transpose_fusion_with_a_long_name_from_xla_that_goes_on".to_string();
        for end in ["fusion.1", "fusion.2"] {
            t.push(vec![format!("{long}_{end}"), "1.00 ms".into()]);
        }
        let text = t.text_at(Some(60));
        let shown: Vec<&str> = text.lines().skip(1).map(|l| l.split("  ").next().unwrap()).collect();
        assert_ne!(shown[0], shown[1], "{text}");
        assert!(shown.iter().all(|s| s.contains('…') && s.starts_with("input_transpose")), "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= 60), "{text}");
        // Alike but in the middle: the column widens until they read apart.
        let mut t = Table::new(vec!["OP", "TIME"]);
        for mid in ["a", "b"] {
            t.push(vec![format!("{}{mid}{}", "x".repeat(40), "y".repeat(40)), "1.00 ms".into()]);
        }
        let text = t.text_at(Some(40));
        let shown: Vec<&str> = text.lines().skip(1).map(|l| l.split("  ").next().unwrap()).collect();
        assert_ne!(shown[0], shown[1], "{text}");
        // Nothing cut: whole names.
        assert!(t.text_at(None).contains(&format!("{}a{}", "x".repeat(40), "y".repeat(40))));
        // Optional columns go, first first, until the table fits; a line names them.
        let mut t = Table::new(vec!["NAME", "A", "B", "C"]);
        t.push(vec!["n".repeat(30), "a".repeat(30), "b".repeat(30), "c".repeat(30)]);
        t.optional = vec![3, 2];
        let text = t.text_at(Some(90));
        assert!(text.lines().all(|l| l.chars().count() <= 90), "{text}");
        assert!(!text.contains(&"c".repeat(30)) && text.contains(&"b".repeat(30)), "{text}");
        assert!(text.contains("(left out to fit: C — --wide shows every column)"), "{text}");
        assert!(t.text_at(None).contains(&"c".repeat(30)), "nothing left out when not cut");
    }
}
