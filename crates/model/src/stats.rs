//! Small statistics helpers shared by analyses.

use rayon::prelude::*;
use serde::Serialize;
use std::collections::VecDeque;

/// Distribution of a set of durations, ps.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Distribution {
    pub count: u64,
    pub mean_ps: i64,
    pub median_ps: i64,
    pub p90_ps: i64,
    pub min_ps: i64,
    pub max_ps: i64,
    pub std_ps: i64,
    /// The median absolute deviation from the median: the spread one outlier (a slow
    /// step, a pause) does not inflate.
    pub mad_ps: i64,
}

impl Distribution {
    /// Summarises `values` (any order).
    pub fn of(values: &[i64]) -> Distribution {
        if values.is_empty() {
            return Distribution::default();
        }
        let mut v = values.to_vec();
        v.sort_unstable();
        let n = v.len();
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
        let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        let median = percentile_sorted(&v, 50.0);
        let mut deviations: Vec<i64> = v.iter().map(|&x| x.saturating_sub(median).saturating_abs()).collect();
        deviations.sort_unstable();
        Distribution {
            count: n as u64,
            mean_ps: mean.round() as i64,
            median_ps: median,
            p90_ps: percentile_sorted(&v, 90.0),
            min_ps: v[0],
            max_ps: v[n - 1],
            std_ps: var.sqrt().round() as i64,
            mad_ps: percentile_sorted(&deviations, 50.0),
        }
    }
}

/// Percentile of sorted values by linear interpolation between closest ranks.
pub fn percentile_sorted(v: &[i64], pct: f64) -> i64 {
    match v.len() {
        0 => 0,
        1 => v[0],
        n => {
            let rank = pct.clamp(0.0, 100.0) / 100.0 * (n - 1) as f64;
            let lo = rank.floor() as usize;
            let hi = rank.ceil() as usize;
            let frac = rank - lo as f64;
            // The gap in i128: a damaged profile's values may span more than i64 holds.
            let gap = i128::from(v[hi]) - i128::from(v[lo]);
            (v[lo] as f64 + gap as f64 * frac).round() as i64
        }
    }
}

/// Sum of picosecond values, saturating: damaged profiles may hold durations near
/// `i64::MAX`, and a sum must not overflow (a panic in debug builds, garbage in release).
#[inline]
pub fn sum_ps(values: impl IntoIterator<Item = i64>) -> i64 {
    values.into_iter().fold(0, i64::saturating_add)
}

/// An exact length, saturated into `i64` picoseconds.
fn clamp_ps(v: i128) -> i64 {
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// Total length of the union of intervals `(start, end)`, clipped to `[lo, hi)`.
/// `intervals` must be sorted by start.
pub fn union_len(intervals: impl IntoIterator<Item = (i64, i64)>, lo: i64, hi: i64) -> i64 {
    let mut total = 0i64;
    let mut cur: Option<(i64, i64)> = None;
    for (a, b) in intervals {
        let (a, b) = (a.max(lo), b.min(hi));
        if b <= a {
            continue;
        }
        match cur {
            Some((ca, cb)) if a <= cb => cur = Some((ca, cb.max(b))),
            Some((ca, cb)) => {
                total = total.saturating_add(cb.saturating_sub(ca));
                cur = Some((a, b));
            }
            None => cur = Some((a, b)),
        }
    }
    if let Some((ca, cb)) = cur {
        total = total.saturating_add(cb.saturating_sub(ca));
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distribution() {
        let d = Distribution::of(&[4, 1, 3, 2]);
        assert_eq!((d.count, d.min_ps, d.max_ps, d.median_ps), (4, 1, 4, 3));
        assert_eq!(d.mean_ps, 3); // 2.5 rounds away from zero
        assert_eq!(percentile_sorted(&[10, 20, 30, 40, 50], 90.0), 46);
        assert_eq!(Distribution::of(&[]).count, 0);
        // Values spanning more than i64 holds (a damaged profile's durations): no
        // overflow, and the percentile lies between its ranks.
        let d = Distribution::of(&[i64::MIN, i64::MAX, 0]);
        assert_eq!((d.min_ps, d.median_ps, d.max_ps), (i64::MIN, 0, i64::MAX));
        let p90 = percentile_sorted(&[i64::MIN, i64::MAX], 90.0);
        assert!(p90 > i64::MAX / 2, "{p90}");
    }

    #[test]
    fn unions() {
        assert_eq!(union_len([(0, 10), (5, 15), (20, 30)], 0, 100), 25);
        assert_eq!(union_len([(0, 10), (5, 15), (20, 30)], 8, 25), 12);
        assert_eq!(union_len([(0, 10), (2, 3)], 0, 100), 10);
    }
}

/// Disjoint, sorted intervals with prefix sums: the overlap with any window in O(log n).
#[derive(Clone, Debug, Default)]
pub struct Intervals {
    spans: Vec<(i64, i64)>,
    /// `prefix[k]` = total length of `spans[..k * PREFIX_EVERY]` (u64: disjoint spans
    /// within the `i64` range add up to less than 2^64, even in damaged profiles).
    /// Kept every [`PREFIX_EVERY`] spans, not for each: the sum to any span is one
    /// entry plus at most that many lengths.
    prefix: Vec<u64>,
}

/// Spans between two kept prefix sums.
const PREFIX_EVERY: usize = 8;

impl Intervals {
    /// No time.
    pub const EMPTY: Intervals = Intervals { spans: Vec::new(), prefix: Vec::new() };

    /// Merges `(start, end)` pairs in any order; empty and inverted ones are dropped.
    /// Merges in place: no second list of the pairs' size.
    pub fn new(mut iv: Vec<(i64, i64)>) -> Intervals {
        iv.retain(|&(a, b)| b > a);
        if !iv.is_sorted() {
            // Spans mostly come as a few sorted runs (one per line or piece read): the
            // stable sort merges runs instead of sorting from scratch.
            iv.sort();
        }
        let mut kept = 0usize;
        for r in 0..iv.len() {
            let (a, b) = iv[r];
            match kept.checked_sub(1).map(|k| &mut iv[k]) {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => {
                    iv[kept] = (a, b);
                    kept += 1;
                }
            }
        }
        iv.truncate(kept);
        shrink(&mut iv);
        Intervals::from_disjoint(iv)
    }

    /// Merges spans that come as runs, each sorted by start (the ops of one line, in
    /// time order, read in pieces): no sort. Runs that follow each other in time (the
    /// pieces of one line) are read as one chain, and the chains' heads merged: the
    /// earliest chain is read on while it stays the earliest. Long lists are cut into
    /// spans of time merged in parallel, each into its own part of one list. Empty and
    /// inverted spans are dropped.
    pub fn from_sorted_runs(runs: &[&[(i64, i64)]]) -> Intervals {
        debug_assert!(runs.iter().all(|r| r.is_sorted_by_key(|s| s.0)));
        let mut chains: Vec<Chain> = Vec::new();
        for &run in runs.iter().filter(|r| !r.is_empty()) {
            match chains.last_mut() {
                Some(chain) if chain.runs.last().and_then(|r| r.last()).is_some_and(|l| l.0.max(l.1) <= run[0].0) => {
                    chain.runs.push(run)
                }
                _ => chains.push(Chain { runs: vec![run], run: 0, at: 0 }),
            }
        }
        let total: usize = runs.iter().map(|r| r.len()).sum();
        // Cut at the starts of the longest chain's quantiles: part p holds the spans
        // that start in [cuts[p], cuts[p + 1]).
        let parts = if total >= MERGE_PART { rayon::current_num_threads().clamp(1, 8) } else { 1 };
        let mut cuts = vec![i64::MIN];
        if let Some(longest) = chains.iter().max_by_key(|c| c.len()) {
            let len = longest.len();
            cuts.extend((1..parts).filter_map(|p| longest.nth(p * len / parts)).map(|s| s.0));
        }
        cuts.dedup();
        cuts.push(i64::MAX);
        let pieces: Vec<Vec<Chain>> =
            cuts.windows(2).map(|w| chains.iter().map(|c| c.between(w[0], w[1])).collect()).collect();
        // Each part is written where its input would start in one list: it holds no more
        // spans than its input.
        let mut out = vec![(0i64, 0i64); total];
        let mut regions: Vec<&mut [(i64, i64)]> = Vec::with_capacity(pieces.len());
        let mut rest = out.as_mut_slice();
        for piece in &pieces {
            let (region, after) = rest.split_at_mut(piece.iter().map(Chain::len).sum());
            regions.push(region);
            rest = after;
        }
        let counts: Vec<(usize, usize)> = (pieces.into_par_iter().zip(regions))
            .map(|(chains, region)| (region.len(), merge_chains(chains, region)))
            .collect();
        // The parts moved together, the spans that meet where they join merged.
        let (mut len, mut at) = (0usize, 0usize);
        for (size, count) in counts {
            let mut i = at;
            while i < at + count && len > 0 && out[i].0 <= out[len - 1].1 {
                out[len - 1].1 = out[len - 1].1.max(out[i].1);
                i += 1;
            }
            out.copy_within(i..at + count, len);
            len += at + count - i;
            at += size;
        }
        out.truncate(len);
        shrink(&mut out);
        Intervals::from_disjoint(out)
    }

    /// Merges runs as [`Intervals::from_sorted_runs`] does, given owned: on one thread,
    /// each run freed as soon as it has been read, so the union is never held beside
    /// its whole input (a device's ops' spans, read in pieces of a few MB: the union
    /// costs its own size and a piece a chain, not twice its size).
    pub fn from_owned_sorted_runs(runs: Vec<Vec<(i64, i64)>>) -> Intervals {
        debug_assert!(runs.iter().all(|r| r.is_sorted_by_key(|s| s.0)));
        let total: usize = runs.iter().map(Vec::len).sum();
        // Runs that follow each other in start order make one chain.
        let mut chains: Vec<VecDeque<Vec<(i64, i64)>>> = Vec::new();
        for run in runs.into_iter().filter(|r| !r.is_empty()) {
            match chains.last_mut() {
                Some(c) if c.back().and_then(|r| r.last()).is_some_and(|l| l.0 <= run[0].0) => c.push_back(run),
                _ => chains.push(VecDeque::from([run])),
            }
        }
        let mut out: Vec<(i64, i64)> = Vec::with_capacity(total);
        let mut at = vec![0usize; chains.len()];
        while let Some((k, second)) = earliest(chains.iter().zip(&at).map(|(c, &i)| c.front().map(|r| r[i].0))) {
            let (chain, i) = (&mut chains[k], &mut at[k]);
            while let Some(&(a, b)) = chain.front().map(|r| &r[*i]).filter(|s| s.0 <= second) {
                match out.last_mut() {
                    _ if b <= a => {}
                    Some(last) if a <= last.1 => last.1 = last.1.max(b),
                    _ => out.push((a, b)),
                }
                *i += 1;
                if chain.front().is_some_and(|r| *i == r.len()) {
                    chain.pop_front();
                    *i = 0;
                }
            }
        }
        shrink(&mut out);
        Intervals::from_disjoint(out)
    }

    /// Spans already sorted, disjoint and non-empty (the output of a set operation).
    fn from_disjoint(iv: Vec<(i64, i64)>) -> Intervals {
        debug_assert!(iv.windows(2).all(|w| w[0].1 <= w[1].0) && iv.iter().all(|s| s.0 < s.1));
        let mut prefix = Vec::with_capacity(iv.len() / PREFIX_EVERY + 1);
        let mut total = 0u64;
        for block in iv.chunks(PREFIX_EVERY) {
            prefix.push(total);
            total = block.iter().fold(total, |t, &(a, b)| t.wrapping_add(b.abs_diff(a)));
        }
        Intervals { spans: iv, prefix }
    }

    /// Total length of `spans[..i]`.
    fn sum_to(&self, i: usize) -> u64 {
        // No kept sum means no spans (and i = 0). Else the last kept sum at or before
        // span i: for i = len, a multiple of PREFIX_EVERY, that is the one before.
        let Some(last) = self.prefix.len().checked_sub(1) else { return 0 };
        let k = (i / PREFIX_EVERY).min(last);
        let base = self.prefix[k];
        self.spans[k * PREFIX_EVERY..i].iter().fold(base, |t, &(a, b)| t.wrapping_add(b.abs_diff(a)))
    }

    /// Total covered length.
    #[inline]
    pub fn total(&self) -> i64 {
        clamp_ps(i128::from(self.sum_to(self.spans.len())))
    }

    /// The merged spans.
    #[inline]
    pub fn spans(&self) -> &[(i64, i64)] {
        &self.spans
    }

    /// Covered length within `[lo, hi)`.
    #[inline]
    pub fn overlap(&self, lo: i64, hi: i64) -> i64 {
        if hi <= lo || self.spans.is_empty() {
            return 0;
        }
        // First span ending after lo, first span starting at or after hi.
        let first = self.spans.partition_point(|s| s.1 <= lo);
        let last = self.spans.partition_point(|s| s.0 < hi);
        self.covered(first, last, lo, hi)
    }

    /// The time covered by `self` and not by `other`.
    pub fn minus(&self, other: &Intervals) -> Intervals {
        if other.spans.is_empty() || self.spans.is_empty() {
            return self.clone();
        }
        let mut out = Vec::with_capacity(self.spans.len());
        let mut k = 0usize;
        for &(a, b) in &self.spans {
            let mut from = a;
            // Spans of `other` that end before this one starts are behind us for good.
            k = gallop(&other.spans, k, |s| s.1 <= a);
            let mut j = k;
            while j < other.spans.len() && other.spans[j].0 < b {
                let (oa, ob) = other.spans[j];
                if oa > from {
                    out.push((from, oa));
                }
                from = from.max(ob);
                j += 1;
            }
            if from < b {
                out.push((from, b));
            }
        }
        Intervals::from_disjoint(out)
    }

    /// The time covered by any of `sets`.
    pub fn union(sets: &[&Intervals]) -> Intervals {
        match sets {
            [] => Intervals::default(),
            [one] => (*one).clone(),
            [a, b] if a.spans.is_empty() => (*b).clone(),
            [a, b] if b.spans.is_empty() => (*a).clone(),
            [a, b] => {
                // Two sorted lists, merged in one pass, touching spans joined as they
                // come. After each span taken, the spans of both lists that end within
                // the merged span so far are skipped by galloping: a short list over a
                // long one (programs over their ops) costs the short one's length.
                let (a, b) = (&a.spans, &b.spans);
                let mut out: Vec<(i64, i64)> = Vec::new();
                let (mut i, mut j) = (0, 0);
                while i < a.len() || j < b.len() {
                    let next = if j >= b.len() || (i < a.len() && a[i] <= b[j]) {
                        i += 1;
                        a[i - 1]
                    } else {
                        j += 1;
                        b[j - 1]
                    };
                    let end = match out.last_mut() {
                        Some(last) if next.0 <= last.1 => {
                            last.1 = last.1.max(next.1);
                            last.1
                        }
                        _ => {
                            out.push(next);
                            next.1
                        }
                    };
                    i = gallop(a, i, |s| s.1 <= end);
                    j = gallop(b, j, |s| s.1 <= end);
                }
                Intervals::from_disjoint(out)
            }
            _ => Intervals::new(sets.iter().flat_map(|s| s.spans.iter().copied()).collect()),
        }
    }

    /// The time covered by `self` within `windows` (sorted, disjoint spans).
    pub fn within(&self, windows: &[(i64, i64)]) -> Intervals {
        let mut out = Vec::with_capacity(self.spans.len());
        // Windows that end before the first span starts hold none of it.
        let first = self.spans.first().map_or(0, |s| windows.partition_point(|w| w.1 <= s.0));
        let (mut i, mut j) = (0, first);
        while i < self.spans.len() && j < windows.len() {
            let ((a, b), (wa, wb)) = (self.spans[i], windows[j]);
            let (lo, hi) = (a.max(wa), b.min(wb));
            if lo < hi {
                out.push((lo, hi));
            }
            // The span or the window that ends first is done with.
            if b <= wb {
                i += 1;
            } else {
                j += 1;
            }
        }
        Intervals::from_disjoint(out)
    }

    /// For many windows in time order ([`Cursor::overlap`]): each search starts where
    /// the last one ended.
    #[inline]
    pub fn cursor(&self) -> Cursor<'_> {
        Cursor { iv: self, first: 0, lo: i64::MIN }
    }

    /// Covered length within `[lo, hi)`, given the first span ending after `lo` and
    /// the first starting at or after `hi`.
    fn covered(&self, first: usize, last: usize, lo: i64, hi: i64) -> i64 {
        if first >= last {
            return 0;
        }
        let total = i128::from(self.sum_to(last).wrapping_sub(self.sum_to(first)));
        let before = (i128::from(lo) - i128::from(self.spans[first].0)).max(0);
        let after = (i128::from(self.spans[last - 1].1) - i128::from(hi)).max(0);
        clamp_ps(total - before - after)
    }
}

/// [`Intervals::overlap`] for a series of windows: fast when they come in time order
/// (steps, a device's collectives), right in any order.
pub struct Cursor<'a> {
    iv: &'a Intervals,
    /// The first span ending after `lo`, for the last window asked.
    first: usize,
    lo: i64,
}

impl Cursor<'_> {
    /// Covered length within `[lo, hi)`.
    pub fn overlap(&mut self, lo: i64, hi: i64) -> i64 {
        let spans = &self.iv.spans;
        if hi <= lo || spans.is_empty() {
            return 0;
        }
        // Spans before the last window's first end at or before its lo, so at or
        // before this lo too when the windows go forward.
        let from = if lo >= self.lo { self.first } else { 0 };
        let first = gallop(spans, from, |s| s.1 <= lo);
        (self.first, self.lo) = (first, lo);
        // Spans before `first` end at or before lo < hi, so they start before hi.
        let last = gallop(spans, first, |s| s.0 < hi);
        self.iv.covered(first, last, lo, hi)
    }
}

/// Gives back a list's spare room when it is most of it (merged spans): a list that
/// lost a few spans keeps its room rather than be copied into a smaller one.
fn shrink(spans: &mut Vec<(i64, i64)>) {
    if spans.len() < spans.capacity() / 2 {
        spans.shrink_to_fit();
    }
}

/// Lists of at least this many spans are merged in parallel parts.
const MERGE_PART: usize = if cfg!(debug_assertions) { 1 << 6 } else { 1 << 16 };

/// Runs of spans read one after another ([`Intervals::from_sorted_runs`]), each
/// starting where the one before it ended, or later.
struct Chain<'a> {
    runs: Vec<&'a [(i64, i64)]>,
    /// The run being read, and the next span of it.
    run: usize,
    at: usize,
}

impl<'a> Chain<'a> {
    fn len(&self) -> usize {
        self.runs.iter().map(|r| r.len()).sum()
    }

    /// Span `i` of the chain, if it has that many.
    fn nth(&self, mut i: usize) -> Option<(i64, i64)> {
        for r in &self.runs {
            match r.get(i) {
                Some(&s) => return Some(s),
                None => i -= r.len(),
            }
        }
        None
    }

    /// The spans that start in `[lo, hi)`.
    fn between(&self, lo: i64, hi: i64) -> Chain<'a> {
        let runs = (self.runs.iter())
            .map(|r| &r[r.partition_point(|s| s.0 < lo)..r.partition_point(|s| s.0 < hi)])
            .filter(|r| !r.is_empty())
            .collect();
        Chain { runs, run: 0, at: 0 }
    }

    fn head(&self) -> Option<(i64, i64)> {
        self.runs.get(self.run).map(|r| r[self.at])
    }

    fn advance(&mut self) {
        self.at += 1;
        if self.at == self.runs[self.run].len() {
            (self.run, self.at) = (self.run + 1, 0);
        }
    }
}

/// Merges `chains` into `out` (long enough for all their spans) as sorted, disjoint,
/// non-empty spans; returns how many.
fn merge_chains(mut chains: Vec<Chain>, out: &mut [(i64, i64)]) -> usize {
    let mut len = 0usize;
    let mut push = |(a, b): (i64, i64)| match len.checked_sub(1).map(|l| &mut out[l]) {
        _ if b <= a => {}
        Some(last) if a <= last.1 => last.1 = last.1.max(b),
        _ => {
            out[len] = (a, b);
            len += 1;
        }
    };
    while let Some((k, second)) = earliest(chains.iter().map(|c| c.head().map(|h| h.0))) {
        let chain = &mut chains[k];
        while let Some(span) = chain.head().filter(|s| s.0 <= second) {
            push(span);
            chain.advance();
        }
    }
    len
}

/// Of chains' head starts (`None`: a chain read to its end): the chain whose head is
/// earliest, and the start of the next earliest (`i64::MAX`: none).
fn earliest(heads: impl Iterator<Item = Option<i64>>) -> Option<(usize, i64)> {
    let (mut first, mut second) = (None::<(i64, usize)>, i64::MAX);
    for (k, head) in heads.enumerate() {
        let Some(head) = head else { continue };
        match first {
            Some((f, _)) if f <= head => second = second.min(head),
            _ => {
                second = second.min(first.map_or(i64::MAX, |f| f.0));
                first = Some((head, k));
            }
        }
    }
    first.map(|(_, k)| (k, second))
}

/// The first index at or after `from` where `pred` is false, when it is true for all
/// of `spans[..from]` and then false from some index on: steps of 1, 2, 4, … from
/// `from`, then a binary search in the last step.
fn gallop(spans: &[(i64, i64)], from: usize, pred: impl Fn(&(i64, i64)) -> bool) -> usize {
    let (mut lo, mut step) = (from, 1usize);
    loop {
        let probe = lo.saturating_add(step - 1);
        if probe >= spans.len() || !pred(&spans[probe]) {
            let hi = probe.min(spans.len());
            return lo + spans[lo..hi].partition_point(&pred);
        }
        lo = probe + 1;
        step = step.saturating_mul(2);
    }
}

#[cfg(test)]
mod set_tests {
    use super::Intervals;

    /// Covered points of `iv` in 0..100, one bool each (the reference).
    fn points(iv: &Intervals) -> Vec<bool> {
        (0..100).map(|t| iv.spans().iter().any(|&(a, b)| a <= t && t < b)).collect()
    }

    /// A small deterministic generator: `rand(n)` in `0..n`.
    fn generator(mut seed: u64) -> impl FnMut(i64) -> i64 {
        move |n: i64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) % n as u64) as i64
        }
    }

    #[test]
    fn minus_union_and_within_agree_with_pointwise_sets() {
        let mut rand = generator(7);
        for _ in 0..300 {
            let mut make = || {
                let n = rand(6);
                Intervals::new(
                    (0..n)
                        .map(|_| {
                            let a = rand(100);
                            (a, a + rand(30))
                        })
                        .collect(),
                )
            };
            let (x, y) = (make(), make());
            let (px, py) = (points(&x), points(&y));
            let m = x.minus(&y);
            assert_eq!(points(&m), px.iter().zip(&py).map(|(a, b)| *a && !*b).collect::<Vec<_>>(), "{x:?} - {y:?}");
            let u = Intervals::union(&[&x, &y]);
            assert_eq!(points(&u), px.iter().zip(&py).map(|(a, b)| *a || *b).collect::<Vec<_>>());
            let w = x.within(y.spans());
            assert_eq!(points(&w), px.iter().zip(&py).map(|(a, b)| *a && *b).collect::<Vec<_>>());
            assert_eq!(m.total() + w.total(), x.total());
            // Spans in sorted runs (lines of ops), some empty or inverted: merged as
            // one list would be.
            let runs: Vec<Vec<(i64, i64)>> = (0..rand(5))
                .map(|_| {
                    let mut run: Vec<(i64, i64)> = (0..rand(8)).map(|_| (rand(100), rand(100))).collect();
                    run.sort_by_key(|s| s.0);
                    run
                })
                .collect();
            let slices: Vec<&[(i64, i64)]> = runs.iter().map(Vec::as_slice).collect();
            let one_sort = Intervals::new(runs.concat());
            assert_eq!(Intervals::from_sorted_runs(&slices).spans(), one_sort.spans(), "{runs:?}");
            let owned = Intervals::from_owned_sorted_runs(runs.clone());
            assert_eq!((owned.spans(), owned.total()), (one_sort.spans(), one_sort.total()), "{runs:?}");
        }
    }

    /// Lines of ops long enough to be merged in parallel parts, cut into pieces as the
    /// device-time pass reads them: the same spans as one sort.
    #[test]
    fn long_sorted_runs_merge_in_parts_as_one_sort_would() {
        let mut rand = generator(11);
        for round in 0..40 {
            let lines: Vec<Vec<(i64, i64)>> = (0..1 + round % 5)
                .map(|_| {
                    let mut t = rand(50);
                    (0..rand(400))
                        .map(|_| {
                            t += rand(20);
                            let span = (t, t + rand(30) - 2);
                            t = t.max(span.1);
                            span
                        })
                        .collect()
                })
                .collect();
            let mut runs: Vec<&[(i64, i64)]> = Vec::new();
            for line in &lines {
                let mut rest = line.as_slice();
                while !rest.is_empty() {
                    let (piece, after) = rest.split_at((1 + rand(90) as usize).min(rest.len()));
                    runs.push(piece);
                    rest = after;
                }
            }
            let merged = Intervals::from_sorted_runs(&runs);
            assert_eq!(merged.spans(), Intervals::new(lines.concat()).spans(), "round {round}");
            let owned = Intervals::from_owned_sorted_runs(runs.iter().map(|r| r.to_vec()).collect());
            assert_eq!(owned.spans(), merged.spans(), "round {round}");
        }
    }
}

#[cfg(test)]
mod interval_tests {
    use super::*;

    #[test]
    fn overlap_matches_union() {
        let raw = vec![(20, 30), (0, 10), (5, 15), (40, 41), (50, 50)];
        let iv = Intervals::new(raw.clone());
        assert_eq!(iv.total(), 26);
        for (lo, hi) in [(0, 100), (8, 25), (12, 45), (31, 39), (-5, 3), (29, 41)] {
            let mut sorted = raw.clone();
            sorted.sort_unstable();
            assert_eq!(iv.overlap(lo, hi), union_len(sorted, lo, hi), "{lo}..{hi}");
        }
    }

    #[test]
    fn overlap_across_kept_prefix_sums() {
        // Hundreds of spans, some merging: windows starting and ending inside, between
        // and across the stretches between kept prefix sums.
        // Also span counts that are a multiple of the spacing (the sum to the end then
        // starts from the kept sum before the last stretch).
        let every = PREFIX_EVERY as i64;
        for n in [500, 64, 32, 31, every, every - 1, every + 1, 1] {
            let mut raw: Vec<(i64, i64)> = (0..n).map(|i| (i * 10, i * 10 + 7)).collect();
            if n == 500 {
                raw.extend((0..50).map(|i| (i * 97 + 5, i * 97 + 12)));
            }
            let iv = Intervals::new(raw.clone());
            raw.sort_unstable();
            assert_eq!(iv.total(), union_len(raw.clone(), i64::MIN, i64::MAX), "n {n}");
            for lo in (-20..5100).step_by(173) {
                for len in [1, 9, 64, 333, 1000, 6000] {
                    assert_eq!(iv.overlap(lo, lo + len), union_len(raw.clone(), lo, lo + len), "n {n}: {lo}+{len}");
                }
            }
        }
    }

    #[test]
    fn cursors_agree_with_overlap_forward_and_back() {
        let mut raw: Vec<(i64, i64)> = (0..700).map(|i| (i * 10, i * 10 + 7)).collect();
        raw.extend((0..60).map(|i| (i * 97 + 5, i * 97 + 12)));
        let iv = Intervals::new(raw);
        let windows: Vec<(i64, i64)> =
            (-30i64..7100).step_by(37).map(|lo| (lo, lo + (lo.rem_euclid(9)) * 41)).collect();
        // In time order, reversed, and jumping about; empty and inverted windows too.
        let mut c = iv.cursor();
        for &(lo, hi) in windows.iter().chain(windows.iter().rev()).chain(&[(5, 5), (9, 3), (i64::MIN, i64::MAX)]) {
            assert_eq!(c.overlap(lo, hi), iv.overlap(lo, hi), "{lo}..{hi}");
        }
        assert_eq!(Intervals::default().cursor().overlap(0, 10), 0);
    }

    #[test]
    fn extreme_times_saturate_instead_of_overflowing() {
        // Damaged profiles: events from i64::MIN to i64::MAX, durations near i64::MAX.
        let iv = Intervals::new(vec![(i64::MIN, 0), (1, i64::MAX), (i64::MIN + 1, -5)]);
        assert_eq!(iv.total(), i64::MAX);
        assert_eq!(iv.overlap(i64::MIN, i64::MAX), i64::MAX);
        assert_eq!(iv.overlap(-10, 10), 19);
        assert_eq!(union_len([(i64::MIN, 0), (1, i64::MAX)], i64::MIN, i64::MAX), i64::MAX);
        assert_eq!(sum_ps([i64::MAX, i64::MAX, -1]), i64::MAX - 1);
        assert_eq!(sum_ps([i64::MIN, -1]), i64::MIN);
    }
}

/// `part` as a share of `whole`, percent (0 when `whole` is not positive).
#[inline]
pub fn pct(part: i64, whole: i64) -> f64 {
    if whole > 0 {
        100.0 * part as f64 / whole as f64
    } else {
        0.0
    }
}
