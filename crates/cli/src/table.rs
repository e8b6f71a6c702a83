//! Text tables that fit 80 columns, and CSV.

use std::fmt::Write as _;

/// A table: a header and rows of cells. The first column is the one cut to fit.
pub struct Table {
    pub header: Vec<&'static str>,
    pub rows: Vec<Vec<String>>,
}

/// Terminal width the text tables fit.
const WIDTH: usize = 80;

impl Table {
    pub fn new(header: Vec<&'static str>) -> Table {
        Table { header, rows: Vec::new() }
    }

    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// Renders with the first column left-aligned and cut to fit, the rest right-aligned.
    pub fn text(&self) -> String {
        let n = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let rest: usize = widths[1..].iter().map(|w| w + 2).sum();
        widths[0] = widths[0].min(WIDTH.saturating_sub(rest).max(12));
        let mut out = String::new();
        let mut line = |cells: Vec<&str>| {
            let mut s = String::new();
            for (i, cell) in cells.iter().enumerate().take(n) {
                if i == 0 {
                    let _ = write!(s, "{:<w$}", crate::human::fit(cell, widths[0]), w = widths[0]);
                } else {
                    let _ = write!(s, "  {:>w$}", cell, w = widths[i]);
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        };
        line(self.header.clone());
        for row in &self.rows {
            line(row.iter().map(String::as_str).collect());
        }
        out
    }
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
    fn text_fits() {
        let mut t = Table::new(vec!["NAME", "TIME"]);
        t.push(vec!["x".repeat(200), "1.00 ms".into()]);
        assert!(t.text().lines().all(|l| l.chars().count() <= 80));
    }
}
