//! An analysis's rows (ops, kernels, steps, …) as a table.
//!
//! Rows are serialized with serde exactly as `stepscope <analysis> --json` prints them;
//! each top-level field becomes a column with the same name, in field order. Column
//! types follow the values: integers → int64, other numbers → double, booleans →
//! boolean, strings → string; arrays and objects are written as their JSON text
//! (e.g. a kernel's `grid` is `[16,16,1]`). A column is nullable when some row has
//! `null` there.

use std::fmt;
use std::io::{self, Write};

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Serialize;
use serde_json::Value;

use crate::table::{Cell, ColType, Column, RowSink, TableWriter};

/// The keys of a JSON object in written order (values skipped).
struct Keys(Vec<String>);

impl<'de> Deserialize<'de> for Keys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Keys, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Keys;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                let mut out = Vec::new();
                while let Some((k, _)) = map.next_entry::<String, IgnoredAny>()? {
                    out.push(k);
                }
                Ok(Keys(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// A row as (key, value) pairs in field order. Values come from `serde_json::to_value`
/// (floats stay bit-exact); the order from the serialized text (the value map is sorted).
struct Ordered(Vec<(String, Value)>);

fn ordered<T: Serialize>(row: &T) -> io::Result<Ordered> {
    let keys: Keys = serde_json::from_str(&serde_json::to_string(row)?)?;
    let Value::Object(mut map) = serde_json::to_value(row)? else {
        return Err(io::Error::other("analysis rows must serialize to JSON objects"));
    };
    Ok(Ordered(
        keys.0
            .into_iter()
            .map(|k| {
                let v = map.remove(&k).unwrap_or(Value::Null);
                (k, v)
            })
            .collect(),
    ))
}

/// An analysis's rows made ready to write: their columns, inferred from the values, and
/// each row's values in field order.
pub struct Rows {
    columns: Vec<Column>,
    parsed: Vec<Ordered>,
}

impl Rows {
    /// `rows` as a table; no rows give no columns.
    pub fn of<T: Serialize>(rows: &[T]) -> io::Result<Rows> {
        let mut parsed: Vec<Ordered> = Vec::with_capacity(rows.len());
        for r in rows {
            parsed.push(ordered(r)?);
        }
        Ok(Rows { columns: infer_columns(&parsed), parsed })
    }

    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Hands each row to `sink`, one cell per column.
    pub fn emit(&self, sink: &mut dyn RowSink) -> io::Result<()> {
        let columns = &self.columns;
        let mut texts: Vec<String> = Vec::new();
        for row in &self.parsed {
            texts.clear();
            // JSON text for arrays/objects and for values of mixed-type columns, made
            // first so cells can borrow them.
            for c in columns {
                let v = row.0.iter().find(|(k, _)| *k == c.name).map(|(_, v)| v);
                texts.push(match v {
                    Some(v @ (Value::Array(_) | Value::Object(_))) => v.to_string(),
                    Some(v @ (Value::Number(_) | Value::Bool(_))) if c.ty == ColType::Str => v.to_string(),
                    _ => String::new(),
                });
            }
            let cells: Vec<Cell> = columns
                .iter()
                .zip(&texts)
                .map(|(c, text)| match row.0.iter().find(|(k, _)| *k == c.name).map(|(_, v)| v) {
                    None | Some(Value::Null) => Cell::Null,
                    Some(Value::String(s)) => Cell::Str(s),
                    Some(Value::Bool(b)) if c.ty == ColType::Bool => Cell::Bool(*b),
                    Some(Value::Number(n)) if c.ty == ColType::I64 => n.as_i64().map_or(Cell::Null, Cell::I64),
                    Some(Value::Number(n)) if c.ty == ColType::U64 => n.as_u64().map_or(Cell::Null, Cell::U64),
                    Some(Value::Number(n)) if c.ty == ColType::F64 => n.as_f64().map_or(Cell::Null, Cell::F64),
                    Some(_) => Cell::Str(text),
                })
                .collect();
            sink.row(&cells)?;
        }
        Ok(())
    }
}

/// Writes `rows` to a table of `format`; errors when there are no rows (no columns).
pub fn write_rows<T: Serialize, W: Write + Send>(
    rows: &[T],
    format: crate::table::TableFormat,
    out: W,
) -> io::Result<u64> {
    let rows = Rows::of(rows)?;
    if rows.columns.is_empty() {
        return Err(io::Error::other("no rows to write"));
    }
    let mut table = TableWriter::new(format, rows.columns.clone(), out)?;
    rows.emit(&mut table)?;
    table.finish()
}

/// Columns in first-seen key order, typed by their values.
fn infer_columns(rows: &[Ordered]) -> Vec<Column> {
    #[derive(Default)]
    struct Seen {
        null: bool,
        int: bool,
        /// An integer past `i64::MAX`, and a negative one.
        unsigned: bool,
        negative: bool,
        float: bool,
        boolean: bool,
        other: bool,
        count: usize,
    }
    let mut names: Vec<String> = Vec::new();
    let mut seen: Vec<Seen> = Vec::new();
    for row in rows {
        for (k, v) in &row.0 {
            let idx = match names.iter().position(|n| n == k) {
                Some(i) => i,
                None => {
                    names.push(k.clone());
                    seen.push(Seen::default());
                    names.len() - 1
                }
            };
            let s = &mut seen[idx];
            s.count += 1;
            match v {
                Value::Null => s.null = true,
                Value::Bool(_) => s.boolean = true,
                Value::Number(n) if n.is_i64() => {
                    s.int = true;
                    s.negative |= n.as_i64().is_some_and(|v| v < 0);
                }
                Value::Number(n) if n.is_u64() => s.unsigned = true,
                Value::Number(_) => s.float = true,
                _ => s.other = true,
            }
        }
    }
    names
        .into_iter()
        .zip(seen)
        .map(|(name, s)| {
            let kinds = [s.int || s.unsigned || s.float, s.boolean, s.other].iter().filter(|k| **k).count();
            let ty = if kinds == 0 {
                // No value to go by (every row null): the unit in the name, so that a
                // table written in parts (`stepscope tables`) has one type a column.
                type_of_name(&name)
            } else if kinds != 1 || s.other {
                ColType::Str
            } else if s.boolean {
                ColType::Bool
            } else if s.float || (s.unsigned && s.negative) {
                ColType::F64
            } else if s.unsigned {
                ColType::U64
            } else {
                ColType::I64
            };
            let nullable = s.null || s.count < rows.len();
            Column { name, ty, nullable: nullable || kinds == 0 }
        })
        .collect()
}

/// A column's type from the unit its name ends in: `_pct`, `_per_s`, `_intensity`
/// are doubles; `_ps`, `_bytes`, `_num`, `_id`, `count`, `flops`, `_per_thread` are
/// integers; the rest text.
fn type_of_name(name: &str) -> ColType {
    if ["_pct", "_per_s", "intensity"].iter().any(|u| name.ends_with(u)) {
        ColType::F64
    } else if ["_ps", "_bytes", "_num", "_id", "count", "flops", "_per_thread"].iter().any(|u| name.ends_with(u)) {
        ColType::I64
    } else {
        ColType::Str
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_of_nulls_takes_its_type_from_its_unit() {
        #[derive(Serialize)]
        struct R {
            roof_pct: Option<f64>,
            start_ps: Option<i64>,
            note: Option<String>,
        }
        let rows = [R { roof_pct: None, start_ps: None, note: None }];
        let types: Vec<ColType> = infer_columns(&[ordered(&rows[0]).unwrap()]).iter().map(|c| c.ty).collect();
        assert_eq!(types, [ColType::F64, ColType::I64, ColType::Str]);
    }

    #[test]
    fn columns_follow_fields_and_values() {
        #[derive(Serialize)]
        struct R {
            name: &'static str,
            count: u64,
            pct: f64,
            grid: [u32; 3],
            occ: Option<f64>,
        }
        let rows = [
            R { name: "a,b", count: 3, pct: 1.0, grid: [1, 2, 3], occ: None },
            R { name: "c", count: 4, pct: 0.5, grid: [4, 5, 6], occ: Some(50.0) },
        ];
        let mut out = Vec::new();
        let n = write_rows(&rows, crate::table::TableFormat::Csv, &mut out).unwrap();
        assert_eq!(n, 2);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "name,count,pct,grid,occ\n\"a,b\",3,1,\"[1,2,3]\",\n c,4,0.5,\"[4,5,6]\",50\n".replace("\n ", "\n")
        );
    }
}
