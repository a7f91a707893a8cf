//! Baselines of the paper's Table 1, reimplemented on the same HF `tokenizers` backend:
//! delimiter-based splitting ([`delim`]), OpenLMLab's overlap-based ParallelTokenizer and the
//! paper's improved variant ([`overlap`]), and the LoPT rule exactly as published ([`paper`]).
//!
//! They are reproduced faithfully, flaws included: their inexactness is what Table 1 measures.
//! Helpers here convert char positions to byte positions and splice HF encodings.

pub mod delim;
pub mod overlap;
pub mod paper;

use std::ops::Range;

use lopt::hf;

/// Byte positions of the given char positions (sorted ascending; positions past the end map to
/// `text.len()`), in one pass over the text.
pub fn char_to_byte(text: &str, chars: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(chars.len());
    let mut it = chars.iter().copied().peekable();
    for (n, (b, _)) in text.char_indices().enumerate() {
        while it.peek() == Some(&n) {
            out.push(b);
            it.next();
        }
        if it.peek().is_none() {
            break;
        }
    }
    out.extend(it.map(|_| text.len()));
    out
}

/// Consecutive ranges `[0, c1), [c1, c2), ..., [ck, len)` of a sorted list of cuts.
pub fn ranges(cuts: &[usize], len: usize) -> Vec<Range<usize>> {
    let mut starts = vec![0];
    starts.extend_from_slice(cuts);
    let ends = cuts.iter().copied().chain(std::iter::once(len));
    starts.into_iter().zip(ends).map(|(s, e)| s..e).collect()
}

/// Concatenates the given token ranges of HF encodings into one encoding (no special tokens; the
/// caller post-processes). Offsets are kept as they are (accuracy compares ids and masks only).
pub fn splice(parts: &[(hf::Encoding, Range<usize>)]) -> hf::Encoding {
    let n = parts.iter().map(|(_, r)| r.len()).sum();
    let mut ids = Vec::with_capacity(n);
    let mut type_ids = Vec::with_capacity(n);
    let mut tokens = Vec::with_capacity(n);
    let mut words = Vec::with_capacity(n);
    let mut offsets = Vec::with_capacity(n);
    let mut special = Vec::with_capacity(n);
    let mut attention = Vec::with_capacity(n);
    for (e, r) in parts {
        ids.extend_from_slice(&e.get_ids()[r.clone()]);
        type_ids.extend_from_slice(&e.get_type_ids()[r.clone()]);
        tokens.extend_from_slice(&e.get_tokens()[r.clone()]);
        words.extend_from_slice(&e.get_word_ids()[r.clone()]);
        offsets.extend_from_slice(&e.get_offsets()[r.clone()]);
        special.extend_from_slice(&e.get_special_tokens_mask()[r.clone()]);
        attention.extend_from_slice(&e.get_attention_mask()[r.clone()]);
    }
    hf::Encoding::new(ids, type_ids, tokens, words, offsets, special, attention, Vec::new(), Default::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn char_to_byte_maps_multibyte_text() {
        let text = "aé日b";
        assert_eq!(char_to_byte(text, &[0, 1, 2, 3, 4, 9]), vec![0, 1, 3, 6, 7, 7]);
        assert_eq!(char_to_byte(text, &[2, 2]), vec![3, 3]);
        assert_eq!(char_to_byte("", &[0]), vec![0]);
    }

    #[test]
    fn ranges_cover_the_text() {
        assert_eq!(ranges(&[3, 5], 9), vec![0..3, 3..5, 5..9]);
        assert_eq!(ranges(&[], 4), vec![0..4]);
    }
}
