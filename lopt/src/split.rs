//! Chunk planning: where to cut a text into segments that are tokenized independently.
//!
//! The plan aims at segments of `chunk_size` bytes. Each target boundary `k * chunk_size` moves to
//! the nearest safe cut ([`CutRule::is_safe`]) within `overlap / 2` bytes on either side. When that
//! window holds no safe cut, the boundary is dropped and the chunk grows into its neighbour (the
//! paper doubles the chunk length on a failed merge; here only the affected pair grows). No
//! boundary is aimed at less than a quarter chunk before the end, so that the plan does not end
//! with a sliver (a few bytes of a chat template after a cut moved back) that costs a task of
//! its own; the last segment grows by that much instead. Cutting
//! only at safe cuts makes the concatenation of the segments' tokens exact, so no token is ever
//! tokenized twice and no merge can fail.
//!
//! Invariants of a plan: cut positions are strictly increasing char boundaries strictly inside the
//! text, and each one is a safe cut.

use crate::boundary::CutRule;

/// Byte positions at which to cut `text` (empty: encode it whole).
pub(crate) fn plan(text: &str, rule: &CutRule, chunk_size: usize, overlap: usize) -> Vec<usize> {
    let chunk_size = chunk_size.max(1);
    let half = overlap / 2;
    let mut cuts = Vec::with_capacity(text.len() / chunk_size);
    let mut target = chunk_size;
    while target < text.len() && text.len() - target >= chunk_size.div_ceil(4) {
        let floor = cuts.last().map_or(0, |&c| c) + 1;
        if let Some(cut) = nearest_safe_cut(text, rule, target, floor, half) {
            cuts.push(cut);
            // Aim the next boundary a full chunk after the cut actually taken.
            target = cut + chunk_size;
        } else {
            target += chunk_size;
        }
    }
    cuts
}

/// The safe cut closest to `target` in `[max(target - half, floor), target + half]`; ties go
/// forward.
pub(crate) fn nearest_safe_cut(text: &str, rule: &CutRule, target: usize, floor: usize, half: usize) -> Option<usize> {
    let lo = target.saturating_sub(half).max(floor);
    let hi = (target + half).min(text.len() - 1);
    let is_cut = |p: &usize| text.is_char_boundary(*p) && rule.is_safe(text, *p);
    let forward = (target.max(lo)..=hi).find(is_cut);
    let backward = (lo..target).rev().take_while(|p| forward.is_none_or(|f| target - p < f - target)).find(is_cut);
    backward.or(forward)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bert() -> CutRule {
        CutRule::from_json(&serde_json::json!({
            "model": {"type": "WordPiece"},
            "normalizer": null,
            "pre_tokenizer": {"type": "WhitespaceSplit"},
        }))
        .unwrap()
    }

    #[test]
    fn cuts_are_safe_increasing_and_inside() {
        let text = "aa bb cc dd ee ff gg hh ii jj kk ll mm nn oo pp ";
        for chunk in 1..20 {
            for overlap in [0, 1, 2, 4, 9, 64] {
                let cuts = plan(text, &bert(), chunk, overlap);
                assert!(cuts.windows(2).all(|w| w[0] < w[1]), "{cuts:?}");
                assert!(cuts.iter().all(|&c| c > 0 && c < text.len() && bert().is_safe(text, c)));
            }
        }
    }

    #[test]
    fn the_last_segment_is_not_a_sliver() {
        // The first cut moves back from 12 to 9 ("bbb |cccc"), and the next target, 21, falls one
        // byte before the end: it used to give a cut at 20 and a last segment "dd".
        let text = "aaaa bbb cccccccccc dd";
        assert_eq!(plan(text, &bert(), 12, 8), vec![9]);
        let text = "aa bb cc dd ee ff gg hh ii jj kk ll mm nn oo pp ";
        for chunk in 4..20 {
            let cuts = plan(text, &bert(), chunk, 4);
            assert!(cuts.last().is_none_or(|&c| text.len() - c + 2 >= chunk / 4), "{chunk}: {cuts:?}");
        }
    }

    #[test]
    fn no_safe_cut_means_one_segment() {
        assert!(plan(&"x".repeat(1000), &bert(), 10, 100).is_empty());
    }

    #[test]
    fn multibyte_text_cuts_on_char_boundaries() {
        let text = "é ü ñ 中 文 ".repeat(50);
        for chunk in [1, 3, 7, 16] {
            for c in plan(&text, &bert(), chunk, 8) {
                assert!(text.is_char_boundary(c));
            }
        }
    }
}
