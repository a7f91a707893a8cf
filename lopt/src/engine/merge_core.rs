//! The BPE merge loop shared by the byte-level engine (`engine/bpe`) and the SentencePiece-style
//! one (`engine/spm`): symbols (token ids) in, the merged tokens out, by HF's rule.
//!
//! HF merges with a heap of candidate pairs and applies, repeatedly, the candidate with the lowest
//! rank, the leftmost one among equal ranks; a popped candidate is applied only while its pair is
//! still there. Because a symbol only ever grows, the pair at a position never comes back once it
//! changed, so this is the textbook rule "merge the lowest-ranked adjacent pair, leftmost first,
//! until none is left", which both loops here implement: a quadratic scan on the stack for up to
//! [`SCAN_LIMIT`] symbols and the heap over a linked list above (the unit tests check them against
//! each other).
//!
//! Each merged token is reported as `(id, last)`: its id and the index of the last input symbol
//! it covers (the engines derive byte ends from it), in order.

use std::collections::BinaryHeap;

use crate::engine::bpe::table::{Dense, MergeMap, NO_RANK};

/// The lookup of the window merge ([`merge_window`]): `(rank, merged id)` of a pair, as
/// [`MergeMap::get`] answers it, and the number of merges (every rank is below it).
pub(crate) trait Pairs {
    fn get(&self, a: u32, b: u32) -> (u32, u32);
    fn count(&self) -> usize;
}

impl Pairs for MergeMap {
    #[inline(always)]
    fn get(&self, a: u32, b: u32) -> (u32, u32) {
        MergeMap::get(self, a, b)
    }

    #[inline(always)]
    fn count(&self) -> usize {
        MergeMap::count(self)
    }
}

/// A [`MergeMap`] with a [`Dense`] table built from it in front: the same answers
/// ([`Dense::get`]).
pub(crate) struct WithDense<'a>(pub(crate) &'a MergeMap, pub(crate) &'a Dense);

impl Pairs for WithDense<'_> {
    #[inline(always)]
    fn get(&self, a: u32, b: u32) -> (u32, u32) {
        self.1.get(self.0, a, b)
    }

    #[inline(always)]
    fn count(&self) -> usize {
        self.0.count()
    }
}

/// Up to this many symbols are merged by scanning (at most 255: the scan links symbols with `u8`
/// indices).
pub(crate) const SCAN_LIMIT: usize = 32;

/// Reusable buffers of the heap merge.
#[derive(Default)]
pub(crate) struct Scratch {
    ids: Vec<u32>,
    ranks: Vec<u32>,
    next: Vec<u32>,
    prev: Vec<u32>,
    heap: BinaryHeap<std::cmp::Reverse<u64>>,
}

/// Merges `symbols` and reports each token with [`emit`](self) as `(id, last)`.
#[inline(always)]
pub(crate) fn merge(merges: &MergeMap, symbols: &[u32], scratch: &mut Scratch, emit: impl FnMut(u32, usize)) {
    if symbols.len() <= SCAN_LIMIT {
        merge_scan(merges, symbols, emit);
    } else {
        merge_heap(merges, symbols, scratch, emit);
    }
}

/// Quadratic merge for at most [`SCAN_LIMIT`] symbols, on the stack: the rank of the pair
/// starting at each live symbol, a linked list of live symbols, and a scan for the minimum per
/// merge (no heap, no shifting).
#[inline(always)]
pub(crate) fn merge_scan(merges: &MergeMap, symbols: &[u32], emit: impl FnMut(u32, usize)) {
    scan(merges, symbols, emit);
}

/// [`merge_scan`] for windows of about [`SCAN_LIMIT`] symbols (the long-word pass of
/// `engine/backtrack.rs`): each slot's candidate is one key that holds its slot too
/// ([`window`]), and the minimum key, found over all [`SCAN_LIMIT`] slots at once by a reduction
/// that the compiler turns into vector code, is the merge; the branchy scan of the live prefix
/// costs about 300 instructions per merge on a full window, and short words (the common case, a
/// few symbols) keep it. Tables whose ranks do not fit the keys ([`KEY_RANKS`] merges or more,
/// far beyond any real vocabulary) take that scan.
#[inline(always)]
pub(crate) fn merge_window<P: Pairs>(merges: &P, symbols: &[u32], emit: impl FnMut(u32, usize)) {
    if merges.count() < KEY_RANKS {
        window(merges, symbols, emit);
    } else {
        scan(merges, symbols, emit);
    }
}

/// Ranks below this fit [`window`]'s keys: `rank << 5 | slot` below `0xffff_ffe0` ([`NONE`]).
const KEY_RANKS: usize = (1 << 27) - 1;

/// [`window`]'s key of a dead slot: above every key.
const DEAD: i32 = i32::MAX;

/// [`window`]'s keys from this one up stand for no candidate pair: [`key`] of [`NO_RANK`].
const NONE: i32 = (0xffff_ffe0u32 ^ 0x8000_0000) as i32;

/// [`window`]'s key of the pair at `slot` merging with `rank`: `rank << 5 | slot` with its top
/// bit flipped, so that signed order is the unsigned order of `rank << 5 | slot` (the vector
/// minimum SSE2 has is signed); [`NO_RANK`] makes a key of at least [`NONE`], every real rank
/// (below [`KEY_RANKS`]) one below it. No branch: a window with few merges (runs of spaces on
/// GPT-2) is mostly this set-up.
#[inline(always)]
fn key(rank: u32, slot: usize) -> i32 {
    ((rank << 5 | slot as u32) ^ 0x8000_0000) as i32
}

/// The stack merge of [`merge_window`] with keys ([`key`]; [`DEAD`] for dead symbols and slots
/// past the window): the lowest key is the lowest rank, and among equal ranks the lowest slot,
/// which is the leftmost pair since live symbols keep their slots' order; its slot is its low 5
/// bits. This replaces the search for the first slot that holds the minimum rank (about half
/// the window read again per merge), and signed lanes take SSE2's compare where unsigned ones
/// needed a sign flip per lane. Every rank must be below [`KEY_RANKS`].
#[inline(always)]
fn window<P: Pairs>(merges: &P, symbols: &[u32], emit: impl FnMut(u32, usize)) {
    const _: () = assert!(SCAN_LIMIT <= 32);
    let mut w = Keyed::new(merges, symbols);
    while !w.done {
        w.step(merges);
    }
    w.emit(emit);
}

/// [`merge_window`] of two windows at once, `a` reported with `emit_a` and `b` with `emit_b`:
/// their merges are made in lockstep, one of each per round, so that the two chains of dependent
/// steps (the minimum, then the table lookups it names, then the next minimum) overlap on one
/// core. Each window is merged exactly as alone; a window's merge is latency-bound (random
/// digits: two windows in lockstep took 1.16-1.42x less time than one after the other).
#[inline(always)]
pub(crate) fn merge_window_pair<P: Pairs>(
    merges: &P,
    a: &[u32],
    b: &[u32],
    emit_a: impl FnMut(u32, usize),
    emit_b: impl FnMut(u32, usize),
) {
    if merges.count() >= KEY_RANKS {
        scan(merges, a, emit_a);
        scan(merges, b, emit_b);
        return;
    }
    let (mut x, mut y) = (Keyed::new(merges, a), Keyed::new(merges, b));
    while !(x.done && y.done) {
        if !x.done {
            x.step(merges);
        }
        if !y.done {
            y.step(merges);
        }
    }
    x.emit(emit_a);
    y.emit(emit_b);
}

/// The state of [`window`]'s merge of one window, for [`merge_window_pair`]: the same arrays,
/// set up and stepped the same way.
struct Keyed {
    ids: [u32; SCAN_LIMIT],
    keys: [i32; SCAN_LIMIT],
    merged: [u32; SCAN_LIMIT],
    next: [u8; SCAN_LIMIT],
    prev: [u8; SCAN_LIMIT],
    n: usize,
    /// No pair left to merge.
    done: bool,
}

impl Keyed {
    /// The first [`SCAN_LIMIT`] symbols of `symbols`, with their pairs' keys.
    #[inline(always)]
    fn new<P: Pairs>(merges: &P, symbols: &[u32]) -> Keyed {
        let n = symbols.len().min(SCAN_LIMIT);
        let mut w = Keyed {
            ids: [0; SCAN_LIMIT],
            keys: [DEAD; SCAN_LIMIT],
            merged: [0; SCAN_LIMIT],
            next: [0; SCAN_LIMIT],
            prev: [0; SCAN_LIMIT],
            n,
            done: n == 0,
        };
        for (i, &id) in symbols[..n].iter().enumerate() {
            w.ids[i] = id;
            w.next[i] = (i + 1) as u8;
            w.prev[i] = i.wrapping_sub(1) as u8;
        }
        for i in 0..n.saturating_sub(1) {
            let rank;
            (rank, w.merged[i]) = merges.get(w.ids[i], w.ids[i + 1]);
            w.keys[i] = key(rank, i);
        }
        w
    }

    /// One merge of [`window`]'s loop, or `done` when the lowest key is no merge.
    #[inline(always)]
    fn step<P: Pairs>(&mut self, merges: &P) {
        let mut lanes = [DEAD; 8];
        for chunk in self.keys.chunks_exact(8) {
            for (m, &k) in lanes.iter_mut().zip(chunk) {
                *m = (*m).min(k);
            }
        }
        let best = lanes.iter().fold(DEAD, |m, &k| m.min(k));
        if best >= NONE {
            self.done = true;
            return;
        }
        let end = self.n as u8;
        let at = (best & 31) as usize;
        let right = usize::from(self.next[at]);
        self.ids[at] = self.merged[at];
        self.keys[right] = DEAD;
        let after = self.next[right];
        self.next[at] = after;
        if after != end {
            self.prev[usize::from(after)] = at as u8;
            let rank;
            (rank, self.merged[at]) = merges.get(self.ids[at], self.ids[usize::from(after)]);
            self.keys[at] = key(rank, at);
        } else {
            self.keys[at] = DEAD;
        }
        if at > 0 {
            let before = usize::from(self.prev[at]);
            let rank;
            (rank, self.merged[before]) = merges.get(self.ids[before], self.ids[at]);
            self.keys[before] = key(rank, before);
        }
    }

    /// Reports the tokens as `(id, last)`.
    #[inline(always)]
    fn emit(&self, mut emit: impl FnMut(u32, usize)) {
        let mut i = 0;
        while i != self.n {
            let after = usize::from(self.next[i]);
            emit(self.ids[i], after - 1);
            i = after;
        }
    }
}

/// The stack merge of [`merge_scan`] (and of [`merge_window`] for tables beyond [`KEY_RANKS`]):
/// [`scan_in`] on a copy of `symbols`.
#[inline(always)]
fn scan<P: Pairs>(merges: &P, symbols: &[u32], emit: impl FnMut(u32, usize)) {
    let n = symbols.len().min(SCAN_LIMIT);
    let mut ids = [0u32; SCAN_LIMIT];
    ids[..n].copy_from_slice(&symbols[..n]);
    scan_in(merges, &mut ids[..n], emit);
}

/// [`merge`] of symbols that the caller gives up: up to [`SCAN_LIMIT`] are merged where they
/// lie ([`scan_in`]: no copy onto the stack), more by the heap. `symbols` is left in no
/// particular state.
#[inline(always)]
pub(crate) fn merge_in_place(
    merges: &MergeMap,
    symbols: &mut [u32],
    scratch: &mut Scratch,
    emit: impl FnMut(u32, usize),
) {
    if symbols.len() <= SCAN_LIMIT {
        scan_in(merges, symbols, emit);
    } else {
        merge_heap(merges, symbols, scratch, emit);
    }
}

/// [`scan_in`]'s links of a fresh list: slot `i` is followed by `i + 1` (the last slot's next
/// is the list's length, the end) and preceded by `i - 1` (wrapping for the first, never read).
/// Copied whole from constants: storing both per symbol was about a tenth of the set-up of a
/// short missed word's merge.
const NEXT: [u8; SCAN_LIMIT] = {
    let mut next = [0u8; SCAN_LIMIT];
    let mut i = 0;
    while i < SCAN_LIMIT {
        next[i] = (i + 1) as u8;
        i += 1;
    }
    next
};
const PREV: [u8; SCAN_LIMIT] = {
    let mut prev = [0u8; SCAN_LIMIT];
    let mut i = 0;
    while i < SCAN_LIMIT {
        prev[i] = (i as u8).wrapping_sub(1);
        i += 1;
    }
    prev
};

/// The scan itself, on the first [`SCAN_LIMIT`] of `ids` in place: the rank of the pair starting
/// at each live symbol, a linked list of live symbols, and a scan for the minimum per merge.
#[inline(always)]
fn scan_in<P: Pairs>(merges: &P, ids: &mut [u32], mut emit: impl FnMut(u32, usize)) {
    let n = ids.len().min(SCAN_LIMIT);
    if n == 0 {
        return;
    }
    let ids = &mut ids[..n];
    let mut ranks = [NO_RANK; SCAN_LIMIT];
    // The id each candidate pair merges into, read with its rank (one table slot).
    let mut merged = [0u32; SCAN_LIMIT];
    // Only the first `n` slots are read, so the links past the list need no care.
    let mut next = NEXT;
    let mut prev = PREV;
    for i in 0..n - 1 {
        (ranks[i], merged[i]) = merges.get(ids[i], ids[i + 1]);
    }
    let end = n as u8;
    loop {
        let mut best = NO_RANK;
        let mut at = 0;
        // Dead symbols and the last one hold NO_RANK; strictly lower keeps the leftmost of equal
        // ranks.
        for (k, &r) in ranks[..n].iter().enumerate() {
            if r < best {
                best = r;
                at = k;
            }
        }
        if best == NO_RANK {
            break;
        }
        let right = usize::from(next[at]);
        ids[at] = merged[at];
        ranks[right] = NO_RANK;
        let after = next[right];
        next[at] = after;
        if after != end {
            prev[usize::from(after)] = at as u8;
            (ranks[at], merged[at]) = merges.get(ids[at], ids[usize::from(after)]);
        } else {
            ranks[at] = NO_RANK;
        }
        if at > 0 {
            let before = usize::from(prev[at]);
            (ranks[before], merged[before]) = merges.get(ids[before], ids[at]);
        }
    }
    let mut i = 0;
    while i != n {
        let after = usize::from(next[i]);
        emit(ids[i], after - 1);
        i = after;
    }
}

/// HF's algorithm: candidates `(rank, position)` in a min-heap over a linked list of symbols;
/// a candidate is stale when its left symbol is gone or its pair has changed since (a dead
/// symbol holds [`NO_RANK`]).
pub(crate) fn merge_heap(merges: &MergeMap, symbols: &[u32], scratch: &mut Scratch, mut emit: impl FnMut(u32, usize)) {
    let n = symbols.len();
    if n == 0 {
        return;
    }
    let Scratch { ids, ranks, next, prev, heap } = scratch;
    ids.clear();
    ids.extend_from_slice(symbols);
    next.clear();
    next.extend((1..=n as u32).map(|i| if (i as usize) < n { i } else { u32::MAX }));
    prev.clear();
    prev.extend((0..n as u32).map(|i| i.wrapping_sub(1)));
    ranks.clear();
    ranks.extend((0..n).map(|i| if i + 1 < n { merges.rank(ids[i], ids[i + 1]) } else { NO_RANK }));
    heap.clear();
    for (i, &r) in ranks.iter().enumerate() {
        if r != NO_RANK {
            heap.push(std::cmp::Reverse(u64::from(r) << 32 | i as u64));
        }
    }
    while let Some(std::cmp::Reverse(top)) = heap.pop() {
        let pos = (top & 0xffff_ffff) as usize;
        let rank = (top >> 32) as u32;
        if ranks[pos] == NO_RANK || ranks[pos] != rank {
            continue;
        }
        let right = next[pos] as usize;
        ids[pos] = merges.merged(rank);
        let after = next[right];
        next[pos] = after;
        if after != u32::MAX {
            prev[after as usize] = pos as u32;
        }
        ranks[right] = NO_RANK;
        ranks[pos] = if after != u32::MAX { merges.rank(ids[pos], ids[after as usize]) } else { NO_RANK };
        if ranks[pos] != NO_RANK {
            heap.push(std::cmp::Reverse(u64::from(ranks[pos]) << 32 | pos as u64));
        }
        let before = prev[pos];
        if before != u32::MAX {
            let b = before as usize;
            ranks[b] = merges.rank(ids[b], ids[pos]);
            if ranks[b] != NO_RANK {
                heap.push(std::cmp::Reverse(u64::from(ranks[b]) << 32 | b as u64));
            }
        }
    }
    let mut i = 0usize;
    while i != u32::MAX as usize {
        let after = next[i];
        emit(ids[i], if after == u32::MAX { n - 1 } else { after as usize - 1 });
        i = after as usize;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toy merge table over the ids `a` = 0, `b` = 1 and their merges.
    fn toy() -> MergeMap {
        // aa=2, ba=3, aaa=4, ab=5, baaa=6, abab=7
        MergeMap::new(&[(0, 0, 2), (1, 0, 3), (2, 0, 4), (0, 1, 5), (3, 2, 6), (5, 5, 7)]).unwrap()
    }

    fn run(merges: &MergeMap, symbols: &[u32], heap: bool) -> Vec<(u32, usize)> {
        let mut out = Vec::new();
        if heap {
            merge_heap(merges, symbols, &mut Scratch::default(), |id, last| out.push((id, last)));
        } else {
            merge_scan(merges, symbols, |id, last| out.push((id, last)));
        }
        out
    }

    #[test]
    fn scan_and_heap_agree() {
        let merges = toy();
        let mut state = 7u64;
        for _ in 0..5000 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let len = 1 + (state >> 59) as usize;
            let symbols: Vec<u32> = (0..len).map(|k| ((state >> (k % 48)) & 1) as u32).collect();
            let scan = run(&merges, &symbols, false);
            assert_eq!(scan, run(&merges, &symbols, true), "{symbols:?}");
            let mut window = Vec::new();
            merge_window(&merges, &symbols, |id, last| window.push((id, last)));
            assert_eq!(scan, window, "{symbols:?}");
            // In place, on a copy the merge may spoil.
            let mut in_place = Vec::new();
            merge_in_place(&merges, &mut symbols.clone(), &mut Scratch::default(), |id, last| {
                in_place.push((id, last))
            });
            assert_eq!(scan, in_place, "{symbols:?}");
            // Two windows in lockstep merge each as alone.
            let (mut first, mut second) = (Vec::new(), Vec::new());
            let other = &symbols[len / 2..];
            merge_window_pair(
                &merges,
                &symbols,
                other,
                |id, last| first.push((id, last)),
                |id, last| second.push((id, last)),
            );
            assert_eq!(scan, first, "{symbols:?}");
            assert_eq!(run(&merges, other, false), second, "{other:?}");
            // Every symbol is covered once, in order.
            assert_eq!(scan.last().map(|&(_, last)| last), Some(len - 1));
        }
    }

    #[test]
    fn leftmost_of_equal_ranks() {
        // a a a: (a, a) at 0 first, then (aa, a).
        assert_eq!(run(&toy(), &[0, 0, 0], false), vec![(4, 2)]);
        assert_eq!(run(&toy(), &[0, 0, 0], true), vec![(4, 2)]);
        assert_eq!(run(&toy(), &[], true), vec![]);
    }
}
