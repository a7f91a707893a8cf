//! Delimiter-based parallel tokenization (the paper's "Delimiter based ParallelTokenizer").
//!
//! The text is aimed at `parts` equal pieces; each boundary `k * len / parts` moves right to the
//! first delimiter at or after it ("the right first delimiter around the chunk length"), and the
//! delimiter starts the right-hand piece (so a space stays in front of its word, as byte-level BPE
//! pieces keep it). Pieces are encoded in parallel without special tokens, concatenated, and
//! post-processed once. Exact only where no pre-token or token spans a cut: that is the flaw
//! Table 1 measures. A boundary with no delimiter after it (or before the previous cut) is
//! dropped, so the neighbouring piece grows.

use anyhow::Result;
use lopt::hf;
use rayon::prelude::*;

use super::ranges;
use crate::output::hf_err;

/// The byte positions where the text is cut: the first `delim` at or after each boundary,
/// strictly increasing, never 0.
pub fn cut_points(text: &str, parts: usize, delim: u8) -> Vec<usize> {
    let bytes = text.as_bytes();
    let len = bytes.len();
    let mut cuts: Vec<usize> = Vec::new();
    for k in 1..parts.max(1) {
        let target = k * len / parts;
        let from = target.max(cuts.last().map_or(1, |&c| c + 1));
        if from >= len {
            break;
        }
        match bytes[from..].iter().position(|&b| b == delim) {
            Some(off) => cuts.push(from + off),
            None => break,
        }
    }
    cuts
}

/// Encodes `text` cut at delimiters into `parts` pieces on `pool`; see the module docs.
///
/// # Errors
/// When the tokenizer fails on a piece or in post-processing.
pub fn encode(
    tokenizer: &hf::Tokenizer,
    pool: &rayon::ThreadPool,
    text: &str,
    parts: usize,
    delim: u8,
) -> Result<hf::Encoding> {
    let pieces = ranges(&cut_points(text, parts, delim), text.len());
    let encodings = pool.install(|| {
        pieces.par_iter().map(|r| tokenizer.encode(&text[r.clone()], false)).collect::<hf::Result<Vec<_>>>()
    });
    let merged = hf::Encoding::merge(encodings.map_err(hf_err)?, true);
    tokenizer.post_process(merged, None, true).map_err(hf_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_at_first_delimiter_right_of_each_boundary() {
        // len 20, 2 parts: boundary 10 ("k"), first space at or after it is at 11.
        let text = "aaaa bbbbbkk ccccccc";
        assert_eq!(cut_points(text, 2, b' '), vec![12]);
        assert_eq!(&text[12..13], " ");
        // 4 parts: boundaries 5, 10, 15 -> spaces at 12, then none after 15.
        assert_eq!(cut_points(text, 4, b' '), vec![12]);
        // 3 parts: boundaries 6, 13 -> space at 12 for the first; none at or after 13.
        assert_eq!(cut_points(text, 3, b' '), vec![12]);
    }

    #[test]
    fn delimiter_exactly_at_boundary_and_no_duplicates() {
        let text = "ab,cd,ef,gh";
        // len 11, 2 parts: boundary 5 is a comma.
        assert_eq!(cut_points(text, 2, b','), vec![5]);
        // Many parts over few delimiters: cuts stay strictly increasing.
        assert_eq!(cut_points(text, 11, b','), vec![2, 5, 8]);
        // Never a cut at 0, none without delimiter, one part means no cut.
        assert_eq!(cut_points(",abc", 2, b','), Vec::<usize>::new());
        assert_eq!(cut_points("abcdef", 3, b'.'), Vec::<usize>::new());
        assert_eq!(cut_points("a.b.c", 1, b'.'), Vec::<usize>::new());
    }
}
