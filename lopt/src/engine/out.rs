//! The engines' output columns (ids, offsets, word ids), written one row per token with one
//! capacity check per row instead of one per column; shared by the byte-level BPE and WordPiece
//! engines.
//!
//! Why: three `Vec::push` per token (each loads its vector's length and capacity, compares,
//! stores the element and the new length) were about a fifth of the instructions of a fresh
//! English encode. Here the row count and the room left in all three columns live in the
//! writer, so a row is one compare and three stores.
//!
//! The mode is a type parameter (`Out<true>` writes all three columns, `Out<false>`, the ids-only
//! mode, only the ids): a run-time flag cost a test per token in the engines' hottest loops, which
//! already know their mode at compile time.
//!
//! Rows that no one reads back soon may be written with streaming stores ([`Out::row_final`],
//! x86-64's `movnti`; plain stores elsewhere): a fresh
//! English encode writes about 24 bytes a token (ids 4, offsets 16, word ids 4), each 1 MB
//! document sweeping the 2 MiB L2 several times, and through the cache those lines pushed out
//! the merge and word-cache tables and the text not yet scanned (callgrind: 454 K of 498 K
//! last-level write misses of a qwen3 English encode are the rows). Streamed rows go to memory
//! without taking cache lines. They are weakly ordered, so every path that reads, regrows, hands
//! over or frees the columns fences them first (`sync_lens`, `Drop`). Whether they stream is the
//! type parameter `STREAM`, which the engine picks once a segment from its reservation
//! ([`STREAM_ROWS`]: a short text's rows stay in the cache for the caller, who reads them next);
//! a flag tested per row cost llama3_1 English 0.945x against streaming every row.
//!
//! Invariants: rows `0..len` of every written column are initialized; `len <= cap`, where `cap`
//! is at most the capacity of every written column (only `ids` in ids-only mode, whose other
//! columns stay empty). The vectors' own lengths are set from `len` by [`Out::finish`] (and before
//! any reallocation), so nothing else may read or write the columns meanwhile: they are private.
//!
//! [`lending`] lets the caller of an engine hand it the columns to write into: the first segment
//! of a text encoded in parallel is written into columns that the calling thread allocated with
//! room for the whole text's tokens, so that they become the encoding's and only the later
//! segments are copied after them (`merge::assemble`); allocated on the calling thread, they come
//! from its allocator arena, as one thread's output does, not from a pool thread's. Columns change
//! no row written, only where the rows live.
//!
//! Lent columns may hold a head: the template's opening special tokens (`[CLS]`, BOS) already in
//! `ids` (and `offsets`, as `(0, 0)`) in front of the text's rows ([`Columns::headed`]). The
//! segment's rows are then written after them, `word_ids` has no head, and the finished
//! segment's `ids` and `offsets` are longer than its `word_ids` by the head (its first rows the
//! template's): only a caller that lent a head reads such a segment, and it checks the head is
//! there ([`headed`]), so that the template's tokens need not be put in front of a whole
//! segment's columns afterwards (a shift of every row: 0.06-0.17 ms of a 1 MB document's call).

use std::cell::Cell;

use crate::engine::Segment;

/// Empty columns with room for some rows, lent to an engine by [`lending`].
#[derive(Default)]
pub(crate) struct Columns {
    ids: Vec<u32>,
    offsets: Vec<(usize, usize)>,
    word_ids: Vec<u32>,
}

impl Columns {
    /// Room for `rows` rows in every column, or only in `ids` without `full` (ids-only calls),
    /// after `head` (the template's opening special tokens as `(id, type id)`, as the template
    /// holds them, or nothing) written in front of the rows to come: their ids in `ids`, and with
    /// `full` `(0, 0)` in `offsets`. Pages that no row reaches are never touched.
    pub(crate) fn headed(head: &[(u32, u32)], rows: usize, full: bool) -> Columns {
        let other = if full { rows } else { 0 };
        let mut ids = Vec::with_capacity(head.len() + rows);
        ids.extend(head.iter().map(|&(id, _)| id));
        let mut offsets = Vec::with_capacity(if full { head.len() } else { 0 } + other);
        if full {
            offsets.resize(head.len(), (0, 0));
        }
        Columns { ids, offsets, word_ids: Vec::with_capacity(other) }
    }
}

/// Whether `segment`, the result of an engine call given columns headed by `head`
/// ([`Columns::headed`]) which it took ([`lending`]), holds that head in front of its rows: its
/// ids start with `head` and, with `full`, its offsets are longer than its word ids by the head,
/// whose offsets are `(0, 0)`. A segment of ordinary columns has offsets and word ids of one
/// length, so with a head this tells the two apart (ids-only segments have neither: there the
/// lending's report that the columns were taken decides).
pub(crate) fn headed(segment: &Segment, head: &[(u32, u32)], full: bool) -> bool {
    let h = head.len();
    let ids = starts_with_head(&segment.ids, head);
    if !full {
        return ids && segment.offsets.is_empty() && segment.word_ids.is_empty();
    }
    ids && segment.offsets.len() == segment.ids.len()
        && segment.word_ids.len() + h == segment.ids.len()
        && segment.offsets[..h].iter().all(|&o| o == (0, 0))
}

/// Whether `ids` start with the ids of `head` (`(id, type id)` rows, as [`Columns::headed`]
/// takes them).
pub(crate) fn starts_with_head(ids: &[u32], head: &[(u32, u32)]) -> bool {
    ids.len() >= head.len() && ids.iter().zip(head).all(|(&id, &(want, _))| id == want)
}

thread_local! {
    /// Columns for the next [`Out`] made on this thread; taken by that `Out`, so they serve one
    /// segment at most.
    static LENT: Cell<Option<Columns>> = const { Cell::new(None) };
}

/// Runs `encode` (one engine call on this thread) with the first [`Out`] it makes writing into
/// `columns` (after their head, their other rows dropped; grown as any `Out` grows should they
/// be short), and says whether an `Out` took them; columns no `Out` took (engines that do not
/// write through `Out`) are dropped afterwards.
pub(crate) fn lending<R>(columns: Columns, encode: impl FnOnce() -> R) -> (R, bool) {
    /// Takes back the columns no `Out` took, also should `encode` unwind: a head left lent would
    /// reach the next `Out` made on this thread (the engines' panics are caught inside their
    /// calls, `engine::guard`, so this is only a second line).
    struct TakeBack;
    impl Drop for TakeBack {
        fn drop(&mut self) {
            drop(LENT.with(Cell::take));
        }
    }
    LENT.with(|lent| lent.set(Some(columns)));
    let _take_back = TakeBack;
    let result = encode();
    let taken = LENT.with(Cell::take).is_none();
    (result, taken)
}

/// The reservation from which an engine picks an [`Out`] that streams its rows (`STREAM`,
/// [`Out::row_final`]): 32 K rows, a text of 64 KB or more for the byte-level BPE engine (which
/// reserves a row per 2 bytes), whose rows take about 400 KB (a fifth of the L2) or more.
pub(crate) const STREAM_ROWS: usize = 1 << 15;

/// The segment being written, with offsets and word ids when `FULL`; see the module
/// documentation. `STREAM`: [`Out::row_final`] writes with streaming stores (chosen once a
/// segment by the engine, from its reservation: [`STREAM_ROWS`]).
pub(crate) struct Out<const FULL: bool, const STREAM: bool = false> {
    ids: Vec<u32>,
    offsets: Vec<(usize, usize)>,
    word_ids: Vec<u32>,
    /// Rows of lent columns' head in front of `ids` and, with `FULL`, `offsets` (the rows
    /// written go after them; `word_ids` has none).
    head: usize,
    /// Where row 0 goes in `ids` and in `offsets`: each vector's start plus `head` (kept here so
    /// that a row's write costs what it did without a head; set by `reserve` with the
    /// capacities).
    ids_at: *mut u32,
    offsets_at: *mut (usize, usize),
    /// Rows written.
    len: usize,
    /// Rows that fit in every written column.
    cap: usize,
    /// Pre-tokens and added tokens so far ([`Segment::words`]).
    pub(crate) words: u32,
    /// [`Segment::added_words`].
    pub(crate) added_words: Vec<u32>,
}

impl<const FULL: bool, const STREAM: bool> Out<FULL, STREAM> {
    /// An empty segment with room for `capacity` rows (all three columns with `FULL`, else ids
    /// only).
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let Columns { mut ids, mut offsets, mut word_ids } = LENT.with(Cell::take).unwrap_or_default();
        // The lent head is kept where both written columns hold it alike; anything else is
        // dropped (a head is never lent that way).
        let head = ids.len();
        if FULL && offsets.len() != head {
            ids.clear();
            offsets.clear();
        }
        if !FULL {
            offsets.clear();
        }
        word_ids.clear();
        let head = ids.len();
        let mut out = Out {
            ids,
            offsets,
            word_ids,
            head,
            ids_at: std::ptr::null_mut(),
            offsets_at: std::ptr::null_mut(),
            len: 0,
            cap: 0,
            words: 0,
            added_words: Vec::new(),
        };
        out.reserve(capacity.max(1));
        out
    }

    /// Makes room for `additional` more rows in every written column.
    #[cold]
    #[inline(never)]
    fn reserve(&mut self, additional: usize) {
        self.sync_lens();
        self.ids.reserve(additional);
        // `ids` (and `offsets` with `FULL`) hold `head + len` rows: their capacities are at least
        // that, so the subtractions do not wrap.
        self.cap = self.ids.capacity() - self.head;
        if FULL {
            self.offsets.reserve(additional);
            self.word_ids.reserve(additional);
            self.cap = self.cap.min(self.offsets.capacity() - self.head).min(self.word_ids.capacity());
        }
        // Within each allocation (`head` is at most its length), as `row`'s writes need.
        self.ids_at = self.ids.as_mut_ptr().wrapping_add(self.head);
        self.offsets_at = self.offsets.as_mut_ptr().wrapping_add(if FULL { self.head } else { 0 });
    }

    /// Sets the vectors' lengths to the rows written (after the head).
    fn sync_lens(&mut self) {
        stream::fence();
        // SAFETY: the head's rows and rows `0..len` after them of every written column were
        // initialized (by `Columns::headed`, then `row`/`id`), and `head + len <= head + cap`,
        // within the capacity of `ids` and, with `FULL`, of `offsets` (`len <= cap` <= capacity
        // of `word_ids`): the module's invariants; unwritten columns have `len` 0 in ids-only
        // mode, where only `ids` is synced.
        unsafe {
            self.ids.set_len(self.head + self.len);
            if FULL {
                self.offsets.set_len(self.head + self.len);
                self.word_ids.set_len(self.len);
            }
        }
    }

    /// Rows written.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Forgets the rows from `len` on (the WordPiece engine redoing a piece another way). The
    /// invariants hold: rows `0..len` stay initialized.
    pub(crate) fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Appends one token: its id, and with `FULL` its offsets and word id (ids-only mode: the
    /// id alone; `offsets` and `word` are then not read).
    #[inline(always)]
    pub(crate) fn row(&mut self, id: u32, offsets: (usize, usize), word: u32) {
        if self.len >= self.cap {
            // Doubling, as `Vec` grows.
            self.reserve(self.len.max(64));
        }
        let at = self.len;
        // SAFETY: `at < cap`, checked above, and `cap` is at most the capacity of `ids` less the
        // head, where `ids_at` points (the head's end) and, with `FULL`, likewise of `offsets`
        // (`offsets_at`) and of `word_ids` (set by `reserve`, the only place capacities change,
        // with the pointers), so each write is inside its vector's allocation; the rows are
        // plain data.
        unsafe {
            self.ids_at.add(at).write(id);
            if FULL {
                self.offsets_at.add(at).write(offsets);
                self.word_ids.as_mut_ptr().add(at).write(word);
            }
        }
        self.len = at + 1;
    }

    /// [`Out::row`] with streaming stores: the row goes to memory without taking cache lines
    /// from the tables the engine reads (see the module documentation). For engines that never
    /// read a row back nor rewrite it (byte-level BPE); the rows are the same as `row`'s. Plain
    /// stores without `STREAM` (a short segment, whose rows are better left in the cache for the
    /// caller, who reads them next; a type parameter, since a flag cost a test per row:
    /// llama3_1 English 0.945x against streaming every row, session 14).
    #[inline(always)]
    pub(crate) fn row_final(&mut self, id: u32, offsets: (usize, usize), word: u32) {
        if !STREAM {
            return self.row(id, offsets, word);
        }
        if self.len >= self.cap {
            self.reserve(self.len.max(64));
        }
        let at = self.len;
        // SAFETY: as in `row` (`at < cap`, checked above, and every pointer is its column's row
        // 0 within an allocation of at least `cap` more rows); `stream` writes each whole
        // value, and `sync_lens` fences them before any other access to the columns.
        unsafe {
            stream::u32(self.ids_at.add(at), id);
            if FULL {
                stream::pair(self.offsets_at.add(at), offsets);
                stream::u32(self.word_ids.as_mut_ptr().add(at), word);
            }
        }
        self.len = at + 1;
    }

    /// [`Out::id`] with streaming stores ([`Out::row_final`]).
    #[inline(always)]
    pub(crate) fn id_final(&mut self, id: u32) {
        self.row_final(id, (0, 0), 0);
    }

    /// Appends one token's id alone: the ids-only mode's row. Should the columns be full, the
    /// row gets empty offsets and word 0, so that every written column stays initialized.
    #[inline(always)]
    pub(crate) fn id(&mut self, id: u32) {
        self.row(id, (0, 0), 0);
    }

    /// The finished segment (its `ids` and `offsets` after the lent head, if any: see the
    /// module documentation).
    pub(crate) fn finish(mut self) -> Segment {
        self.sync_lens();
        Segment {
            ids: std::mem::take(&mut self.ids),
            tokens: Vec::new(),
            offsets: std::mem::take(&mut self.offsets),
            word_ids: std::mem::take(&mut self.word_ids),
            words: self.words,
            added_words: std::mem::take(&mut self.added_words),
        }
    }
}

impl<const FULL: bool, const STREAM: bool> Drop for Out<FULL, STREAM> {
    /// Fences the streaming stores of an `Out` dropped unfinished (an engine call that unwinds),
    /// before its columns go back to the allocator, which may hand them to another thread.
    fn drop(&mut self) {
        stream::fence();
    }
}

/// Stores that bypass the caches ([`Out::row_final`]): x86-64's `movnti` (SSE2, which every
/// x86-64 has), else plain stores. On x86-64 the differential suite meets both kinds of rows: a
/// short segment's take plain stores (`Out<_, false>`, [`Out::row`]), a long one's stream. A
/// streamed store is weakly ordered: [`fence`] must run after the last one and before the memory
/// is read, handed to another thread or freed.
mod stream {
    /// Whether stores stream (x86-64).
    const STREAM: bool = cfg!(target_arch = "x86_64");

    /// Stores `value` at `at`.
    ///
    /// # Safety
    /// `at` is valid for a write of a `u32` and aligned.
    #[inline(always)]
    pub(super) unsafe fn u32(at: *mut u32, value: u32) {
        #[cfg(target_arch = "x86_64")]
        if STREAM {
            // SAFETY: the caller's precondition; `movnti` needs no more (SSE2 is part of x86-64).
            unsafe { std::arch::x86_64::_mm_stream_si32(at.cast::<i32>(), value as i32) };
            return;
        }
        // SAFETY: the caller's precondition.
        unsafe { at.write(value) };
    }

    /// Stores the pair `value` at `at`, each half by itself (so whatever the tuple's layout).
    ///
    /// # Safety
    /// `at` is valid for a write of a `(usize, usize)` and aligned.
    #[inline(always)]
    pub(super) unsafe fn pair(at: *mut (usize, usize), value: (usize, usize)) {
        #[cfg(target_arch = "x86_64")]
        if STREAM {
            // SAFETY: the caller's precondition; each field of an aligned tuple is an aligned
            // `usize`, which is an `i64` on x86-64.
            unsafe {
                std::arch::x86_64::_mm_stream_si64(std::ptr::addr_of_mut!((*at).0).cast::<i64>(), value.0 as i64);
                std::arch::x86_64::_mm_stream_si64(std::ptr::addr_of_mut!((*at).1).cast::<i64>(), value.1 as i64);
            }
            return;
        }
        // SAFETY: the caller's precondition.
        unsafe { at.write(value) };
    }

    /// Orders the streamed stores before every later memory access of this thread (`sfence`);
    /// nothing where stores do not stream.
    #[inline(always)]
    pub(super) fn fence() {
        #[cfg(target_arch = "x86_64")]
        if STREAM {
            // SAFETY: `sfence` has no precondition (SSE, part of x86-64).
            unsafe { std::arch::x86_64::_mm_sfence() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows come out as written, in both modes and by both writers (plain and streaming stores),
    /// through many regrowths from a tiny start.
    #[test]
    fn rows_survive_growth() {
        fn check<const FULL: bool>(streamed: bool) {
            // Streamed from a tiny start (as a short segment's rows are not).
            let mut out = Out::<FULL, true>::with_capacity(1);
            for k in 0..10_000u32 {
                if streamed {
                    out.row_final(k, (k as usize, k as usize + 1), k / 3);
                } else {
                    out.row(k, (k as usize, k as usize + 1), k / 3);
                }
            }
            out.words = 7;
            let seg = out.finish();
            assert_eq!(seg.ids, (0..10_000).collect::<Vec<_>>());
            if FULL {
                assert_eq!(seg.offsets, (0..10_000).map(|k| (k, k + 1)).collect::<Vec<_>>());
                assert_eq!(seg.word_ids, (0..10_000).map(|k| k / 3).collect::<Vec<_>>());
            } else {
                assert!(seg.offsets.is_empty() && seg.word_ids.is_empty());
            }
            assert_eq!(seg.words, 7);
        }
        for streamed in [false, true] {
            check::<true>(streamed);
            check::<false>(streamed);
        }
    }

    /// Streamed rows after a lent head, and an `Out` dropped unfinished (its fence), leave the
    /// columns as plain rows would.
    #[test]
    fn streamed_rows_follow_the_head() {
        let head = [(101u32, 0u32)];
        let (mut out, taken) = lending(Columns::headed(&head, 3, true), || Out::<true, true>::with_capacity(1));
        assert!(taken);
        for k in 0..500u32 {
            out.row_final(k, (k as usize, k as usize + 2), k);
            out.id_final(k + 1);
        }
        let seg = out.finish();
        assert!(headed(&seg, &head, true));
        assert_eq!(seg.ids[..5], [101, 0, 1, 1, 2]);
        assert_eq!(seg.offsets[1..4], [(0, 2), (0, 0), (1, 3)]);
        assert_eq!(seg.word_ids[..4], [0, 0, 1, 0]);
        let mut dropped = Out::<true, true>::with_capacity(STREAM_ROWS);
        dropped.row_final(1, (0, 1), 0);
        drop(dropped);
    }

    /// Columns lent by the caller are written by the first `Out` only, and only inside
    /// `lending`; the rows are the same.
    #[test]
    fn lent_columns_reach_the_first_out() {
        let lent = Columns::headed(&[], 5000, true);
        let ptr = lent.ids.as_ptr();
        let ((first, second), taken) =
            lending(lent, || (Out::<true>::with_capacity(10), Out::<true>::with_capacity(10)));
        assert!(taken);
        assert_eq!(first.ids.as_ptr(), ptr);
        assert!(first.ids.capacity() >= 5000 && first.offsets.capacity() >= 5000 && first.word_ids.capacity() >= 5000);
        assert!(second.ids.capacity() < 5000);
        assert!(!lending(Columns::headed(&[], 5000, true), || ()).1);
        assert!(Out::<false>::with_capacity(10).ids.capacity() < 5000);
        let (mut out, _) = lending(Columns::headed(&[], 2, false), || Out::<true>::with_capacity(1));
        for k in 0..100u32 {
            out.row(k, (k as usize, k as usize + 1), k);
        }
        let seg = out.finish();
        assert_eq!(seg.ids, (0..100).collect::<Vec<_>>());
        assert_eq!(seg.offsets, (0..100).map(|k| (k, k + 1)).collect::<Vec<_>>());
        assert_eq!(seg.word_ids, (0..100).collect::<Vec<_>>());
    }

    /// Columns lent with a head keep it in front of the rows written, through regrowths, in both
    /// modes; `headed` tells such a segment from one of ordinary columns.
    #[test]
    fn lent_head_stays_in_front() {
        fn check<const FULL: bool>(room: usize) {
            let head = [(101u32, 0u32), (7, 0)];
            let (mut out, taken) = lending(Columns::headed(&head, room, FULL), || Out::<FULL>::with_capacity(1));
            assert!(taken);
            for k in 0..1000u32 {
                out.row(k, (k as usize, k as usize + 1), k / 2);
            }
            let seg = out.finish();
            assert!(headed(&seg, &head, FULL));
            let ids: Vec<u32> = [101, 7].into_iter().chain(0..1000).collect();
            assert_eq!(seg.ids, ids);
            if FULL {
                let offsets: Vec<(usize, usize)> =
                    [(0, 0), (0, 0)].into_iter().chain((0..1000).map(|k| (k, k + 1))).collect();
                assert_eq!(seg.offsets, offsets);
                assert_eq!(seg.word_ids, (0..1000).map(|k| k / 2).collect::<Vec<_>>());
            } else {
                assert!(seg.offsets.is_empty() && seg.word_ids.is_empty());
            }
            // An ordinary segment is not taken for a headed one.
            let mut plain = Out::<FULL>::with_capacity(4);
            plain.row(101, (0, 0), 0);
            plain.row(7, (0, 0), 0);
            assert!(!FULL || !headed(&plain.finish(), &head, FULL));
        }
        for room in [0, 3, 5000] {
            check::<true>(room);
            check::<false>(room);
        }
    }

    /// A lending whose engine call unwinds leaves nothing lent: the next `Out` on the thread
    /// starts without the head.
    #[test]
    fn unwinding_lends_no_head_on() {
        let unwound = std::panic::catch_unwind(|| lending(Columns::headed(&[(101, 0)], 10, true), || panic!("engine")));
        assert!(unwound.is_err());
        let mut out = Out::<true>::with_capacity(4);
        out.row(5, (0, 1), 0);
        let seg = out.finish();
        assert_eq!(seg.ids, vec![5]);
        assert_eq!(seg.offsets, vec![(0, 1)]);
    }
}
