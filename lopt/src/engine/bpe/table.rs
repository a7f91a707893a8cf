//! Flat open-addressing tables for the two hot lookups of the engine: [`U64Map`] (`u64` keys to
//! `u64` values: the pre-token cache) and [`MergeMap`] (adjacent pair to merge rank), and the
//! pre-token cache's admission filter [`Doorkeeper`] (keys seen once), and [`huge_vec`], the
//! allocation of the large read-mostly tables in huge pages.
//!
//! Why not `HashMap`: both lookups are on the critical path of every byte, keys are already
//! well-mixed integers, and a flat array with linear probing costs one cache line per lookup and
//! no indirection. Invariants: the capacity is a power of two, at most three quarters full (so
//! probes stay short and a free slot always exists), or zero ([`U64Map::default`], where every
//! probe reads past the slots and misses); `EMPTY` is never a key.

/// Bytes of a transparent huge page (x86-64 and aarch64 Linux with 4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;

/// `len` copies of `fill`, in memory that the kernel is asked to back with huge pages (Linux's
/// `MADV_HUGEPAGE`, given before the first touch) when the vector spans one: the merge table and
/// the seeded cache are read at random, one or two lines a lookup, over 2-6 MiB, so with 4 KiB
/// pages nearly every lookup that misses the caches also misses the TLB (the simulated caches do
/// not see that cost). The capacity has one huge page to spare, so that the huge pages run to the
/// end of the data (the kernel backs only aligned 2 MiB blocks inside the range; the part before
/// the first boundary keeps small pages). Memory: at most [`HUGE_PAGE`] bytes more than `len`
/// elements, of address space; its pages are touched only where a huge page straddles the end.
/// Only a hint: where the kernel declines (THP off, no free huge pages), the pages are small, as
/// before, and the contents are the same either way.
pub(crate) fn huge_vec<T: Clone>(len: usize, fill: T) -> Vec<T> {
    let size = std::mem::size_of::<T>().max(1);
    if len.saturating_mul(size) < HUGE_PAGE {
        return vec![fill; len];
    }
    let mut v = Vec::with_capacity(len + HUGE_PAGE / size);
    advise_huge(v.as_mut_ptr() as usize, v.capacity() * size);
    v.resize(len, fill);
    v
}

/// Asks the kernel to back the whole pages of `addr..addr + bytes` (an allocation of ours, not
/// yet touched) with huge pages.
#[cfg(target_os = "linux")]
fn advise_huge(addr: usize, bytes: usize) {
    const PAGE: usize = 4096;
    let start = addr.next_multiple_of(PAGE);
    let end = addr.saturating_add(bytes) & !(PAGE - 1);
    if start < addr || end <= start {
        return;
    }
    // SAFETY: `start..end` lies inside the caller's allocation (checked just above: rounded
    // inwards to whole pages), which holds nothing yet (its capacity, not its elements). The
    // allocator may hand out memory that an earlier, freed allocation had touched (a thread
    // arena reuses its heap): such pages stay small whatever the advice, so `MADV_DONTNEED`
    // first returns them (the range then reads as zeros, and nothing in it is read before it
    // is written). `MADV_HUGEPAGE` changes only which page size the kernel uses to back the
    // range, never its mapping. A refusal (an error code) leaves small pages, as before.
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_addr: usize, _bytes: usize) {}

/// The reserved key of a free slot.
pub(crate) const EMPTY: u64 = u64::MAX;

#[derive(Clone, Debug)]
pub(crate) struct U64Map {
    slots: Vec<(u64, u64)>,
    mask: usize,
    /// `64 - log2(capacity)`: the slot is the top bits of the Fibonacci hash.
    shift: u32,
    len: usize,
}

/// The map with no slots (no allocation): every lookup misses; the first insert allocates.
impl Default for U64Map {
    fn default() -> Self {
        // `shift` 63: `slot` gives 0 or 1, both past the (empty) slots, which `get` answers as
        // a miss.
        U64Map { slots: Vec::new(), mask: 0, shift: 63, len: 0 }
    }
}

impl U64Map {
    /// A map that holds `n` keys without growing.
    pub(crate) fn with_capacity(n: usize) -> Self {
        let cap = (n.max(8) * 4 / 3 + 1).next_power_of_two();
        U64Map { slots: vec![(EMPTY, 0); cap], mask: cap - 1, shift: 64 - cap.trailing_zeros(), len: 0 }
    }

    /// Fibonacci hashing: the top bits of `key * 2^64/φ` mix every bit of the key (pairs of ids
    /// and packed bytes would cluster in the low bits).
    #[inline(always)]
    fn slot(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Slots allocated (0 for [`U64Map::default`]).
    pub(crate) fn slots(&self) -> usize {
        self.slots.len()
    }

    /// The entries, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.slots.iter().copied().filter(|&(k, _)| k != EMPTY)
    }

    /// The value of `key`, if any, to read and update in place. A key found past its home slot
    /// is moved there, swapped with the key it finds there, so that a key looked up often is
    /// answered by the first compare, which the branch predictor then learns (the probe loop's
    /// exit was a fifth of the mispredicted branches on English text, in the word cache). Every
    /// lookup still finds every key: the displaced key `j` (home `h_j`) moves from the found
    /// key's home `h` to the slot `p` where that key was; `h_j..=h` was occupied (`j`'s probe
    /// run) and `h..=p` too (the found key's), so `j`'s run reaches `p` unbroken, and no slot
    /// turns empty, so no other run breaks (the map has no deletions).
    #[inline(always)]
    pub(crate) fn find_mut_home(&mut self, key: u64) -> Option<&mut u64> {
        let home = self.slot(key);
        // `get` is the bounds check the index would make, and it answers the table with no
        // slots ([`U64Map::default`]) as well, so the map needs no `Option` around it (the
        // second check, of the same index against the same length, folds away).
        let &(k, _) = self.slots.get(home)?;
        if k == key {
            return self.slots.get_mut(home).map(|slot| &mut slot.1);
        }
        if k == EMPTY {
            return None;
        }
        self.find_past_home(home, key)
    }

    /// The rest of [`U64Map::find_mut_home`]'s probe run, past `home` (occupied by another key).
    #[inline(never)]
    fn find_past_home(&mut self, home: usize, key: u64) -> Option<&mut u64> {
        let mut i = (home + 1) & self.mask;
        loop {
            let &(k, _) = self.slots.get(i)?;
            if k == key {
                self.slots.swap(home, i);
                return self.slots.get_mut(home).map(|slot| &mut slot.1);
            }
            if k == EMPTY {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }

    #[inline(always)]
    pub(crate) fn get(&self, key: u64) -> Option<u64> {
        let mut i = self.slot(key);
        loop {
            let &(k, v) = self.slots.get(i)?;
            if k == key {
                return Some(v);
            }
            if k == EMPTY {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Inserts or replaces. `key` must not be [`EMPTY`].
    pub(crate) fn insert(&mut self, key: u64, value: u64) {
        debug_assert_ne!(key, EMPTY);
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        let mut i = self.slot(key);
        loop {
            let slot = &mut self.slots[i];
            if slot.0 == key {
                slot.1 = value;
                return;
            }
            if slot.0 == EMPTY {
                *slot = (key, value);
                self.len += 1;
                return;
            }
            i = (i + 1) & self.mask;
        }
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        let cap = (old.len() * 2).max(8);
        self.slots = vec![(EMPTY, 0); cap];
        self.mask = cap - 1;
        self.shift = 64 - cap.trailing_zeros();
        self.len = 0;
        for (k, v) in old {
            if k != EMPTY {
                self.insert(k, v);
            }
        }
    }
}

/// Bits of a [`Doorkeeper`] (32 KiB: stays in L1/L2 beside the hot tables).
const DOOR_BITS: usize = 1 << 18;
/// One key in this many (by hash) always goes through the filter, to measure how often missed
/// words come back.
const DOOR_SAMPLE: u64 = 16;
/// Bounds of [`Doorkeeper::score`]: how much evidence it keeps (about this many sampled words).
const DOOR_SCORE: i32 = 32;

/// The admission filter of the pre-token cache: one bit per hashed key, set at a key's first
/// sighting, so that a word is cached only when it comes back. Random text (base64: 97 % of the
/// words that miss both caches never recur in 1 MB) otherwise pays an insert per word and fills the
/// cache's table with entries that crowd the recurring words out of L2 and bring on trims.
///
/// Prose is the opposite (two thirds of its missed words recur, and merging one twice costs more
/// than one insert), so the filter switches itself on only where it pays: the words of a sample
/// (one key in [`DOOR_SAMPLE`]) always pass through it, and [`Self::score`] counts their first
/// sightings down by 1 and their second sightings up by 4. Below zero (more than 4 in 5 missed
/// words never came back) every word goes through the filter; otherwise every word is admitted
/// as before, and only the sample is merged once more.
///
/// Invariants: it only decides *whether* a word is cached, never what a lookup returns, so
/// results cannot depend on it. A false "seen" (two keys on one bit) admits a word on its first
/// sighting, as without the filter; the bits are cleared once an eighth of them are set, which
/// keeps that rate at most 1 in 8 (so that false "seen" in the sample, worth +4 each, cannot
/// outweigh the first sightings of one-off words: at 1 in 4 they did). Memory: [`DOOR_BITS`]` / 8` bytes, allocated at the first call.
pub(crate) struct Doorkeeper {
    bits: Vec<u64>,
    /// First sightings since the bits were cleared.
    set: usize,
    /// Evidence that missed words recur (above zero) or not, from the sample.
    score: i32,
}

impl Default for Doorkeeper {
    fn default() -> Self {
        // Start by admitting every word, as a cache without the filter does.
        Doorkeeper { bits: Vec::new(), set: 0, score: DOOR_SCORE / 4 }
    }
}

impl Doorkeeper {
    /// Whether the word keyed `key` (not cached) should be cached now.
    #[inline(always)]
    pub(crate) fn admits(&mut self, key: u64) -> bool {
        // A Fibonacci-style hash (a short word's key is its bytes): the top bits pick the bit,
        // the low ones the sample.
        let h = (key ^ key >> 29).wrapping_mul(0xd6e8_feb8_6659_fd93);
        let sampled = h.is_multiple_of(DOOR_SAMPLE);
        if !sampled && self.score >= 0 {
            return true;
        }
        let seen = self.seen_before(h >> (64 - DOOR_BITS.trailing_zeros()));
        if sampled {
            self.score = if seen { (self.score + 4).min(DOOR_SCORE) } else { (self.score - 1).max(-DOOR_SCORE) };
        }
        seen
    }

    /// Whether bit `at` (below [`DOOR_BITS`]) was set since the last clear; sets it.
    #[inline(always)]
    fn seen_before(&mut self, at: u64) -> bool {
        if self.bits.is_empty() {
            self.bits = vec![0; DOOR_BITS / 64];
        }
        let (word, bit) = ((at >> 6) as usize, 1u64 << (at & 63));
        let Some(w) = self.bits.get_mut(word) else { return true };
        if *w & bit != 0 {
            return true;
        }
        *w |= bit;
        self.set += 1;
        if self.set >= DOOR_BITS / 8 {
            self.bits.iter_mut().for_each(|w| *w = 0);
            self.set = 0;
        }
        false
    }
}

/// The merge table: `(left, right)` ids to the merge's rank and merged id. A slot packs the pair
/// and the rank in one `u64` (`pair << rank_bits | rank`) next to the merged id, so one probe
/// answers both (the scan needs the rank of every candidate and the id of the chosen one, and a
/// separate id array costs a second cache miss per merge).
///
/// Most lookups miss (on CJK text about 70%: adjacent characters rarely merge), and a miss in a
/// table larger than the L2 cache is a trip to L3. A blocked Bloom filter (two bits in one `u64`
/// per pair, about 8 bits per merge) answers most misses from a block that stays in L2. Pairs of
/// ids below [`GRID_IDS`] are read from a dense grid first: byte-level vocabularies
/// number their tokens in merge order, so these are the bytes and the most frequent merged
/// tokens, and on English words that miss the caches they are about 3 in 4 lookups (the bytes
/// alone, 256 ids, 45 %), most of them hits that would otherwise each wait on a slot of the
/// hashed table.
///
/// Invariants: `2 * id_bits + rank_bits <= 64`, every id is below `2^id_bits`, every rank below
/// `2^rank_bits - 1`, so no occupied slot equals [`EMPTY`]; the grid holds, for every pair of ids
/// below [`GRID_IDS`], the rank and merged id the hashed table holds for it (or `(NO_RANK, 0)`), and `merged` the
/// id of every rank. Memory: 16 bytes a slot (a power of two, at least 4/3 of the merges), 1 byte
/// of Bloom filter per merge (a power of two, at least 512 B), 4 bytes per merge for `merged`, and
/// the grid's `8 * GRID_IDS^2` bytes (2 MiB); the slots and the grid are allocated by
/// [`huge_vec`] (up to 2 MiB more address space each).
#[derive(Clone, Debug)]
pub(crate) struct MergeMap {
    /// `(pair << rank_bits | rank, merged id)`.
    slots: Vec<(u64, u32)>,
    shift: u32,
    mask: usize,
    id_bits: u32,
    rank_bits: u32,
    /// Merged id by rank (the heap merge and the premerge table, off the scan's path).
    merged: Vec<u32>,
    bloom: Vec<u64>,
    bloom_shift: u32,
    /// `(rank, merged id)` of every pair of ids below [`GRID_IDS`] (`a * GRID_IDS + b`),
    /// `(NO_RANK, 0)` where they do not merge: a byte-level vocabulary's single bytes have ids
    /// below 256, so the first round of every merge (all pairs of bytes) reads this dense grid
    /// instead of the Bloom filter and a slot of the hashed table, both larger than L2, and so do
    /// the most frequent merged tokens after it. Both halves in one cell: a grid of ranks alone,
    /// with the merged id read from `merged`, cost base64 5-7 % (its byte pairs merge at high
    /// ranks, whose `merged` entries are cold).
    grid: Vec<(u32, u32)>,
}

/// Ids below this have their pairs in [`MergeMap`]'s dense grid (`8 * GRID_IDS^2` bytes, 2 MiB). A
/// power of two, so that `a | b < GRID_IDS` tests both ids.
const GRID_IDS: u32 = 512;

/// "No merge" as a rank: above every real rank.
pub(crate) const NO_RANK: u32 = u32::MAX;

impl MergeMap {
    /// The table of `merges`: `(left, right, merged)` in rank order (a later duplicate of a pair
    /// wins, as in HF's map). `None` when the ids and ranks do not fit in 64 bits.
    pub(crate) fn new(merges: &[(u32, u32, u32)]) -> Option<MergeMap> {
        let max_id = merges.iter().map(|&(a, b, _)| a.max(b)).max().unwrap_or(0);
        let id_bits = 32 - max_id.leading_zeros();
        // One spare rank value so that a full slot is never EMPTY.
        let rank_bits = 64 - (merges.len() as u64 + 1).leading_zeros();
        if 2 * id_bits + rank_bits > 64 || u32::try_from(merges.len()).is_err() {
            return None;
        }
        let cap = (merges.len().max(8) * 4 / 3 + 1).next_power_of_two();
        let blocks = (merges.len() * 8 / 64).max(64).next_power_of_two();
        let mut map = MergeMap {
            slots: huge_vec(cap, (EMPTY, 0)),
            shift: 64 - cap.trailing_zeros(),
            mask: cap - 1,
            id_bits,
            rank_bits,
            merged: merges.iter().map(|&(_, _, m)| m).collect(),
            bloom: vec![0; blocks],
            bloom_shift: 64 - blocks.trailing_zeros(),
            grid: huge_vec((GRID_IDS * GRID_IDS) as usize, (NO_RANK, 0)),
        };
        for (rank, &(a, b, merged)) in merges.iter().enumerate() {
            map.insert(a, b, rank as u64, merged);
            if a < GRID_IDS && b < GRID_IDS {
                // In rank order, so a repeated pair keeps its last rank here too.
                map.grid[(a * GRID_IDS + b) as usize] = (rank as u32, merged);
            }
        }
        Some(map)
    }

    #[inline(always)]
    fn pair(&self, a: u32, b: u32) -> u64 {
        u64::from(a) << self.id_bits | u64::from(b)
    }

    /// Fibonacci hashing of the pair: the top bits pick the slot, the next ones the Bloom block.
    #[inline(always)]
    fn hash(pair: u64) -> u64 {
        pair.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    /// The Bloom block and its two bits; a different multiplier from the table's, so that pairs
    /// crowding one table neighbourhood spread over the filter.
    #[inline(always)]
    fn bloom_at(&self, pair: u64) -> (usize, u64) {
        let h = (pair ^ pair >> 29).wrapping_mul(0xd6e8_feb8_6659_fd93);
        ((h >> self.bloom_shift) as usize, 1u64 << (h & 63) | 1u64 << (h >> 6 & 63))
    }

    fn insert(&mut self, a: u32, b: u32, rank: u64, merged: u32) {
        let pair = self.pair(a, b);
        let (block, bits) = self.bloom_at(pair);
        self.bloom[block] |= bits;
        let mut i = (Self::hash(pair) >> self.shift) as usize;
        loop {
            let slot = self.slots[i].0;
            if slot == EMPTY || slot >> self.rank_bits == pair {
                self.slots[i] = (pair << self.rank_bits | rank, merged);
                return;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The rank of the merge of `a` then `b`, or [`NO_RANK`].
    #[inline(always)]
    pub(crate) fn rank(&self, a: u32, b: u32) -> u32 {
        self.get(a, b).0
    }

    /// The rank and merged id of the merge of `a` then `b`; `(NO_RANK, 0)` if none.
    #[inline(always)]
    pub(crate) fn get(&self, a: u32, b: u32) -> (u32, u32) {
        const _: () = assert!(GRID_IDS.is_power_of_two());
        if a | b < GRID_IDS {
            return self.grid.get((a * GRID_IDS + b) as usize).copied().unwrap_or((NO_RANK, 0));
        }
        let pair = self.pair(a, b);
        let (block, bits) = self.bloom_at(pair);
        if self.bloom.get(block).is_none_or(|&w| w & bits != bits) {
            return (NO_RANK, 0);
        }
        let mut i = (Self::hash(pair) >> self.shift) as usize;
        loop {
            let (slot, merged) = self.slots[i];
            if slot == EMPTY {
                return (NO_RANK, 0);
            }
            if slot >> self.rank_bits == pair {
                return ((slot & ((1 << self.rank_bits) - 1)) as u32, merged);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The number of merges: every rank is below it.
    #[inline(always)]
    pub(crate) fn count(&self) -> usize {
        self.merged.len()
    }

    /// The id a merge of rank `rank` (a rank this map returned) produces.
    #[inline(always)]
    pub(crate) fn merged(&self, rank: u32) -> u32 {
        self.merged.get(rank as usize).copied().unwrap_or(0)
    }

    /// The merges `(left, right, rank, merged)` that the table holds, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, u32, u32, u32)> + '_ {
        let id_mask = (1u64 << self.id_bits) - 1;
        self.slots.iter().filter(|&&(s, _)| s != EMPTY).map(move |&(s, _)| {
            let pair = s >> self.rank_bits;
            let rank = (s & ((1 << self.rank_bits) - 1)) as u32;
            ((pair >> self.id_bits) as u32, (pair & id_mask) as u32, rank, self.merged(rank))
        })
    }
}

/// A dense table of the merges between two small sets of tokens, `left` x `right` (`right` a
/// prefix of `left`): for the long-word pass's windows over random digits (claude, gpt2), whose
/// lookups are almost all between tokens of at most 3 and at most 2 digits, ids scattered over the
/// vocabulary where the 512-id grid misses most of them and each miss waits on the Bloom filter
/// and a slot of the hashed table (both larger than L2). Here the two ids' entries of a `u16`
/// index and one cell answer it, all three small enough to stay in L2.
///
/// Invariants: `index[id]` is `id`'s position in `left` (or [`DENSE_NONE`]), the first `right`
/// positions being the right set; `cells[i * right + j]` is exactly what [`MergeMap::get`]
/// answers for `(left[i], left[j])` (filled from it), so [`Self::get`] answers every pair as the
/// map does. A cell packs the answer in 4 bytes (`rank << 16 | merged`, rank `0xffff` for no
/// merge), so there is no table unless every rank and every merged id fits 16 bits (claude, gpt2);
/// at 8 bytes a cell claude's digits were 1.07-1.09x slower. Memory: 2 bytes per id up to the
/// largest of the set, 4 bytes per cell.
#[derive(Clone, Debug)]
pub(crate) struct Dense {
    index: Vec<u16>,
    /// Tokens of the left set (`index` below it); the right set is `index` below `right`.
    left: u32,
    right: u32,
    /// `rank << 16 | merged`, rank `0xffff` for no merge.
    cells: Vec<u32>,
}

/// [`Dense`]'s index of an id outside the set.
const DENSE_NONE: u16 = u16::MAX;

impl Dense {
    /// The table of `left` x `left[..right]` under `map`; `None` when the set is empty, larger
    /// than the `u16` index holds, `right` is beyond it, or a rank or an id does not fit a cell.
    pub(crate) fn new(map: &MergeMap, left: &[u32], right: usize) -> Option<Dense> {
        if left.is_empty() || left.len() >= usize::from(DENSE_NONE) || right > left.len() {
            return None;
        }
        // Before the index (2 bytes per id up to the set's largest): most vocabularies have more
        // ranks than a cell holds, and then nothing is built.
        if !Self::fits(map) || left.iter().any(|&id| id > 0xffff) {
            return None;
        }
        let size = left.iter().map(|&id| id as usize + 1).max()?;
        let mut index = vec![DENSE_NONE; size];
        for (i, &id) in left.iter().enumerate() {
            // A repeated id would leave an earlier cell unreachable, never wrong; keep the first.
            if index[id as usize] == DENSE_NONE {
                index[id as usize] = i as u16;
            }
        }
        let mut cells = Vec::with_capacity(left.len() * right);
        for &a in left {
            for &b in &left[..right] {
                let (rank, merged) = map.get(a, b);
                if rank != NO_RANK && merged > 0xffff {
                    return None;
                }
                cells.push(if rank == NO_RANK { 0xffff_0000 } else { rank << 16 | merged });
            }
        }
        Some(Dense { index, left: left.len() as u32, right: right as u32, cells })
    }

    /// Whether every rank of `map` fits a cell (`0xffff` stands for no merge): without that,
    /// [`Self::new`] builds nothing, so a caller need not collect a set for it.
    pub(crate) fn fits(map: &MergeMap) -> bool {
        map.count() < 0xffff
    }

    /// What `map.get(a, b)` answers (`map` the table this was built from): from the cell where
    /// both ids are in their sets, else from `map`.
    #[inline(always)]
    pub(crate) fn get(&self, map: &MergeMap, a: u32, b: u32) -> (u32, u32) {
        let i = u32::from(self.index.get(a as usize).copied().unwrap_or(DENSE_NONE));
        let j = u32::from(self.index.get(b as usize).copied().unwrap_or(DENSE_NONE));
        if i < self.left && j < self.right {
            if let Some(&cell) = self.cells.get((i * self.right + j) as usize) {
                return if cell >> 16 == 0xffff { (NO_RANK, 0) } else { (cell >> 16, cell & 0xffff) };
            }
        }
        map.get(a, b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_like_a_map() {
        let mut map = U64Map::with_capacity(2);
        let mut reference = std::collections::HashMap::new();
        for i in 0..10_000u64 {
            let key = i.wrapping_mul(0x1234_5678_9abc_def1) % 5000;
            map.insert(key, i);
            reference.insert(key, i);
        }
        assert_eq!(map.len(), reference.len());
        for key in 0..6000u64 {
            assert_eq!(map.get(key), reference.get(&key).copied());
        }
    }

    /// Lookups that move keys to their home slots, interleaved with inserts, updates and growth
    /// in a crowded map (keys that share home slots), never lose or mix up a key.
    #[test]
    fn lookups_moving_keys_home_keep_every_key() {
        let mut map = U64Map::with_capacity(8);
        let mut reference = std::collections::HashMap::new();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..200_000u64 {
            let r = crate::engine::xorshift(&mut state);
            // Few distinct keys at first, so that runs are long and lookups move keys often.
            let key = r % (64 + step / 16);
            match r >> 60 {
                0..=3 => {
                    map.insert(key, step);
                    reference.insert(key, step);
                }
                4..=5 => {
                    if let Some(value) = map.find_mut_home(key) {
                        *value += 1;
                    }
                    if let Some(value) = reference.get_mut(&key) {
                        *value += 1;
                    }
                }
                _ => assert_eq!(map.find_mut_home(key).map(|v| *v), reference.get(&key).copied()),
            }
        }
        assert_eq!(map.len(), reference.len());
        for (&key, &value) in &reference {
            assert_eq!(map.get(key), Some(value));
        }
        assert_eq!(map.iter().count(), reference.len());
    }

    #[test]
    fn doorkeeper_filters_only_one_off_words() {
        let mut door = Doorkeeper::default();
        // Words that recur: a word turned away is offered again (and then admitted); returns
        // how many were admitted at their first offer.
        let recurring = |door: &mut Doorkeeper, keys: std::ops::Range<u64>| {
            keys.filter(|&k| {
                let key = k.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                door.admits(key) || {
                    assert!(door.admits(key), "turned away twice");
                    false
                }
            })
            .count()
        };
        // Only the sample is turned away.
        let admitted = recurring(&mut door, 1..4001);
        assert!(admitted > 3500, "{admitted}");
        // One-off words: the filter switches on and admits few of them.
        let one_off = 4 * DOOR_BITS as u64;
        let admitted =
            (0..one_off).filter(|&k| door.admits(((k + 1) << 20).wrapping_mul(0x9e37_79b9_7f4a_7c15))).count();
        assert!(admitted < DOOR_BITS, "{admitted}");
        // Words that recur again: it switches back to admitting them at once.
        recurring(&mut door, 10_000..12_000);
        let admitted = recurring(&mut door, 20_000..24_000);
        assert!(admitted > 3500, "{admitted}");
    }

    #[test]
    fn merge_map_behaves_like_a_map() {
        let mut state = 0x1234_5678u64;
        let mut merges = Vec::new();
        let mut reference = std::collections::HashMap::new();
        for rank in 0..50_000u32 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            // Every fourth pair among the grid's ids, so that both lookups are exercised.
            let range = if rank % 4 == 0 { GRID_IDS + 10 } else { 3000 };
            let (a, b) = ((state >> 33) as u32 % range, (state >> 45) as u32 % range);
            merges.push((a, b, rank + 7));
            reference.insert((a, b), rank);
        }
        let map = MergeMap::new(&merges).unwrap();
        for a in 0..3000u32 {
            let step = if a < GRID_IDS + 10 { 1 } else { 7 };
            for b in (a % step..3000).step_by(step as usize) {
                let expected = reference.get(&(a, b)).copied().unwrap_or(NO_RANK);
                assert_eq!(map.rank(a, b), expected);
                if expected != NO_RANK {
                    assert_eq!(map.merged(expected), expected + 7);
                }
            }
        }
        assert_eq!(map.iter().count(), reference.len());
    }

    #[test]
    fn dense_answers_as_the_map() {
        let mut state = 0x9876_5432u64;
        let mut merges = Vec::new();
        for rank in 0..20_000u32 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let (a, b) = ((state >> 33) as u32 % 1500, (state >> 45) as u32 % 1500);
            merges.push((a, b, 1500 + rank));
        }
        let map = MergeMap::new(&merges).unwrap();
        // The set: every third id from 5 (some in the grid, most not) and a few above the index.
        let left: Vec<u32> = (0..400u32).map(|k| 5 + 3 * k).collect();
        let dense = Dense::new(&map, &left, 60).unwrap();
        for a in 0..1700u32 {
            for b in 0..1700u32 {
                assert_eq!(dense.get(&map, a, b), map.get(a, b), "{a} {b}");
            }
        }
        assert!(Dense::new(&map, &[], 0).is_none());
        assert!(Dense::new(&map, &left, 401).is_none());
    }

    #[test]
    fn dense_needs_ranks_that_fit_a_cell() {
        // Ranks up to 0xfffd fit (0xffff is "no merge"); one merge more and nothing is built, which
        // `Backtrack::with_digits` decides before collecting its set.
        for (count, fits) in [(0xfffe_u32, true), (0xffff, false)] {
            let merges: Vec<(u32, u32, u32)> = (0..count).map(|r| (r % 300, r / 300, 300 + r % 1000)).collect();
            let map = MergeMap::new(&merges).unwrap();
            assert_eq!(Dense::fits(&map), fits);
            let left: Vec<u32> = (0..20).collect();
            assert_eq!(Dense::new(&map, &left, 10).is_some(), fits);
        }
    }
}
