//! A Parquet file checked against its own size before the Parquet reader sees it.
//!
//! The reader trusts what a file claims: a row count, a page's sizes, a list's length,
//! a column chunk's place, and allocates or loops by them; and it panics on some
//! damaged pages. A damaged or hostile file of a few kilobytes could so claim 2^34 rows
//! (an abort), a page of 2 GiB (zeroed before it is decompressed) or 2^63 rows of one
//! repeated value (a loop without end). [`check`] walks the footer and every page
//! header (Thrift compact protocol, as the Parquet format defines it) and refuses, with
//! a short reason, any claim the file cannot hold. What it lets through is read in
//! memory and time bounded by the file:
//!
//! - every offset and length lies inside the file, and pages tile their column chunk;
//! - a page decompresses to at most [`MAX_EXPANSION`]× its stored bytes (Snappy, the
//!   codec `stepscope tables` writes, expands at most ~21×), and to exactly what it
//!   claims where this check decompresses it (a byte-array column's dictionary and
//!   plain pages, whose every length-prefixed value is walked);
//! - each column's pages hold exactly its row group's rows, and the rows of a file are
//!   at most [`ROWS_PER_BYTE`] a byte (plus [`ROWS_SLACK`]): every table `stepscope
//!   tables` writes has a column of (nearly) distinct values, which takes at least a bit
//!   a row however it is encoded;
//! - pages are what `stepscope tables` writes (v1 data pages, plain or dictionary
//!   encoded, one dictionary first), and the schema is flat, so the reader's schema
//!   walk is shallow.

use std::fmt;

/// At most this many rows a byte of file (see the module's notes).
pub const ROWS_PER_BYTE: u64 = 8;
/// Rows any file may hold besides [`ROWS_PER_BYTE`]'s.
pub const ROWS_SLACK: u64 = 1 << 16;
/// A page's decompressed bytes are at most this many times its stored bytes (plus 1 KiB).
pub const MAX_EXPANSION: u64 = 32;
/// Nesting deeper than this in a Thrift structure is refused (the tables' footers nest 5).
const MAX_DEPTH: u32 = 32;

/// What a checked file holds: its leaf columns and each row group's rows.
#[derive(Debug)]
pub struct Layout {
    pub columns: usize,
    pub group_rows: Vec<u64>,
}

/// Why a file was refused: a short phrase ("a page claims 2147483647 bytes…").
#[derive(Debug)]
pub struct Bad(String);

impl fmt::Display for Bad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn bad<T>(what: impl Into<String>) -> Result<T, Bad> {
    Err(Bad(what.into()))
}

/// Checks `file`, a whole Parquet file's bytes (see the module's notes).
pub fn check(file: &[u8]) -> Result<Layout, Bad> {
    let len = file.len();
    if len < 12 || &file[..4] != b"PAR1" || &file[len - 4..] != b"PAR1" {
        return bad("not a Parquet file (no PAR1 at its start and end)");
    }
    let footer_len = le_u32(&file[len - 8..]).unwrap_or(u32::MAX) as usize;
    if footer_len > len - 12 {
        return bad(format!("its footer claims {footer_len} bytes, more than the file holds"));
    }
    let footer_start = len - 8 - footer_len;
    let meta = FileMeta::read(&mut Thrift::new(&file[footer_start..len - 8]))?;
    let leaves = meta.leaves()?;
    let max_rows = (len as u64).saturating_mul(ROWS_PER_BYTE).saturating_add(ROWS_SLACK);
    let total: u64 = meta.groups.iter().map(|g| g.rows).fold(0, u64::saturating_add);
    if total != meta.rows {
        return bad(format!("its row groups hold {total} rows, and its footer says {}", meta.rows));
    }
    if total > max_rows {
        return bad(format!("it claims {total} rows, more than a file of {len} bytes can hold"));
    }
    for g in &meta.groups {
        if g.chunks.len() != leaves.len() {
            return bad(format!("a row group has {} columns, and the schema {}", g.chunks.len(), leaves.len()));
        }
        for (c, leaf) in g.chunks.iter().zip(leaves) {
            c.check_pages(file, footer_start, g.rows, leaf)?;
        }
    }
    Ok(Layout { columns: leaves.len(), group_rows: meta.groups.iter().map(|g| g.rows).collect() })
}

// ---------------------------------------------------------------------------
// Thrift compact protocol: just enough to walk any value, checking every length.

const STOP: u8 = 0;
const BOOL_TRUE: u8 = 1;
const BOOL_FALSE: u8 = 2;
const BYTE: u8 = 3;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const DOUBLE: u8 = 7;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;
const UUID: u8 = 13;

struct Thrift<'a> {
    buf: &'a [u8],
    pos: usize,
    depth: u32,
}

impl<'a> Thrift<'a> {
    fn new(buf: &'a [u8]) -> Thrift<'a> {
        Thrift { buf, pos: 0, depth: 0 }
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn byte(&mut self) -> Result<u8, Bad> {
        let b = *self.buf.get(self.pos).ok_or_else(|| Bad("a header ends early".into()))?;
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Bad> {
        if n > self.remaining() {
            return bad(format!("a value claims {n} bytes, more than are left"));
        }
        self.pos += n;
        Ok(&self.buf[self.pos - n..self.pos])
    }

    fn varint(&mut self) -> Result<u64, Bad> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        bad("a number runs past ten bytes")
    }

    fn zigzag(&mut self) -> Result<i64, Bad> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// The next field's (id, type), or `None` at the struct's end.
    fn field(&mut self, last: &mut i16) -> Result<Option<(i16, u8)>, Bad> {
        let b = self.byte()?;
        let ty = b & 0x0f;
        if ty == STOP {
            return Ok(None);
        }
        let delta = b >> 4;
        *last = if delta == 0 {
            i16::try_from(self.zigzag()?).map_err(|_| Bad("a field id out of range".into()))?
        } else {
            last.wrapping_add(i16::from(delta))
        };
        Ok(Some((*last, ty)))
    }

    /// A list's (element type, size); each element takes at least a byte.
    fn list(&mut self) -> Result<(u8, usize), Bad> {
        let b = self.byte()?;
        let size = match b >> 4 {
            15 => self.varint()?,
            n => u64::from(n),
        };
        if size > self.remaining() as u64 {
            return bad(format!("a list claims {size} items, more than the bytes left"));
        }
        Ok((b & 0x0f, size as usize))
    }

    /// An integer field of any width.
    fn int(&mut self, ty: u8) -> Result<i64, Bad> {
        match ty {
            BYTE => Ok(i64::from(self.byte()? as i8)),
            I16 | I32 | I64 => self.zigzag(),
            _ => bad(format!("a field of type {ty} where a number belongs")),
        }
    }

    fn binary(&mut self) -> Result<&'a [u8], Bad> {
        let n = self.varint()?;
        self.take(usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// Skips one value of type `ty`.
    fn skip(&mut self, ty: u8) -> Result<(), Bad> {
        match ty {
            BOOL_TRUE | BOOL_FALSE => Ok(()),
            BYTE => self.byte().map(drop),
            I16 | I32 | I64 => self.varint().map(drop),
            DOUBLE => self.take(8).map(drop),
            BINARY => self.binary().map(drop),
            UUID => self.take(16).map(drop),
            LIST | SET => {
                let (elem, n) = self.list()?;
                self.nested(|t| (0..n).try_for_each(|_| t.skip_element(elem)))
            }
            MAP => {
                let n = self.varint()?;
                if n == 0 {
                    return Ok(());
                }
                if n > self.remaining() as u64 {
                    return bad(format!("a map claims {n} entries, more than the bytes left"));
                }
                let kv = self.byte()?;
                self.nested(|t| {
                    (0..n).try_for_each(|_| t.skip_element(kv >> 4).and_then(|_| t.skip_element(kv & 0x0f)))
                })
            }
            STRUCT => self.nested_fields(|t, _, ty| t.skip(ty)),
            _ => bad(format!("an unknown Thrift type {ty}")),
        }
    }

    /// A list, set or map element: booleans take a byte there.
    fn skip_element(&mut self, ty: u8) -> Result<(), Bad> {
        match ty {
            BOOL_TRUE | BOOL_FALSE => self.byte().map(drop),
            _ => self.skip(ty),
        }
    }

    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T, Bad>) -> Result<T, Bad> {
        if self.depth >= MAX_DEPTH {
            return bad("its structures nest too deep");
        }
        self.depth += 1;
        let r = f(self);
        self.depth -= 1;
        r
    }

    /// [`Thrift::struct_fields`] of a struct inside another (one level deeper).
    fn nested_fields(&mut self, each: impl FnMut(&mut Self, i16, u8) -> Result<(), Bad>) -> Result<(), Bad> {
        self.nested(|t| t.struct_fields(each))
    }

    /// Each field of a struct, to `each(thrift, id, type)`, which reads or skips it.
    fn struct_fields(&mut self, mut each: impl FnMut(&mut Self, i16, u8) -> Result<(), Bad>) -> Result<(), Bad> {
        let mut last = 0i16;
        while let Some((id, ty)) = self.field(&mut last)? {
            each(self, id, ty)?;
        }
        Ok(())
    }

    /// A list of structs, each read by `each`.
    fn struct_list<T>(&mut self, ty: u8, mut each: impl FnMut(&mut Self) -> Result<T, Bad>) -> Result<Vec<T>, Bad> {
        if ty != LIST {
            return bad("a list field of another type");
        }
        let (elem, n) = self.list()?;
        if elem != STRUCT && n > 0 {
            return bad("a list of structures holds other values");
        }
        self.nested(|t| (0..n).map(|_| t.nested(&mut each)).collect())
    }
}

// ---------------------------------------------------------------------------
// The parts of the footer and page headers the checks need (field ids: parquet.thrift).

struct FileMeta {
    schema: Vec<Element>,
    rows: u64,
    groups: Vec<Group>,
}

struct Group {
    rows: u64,
    chunks: Vec<Chunk>,
}

/// A schema element: its physical type, repetition and children (None: a leaf).
#[derive(Default, Clone, Copy)]
struct Element {
    kind: i64,
    optional: bool,
    children: Option<i64>,
}

/// Physical type BYTE_ARRAY: values of a length each.
const BYTE_ARRAY: i64 = 6;

#[derive(Default)]
struct Chunk {
    external: bool,
    codec: i64,
    values: i64,
    compressed_bytes: i64,
    data_page_offset: i64,
    dictionary_page_offset: Option<i64>,
    has_meta: bool,
}

fn count(v: i64, what: &str) -> Result<u64, Bad> {
    u64::try_from(v).map_err(|_| Bad(format!("a negative {what} ({v})")))
}

impl FileMeta {
    fn read(t: &mut Thrift) -> Result<FileMeta, Bad> {
        let mut m = FileMeta { schema: Vec::new(), rows: 0, groups: Vec::new() };
        t.struct_fields(|t, id, ty| {
            match id {
                2 => {
                    m.schema = t.struct_list(ty, |t| {
                        let mut e = Element::default();
                        t.struct_fields(|t, id, ty| {
                            match id {
                                1 => e.kind = t.int(ty)?,
                                3 => e.optional = t.int(ty)? == 1,
                                5 => e.children = Some(t.int(ty)?),
                                _ => t.skip(ty)?,
                            }
                            Ok(())
                        })?;
                        Ok(e)
                    })?
                }
                3 => m.rows = count(t.int(ty)?, "row count")?,
                4 => m.groups = t.struct_list(ty, Group::read)?,
                _ => t.skip(ty)?,
            }
            Ok(())
        })?;
        Ok(m)
    }

    /// The schema's leaves; the schema must be flat: a root of N leaves.
    fn leaves(&self) -> Result<&[Element], Bad> {
        let leaves = self.schema.len().saturating_sub(1);
        let flat = matches!(self.schema.first(), Some(e) if e.children == Some(leaves as i64))
            && self.schema[1..].iter().all(|e| e.children.is_none_or(|n| n == 0));
        if !flat {
            return bad("its schema is not one flat table of columns");
        }
        Ok(&self.schema[1..])
    }
}

impl Group {
    fn read(t: &mut Thrift) -> Result<Group, Bad> {
        let mut g = Group { rows: 0, chunks: Vec::new() };
        t.struct_fields(|t, id, ty| {
            match id {
                1 => g.chunks = t.struct_list(ty, Chunk::read)?,
                3 => g.rows = count(t.int(ty)?, "row count")?,
                _ => t.skip(ty)?,
            }
            Ok(())
        })?;
        Ok(g)
    }
}

impl Chunk {
    fn read(t: &mut Thrift) -> Result<Chunk, Bad> {
        let mut c = Chunk::default();
        t.struct_fields(|t, id, ty| match id {
            1 => {
                c.external = true;
                t.skip(ty)
            }
            3 if ty == STRUCT => {
                c.has_meta = true;
                t.nested_fields(|t, id, ty| {
                    match id {
                        4 => c.codec = t.int(ty)?,
                        5 => c.values = t.int(ty)?,
                        7 => c.compressed_bytes = t.int(ty)?,
                        9 => c.data_page_offset = t.int(ty)?,
                        11 => c.dictionary_page_offset = Some(t.int(ty)?),
                        _ => t.skip(ty)?,
                    }
                    Ok(())
                })
            }
            _ => t.skip(ty),
        })?;
        Ok(c)
    }

    /// Checks the chunk's place in `file` and walks its pages: they tile the chunk,
    /// each within its expansion bound, their values `rows` in all; a page of
    /// dictionary indices follows a dictionary; the text of a byte-array column's pages
    /// holds every value they claim.
    fn check_pages(&self, file: &[u8], footer_start: usize, rows: u64, leaf: &Element) -> Result<(), Bad> {
        if self.external {
            return bad("a column chunk lies in another file");
        }
        if !self.has_meta {
            return bad("a column chunk has no metadata");
        }
        // UNCOMPRESSED and SNAPPY: what this reader decodes.
        if !matches!(self.codec, 0 | 1) {
            return bad(format!("a column chunk in codec {} (stepscope tables writes Snappy)", self.codec));
        }
        if count(self.values, "value count")? != rows {
            return bad(format!("a column chunk holds {} values in a row group of {rows} rows", self.values));
        }
        let start = count(self.dictionary_page_offset.unwrap_or(self.data_page_offset), "page offset")?;
        let bytes = count(self.compressed_bytes, "chunk size")?;
        if start < 4 || start.saturating_add(bytes) > footer_start as u64 {
            return bad(format!("a column chunk claims bytes {start}..+{bytes}, outside the file's data"));
        }
        let chunk = &file[start as usize..(start + bytes) as usize];
        let mut t = Thrift::new(chunk);
        let (mut values, mut dictionary) = (0u64, false);
        while t.remaining() > 0 {
            let page = Page::read(&mut t)?;
            let stored = count(page.compressed, "page size")?;
            let plain = count(page.uncompressed, "page size")?;
            if stored > t.remaining() as u64 {
                return bad(format!("a page claims {stored} bytes, past its column chunk"));
            }
            if plain > stored.saturating_mul(MAX_EXPANSION) + 1024 {
                return bad(format!("a page of {stored} bytes claims to expand to {plain}"));
            }
            let n = count(page.values, "value count")?;
            let body = t.take(stored as usize)?;
            match page.kind {
                DICTIONARY_PAGE => {
                    if dictionary || values > 0 {
                        return bad("a dictionary page after the column's first page");
                    }
                    dictionary = true;
                    if leaf.kind == BYTE_ARRAY {
                        texts(&self.page_bytes(body, plain)?, n)?;
                    } else if n > plain {
                        return bad("a dictionary page claims more entries than its bytes");
                    }
                }
                _ => {
                    values = values.saturating_add(n);
                    if matches!(page.encoding, PLAIN_DICTIONARY | RLE_DICTIONARY) && !dictionary {
                        return bad("a page of dictionary indices in a column with no dictionary");
                    }
                    if !matches!(page.encoding, PLAIN | PLAIN_DICTIONARY | RLE_DICTIONARY)
                        || page.levels_encoding != RLE
                    {
                        return bad(format!(
                            "a page in encoding {} (stepscope tables writes plain and dictionary pages)",
                            page.encoding
                        ));
                    }
                    if leaf.kind == BYTE_ARRAY && page.encoding == PLAIN && n > 0 {
                        let data = self.page_bytes(body, plain)?;
                        let (present, rest) = if leaf.optional { present(&data, n)? } else { (n, &data[..]) };
                        texts(rest, present)?;
                    }
                }
            }
        }
        if values != rows {
            return bad(format!("a column's pages hold {values} values in a row group of {rows} rows"));
        }
        Ok(())
    }

    /// A page's bytes as the reader will decode them: `body` decompressed to `plain`
    /// bytes (already bounded by the page's stored size).
    fn page_bytes<'a>(&self, body: &'a [u8], plain: u64) -> Result<std::borrow::Cow<'a, [u8]>, Bad> {
        if self.codec == 0 {
            return Ok(std::borrow::Cow::Borrowed(body));
        }
        let mut out = vec![0; plain as usize];
        match snap::raw::Decoder::new().decompress(body, &mut out) {
            Ok(n) if n as u64 == plain => Ok(std::borrow::Cow::Owned(out)),
            _ => bad("a page does not decompress to the size it claims"),
        }
    }
}

/// Page types and encodings (parquet.thrift).
const DICTIONARY_PAGE: i64 = 2;
const PLAIN: i64 = 0;
const PLAIN_DICTIONARY: i64 = 2;
const RLE: i64 = 3;
const RLE_DICTIONARY: i64 = 8;

/// The little-endian `u32` `b` starts with.
fn le_u32(b: &[u8]) -> Option<u32> {
    b.first_chunk::<4>().map(|c| u32::from_le_bytes(*c))
}

/// Checks that `data` begins with `n` length-prefixed values (PLAIN byte arrays).
fn texts(data: &[u8], n: u64) -> Result<(), Bad> {
    let mut at = 0usize;
    for _ in 0..n {
        match data.get(at..).and_then(le_u32).map(|n| n as usize) {
            Some(len) if len <= data.len() - at - 4 => at += 4 + len,
            _ => return bad(format!("a page claims {n} texts and holds fewer")),
        }
    }
    Ok(())
}

/// A v1 data page of an optional column: how many of its `n` values are present (its
/// definition levels, bit width 1: a 4-byte length, then runs and bit-packed groups),
/// and the bytes after the levels.
fn present(data: &[u8], n: u64) -> Result<(u64, &[u8]), Bad> {
    let short = || Bad("a page's definition levels end early".into());
    let len = le_u32(data).ok_or_else(short)? as usize;
    let levels = data.get(4..4 + len.min(data.len())).filter(|l| l.len() == len).ok_or_else(short)?;
    let mut t = Thrift::new(levels);
    let (mut seen, mut present) = (0u64, 0u64);
    while seen < n {
        let header = t.varint()?;
        if header & 1 == 1 {
            // (header >> 1) groups of 8 values, a byte each at bit width 1.
            let groups = t.take(usize::try_from(header >> 1).unwrap_or(usize::MAX)).map_err(|_| short())?;
            for &g in groups {
                let k = (n - seen).min(8);
                present += u64::from((u16::from(g) & ((1u16 << k) - 1)).count_ones());
                seen += k;
            }
        } else {
            let run = (header >> 1).min(n - seen);
            if t.byte()? & 1 == 1 {
                present += run;
            }
            seen += run;
        }
    }
    Ok((present, &data[4 + len..]))
}

/// A page header's sizes, values and encodings (types: 0 data v1, 2 dictionary).
#[derive(Default)]
struct Page {
    kind: i64,
    uncompressed: i64,
    compressed: i64,
    values: i64,
    encoding: i64,
    levels_encoding: i64,
}

impl Page {
    fn read(t: &mut Thrift) -> Result<Page, Bad> {
        let mut p = Page { kind: -1, ..Page::default() };
        t.nested_fields(|t, id, ty| {
            match id {
                1 => p.kind = t.int(ty)?,
                2 => p.uncompressed = t.int(ty)?,
                3 => p.compressed = t.int(ty)?,
                // The data page header (5) or the dictionary page header (7).
                5 | 7 if ty == STRUCT => t.nested_fields(|t, field, ty| {
                    match field {
                        1 => p.values = t.int(ty)?,
                        2 => p.encoding = t.int(ty)?,
                        3 if id == 5 => p.levels_encoding = t.int(ty)?,
                        _ => t.skip(ty)?,
                    }
                    Ok(())
                })?,
                _ => t.skip(ty)?,
            }
            Ok(())
        })?;
        if !matches!(p.kind, 0 | DICTIONARY_PAGE) {
            return bad(format!("a page of type {} (stepscope tables writes data pages v1 and dictionaries)", p.kind));
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_past_the_end_and_deep_nesting_are_refused() {
        // A list of 2^20 items in 3 bytes.
        let mut t = Thrift::new(&[0xf9, 0x80, 0x80, 0x40]);
        assert!(t.skip(LIST).is_err());
        // A binary of 2^62 bytes.
        let mut t = Thrift::new(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40]);
        assert!(t.skip(BINARY).is_err());
        // Structs in structs, 100 deep.
        let deep: Vec<u8> = std::iter::repeat_n(0x1c, 100).chain(std::iter::repeat_n(0, 100)).collect();
        let e = Thrift::new(&deep).skip(STRUCT).unwrap_err();
        assert!(e.0.contains("nest"), "{e}");
    }
}
