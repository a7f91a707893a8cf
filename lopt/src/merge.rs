//! Merge: joining the segments of one text into its encoding.
//!
//! Segments end and start at safe cuts, so the tokens of the whole text are exactly the
//! segments' tokens in order (`docs/correctness.md`); the merge only moves each segment's offsets
//! by the segment's start and its word ids by the number of pre-tokens before it.
//!
//! Two forms: [`merge`] builds one raw [`Segment`] (for HF's post-processing), and [`assemble`]
//! writes the segments straight into the final columns of an [`Encoding`], with the special
//! tokens of the template around them, in pieces on the current rayon pool. The second is the hot
//! path: copying half a million tokens sequentially would cost as much as tokenizing them with a
//! native engine on one more core. Where the first segment's columns have room for every token
//! (the tokenizer lends the engine such columns for it), they become the encoding's and only the
//! later segments are copied after them; otherwise every segment is copied into new columns.
//! [`Gather`] does the former while the text is encoded, in the same trip to the pool: each later
//! segment is copied by the thread that encoded it as soon as the segments before it are encoded.
//!
//! Invariants: the text's word ids are kept as the engines' `u32` counts (the lazy column's
//! recipe, [`crate::encoding::Words`]); a column's length is set past slots only once every one
//! of them was written ([`Slots::fill`] writes every slot of its window, whatever the part's
//! column lengths).

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU32, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use rayon::prelude::*;

use crate::encoding::{Encoding, Fill, Lazy, Tokens, Vocab, Words};
use crate::engine::Segment;
use crate::error::{Error, ErrorKind, Result};
use crate::trace;

/// The first `len` tokens of a segment that starts at byte `start` of a text, holding `words` of
/// its pre-tokens: how a cached prefix is handed to [`crate::post::Finisher::finish_runs`].
#[derive(Clone, Copy)]
pub(crate) struct Run<'a> {
    pub(crate) segment: &'a Segment,
    pub(crate) len: usize,
    pub(crate) start: usize,
    pub(crate) words: u32,
}

impl Run<'_> {
    /// The run as an owned segment (for HF's post-processing path).
    pub(crate) fn to_segment(self) -> Segment {
        let s = self.segment;
        let strings = s.tokens.len() == s.ids.len();
        Segment {
            ids: s.ids[..self.len].to_vec(),
            tokens: if strings { s.tokens[..self.len].to_vec() } else { Vec::new() },
            offsets: s.offsets[..self.len].to_vec(),
            word_ids: s.word_ids[..self.len].to_vec(),
            words: self.words,
            added_words: s.added_words.iter().copied().take_while(|&w| w < self.words).collect(),
        }
    }
}

/// Joins `segments`, where segment `i` starts at byte `starts[i]` of the text.
pub(crate) fn merge(starts: &[usize], mut segments: Vec<Segment>) -> Segment {
    debug_assert_eq!(starts.len(), segments.len());
    if segments.len() == 1 && starts.first() == Some(&0) {
        return segments.pop().unwrap_or_default();
    }
    let total: usize = segments.iter().map(|s| s.ids.len()).sum();
    let with_strings = segments.iter().all(|s| s.tokens.len() == s.ids.len());
    let mut merged = Segment {
        ids: Vec::with_capacity(total),
        tokens: Vec::with_capacity(if with_strings { total } else { 0 }),
        offsets: Vec::with_capacity(total),
        word_ids: Vec::with_capacity(total),
        words: 0,
        added_words: Vec::new(),
    };
    for (segment, &start) in segments.into_iter().zip(starts) {
        let words_before = merged.words;
        merged.ids.extend_from_slice(&segment.ids);
        if with_strings {
            merged.tokens.extend(segment.tokens);
        }
        merged.offsets.extend(segment.offsets.iter().map(|&(s, e)| (s + start, e + start)));
        merged.word_ids.extend(segment.word_ids.iter().map(|&w| w + words_before));
        merged.added_words.extend(segment.added_words.iter().map(|&w| w + words_before));
        merged.words += segment.words;
    }
    merged
}

/// Where the text's tokens go in the final encoding and what surrounds them.
pub(crate) struct Layout<'a> {
    /// Special tokens before the text (template pieces before `A`), with their type ids.
    pub(crate) prefix: &'a [(u32, u32)],
    /// Special tokens after the text.
    pub(crate) suffix: &'a [(u32, u32)],
    /// Type id of the text's tokens.
    pub(crate) type_id: u32,
    /// ByteLevel offset trimming of the text's tokens, when the post-processor asks for it.
    pub(crate) trim: Option<Trim<'a>>,
}

/// `byte_level::process_offsets` of HF, with space counts per token id.
pub(crate) struct Trim<'a> {
    /// Leading and trailing space counts of each token string, by id.
    pub(crate) spaces: &'a [(u16, u16)],
    pub(crate) add_prefix_space: bool,
    /// Whether the text's first token is the encoding's first token when trimming runs (it is
    /// not when the template has already put special tokens in front).
    pub(crate) first_is_index_zero: bool,
}

/// A run of tokens of one segment, borrowed for [`assemble_parts`]: the first `len` tokens of a
/// segment (a cached prefix may use only the tokens before a cut), or a slice of them when a long
/// part is split for parallel writing.
/// Its three slices have the same length (the fields are private so that every part comes from
/// [`Part::of`] or [`Part::pieces`], which keep it so; [`assemble_parts`] relies on it).
#[derive(Clone, Copy)]
pub(crate) struct Part<'a> {
    ids: &'a [u32],
    /// Offsets relative to `start`.
    offsets: &'a [(usize, usize)],
    /// Word ids relative to `words_before`.
    word_ids: &'a [u32],
    /// Byte position of the segment in the text.
    start: usize,
    /// Pre-tokens of the text before the segment.
    words_before: u32,
}

impl<'a> Part<'a> {
    /// The first `len` tokens of `segment`, which starts at byte `start` after `words_before`
    /// pre-tokens.
    pub(crate) fn of(segment: &'a Segment, len: usize, start: usize, words_before: u32) -> Self {
        Part {
            ids: &segment.ids[..len],
            offsets: &segment.offsets[..len],
            word_ids: &segment.word_ids[..len],
            start,
            words_before,
        }
    }

    /// This part cut into runs of at most `max` tokens (offsets and word ids stay relative to
    /// the same segment start, so each run is written the same way).
    pub(crate) fn pieces(self, max: usize) -> impl Iterator<Item = Part<'a>> {
        let max = max.max(1);
        (0..self.ids.len().div_ceil(max)).map(move |i| {
            let r = i * max..((i + 1) * max).min(self.ids.len());
            Part {
                ids: &self.ids[r.clone()],
                offsets: &self.offsets[r.clone()],
                word_ids: &self.word_ids[r],
                start: self.start,
                words_before: self.words_before,
            }
        })
    }
}

/// Writes `segments` (segment `i` starting at byte `starts[i]`) into an [`Encoding`] laid out as
/// `layout` says, in parallel when there are several: on `pool`, or on the current rayon pool
/// when it is `None`. Token strings are the segments' when they carry them, else looked up in
/// `vocab` on demand.
pub(crate) fn assemble(
    starts: &[usize],
    mut segments: Vec<Segment>,
    layout: &Layout<'_>,
    vocab: &Arc<Vocab>,
    pool: Option<&rayon::ThreadPool>,
) -> Encoding {
    debug_assert_eq!(starts.len(), segments.len());
    // `Segment`'s columns have equal lengths; should a segment's not, the general path writes
    // a value into every slot.
    let whole = |s: &Segment| s.offsets.len() == s.ids.len() && s.word_ids.len() == s.ids.len();
    let from_zero = starts.first() == Some(&0) && starts.len() == segments.len();
    if segments.len() == 1 && from_zero && segments.first().is_some_and(whole) {
        if let Some(segment) = segments.pop() {
            return assemble_one(segment, layout, vocab);
        }
    }
    if segments.len() > 1 && from_zero && segments.iter().all(whole) && room_in_first(&segments, layout) {
        return assemble_into_first(starts, segments, layout, vocab, pool);
    }
    let mut words_before = 0;
    let parts: Vec<Part<'_>> = segments
        .iter()
        .zip(starts)
        .map(|(segment, &start)| {
            let part = Part::of(segment, segment.ids.len(), start, words_before);
            words_before += segment.words;
            part
        })
        .collect();
    let mut encoding = assemble_parts(&parts, layout, vocab, pool);
    drop(parts);
    let text_tokens: usize = segments.iter().map(|s| s.ids.len()).sum();
    if segments.iter().all(|s| s.tokens.len() == s.ids.len()) && text_tokens > 0 {
        let mut all = Vec::with_capacity(encoding.ids.len());
        all.extend(layout.prefix.iter().map(|&(id, _)| vocab.string(id).to_owned()));
        all.extend(segments.iter_mut().flat_map(|s| std::mem::take(&mut s.tokens)));
        all.extend(layout.suffix.iter().map(|&(id, _)| vocab.string(id).to_owned()));
        encoding.tokens = Tokens::Owned(all);
    }
    let _free = trace::span("free", 0);
    drop(segments);
    encoding
}

/// Whether the first of `segments` has room in its columns for every token of the encoding (the
/// tokenizer lends the engine such columns: `engine::out::lending`), so that
/// [`assemble_into_first`] needs no reallocation.
fn room_in_first(segments: &[Segment], layout: &Layout<'_>) -> bool {
    let text_tokens: usize = segments.iter().map(|s| s.ids.len()).sum();
    let n = layout.prefix.len() + text_tokens + layout.suffix.len();
    segments
        .first()
        .is_some_and(|s| s.ids.capacity() >= n && s.offsets.capacity() >= n && s.word_ids.capacity() >= text_tokens)
}

/// [`assemble`] for several segments whose first has room for all the tokens
/// ([`room_in_first`]): the first segment's columns become the encoding's, as in
/// [`assemble_one`], and only the later segments are copied after its tokens, in parallel, in
/// pieces. Why: the copy of every segment into new columns ([`assemble_parts`]) was 7-14 % of
/// the wall time of a 1 MB document on 2 threads (session 9's trace), and at 2 threads the first
/// segment is half of it; its word ids stay the engine's `u32` (the lazy column's recipe) instead
/// of being written out as `Option<u32>`. The output is the same: the same tokens, offsets shifted
/// by the same segment starts, word ids by the same counts.
fn assemble_into_first(
    starts: &[usize],
    mut segments: Vec<Segment>,
    layout: &Layout<'_>,
    vocab: &Arc<Vocab>,
    pool: Option<&rayon::ThreadPool>,
) -> Encoding {
    let (prefix, suffix) = (layout.prefix, layout.suffix);
    let text_tokens: usize = segments.iter().map(|s| s.ids.len()).sum();
    let n = prefix.len() + text_tokens + suffix.len();
    let with_strings = text_tokens > 0 && segments.iter().all(|s| s.tokens.len() == s.ids.len());
    let rest = segments.split_off(1.min(segments.len()));
    let first = segments.pop().unwrap_or_default();
    let Segment { mut ids, tokens: first_tokens, mut offsets, word_ids: mut words, words: first_words, .. } = first;
    let first_len = ids.len();
    if !prefix.is_empty() {
        ids.splice(0..0, prefix.iter().map(|&(id, _)| id));
        offsets.splice(0..0, prefix.iter().map(|_| (0, 0)));
    }
    // No-ops when `room_in_first` held, as the caller checks; else a reallocation, still exact.
    ids.reserve(n - ids.len());
    offsets.reserve(n - offsets.len());
    words.reserve(text_tokens - words.len());

    let threads = pool.map_or_else(rayon::current_num_threads, rayon::ThreadPool::current_num_threads);
    let rest_tokens = text_tokens - first_len;
    // Pieces small enough that every thread gets a share of the work, large enough that each
    // costs far more than handing it out.
    let piece = text_tokens.div_ceil(threads.max(1) * 4).max(16 * 1024);
    let mut words_before = first_words;
    let mut parts = Vec::with_capacity(rest.len());
    for (segment, &start) in rest.iter().zip(&starts[1..]) {
        parts.extend(Part::of(segment, segment.ids.len(), start, words_before).pieces(piece));
        words_before += segment.words;
    }
    {
        let (first_ids, ids_spare) = split_at_spare(&mut ids);
        let (first_offsets, offsets_spare) = split_at_spare(&mut offsets);
        let text = Slots {
            ids: &mut ids_spare[..rest_tokens],
            offsets: &mut offsets_spare[..rest_tokens],
            words: &mut words.spare_capacity_mut()[..rest_tokens],
        };
        // The first segment's offsets are trimmed in place, in pieces beside the copy.
        let trims: Vec<Trimming<'_>> = match layout.trim {
            Some(_) => first_offsets[prefix.len()..]
                .chunks_mut(piece)
                .zip(first_ids[prefix.len()..].chunks(piece))
                .enumerate()
                .map(|(k, (offsets, ids))| Trimming { offsets, ids, first_token: k * piece })
                .collect(),
            None => Vec::new(),
        };
        write_parts(text, &parts, first_len, trims, layout, pool);
    }
    drop(parts);
    // SAFETY: `write_parts` wrote every one of the first `rest_tokens` spare slots of each column
    // (the windows it was given, of that length each: checked by `Slots::split_at` and
    // `Slots::fill`), and the reservations above made the capacity of each column at least its
    // length plus `rest_tokens`.
    unsafe {
        ids.set_len(ids.len() + rest_tokens);
        offsets.set_len(offsets.len() + rest_tokens);
        words.set_len(words.len() + rest_tokens);
    }
    ids.extend(suffix.iter().map(|&(id, _)| id));
    offsets.extend(suffix.iter().map(|_| (0, 0)));
    debug_assert!(ids.len() == n && offsets.len() == n && words.len() == text_tokens);
    let strings = if with_strings {
        Some(first_tokens.into_iter().chain(rest.into_iter().flat_map(|s| s.tokens)))
    } else {
        let _free = trace::span("free", 0);
        drop(rest);
        None
    };
    encoding_of(ids, offsets, words, strings, layout, vocab)
}

/// A segment's state in a [`Gather`]: not started yet.
const WAITING: u8 = 0;
/// Being encoded by a pool thread.
const ENCODING: u8 = 1;
/// Encoded: its token and pre-token counts and its columns are published.
const ENCODED: u8 = 2;

/// How long a thread with nothing to copy waits for segments still being encoded before it goes
/// back to the pool: the usual spread of the segments' ends at 16 threads (session 11's trace:
/// 0.4-0.55 ms from the median end to the last), so that most copies start as soon as their
/// place is known and are shared by the threads that are done, without spinning for a whole
/// segment's time when the text is uneven (the wait is spent spinning: CPU time no one else gets).
const MAX_WAIT: std::time::Duration = std::time::Duration::from_millis(1);

/// A segment's ids, offsets and word ids.
type Columns = (Vec<u32>, Vec<(usize, usize)>, Vec<u32>);

/// The first segment's columns, where every later segment is copied: pointers into the vectors
/// held by [`Gather::first`], taken once (with the template's prefix in front: written there
/// before the engine's rows, or put in front then), so
/// that threads can write disjoint windows of the spare capacity at once.
#[derive(Clone, Copy)]
struct Room {
    ids: *mut u32,
    offsets: *mut (usize, usize),
    words: *mut u32,
    /// Rows that fit in both `ids` and `offsets` (their smaller capacity).
    rows: usize,
    /// Capacity of `words` (text tokens only: no template rows).
    word_rows: usize,
}

// SAFETY: the pointers are only written through in windows of one piece each, which one thread
// claims (a piece number is taken once, by `fetch_add`), disjoint from one another and from the
// rows of the first segment that are not its own pieces, and the vectors they point into are not
// touched otherwise until every thread is done (`Gather::finish`, after the pool's join).
unsafe impl Send for Room {}
// SAFETY: as for `Send`: shared access only hands out disjoint windows.
unsafe impl Sync for Room {}

/// The segments of one text assembled as they are encoded, in the same trip to the pool: the
/// first segment's columns (lent by the tokenizer with room for the whole text and the template's
/// prefix written in front: `engine::out::Columns::headed`; should they lack it, it is put in
/// front when the segment arrives) become the encoding's, and each later segment is copied after them, in
/// pieces, as soon as every segment before it is encoded (their token counts give its place):
/// first by the thread that encoded it, while its columns are in that core's cache, and by any
/// thread that is done with its own (the first segment's pieces trim its offsets in place). A
/// thread with nothing to copy waits, spinning, for the segments still being encoded (at most
/// [`MAX_WAIT`]); what is left when the pool's join returns is copied then. Why: copying the
/// segments after the pool's join took a second trip to the pool and a wake-up of the caller
/// (session 11's trace at 16 threads: the copy 8-16 % of the wall, the caller's return 3 %).
///
/// Invariants: each piece is written at most once (its number is taken by one `fetch_add`); a
/// segment's window is `h + tokens before it` in `ids` and `offsets` (`h` the prefix's length)
/// and `tokens before it` in `words`, written only when it fits the room; windows fit in segment
/// order (each starts where the previous ends), so the segments written in full are a leading
/// run of the text's, and [`Gather::finish`] sets the columns' lengths past that run only,
/// copying the rest as [`assemble_into_first`] does. The output equals [`assemble`]'s: the same
/// tokens, offsets shifted by the same starts and trimmed with the same token indices, word ids
/// moved by the same counts.
pub(crate) struct Gather<'a> {
    starts: &'a [usize],
    layout: &'a Layout<'a>,
    /// Tokens of one piece (the unit of the copy that threads share).
    piece: usize,
    states: Vec<AtomicU8>,
    /// Each segment's token count, once it is encoded.
    lens: Vec<AtomicUsize>,
    /// Each segment's pre-token count ([`Segment::words`]), once it is encoded.
    words: Vec<AtomicU32>,
    /// Each segment's next piece to take.
    next: Vec<AtomicUsize>,
    /// Each segment's pieces written.
    written: Vec<AtomicUsize>,
    /// Each segment once encoded (the first: its token strings only).
    slots: Vec<OnceLock<Segment>>,
    /// The first segment's columns (ids and offsets with the prefix in front), read and written
    /// only through `room` until [`Gather::finish`].
    first: Mutex<Option<Columns>>,
    /// Set when the first segment is encoded.
    room: OnceLock<Room>,
}

impl<'a> Gather<'a> {
    /// A text of `starts.len()` segments (segment `k` starting at byte `starts[k]`), laid out as
    /// `layout` says, copied in pieces of at most `piece` tokens.
    pub(crate) fn new(starts: &'a [usize], layout: &'a Layout<'a>, piece: usize) -> Self {
        let n = starts.len();
        Gather {
            starts,
            layout,
            piece: piece.max(1),
            states: (0..n).map(|_| AtomicU8::new(WAITING)).collect(),
            lens: (0..n).map(|_| AtomicUsize::new(0)).collect(),
            words: (0..n).map(|_| AtomicU32::new(0)).collect(),
            next: (0..n).map(|_| AtomicUsize::new(0)).collect(),
            written: (0..n).map(|_| AtomicUsize::new(0)).collect(),
            slots: (0..n).map(|_| OnceLock::new()).collect(),
            first: Mutex::new(None),
            room: OnceLock::new(),
        }
    }

    /// Segment `k` is being encoded (so a thread that is done may wait for it).
    pub(crate) fn start(&self, k: usize) {
        if let Some(state) = self.states.get(k) {
            state.store(ENCODING, Ordering::SeqCst);
        }
    }

    /// Segment `k` is encoded: publishes it, then copies pieces, its own first, while there are
    /// any (waiting, spinning, for segments still being encoded, at most [`MAX_WAIT`] at a time).
    pub(crate) fn arrive(&self, k: usize, segment: Segment) {
        let n = self.states.len();
        if k >= n {
            return;
        }
        let mut segment = segment;
        // The first segment's columns may hold the template's prefix in front already (lent so:
        // `engine::out::Columns::headed`); then its text rows are its word ids' count.
        let headed = k == 0 && is_headed(&segment, self.layout.prefix);
        let len = if headed { segment.word_ids.len() } else { segment.ids.len() };
        if !headed && (segment.offsets.len() != len || segment.word_ids.len() != len) {
            // Never for the engines' segments (their columns have equal lengths); such a
            // segment gets what the copy writes past a part's shortest column (`Slots::fill`).
            segment.offsets.resize(len, (0, 0));
            segment.word_ids.resize(len, 0);
        }
        self.lens[k].store(len, Ordering::SeqCst);
        self.words[k].store(segment.words, Ordering::SeqCst);
        if k == 0 {
            self.place_first(segment, headed);
        } else {
            let _ = self.slots[k].set(segment);
        }
        self.states[k].store(ENCODED, Ordering::SeqCst);
        let _wait = trace::span("help", 0);
        let mut since: Option<std::time::Instant> = None;
        let mut spin: u32 = 0;
        loop {
            let mut progress = self.ready(k) && self.work_on(k);
            let mut pending = false;
            for j in 0..n {
                match self.states[j].load(Ordering::SeqCst) {
                    // A segment no thread has taken yet: this thread is needed for it.
                    WAITING => return,
                    ENCODING => pending = true,
                    _ if !self.ready(j) => pending = true,
                    _ => progress |= self.work_on(j),
                }
            }
            if !pending {
                // Every segment is encoded and every piece taken.
                return;
            }
            if progress {
                since = None;
                continue;
            }
            spin = spin.wrapping_add(1);
            if spin.is_multiple_of(64) {
                let now = std::time::Instant::now();
                if now.duration_since(*since.get_or_insert(now)) > MAX_WAIT {
                    return;
                }
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// The first segment: the template's prefix put in front of its ids and offsets (in place:
    /// its columns were lent with room) unless they hold it already (`headed`), its columns kept
    /// as the encoding's, their room published.
    fn place_first(&self, segment: Segment, headed: bool) {
        let Segment { mut ids, tokens, mut offsets, word_ids: mut words, .. } = segment;
        let prefix = self.layout.prefix;
        if !prefix.is_empty() && !headed {
            ids.splice(0..0, prefix.iter().map(|&(id, _)| id));
            offsets.splice(0..0, prefix.iter().map(|_| (0, 0)));
        }
        let room = Room {
            ids: ids.as_mut_ptr(),
            offsets: offsets.as_mut_ptr(),
            words: words.as_mut_ptr(),
            rows: ids.capacity().min(offsets.capacity()),
            word_rows: words.capacity(),
        };
        // Moving the vectors moves no element: the pointers stay valid.
        *lock(&self.first) = Some((ids, offsets, words));
        let _ = self.slots[0].set(Segment { tokens, ..Segment::default() });
        let _ = self.room.set(room);
    }

    /// Whether every segment before `k` is encoded (so `k`'s window is known).
    fn ready(&self, k: usize) -> bool {
        self.states[..k].iter().all(|s| s.load(Ordering::SeqCst) >= ENCODED)
    }

    /// Pieces of segment `k`: its tokens in runs of `piece` (the first segment's only when its
    /// offsets are trimmed: its tokens are in place already).
    fn pieces(&self, k: usize) -> usize {
        if k == 0 && self.layout.trim.is_none() {
            return 0;
        }
        self.lens[k].load(Ordering::SeqCst).div_ceil(self.piece)
    }

    /// Takes and writes pieces of encoded segment `k`, whose predecessors are encoded, until none
    /// is left; whether it wrote any. A segment whose window does not fit the room is left whole.
    fn work_on(&self, k: usize) -> bool {
        let (Some(&room), Some(segment)) = (self.room.get(), self.slots[k].get()) else { return false };
        let total = self.pieces(k);
        if self.next[k].load(Ordering::SeqCst) >= total {
            return false;
        }
        let h = self.layout.prefix.len();
        let before: usize = self.lens[..k].iter().map(|l| l.load(Ordering::SeqCst)).sum();
        let len = self.lens[k].load(Ordering::SeqCst);
        let fits = k == 0
            || (h + before).checked_add(len).is_some_and(|end| end <= room.rows) && before + len <= room.word_rows;
        if !fits {
            return false;
        }
        let words_before: u32 = self.words[..k].iter().map(|w| w.load(Ordering::SeqCst)).sum();
        let start = self.starts.get(k).copied().unwrap_or(0);
        let mut wrote = false;
        loop {
            let p = self.next[k].fetch_add(1, Ordering::SeqCst);
            if p >= total {
                return wrote;
            }
            let from = p * self.piece;
            let to = (from + self.piece).min(len);
            let _copy = trace::span("copy", to - from);
            if k == 0 {
                if let Some(trim) = &self.layout.trim {
                    // SAFETY: rows `h + from..h + to` of the first segment's ids and offsets are
                    // its tokens, initialized (`place_first` kept them after the prefix); only
                    // this claim of piece `p` writes them (later segments' windows start at
                    // `h + len`), and the vectors are not touched until `finish`.
                    let (ids, offsets) = unsafe {
                        (
                            std::slice::from_raw_parts(room.ids.add(h + from), to - from),
                            std::slice::from_raw_parts_mut(room.offsets.add(h + from), to - from),
                        )
                    };
                    for (j, (offsets, &id)) in offsets.iter_mut().zip(ids).enumerate() {
                        trim_offsets(trim, id, offsets, from + j);
                    }
                }
            } else {
                let part = Part {
                    ids: &segment.ids[from..to],
                    offsets: &segment.offsets[from..to],
                    word_ids: &segment.word_ids[from..to],
                    start,
                    words_before,
                };
                let at = h + before + from;
                // SAFETY: the window `at..at + (to - from)` of `ids` and `offsets` and
                // `before + from..before + to` of `words` lie within the vectors' capacities (the
                // segment's whole window was checked to fit above); they start after every row of
                // the segments before `k` (their token counts sum to `before`, and the first
                // segment's rows, prefix included, end at `h` + its count), so they are spare
                // capacity that only this claim of piece `p` writes, read by no one before
                // `finish`.
                let out = unsafe {
                    Slots {
                        ids: std::slice::from_raw_parts_mut(room.ids.add(at).cast::<MaybeUninit<u32>>(), to - from),
                        offsets: std::slice::from_raw_parts_mut(
                            room.offsets.add(at).cast::<MaybeUninit<(usize, usize)>>(),
                            to - from,
                        ),
                        words: std::slice::from_raw_parts_mut(
                            room.words.add(before + from).cast::<MaybeUninit<u32>>(),
                            to - from,
                        ),
                    }
                };
                out.fill(&part, before + from, self.layout);
            }
            self.written[k].fetch_add(1, Ordering::SeqCst);
            wrote = true;
        }
    }

    /// The encoding, once every segment is encoded (after the pool's join): the pieces no thread
    /// took are written now, the columns' lengths set past the segments written in full, and
    /// what did not fit written after them as [`assemble_into_first`] does.
    ///
    /// # Errors
    /// [`ErrorKind::Encode`] should the first segment's columns not hold what was placed in them
    /// (never: a run-time check of what the assembly relies on).
    pub(crate) fn finish(self, vocab: &Arc<Vocab>) -> Result<Encoding> {
        let n = self.states.len();
        let filling = trace::span("fill", 0);
        let left: Vec<usize> = (0..n).filter(|&k| self.next[k].load(Ordering::SeqCst) < self.pieces(k)).collect();
        match left.as_slice() {
            [] => {}
            [k] => {
                self.work_on(*k);
            }
            _ => left.into_par_iter().for_each(|k| {
                self.work_on(k);
            }),
        }
        drop(filling);
        let complete: Vec<bool> = (0..n).map(|k| self.written[k].load(Ordering::SeqCst) == self.pieces(k)).collect();
        let Gather { starts, layout, slots, first, lens, words: counts, .. } = self;
        let mut segments: Vec<Segment> = slots.into_iter().map(|s| s.into_inner().unwrap_or_default()).collect();
        let Some((mut ids, mut offsets, mut words)) = first.into_inner().unwrap_or_else(PoisonError::into_inner) else {
            // Never: the first segment is placed when it is encoded.
            return Err(Error::new(ErrorKind::Encode, "the segments' assembly has no first segment"));
        };
        let lens: Vec<usize> = lens.into_iter().map(AtomicUsize::into_inner).collect();
        let counts: Vec<u32> = counts.into_iter().map(AtomicU32::into_inner).collect();
        let (prefix, suffix) = (layout.prefix, layout.suffix);
        let text_tokens: usize = lens.iter().sum();
        let with_strings = text_tokens > 0 && segments.iter().zip(&lens).all(|(s, &len)| s.tokens.len() == len);
        // The first segment's rows are in its vectors' lengths already; the windows written after
        // them (a leading run of the later segments) are not.
        let done = 1 + complete.iter().skip(1).take_while(|&&c| c).count();
        let written: usize = lens.iter().take(done).sum();
        let (ids_len, words_len) = (prefix.len() + written, written);
        let first_len = lens.first().copied().unwrap_or(0);
        if !complete.first().copied().unwrap_or(false)
            || ids.len() != prefix.len() + first_len
            || offsets.len() != ids.len()
            || words.len() != first_len
            || ids_len > ids.capacity()
            || ids_len > offsets.capacity()
            || words_len > words.capacity()
        {
            // Never: the first segment's columns have equal lengths, its pieces are all taken
            // above, and each window was checked against the room before it was written.
            return Err(Error::new(ErrorKind::Encode, "the segments' assembly lost track of the first segment's rows"));
        }
        // SAFETY: rows up to the first segment's end are the vectors' lengths (checked above),
        // and every piece of every later segment before `done` was written in full into its
        // window (`written` counts a piece only after `Slots::fill` wrote every slot of it), the
        // windows following one another without gaps up to `ids_len` (`words_len` in `words`),
        // checked above to be within each vector's capacity.
        unsafe {
            ids.set_len(ids_len);
            offsets.set_len(ids_len);
            words.set_len(words_len);
        }
        if done < segments.len() {
            // The rest did not fit the room (a normalizer that expands characters): written
            // after a reservation, as `assemble_into_first` writes.
            let rest = text_tokens - written;
            ids.reserve(rest);
            offsets.reserve(rest);
            words.reserve(rest);
            let mut words_before: u32 = counts.iter().take(done).sum();
            let mut parts = Vec::with_capacity(segments.len() - done);
            for (k, segment) in segments.iter().enumerate().skip(done) {
                let start = starts.get(k).copied().unwrap_or(0);
                parts.push(Part::of(segment, segment.ids.len(), start, words_before));
                words_before += counts[k];
            }
            {
                let text = Slots {
                    ids: &mut ids.spare_capacity_mut()[..rest],
                    offsets: &mut offsets.spare_capacity_mut()[..rest],
                    words: &mut words.spare_capacity_mut()[..rest],
                };
                write_parts(text, &parts, written, Vec::new(), layout, None);
            }
            drop(parts);
            // SAFETY: `write_parts` wrote every one of the first `rest` spare slots of each
            // column, reserved just above.
            unsafe {
                ids.set_len(ids_len + rest);
                offsets.set_len(ids_len + rest);
                words.set_len(words_len + rest);
            }
        }
        ids.extend(suffix.iter().map(|&(id, _)| id));
        offsets.extend(suffix.iter().map(|_| (0, 0)));
        let strings: Option<Vec<String>> =
            with_strings.then(|| segments.iter_mut().flat_map(|s| std::mem::take(&mut s.tokens)).collect());
        let freeing = trace::span("free", 0);
        drop(segments);
        drop(freeing);
        Ok(encoding_of(ids, offsets, words, strings.map(Vec::into_iter), layout, vocab))
    }
}

/// `mutex`'s value, even after a panic while it was held (its values are written whole).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// [`assemble`] for a text that is one segment (every text on one thread, and every short
/// one): the segment's ids and offsets become the encoding's columns without a copy, the
/// template's special tokens put around them in place (their room is usually there already: the
/// engines reserve more rows than a text has tokens), offsets trimmed in place; the segment's
/// `u32` word ids become the recipe of the lazy word-id column and the template's columns are
/// recipes too ([`template_columns`]), so nothing is written per token here. Why: the column-by-column copy of
/// [`assemble_parts`] was 6 % of the instructions of a fresh English encode on one thread and
/// 38 % of its L1 read misses (qwen3, session 7); ids and offsets are 20 of its 40 bytes per token.
/// `segment`'s columns must have equal lengths (the caller checks).
fn assemble_one(segment: Segment, layout: &Layout<'_>, vocab: &Arc<Vocab>) -> Encoding {
    assemble_one_at(segment, 0, layout, vocab)
}

/// [`assemble`] for a text that is one segment whose ids and offsets hold the template's prefix
/// in front already (written into the columns lent to the engine before its rows:
/// `engine::out::Columns::headed`), so that nothing is shifted: the rest as [`assemble_one`].
/// The caller checked the head is there (`engine::out::headed`); should it not be, the segment
/// is assembled as one of ordinary columns.
pub(crate) fn assemble_headed(segment: Segment, layout: &Layout<'_>, vocab: &Arc<Vocab>) -> Encoding {
    if is_headed(&segment, layout.prefix) {
        return assemble_one_at(segment, layout.prefix.len(), layout, vocab);
    }
    assemble(&[0], vec![segment], layout, vocab, None)
}

/// Whether `segment`'s ids and offsets hold `prefix`'s rows in front of its text rows
/// (`engine::out::headed`).
fn is_headed(segment: &Segment, prefix: &[(u32, u32)]) -> bool {
    !prefix.is_empty() && crate::engine::out::headed(segment, prefix, true)
}

/// [`assemble_one`] for a segment whose ids and offsets start with `head` rows of the template's
/// prefix already (0: none, put in front here).
fn assemble_one_at(segment: Segment, head: usize, layout: &Layout<'_>, vocab: &Arc<Vocab>) -> Encoding {
    let Segment { mut ids, tokens, mut offsets, word_ids: words, .. } = segment;
    let len = ids.len() - head;
    debug_assert!(offsets.len() == head + len && words.len() == len);
    if let Some(trim) = &layout.trim {
        for (index, (offsets, &id)) in offsets[head..].iter_mut().zip(&ids[head..]).enumerate() {
            trim_offsets(trim, id, offsets, index);
        }
    }
    let (prefix, suffix) = (layout.prefix, layout.suffix);
    if !prefix.is_empty() && head == 0 {
        ids.splice(0..0, prefix.iter().map(|&(id, _)| id));
        offsets.splice(0..0, prefix.iter().map(|_| (0, 0)));
    }
    ids.extend(suffix.iter().map(|&(id, _)| id));
    offsets.extend(suffix.iter().map(|_| (0, 0)));
    let strings = (tokens.len() == len && len > 0).then(|| tokens.into_iter());
    encoding_of(ids, offsets, words, strings, layout, vocab)
}

/// The encoding of finished columns (`ids` and `offsets` with the template's special tokens in
/// place, `words` the text's `u32` word ids): the engines' reservation, made for the text's bytes
/// rather than its tokens, given back (a shrink in place, no copy), so that the encoding holds
/// what [`assemble_parts`] would; the template's columns as recipes ([`template_columns`]); the
/// token strings kept where the text's `strings` were carried, else looked up by id on demand.
fn encoding_of(
    mut ids: Vec<u32>,
    mut offsets: Vec<(usize, usize)>,
    mut words: Vec<u32>,
    strings: Option<impl Iterator<Item = String>>,
    layout: &Layout<'_>,
    vocab: &Arc<Vocab>,
) -> Encoding {
    let (prefix, suffix) = (layout.prefix, layout.suffix);
    let n = ids.len();
    ids.shrink_to_fit();
    offsets.shrink_to_fit();
    words.shrink_to_fit();
    let (type_ids, special_tokens_mask, attention_mask) = template_columns(layout, n);
    let tokens = match strings {
        Some(strings) => {
            let mut all = Vec::with_capacity(n);
            all.extend(prefix.iter().map(|&(id, _)| vocab.string(id).to_owned()));
            all.extend(strings);
            all.extend(suffix.iter().map(|&(id, _)| vocab.string(id).to_owned()));
            Tokens::Owned(all)
        }
        None => Tokens::ById { vocab: Arc::clone(vocab), strings: OnceLock::new() },
    };
    Encoding {
        ids,
        type_ids,
        tokens,
        offsets,
        word_ids: Lazy::new(Words::new(prefix.len(), words, suffix.len())),
        special_tokens_mask,
        attention_mask,
        overflowing: Vec::new(),
    }
}

/// The columns that follow from the template alone, for an encoding of `n` tokens laid out as
/// `layout` says: type ids, special-tokens mask, attention mask, each written out only if read.
pub(crate) fn template_columns(layout: &Layout<'_>, n: usize) -> (Lazy<Fill>, Lazy<Fill>, Lazy<Fill>) {
    let (prefix, suffix) = (layout.prefix, layout.suffix);
    let type_ids = Fill::new(
        n,
        layout.type_id,
        prefix.iter().map(|&(_, t)| t).collect(),
        suffix.iter().map(|&(_, t)| t).collect(),
    );
    let special = Fill::new(n, 0, vec![1; prefix.len()], vec![1; suffix.len()]);
    (Lazy::new(type_ids), Lazy::new(special), Lazy::new(Fill::new(n, 1, Vec::new(), Vec::new())))
}

/// Writes `parts` in order into an [`Encoding`] laid out as `layout` says, one part per task when
/// there are several, on `pool` (or the current rayon pool when it is `None`). The columns are
/// allocated on the calling thread: called from outside the pool, the output comes from the
/// caller's allocator arena, which keeps its pages between calls, whereas glibc hands the memory
/// of a pool thread's arena back to the system, and each call then faults its output in anew
/// (2 threads, 1 MB documents: 150-400 page faults per MB that 1 thread does not take). Token
/// strings are looked up in `vocab` on demand (callers holding strings put them in afterwards).
/// Word ids are kept as the text's `u32` (the lazy column's recipe), 4 bytes a token written
/// instead of an `Option<u32>`'s 8.
pub(crate) fn assemble_parts(
    parts: &[Part<'_>],
    layout: &Layout<'_>,
    vocab: &Arc<Vocab>,
    pool: Option<&rayon::ThreadPool>,
) -> Encoding {
    let (prefix, suffix) = (layout.prefix, layout.suffix);
    let text_tokens: usize = parts.iter().map(|s| s.ids.len()).sum();
    let n = prefix.len() + text_tokens + suffix.len();
    // The columns are written once each, without zeroing them first: zeroing megabytes on the
    // calling thread (and taking its page faults there) cost as much as the parallel part.
    let allocating = trace::span("alloc", n);
    let mut ids: Vec<u32> = Vec::with_capacity(n);
    let mut offsets: Vec<(usize, usize)> = Vec::with_capacity(n);
    let mut words: Vec<u32> = Vec::with_capacity(text_tokens);
    drop(allocating);
    ids.extend(prefix.iter().map(|&(id, _)| id));
    offsets.extend(prefix.iter().map(|_| (0, 0)));
    {
        let (ids_spare, offsets_spare, words_spare) =
            (ids.spare_capacity_mut(), offsets.spare_capacity_mut(), words.spare_capacity_mut());
        let text = Slots {
            ids: &mut ids_spare[..text_tokens],
            offsets: &mut offsets_spare[..text_tokens],
            words: &mut words_spare[..text_tokens],
        };
        write_parts(text, parts, 0, Vec::new(), layout, pool);
    }
    // SAFETY: `write_parts` wrote every one of the first `text_tokens` spare slots of each column
    // (the windows it was given, of that length each: checked by `Slots::split_at` and
    // `Slots::fill`), and each column was allocated with room for them after the prefix.
    unsafe {
        ids.set_len(prefix.len() + text_tokens);
        offsets.set_len(prefix.len() + text_tokens);
        words.set_len(text_tokens);
    }
    ids.extend(suffix.iter().map(|&(id, _)| id));
    offsets.extend(suffix.iter().map(|_| (0, 0)));
    let tokens = Tokens::ById { vocab: Arc::clone(vocab), strings: OnceLock::new() };
    let (type_ids, special_tokens_mask, attention_mask) = template_columns(layout, n);
    Encoding {
        ids,
        type_ids,
        tokens,
        offsets,
        word_ids: Lazy::new(Words::new(prefix.len(), words, suffix.len())),
        special_tokens_mask,
        attention_mask,
        overflowing: Vec::new(),
    }
}

/// Writes `parts` in order into `text` (whose length is their token count; its first slot is
/// the text's token `first_token`) and trims the offsets of `trims` in place, one part or trim
/// per task when there are several, on `pool` (or the current rayon pool when it is `None`);
/// every slot of `text` is written (the callers' `set_len` relies on it).
fn write_parts(
    mut text: Slots<'_>,
    parts: &[Part<'_>],
    first_token: usize,
    trims: Vec<Trimming<'_>>,
    layout: &Layout<'_>,
    pool: Option<&rayon::ThreadPool>,
) {
    let mut jobs = Vec::with_capacity(parts.len() + trims.len());
    jobs.extend(trims.into_iter().map(Job::Trim));
    let mut next_token = first_token;
    for part in parts {
        let len = part.ids.len();
        let (here, rest) = text.split_at(len);
        text = rest;
        jobs.push(Job::Copy(part, next_token, here));
        next_token += len;
    }
    // Slots past the parts' tokens (none: the callers size `text` as their sum) still get a value.
    text.fill_default();
    let run = |job: Job<'_, '_>| match job {
        Job::Copy(part, first_token, out) => {
            let _copy = trace::span("copy", part.ids.len());
            out.fill(part, first_token, layout);
        }
        Job::Trim(Trimming { offsets, ids, first_token }) => {
            if let Some(trim) = &layout.trim {
                for (i, (offsets, &id)) in offsets.iter_mut().zip(ids).enumerate() {
                    trim_offsets(trim, id, offsets, first_token + i);
                }
            }
        }
    };
    let filling = trace::span("fill", 0);
    // One job (a short text) is run on the calling thread: handing it to a pool thread and
    // waiting for it costs more than the copy.
    match pool {
        _ if jobs.len() <= 1 => jobs.into_iter().for_each(run),
        Some(pool) => pool.install(|| jobs.into_par_iter().for_each(run)),
        None => jobs.into_par_iter().for_each(run),
    }
    drop(filling);
}

/// Offsets written already, to be trimmed in place: those of the tokens `ids`, the text's
/// tokens from `first_token` on.
struct Trimming<'a> {
    offsets: &'a mut [(usize, usize)],
    ids: &'a [u32],
    first_token: usize,
}

/// One task of [`write_parts`].
enum Job<'a, 'p> {
    /// A part written into its window of slots, from the text's token given.
    Copy(&'p Part<'a>, usize, Slots<'p>),
    Trim(Trimming<'p>),
}

/// The elements of `v` and its spare capacity, both borrowed at once (as the unstable
/// `Vec::split_at_spare_mut` gives them): the first segment's offsets are trimmed in place while
/// the later segments are written after them.
fn split_at_spare<T>(v: &mut Vec<T>) -> (&mut [T], &mut [MaybeUninit<T>]) {
    let (len, capacity) = (v.len(), v.capacity());
    if len > capacity {
        // Never: a `Vec`'s length is within its capacity.
        return (&mut [], &mut []);
    }
    let ptr = v.as_mut_ptr();
    // SAFETY: `ptr` starts `v`'s allocation of `capacity` elements (checked above to be at least
    // `len`), whose first `len` are initialized `T`s and the rest are spare; the two slices cover
    // these disjoint ranges, `MaybeUninit<T>` has `T`'s layout, and both borrow `v` mutably, so
    // nothing else reaches the allocation while they live.
    unsafe {
        (
            std::slice::from_raw_parts_mut(ptr, len),
            std::slice::from_raw_parts_mut(ptr.add(len).cast::<MaybeUninit<T>>(), capacity - len),
        )
    }
}

/// Disjoint windows of uninitialized slots of the text's tokens, one per column, all of the same
/// length.
struct Slots<'a> {
    ids: &'a mut [MaybeUninit<u32>],
    offsets: &'a mut [MaybeUninit<(usize, usize)>],
    /// Word ids as the engines count them (`u32`): the lazy column adds the `None`s of the
    /// special tokens when it is read.
    words: &'a mut [MaybeUninit<u32>],
}

impl<'a> Slots<'a> {
    /// The first `mid` slots of every column and the rest; `mid` is capped at the shortest
    /// column, so both halves keep equal lengths whatever the windows were.
    fn split_at(self, mid: usize) -> (Slots<'a>, Slots<'a>) {
        let mid = mid.min(self.ids.len()).min(self.offsets.len()).min(self.words.len());
        let (ids, ids_rest) = self.ids.split_at_mut(mid);
        let (offsets, offsets_rest) = self.offsets.split_at_mut(mid);
        let (words, words_rest) = self.words.split_at_mut(mid);
        (Slots { ids, offsets, words }, Slots { ids: ids_rest, offsets: offsets_rest, words: words_rest })
    }

    /// Writes a placeholder into every slot (only reached should the windows outnumber the
    /// parts' tokens, which the callers rule out).
    fn fill_default(self) {
        for slot in self.ids {
            slot.write(0);
        }
        for slot in self.offsets {
            slot.write((0, 0));
        }
        for slot in self.words {
            slot.write(0);
        }
    }

    /// Writes the tokens of `part`, the text's tokens from `first_token` on, into every slot of
    /// these windows (whose length is the part's token count). Column by column: each loop is a
    /// copy, a fill or an add that the compiler vectorizes, where a six-column write per token
    /// cost about 40 instructions per token, a fifth of a fresh English encode (qwen3).
    fn fill(self, part: &Part<'_>, first_token: usize, layout: &Layout<'_>) {
        let n = self.ids.len().min(self.offsets.len()).min(self.words.len());
        // `Segment`'s columns have equal lengths; should a part's not, the slots past its
        // shortest column still get a value, so that every slot is written (the caller's
        // `set_len` relies on it).
        let known = n.min(part.ids.len()).min(part.offsets.len()).min(part.word_ids.len());
        for (slot, &id) in self.ids.iter_mut().zip(&part.ids[..known]) {
            slot.write(id);
        }
        let words_before = part.words_before;
        for (slot, &w) in self.words.iter_mut().zip(&part.word_ids[..known]) {
            slot.write(w + words_before);
        }
        let start = part.start;
        let (offsets, ids) = (&part.offsets[..known], &part.ids[..known]);
        match &layout.trim {
            None => {
                for (slot, &(s, e)) in self.offsets.iter_mut().zip(offsets) {
                    slot.write((s + start, e + start));
                }
            }
            Some(trim) => {
                for (i, (slot, (&id, &(s, e)))) in self.offsets.iter_mut().zip(ids.iter().zip(offsets)).enumerate() {
                    let mut offsets = (s + start, e + start);
                    trim_offsets(trim, id, &mut offsets, first_token + i);
                    slot.write(offsets);
                }
            }
        }
        Slots { ids: &mut self.ids[known..], offsets: &mut self.offsets[known..], words: &mut self.words[known..] }
            .fill_default();
    }
}

/// HF's `process_offsets` for one token; `index` is its position among the text's tokens.
fn trim_offsets(trim: &Trim<'_>, id: u32, offsets: &mut (usize, usize), index: usize) {
    let (mut leading, trailing) = usize::try_from(id)
        .ok()
        .and_then(|i| trim.spaces.get(i))
        .map_or((0, 0), |&(l, t)| (usize::from(l), usize::from(t)));
    if leading > 0 {
        let is_first = (trim.first_is_index_zero && index == 0) || offsets.0 == 0;
        if is_first && trim.add_prefix_space && leading == 1 {
            leading = 0;
        }
        offsets.0 = (offsets.0 + leading).min(offsets.1);
    }
    if trailing > 0 && offsets.1 >= trailing {
        offsets.1 = (offsets.1 - trailing).max(offsets.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment of `ids`, `offsets` and word ids `words` whose columns have `room` rows (built
    /// afresh for each use: a clone keeps no spare capacity), with token strings when `strings`.
    fn segment(
        vocab: &Vocab,
        ids: &[u32],
        offsets: &[(usize, usize)],
        words: &[u32],
        room: usize,
        strings: bool,
    ) -> Segment {
        let mut s = Segment {
            ids: Vec::with_capacity(room),
            tokens: vec![],
            offsets: Vec::with_capacity(room),
            word_ids: Vec::with_capacity(room),
            words: words.last().map_or(0, |&w| w + 1),
            added_words: vec![],
        };
        s.ids.extend_from_slice(ids);
        s.offsets.extend_from_slice(offsets);
        s.word_ids.extend_from_slice(words);
        if strings {
            s.tokens = ids.iter().map(|&id| vocab.string(id).to_owned()).collect();
        }
        s
    }

    /// Runs `check` on every layout the multi-segment tests try (no, one or two specials in
    /// front, none or one after, no trimming or trimming with and without a prefix space; type
    /// id 2), each with and without token strings, with the case's label.
    fn each_layout(spaces: &[(u16, u16)], mut check: impl FnMut(&Layout<'_>, bool, &str)) {
        for prefix in [&[][..], &[(4, 0)][..], &[(4, 0), (4, 1)][..]] {
            for suffix in [&[][..], &[(4, 1)][..]] {
                for trim in [None, Some(true), Some(false)] {
                    for strings in [false, true] {
                        let layout = Layout {
                            prefix,
                            suffix,
                            type_id: 2,
                            trim: trim.map(|add_prefix_space| Trim {
                                spaces,
                                add_prefix_space,
                                first_is_index_zero: prefix.is_empty(),
                            }),
                        };
                        check(&layout, strings, &format!("{prefix:?} {suffix:?} {trim:?} {strings}"));
                    }
                }
            }
        }
    }

    fn segments() -> Vec<Segment> {
        let a = Segment {
            ids: vec![1, 2],
            tokens: vec![],
            offsets: vec![(0, 2), (3, 4)],
            word_ids: vec![0, 1],
            words: 2,
            added_words: vec![1],
        };
        let b = Segment {
            ids: vec![3],
            tokens: vec![],
            offsets: vec![(1, 2)],
            word_ids: vec![1],
            words: 3,
            added_words: vec![0, 1],
        };
        vec![a, b]
    }

    #[test]
    fn merge_shifts_offsets_and_words() {
        let m = merge(&[0, 4], segments());
        assert_eq!(m.ids, vec![1, 2, 3]);
        assert_eq!(m.offsets, vec![(0, 2), (3, 4), (5, 6)]);
        assert_eq!(m.word_ids, vec![0, 1, 3]);
        assert_eq!(m.words, 5);
        assert_eq!(m.added_words, vec![1, 2, 3]);
    }

    #[test]
    fn assemble_places_specials_around_the_text() {
        let vocab = Arc::new(Vocab { strings: (0..10).map(|i| format!("t{i}")).collect() });
        let layout = Layout { prefix: &[(8, 0)], suffix: &[(9, 1)], type_id: 0, trim: None };
        let e = assemble(&[0, 4], segments(), &layout, &vocab, None);
        assert_eq!(e.ids(), [8, 1, 2, 3, 9]);
        assert_eq!(e.type_ids(), [0, 0, 0, 0, 1]);
        assert_eq!(e.offsets(), [(0, 0), (0, 2), (3, 4), (5, 6), (0, 0)]);
        assert_eq!(e.word_ids(), [None, Some(0), Some(1), Some(3), None]);
        assert_eq!(e.special_tokens_mask(), [1, 0, 0, 0, 1]);
        assert_eq!(e.attention_mask(), [1; 5]);
        assert_eq!(e.tokens(), ["t8", "t1", "t2", "t3", "t9"]);
    }

    /// Several segments whose first has room for every token (`assemble_into_first`) give
    /// exactly what the copy into new columns gives (`assemble_parts`), with and without
    /// specials, trimming and token strings, with pieces of one token (every piece boundary
    /// exercised), and with pool threads.
    #[test]
    fn into_first_equals_copied() {
        let vocab = Arc::new(Vocab { strings: vec![" a".into(), "b ".into(), " ".into(), "c".into(), "[S]".into()] });
        let spaces = [(1, 0), (0, 1), (1, 1), (0, 0), (0, 0)];
        let text = |which: usize, room: usize, strings: bool| -> Vec<Segment> {
            if which == 0 {
                vec![
                    segment(&vocab, &[0, 1], &[(0, 2), (2, 4)], &[0, 0], room, strings),
                    segment(&vocab, &[2, 3, 0], &[(0, 1), (1, 2), (2, 4)], &[0, 1, 1], 0, strings),
                    segment(&vocab, &[], &[], &[], 0, strings),
                    segment(&vocab, &[1], &[(0, 2)], &[0], 0, strings),
                ]
            } else {
                vec![
                    segment(&vocab, &[], &[], &[], room, strings),
                    segment(&vocab, &[3, 2], &[(0, 1), (1, 2)], &[0, 0], 0, strings),
                ]
            }
        };
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        let all_starts = [0, 4, 8, 8];
        for room in [0, 64] {
            for which in 0..2 {
                each_layout(&spaces, |layout, strings, case| {
                    let reference = text(which, 0, strings);
                    let starts = &all_starts[..reference.len()];
                    let mut words_before = 0;
                    let parts: Vec<Part<'_>> = reference
                        .iter()
                        .zip(starts)
                        .flat_map(|(s, &start)| {
                            let part = Part::of(s, s.ids.len(), start, words_before);
                            words_before += s.words;
                            part.pieces(1)
                        })
                        .collect();
                    let mut copied = assemble_parts(&parts, layout, &vocab, None);
                    if strings {
                        let special = |&(id, _): &(u32, u32)| vocab.string(id).to_owned();
                        let mut all: Vec<String> = layout.prefix.iter().map(special).collect();
                        all.extend(reference.iter().flat_map(|s| s.tokens.iter().cloned()));
                        all.extend(layout.suffix.iter().map(special));
                        copied.set_tokens(all);
                    }
                    for pool in [None, Some(&pool)] {
                        let segments = text(which, room, strings);
                        assert_eq!(room_in_first(&segments, layout), room > 0);
                        let assembled = assemble(starts, segments, layout, &vocab, pool);
                        let case = format!("{room} {which} {case}");
                        assert_eq!(assembled, copied, "{case}");
                        assert_eq!(assembled.word_ids(), copied.word_ids(), "{case}");
                        assert_eq!(assembled.tokens(), copied.tokens(), "{case}");
                        assert_eq!(assembled.type_ids(), copied.type_ids(), "{case}");
                    }
                });
            }
        }
    }

    /// Segments assembled as they arrive (`Gather`) give exactly what `assemble` gives, for every
    /// order of arrival (a thread that sees a segment not yet started goes back without copying;
    /// what is left is copied by later arrivals or by `finish`), with and without specials,
    /// trimming and token strings, with pieces of one token, with a first segment whose room
    /// holds every token, some or none of the later ones (the rest written after a reservation),
    /// and on a pool of threads.
    #[test]
    fn gathered_equals_assembled() {
        let vocab = Arc::new(Vocab { strings: vec![" a".into(), "b ".into(), " ".into(), "c".into(), "[S]".into()] });
        let spaces = [(1, 0), (0, 1), (1, 1), (0, 0), (0, 0)];
        let text = |room: usize, strings: bool| -> Vec<Segment> {
            vec![
                segment(&vocab, &[0, 1], &[(0, 2), (2, 4)], &[0, 0], room, strings),
                segment(&vocab, &[2, 3, 0], &[(0, 1), (1, 2), (2, 4)], &[0, 1, 1], 0, strings),
                segment(&vocab, &[], &[], &[], 0, strings),
                segment(&vocab, &[1, 0], &[(0, 2), (2, 4)], &[0, 1], 0, strings),
            ]
        };
        let starts = [0, 4, 8, 8];
        let orders = [[0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2], [2, 0, 3, 1], [0, 3, 1, 2]];
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        // Rooms: none, two rows short of a prefix of two, the first two segments, every token.
        for room in [0, 3, 7, 64] {
            each_layout(&spaces, |layout, strings, case| {
                let expected = assemble(&starts, text(0, strings), layout, &vocab, None);
                let check = |gathered: Encoding, how: &str| {
                    assert_eq!(gathered, expected, "{room} {case} {how}");
                    assert_eq!(gathered.word_ids(), expected.word_ids(), "{room} {case} {how}");
                    assert_eq!(gathered.tokens(), expected.tokens(), "{room} {case} {how}");
                    assert_eq!(gathered.type_ids(), expected.type_ids(), "{room} {case} {how}");
                };
                for order in orders {
                    for piece in [1, 1 << 20] {
                        let gather = Gather::new(&starts, layout, piece);
                        let mut segments: Vec<Option<Segment>> = text(room, strings).into_iter().map(Some).collect();
                        for k in order {
                            gather.start(k);
                            gather.arrive(k, segments[k].take().unwrap());
                        }
                        check(gather.finish(&vocab).unwrap(), &format!("{order:?} {piece}"));
                    }
                }
                for piece in [1, 2] {
                    let gather = Gather::new(&starts, layout, piece);
                    let segments = text(room, strings);
                    pool.install(|| {
                        segments.into_par_iter().enumerate().for_each(|(k, segment)| {
                            gather.start(k);
                            gather.arrive(k, segment);
                        })
                    });
                    check(pool.install(|| gather.finish(&vocab)).unwrap(), &format!("pool {piece}"));
                }
            });
        }
    }

    /// A one-segment text, whose columns are moved into the encoding (`assemble_one`), gets
    /// exactly what the column-by-column copy writes, with and without specials, trimming and
    /// token strings, and with spare capacity in the segment's columns (as engines leave it).
    #[test]
    fn one_segment_moved_equals_copied() {
        let vocab = Arc::new(Vocab { strings: vec![" a".into(), "b ".into(), " ".into(), "c".into(), "[S]".into()] });
        let spaces = [(1, 0), (0, 1), (1, 1), (0, 0), (0, 0)];
        let mut segment = Segment {
            ids: Vec::with_capacity(64),
            tokens: vec![],
            offsets: Vec::with_capacity(64),
            word_ids: vec![0, 0, 1, 2],
            words: 3,
            added_words: vec![],
        };
        segment.ids.extend([0, 1, 2, 3]);
        segment.offsets.extend([(0, 2), (2, 4), (4, 5), (5, 6)]);
        let with_strings =
            Segment { tokens: vec![" a".into(), "b ".into(), " ".into(), "c".into()], ..segment.clone() };
        for (prefix, suffix) in [(&[][..], &[][..]), (&[(4, 0)][..], &[][..]), (&[(4, 0)][..], &[(4, 1), (4, 1)][..])] {
            for trim in [None, Some(true), Some(false)] {
                for segment in [&segment, &with_strings] {
                    let layout = Layout {
                        prefix,
                        suffix,
                        type_id: 2,
                        trim: trim.map(|add_prefix_space| Trim {
                            spaces: &spaces,
                            add_prefix_space,
                            first_is_index_zero: prefix.is_empty(),
                        }),
                    };
                    let moved = assemble(&[0], vec![segment.clone()], &layout, &vocab, None);
                    let mut copied =
                        assemble_parts(&[Part::of(segment, segment.ids.len(), 0, 0)], &layout, &vocab, None);
                    if !segment.tokens.is_empty() {
                        let strings = prefix.iter().chain(suffix).map(|&(id, _)| vocab.string(id).to_owned());
                        let mut all: Vec<String> = strings.clone().take(prefix.len()).collect();
                        all.extend(segment.tokens.iter().cloned());
                        all.extend(strings.skip(prefix.len()));
                        copied.set_tokens(all);
                    }
                    assert_eq!(moved, copied, "{prefix:?} {suffix:?} {trim:?}");
                    assert_eq!(moved.first_difference(&copied), None);
                    assert_eq!(moved.word_ids(), copied.word_ids());
                    assert_eq!(moved.type_ids(), copied.type_ids());
                }
            }
        }
    }
}
