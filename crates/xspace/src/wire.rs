//! A bounds-checked walker over the protobuf wire format.
//!
//! Positions are absolute offsets into the whole buffer, so a string field can be
//! kept as a [`Span`](crate::Span) into the source without copying. Every length is
//! checked against the end of the enclosing message before it is used: a length
//! prefix past the end is an error, never an allocation or a panic.

use std::fmt;
use std::ops::Range;

/// Where and why the wire format could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WireError {
    pub at: usize,
    pub what: &'static str,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.what, self.at)
    }
}

pub(crate) type WireResult<T> = Result<T, WireError>;

/// Protobuf wire types.
pub(crate) const VARINT: u8 = 0;
pub(crate) const FIXED64: u8 = 1;
pub(crate) const LEN: u8 = 2;
pub(crate) const FIXED32: u8 = 5;

/// A cursor over `buf[pos..end]`.
#[derive(Clone)]
pub(crate) struct Wire<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Wire<'a> {
    /// A walker over the whole buffer.
    #[inline]
    pub fn new(buf: &'a [u8]) -> Wire<'a> {
        Wire { buf, pos: 0, end: buf.len() }
    }

    /// A walker over `range` of the same buffer (a nested message).
    #[inline]
    pub fn sub(&self, range: Range<usize>) -> Wire<'a> {
        debug_assert!(range.end <= self.buf.len());
        Wire { buf: self.buf, pos: range.start, end: range.end.min(self.buf.len()) }
    }

    /// True when the message is fully read.
    #[inline]
    pub fn done(&self) -> bool {
        self.pos >= self.end
    }

    /// Current absolute position.
    #[inline]
    pub fn pos(&self) -> usize {
        self.pos
    }

    fn err(&self, what: &'static str) -> WireError {
        WireError { at: self.pos, what }
    }

    /// Reads a base-128 varint.
    #[inline(always)]
    pub fn varint(&mut self) -> WireResult<u64> {
        // Fast path, inlined: one-byte values (field keys, small ids and lengths).
        if self.pos < self.end {
            let b = self.buf[self.pos];
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
        }
        self.varint_long()
    }

    /// [`Wire::varint`] for values of two bytes or more, and every error.
    #[inline(never)]
    fn varint_long(&mut self) -> WireResult<u64> {
        // Ten bytes left (the longest varint): no end check per byte.
        if let Some(b) = self.buf.get(self.pos..self.pos + 10).filter(|_| self.end - self.pos >= 10) {
            let mut value: u64 = 0;
            for (i, &byte) in b.iter().enumerate() {
                value |= u64::from(byte & 0x7f) << (7 * i);
                if byte < 0x80 {
                    if i == 9 && byte > 1 {
                        self.pos += 10;
                        return Err(self.err("varint longer than 64 bits"));
                    }
                    self.pos += i + 1;
                    return Ok(value);
                }
            }
            self.pos += 10;
            return Err(self.err("varint longer than 10 bytes"));
        }
        let mut value: u64 = 0;
        let mut shift = 0u32;
        loop {
            if self.pos >= self.end {
                return Err(self.err(if self.end == self.buf.len() {
                    "the file ends early, inside a number"
                } else {
                    "varint runs past the end of its message"
                }));
            }
            let b = self.buf[self.pos];
            self.pos += 1;
            if shift == 63 && b > 1 {
                return Err(self.err("varint longer than 64 bits"));
            }
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
            shift += 7;
            if shift > 63 {
                return Err(self.err("varint longer than 10 bytes"));
            }
        }
    }

    /// Reads a field key: (field number, wire type).
    #[inline]
    pub fn key(&mut self) -> WireResult<(u32, u8)> {
        let at = self.pos;
        let k = self.varint()?;
        let field = k >> 3;
        if field == 0 || field > u64::from(u32::MAX >> 3) {
            return Err(WireError { at, what: "invalid field number" });
        }
        Ok((field as u32, (k & 7) as u8))
    }

    /// Reads a length prefix and returns the absolute range of the bytes it covers.
    #[inline]
    pub fn len_delim(&mut self) -> WireResult<Range<usize>> {
        let at = self.pos;
        let len = self.varint()?;
        let avail = (self.end - self.pos) as u64;
        if len > avail {
            let what = if len > (self.buf.len() - self.pos) as u64 {
                "the file ends early: a length prefix points past the end of the file"
            } else {
                "a length prefix runs past the end of its message"
            };
            return Err(WireError { at, what });
        }
        let start = self.pos;
        self.pos += len as usize;
        Ok(start..self.pos)
    }

    /// Reads 8 little-endian bytes.
    #[inline]
    pub fn fixed64(&mut self) -> WireResult<u64> {
        if self.end - self.pos < 8 {
            return Err(self.err("fixed64 runs past the end of its message"));
        }
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.buf[self.pos..self.pos + 8]);
        self.pos += 8;
        Ok(u64::from_le_bytes(b))
    }

    /// Skips a field of wire type `wt`.
    pub fn skip(&mut self, wt: u8) -> WireResult<()> {
        match wt {
            VARINT => self.varint().map(drop),
            FIXED64 => self.fixed64().map(drop),
            LEN => self.len_delim().map(drop),
            FIXED32 => {
                if self.end - self.pos < 4 {
                    return Err(self.err("fixed32 runs past the end of its message"));
                }
                self.pos += 4;
                Ok(())
            }
            3 | 4 => Err(self.err("groups (wire types 3 and 4) are not used by this format")),
            _ => Err(self.err("invalid wire type")),
        }
    }

    /// Reads a varint field value and checks the wire type.
    #[inline]
    pub fn int(&mut self, wt: u8) -> WireResult<i64> {
        if wt != VARINT {
            return Err(self.err("integer field with the wrong wire type"));
        }
        Ok(self.varint()? as i64)
    }

    /// Reads a length-delimited field and checks the wire type.
    #[inline]
    pub fn bytes(&mut self, wt: u8) -> WireResult<Range<usize>> {
        if wt != LEN {
            return Err(self.err("length-delimited field with the wrong wire type"));
        }
        self.len_delim()
    }

    /// Reads a string field into an owned `String` (invalid UTF-8 replaced).
    #[inline]
    pub fn string(&mut self, wt: u8) -> WireResult<String> {
        let r = self.bytes(wt)?;
        Ok(String::from_utf8_lossy(&self.buf[r]).into_owned())
    }

    /// Reads a repeated int64 element: one value (unpacked) or a packed run.
    pub fn repeated_int(&mut self, wt: u8, out: &mut Vec<i64>) -> WireResult<()> {
        match wt {
            VARINT => out.push(self.varint()? as i64),
            LEN => {
                let r = self.len_delim()?;
                let mut inner = self.sub(r);
                while !inner.done() {
                    out.push(inner.varint()? as i64);
                }
            }
            _ => return Err(self.err("repeated integer field with the wrong wire type")),
        }
        Ok(())
    }

    /// Reads the rest of the message, calling `f` with a reader of each embedded
    /// message in field `field`; other fields are skipped.
    #[inline]
    pub fn each_message(&mut self, field: u32, mut f: impl FnMut(Wire<'a>) -> WireResult<()>) -> WireResult<()> {
        while !self.done() {
            let (number, wt) = self.key()?;
            if number != field {
                self.skip(wt)?;
                continue;
            }
            let r = self.bytes(wt)?;
            f(self.sub(r))?;
        }
        Ok(())
    }

    /// The whole buffer (positions are offsets into it).
    #[inline]
    pub fn buf(&self) -> &'a [u8] {
        self.buf
    }

    /// The bytes of an absolute range.
    #[inline]
    pub fn slice(&self, r: Range<usize>) -> &'a [u8] {
        &self.buf[r]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_limits() {
        let mut w = Wire::new(&[0x96, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert_eq!(w.varint(), Ok(150));
        assert_eq!(w.varint(), Ok(u64::MAX));
        assert!(w.done());
        let mut w = Wire::new(&[0xff; 11]);
        assert!(w.varint().is_err());
        let mut w = Wire::new(&[0x80]);
        assert!(w.varint().is_err());
    }

    #[test]
    fn varints_of_every_length_read_back() {
        fn encode(mut v: u64, out: &mut Vec<u8>) {
            while v >= 0x80 {
                out.push(v as u8 | 0x80);
                v >>= 7;
            }
            out.push(v as u8);
        }
        // Every bit length, with all-ones, single-bit and mixed patterns.
        let mut values = vec![0u64, u64::MAX];
        for bits in 1..64 {
            values.extend([1 << bits, (1 << bits) - 1, ((1 << bits) - 1) & 0x5A5A_A5A5_0F0F_F0F0 | 1 << (bits - 1)]);
        }
        let mut buf = Vec::new();
        for &v in &values {
            encode(v, &mut buf);
        }
        // Read with more bytes after each value (the unchecked loop) and alone, at the
        // very end of the message (the checked loop).
        let mut w = Wire::new(&buf);
        for &v in &values {
            assert_eq!(w.varint(), Ok(v));
        }
        assert!(w.done());
        for &v in &values {
            let mut one = Vec::new();
            encode(v, &mut one);
            let mut w = Wire::new(&one);
            assert_eq!(w.varint(), Ok(v), "{v:#x} alone");
            assert!(w.done());
        }
        // A varint cut by its message's end is an error, even with bytes after it.
        let mut w = Wire::new(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]).sub(0..3);
        assert!(w.varint().is_err());
    }

    #[test]
    fn length_past_end_is_an_error() {
        // field 1, LEN, length 100, but only 2 bytes follow.
        let mut w = Wire::new(&[0x0a, 100, 1, 2]);
        assert_eq!(w.key(), Ok((1, LEN)));
        let e = w.len_delim().unwrap_err();
        assert_eq!(e.at, 1);
        // A huge length never allocates or overflows.
        let mut w = Wire::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert!(w.len_delim().is_err());
    }

    #[test]
    fn packed_and_unpacked_repeated() {
        let mut out = Vec::new();
        let mut w = Wire::new(&[0x08, 0x05, 0x0a, 0x02, 0x07, 0x09]);
        while !w.done() {
            let (f, wt) = w.key().unwrap();
            assert_eq!(f, 1);
            w.repeated_int(wt, &mut out).unwrap();
        }
        assert_eq!(out, vec![5, 7, 9]);
    }

    #[test]
    fn skips_every_wire_type() {
        let buf = [0x08, 0x01, 0x11, 0, 0, 0, 0, 0, 0, 0, 0, 0x1a, 0x01, 0x00, 0x25, 0, 0, 0, 0];
        let mut w = Wire::new(&buf);
        while !w.done() {
            let (_, wt) = w.key().unwrap();
            w.skip(wt).unwrap();
        }
        let mut w = Wire::new(&[0x0b]);
        let (_, wt) = w.key().unwrap();
        assert!(w.skip(wt).is_err());
    }
}
