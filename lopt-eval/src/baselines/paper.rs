//! The paper's LoPT rule exactly as published (Algorithm 1), to compare with this library.
//!
//! Chunks `s_i = S[L_c*i .. L_c*(i+1) + L_o]` in chars (L_c = chars / threads unless given), each
//! encoded without special tokens with char offsets. For each neighbour pair, tokens are matched by
//! *global* char span (start and end equal; ids are not compared), among left tokens starting
//! inside the overlap and right tokens ending inside it; the longest run of consecutive matches
//! wins, and the merge cuts at the end of that run
//! (`T_1[:l_1+n_1] ++ T_2[r_1+n_1 : l_2+n_2] ++ ...`). A run shorter than `min_run` (the paper's
//! threshold, 2) on any pair doubles L_c and redoes everything; L_c >= the text length means one
//! chunk, i.e. plain sequential encoding. The result is post-processed once.
//!
//! The published argument assumes matched runs are long enough (longer than the longest word); the
//! rule as implemented only asks for 2 tokens, so it can cut inside a pre-token whose two halves
//! were tokenized differently -- Table 1's accuracy column checks whether that happens.

use std::ops::Range;

use anyhow::Result;
use lopt::hf;
use rayon::prelude::*;

use super::{char_to_byte, splice};
use crate::output::hf_err;

/// A matched run: `left[l..l+n]` and `right[r..r+n]` have equal global spans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub l: usize,
    pub r: usize,
    pub n: usize,
}

/// The longest run of consecutive tokens with equal global char spans. `left`/`right` are
/// chunk-relative char offsets, `left_base`/`right_base` the chunks' first chars. Only left
/// tokens starting at or after `right_base` and right tokens ending at or before `left_end`
/// (the overlap) take part. The first longest run wins.
pub fn position_match(
    left: &[(usize, usize)],
    left_base: usize,
    right: &[(usize, usize)],
    right_base: usize,
    left_end: usize,
) -> Option<Run> {
    let g = |o: &(usize, usize), base: usize| (o.0 + base, o.1 + base);
    let mut i = left.partition_point(|o| o.0 + left_base < right_base);
    let right_to = right.partition_point(|o| o.1 + right_base <= left_end);
    let mut j = 0;
    let mut best: Option<Run> = None;
    while i < left.len() && j < right_to {
        let (a, b) = (g(&left[i], left_base), g(&right[j], right_base));
        if a == b {
            let mut n = 1;
            while i + n < left.len() && j + n < right_to && g(&left[i + n], left_base) == g(&right[j + n], right_base) {
                n += 1;
            }
            if best.is_none_or(|r| n > r.n) {
                best = Some(Run { l: i, r: j, n });
            }
            i += n;
            j += n;
        } else if a < b {
            i += 1;
        } else {
            j += 1;
        }
    }
    best
}

/// Which token range of each chunk is kept, from one run per neighbour pair; `None` when a run is
/// too short or the runs cross inside a chunk (the paper doubles the chunk length then).
pub fn plan(runs: &[Option<Run>], lens: &[usize], min_run: usize) -> Option<Vec<Range<usize>>> {
    let mut out = Vec::with_capacity(lens.len());
    for k in 0..lens.len() {
        let start = if k == 0 { 0 } else { runs[k - 1].filter(|r| r.n >= min_run).map(|r| r.r + r.n)? };
        let end = if k + 1 == lens.len() { lens[k] } else { runs[k].filter(|r| r.n >= min_run).map(|r| r.l + r.n)? };
        if start > end {
            return None;
        }
        out.push(start..end);
    }
    Some(out)
}

/// Encodes `text` with the published LoPT rule; see the module docs.
///
/// # Errors
/// When the tokenizer fails on a chunk or in post-processing.
pub fn encode(
    tokenizer: &hf::Tokenizer,
    pool: &rayon::ThreadPool,
    text: &str,
    threads: usize,
    chunk_chars: Option<usize>,
    overlap_chars: usize,
    min_run: usize,
) -> Result<hf::Encoding> {
    let n = text.chars().count();
    let mut lc = chunk_chars.unwrap_or_else(|| n.div_ceil(threads.max(1))).max(1);
    loop {
        if lc >= n {
            return tokenizer.encode(text, true).map_err(hf_err);
        }
        let chunks: Vec<Range<usize>> = (0..n).step_by(lc).map(|s| s..(s + lc + overlap_chars).min(n)).collect();
        let mut points: Vec<usize> = chunks.iter().flat_map(|r| [r.start, r.end]).collect();
        points.sort_unstable();
        points.dedup();
        let bytes = char_to_byte(text, &points);
        let at = |c: usize| points.binary_search(&c).map(|i| bytes[i]).unwrap_or(text.len());
        let encoded: Vec<hf::Encoding> = pool
            .install(|| {
                chunks
                    .par_iter()
                    .map(|r| tokenizer.encode_char_offsets(&text[at(r.start)..at(r.end)], false))
                    .collect::<hf::Result<Vec<_>>>()
            })
            .map_err(hf_err)?;
        let runs: Vec<Option<Run>> = (0..encoded.len() - 1)
            .map(|k| {
                position_match(
                    encoded[k].get_offsets(),
                    chunks[k].start,
                    encoded[k + 1].get_offsets(),
                    chunks[k + 1].start,
                    chunks[k].end,
                )
            })
            .collect();
        let lens: Vec<usize> = encoded.iter().map(|e| e.len()).collect();
        let Some(keep) = plan(&runs, &lens, min_run) else {
            lc = lc.saturating_mul(2);
            continue;
        };
        let merged = splice(&encoded.into_iter().zip(keep).collect::<Vec<_>>());
        return tokenizer.post_process(merged, None, true).map_err(hf_err);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_by_global_position_not_by_id() {
        // Left chunk starts at char 0 and ends at 10; right chunk starts at char 6.
        // Left tokens (global): [0,3) [3,6) [6,7) [7,9) [9,10). Right (relative to 6):
        // [0,1) [1,3) [3,4) [4,6) -> global [6,7) [7,9) [9,10) [10,12).
        let left = [(0, 3), (3, 6), (6, 7), (7, 9), (9, 10)];
        let right = [(0, 1), (1, 3), (3, 4), (4, 6)];
        assert_eq!(position_match(&left, 0, &right, 6, 10), Some(Run { l: 2, r: 0, n: 3 }));
    }

    #[test]
    fn same_text_at_another_position_is_not_a_match() {
        // Spans shifted by one char never match, whatever the ids.
        let left = [(0, 6), (6, 8), (8, 10)];
        let right = [(1, 3), (3, 4)];
        assert_eq!(position_match(&left, 0, &right, 6, 10), None);
    }

    #[test]
    fn longest_run_wins_and_short_runs_fail_the_plan() {
        // Runs: [6,7) alone, then a break, then [8,9) [9,10) (length 2).
        let left = [(6, 7), (7, 8), (8, 9), (9, 10)];
        let right = [(0, 1), (1, 2)];
        let right = [right[0], (1, 1), (2, 3), (3, 4)];
        let run = position_match(&left, 0, &right, 6, 10);
        assert_eq!(run, Some(Run { l: 2, r: 2, n: 2 }));
        assert_eq!(plan(&[run], &[4, 4], 2), Some(vec![0..4, 4..4]));
        assert_eq!(plan(&[Some(Run { l: 3, r: 0, n: 1 })], &[4, 4], 2), None);
        assert_eq!(plan(&[None], &[4, 4], 2), None);
        // Runs crossing inside the middle chunk fail too.
        let a = Some(Run { l: 0, r: 5, n: 2 });
        let b = Some(Run { l: 1, r: 0, n: 2 });
        assert_eq!(plan(&[a, b], &[4, 9, 4], 2), None);
    }
}
