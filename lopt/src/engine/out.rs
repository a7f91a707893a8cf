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
//! Rows are written with plain stores. Streaming stores (x86-64's `movnti`, which bypass the
//! caches) were used for long segments from session 14 to session 22: on M2 (Zen 4, 1 MiB L2)
//! they kept the rows from evicting the engine's tables (1.03-1.18x English), but on M3 (Zen 3,
//! 512 KiB L2) plain stores are 1.02-1.11x faster on English at one and two threads, Chinese
//! unchanged (`docs/benchmarks.md`, "Per-thread speed against exact peers", session 22).
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

/// The segment being written, with offsets and word ids when `FULL`; see the module
/// documentation.
pub(crate) struct Out<const FULL: bool> {
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

impl<const FULL: bool> Out<FULL> {
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
        let Out { ids, offsets, word_ids, words, added_words, .. } = self;
        Segment { ids, tokens: Vec::new(), offsets, word_ids, words, added_words }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows come out as written, in both modes, through many regrowths from a tiny start.
    #[test]
    fn rows_survive_growth() {
        fn check<const FULL: bool>() {
            let mut out = Out::<FULL>::with_capacity(1);
            for k in 0..10_000u32 {
                if k % 2 == 0 || FULL {
                    out.row(k, (k as usize, k as usize + 1), k / 3);
                } else {
                    out.id(k);
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
        check::<true>();
        check::<false>();
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
