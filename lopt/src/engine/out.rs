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
    /// Room for `rows` rows in every column, or only in `ids` without `full` (ids-only calls).
    /// Pages that no row reaches are never touched.
    pub(crate) fn with_capacity(rows: usize, full: bool) -> Columns {
        let other = if full { rows } else { 0 };
        Columns {
            ids: Vec::with_capacity(rows),
            offsets: Vec::with_capacity(other),
            word_ids: Vec::with_capacity(other),
        }
    }
}

thread_local! {
    /// Columns for the next [`Out`] made on this thread; taken by that `Out`, so they serve one
    /// segment at most.
    static LENT: Cell<Option<Columns>> = const { Cell::new(None) };
}

/// Runs `encode` (one engine call on this thread) with the first [`Out`] it makes writing into
/// `columns` (emptied first; grown as any `Out` grows should they be short); columns no `Out`
/// took (engines that do not write through `Out`) are dropped afterwards.
pub(crate) fn lending<R>(columns: Columns, encode: impl FnOnce() -> R) -> R {
    LENT.with(|lent| lent.set(Some(columns)));
    let result = encode();
    drop(LENT.with(Cell::take));
    result
}

/// The segment being written, with offsets and word ids when `FULL`; see the module
/// documentation.
pub(crate) struct Out<const FULL: bool> {
    ids: Vec<u32>,
    offsets: Vec<(usize, usize)>,
    word_ids: Vec<u32>,
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
        ids.clear();
        offsets.clear();
        word_ids.clear();
        let mut out = Out { ids, offsets, word_ids, len: 0, cap: 0, words: 0, added_words: Vec::new() };
        out.reserve(capacity.max(1));
        out
    }

    /// Makes room for `additional` more rows in every written column.
    #[cold]
    #[inline(never)]
    fn reserve(&mut self, additional: usize) {
        self.sync_lens();
        self.ids.reserve(additional);
        self.cap = self.ids.capacity();
        if FULL {
            self.offsets.reserve(additional);
            self.word_ids.reserve(additional);
            self.cap = self.cap.min(self.offsets.capacity()).min(self.word_ids.capacity());
        }
    }

    /// Sets the vectors' lengths to the rows written.
    fn sync_lens(&mut self) {
        // SAFETY: rows `0..len` of every written column were initialized by `row`/`id`, and
        // `len <= cap <= capacity` of each (the module's invariants); unwritten columns have
        // `len` 0 in ids-only mode, where only `ids` is synced.
        unsafe {
            self.ids.set_len(self.len);
            if FULL {
                self.offsets.set_len(self.len);
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
        // SAFETY: `at < cap`, checked above, and `cap` is at most the capacity of `ids` and, with
        // `FULL`, of `offsets` and `word_ids` (set by `reserve`, the only place capacities
        // change), so each write is inside its vector's allocation; the rows are plain data.
        unsafe {
            self.ids.as_mut_ptr().add(at).write(id);
            if FULL {
                self.offsets.as_mut_ptr().add(at).write(offsets);
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

    /// The finished segment.
    pub(crate) fn finish(mut self) -> Segment {
        self.sync_lens();
        Segment {
            ids: self.ids,
            tokens: Vec::new(),
            offsets: self.offsets,
            word_ids: self.word_ids,
            words: self.words,
            added_words: self.added_words,
        }
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
                out.row(k, (k as usize, k as usize + 1), k / 3);
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
        let lent = Columns::with_capacity(5000, true);
        let ptr = lent.ids.as_ptr();
        let (first, second) = lending(lent, || (Out::<true>::with_capacity(10), Out::<true>::with_capacity(10)));
        assert_eq!(first.ids.as_ptr(), ptr);
        assert!(first.ids.capacity() >= 5000 && first.offsets.capacity() >= 5000 && first.word_ids.capacity() >= 5000);
        assert!(second.ids.capacity() < 5000);
        lending(Columns::with_capacity(5000, true), || ());
        assert!(Out::<false>::with_capacity(10).ids.capacity() < 5000);
        let mut out = lending(Columns::with_capacity(2, false), || Out::<true>::with_capacity(1));
        for k in 0..100u32 {
            out.row(k, (k as usize, k as usize + 1), k);
        }
        let seg = out.finish();
        assert_eq!(seg.ids, (0..100).collect::<Vec<_>>());
        assert_eq!(seg.offsets, (0..100).map(|k| (k, k + 1)).collect::<Vec<_>>());
        assert_eq!(seg.word_ids, (0..100).collect::<Vec<_>>());
    }
}
