//! [`Encoding`]: the result of encoding one text, field for field what HF `tokenizers` returns
//! (`tokenizers::Encoding`), with byte offsets into the input text.
//!
//! Invariant: every per-token vector has the same length. Token strings are either held
//! (`Tokens::Owned`, as the HF engine produces them) or looked up by id on first use
//! (`Tokens::ById`): native engines produce ids only, and allocating a string per token would
//! cost more than the tokenization itself.

use std::fmt;
use std::sync::{Arc, OnceLock};

/// Token strings by id, shared by the encodings of one tokenizer.
#[derive(Debug, Default)]
pub(crate) struct Vocab {
    pub(crate) strings: Vec<String>,
}

impl Vocab {
    pub(crate) fn string(&self, id: u32) -> &str {
        usize::try_from(id).ok().and_then(|i| self.strings.get(i)).map_or("", String::as_str)
    }
}

/// The token strings of an encoding.
#[derive(Clone, Debug)]
pub(crate) enum Tokens {
    Owned(Vec<String>),
    ById { vocab: Arc<Vocab>, strings: OnceLock<Vec<String>> },
}

impl Default for Tokens {
    fn default() -> Self {
        Tokens::Owned(Vec::new())
    }
}

/// The tokens of one text and everything known about them.
///
/// Field for field equal to `tokenizers::Tokenizer::encode(text, add_special_tokens)` of the same
/// `tokenizer.json`; offsets are byte offsets into the input text, as the Rust crate gives them.
#[derive(Clone, Debug, Default)]
pub struct Encoding {
    pub(crate) ids: Vec<u32>,
    pub(crate) type_ids: Vec<u32>,
    pub(crate) tokens: Tokens,
    pub(crate) offsets: Vec<(usize, usize)>,
    pub(crate) word_ids: Vec<Option<u32>>,
    pub(crate) special_tokens_mask: Vec<u32>,
    pub(crate) attention_mask: Vec<u32>,
    pub(crate) overflowing: Vec<Encoding>,
}

impl Encoding {
    /// Replaces the token strings (one per token).
    pub(crate) fn set_tokens(&mut self, tokens: Vec<String>) {
        debug_assert_eq!(tokens.len(), self.ids.len());
        self.tokens = Tokens::Owned(tokens);
    }

    /// The number of tokens (padding included).
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether there are no tokens.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Token ids.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// The token ids, taking them out of the encoding (no copy).
    pub fn into_ids(self) -> Vec<u32> {
        self.ids
    }

    /// Type (segment) ids.
    pub fn type_ids(&self) -> &[u32] {
        &self.type_ids
    }

    /// Token strings as the vocabulary spells them (e.g. `Ġhello`, `##ing`).
    pub fn tokens(&self) -> &[String] {
        match &self.tokens {
            Tokens::Owned(strings) => strings,
            Tokens::ById { vocab, strings } => {
                strings.get_or_init(|| self.ids.iter().map(|&id| vocab.string(id).to_owned()).collect())
            }
        }
    }

    /// `(start, end)` byte offsets of each token in the input text.
    pub fn offsets(&self) -> &[(usize, usize)] {
        &self.offsets
    }

    /// The pre-token ("word") each token came from; `None` for special and padding tokens.
    pub fn word_ids(&self) -> &[Option<u32>] {
        &self.word_ids
    }

    /// 1 for tokens added by the post-processor (e.g. `[CLS]`), 0 otherwise.
    pub fn special_tokens_mask(&self) -> &[u32] {
        &self.special_tokens_mask
    }

    /// 1 for real tokens, 0 for padding.
    pub fn attention_mask(&self) -> &[u32] {
        &self.attention_mask
    }

    /// The parts cut off by truncation, when the tokenizer truncates with overflow.
    pub fn overflowing(&self) -> &[Encoding] {
        &self.overflowing
    }

    /// The first place where `self` and `other` differ, if any: a field name and a token index.
    /// Used by `lopt verify` to report a mismatch with its context.
    pub fn first_difference(&self, other: &Encoding) -> Option<Difference> {
        fn first<T: PartialEq>(a: &[T], b: &[T]) -> Option<usize> {
            a.iter().zip(b).position(|(x, y)| x != y).or_else(|| (a.len() != b.len()).then(|| a.len().min(b.len())))
        }
        let fields: [(&'static str, Option<usize>); 8] = [
            ("ids", first(&self.ids, &other.ids)),
            ("tokens", first(self.tokens(), other.tokens())),
            ("offsets", first(&self.offsets, &other.offsets)),
            ("word_ids", first(&self.word_ids, &other.word_ids)),
            ("type_ids", first(&self.type_ids, &other.type_ids)),
            ("special_tokens_mask", first(&self.special_tokens_mask, &other.special_tokens_mask)),
            ("attention_mask", first(&self.attention_mask, &other.attention_mask)),
            ("overflowing", first(&self.overflowing, &other.overflowing)),
        ];
        fields
            .into_iter()
            .filter_map(|(field, index)| index.map(|index| Difference { field, index }))
            .min_by_key(|d| d.index)
    }
}

impl Encoding {
    /// HF's `Encoding::pad`: pads the overflowing parts, then this encoding, to `length` tokens
    /// on the side `params` names (nothing when it is already as long).
    pub(crate) fn pad(&mut self, length: usize, params: &tokenizers::PaddingParams) {
        for part in &mut self.overflowing {
            part.pad(length, params);
        }
        let Some(missing) = length.checked_sub(self.len()).filter(|&m| m > 0) else { return };
        let mut tokens = match std::mem::take(&mut self.tokens) {
            Tokens::Owned(strings) => strings,
            by_id @ Tokens::ById { .. } => {
                self.tokens = by_id;
                let strings = self.tokens().to_vec();
                strings
            }
        };
        let left = matches!(params.direction, tokenizers::PaddingDirection::Left);
        fn extend<T: Clone>(column: &mut Vec<T>, value: T, missing: usize, left: bool) {
            if left {
                column.splice(0..0, std::iter::repeat_n(value, missing));
            } else {
                column.extend(std::iter::repeat_n(value, missing));
            }
        }
        extend(&mut self.ids, params.pad_id, missing, left);
        extend(&mut self.type_ids, params.pad_type_id, missing, left);
        extend(&mut tokens, params.pad_token.clone(), missing, left);
        extend(&mut self.offsets, (0, 0), missing, left);
        extend(&mut self.word_ids, None, missing, left);
        extend(&mut self.special_tokens_mask, 1, missing, left);
        extend(&mut self.attention_mask, 0, missing, left);
        self.tokens = Tokens::Owned(tokens);
    }
}

impl PartialEq for Encoding {
    fn eq(&self, other: &Self) -> bool {
        self.ids == other.ids
            && self.type_ids == other.type_ids
            && self.offsets == other.offsets
            && self.word_ids == other.word_ids
            && self.special_tokens_mask == other.special_tokens_mask
            && self.attention_mask == other.attention_mask
            && self.overflowing == other.overflowing
            && self.tokens() == other.tokens()
    }
}

impl Eq for Encoding {}

/// Where two encodings first differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Difference {
    /// The name of the first differing field (`ids`, `offsets`, ...).
    pub field: &'static str,
    /// The index of the first differing token in that field.
    pub index: usize,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} differ at token {}", self.field, self.index)
    }
}

impl From<tokenizers::Encoding> for Encoding {
    fn from(mut hf: tokenizers::Encoding) -> Self {
        let overflowing = hf.take_overflowing().into_iter().map(Encoding::from).collect();
        Encoding {
            ids: hf.get_ids().to_vec(),
            type_ids: hf.get_type_ids().to_vec(),
            tokens: Tokens::Owned(hf.get_tokens().to_vec()),
            offsets: hf.get_offsets().to_vec(),
            word_ids: hf.get_word_ids().to_vec(),
            special_tokens_mask: hf.get_special_tokens_mask().to_vec(),
            attention_mask: hf.get_attention_mask().to_vec(),
            overflowing,
        }
    }
}
