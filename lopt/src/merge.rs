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

use std::sync::{Arc, OnceLock};

use rayon::prelude::*;

use crate::encoding::{Encoding, Tokens, Vocab};
use crate::engine::Segment;

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
    };
    for (segment, &start) in segments.into_iter().zip(starts) {
        let words_before = merged.words;
        merged.ids.extend_from_slice(&segment.ids);
        if with_strings {
            merged.tokens.extend(segment.tokens);
        }
        merged.offsets.extend(segment.offsets.iter().map(|&(s, e)| (s + start, e + start)));
        merged.word_ids.extend(segment.word_ids.iter().map(|&w| w + words_before));
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

/// Writes `segments` (segment `i` starting at byte `starts[i]`) into an [`Encoding`] laid out as
/// `layout` says, in parallel on the current rayon pool. Token strings are the segments' when they
/// carry them, else looked up in `vocab` on demand.
pub(crate) fn assemble(starts: &[usize], segments: Vec<Segment>, layout: &Layout<'_>, vocab: &Arc<Vocab>) -> Encoding {
    debug_assert_eq!(starts.len(), segments.len());
    let (prefix, suffix) = (layout.prefix.len(), layout.suffix.len());
    let text_tokens: usize = segments.iter().map(|s| s.ids.len()).sum();
    let n = prefix + text_tokens + suffix;
    let mut encoding = Encoding {
        ids: vec![0; n],
        type_ids: vec![layout.type_id; n],
        tokens: Tokens::ById { vocab: Arc::clone(vocab), strings: OnceLock::new() },
        offsets: vec![(0, 0); n],
        word_ids: vec![None; n],
        special_tokens_mask: vec![0; n],
        attention_mask: vec![1; n],
        overflowing: Vec::new(),
    };
    for (i, &(id, type_id)) in layout.prefix.iter().chain(layout.suffix).enumerate() {
        let at = if i < prefix { i } else { prefix + text_tokens + (i - prefix) };
        encoding.ids[at] = id;
        encoding.type_ids[at] = type_id;
        encoding.special_tokens_mask[at] = 1;
    }

    let strings = segments.iter().all(|s| s.tokens.len() == s.ids.len()) && text_tokens > 0;
    let mut jobs = Vec::with_capacity(segments.len());
    let (mut ids, mut offsets, mut word_ids) = (
        &mut encoding.ids[prefix..prefix + text_tokens],
        &mut encoding.offsets[prefix..prefix + text_tokens],
        &mut encoding.word_ids[prefix..prefix + text_tokens],
    );
    let (mut words_before, mut first_token) = (0, 0);
    for (segment, &start) in segments.iter().zip(starts) {
        let len = segment.ids.len();
        let (ids_here, ids_rest) = std::mem::take(&mut ids).split_at_mut(len);
        let (offsets_here, offsets_rest) = std::mem::take(&mut offsets).split_at_mut(len);
        let (words_here, words_rest) = std::mem::take(&mut word_ids).split_at_mut(len);
        (ids, offsets, word_ids) = (ids_rest, offsets_rest, words_rest);
        jobs.push((segment, start, words_before, first_token, ids_here, offsets_here, words_here));
        words_before += segment.words;
        first_token += len;
    }
    jobs.into_par_iter().for_each(|(segment, start, words_before, first_token, ids, offsets, words)| {
        ids.copy_from_slice(&segment.ids);
        for (out, &(s, e)) in offsets.iter_mut().zip(&segment.offsets) {
            *out = (s + start, e + start);
        }
        for (out, &w) in words.iter_mut().zip(&segment.word_ids) {
            *out = Some(w + words_before);
        }
        if let Some(trim) = &layout.trim {
            trim_offsets(trim, ids, offsets, first_token);
        }
    });

    if strings {
        let mut all = Vec::with_capacity(n);
        all.extend(layout.prefix.iter().map(|&(id, _)| vocab.string(id).to_owned()));
        all.extend(segments.into_iter().flat_map(|s| s.tokens));
        all.extend(layout.suffix.iter().map(|&(id, _)| vocab.string(id).to_owned()));
        encoding.tokens = Tokens::Owned(all);
    }
    encoding
}

/// HF's `process_offsets` over one segment's tokens; `first_token` is the index of the first of
/// them among the text's tokens.
fn trim_offsets(trim: &Trim<'_>, ids: &[u32], offsets: &mut [(usize, usize)], first_token: usize) {
    for (i, (&id, offsets)) in ids.iter().zip(offsets.iter_mut()).enumerate() {
        let (leading, trailing) = usize::try_from(id)
            .ok()
            .and_then(|i| trim.spaces.get(i))
            .map_or((0, 0), |&(l, t)| (usize::from(l), usize::from(t)));
        let mut leading = leading;
        if leading > 0 {
            let is_first = (trim.first_is_index_zero && first_token + i == 0) || offsets.0 == 0;
            if is_first && trim.add_prefix_space && leading == 1 {
                leading = 0;
            }
            offsets.0 = (offsets.0 + leading).min(offsets.1);
        }
        if trailing > 0 && offsets.1 >= trailing {
            offsets.1 = (offsets.1 - trailing).max(offsets.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segments() -> Vec<Segment> {
        let a =
            Segment { ids: vec![1, 2], tokens: vec![], offsets: vec![(0, 2), (3, 4)], word_ids: vec![0, 1], words: 2 };
        let b = Segment { ids: vec![3], tokens: vec![], offsets: vec![(1, 2)], word_ids: vec![1], words: 3 };
        vec![a, b]
    }

    #[test]
    fn merge_shifts_offsets_and_words() {
        let m = merge(&[0, 4], segments());
        assert_eq!(m.ids, vec![1, 2, 3]);
        assert_eq!(m.offsets, vec![(0, 2), (3, 4), (5, 6)]);
        assert_eq!(m.word_ids, vec![0, 1, 3]);
        assert_eq!(m.words, 5);
    }

    #[test]
    fn assemble_places_specials_around_the_text() {
        let vocab = Arc::new(Vocab { strings: (0..10).map(|i| format!("t{i}")).collect() });
        let layout = Layout { prefix: &[(8, 0)], suffix: &[(9, 1)], type_id: 0, trim: None };
        let e = assemble(&[0, 4], segments(), &layout, &vocab);
        assert_eq!(e.ids(), [8, 1, 2, 3, 9]);
        assert_eq!(e.type_ids(), [0, 0, 0, 0, 1]);
        assert_eq!(e.offsets(), [(0, 0), (0, 2), (3, 4), (5, 6), (0, 0)]);
        assert_eq!(e.word_ids(), [None, Some(0), Some(1), Some(3), None]);
        assert_eq!(e.special_tokens_mask(), [1, 0, 0, 0, 1]);
        assert_eq!(e.attention_mask(), [1; 5]);
        assert_eq!(e.tokens(), ["t8", "t1", "t2", "t3", "t9"]);
    }
}
