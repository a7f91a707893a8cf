//! The prefix cache: the raw tokens (before post-processing) of recently encoded long texts, so
//! that a text sharing a long prefix with one of them (the next turn of a conversation, another
//! question after the same context) re-encodes only what follows the last safe cut before the
//! two texts diverge.
//!
//! Exactness (`docs/correctness.md`, "Prefix reuse"): a cached text `C` and a new text `T` agree
//! on their first `L` bytes. A position `p <= L` is reused only when the cut rule holds at `p` in
//! `T` (or `p = |T|`) and in `C` (or `p = |C|`): then `F(T) = F(T[..p]) ++ F(T[p..])`,
//! `F(C) = F(C[..p]) ++ F(C[p..])` and `T[..p] = C[..p]`, so the tokens of `C` before `p` are the
//! tokens of `T` before `p`. The rule is evaluated on each text itself, so whatever window it
//! reads around `p` (one character each side, the added-token window) is read in the text it is
//! about; no assumption on the bytes after the divergence is made.
//!
//! Invariants:
//! * an entry's runs are the raw tokens of its text, in order: run `i` holds the first `len`
//!   tokens of a segment starting at byte `start` (encoded as a continuation unless it is 0),
//!   with `words` pre-tokens counted as if its bytes were a text of their own, and the runs' bytes
//!   tile the text; a run that an ids-only call encoded holds a whole segment's ids only (no
//!   offsets, word ids or word count), so the cache cuts at its start or end, never inside it,
//!   and a full call encodes its columns before using it;
//! * the bytes counted for the bound are each entry's text plus the columns of every segment it
//!   references (segments shared between entries are counted once per entry: the bound is an
//!   upper bound on memory held);
//! * no lock is held while encoding, comparing texts or finishing: a lock covers only a list
//!   look-up, an insertion or an eviction;
//! * each process has its own store: a forked child never touches the parent's locks (a thread of
//!   the parent may have held one at `fork`) and starts empty.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::boundary::{floor_char_boundary, CutRule};
use crate::engine::Segment;
use crate::merge::Run;

/// Bytes hashed to find the cached texts that may share a prefix with a new one.
const BLOCK: usize = 128;
/// Number of independently locked shards.
const SHARDS: usize = 16;
/// How far before the divergence a reusable cut is looked for, in bytes; beyond it the text is
/// encoded whole (a miss).
const SEARCH: usize = 16 * 1024;
/// At most this many candidates (most recently used first) are compared with a new text.
const CANDIDATES: usize = 8;
/// Bookkeeping counted per entry besides its text and token columns.
const ENTRY_OVERHEAD: usize = 256;
/// A cached text that the new text departs from at most this many bytes before its end is
/// superseded by the new one: any later text sharing a prefix with the old one shares all but at
/// most these bytes of it with the new one (the next turn of a conversation, which replaces the
/// previous prompt's generation header with a reply; another question after the same context).
const SUPERSEDE: usize = 1024;
/// Stores for this many processes (the creator and forked descendants) at most; further
/// descendants encode without the cache.
const PROCESSES: usize = 4;

/// Counters of a tokenizer's prefix cache ([`crate::Tokenizer::prefix_cache_stats`]), for the
/// current process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PrefixCacheStats {
    /// Texts that reused a cached prefix.
    pub hits: u64,
    /// Texts eligible for the cache that reused nothing.
    pub misses: u64,
    /// Bytes of text whose tokens were reused instead of encoded.
    pub bytes_reused: u64,
    /// Bytes of text encoded by texts eligible for the cache.
    pub bytes_encoded: u64,
    /// Bytes held now (texts and token columns, see the bound).
    pub bytes_held: usize,
    /// Texts held now.
    pub entries: usize,
    /// The bound, in bytes.
    pub capacity: usize,
}

/// A run of an entry: the first `len` tokens of `segment`, which starts at byte `start`, and
/// `words`, the number of pre-tokens of the run's bytes encoded on their own (for cuts inside
/// pre-tokens the one it ends with is counted, though it may continue in the next run: the
/// tokenizer subtracts it when it joins the runs of a text).
#[derive(Clone, Debug)]
pub(crate) struct CachedRun {
    pub(crate) segment: Arc<Segment>,
    pub(crate) len: usize,
    pub(crate) start: usize,
    pub(crate) words: u32,
    /// Whether `segment` holds its ids only (an ids-only call encoded it): then it is whole,
    /// its word count is unknown, and no cut inside it can be read off its tokens.
    ids_only: bool,
}

impl CachedRun {
    /// A whole segment.
    pub(crate) fn whole(segment: Arc<Segment>, start: usize) -> Self {
        CachedRun { len: segment.ids.len(), words: segment.words, segment, start, ids_only: false }
    }

    /// A whole segment of which only the ids were encoded.
    pub(crate) fn ids_only(ids: Vec<u32>, start: usize) -> Self {
        let segment = Arc::new(Segment { ids, ..Segment::default() });
        CachedRun { len: segment.ids.len(), words: 0, segment, start, ids_only: true }
    }

    /// Keeps only the ids of a whole segment's run (see [`ids_only`](Self::ids_only)), moving
    /// them out when the run holds the segment alone; a shared or partial run stays as it is.
    pub(crate) fn drop_columns(&mut self) {
        if self.ids_only || self.len != self.segment.ids.len() {
            return;
        }
        let placeholder = Arc::new(Segment::default());
        let segment = std::mem::replace(&mut self.segment, placeholder);
        match Arc::try_unwrap(segment) {
            Ok(segment) => *self = CachedRun::ids_only(segment.ids, self.start),
            Err(shared) => self.segment = shared,
        }
    }

    /// Whether the run has its offsets and word ids (what a full encoding needs).
    pub(crate) fn has_columns(&self) -> bool {
        !self.ids_only
    }

    pub(crate) fn run(&self) -> Run<'_> {
        Run { segment: &self.segment, len: self.len, start: self.start, words: self.words }
    }
}

/// One cached text and its raw tokens.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The text; a `String` so that the entry of the next turn of a conversation can take it
    /// over and append the new part instead of copying the whole prompt.
    text: String,
    runs: Vec<CachedRun>,
    block: u64,
    bytes: usize,
    last_used: AtomicU64,
}

impl Entry {
    pub(crate) fn runs(&self) -> &[CachedRun] {
        &self.runs
    }
}

/// What a new text can take from the cache: the runs of `entry` before byte `cut`.
#[derive(Debug)]
pub(crate) struct Reuse {
    pub(crate) entry: Arc<Entry>,
    pub(crate) cut: usize,
    /// The length of the common prefix of the cached text and the new one.
    pub(crate) common: usize,
    /// The runs covering `..cut` (the last one possibly shortened).
    pub(crate) runs: Vec<CachedRun>,
}

impl Reuse {
    /// Whether the new text is the cached text.
    pub(crate) fn is_whole(&self, text: &str) -> bool {
        self.cut == text.len() && self.entry.text.len() == text.len()
    }
}

/// The cache of one tokenizer: one store per process.
#[derive(Debug)]
pub(crate) struct PrefixCache {
    capacity: usize,
    stores: [OnceLock<Store>; PROCESSES],
}

impl PrefixCache {
    pub(crate) fn new(capacity: usize) -> Self {
        let cache = PrefixCache { capacity, stores: Default::default() };
        // The creating process's store exists before any thread can fork.
        cache.store();
        cache
    }

    /// This process's store, created on first use in a forked child; `None` past
    /// [`PROCESSES`] generations.
    pub(crate) fn store(&self) -> Option<&Store> {
        let pid = std::process::id();
        self.stores.iter().map(|slot| slot.get_or_init(|| Store::new(pid, self.capacity))).find(|s| s.pid == pid)
    }

    pub(crate) fn stats(&self) -> PrefixCacheStats {
        self.store().map_or(PrefixCacheStats { capacity: self.capacity, ..Default::default() }, Store::stats)
    }
}

#[derive(Debug)]
pub(crate) struct Store {
    pid: u32,
    capacity: usize,
    shards: Vec<Mutex<Vec<Arc<Entry>>>>,
    hasher: ahash::RandomState,
    clock: AtomicU64,
    held: AtomicUsize,
    hits: AtomicU64,
    misses: AtomicU64,
    bytes_reused: AtomicU64,
    bytes_encoded: AtomicU64,
}

impl Store {
    fn new(pid: u32, capacity: usize) -> Self {
        Store {
            pid,
            capacity,
            shards: (0..SHARDS).map(|_| Mutex::new(Vec::new())).collect(),
            hasher: ahash::RandomState::with_seeds(0x6c6f, 0x7074, 0x7072, 0x6566),
            clock: AtomicU64::new(0),
            held: AtomicUsize::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            bytes_reused: AtomicU64::new(0),
            bytes_encoded: AtomicU64::new(0),
        }
    }

    fn stats(&self) -> PrefixCacheStats {
        PrefixCacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            bytes_reused: self.bytes_reused.load(Ordering::Relaxed),
            bytes_encoded: self.bytes_encoded.load(Ordering::Relaxed),
            bytes_held: self.held.load(Ordering::Relaxed),
            entries: self.shards.iter().map(|s| s.lock().map_or(0, |s| s.len())).sum(),
            capacity: self.capacity,
        }
    }

    fn block(&self, text: &str) -> u64 {
        let mut hasher = self.hasher.build_hasher();
        hasher.write(&text.as_bytes()[..BLOCK.min(text.len())]);
        hasher.finish()
    }

    fn shard(&self, block: u64) -> &Mutex<Vec<Arc<Entry>>> {
        &self.shards[(block % SHARDS as u64) as usize]
    }

    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed)
    }

    /// The longest reusable prefix of `text` among the cached texts, if any. Counts a hit or a
    /// miss.
    pub(crate) fn lookup(&self, text: &str, rule: &CutRule) -> Option<Reuse> {
        let block = self.block(text);
        let candidates: Vec<Arc<Entry>> = match self.shard(block).lock() {
            Ok(entries) => {
                let mut same: Vec<&Arc<Entry>> = entries.iter().filter(|e| e.block == block).collect();
                same.sort_by_key(|e| std::cmp::Reverse(e.last_used.load(Ordering::Relaxed)));
                same.into_iter().take(CANDIDATES).cloned().collect()
            }
            Err(_) => Vec::new(),
        };
        // Longest common prefix first; the first candidate with a usable cut wins.
        let mut by_length: Vec<(usize, Arc<Entry>)> =
            candidates.into_iter().map(|e| (common_prefix(text.as_bytes(), e.text.as_bytes()), e)).collect();
        by_length.sort_by_key(|(l, _)| std::cmp::Reverse(*l));
        let found = by_length.into_iter().find_map(|(common, entry)| reuse(text, entry, common, rule));
        match &found {
            Some(found) => {
                found.entry.last_used.store(self.tick(), Ordering::Relaxed);
                self.hits.fetch_add(1, Ordering::Relaxed);
                self.bytes_reused.fetch_add(found.cut as u64, Ordering::Relaxed);
                self.bytes_encoded.fetch_add((text.len() - found.cut) as u64, Ordering::Relaxed);
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                self.bytes_encoded.fetch_add(text.len() as u64, Ordering::Relaxed);
            }
        }
        found
    }

    /// Holds `text` with its raw tokens `runs`; `reused` (what it was built from) is dropped
    /// when `text` departs from it at most [`SUPERSEDE`] bytes before its end, and its text
    /// buffer then becomes the new entry's, with only the new part copied, when no other thread
    /// holds the old entry. Evicts the least recently used entries beyond the bound.
    pub(crate) fn insert(&self, text: &str, runs: Vec<CachedRun>, reused: Option<Reuse>) {
        let columns = runs.iter().map(|r| segment_bytes(&r.segment) + std::mem::size_of::<CachedRun>()).sum::<usize>();
        if ENTRY_OVERHEAD + text.len() + columns > self.capacity {
            return;
        }
        let owned = match reused.filter(|r| r.entry.text.len() - r.common <= SUPERSEDE) {
            Some(old) => {
                self.remove(&old.entry);
                // The first `keep` bytes of both texts are equal, and a char boundary of the old
                // one is one of `text` (the same lead byte starts the same-length character).
                let keep = floor_char_boundary(&old.entry.text, old.common);
                match (Arc::try_unwrap(old.entry), text.get(keep..)) {
                    (Ok(old), Some(rest)) => {
                        let mut owned = old.text;
                        owned.truncate(keep);
                        owned.push_str(rest);
                        owned
                    }
                    _ => text.to_owned(),
                }
            }
            None => text.to_owned(),
        };
        // The buffer's capacity is what it holds (a text grown turn by turn may hold up to
        // twice its length).
        let bytes = ENTRY_OVERHEAD + owned.capacity() + columns;
        let block = self.block(text);
        let entry = Arc::new(Entry { text: owned, runs, block, bytes, last_used: AtomicU64::new(self.tick()) });
        if let Ok(mut entries) = self.shard(block).lock() {
            entries.push(entry);
            self.held.fetch_add(bytes, Ordering::Relaxed);
        }
        self.evict();
    }

    fn remove(&self, old: &Arc<Entry>) {
        if let Ok(mut entries) = self.shard(old.block).lock() {
            if let Some(i) = entries.iter().position(|e| Arc::ptr_eq(e, old)) {
                let removed = entries.swap_remove(i);
                self.held.fetch_sub(removed.bytes, Ordering::Relaxed);
            }
        }
    }

    /// Drops least recently used entries until the bound holds.
    fn evict(&self) {
        while self.held.load(Ordering::Relaxed) > self.capacity {
            let oldest = self
                .shards
                .iter()
                .filter_map(|shard| {
                    let entries = shard.lock().ok()?;
                    entries.iter().min_by_key(|e| e.last_used.load(Ordering::Relaxed)).cloned()
                })
                .min_by_key(|e| e.last_used.load(Ordering::Relaxed));
            match oldest {
                Some(oldest) => self.remove(&oldest),
                None => return,
            }
        }
    }
}

/// Memory of a segment's columns.
fn segment_bytes(segment: &Segment) -> usize {
    segment.ids.len() * 4
        + segment.offsets.len() * 16
        + segment.word_ids.len() * 4
        + segment.tokens.iter().map(|t| t.len() + 24).sum::<usize>()
}

/// Length of the common prefix of `a` and `b`, in bytes.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    // Equal blocks skipped with one memcmp each, from 64 KiB down to 256 bytes (a memcmp call
    // per 256 bytes cost more in calls than in comparing: 2,000 calls for a 500 KB prompt), then
    // the first differing block byte by byte.
    for step in [64 * 1024, 4 * 1024, 256] {
        while i + step <= n && a[i..i + step] == b[i..i + step] {
            i += step;
        }
    }
    i + a[i..n].iter().zip(&b[i..n]).take_while(|(x, y)| x == y).count()
}

/// The last position `p <= common` (and at most [`SEARCH`] bytes before it) that is a safe cut of
/// both `text` and the cached text, with the cached runs before it.
fn reuse(text: &str, entry: Arc<Entry>, common: usize, rule: &CutRule) -> Option<Reuse> {
    let cached: &str = &entry.text;
    let lowest = common.saturating_sub(SEARCH).max(1);
    let (cut, runs) = (lowest..=common).rev().find_map(|p| {
        let cuts_text = p == text.len() || (text.is_char_boundary(p) && rule.is_safe(text, p));
        let cuts_cached = p == cached.len() || (cached.is_char_boundary(p) && rule.is_safe(cached, p));
        if cuts_text && cuts_cached {
            runs_before(&entry.runs, p, cached.len(), rule.cuts_inside_words()).map(|runs| (p, runs))
        } else {
            None
        }
    })?;
    Some(Reuse { entry, cut, runs, common })
}

/// The runs of the cached text before its safe cut `p` (`p` = the text's length: all of them).
/// `None` when the token index or the word count at `p` cannot be read off the tokens.
///
/// At a safe cut every token before `p` ends at or before `p` and every token after starts at or
/// after it. So within the run containing `p`, the tokens before `p` are those starting before
/// `p` (found by binary search, offsets being sorted by start), and the run cut there holds the
/// pre-tokens of its bytes up to `p`: one more than the last such token's word id, provided the
/// next token confirms that no token-less pre-token lies between them. That next token has the
/// following word id where cuts are pre-token boundaries, or, with `inside_words` (cuts inside
/// pre-tokens, SentencePiece-style), the same one: the pre-token straddles `p`. With
/// `inside_words` the run's end cannot stand in for a next token (its count would include a
/// pre-token that continues past `p`), so such a `p` is refused.
fn runs_before(runs: &[CachedRun], p: usize, len: usize, inside_words: bool) -> Option<Vec<CachedRun>> {
    if p == len {
        return Some(runs.to_vec());
    }
    // The run containing byte `p`: the last one starting at or before it.
    let j = runs.partition_point(|r| r.start <= p).checked_sub(1)?;
    let run = &runs[j];
    let mut before = runs[..j].to_vec();
    let local = p - run.start;
    if local == 0 {
        return Some(before);
    }
    if run.ids_only {
        return None;
    }
    let segment = &run.segment;
    let offsets = &segment.offsets[..run.len];
    let k = offsets.partition_point(|&(s, _)| s < local);
    if k == 0 {
        return None;
    }
    let (last_start, last_end) = offsets[k - 1];
    if last_end > local || last_start == last_end {
        return None;
    }
    let w = segment.word_ids[k - 1];
    let words = w.checked_add(1)?;
    let next_word = if inside_words { w } else { words };
    let confirmed = match offsets.get(k) {
        Some(&(s, e)) => s >= local && s < e && segment.word_ids[k] == next_word,
        None => !inside_words && run.words == words,
    };
    if !confirmed {
        return None;
    }
    before.push(CachedRun { segment: Arc::clone(segment), len: k, start: run.start, words, ids_only: false });
    Some(before)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_prefix_counts_equal_bytes() {
        let a = "x".repeat(1000);
        let mut b = a.clone();
        b.replace_range(700..701, "y");
        assert_eq!(common_prefix(a.as_bytes(), b.as_bytes()), 700);
        assert_eq!(common_prefix(a.as_bytes(), &a.as_bytes()[..10]), 10);
        assert_eq!(common_prefix(b"", b"abc"), 0);
        // Differences at every level of the block steps (64 KiB, 4 KiB, 256 bytes, bytes).
        let long = "ab".repeat(100_000);
        for at in [0, 255, 256, 4095, 4096, 65_535, 65_536, 70_001, 199_999] {
            let mut changed = long.clone().into_bytes();
            changed[at] = b'z';
            assert_eq!(common_prefix(long.as_bytes(), &changed), at);
        }
        assert_eq!(common_prefix(long.as_bytes(), long.as_bytes()), long.len());
    }
}
