//! A tiny protobuf encoder: varints, tags, and nested messages whose length is
//! patched in afterwards.
//!
//! A nested message is written in place after 4 reserved bytes; when it is closed its
//! length goes into those bytes as a minimal varint and the payload moves back over
//! the unused ones, so no message is built twice and the output is canonical. A
//! nested message holds at most 2^28 − 1 bytes (256 MiB); Perfetto packets are far
//! smaller.

/// Protobuf wire types.
const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;

/// Largest nested message the padded 4-byte length can hold.
pub const MAX_NESTED: usize = (1 << 28) - 1;

/// A message being written into a reusable buffer.
#[derive(Default)]
pub struct Enc {
    pub buf: Vec<u8>,
    /// Start offsets of the open nested messages' length fields.
    open: Vec<usize>,
}

impl Enc {
    /// Clears the buffer for the next message.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.open.clear();
    }

    fn raw_varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u32) {
        self.raw_varint(u64::from((field << 3) | wire));
    }

    /// A varint field (uint64, uint32, enum, bool).
    pub fn uint(&mut self, field: u32, v: u64) {
        self.key(field, VARINT);
        self.raw_varint(v);
    }

    /// An int64/int32 field (two's complement, as protobuf encodes negatives).
    pub fn int(&mut self, field: u32, v: i64) {
        self.uint(field, v as u64);
    }

    /// A double field.
    pub fn double(&mut self, field: u32, v: f64) {
        self.key(field, FIXED64);
        self.buf.extend_from_slice(&v.to_bits().to_le_bytes());
    }

    /// A string or bytes field.
    pub fn bytes(&mut self, field: u32, v: &[u8]) {
        self.key(field, LEN);
        self.raw_varint(v.len() as u64);
        self.buf.extend_from_slice(v);
    }

    /// A string field.
    pub fn str(&mut self, field: u32, v: &str) {
        self.bytes(field, v.as_bytes());
    }

    /// Opens a nested message in `field`; close it with [`Enc::end`].
    pub fn begin(&mut self, field: u32) {
        self.key(field, LEN);
        self.open.push(self.buf.len());
        self.buf.extend_from_slice(&[0x80, 0x80, 0x80, 0x00]);
    }

    /// Closes the innermost nested message: writes its length as a minimal varint
    /// in the 4 bytes [`Enc::begin`] reserved and moves the payload back over the
    /// unused ones. A message larger than [`MAX_NESTED`] is an error.
    pub fn end(&mut self) -> std::io::Result<()> {
        let Some(at) = self.open.pop() else { return Ok(()) };
        let len = self.buf.len() - at - 4;
        if len > MAX_NESTED {
            return Err(std::io::Error::other(format!("a protobuf message of {len} bytes is too large to write")));
        }
        let mut v = len as u32;
        let mut n = 0;
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            self.buf[at + n] = if v == 0 { b } else { b | 0x80 };
            n += 1;
            if v == 0 {
                break;
            }
        }
        if n < 4 {
            self.buf.copy_within(at + 4.., at + n);
            self.buf.truncate(at + n + len);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields() {
        let mut e = Enc::default();
        e.uint(1, 150);
        assert_eq!(e.buf, [0x08, 0x96, 0x01]);
        e.clear();
        e.int(2, -1);
        assert_eq!(e.buf.len(), 1 + 10);
        e.clear();
        e.str(2, "hi");
        assert_eq!(e.buf, [0x12, 2, b'h', b'i']);
    }

    #[test]
    fn nested_lengths_are_minimal() {
        let mut e = Enc::default();
        e.begin(1);
        e.uint(1, 1);
        e.begin(2);
        e.bytes(3, &[7; 200]);
        e.end().unwrap();
        e.end().unwrap();
        // outer: 2 + 3 + 203 = 208 bytes (0xd0 0x01); inner: 3 + 200 = 203 (0xcb 0x01)
        let mut want = vec![0x0a, 0xd0, 0x01, 0x08, 0x01, 0x12, 0xcb, 0x01, 0x1a, 0xc8, 0x01];
        want.extend([7; 200]);
        assert_eq!(e.buf, want);
    }
}
