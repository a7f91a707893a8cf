//! Merge: concatenating the segments of one text into its (not yet post-processed) encoding.
//!
//! Segments end and start at safe cuts, so the tokens of the whole text are exactly the
//! segments' tokens in order (`docs/correctness.md`); the merge only moves each segment's offsets
//! by the segment's start and its word ids by the number of pre-tokens before it.

use crate::engine::Segment;

/// Joins `segments`, where segment `i` starts at byte `starts[i]` of the text.
pub(crate) fn merge(starts: &[usize], mut segments: Vec<Segment>) -> Segment {
    debug_assert_eq!(starts.len(), segments.len());
    if segments.len() == 1 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifts_offsets_and_words() {
        let a =
            Segment { ids: vec![1, 2], tokens: vec![], offsets: vec![(0, 2), (3, 4)], word_ids: vec![0, 1], words: 2 };
        let b = Segment { ids: vec![3], tokens: vec![], offsets: vec![(1, 2)], word_ids: vec![1], words: 3 };
        let m = merge(&[0, 4], vec![a, b]);
        assert_eq!(m.ids, vec![1, 2, 3]);
        assert_eq!(m.offsets, vec![(0, 2), (3, 4), (5, 6)]);
        assert_eq!(m.word_ids, vec![0, 1, 3]);
        assert_eq!(m.words, 5);
    }
}
