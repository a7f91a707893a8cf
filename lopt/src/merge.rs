//! Merge: joining the segments of one text into its encoding.
//!
//! Segments end and start at safe cuts, so the tokens of the whole text are exactly the
//! segments' tokens in order (`docs/correctness.md`); the merge only moves each segment's offsets
//! by the segment's start and its word ids by the number of pre-tokens before it.
//!
//! Two forms: [`merge`] builds one raw [`Segment`] (for HF's post-processing), and [`assemble`]
//! writes the segments straight into the final columns of an [`Encoding`], leaving slots for the
//! special tokens of the template, one segment per task on the current rayon pool. The second is
//! the hot path: copying half a million tokens sequentially would cost as much as tokenizing them
//! with a native engine on one more core.

use std::mem::MaybeUninit;
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;

use crate::encoding::{Encoding, Fill, Lazy, Tokens, Vocab, Words};
use crate::engine::Segment;
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
    if segments.len() == 1 && starts.first() == Some(&0) && segments.first().is_some_and(whole) {
        if let Some(segment) = segments.pop() {
            return assemble_one(segment, layout, vocab);
        }
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
    let Segment { mut ids, tokens, mut offsets, word_ids: mut words, .. } = segment;
    let len = ids.len();
    debug_assert!(offsets.len() == len && words.len() == len);
    if let Some(trim) = &layout.trim {
        for (index, (offsets, &id)) in offsets.iter_mut().zip(&ids).enumerate() {
            trim_offsets(trim, id, offsets, index);
        }
    }
    let (prefix, suffix) = (layout.prefix, layout.suffix);
    let n = prefix.len() + len + suffix.len();
    if !prefix.is_empty() {
        ids.splice(0..0, prefix.iter().map(|&(id, _)| id));
        offsets.splice(0..0, prefix.iter().map(|_| (0, 0)));
    }
    ids.extend(suffix.iter().map(|&(id, _)| id));
    offsets.extend(suffix.iter().map(|_| (0, 0)));
    // The engine's reservation was for the text's bytes, not its tokens: what is not used goes
    // back (a shrink in place, no copy), so the encoding holds what `assemble_parts` would.
    ids.shrink_to_fit();
    offsets.shrink_to_fit();
    words.shrink_to_fit();
    let (type_ids, special_tokens_mask, attention_mask) = template_columns(layout, n);
    let tokens = if tokens.len() == len && len > 0 {
        let mut all = Vec::with_capacity(n);
        all.extend(prefix.iter().map(|&(id, _)| vocab.string(id).to_owned()));
        all.extend(tokens);
        all.extend(suffix.iter().map(|&(id, _)| vocab.string(id).to_owned()));
        Tokens::Owned(all)
    } else {
        Tokens::ById { vocab: Arc::clone(vocab), strings: OnceLock::new() }
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
fn template_columns(layout: &Layout<'_>, n: usize) -> (Lazy<Fill>, Lazy<Fill>, Lazy<Fill>) {
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
pub(crate) fn assemble_parts(
    parts: &[Part<'_>],
    layout: &Layout<'_>,
    vocab: &Arc<Vocab>,
    pool: Option<&rayon::ThreadPool>,
) -> Encoding {
    let (prefix, suffix) = (layout.prefix.len(), layout.suffix.len());
    let text_tokens: usize = parts.iter().map(|s| s.ids.len()).sum();
    let n = prefix + text_tokens + suffix;
    // The columns are written once each, without zeroing them first: zeroing megabytes on the
    // calling thread (and taking its page faults there) cost as much as the parallel part.
    let allocating = trace::span("alloc", n);
    let mut columns = Columns::with_capacity(n);
    drop(allocating);
    let (mut head, rest) = columns.spare().split_at(prefix);
    let (mut text, mut tail) = rest.split_at(text_tokens);
    for (i, &(id, _)) in layout.prefix.iter().enumerate() {
        head.write(i, id);
    }
    for (i, &(id, _)) in layout.suffix.iter().enumerate() {
        tail.write(i, id);
    }

    let mut jobs = Vec::with_capacity(parts.len());
    let mut first_token = 0;
    for part in parts {
        let len = part.ids.len();
        let (here, rest) = text.split_at(len);
        text = rest;
        jobs.push((part, first_token, here));
        first_token += len;
    }
    let fill = |(part, first_token, out): (&Part<'_>, usize, Slots<'_>)| {
        let _copy = trace::span("copy", part.ids.len());
        out.fill(part, first_token, layout)
    };
    let filling = trace::span("fill", 0);
    // One part (a short text) is written on the calling thread: handing it to a pool thread
    // and waiting for it costs more than the copy.
    match pool {
        _ if jobs.len() == 1 => jobs.into_iter().for_each(fill),
        Some(pool) => pool.install(|| jobs.into_par_iter().for_each(fill)),
        None => jobs.into_par_iter().for_each(fill),
    }
    drop(filling);
    // SAFETY: `head`, the parts' slices and `tail` partition the `n` spare slots of every
    // column, and each slot of each was written above (`Slots::fill` writes every slot of its
    // window, whatever the part's column lengths).
    let encoding_columns = unsafe { columns.assume_init(n) };
    let tokens = Tokens::ById { vocab: Arc::clone(vocab), strings: OnceLock::new() };
    let (ids, offsets, word_ids) = encoding_columns;
    let (type_ids, special_tokens_mask, attention_mask) = template_columns(layout, n);
    Encoding {
        ids,
        type_ids,
        tokens,
        offsets,
        word_ids: word_ids.into(),
        special_tokens_mask,
        attention_mask,
        overflowing: Vec::new(),
    }
}

/// The per-token columns of an encoding under construction that depend on the text's tokens
/// (the others follow from the template: [`template_columns`]).
struct Columns {
    ids: Vec<u32>,
    offsets: Vec<(usize, usize)>,
    word_ids: Vec<Option<u32>>,
}

type Finished = (Vec<u32>, Vec<(usize, usize)>, Vec<Option<u32>>);

impl Columns {
    fn with_capacity(n: usize) -> Self {
        Columns { ids: Vec::with_capacity(n), offsets: Vec::with_capacity(n), word_ids: Vec::with_capacity(n) }
    }

    /// The uninitialized slots of every column.
    fn spare(&mut self) -> Slots<'_> {
        Slots {
            ids: self.ids.spare_capacity_mut(),
            offsets: self.offsets.spare_capacity_mut(),
            word_ids: self.word_ids.spare_capacity_mut(),
        }
    }

    /// # Safety
    /// The first `n` slots of every column must have been written through [`Columns::spare`].
    unsafe fn assume_init(mut self, n: usize) -> Finished {
        // SAFETY: the caller guarantees the first `n` slots are initialized, and `n` is within
        // the capacity every column was created with.
        unsafe {
            self.ids.set_len(n);
            self.offsets.set_len(n);
            self.word_ids.set_len(n);
        }
        (self.ids, self.offsets, self.word_ids)
    }
}

/// Disjoint windows of uninitialized slots, one per column, all of the same length.
struct Slots<'a> {
    ids: &'a mut [MaybeUninit<u32>],
    offsets: &'a mut [MaybeUninit<(usize, usize)>],
    word_ids: &'a mut [MaybeUninit<Option<u32>>],
}

impl<'a> Slots<'a> {
    fn split_at(self, mid: usize) -> (Slots<'a>, Slots<'a>) {
        let (ids, ids_rest) = self.ids.split_at_mut(mid);
        let (offsets, offsets_rest) = self.offsets.split_at_mut(mid);
        let (word_ids, words_rest) = self.word_ids.split_at_mut(mid);
        (Slots { ids, offsets, word_ids }, Slots { ids: ids_rest, offsets: offsets_rest, word_ids: words_rest })
    }

    /// Writes the tokens of `part`, the text's tokens from `first_token` on, into every slot of
    /// these windows (whose length is the part's token count). Column by column: each loop is a
    /// copy, a fill or an add that the compiler vectorizes, where a six-column write per token
    /// cost about 40 instructions per token, a fifth of a fresh English encode (qwen3).
    fn fill(self, part: &Part<'_>, first_token: usize, layout: &Layout<'_>) {
        let n = self.ids.len();
        // `Segment`'s columns have equal lengths; should a part's not, the slots past its
        // shortest column still get a value, so that every slot is written (the caller's
        // `assume_init` relies on it).
        let known = n.min(part.ids.len()).min(part.offsets.len()).min(part.word_ids.len());
        for (slot, &id) in self.ids.iter_mut().zip(&part.ids[..known]) {
            slot.write(id);
        }
        let words_before = part.words_before;
        for (slot, &w) in self.word_ids.iter_mut().zip(&part.word_ids[..known]) {
            slot.write(Some(w + words_before));
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
        for i in known..n {
            self.ids[i].write(0);
            self.word_ids[i].write(None);
            self.offsets[i].write((0, 0));
        }
    }

    /// A special token of the template at slot `i`: no offsets, no word.
    fn write(&mut self, i: usize, id: u32) {
        self.ids[i].write(id);
        self.offsets[i].write((0, 0));
        self.word_ids[i].write(None);
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
