//! The HF backend: `tokenizers`' own pipeline, run on one segment.
//!
//! `Tokenizer::encode` cannot be used per segment: it would truncate, pad and add special tokens
//! to every segment. This runs the stages `encode` runs before post-processing (added tokens and
//! normalization, pre-tokenization, model, conversion to byte offsets) through the crate's
//! public API, and counts the pre-tokens so that word ids can be renumbered after the merge.

use std::sync::Arc;

use tokenizers::{Model, OffsetReferential, OffsetType, PreTokenizer};

use super::{Engine, Segment};
use crate::error::{Error, Result};

/// Encodes segments with a shared HF tokenizer.
pub(crate) struct HfEngine {
    tokenizer: Arc<tokenizers::Tokenizer>,
}

impl HfEngine {
    pub(crate) fn new(tokenizer: Arc<tokenizers::Tokenizer>) -> Self {
        HfEngine { tokenizer }
    }
}

impl Engine for HfEngine {
    fn name(&self) -> &'static str {
        "hf"
    }

    fn encode_segment(&self, segment: &str) -> Result<Segment> {
        let hf = &self.tokenizer;
        let mut pretokenized = hf.get_added_vocabulary().extract_and_normalize(hf.get_normalizer(), segment);
        if let Some(pre_tokenizer) = hf.get_pre_tokenizer() {
            pre_tokenizer.pre_tokenize(&mut pretokenized).map_err(Error::encode)?;
        }
        let splits = pretokenized.get_splits(OffsetReferential::Original, OffsetType::None);
        let words = splits.len();
        // Splits that already have their tokens are the added tokens `extract_and_normalize` found.
        let added_words =
            (0u32..).zip(&splits).filter_map(|(word, (_, _, tokens))| tokens.is_some().then_some(word)).collect();
        pretokenized.tokenize(|normalized| hf.get_model().tokenize(normalized.get())).map_err(Error::encode)?;
        let encoding = pretokenized.into_encoding(None, 0, OffsetType::Byte).map_err(Error::encode)?;
        let word_ids = encoding.get_word_ids().iter().map(|w| w.unwrap_or(0)).collect();
        Ok(Segment {
            ids: encoding.get_ids().to_vec(),
            tokens: encoding.get_tokens().to_vec(),
            offsets: encoding.get_offsets().to_vec(),
            word_ids,
            words: u32::try_from(words).map_err(Error::encode)?,
            added_words,
        })
    }
}
