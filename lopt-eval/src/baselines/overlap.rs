//! Overlap-based parallel tokenization: OpenLMLab's ParallelTokenizer ("-Origin") and the paper's
//! reimplementation with the match restricted to the overlap ("-Ours").
//!
//! Origin, as published: shards are `text[k*C .. k*C + C + O]` in chars (C = 40960, O = 512),
//! for k = 0, 1, ... while text remains; each shard is encoded *with* special tokens; each pair of
//! neighbours is matched by the longest common run of token ids between the *whole* reversed shards
//! (Python's `difflib.SequenceMatcher(autojunk=False).find_longest_match`, same tie-breaking); the
//! left shard is kept up to the end of the run and the right shard from the end of the run
//! (its start is taken modulo the shard length, so a run at the very end keeps the whole shard);
//! when nothing matches, both shards are kept whole. ids and attention masks are concatenated
//! with no further post-processing. Flaws kept on purpose: a run can match a repeated copy of the
//! text far from the overlap, and any match splices.
//!
//! Improved ("-Ours"): chunk length = text length / threads (chars), same overlap; shards encoded
//! without special tokens; the id match only considers left tokens starting inside the overlap and
//! right tokens ending inside it; post-processed once.

use std::collections::HashMap;
use std::ops::Range;

use anyhow::Result;
use lopt::hf;
use rayon::prelude::*;

use super::{char_to_byte, splice};
use crate::output::{hf_err, Output};

/// `difflib.SequenceMatcher(None, a, b, autojunk=False).find_longest_match(0, len(a), 0, len(b))`:
/// `(i, j, size)` of the longest common run `a[i..i+size] == b[j..j+size]`; among the longest,
/// the one starting earliest in `a`, then earliest in `b`. `(0, 0, 0)` when nothing matches.
pub fn longest_match(a: &[u32], b: &[u32]) -> (usize, usize, usize) {
    let mut b2j: HashMap<u32, Vec<usize>> = HashMap::new();
    for (j, &x) in b.iter().enumerate() {
        b2j.entry(x).or_default().push(j);
    }
    // difflib keeps `j2len` (run length ending at a[i-1], b[j]) in a dict rebuilt per row; two
    // dense rows with row stamps do the same without clearing.
    let mut prev_len = vec![0usize; b.len()];
    let mut prev_row = vec![usize::MAX; b.len()];
    let mut cur_len = vec![0usize; b.len()];
    let mut cur_row = vec![usize::MAX; b.len()];
    let (mut besti, mut bestj, mut bestsize) = (0, 0, 0);
    for (i, x) in a.iter().enumerate() {
        if let Some(js) = b2j.get(x) {
            for &j in js {
                let k = if j > 0 && i > 0 && prev_row[j - 1] == i - 1 { prev_len[j - 1] + 1 } else { 1 };
                cur_len[j] = k;
                cur_row[j] = i;
                if k > bestsize {
                    (besti, bestj, bestsize) = (i + 1 - k, j + 1 - k, k);
                }
            }
        }
        std::mem::swap(&mut prev_len, &mut cur_len);
        std::mem::swap(&mut prev_row, &mut cur_row);
    }
    (besti, bestj, bestsize)
}

/// Origin's cut for one pair: `(end of the kept left prefix, start of the kept right suffix)`.
pub fn origin_pair(left: &[u32], right: &[u32]) -> (usize, usize) {
    let ra: Vec<u32> = left.iter().rev().copied().collect();
    let rb: Vec<u32> = right.iter().rev().copied().collect();
    let (a, b, _) = longest_match(&ra, &rb);
    // As the original slices: end = len - a, start = (len - b) % len.
    (left.len() - a, (right.len() - b) % right.len().max(1))
}

/// Which range of each shard origin keeps, from the pairwise cuts (an inverted range is empty).
pub fn origin_plan(cuts: &[(usize, usize)], lens: &[usize]) -> Vec<Range<usize>> {
    (0..lens.len())
        .map(|k| {
            let start = if k == 0 { 0 } else { cuts[k - 1].1 };
            let end = if k + 1 == lens.len() { lens[k] } else { cuts[k].0 };
            start..end.max(start)
        })
        .collect()
}

/// Origin's shards as char ranges.
pub fn origin_shards(n_chars: usize, chunk: usize, overlap: usize) -> Vec<Range<usize>> {
    let chunk = chunk.max(1);
    (0..n_chars).step_by(chunk).map(|s| s..(s + chunk + overlap).min(n_chars)).collect()
}

/// ParallelTokenizer-Origin; see the module docs.
///
/// # Errors
/// When the tokenizer fails on a shard.
pub fn encode_origin(
    tokenizer: &hf::Tokenizer,
    pool: &rayon::ThreadPool,
    text: &str,
    chunk_chars: usize,
    overlap_chars: usize,
) -> Result<Output> {
    let n = text.chars().count();
    let shards = origin_shards(n, chunk_chars, overlap_chars);
    let bytes = byte_ranges(text, &shards);
    let encoded: Vec<Output> = pool
        .install(|| {
            bytes
                .par_iter()
                .map(|r| tokenizer.encode(&text[r.clone()], true).map(|e| Output::from_hf(&e)))
                .collect::<hf::Result<Vec<_>>>()
        })
        .map_err(hf_err)?;
    if encoded.len() <= 1 {
        return Ok(encoded.into_iter().next().unwrap_or(Output { ids: Vec::new(), attention_mask: Vec::new() }));
    }
    let cuts: Vec<(usize, usize)> =
        pool.install(|| encoded.par_windows(2).map(|w| origin_pair(&w[0].ids, &w[1].ids)).collect());
    let lens: Vec<usize> = encoded.iter().map(|o| o.ids.len()).collect();
    let plan = origin_plan(&cuts, &lens);
    let mut out = Output { ids: Vec::new(), attention_mask: Vec::new() };
    for (o, r) in encoded.iter().zip(plan) {
        out.ids.extend_from_slice(&o.ids[r.clone()]);
        out.attention_mask.extend_from_slice(&o.attention_mask[r]);
    }
    Ok(out)
}

/// Improved cut for one pair: the longest common id run between `left[left_from..]` and
/// `right[..right_to]` (same search and tie-breaking as origin, on the reversed windows); `None`
/// when nothing matches. Returns `(end of kept left prefix, start of kept right suffix)`.
pub fn improved_pair(left: &[u32], left_from: usize, right: &[u32], right_to: usize) -> Option<(usize, usize)> {
    let wa: Vec<u32> = left[left_from..].iter().rev().copied().collect();
    let wb: Vec<u32> = right[..right_to].iter().rev().copied().collect();
    let (a, b, size) = longest_match(&wa, &wb);
    (size > 0).then(|| (left.len() - a, right_to - b))
}

/// ParallelTokenizer-Ours; see the module docs.
///
/// # Errors
/// When the tokenizer fails on a shard or in post-processing.
pub fn encode_improved(
    tokenizer: &hf::Tokenizer,
    pool: &rayon::ThreadPool,
    text: &str,
    threads: usize,
    overlap_chars: usize,
) -> Result<hf::Encoding> {
    let n = text.chars().count();
    let shards = origin_shards(n, n.div_ceil(threads.max(1)), overlap_chars);
    let bytes = byte_ranges(text, &shards);
    let encoded: Vec<hf::Encoding> = pool
        .install(|| {
            bytes
                .par_iter()
                .map(|r| tokenizer.encode_char_offsets(&text[r.clone()], false))
                .collect::<hf::Result<Vec<_>>>()
        })
        .map_err(hf_err)?;
    let cuts: Vec<(usize, usize)> = pool.install(|| {
        encoded
            .par_windows(2)
            .zip(shards.par_windows(2))
            .map(|(e, s)| {
                let (left, right) = (&e[0], &e[1]);
                // Left tokens starting inside the overlap, right tokens ending inside it.
                let left_from = left.get_offsets().partition_point(|o| s[0].start + o.0 < s[1].start);
                let right_to = right.get_offsets().partition_point(|o| s[1].start + o.1 <= s[0].end);
                improved_pair(left.get_ids(), left_from, right.get_ids(), right_to).unwrap_or((left.len(), 0))
            })
            .collect()
    });
    let lens: Vec<usize> = encoded.iter().map(|e| e.len()).collect();
    let plan = origin_plan(&cuts, &lens);
    let merged = splice(&encoded.into_iter().zip(plan).collect::<Vec<_>>());
    tokenizer.post_process(merged, None, true).map_err(hf_err)
}

fn byte_ranges(text: &str, chars: &[Range<usize>]) -> Vec<Range<usize>> {
    let mut points: Vec<usize> = chars.iter().flat_map(|r| [r.start, r.end]).collect();
    points.sort_unstable();
    points.dedup();
    let bytes = char_to_byte(text, &points);
    let at = |c: usize| points.binary_search(&c).map(|i| bytes[i]).unwrap_or(text.len());
    chars.iter().map(|r| at(r.start)..at(r.end)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_match_follows_difflib() {
        // Values checked against Python's difflib (autojunk=False).
        assert_eq!(longest_match(&[1, 2, 3, 1, 2], &[1, 2]), (0, 0, 2));
        assert_eq!(longest_match(&[9, 1, 2, 3], &[1, 2, 3, 9]), (1, 0, 3));
        assert_eq!(longest_match(&[4, 5], &[6, 7]), (0, 0, 0));
        // Ties: earliest in a, then earliest in b.
        assert_eq!(longest_match(&[1, 2, 7, 3, 4], &[3, 4, 1, 2]), (0, 2, 2));
        assert_eq!(longest_match(&[5, 5, 5], &[5, 5]), (0, 0, 2));
        assert_eq!(longest_match(&[], &[1]), (0, 0, 0));
    }

    #[test]
    fn origin_splices_at_the_wrong_copy_of_repeated_text() {
        // Truth: 5 1 2 3 6 1 2 3 7. The left shard ends inside the second "1 2 3", the right shard
        // starts at it. The longest common id run is the whole "1 2 3" -- but in the left shard
        // only its *first* copy is whole, so origin splices there and drops "6 1 2 3".
        let left = [5, 1, 2, 3, 6, 1, 2];
        let right = [1, 2, 3, 7];
        let (end, start) = origin_pair(&left, &right);
        let merged: Vec<u32> = left[..end].iter().chain(&right[start..]).copied().collect();
        assert_eq!(merged, vec![5, 1, 2, 3, 7]);
        // Restricted to the overlap (left tokens from index 5 on), the match is "1 2": correct.
        let (end, start) = improved_pair(&left, 5, &right, 2).unwrap();
        let merged: Vec<u32> = left[..end].iter().chain(&right[start..]).copied().collect();
        assert_eq!(merged, vec![5, 1, 2, 3, 6, 1, 2, 3, 7]);
    }

    #[test]
    fn origin_keeps_both_shards_whole_without_match_and_wraps_at_end() {
        assert_eq!(origin_pair(&[1, 2], &[3, 4]), (2, 0));
        // Run at the very end of the right shard: start = len % len = 0 keeps it whole.
        assert_eq!(origin_pair(&[8, 1, 2], &[9, 1, 2]), (3, 0));
        let plan = origin_plan(&[(2, 0), (1, 3)], &[2, 2, 4]);
        assert_eq!(plan, vec![0..2, 0..1, 3..4]);
        // An inverted range (runs crossing inside a middle shard) keeps nothing of it.
        assert_eq!(origin_plan(&[(5, 4), (2, 0)], &[6, 6, 3]), vec![0..5, 4..4, 0..3]);
    }

    #[test]
    fn origin_shards_follow_the_python_chunker() {
        assert_eq!(origin_shards(10, 4, 2), vec![0..6, 4..10, 8..10]);
        assert_eq!(origin_shards(3, 4, 2), vec![0..3]);
        assert!(origin_shards(0, 4, 2).is_empty());
    }
}
