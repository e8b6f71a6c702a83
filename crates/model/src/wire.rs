//! What a host of a run is reduced to, as bytes: a run's hosts mapped on other machines
//! (a Ray cluster's nodes, docs/scale.md) hand their parts to the one that reduces them
//! in this form, and the reduce reads them back exactly (every float by its bits), so
//! that a run mapped elsewhere gives the answer, byte for byte, of one mapped here.
//!
//! A type is put field by field in its declared order ([`wire_struct!`]), with no
//! names: the bytes are only read by the same build that wrote them, which a header
//! checks. Reading checks every length against the bytes left, so a damaged part is an
//! error, never a large allocation or a panic.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;

/// A part that cannot be read back: what is wrong with it.
#[derive(Debug, Clone, PartialEq)]
pub struct WireError(pub String);

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WireError {}

/// The bytes left to read of a part.
pub struct Bytes<'a> {
    rest: &'a [u8],
}

impl<'a> Bytes<'a> {
    pub fn new(bytes: &'a [u8]) -> Bytes<'a> {
        Bytes { rest: bytes }
    }

    /// The next `n` bytes.
    pub fn take_bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if n > self.rest.len() {
            return Err(WireError(format!("it ends {} bytes early", n - self.rest.len())));
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// How many bytes are left.
    pub fn len(&self) -> usize {
        self.rest.len()
    }

    /// A count of items that each take at least one byte: no more than the bytes left.
    fn count(&mut self) -> Result<usize, WireError> {
        let n = u64::take(self)?;
        if n > self.rest.len() as u64 {
            return Err(WireError(format!("a list of {n} items in {} bytes", self.rest.len())));
        }
        Ok(n as usize)
    }
}

/// A type put as bytes and read back as it was.
pub trait Wire: Sized {
    fn put(&self, out: &mut Vec<u8>);
    fn take(bytes: &mut Bytes<'_>) -> Result<Self, WireError>;
}

/// `value`'s bytes.
pub fn to_bytes<T: Wire>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    value.put(&mut out);
    out
}

/// The value `bytes` hold, all of them.
pub fn from_bytes<T: Wire>(bytes: &[u8]) -> Result<T, WireError> {
    let mut b = Bytes::new(bytes);
    let value = T::take(&mut b)?;
    if !b.is_empty() {
        return Err(WireError(format!("{} bytes are left over", b.rest.len())));
    }
    Ok(value)
}

/// A value kept as its bytes: for what is kept long and read seldom (a pod's hosts'
/// replays and steps, held until the reduce asks for them), a fraction of its size
/// in memory, or none of it while a [`Spilling`] is alive: then the bytes go to a
/// file of the system's temporary folder that has no name (nothing is left behind),
/// and are read back from it. Read back whole with [`Packed::get`].
pub struct Packed<T> {
    bytes: Store,
    of: std::marker::PhantomData<fn() -> T>,
}

/// Where a [`Packed`] value's bytes are.
#[derive(Clone)]
enum Store {
    Held(Box<[u8]>),
    /// In a spill file, from this offset.
    Spilled(Arc<SpillFile>, u64, usize),
}

impl<T> Clone for Packed<T> {
    fn clone(&self) -> Packed<T> {
        Packed { bytes: self.bytes.clone(), of: std::marker::PhantomData }
    }
}

impl<T> std::fmt::Debug for Packed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.bytes {
            Store::Held(b) => write!(f, "Packed({} bytes)", b.len()),
            Store::Spilled(_, at, n) => write!(f, "Packed({n} bytes spilled at {at})"),
        }
    }
}

impl<T: Wire> Packed<T> {
    pub fn new(value: &T) -> Packed<T> {
        let bytes = to_bytes(value);
        let spilled = spill_file().and_then(|f| f.append(&bytes).map(|at| Store::Spilled(f, at, bytes.len())));
        Packed { bytes: spilled.unwrap_or_else(|| Store::Held(bytes.into_boxed_slice())), of: std::marker::PhantomData }
    }

    /// The value. Always there: the bytes were put by [`Packed::new`], or checked when
    /// taken off the wire (`None` only where its spill file could not be read back).
    pub fn get(&self) -> Option<T> {
        match &self.bytes {
            Store::Held(b) => from_bytes(b).ok(),
            Store::Spilled(f, at, n) => from_bytes(&f.read(*at, *n)?).ok(),
        }
    }

    /// Its bytes (read back from its spill file where it was spilled).
    fn bytes(&self) -> Option<std::borrow::Cow<'_, [u8]>> {
        match &self.bytes {
            Store::Held(b) => Some(std::borrow::Cow::Borrowed(b)),
            Store::Spilled(f, at, n) => f.read(*at, *n).map(std::borrow::Cow::Owned),
        }
    }
}

impl<T: Wire> Wire for Packed<T> {
    fn put(&self, out: &mut Vec<u8>) {
        // A spill file that cannot be read back is put as no value: its taker fails.
        let bytes = self.bytes().unwrap_or_default();
        (bytes.len() as u64).put(out);
        out.extend_from_slice(&bytes);
    }
    fn take(bytes: &mut Bytes<'_>) -> Result<Self, WireError> {
        let n = bytes.count()?;
        let inner = bytes.take_bytes(n)?;
        // Checked now, so that a damaged part is an error where it is read.
        from_bytes::<T>(inner)?;
        Ok(Packed { bytes: Store::Held(inner.into()), of: std::marker::PhantomData })
    }
}

/// A file with no name in the system's temporary folder that [`Packed`] values are
/// written to while a [`Spilling`] is alive; closed (and its space freed) once the
/// last value in it is dropped.
struct SpillFile {
    file: std::fs::File,
    /// Its length: where the next value goes.
    end: std::sync::Mutex<u64>,
}

impl SpillFile {
    /// Appends `bytes`: their offset, `None` where the file could not take them (the
    /// value is then held in memory).
    fn append(&self, bytes: &[u8]) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let mut end = self.end.lock().unwrap_or_else(|p| p.into_inner());
        let at = *end;
        self.file.write_all_at(bytes, at).ok()?;
        *end += bytes.len() as u64;
        Some(at)
    }

    fn read(&self, at: u64, n: usize) -> Option<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let mut out = vec![0u8; n];
        self.file.read_exact_at(&mut out, at).ok()?;
        Some(out)
    }
}

/// The spill file [`Packed::new`] writes to now, if a [`Spilling`] is alive.
static SPILL: std::sync::Mutex<Option<Arc<SpillFile>>> = std::sync::Mutex::new(None);

fn spill_file() -> Option<Arc<SpillFile>> {
    SPILL.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// While alive, every [`Packed`] value made is written to a spill file and not held
/// in memory (a pod's hosts' parts, kept until the reduce: the process's memory no
/// longer grows with its hosts). Values already spilled stay readable after it is
/// dropped, until they are.
pub struct Spilling(());

impl Spilling {
    /// Spilling from now on; `None` (values held in memory, as without it) where no
    /// file could be made in the system's temporary folder.
    pub fn start() -> Option<Spilling> {
        let file = tempfile::tempfile().ok()?;
        let spill = Arc::new(SpillFile { file, end: std::sync::Mutex::new(0) });
        *SPILL.lock().unwrap_or_else(|p| p.into_inner()) = Some(spill);
        Some(Spilling(()))
    }
}

impl Drop for Spilling {
    fn drop(&mut self) {
        SPILL.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

impl Wire for u64 {
    fn put(&self, out: &mut Vec<u8>) {
        // LEB128: seven bits a byte, low first.
        let mut v = *self;
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    fn take(bytes: &mut Bytes<'_>) -> Result<Self, WireError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = bytes.take_bytes(1)?[0];
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(WireError("a number of over ten bytes".into()))
    }
}

impl Wire for i64 {
    fn put(&self, out: &mut Vec<u8>) {
        (((*self << 1) ^ (*self >> 63)) as u64).put(out);
    }
    fn take(bytes: &mut Bytes<'_>) -> Result<Self, WireError> {
        let z = u64::take(bytes)?;
        Ok((z >> 1) as i64 ^ -((z & 1) as i64))
    }
}

/// The unsigned and signed integers narrower than 64 bits, put as their 64-bit kin
/// and checked on the way back.
macro_rules! narrow {
    ($wide:ty: $($t:ty),*) => {$(
        impl Wire for $t {
            fn put(&self, out: &mut Vec<u8>) {
                (*self as $wide).put(out);
            }
            fn take(bytes: &mut Bytes<'_>) -> Result<Self, WireError> {
                let v = <$wide>::take(bytes)?;
                <$t>::try_from(v).map_err(|_| WireError(format!("{v} does not fit a {}", stringify!($t))))
            }
        }
    )*};
}
narrow!(u64: u8, u16, u32, usize);
narrow!(i64: i32);

/// The floats, put as their bits (little-endian): read back exactly, NaNs included.
macro_rules! float {
    ($($t:ty: $bits:ty, $n:literal);*) => {$(
        impl Wire for $t {
            fn put(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_bits().to_le_bytes());
            }
            fn take(bytes: &mut Bytes<'_>) -> Result<Self, WireError> {
                let mut b = [0u8; $n];
                b.copy_from_slice(bytes.take_bytes($n)?);
                Ok(<$t>::from_bits(<$bits>::from_le_bytes(b)))
            }
        }
    )*};
}
float!(f64: u64, 8; f32: u32, 4);

impl Wire for bool {
    fn put(&self, out: &mut Vec<u8>) {
        out.push(u8::from(*self));
    }
    fn take(bytes: &mut Bytes<'_>) -> Result<Self, WireError> {
        match bytes.take_bytes(1)?[0] {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(WireError(format!("{b} is not a yes or no"))),
        }
    }
}

impl Wire for () {
    fn put(&self, _: &mut Vec<u8>) {}
    fn take(_: &mut Bytes<'_>) -> Result<Self, WireError> {
        Ok(())
    }
}

impl Wire for String {
    fn put(&self, out: &mut Vec<u8>) {
        (self.len() as u64).put(out);
        out.extend_from_slice(self.as_bytes());
    }
    fn take(bytes: &mut Bytes<'_>) -> Result<Self, WireError> {
        let n = bytes.count()?;
        let b = bytes.take_bytes(n)?;
        std::str::from_utf8(b).map(str::to_string).map_err(|_| WireError("a text that is not UTF-8".into()))
    }
}

impl Wire for Arc<str> {
    fn put(&self, out: &mut Vec<u8>) {
        (self.len() as u64).put(out);
        out.extend_from_slice(self.as_bytes());
    }
    fn take(bytes: &mut Bytes<'_>) -> Result<Self, WireError> {
        String::take(bytes).map(Arc::from)
    }
}

/// The texts the code names by `&'static str` (a node's name, where a module's name
/// came from), read back once each and kept for the process: no more than
/// [`STATIC_TEXTS`] of them, of no more than [`STATIC_TEXT_BYTES`] bytes each, so
/// that parts cannot grow the process without bound.
impl Wire for &'static str {
    fn put(&self, out: &mut Vec<u8>) {
        (self.len() as u64).put(out);
        out.extend_from_slice(self.as_bytes());
    }
    fn take(bytes: &mut Bytes<'_>) -> Result<Self, WireError> {
        static KNOWN: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
        let text = String::take(bytes)?;
        let mut known = KNOWN.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = known.iter().find(|k| **k == text) {
            return Ok(k);
        }
        if known.len() >= STATIC_TEXTS || text.len() > STATIC_TEXT_BYTES {
            return Err(WireError(format!("too many names, or too long a name ({} bytes)", text.len())));
        }
        let k: &'static str = Box::leak(text.into_boxed_str());
        known.push(k);
        Ok(k)
    }
}

/// See `impl Wire for &'static str`.
pub const STATIC_TEXTS: usize = 1024;
pub const STATIC_TEXT_BYTES: usize = 256;

impl<T: Wire> Wire for Box<T> {
    fn put(&self, out: &mut Vec<u8>) {
        (**self).put(out);
    }
    fn take(bytes: &mut Bytes<'_>) -> Result<Self, WireError> {
        T::take(bytes).map(Box::new)
    }
}

impl<T: Wire> Wire for Arc<T> {
    fn put(&self, out: &mut Vec<u8>) {
        (**self).put(out);
    }
    fn take(bytes: &mut Bytes<'_>) -> Result<Self, WireError> {
        T::take(bytes).map(Arc::new)
    }
}

impl<T: Wire> Wire for Option<T> {
    fn put(&self, out: &mut Vec<u8>) {
        match self {
            None => out.push(0),
            Some(v) => {
                out.push(1);
                v.put(out);
            }
        }
    }
    fn take(bytes: &mut Bytes<'_>) -> Result<Self, WireError> {
        match bool::take(bytes)? {
            false => Ok(None),
            true => T::take(bytes).map(Some),
        }
    }
}

impl<T: Wire> Wire for Vec<T> {
    fn put(&self, out: &mut Vec<u8>) {
        (self.len() as u64).put(out);
        self.iter().for_each(|v| v.put(out));
    }
    fn take(bytes: &mut Bytes<'_>) -> Result<Self, WireError> {
        // Items of no bytes (units) are not worth a list; every other item takes one.
        let n = bytes.count()?;
        (0..n).map(|_| T::take(bytes)).collect()
    }
}

impl<T: Wire, const N: usize> Wire for [T; N] {
    fn put(&self, out: &mut Vec<u8>) {
        self.iter().for_each(|v| v.put(out));
    }
    fn take(bytes: &mut Bytes<'_>) -> Result<Self, WireError> {
        let v: Vec<T> = (0..N).map(|_| T::take(bytes)).collect::<Result<_, _>>()?;
        v.try_into().map_err(|_| WireError("an array of the wrong length".into()))
    }
}

impl<K: Wire + Eq + Hash, V: Wire, S: BuildHasher + Default> Wire for HashMap<K, V, S> {
    fn put(&self, out: &mut Vec<u8>) {
        // In the map's own order: read back, the same entries (its order is not an
        // answer's: every map a part holds is looked into, never listed).
        put_entries(self.len(), self.iter(), out);
    }
    fn take(bytes: &mut Bytes<'_>) -> Result<Self, WireError> {
        let n = bytes.count()?;
        let mut map = HashMap::with_capacity_and_hasher(0, S::default());
        for _ in 0..n {
            let k = K::take(bytes)?;
            map.insert(k, V::take(bytes)?);
        }
        Ok(map)
    }
}

impl<T: Wire + Ord> Wire for BTreeSet<T> {
    fn put(&self, out: &mut Vec<u8>) {
        (self.len() as u64).put(out);
        self.iter().for_each(|v| v.put(out));
    }
    fn take(bytes: &mut Bytes<'_>) -> Result<Self, WireError> {
        let n = bytes.count()?;
        (0..n).map(|_| T::take(bytes)).collect()
    }
}

/// A map's `n` entries, after their count.
fn put_entries<'a, K: Wire + 'a, V: Wire + 'a>(
    n: usize,
    entries: impl Iterator<Item = (&'a K, &'a V)>,
    out: &mut Vec<u8>,
) {
    (n as u64).put(out);
    for (k, v) in entries {
        k.put(out);
        v.put(out);
    }
}

impl<K: Wire + Ord, V: Wire> Wire for BTreeMap<K, V> {
    fn put(&self, out: &mut Vec<u8>) {
        put_entries(self.len(), self.iter(), out);
    }
    fn take(bytes: &mut Bytes<'_>) -> Result<Self, WireError> {
        let n = bytes.count()?;
        (0..n).map(|_| <(K, V)>::take(bytes)).collect()
    }
}

macro_rules! tuples {
    ($(($($t:ident $i:tt),+)),*) => {$(
        impl<$($t: Wire),+> Wire for ($($t,)+) {
            fn put(&self, out: &mut Vec<u8>) {
                $(self.$i.put(out);)+
            }
            fn take(bytes: &mut Bytes<'_>) -> Result<Self, WireError> {
                Ok(($($t::take(bytes)?,)+))
            }
        }
    )*};
}
tuples!((A 0, B 1), (A 0, B 1, C 2), (A 0, B 1, C 2, D 3), (A 0, B 1, C 2, D 3, E 4));

/// [`Wire`] for a struct, its fields named in any order (each must be [`Wire`]); read
/// back, the struct is built with every field named, so a field added to it and not
/// here does not compile. `wire_struct!(Name<T> { a, b })` for a generic one.
#[macro_export]
macro_rules! wire_struct {
    (@fields $ty:ident { $($f:ident),* }) => {
        fn put(&self, _out: &mut Vec<u8>) {
            $($crate::wire::Wire::put(&self.$f, _out);)*
        }
        fn take(_bytes: &mut $crate::wire::Bytes<'_>) -> Result<Self, $crate::wire::WireError> {
            Ok($ty { $($f: $crate::wire::Wire::take(_bytes)?,)* })
        }
    };
    ($ty:ident <'static> { $($f:ident),* $(,)? }) => {
        impl $crate::wire::Wire for $ty<'static> {
            $crate::wire_struct!(@fields $ty { $($f),* });
        }
    };
    ($ty:ident $(<$($g:ident),+>)? { $($f:ident),* $(,)? }) => {
        impl $(<$($g: $crate::wire::Wire),+>)? $crate::wire::Wire for $ty $(<$($g),+>)? {
            $crate::wire_struct!(@fields $ty { $($f),* });
        }
    };
}

/// [`Wire`] for an enum of unit variants, each by its place in the list; the list must
/// name every variant (a variant added and not listed does not compile).
#[macro_export]
macro_rules! wire_enum {
    ($ty:ident { $($v:ident),+ $(,)? }) => {
        impl $crate::wire::Wire for $ty {
            fn put(&self, out: &mut Vec<u8>) {
                // Every variant listed, or this match is not exhaustive.
                match self {
                    $($ty::$v)|+ => {}
                }
                let all = [$($ty::$v),+];
                out.push(all.iter().position(|v| v == self).unwrap_or(0) as u8);
            }
            fn take(bytes: &mut $crate::wire::Bytes<'_>) -> Result<Self, $crate::wire::WireError> {
                let all = [$($ty::$v),+];
                let at = bytes.take_bytes(1)?[0] as usize;
                all.get(at).copied().ok_or_else(|| {
                    $crate::wire::WireError(format!("{at} is no {}", stringify!($ty)))
                })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_value_comes_back_and_damage_inside_it_is_found_where_it_is_read() {
        let v: Vec<(i64, String)> = vec![(-5, "copy".into()), (1 << 40, "jit_train_step".into())];
        let bytes = to_bytes(&Packed::new(&v));
        let back: Packed<Vec<(i64, String)>> = from_bytes(&bytes).unwrap();
        assert_eq!(back.get(), Some(v));
        // A list said to hold more items than its bytes can: refused when the part is
        // read, not when the value is asked for.
        let mut damaged = bytes.clone();
        damaged[1] = 0x7f;
        assert!(from_bytes::<Packed<Vec<(i64, String)>>>(&damaged).is_err());
        assert!(from_bytes::<Packed<Vec<(i64, String)>>>(&bytes[..bytes.len() - 1]).is_err());
    }

    /// Values packed while a [`Spilling`] is alive are in its file, not in memory; they
    /// read back (and go on the wire) as values held in memory do, after the spilling
    /// stopped too, each from its own place in the file.
    #[test]
    fn a_spilled_value_comes_back_from_its_file_as_it_was() {
        let values: Vec<Vec<(i64, String)>> =
            (0..50).map(|k| (0..k).map(|i| (i * 1_000_003 - 7, format!("op.{i}"))).collect()).collect();
        let held: Vec<Vec<u8>> = values.iter().map(|v| to_bytes(&Packed::new(v))).collect();
        let spilling = Spilling::start().expect("a file in the temporary folder");
        let packed: Vec<Packed<Vec<(i64, String)>>> = values.iter().map(Packed::new).collect();
        drop(spilling);
        let after = Packed::new(&values[3]);
        assert!(matches!(after.bytes, Store::Held(_)));
        let spilled = packed.iter().filter(|p| matches!(p.bytes, Store::Spilled(..))).count();
        assert_eq!(spilled, values.len());
        for ((p, v), h) in packed.iter().zip(&values).zip(&held) {
            assert_eq!(p.get().as_ref(), Some(v));
            assert_eq!(&to_bytes(p), h);
            assert_eq!(p.clone().get().as_ref(), Some(v));
        }
    }

    #[test]
    fn numbers_texts_and_lists_come_back_as_they_were() {
        let v: (Vec<(i64, u64)>, Option<String>, [f64; 3]) = (
            vec![(i64::MIN, u64::MAX), (-1, 0), (i64::MAX, 127), (0, 128)],
            Some("ynn_fusion.3 — ü".to_string()),
            [f64::NAN, -0.0, 0.1 + 0.2],
        );
        let back: (Vec<(i64, u64)>, Option<String>, [f64; 3]) = from_bytes(&to_bytes(&v)).unwrap();
        assert_eq!(back.0, v.0);
        assert_eq!(back.1, v.1);
        let bits = |a: &[f64; 3]| a.map(f64::to_bits);
        assert_eq!(bits(&back.2), bits(&v.2));
    }

    #[test]
    fn a_damaged_part_is_an_error_not_a_large_allocation() {
        let bytes = to_bytes(&vec![String::from("a"); 3]);
        // A list's count far past its bytes.
        let mut huge = Vec::new();
        (u64::MAX >> 1).put(&mut huge);
        assert!(from_bytes::<Vec<u64>>(&huge).unwrap_err().0.contains("items in 0 bytes"));
        for cut in 0..bytes.len() {
            assert!(from_bytes::<Vec<String>>(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        assert!(from_bytes::<u8>(&to_bytes(&300u64)).is_err());
        assert!(from_bytes::<bool>(&[2]).is_err());
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(from_bytes::<Vec<String>>(&extra).unwrap_err().0.contains("left over"));
    }
}
