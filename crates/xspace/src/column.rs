//! [`Column`]: a column of `i64` (event starts and lengths in ps) in a few bytes a
//! value, with random access.
//!
//! Values are kept in blocks of [`BLOCK`]. A block stores its smallest value once and
//! each value as its distance above it, in as few whole bytes as the block's spread
//! needs: 4 for starts a few ms apart, 5 for seconds apart, 2 or 3 for short lengths.
//! The last, partial block is kept as plain values until it fills.

use std::fmt;

use crate::mem::prefault_spare;

/// Values per block.
pub const BLOCK: usize = 64;
const SHIFT: u32 = BLOCK.trailing_zeros();
/// Zero bytes after the last packed value, so any value reads as one 8-byte load.
const PAD: usize = 8;
/// The low `w` bytes of a word.
const MASK: [u64; 9] =
    [0, 0xFF, 0xFFFF, 0xFF_FFFF, 0xFFFF_FFFF, 0xFF_FFFF_FFFF, 0xFFFF_FFFF_FFFF, 0xFF_FFFF_FFFF_FFFF, u64::MAX];

#[derive(Clone, Copy, Debug, Default)]
struct Block {
    /// The block's smallest value.
    base: i64,
    /// Byte position of the block's first distance in [`Column::packed`], shifted left
    /// by 4, ORed with the bytes per distance (0–8).
    at: u64,
}

impl Block {
    #[inline]
    fn width(&self) -> usize {
        (self.at & 15) as usize
    }

    #[inline]
    fn pos(&self) -> usize {
        (self.at >> 4) as usize
    }
}

/// The values after the last full block: up to two held inline (a column of a line of
/// one or two events takes no allocation of its own).
type Tail = smallvec::SmallVec<[i64; 2]>;

/// A compact `i64` column (see the [module docs](self)).
///
/// 32 bytes: a line of a few events (a million such lines in an 11 MB file) holds
/// three of them and no block, so the blocks live behind one pointer, made when the
/// first block is, and the last two values are held inline.
#[derive(Clone, Default)]
pub struct Column {
    /// Values after the last full block.
    tail: Tail,
    /// The full blocks; `None` until there is one (or one is expected).
    full: Option<Box<Full>>,
}

/// A column's full blocks.
#[derive(Clone, Default)]
struct Full {
    blocks: Vec<Block>,
    /// Each full block's distances, little-endian, then [`PAD`] zero bytes; empty (no
    /// padding either) until the first block.
    packed: Vec<u8>,
    /// How many values [`Column::reserve_exact`] was told to expect in all.
    expect: usize,
}

impl Column {
    /// An empty column with room for `n` values at 4 bytes each.
    #[inline]
    pub fn with_capacity(n: usize) -> Column {
        let mut c = Column::default();
        c.reserve_exact(n);
        c
    }

    /// Makes room for `n` more values at 4 bytes each. Should they need more, the
    /// column grows by what the values still expected need at the width seen so far,
    /// rather than doubling.
    pub fn reserve_exact(&mut self, n: usize) {
        let expect = self.len().saturating_add(n);
        // Blocks only once there will be one: a line of a few events keeps just its
        // tail.
        let blocks = (self.tail.len() + n) / BLOCK;
        if blocks > 0 {
            let full = self.full_mut();
            full.packed.reserve_exact(n.saturating_mul(4) + PAD);
            full.blocks.reserve_exact(blocks);
        }
        if let Some(full) = self.full.as_deref_mut() {
            full.expect = expect;
        }
        let tail = (self.tail.len() + n).min(BLOCK);
        if self.tail.capacity() < tail {
            self.tail.reserve_exact(tail - self.tail.len());
        }
    }

    /// The full blocks.
    #[inline(always)]
    fn blocks(&self) -> &[Block] {
        match self.full.as_deref() {
            Some(f) => &f.blocks,
            None => &[],
        }
    }

    /// The full blocks' distances and padding.
    #[inline(always)]
    fn packed(&self) -> &[u8] {
        match self.full.as_deref() {
            Some(f) => &f.packed,
            None => &[],
        }
    }

    /// The full blocks, made when there are none yet.
    fn full_mut(&mut self) -> &mut Full {
        self.full.get_or_insert_with(Box::default)
    }

    /// Bytes of block distances in [`Column::packed`] (without its padding).
    fn packed_len(&self) -> usize {
        self.packed().len().saturating_sub(PAD)
    }

    /// Number of values.
    #[inline]
    pub fn len(&self) -> usize {
        self.blocks().len() * BLOCK + self.tail.len()
    }

    /// True when the column holds no values.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Value `i`. Panics when `i` is out of range, as slice indexing does.
    #[inline]
    pub fn get(&self, i: usize) -> i64 {
        let (blocks, packed) = (self.blocks(), self.packed());
        match blocks.get(i >> SHIFT) {
            Some(b) => {
                let w = b.width();
                let at = b.pos() + (i & (BLOCK - 1)) * w;
                debug_assert!(at + 8 <= packed.len() && w <= 8);
                // SAFETY: a block's distances start at `pos` and take `w` ≤ 8 bytes each,
                // and `packed` always ends PAD = 8 bytes after the last block's last
                // distance (`seal` writes them; nothing shortens `packed`), so the 8
                // bytes at `at` are in bounds.
                let word = unsafe { packed.as_ptr().add(at).cast::<u64>().read_unaligned() };
                // base + distance is a value of the block: wrapping gives it exactly.
                b.base.wrapping_add((u64::from_le(word) & MASK[w & 15]) as i64)
            }
            None => self.tail[i - blocks.len() * BLOCK],
        }
    }

    /// Values `i` and `i + 1` (one block lookup when both are in the same block).
    /// Panics when `i + 1` is out of range.
    #[inline]
    pub fn get_pair(&self, i: usize) -> (i64, i64) {
        let (blocks, packed) = (self.blocks(), self.packed());
        match blocks.get(i >> SHIFT) {
            Some(b) if i & (BLOCK - 1) != BLOCK - 1 => {
                let w = b.width();
                let at = b.pos() + (i & (BLOCK - 1)) * w;
                debug_assert!(at + w + 8 <= packed.len() && w <= 8);
                // SAFETY: values i and i + 1 are both in block `b` (i is not its last),
                // so both distances lie within it, and `packed` ends PAD = 8 bytes after
                // the last block's last distance (see `get`): the 8 bytes at `at` and at
                // `at + w` are in bounds.
                let (lo, hi) = unsafe {
                    let p = packed.as_ptr().add(at);
                    (p.cast::<u64>().read_unaligned(), p.add(w).cast::<u64>().read_unaligned())
                };
                let mask = MASK[w & 15];
                (
                    b.base.wrapping_add((u64::from_le(lo) & mask) as i64),
                    b.base.wrapping_add((u64::from_le(hi) & mask) as i64),
                )
            }
            _ => (self.get(i), self.get(i + 1)),
        }
    }

    /// Appends a value.
    #[inline]
    pub fn push(&mut self, v: i64) {
        self.tail.push(v);
        if self.tail.len() == BLOCK {
            self.seal();
        }
    }

    /// Moves the full tail into a block.
    fn seal(&mut self) {
        // `push` seals a full tail only; as an array, its min and max vectorise.
        let Column { tail, full } = self;
        let Some(tail) = tail.first_chunk::<BLOCK>() else { return };
        let full = full.get_or_insert_with(Box::default);
        let (min, max) = (tail.iter().copied().min().unwrap_or(0), tail.iter().copied().max().unwrap_or(0));
        let spread = max.abs_diff(min);
        let w = (u64::BITS - spread.leading_zeros()).div_ceil(8) as usize;
        let pos = full.packed.len().saturating_sub(PAD);
        let need = BLOCK * w;
        if full.packed.capacity() < pos + need + PAD {
            // Room for the values still expected at the mean width so far (at least an
            // eighth more than now, so that growing stays linear overall).
            let done = full.blocks.len() * BLOCK;
            let left = full.expect.saturating_sub(done + BLOCK);
            let per_value = (pos + need).div_ceil(done + BLOCK);
            let more = (left * per_value).max(full.packed.len() / 8);
            full.packed.reserve_exact((pos + need + PAD + more).saturating_sub(full.packed.len()));
            prefault_spare(&mut full.packed);
        }
        // Whole words, into the spare room: the bytes past a distance's width are
        // zero, and the next distance or the padding is written over them. Every byte
        // up to the padding is written (k * w + 8 >= (k + 1) * w, as w <= 8), then the
        // padding.
        debug_assert!(full.packed.capacity() >= pos + need + PAD && w <= 8);
        // SAFETY: the room was reserved above; `pos` is the start of the old padding
        // (or 0, for the first block). The writes end at (BLOCK - 1) * w + 8 <= need + PAD bytes
        // past `pos`, and at need + PAD for the padding; all of pos..pos + need + PAD
        // is written before the length covers it.
        unsafe {
            let out = full.packed.as_mut_ptr().add(pos);
            for (k, &v) in tail.iter().enumerate() {
                out.add(k * w).cast::<u64>().write_unaligned(v.abs_diff(min).to_le());
            }
            out.add(need).cast::<u64>().write_unaligned(0);
            full.packed.set_len(pos + need + PAD);
        }
        full.blocks.push(Block { base: min, at: (pos as u64) << 4 | w as u64 });
        self.tail.clear();
    }

    /// Removes and returns the last value.
    pub fn pop(&mut self) -> Option<i64> {
        if self.tail.is_empty() {
            // Unpack the last block into the tail; its bytes become the padding.
            let mut values = [0; BLOCK];
            self.block(self.blocks().len().checked_sub(1)?, &mut values);
            let full = self.full.as_deref_mut()?;
            let b = full.blocks.pop()?;
            full.packed.truncate(b.pos());
            full.packed.resize(b.pos() + PAD, 0);
            self.tail.extend_from_slice(&values);
        }
        self.tail.pop()
    }

    /// Appends `other`'s values. Cheap (its blocks are moved as they are) when this
    /// column's length is a multiple of [`BLOCK`]; value by value otherwise.
    pub fn append(&mut self, other: Column) {
        if !self.tail.is_empty() {
            for v in other.iter() {
                self.push(v);
            }
            return;
        }
        if !other.blocks().is_empty() {
            let at = self.packed_len();
            let full = self.full_mut();
            full.packed.truncate(at);
            // `other`'s packed distances end in their own padding.
            full.packed.extend_from_slice(other.packed());
            let moved = (at as u64) << 4;
            full.blocks.extend(other.blocks().iter().map(|b| Block { base: b.base, at: b.at + moved }));
        }
        self.tail = other.tail;
        let len = self.len();
        if let Some(full) = self.full.as_deref_mut() {
            full.expect = full.expect.max(len);
        }
    }

    /// Frees spare capacity.
    #[inline]
    pub fn shrink_to_fit(&mut self) {
        if let Some(full) = self.full.as_deref_mut() {
            if full.blocks.is_empty() {
                self.full = None;
            } else {
                full.blocks.shrink_to_fit();
                full.packed.shrink_to_fit();
            }
        }
        self.tail.shrink_to_fit();
    }

    /// Adds `d` to every value, saturating at the `i64` bounds.
    pub fn add_saturating(&mut self, d: i64) {
        if d == 0 {
            return;
        }
        let (blocks, packed) = match self.full.as_deref_mut() {
            Some(Full { blocks, packed, .. }) => (&mut blocks[..], &mut packed[..]),
            None => (&mut [][..], &mut [][..]),
        };
        for b in blocks {
            let w = b.width();
            // Every value of the block lies in base..=base + MASK[w].
            let top = (b.base as i128) + i128::from(MASK[w]);
            let fits = |x: i128| (i128::from(i64::MIN)..=i128::from(i64::MAX)).contains(&(x + i128::from(d)));
            if fits(i128::from(b.base)) && fits(top) {
                b.base += d;
                continue;
            }
            // Saturation near the bounds: re-encode in place. Adding is monotone and
            // saturating only narrows the spread, so the width still holds.
            let base = b.base.saturating_add(d);
            for k in 0..BLOCK {
                let at = b.pos() + k * w;
                let mut word = [0u8; 8];
                word[..w].copy_from_slice(&packed[at..at + w]);
                let v = b.base.wrapping_add(u64::from_le_bytes(word) as i64).saturating_add(d);
                packed[at..at + w].copy_from_slice(&v.abs_diff(base).to_le_bytes()[..w]);
            }
            b.base = base;
        }
        for v in &mut self.tail {
            *v = v.saturating_add(d);
        }
    }

    /// The values, in order.
    #[inline]
    pub fn iter(&self) -> Iter<'_> {
        Iter { col: self, i: 0, end: self.len() }
    }

    /// The values `range`, in order.
    #[inline]
    pub fn iter_range(&self, range: std::ops::Range<usize>) -> Iter<'_> {
        let end = range.end.min(self.len());
        Iter { col: self, i: range.start.min(end), end }
    }

    /// The index of the first value for which `pred` is false, assuming the values
    /// are partitioned (as [`slice::partition_point`]).
    #[inline]
    pub fn partition_point(&self, mut pred: impl FnMut(i64) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.get(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The first index in `from..to` whose value is at least `t` (`to` when there is
    /// none), for a column whose values ascend from `from` on (as a sorted column's
    /// do): a block's smallest value is then its first.
    ///
    /// For a walk forward along a sorted column, as a timeline tile's pixel columns
    /// make: whole blocks are skipped on their bases (a block's first value, as the
    /// values ascend), a few read in order and then galloping, and one block is then
    /// searched. A step costs a few reads close to the last step's, not a binary
    /// search's reads spread over the whole range.
    pub fn first_at_least(&self, from: usize, to: usize, t: i64) -> usize {
        /// Block bases read one by one before galloping.
        const SCAN_BLOCKS: usize = 8;
        let to = to.min(self.len());
        if from >= to {
            return to;
        }
        let (mut lo, mut hi) = (from, to);
        let first = from >> SHIFT;
        // The full blocks after `from`'s that start inside the range: `first + 1..end`.
        let end = (((to - 1) >> SHIFT) + 1).min(self.blocks().len());
        if first + 1 < end {
            let bases = &self.blocks()[first + 1..end];
            let near = bases.len().min(SCAN_BLOCKS);
            let c = match bases[..near].iter().position(|b| b.base >= t) {
                Some(c) => c,
                None => {
                    let (mut base, mut step) = (near, 1usize);
                    loop {
                        let probe = base.saturating_add(step);
                        if probe >= bases.len() {
                            break base + bases[base..].partition_point(|b| b.base < t);
                        }
                        if bases[probe].base < t {
                            base = probe + 1;
                            step = step.saturating_mul(2);
                        } else {
                            break base + bases[base..probe].partition_point(|b| b.base < t);
                        }
                    }
                }
            };
            // Blocks before `first + 1 + c` start below t: the answer is at or after
            // the start of the last of them, and no later than the next block's start.
            lo = lo.max((first + c) << SHIFT);
            if first + 1 + c < end {
                hi = hi.min((first + 1 + c) << SHIFT);
            }
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.get(mid) < t {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The smallest value (from the blocks' bases: cheap).
    #[inline]
    pub fn min(&self) -> Option<i64> {
        self.blocks().iter().map(|b| b.base).chain(self.tail.iter().copied()).min()
    }

    /// Number of blocks [`Column::block`] reads: the full ones, then the tail.
    #[inline]
    pub fn block_count(&self) -> usize {
        self.blocks().len() + 1
    }

    /// Block `b`'s values (the tail for `b == self.block_count() - 1`), unpacked into
    /// `out`; the fast way to read a whole column.
    pub fn block<'o>(&self, b: usize, out: &'o mut [i64; BLOCK]) -> &'o [i64] {
        let Some(block) = self.blocks().get(b) else {
            let n = self.tail.len();
            out[..n].copy_from_slice(&self.tail);
            return &out[..n];
        };
        let (w, pos) = (block.width(), block.pos());
        let packed = &self.packed()[pos..pos + BLOCK * w + PAD];
        for (k, v) in out.iter_mut().enumerate() {
            let mut word = [0u8; 8];
            word.copy_from_slice(&packed[k * w..k * w + 8]);
            *v = block.base.wrapping_add((u64::from_le_bytes(word) & MASK[w & 15]) as i64);
        }
        out
    }

    /// True when no value is less than the one before it (a block at a time).
    #[inline]
    pub fn is_sorted(&self) -> bool {
        let mut out = [0; BLOCK];
        let mut last = i64::MIN;
        for b in 0..self.block_count() {
            let values = self.block(b, &mut out);
            if values.first().is_some_and(|&v| v < last) || !values.is_sorted() {
                return false;
            }
            last = values.last().copied().unwrap_or(last);
        }
        true
    }

    /// The values as a vector.
    #[inline]
    pub fn to_vec(&self) -> Vec<i64> {
        self.iter().collect()
    }

    /// Bytes held, capacity included.
    #[inline]
    pub fn heap_bytes(&self) -> usize {
        let full = self.full.as_deref().map_or(0, |f| {
            std::mem::size_of::<Full>() + f.blocks.capacity() * std::mem::size_of::<Block>() + f.packed.capacity()
        });
        full + if self.tail.spilled() { self.tail.capacity() * 8 } else { 0 }
    }
}

impl FromIterator<i64> for Column {
    fn from_iter<I: IntoIterator<Item = i64>>(iter: I) -> Column {
        let iter = iter.into_iter();
        let mut c = Column::with_capacity(iter.size_hint().0);
        for v in iter {
            c.push(v);
        }
        c
    }
}

impl From<Vec<i64>> for Column {
    fn from(v: Vec<i64>) -> Column {
        v.into_iter().collect()
    }
}

impl PartialEq for Column {
    fn eq(&self, other: &Column) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl<const N: usize> PartialEq<[i64; N]> for Column {
    fn eq(&self, other: &[i64; N]) -> bool {
        self.len() == N && self.iter().eq(other.iter().copied())
    }
}

impl fmt::Debug for Column {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Iterator over a [`Column`]'s values.
#[derive(Clone)]
pub struct Iter<'a> {
    col: &'a Column,
    i: usize,
    end: usize,
}

impl Iterator for Iter<'_> {
    type Item = i64;

    #[inline]
    fn next(&mut self) -> Option<i64> {
        (self.i < self.end).then(|| {
            self.i += 1;
            self.col.get(self.i - 1)
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.end - self.i;
        (n, Some(n))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<i64> {
        (self.i < self.end).then(|| {
            self.end -= 1;
            self.col.get(self.end)
        })
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values that exercise narrow and wide blocks, the bounds and a partial tail.
    fn awkward() -> Vec<i64> {
        let mut v: Vec<i64> = (0..BLOCK as i64).map(|i| 1_000_000 + i * 7).collect(); // narrow
        v.extend((0..BLOCK as i64).map(|i| if i == 5 { i64::MAX } else { -i })); // wide
        v.extend((0..BLOCK as i64).map(|i| i64::MAX - i)); // narrow at the top
        v.extend((0..BLOCK as i64).map(|i| i64::MIN + i * 3)); // narrow at the bottom
        v.extend((0..BLOCK as i64).map(|i| (i % 2) * i64::from(u32::MAX))); // spread exactly 2^32 - 1
        v.extend((0..BLOCK as i64).map(|i| (i % 2) * (1 << 32))); // spread 2^32: wide
        v.extend([5, -5, 1 << 40]); // tail
        v
    }

    #[test]
    fn values_read_back_as_pushed() {
        let v = awkward();
        let c: Column = v.iter().copied().collect();
        assert_eq!(c.len(), v.len());
        assert_eq!((0..v.len()).map(|i| c.get(i)).collect::<Vec<_>>(), v);
        assert_eq!(c.to_vec(), v);
        assert_eq!(c.iter().rev().collect::<Vec<_>>(), v.iter().rev().copied().collect::<Vec<_>>());
        assert_eq!(c.iter_range(3..70).collect::<Vec<_>>(), v[3..70]);
        // Pairs within a block, across blocks and into the tail.
        let pairs: Vec<(i64, i64)> = (0..v.len() - 1).map(|i| c.get_pair(i)).collect();
        assert_eq!(pairs, v.windows(2).map(|w| (w[0], w[1])).collect::<Vec<_>>());
        // Widths: 2, 8, 1, 1, 4, 5 bytes a value, and zero for a constant block.
        let widths: Vec<usize> = c.blocks().iter().map(Block::width).collect();
        assert_eq!(widths, [2, 8, 1, 1, 4, 5]);
        let same: Column = std::iter::repeat_n(-7, BLOCK + 1).collect();
        assert_eq!((same.blocks()[0].width(), same.get(BLOCK - 1), same.get(BLOCK)), (0, -7, -7));
    }

    #[test]
    fn first_at_least_finds_what_a_binary_search_finds() {
        // Ascending, with runs of equal values, gaps, dense stretches and a tail.
        let mut v = Vec::new();
        let mut x = -500i64;
        for i in 0..40 * BLOCK as i64 + 17 {
            x += match i % 97 {
                0 => 1 << 33,
                k if k < 40 => 0,
                k => k * 3,
            };
            v.push(x);
        }
        let c: Column = v.iter().copied().collect();
        let cuts: Vec<i64> =
            v.iter().step_by(13).flat_map(|&s| [s - 1, s, s + 1]).chain([i64::MIN, i64::MAX]).collect();
        for from in (0..v.len() + 2).step_by(29).chain([0, 1, BLOCK - 1, BLOCK, v.len() - 1, v.len()]) {
            for to in [from, from + 1, from + 5, from + BLOCK, from + 9 * BLOCK + 3, v.len(), v.len() + 4] {
                for &t in &cuts {
                    let end = to.min(v.len());
                    let want = if from >= end { end } else { from + v[from..end].partition_point(|&e| e < t) };
                    assert_eq!(c.first_at_least(from, to, t), want, "from {from} to {to} t {t}");
                }
            }
        }
    }

    #[test]
    fn appending_and_popping_keep_the_values() {
        let v = awkward();
        for cut in [0, 1, BLOCK - 1, BLOCK, 3 * BLOCK, 3 * BLOCK + 2, v.len()] {
            let mut a: Column = v[..cut].iter().copied().collect();
            a.append(v[cut..].iter().copied().collect());
            assert_eq!(a.to_vec(), v, "cut at {cut}");
            // Still appendable after the move, and pops back to empty in order.
            a.push(9);
            assert_eq!(a.len(), v.len() + 1);
            let mut back = Vec::new();
            while let Some(x) = a.pop() {
                back.push(x);
                assert_eq!(a.len(), v.len() + 1 - back.len());
                if let Some(i) = a.len().checked_sub(1) {
                    let want = if i < v.len() { v[i] } else { 9 };
                    assert_eq!(a.get(i), want, "after a pop, cut at {cut}");
                }
            }
            back.reverse();
            assert_eq!(back[..v.len()], v[..]);
        }
    }

    #[test]
    fn blocks_unpack_to_the_values() {
        let v = awkward();
        let c: Column = v.iter().copied().collect();
        let mut out = [0; BLOCK];
        let all: Vec<i64> = (0..c.block_count()).flat_map(|b| c.block(b, &mut out).to_vec()).collect();
        assert_eq!(all, v);
        assert_eq!(c.min(), v.iter().copied().min());
        assert_eq!(Column::default().min(), None);
        assert!(Column::default().block(0, &mut out).is_empty());
    }

    #[test]
    fn adding_saturates_like_i64() {
        for d in [0, 1, -1, 1 << 33, -(1 << 33), i64::MAX, i64::MIN, 12_345] {
            let v = awkward();
            let mut c: Column = v.iter().copied().collect();
            c.add_saturating(d);
            let want: Vec<i64> = v.iter().map(|x| x.saturating_add(d)).collect();
            assert_eq!(c.to_vec(), want, "d = {d}");
        }
    }

    #[test]
    fn partition_point_matches_slices() {
        let v: Vec<i64> = (0..1000).map(|i| i * i - 5000).collect();
        let c: Column = v.iter().copied().collect();
        for x in [-6000, -5000, 0, 17, 998_000, 2_000_000] {
            assert_eq!(c.partition_point(|t| t < x), v.partition_point(|&t| t < x), "{x}");
        }
    }

    #[test]
    fn is_sorted_matches_slices() {
        let mut v: Vec<i64> = (0..3 * BLOCK as i64 + 5).map(|i| i * 3 - 100).collect();
        let sorted = |v: &[i64]| v.iter().copied().collect::<Column>().is_sorted();
        assert!(sorted(&v) && sorted(&[]) && sorted(&[1]));
        // Out of order inside a block, across a block's edge, and in the tail.
        for at in [7, BLOCK, v.len() - 1] {
            let mut w = v.clone();
            w[at] = w[at - 1] - 1;
            assert!(!sorted(&w), "{at}");
        }
        v.reverse();
        assert_eq!(sorted(&v), v.is_sorted());
        assert!(!sorted(&awkward()));
    }

    #[test]
    fn a_short_column_is_its_tail() {
        // A line holds six columns: a million lines of a few events in an 11 MB file
        // took 80 bytes a column more, and allocated for blocks they never had.
        assert_eq!(std::mem::size_of::<Column>(), 32);
        let mut c: Column = (0..BLOCK as i64 - 1).collect();
        assert!(c.full.is_none() && c.heap_bytes() == (BLOCK - 1) * 8);
        c.push(7);
        assert!(c.full.is_some() && c.get(BLOCK - 1) == 7 && c.len() == BLOCK);
        // Popping the last block back into the tail leaves no blocks to keep.
        assert_eq!(c.pop(), Some(7));
        c.shrink_to_fit();
        assert!(c.full.is_none() && c.len() == BLOCK - 1 && c.get(BLOCK - 2) == BLOCK as i64 - 2);
        let mut r = Column::default();
        r.reserve_exact(3);
        assert!(r.full.is_none(), "three values expected: no blocks");
        r.reserve_exact(1000);
        assert!(r.full.as_ref().is_some_and(|f| f.expect == 1000));
    }

    #[test]
    fn dense_columns_take_a_few_bytes_a_value() {
        // 1 µs apart: 63 µs per block, 4 bytes a value.
        let mut c: Column = (0..100_000i64).map(|i| 5_000_000_000 + i * 1_000_000).collect();
        c.shrink_to_fit();
        assert!(c.heap_bytes() < 100_000 * 9 / 2, "{}", c.heap_bytes());
    }
}
