//! Post-processing, applied once to the merged encoding: the model-level truncation that
//! `tokenizers` 0.23 applies while tokenizing, then `Tokenizer::post_process` (truncation,
//! post-processor such as TemplateProcessing or ByteLevel offset trimming, padding).
//!
//! Doing this after the merge is what makes special tokens, truncation and padding come out
//! exactly as in a sequential `encode`: they are functions of the whole token sequence.

use std::sync::Arc;

use tokenizers::{PostProcessor, TruncationDirection, TruncationStrategy};

use crate::encoding::Encoding;
use crate::engine::Segment;
use crate::error::{Error, ErrorKind, Result};

/// Finishes merged encodings for one tokenizer.
pub(crate) struct Finisher {
    hf: Arc<tokenizers::Tokenizer>,
    /// Token strings by id, for engines that produce ids only.
    vocab: Vec<String>,
}

impl Finisher {
    pub(crate) fn new(hf: Arc<tokenizers::Tokenizer>) -> Self {
        let size = hf.get_vocab_size(true);
        let mut vocab = vec![String::new(); size];
        for (token, id) in hf.get_vocab(true) {
            if let Some(slot) = usize::try_from(id).ok().and_then(|i| vocab.get_mut(i)) {
                *slot = token;
            }
        }
        Finisher { hf, vocab }
    }

    /// Turns the merged, raw tokens of one text into its final [`Encoding`].
    pub(crate) fn finish(&self, mut raw: Segment, add_special_tokens: bool) -> Result<Encoding> {
        if raw.tokens.len() != raw.ids.len() {
            raw.tokens = raw.ids.iter().map(|&id| self.token(id)).collect();
        }
        self.check_truncation(add_special_tokens)?;
        self.limit_like_model(&mut raw);
        let n = raw.ids.len();
        let hf_encoding = tokenizers::Encoding::new(
            raw.ids,
            vec![0; n],
            raw.tokens,
            raw.word_ids.into_iter().map(Some).collect(),
            raw.offsets,
            vec![0; n],
            vec![1; n],
            Vec::new(),
            Default::default(),
        );
        let processed = self.hf.post_process(hf_encoding, None, add_special_tokens).map_err(Error::encode)?;
        Ok(Encoding::from(processed))
    }

    /// `tokenizers` subtracts the number of special tokens from `max_length` without checking
    /// (a panic in debug builds, no truncation at all in release builds): refuse instead.
    fn check_truncation(&self, add_special_tokens: bool) -> Result<()> {
        let (Some(truncation), Some(processor)) = (self.hf.get_truncation(), self.hf.get_post_processor()) else {
            return Ok(());
        };
        let added = processor.added_tokens(false);
        if add_special_tokens && truncation.max_length < added {
            return Err(Error::new(
                ErrorKind::Encode,
                format!("truncation max_length {} is smaller than the {added} special tokens added", truncation.max_length),
            ));
        }
        Ok(())
    }

    fn token(&self, id: u32) -> String {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.vocab.get(i))
            .cloned()
            .unwrap_or_else(|| self.hf.id_to_token(id).unwrap_or_default())
    }

    /// `tokenizers` 0.23 stops the model once a truncating tokenizer has `max_length` tokens,
    /// keeping whole pre-tokens (`PreTokenizedString::tokenize_with_limit`); the overflow it
    /// reports is computed from what is left. Reproduce that cut on the merged tokens.
    fn limit_like_model(&self, raw: &mut Segment) {
        let Some(truncation) = self.hf.get_truncation() else { return };
        if truncation.strategy == TruncationStrategy::OnlySecond || raw.words == 0 {
            return;
        }
        let max = truncation.max_length;
        let n = raw.ids.len();
        // Kept pre-tokens `lo..=hi`; dropping leading pre-tokens renumbers words from 0, as
        // `into_encoding` does on the drained split list.
        let (lo, hi) = match truncation.direction {
            // The model stops after the first pre-token that reaches `max` tokens in total.
            TruncationDirection::Right if max == 0 => (0, 0),
            TruncationDirection::Right if n >= max => (0, raw.word_ids[max - 1]),
            TruncationDirection::Left if max == 0 => (raw.words - 1, raw.words - 1),
            TruncationDirection::Left if n >= max => (raw.word_ids[n - max], raw.words - 1),
            _ => return,
        };
        let kept: Vec<usize> = (0..n).filter(|&i| (lo..=hi).contains(&raw.word_ids[i])).collect();
        raw.ids = kept.iter().map(|&i| raw.ids[i]).collect();
        raw.tokens = kept.iter().map(|&i| std::mem::take(&mut raw.tokens[i])).collect();
        raw.offsets = kept.iter().map(|&i| raw.offsets[i]).collect();
        raw.word_ids = kept.iter().map(|&i| raw.word_ids[i] - lo).collect();
        raw.words = hi - lo + 1;
    }
}
