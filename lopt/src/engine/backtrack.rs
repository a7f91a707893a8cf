//! Linear-time BPE for long words, shared by the byte-level engine (`engine/bpe`, symbols are
//! bytes) and the SentencePiece-style one (`engine/spm`, symbols are characters or fallback
//! bytes): a backtracking search for the one tokenization whose adjacent tokens are all
//! *compatible*, which is exactly BPE's output (the argument is in `docs/correctness.md`, section
//! 4.1; it is about sequences of initial symbols and holds for any alphabet of them).
//!
//! The heap merge costs O(n log n) with a cache miss per heap level once the heap outgrows the
//! caches: a 1 MB word (one letter repeated, a run of spaces) ran 8-11x slower per byte than
//! prose. Here each step takes the longest vocabulary token at the current position (a walk down a
//! trie of the tokens' initial symbols) and keeps it when the token before it and it are
//! compatible, else tries its next shorter prefix token, else steps back one token; a position
//! from which no token was kept is marked dead and never tried again, so the work is linear in the
//! word times the token length.
//!
//! Two tokens `a`, `b` are *compatible* when BPE of `a`'s symbols then `b`'s is `[a, b]`; the
//! first token must be *reachable* (BPE of its symbols is itself). Both are decided by merging
//! those symbols with the ordinary merge (`engine/merge_core.rs`), so nothing here depends on
//! properties of the merge ranks, nor on the spellings being the ones BPE builds the tokens from:
//! a token spelled wrongly is never compatible, so the search only loses it (and falls back to the
//! heap merge if it needed it). The answers are memoized per call, which makes repetitive words
//! (the slow case of the heap) cheap.
//!
//! Words of short tokens (random digits: 3.6 checks per token, most of them rank walks the memo
//! cannot answer) are first merged in windows of [`WINDOW`] symbols by the stack merge, with one
//! compatibility check at each joint between windows ([`Backtrack::windows`]); the search takes
//! over where that pass gives up or finds long tokens. Long words of short tokens are taken by two
//! streams of windows at once (from the start and from the middle, merged in lockstep so that the
//! two chains of dependent merges overlap), joined where the first reaches a boundary of the
//! second's tokens with a compatible joint. Invariant of all: the tokens kept are
//! pairwise compatible and spelled by the symbols they cover, so they are BPE of those symbols;
//! the work stays linear (each window moves on by at least one token, failed joints are bounded).
//! The windows of a word that starts with a digit read their pairs from a dense table of the
//! short digit tokens' merges (`table::Dense`, filled from the merge table, so its answers are the
//! merge table's), built with the search.

use crate::engine::bpe::table::{Dense, MergeMap, U64Map, EMPTY, NO_RANK};
use crate::engine::merge_core::{self, Pairs, WithDense};

const NONE: u32 = u32::MAX;

/// Entries of the per-call memo of compatibility answers (direct-mapped).
const MEMO: usize = 1 << 12;

/// Symbols per window of [`Backtrack::encode`]'s windowed pass: what the stack merge takes.
const WINDOW: usize = merge_core::SCAN_LIMIT;

/// Symbols at a window's right end whose tokens the windowed pass does not keep (BPE of the
/// window decides them without the text after it), and how far it steps back past a joint that
/// fails. Tuned on random digits (claude, gpt2): see `docs/benchmarks.md`, session 9.
const MARGIN: usize = 4;

/// How the merge of one token's symbols alone ends ([`Backtrack::walks`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct History {
    /// The two tokens the last merge joined (the token itself twice for one symbol).
    left: u32,
    right: u32,
    /// The last merge's rank plus one; 0 for one symbol, which no merge made.
    rank: u32,
    /// BPE of the token's symbols alone is the token.
    reachable: bool,
    /// The ranks that merge applied never decrease (always true for one symbol).
    increasing: bool,
}

/// The compiled search; built once per model, on first use or with the seed cache.
pub(crate) struct Backtrack {
    /// Trie of the tokens' spellings below depth 2: `node << 32 | symbol` to the child, packed
    /// with the token it spells ([`pack`]), so that each step of a walk costs one probe.
    trie: U64Map,
    /// The root's children by symbol, packed ([`EMPTY`] for none): a direct read.
    first: Vec<u64>,
    /// Where the root's children are at most 256 (a byte alphabet): each child symbol's index,
    /// and the grandchildren by `index[a] * 256 + index[b]`, packed: the first two steps of every
    /// walk then read small arrays that stay in cache instead of probing the table. Empty
    /// otherwise.
    index: Vec<u16>,
    second: Vec<u64>,
    /// By token id: the longest token that is a proper prefix of it, [`NONE`] for a symbol.
    shorter: Vec<u32>,
    /// By token id: its initial symbols, `symbols[starts[id]..starts[id + 1]]`.
    starts: Vec<u32>,
    symbols: Vec<u32>,
    /// By token id: how the merge of its symbols alone ends, for the rank walk of
    /// [`Self::compatible`].
    walks: Vec<History>,
    /// The symbols of the dense alphabet (the digits, [`Self::with_digits`]; empty for none):
    /// windows of words that start with one look their pairs up in [`Self::dense`].
    digits: Vec<u32>,
    /// The [`Dense`] table of the tokens spelled by at most [`DENSE_LEFT`] symbols of `digits`
    /// (left) and at most [`DENSE_RIGHT`] (right), built with the search (claude: 1.3 ms, about
    /// 0.6 MB; so that the first digit word does not wait for it); `None` when there is no token
    /// of two or more digits, or when the ranks do not fit its cells ([`Dense::fits`]).
    dense: Option<Dense>,
}

/// Longest spelling, in symbols, of [`Backtrack::dense`]'s left and right tokens: random digits'
/// window lookups are 91 % between tokens of at most 3 and at most 2 digits (claude, session 14's
/// count), and the table is then about 480 KB (claude: 1,099 x 110 cells of 4 bytes).
const DENSE_LEFT: usize = 3;
const DENSE_RIGHT: usize = 2;

/// Reusable buffers of [`Backtrack::encode`].
#[derive(Default)]
pub(crate) struct Scratch {
    tokens: Vec<u32>,
    /// One bit per position `0..=n`: set while a tokenization of the rest may start there.
    alive: Vec<u64>,
    /// `(left << 32 | right, compatible)`, `right` = [`NONE`] for "is `left` reachable".
    memo: Vec<(u64, bool)>,
    pair: Vec<u32>,
    merged: Vec<u32>,
    merge: merge_core::Scratch,
    /// One window's tokens: `(id, end)`, `end` relative to the window's start.
    window: Vec<(u32, u32)>,
    /// The second stream's tokens and window ([`Backtrack::windows`]).
    other: Vec<u32>,
    other_window: Vec<(u32, u32)>,
}

/// One stream of windows of [`Backtrack::windows`]: where its next window starts (relative to
/// its text), the tokens kept before it, the joints that failed.
struct Stream {
    pos: usize,
    tokens: Vec<u32>,
    failures: usize,
}

/// Whether a stream goes on after a window ([`Backtrack::advance`]).
enum Flow {
    Next,
    Stop(bool),
}

/// Words of at least this many symbols are taken by two streams of windows
/// ([`Backtrack::windows`]).
const PAIR_MIN: usize = 8 * WINDOW;

/// How far past the middle the first stream looks for a boundary of the second's tokens.
const SYNC: usize = 4 * WINDOW;

impl Backtrack {
    /// Compiles the search from the tokens' spellings by id (`symbols[starts[id]..starts[id +
    /// 1]]`, empty for an id that is not a token); `None` when the arrays are inconsistent or too
    /// large for the trie's 32-bit nodes.
    pub(crate) fn new(merges: &MergeMap, starts: Vec<u32>, symbols: Vec<u32>) -> Option<Backtrack> {
        Self::build(merges, starts, symbols, false)
    }

    /// [`Self::new`] with the trie and the histories (neither reads the other) built side by side
    /// on the current rayon pool when `side_by_side` and the caller is on one (else one after the
    /// other). Only for a caller that holds no lock a pool task could also want: a join may run
    /// another task of the pool on this thread meanwhile (a lazy build inside a `OnceLock`
    /// initializer could so re-enter its own cell, which deadlocks), so the seed's synchronous
    /// build alone asks for it and stores the result itself.
    pub(crate) fn build(
        merges: &MergeMap,
        starts: Vec<u32>,
        symbols: Vec<u32>,
        side_by_side: bool,
    ) -> Option<Backtrack> {
        let size = starts.len().checked_sub(1)?;
        if starts.windows(2).any(|w| w[0] > w[1]) || starts.last().copied()? as usize != symbols.len() {
            return None;
        }
        // Shorter tokens first, so that a token's prefixes are in the trie when it is inserted
        // and its longest shorter prefix is the last token met on its path.
        let ids = by_length(&starts);
        let trie = || Self::trie(size, &starts, &symbols, &ids);
        let walks = || histories(merges, &starts, &symbols, &ids);
        let (built, walks) = if side_by_side && rayon::current_thread_index().is_some() {
            rayon::join(trie, walks)
        } else {
            (trie(), walks())
        };
        let (trie, first, index, second, shorter) = built?;
        Some(Backtrack { trie, first, index, second, shorter, starts, symbols, walks, digits: Vec::new(), dense: None })
    }

    /// This search with `digits` (symbols) as the alphabet of its dense table of digit tokens'
    /// merges under `merges` (the table it was built with), built now ([`Self::dense`]).
    pub(crate) fn with_digits(mut self, merges: &MergeMap, digits: Vec<u32>) -> Backtrack {
        self.digits = digits;
        // Most vocabularies have more ranks than the table's cells hold (every one of ours but
        // gpt2's and claude's): then there is no table, and no set to collect for it (a pass over
        // every token's spelling, about 1 ms at 200 K tokens, and a 2-byte index per id).
        if !Dense::fits(merges) {
            return self;
        }
        // Right tokens (shorter) first, so that they are a prefix of the left set.
        let mut left: Vec<(usize, u32)> = (0..self.starts.len().saturating_sub(1) as u32)
            .filter_map(|id| {
                let s = self.spelling(id);
                let short = !s.is_empty() && s.len() <= DENSE_LEFT;
                (short && s.iter().all(|c| self.digits.contains(c))).then_some((s.len(), id))
            })
            .collect();
        if left.iter().any(|&(len, _)| len >= 2) {
            left.sort_unstable();
            let right = left.iter().filter(|&&(len, _)| len <= DENSE_RIGHT).count();
            let left: Vec<u32> = left.into_iter().map(|(_, id)| id).collect();
            self.dense = Dense::new(merges, &left, right);
        }
        self
    }

    /// The compiled trie of the spellings (`ids`: those with one, shortest first) and each
    /// token's longest shorter prefix token; `None` when it outgrows 32-bit nodes.
    #[allow(clippy::type_complexity)]
    fn trie(
        size: usize,
        starts: &[u32],
        symbols: &[u32],
        ids: &[u32],
    ) -> Option<(U64Map, Vec<u64>, Vec<u16>, Vec<u64>, Vec<u32>)> {
        // About two nodes per token on the fixtures (deepseek_v3: 274K for 128K); the table grows
        // past that if needed. Sized by the symbols instead (one node each at most), it was four
        // times larger: more to fill and more cache misses per probe.
        let mut trie = U64Map::with_capacity(ids.len() * 2);
        // The trie's edges in the order the nodes are made, so that compiling them reads a list
        // instead of every slot of the table.
        let mut edges: Vec<(u64, u32)> = Vec::with_capacity(ids.len() * 2);
        let mut node_token = vec![NONE];
        let mut shorter = vec![NONE; size];
        for &id in ids {
            let mut node = 0u64;
            let mut prefix = NONE;
            for &s in &symbols[starts[id as usize] as usize..starts[id as usize + 1] as usize] {
                let token = node_token[node as usize];
                if token != NONE {
                    prefix = token;
                }
                let key = node << 32 | u64::from(s);
                node = match trie.get(key) {
                    Some(child) => child,
                    None => {
                        let child = node_token.len() as u64;
                        // Nodes below 2^31 (the packed [`LEAF`] flag above them), so no key
                        // is the table's reserved one.
                        if child >= LEAF {
                            return None;
                        }
                        trie.insert(key, child);
                        edges.push((key, child as u32));
                        node_token.push(NONE);
                        child
                    }
                };
            }
            // Two ids with one spelling: the later (larger) one is never produced, as in a trie
            // of distinct strings; the compatibility checks still hold the kept one to BPE.
            if node_token[node as usize] == NONE {
                node_token[node as usize] = id;
            }
            shorter[id as usize] = prefix;
        }
        let (trie, first, index, second) = compile(&edges, &node_token);
        Some((trie, first, index, second, shorter))
    }

    /// The longest token that `text` starts with ([`NONE`] when no token spells its first
    /// symbol).
    #[inline]
    fn longest(&self, text: &[u32]) -> u32 {
        let Some(&first) = text.first() else { return NONE };
        let entry = self.first.get(first as usize).copied().unwrap_or(EMPTY);
        if entry == EMPTY {
            return NONE;
        }
        let mut found = entry as u32;
        let mut node = entry >> 32;
        if node & LEAF != 0 {
            return found;
        }
        let mut rest = &text[1..];
        let at = |s: u32| self.index.get(s as usize).copied().filter(|&i| i != u16::MAX);
        // A grandchild under a symbol outside the grid is in the table, read below.
        if let (Some(a), Some(b)) = (at(first), rest.first().and_then(|&s| at(s))) {
            let entry = self.second.get(usize::from(a) << 8 | usize::from(b)).copied().unwrap_or(EMPTY);
            if entry == EMPTY {
                return found;
            }
            if entry as u32 != NONE {
                found = entry as u32;
            }
            node = entry >> 32;
            if node & LEAF != 0 {
                return found;
            }
            rest = &rest[1..];
        }
        for &s in rest {
            let Some(entry) = self.trie.get(node << 32 | u64::from(s)) else { break };
            if entry as u32 != NONE {
                found = entry as u32;
            }
            node = entry >> 32;
            if node & LEAF != 0 {
                break;
            }
        }
        found
    }

    /// Whether BPE of the token `id`'s symbols alone is `[id]`.
    pub(crate) fn reachable(&self, id: u32) -> bool {
        self.walks.get(id as usize).is_some_and(|walk| walk.reachable)
    }

    /// The initial symbols of the token `id` (empty for an id that is not a token).
    #[inline]
    fn spelling(&self, id: u32) -> &[u32] {
        match (self.starts.get(id as usize), self.starts.get(id as usize + 1)) {
            (Some(&from), Some(&to)) => &self.symbols[from as usize..to as usize],
            _ => &[],
        }
    }

    /// Whether BPE of `left`'s symbols then `right`'s is `[left, right]` (`right` = [`NONE`]:
    /// whether BPE of `left`'s symbols is `[left]`), by the rank walk when both tokens' own
    /// merges apply non-decreasing ranks, else by merging them; memoized in `scratch`.
    #[inline]
    fn compatible(&self, merges: &MergeMap, left: u32, right: u32, scratch: &mut Scratch) -> bool {
        let (Some(a), b) = (self.walks.get(left as usize), self.walks.get(right as usize)) else { return false };
        if !a.reachable || b.is_some_and(|b| !b.reachable) {
            return false;
        }
        let Some(b) = b else { return true };
        let key = u64::from(left) << 32 | u64::from(right);
        let slot = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 52) as usize % MEMO;
        if let Some(&(k, answer)) = scratch.memo.get(slot) {
            if k == key {
                return answer;
            }
        }
        if a.increasing && b.increasing {
            let answer = self.walk(merges, left, right);
            if let Some(entry) = scratch.memo.get_mut(slot) {
                *entry = (key, answer);
            }
            return answer;
        }
        let Scratch { pair, merged, merge, memo, .. } = scratch;
        pair.clear();
        pair.extend_from_slice(self.spelling(left));
        if right != NONE {
            pair.extend_from_slice(self.spelling(right));
        }
        merged.clear();
        merge_core::merge(merges, pair, merge, |id, _| merged.push(id));
        let answer = if right == NONE { merged[..] == [left] } else { merged[..] == [left, right] };
        if let Some(entry) = memo.get_mut(slot) {
            *entry = (key, answer);
        }
        answer
    }

    /// Whether BPE of `left`'s symbols then `right`'s is `[left, right]`, for two reachable
    /// tokens whose own merges apply non-decreasing ranks (`docs/correctness.md` 4.1, "rank
    /// walk"). Their merges then run, until a merge crosses the edge, in rank order (leftmost
    /// first among equal ranks), so the pairs that meet at the edge are, latest first: the two
    /// tokens, then the state before the later of their last merges, and so on. A pair at the
    /// edge is merged across it iff its rank is below the last merge that ends its time at the
    /// edge (or equal, when that merge is on the right: the edge pair is then further left).
    fn walk(&self, merges: &MergeMap, left: u32, right: u32) -> bool {
        rank_walk(&self.walks, merges, left, right, true)
    }

    /// BPE of the initial symbols `text` under `merges`, reported with `emit` as `(id, last)`
    /// like [`merge_core::merge`] (the index of the last symbol each token covers); `false` (and
    /// nothing emitted) if the search fails, which the argument of the module rules out when every
    /// token BPE needs is spelled right, and which then leaves the word to the heap merge.
    ///
    /// Tried first: the windowed pass ([`Self::windows`]), which merges the text a stack-sized
    /// window at a time and checks one compatibility per window instead of several per token;
    /// where it gives up, the search.
    pub(crate) fn encode(
        &self,
        merges: &MergeMap,
        text: &[u32],
        scratch: &mut Scratch,
        mut emit: impl FnMut(u32, usize),
    ) -> bool {
        if scratch.memo.len() != MEMO {
            scratch.memo = vec![(u64::MAX, false); MEMO];
        }
        scratch.tokens.clear();
        let found = text.len() > WINDOW && self.windows_of(merges, text, scratch) || self.search(merges, text, scratch);
        if found {
            let mut end = 0usize;
            for &id in &scratch.tokens {
                end += self.spelling(id).len();
                emit(id, end - 1);
            }
        }
        found
    }

    /// [`Self::windows`] with the lookups of [`Self::dense`] where `text` starts with a digit
    /// (the same answers as `merges`', from a table that stays in L2), else of `merges`.
    fn windows_of(&self, merges: &MergeMap, text: &[u32], scratch: &mut Scratch) -> bool {
        if let Some(dense) = &self.dense {
            if text.first().is_some_and(|c| self.digits.contains(c)) {
                return self.windows(merges, &WithDense(merges, dense), text, scratch);
            }
        }
        self.windows(merges, merges, text, scratch)
    }

    /// BPE of `text` into `scratch.tokens` by windows (`false` when it gives up): merge the
    /// symbols from the end of the tokens kept so far, a window of [`WINDOW`] at a time, with the
    /// stack merge; keep the window's tokens up to [`MARGIN`] symbols before its end (all of them
    /// at the text's end), provided that the window's first token is compatible with the last
    /// token kept. Exact by claim 1 of `docs/correctness.md` 4.1: the tokens of one window's BPE
    /// are pairwise compatible (its "only if" direction, applied to the window's text), every
    /// joint between windows is checked, and the first token is BPE's output, so reachable; the
    /// check reads the two tokens' spellings, so it also asks that these are the symbols the
    /// tokens cover. Where a joint fails, the kept tokens are dropped back at least [`MARGIN`]
    /// symbols before it, so that the next window sees the joint's text with context on both
    /// sides; past a budget of failures (a cycle, or a text where the margin is too short), the
    /// pass gives up and the search takes the word from its start.
    ///
    /// Where the first window's tokens are long (more than 3 symbols each on average: runs of one letter,
    /// of spaces), the search is cheaper (few checks per symbol, most of them answered by its
    /// memo) than merging windows that keep one or two tokens each, so the search goes on from
    /// the tokens kept so far (`false` with them in `scratch.tokens`): they are compatible
    /// pairwise, so they are BPE of their text (claim 2), as the search's own would be.
    ///
    /// Words of [`PAIR_MIN`] symbols or more whose first window's tokens average 2 symbols or
    /// more are taken by two streams of windows at once, one from the start and one from the
    /// middle, whose window merges run in lockstep
    /// ([`merge_core::merge_window_pair`]: a window's merge is a chain of dependent steps, and two
    /// chains overlap on one core). The second stream's tokens are BPE of the text from the middle
    /// (pairwise compatible, by the same argument); the first stream goes on until it ends at one
    /// of their boundaries with a compatible joint, then takes the second stream's tokens from
    /// there: every adjacent pair of the result is then compatible, so it is BPE (claim 1). Where
    /// they do not meet within [`SYNC`] symbols past the middle, or the second stream gives up,
    /// the first goes on alone.
    fn windows<P: Pairs>(&self, merges: &MergeMap, pairs: &P, text: &[u32], scratch: &mut Scratch) -> bool {
        let n = text.len();
        let mut a = Stream { pos: 0, tokens: std::mem::take(&mut scratch.tokens), failures: 0 };
        let mut b = Stream { pos: 0, tokens: std::mem::take(&mut scratch.other), failures: 0 };
        b.tokens.clear();
        let (mut wa, mut wb) = (std::mem::take(&mut scratch.window), std::mem::take(&mut scratch.other_window));
        let budget = n / (4 * WINDOW) + 4;
        let half = if n >= PAIR_MIN { n / 2 } else { n };
        let rest = &text[half..];
        // The second stream is merging (decided after the first window: only where its tokens
        // average 2 symbols or more, so that merges dominate its windows; gpt2's runs of spaces,
        // 1.1 symbols a token, lost 15 % with it); where its tokens start (index, position in
        // `text`) at or before the first stream's end.
        let mut paired = false;
        let mut decided = half >= n;
        let (mut at, mut edge) = (0usize, half);
        let done = loop {
            let end = (a.pos + WINDOW).min(n);
            wa.clear();
            if paired {
                let stop = (b.pos + WINDOW).min(rest.len());
                wb.clear();
                merge_core::merge_window_pair(
                    pairs,
                    &text[a.pos..end],
                    &rest[b.pos..stop],
                    |id, last| wa.push((id, last as u32 + 1)),
                    |id, last| wb.push((id, last as u32 + 1)),
                );
                match self.advance(merges, rest, &mut b, &wb, budget, scratch) {
                    Flow::Next => {}
                    Flow::Stop(true) => paired = false,
                    Flow::Stop(false) => {
                        paired = false;
                        b.tokens.clear();
                    }
                }
            } else {
                merge_core::merge_window(pairs, &text[a.pos..end], |id, last| wa.push((id, last as u32 + 1)));
            }
            match self.advance(merges, text, &mut a, &wa, budget, scratch) {
                Flow::Next => {}
                Flow::Stop(done) => break done,
            }
            if !decided {
                decided = true;
                paired = a.tokens.len() * 2 <= a.pos;
            }
            if a.pos < half || b.tokens.is_empty() {
                continue;
            }
            // The second stream's boundary at or before the first's end (which may have stepped
            // back since the last look).
            while edge > a.pos && at > 0 {
                at -= 1;
                edge -= self.spelling(b.tokens[at]).len();
            }
            while edge < a.pos && at < b.tokens.len() {
                edge += self.spelling(b.tokens[at]).len();
                at += 1;
            }
            let meets = edge == a.pos
                && at < b.tokens.len()
                && a.tokens.last().is_some_and(|&last| self.compatible(merges, last, b.tokens[at], scratch));
            if meets {
                a.tokens.extend_from_slice(&b.tokens[at..]);
                a.pos = half + b.pos;
            }
            if meets || a.pos > half + SYNC || edge < a.pos {
                // Met, or no boundary left to meet: the first stream goes on alone.
                paired = false;
                b.tokens.clear();
                if a.pos >= n {
                    break true;
                }
            }
        };
        scratch.tokens = a.tokens;
        scratch.other = b.tokens;
        scratch.window = wa;
        scratch.other_window = wb;
        done
    }

    /// One window of a stream of [`Self::windows`] over `text` (the word, or its part from the
    /// middle): `window` is BPE of `text[stream.pos..]`'s next [`WINDOW`] symbols, as `(id, end)`
    /// with ends relative to `stream.pos`. Checks the joint with the tokens kept, keeps the window's
    /// tokens up to [`MARGIN`] symbols before its end (or steps back where the joint fails), and
    /// says whether the stream goes on: `Stop(true)` at the end of `text`, `Stop(false)` where it
    /// gives up (tokens cleared), or where the first window's tokens are long (tokens kept).
    fn advance(
        &self,
        merges: &MergeMap,
        text: &[u32],
        stream: &mut Stream,
        window: &[(u32, u32)],
        budget: usize,
        scratch: &mut Scratch,
    ) -> Flow {
        let n = text.len();
        let Stream { pos, tokens, failures } = stream;
        let end = (*pos + WINDOW).min(n);
        let Some(&(first, first_end)) = window.first() else { return Flow::Stop(false) };
        let joins = match tokens.last() {
            None => true,
            Some(&last) => {
                let before = self.spelling(last);
                self.spelling(first) == &text[*pos..*pos + first_end as usize]
                    && *pos >= before.len()
                    && before == &text[*pos - before.len()..*pos]
                    && self.compatible(merges, last, first, scratch)
            }
        };
        if !joins {
            *failures += 1;
            if *failures > budget {
                tokens.clear();
                return Flow::Stop(false);
            }
            let back = pos.saturating_sub(MARGIN);
            while *pos > back {
                let Some(last) = tokens.pop() else { break };
                *pos -= self.spelling(last).len();
            }
            return Flow::Next;
        }
        // At least the first token, so that every window moves on.
        let keep = if end == n { n - *pos } else { (end - *pos - MARGIN).max(first_end as usize) };
        let mut kept = 0;
        let mut spelled = true;
        for &(id, stop) in window {
            if stop as usize > keep {
                break;
            }
            // Positions are recounted from the spellings (stepping back, emitting).
            spelled &= self.spelling(id).len() == stop as usize - kept;
            tokens.push(id);
            kept = stop as usize;
        }
        if !spelled {
            tokens.clear();
            return Flow::Stop(false);
        }
        // Decided on the first window: the tokens of random digits (2.4 symbols each on
        // claude) fluctuate from window to window.
        if tokens.len() * 3 < kept && *pos == 0 && kept < n {
            return Flow::Stop(false);
        }
        *pos += kept;
        if *pos >= n {
            Flow::Stop(true)
        } else {
            Flow::Next
        }
    }

    /// The backtracking search of the module's header into `scratch.tokens`, going on from the
    /// tokens there (pairwise compatible, spelled by the start of `text`); `false` if it fails.
    fn search(&self, merges: &MergeMap, text: &[u32], scratch: &mut Scratch) -> bool {
        let n = text.len();
        let mut tokens = std::mem::take(&mut scratch.tokens);
        let mut alive = std::mem::take(&mut scratch.alive);
        alive.clear();
        alive.resize(n / 64 + 1, u64::MAX);
        let mut pos: usize = tokens.iter().map(|&id| self.spelling(id).len()).sum();
        // The tokens given are not the search's own choices: where it steps back into them, it
        // tries every token at that position (not only those shorter than the one it drops,
        // which is all that is left after its own longest-first tries).
        let mut given = tokens.len();
        let mut next = self.longest(text.get(pos..).unwrap_or(&[]));
        let mut found = next != NONE || pos == n;
        while found && pos < n {
            let mut token = next;
            let last = tokens.last().copied().unwrap_or(NONE);
            loop {
                let end = pos + self.spelling(token).len();
                if alive[end / 64] >> (end % 64) & 1 != 0
                    && (if last == NONE {
                        self.compatible(merges, token, NONE, scratch)
                    } else {
                        self.compatible(merges, last, token, scratch)
                    })
                {
                    tokens.push(token);
                    pos = end;
                    next = self.longest(&text[pos..]);
                    if next == NONE && pos < n {
                        found = false;
                    }
                    break;
                }
                let shorter = self.shorter[token as usize];
                if shorter != NONE {
                    token = shorter;
                    continue;
                }
                // No token fits at `pos` after `last`: `pos` is dead; step back.
                alive[pos / 64] &= !(1u64 << (pos % 64));
                match tokens.pop() {
                    Some(last) => {
                        pos -= self.spelling(last).len();
                        next = last;
                        if tokens.len() < given {
                            given = tokens.len();
                            // `last` is among them again; its end is dead, so it fails at once.
                            next = self.longest(&text[pos..]);
                        }
                    }
                    None => found = false,
                }
                break;
            }
        }
        scratch.tokens = tokens;
        scratch.alive = alive;
        found
    }
}

#[cfg(test)]
impl Backtrack {
    /// The search alone, going on from `given` (BPE of a prefix of `text`), for the tests.
    pub(crate) fn search_from(&self, merges: &MergeMap, text: &[u32], given: &[u32]) -> Option<Vec<u32>> {
        let mut scratch = Scratch { memo: vec![(u64::MAX, false); MEMO], ..Scratch::default() };
        scratch.tokens.extend_from_slice(given);
        self.search(merges, text, &mut scratch).then_some(scratch.tokens)
    }

    /// Compares every token's history with the textbook loop's ([`history`]), and the rank walk
    /// with merging the pair's symbols on every pair of reachable tokens whose merges apply
    /// non-decreasing ranks, among `limit` such tokens spread over the ids; returns the number
    /// of such tokens and of reachable tokens without the property.
    pub(crate) fn check_walks(&self, merges: &MergeMap, limit: usize) -> (usize, usize) {
        let walkable: Vec<u32> = (0..self.walks.len() as u32)
            .filter(|&id| self.walks[id as usize].reachable && self.walks[id as usize].increasing)
            .collect();
        let others = self.walks.iter().filter(|h| h.reachable && !h.increasing).count();
        for (id, walk) in self.walks.iter().enumerate() {
            assert_eq!(*walk, history(merges, id as u32, self.spelling(id as u32)), "history of token {id}");
        }
        let mut scratch = Scratch { memo: vec![(u64::MAX, false); MEMO], ..Scratch::default() };
        let step = (walkable.len() / limit.max(1)).max(1);
        let sample: Vec<u32> = walkable.iter().step_by(step).take(limit).copied().collect();
        for &a in &sample {
            for &b in &sample {
                let walked = self.walk(merges, a, b);
                // The memo is keyed by the pair: clear the slot so the merge runs.
                scratch.memo.iter_mut().for_each(|m| *m = (u64::MAX, false));
                let pair: Vec<u32> = self.spelling(a).iter().chain(self.spelling(b)).copied().collect();
                let mut merged = Vec::new();
                merge_core::merge_heap(merges, &pair, &mut scratch.merge, |id, _| merged.push(id));
                assert_eq!(walked, merged[..] == [a, b], "tokens {a} and {b}: {pair:?} merges to {merged:?}");
            }
        }
        (walkable.len(), others)
    }
}

/// [`Backtrack::walk`] over `walks`; without `edge`, the pair `left`, `right` itself is not
/// checked, only the pairs that met at the edge before it: whether BPE of `left`'s symbols then
/// `right`'s reaches `[left, right]` with no merge across the edge (what [`histories`] asks of a
/// merge that makes a token). Every id it reads (the tokens and their histories' `left` and
/// `right`) must index `walks`.
#[inline]
fn rank_walk(walks: &[History], merges: &MergeMap, mut left: u32, mut right: u32, edge: bool) -> bool {
    // In ranks plus one: the cross pair must rank at or above this.
    let mut limit = u64::MAX;
    let mut check = edge;
    loop {
        if check {
            let rank = merges.rank(left, right);
            if rank != NO_RANK && u64::from(rank) + 1 < limit {
                return false;
            }
        }
        check = true;
        let (l, r) = (walks[left as usize], walks[right as usize]);
        if l.rank > r.rank {
            limit = u64::from(l.rank);
            left = l.right;
        } else if r.rank > 0 {
            limit = u64::from(r.rank) + 1;
            right = r.left;
        } else {
            return true;
        }
    }
}

/// Every id's [`History`] (the spellings as in [`Backtrack::new`]; `by_length`: the ids with a
/// spelling, shortest first), each derived from the histories of the two tokens of the merges
/// that make it, instead of merging its symbols (that textbook loop, [`history`], was 60 % of
/// the search's build: 192 M instructions for deepseek_v3's 128K tokens).
///
/// Why that is exact: if BPE of a token's symbols ends in the token, its last merge joined two
/// tokens `l`, `r` whose spellings make the token's, by a merge `(l, r)` that makes it, and no
/// earlier merge crossed the edge between them (a symbol only grows). Then the merges left of the
/// edge are those of BPE of `l`'s symbols alone, in the same order (among equal ranks the left
/// side's go first, as alone), and likewise right of it: both reach their token, so `l` and `r`
/// are reachable, and the rank walk decides, for two tokens whose ranks never decrease, whether
/// some earlier pair at the edge would merge first. Conversely, when the walk finds no such pair,
/// BPE reaches `[l, r]` and then merges it. So the token is reachable exactly when one of its
/// merges passes; the ranks it applies are its two parts' interleaved (in rank order when both
/// are non-decreasing) and then the last merge's. A token with a merge whose parts' ranks
/// decrease somewhere gets the textbook loop, as does any token whose parts cannot be decided.
/// `Backtrack::check_walks` compares both on every token in the tests.
fn histories(merges: &MergeMap, starts: &[u32], symbols: &[u32], by_length: &[u32]) -> Vec<History> {
    let size = starts.len().saturating_sub(1);
    let spelling = |id: u32| match (starts.get(id as usize), starts.get(id as usize + 1)) {
        (Some(&from), Some(&to)) => &symbols[from as usize..to as usize],
        _ => &[],
    };
    // The merges by the id they make, `(left, right, rank)`: id `t`'s are
    // `makes[first[t]..first[t + 1]]` (counted, then placed: no sort).
    let mut first = vec![0u32; size + 1];
    for (_, _, _, merged) in merges.iter() {
        if let Some(count) = first.get_mut(merged as usize + 1).filter(|_| (merged as usize) < size) {
            *count += 1;
        }
    }
    for k in 1..first.len() {
        first[k] += first[k - 1];
    }
    let mut next = first.clone();
    let mut makes = vec![(0u32, 0u32, 0u32); first.last().map_or(0, |&n| n as usize)];
    for (left, right, rank, merged) in merges.iter() {
        if let Some(at) = next.get_mut(merged as usize).filter(|_| (merged as usize) < size) {
            makes[*at as usize] = (left, right, rank);
            *at += 1;
        }
    }
    let mut walks = vec![UNREACHABLE; size];
    for &id in by_length {
        let whole = spelling(id);
        if whole.len() < 2 {
            walks[id as usize] = history(merges, id, whole);
            continue;
        }
        let mut found = None;
        let mut undecided = false;
        for &(left, right, rank) in &makes[first[id as usize] as usize..first[id as usize + 1] as usize] {
            let (l, r) = (spelling(left), spelling(right));
            // Parts that do not spell the token, or that are not shorter (so not yet known).
            if l.is_empty()
                || r.is_empty()
                || l.len() + r.len() != whole.len()
                || !whole.starts_with(l)
                || !whole.ends_with(r)
            {
                continue;
            }
            let (a, b) = (walks[left as usize], walks[right as usize]);
            if !a.reachable || !b.reachable {
                continue;
            }
            if !(a.increasing && b.increasing) {
                undecided = true;
                continue;
            }
            if rank_walk(&walks, merges, left, right, false) {
                let rank = rank.saturating_add(1);
                let increasing = rank >= a.rank && rank >= b.rank;
                found = Some(History { left, right, rank, reachable: true, increasing });
                break;
            }
        }
        walks[id as usize] = match found {
            Some(walk) => walk,
            None if undecided => history(merges, id, whole),
            None => UNREACHABLE,
        };
    }
    walks
}

/// The ids with a spelling (`symbols[starts[id]..starts[id + 1]]` not empty), shortest first and
/// in id order within a length: counted by length, then placed (a comparison sort of 128K-200K
/// ids was 9-15 M instructions before the search's two parts start).
fn by_length(starts: &[u32]) -> Vec<u32> {
    let len = |id: usize| (starts[id + 1] - starts[id]) as usize;
    let size = starts.len().saturating_sub(1);
    let longest = (0..size).map(len).max().unwrap_or(0);
    // `first[l]`: where the ids of length `l` start (the empty spellings, below `first[1]`, are
    // left out).
    let mut first = vec![0usize; longest + 2];
    for id in 0..size {
        first[len(id) + 1] += 1;
    }
    for k in 1..first.len() {
        first[k] += first[k - 1];
    }
    let skip = first[1];
    let mut ids = vec![0u32; first[longest + 1] - skip];
    for id in 0..size {
        let l = len(id);
        if l > 0 {
            ids[first[l] - skip] = id as u32;
            first[l] += 1;
        }
    }
    ids
}

/// The history of an id that BPE never produces alone (or that is not a token).
const UNREACHABLE: History = History { left: NONE, right: NONE, rank: 0, reachable: false, increasing: false };

/// Set in a packed node (ids stay below it) that has no children.
const LEAF: u64 = 1 << 31;

/// A trie node and the token it spells ([`NONE`] for none) in one table value.
fn pack(node: u64, token: u32) -> u64 {
    node << 32 | u64::from(token)
}

/// The lookup form of the trie built by [`Backtrack::new`] (its edges, `node << 32 | symbol` and
/// the child, in the order the nodes were made; and each node's token): the root's children in a direct array, with a byte alphabet the
/// grandchildren in a grid, the rest in a table of packed children.
fn compile(edges: &[(u64, u32)], node_token: &[u32]) -> (U64Map, Vec<u64>, Vec<u16>, Vec<u64>) {
    // A node without children says so ([`LEAF`]), so a walk that reaches it stops without
    // probing for a child that is not there (a cache miss in a large table).
    let mut inner = vec![false; node_token.len()];
    for &(key, _) in edges {
        if let Some(parent) = inner.get_mut((key >> 32) as usize) {
            *parent = true;
        }
    }
    let packed = |child: u32| {
        let child = u64::from(child);
        let leaf = if inner.get(child as usize).copied().unwrap_or(false) { 0 } else { LEAF };
        pack(child | leaf, node_token.get(child as usize).copied().unwrap_or(NONE))
    };
    let mut first = Vec::new();
    // The root's child symbol of each depth-1 node.
    let mut symbol_of = vec![NONE; node_token.len()];
    for &(key, child) in edges {
        if key >> 32 == 0 {
            let s = key as u32 as usize;
            if first.len() <= s {
                first.resize(s + 1, EMPTY);
            }
            first[s] = packed(child);
            symbol_of[child as usize] = s as u32;
        }
    }
    let symbols: Vec<usize> = (0..first.len()).filter(|&s| first[s] != EMPTY).collect();
    let (mut index, mut second) = (Vec::new(), Vec::new());
    if symbols.len() <= 256 {
        index = vec![u16::MAX; first.len()];
        for (i, &s) in symbols.iter().enumerate() {
            index[s] = i as u16;
        }
        second = vec![EMPTY; 256 * 256];
    }
    let mut rest = U64Map::with_capacity(edges.len());
    for &(key, child) in edges {
        let parent = key >> 32;
        if parent == 0 {
            continue;
        }
        let above = symbol_of.get(parent as usize).copied().unwrap_or(NONE);
        let cell = (index.get(above as usize), index.get(key as u32 as usize));
        match cell {
            (Some(&a), Some(&b)) if above != NONE && a != u16::MAX && b != u16::MAX => {
                second[usize::from(a) << 8 | usize::from(b)] = packed(child);
            }
            // Deeper nodes, and children under a symbol outside the grid.
            _ => rest.insert(key, packed(child)),
        }
    }
    (rest, first, index, second)
}

/// How BPE of `symbols` (the spelling of token `id`) alone ends: by the textbook loop, recording
/// the last merge and whether the ranks applied ever decrease (build time only).
fn history(merges: &MergeMap, id: u32, symbols: &[u32]) -> History {
    match symbols {
        [] => return UNREACHABLE,
        [one] => {
            let reachable = *one == id;
            return History { left: id, right: id, rank: 0, reachable, increasing: reachable };
        }
        _ => {}
    }
    let mut ids = symbols.to_vec();
    let (mut last, mut increasing) = (None, true);
    loop {
        let mut best = (NO_RANK, 0usize, 0u32);
        for (k, pair) in ids.windows(2).enumerate() {
            let (rank, merged) = merges.get(pair[0], pair[1]);
            if rank < best.0 {
                best = (rank, k, merged);
            }
        }
        let (rank, at, merged) = best;
        if rank == NO_RANK {
            break;
        }
        if let Some((_, _, previous)) = last {
            increasing &= rank >= previous;
        }
        last = Some((ids[at], ids[at + 1], rank));
        ids[at] = merged;
        ids.remove(at + 1);
    }
    match last {
        Some((left, right, rank)) if ids[..] == [id] => {
            History { left, right, rank: rank.saturating_add(1), reachable: true, increasing }
        }
        _ => UNREACHABLE,
    }
}

#[cfg(test)]
mod tests {
    /// Shortest first, ids in order within a length, empty spellings left out.
    #[test]
    fn by_length_orders_by_length_then_id() {
        // Lengths by id: 3, 0, 1, 3, 2, 1, 0, 5.
        let starts = [0, 3, 3, 4, 7, 9, 10, 10, 15];
        assert_eq!(super::by_length(&starts), vec![2, 5, 4, 0, 3, 7]);
        assert_eq!(super::by_length(&[0]), Vec::<u32>::new());
        assert_eq!(super::by_length(&[0, 0]), Vec::<u32>::new());
    }
}
