//! [`Encoding`]: the result of encoding one text, field for field what HF `tokenizers` returns
//! (`tokenizers::Encoding`), with byte offsets into the input text.
//!
//! Invariant: every per-token column has the same length. Token strings are either held
//! (`Tokens::Owned`, as the HF engine produces them) or looked up by id on first use
//! (`Tokens::ById`): native engines produce ids only, and allocating a string per token would
//! cost more than the tokenization itself. For the same reason the columns that follow from the
//! template alone (type ids, the two masks) and the word ids are [`Lazy`]: written out on first
//! read from a recipe whose length is the encoding's (a fill value with the special tokens' values
//! at the ends, or the engine's `u32` word ids), so that an encode whose caller reads only ids and
//! offsets writes 20 bytes a token less (a fifth of a fresh English encode's output writes).

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

/// How a [`Lazy`] column is written out on first read.
pub(crate) trait Recipe: Clone + Default + fmt::Debug {
    type Item: Clone + fmt::Debug;
    /// The column, as many values as the encoding has tokens.
    fn build(&self) -> Vec<Self::Item>;
}

/// A column of `len` values: `head`, then `body` repeated, then `tail` (the template's special
/// tokens around the text's tokens). `head.len() + tail.len() <= len` where built by
/// [`Fill::new`]; should it not hold, the ends overlap and the result still has `len` values.
#[derive(Clone, Debug, Default)]
pub(crate) struct Fill {
    len: usize,
    body: u32,
    head: Vec<u32>,
    tail: Vec<u32>,
}

impl Fill {
    pub(crate) fn new(len: usize, body: u32, head: Vec<u32>, tail: Vec<u32>) -> Self {
        debug_assert!(head.len() + tail.len() <= len);
        Fill { len, body, head, tail }
    }
}

impl Recipe for Fill {
    type Item = u32;
    fn build(&self) -> Vec<u32> {
        // `vec![0; n]` is `calloc`: fresh pages are not written at all.
        let mut column = vec![self.body; self.len];
        for (slot, &value) in column.iter_mut().zip(&self.head) {
            *slot = value;
        }
        for (slot, &value) in column.iter_mut().rev().zip(self.tail.iter().rev()) {
            *slot = value;
        }
        column
    }
}

/// Word ids: `head` times `None`, `Some(w)` for each of the engine's `words`, `tail` times
/// `None` (the special tokens have no word).
#[derive(Clone, Debug, Default)]
pub(crate) struct Words {
    head: usize,
    words: Vec<u32>,
    tail: usize,
}

impl Words {
    pub(crate) fn new(head: usize, words: Vec<u32>, tail: usize) -> Self {
        Words { head, words, tail }
    }
}

impl Recipe for Words {
    type Item = Option<u32>;
    fn build(&self) -> Vec<Option<u32>> {
        let mut column = Vec::with_capacity(self.head + self.words.len() + self.tail);
        column.extend(std::iter::repeat_n(None, self.head));
        column.extend(self.words.iter().map(|&w| Some(w)));
        column.extend(std::iter::repeat_n(None, self.tail));
        column
    }
}

/// A per-token column held as values, or as a recipe that writes them on first read (see the
/// module documentation). Reads through `&self` are safe from any thread (`OnceLock`).
#[derive(Clone, Default)]
pub(crate) struct Lazy<R: Recipe> {
    values: OnceLock<Vec<R::Item>>,
    /// Used until `values` is set; the default (an empty column) once it is.
    recipe: R,
}

impl<R: Recipe> Lazy<R> {
    /// A column written out on first read.
    pub(crate) fn new(recipe: R) -> Self {
        Lazy { values: OnceLock::new(), recipe }
    }

    /// The values, written out now if they were not yet.
    pub(crate) fn as_slice(&self) -> &[R::Item] {
        self.values.get_or_init(|| self.recipe.build())
    }

    /// The values as a vector to change (padding), written out first if need be.
    pub(crate) fn take_vec(&mut self) -> Vec<R::Item> {
        let values = self.values.take().unwrap_or_else(|| self.recipe.build());
        self.recipe = R::default();
        values
    }
}

impl<R: Recipe> From<Vec<R::Item>> for Lazy<R> {
    fn from(values: Vec<R::Item>) -> Self {
        Lazy { values: OnceLock::from(values), recipe: R::default() }
    }
}

impl<R: Recipe> fmt::Debug for Lazy<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

/// The tokens of one text and everything known about them.
///
/// Field for field equal to `tokenizers::Tokenizer::encode(text, add_special_tokens)` of the same
/// `tokenizer.json`; offsets are byte offsets into the input text, as the Rust crate gives them.
#[derive(Clone, Debug, Default)]
pub struct Encoding {
    pub(crate) ids: Vec<u32>,
    pub(crate) type_ids: Lazy<Fill>,
    pub(crate) tokens: Tokens,
    pub(crate) offsets: Vec<(usize, usize)>,
    pub(crate) word_ids: Lazy<Words>,
    pub(crate) special_tokens_mask: Lazy<Fill>,
    pub(crate) attention_mask: Lazy<Fill>,
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
        self.type_ids.as_slice()
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
        self.word_ids.as_slice()
    }

    /// 1 for tokens added by the post-processor (e.g. `[CLS]`), 0 otherwise.
    pub fn special_tokens_mask(&self) -> &[u32] {
        self.special_tokens_mask.as_slice()
    }

    /// 1 for real tokens, 0 for padding.
    pub fn attention_mask(&self) -> &[u32] {
        self.attention_mask.as_slice()
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
            ("word_ids", first(self.word_ids(), other.word_ids())),
            ("type_ids", first(self.type_ids(), other.type_ids())),
            ("special_tokens_mask", first(self.special_tokens_mask(), other.special_tokens_mask())),
            ("attention_mask", first(self.attention_mask(), other.attention_mask())),
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
        fn extend_lazy<R: Recipe>(column: &mut Lazy<R>, value: R::Item, missing: usize, left: bool) {
            let mut values = column.take_vec();
            extend(&mut values, value, missing, left);
            *column = Lazy::from(values);
        }
        extend(&mut self.ids, params.pad_id, missing, left);
        extend_lazy(&mut self.type_ids, params.pad_type_id, missing, left);
        extend(&mut tokens, params.pad_token.clone(), missing, left);
        extend(&mut self.offsets, (0, 0), missing, left);
        extend_lazy(&mut self.word_ids, None, missing, left);
        extend_lazy(&mut self.special_tokens_mask, 1, missing, left);
        extend_lazy(&mut self.attention_mask, 0, missing, left);
        self.tokens = Tokens::Owned(tokens);
    }
}

impl PartialEq for Encoding {
    fn eq(&self, other: &Self) -> bool {
        self.ids == other.ids
            && self.type_ids() == other.type_ids()
            && self.offsets == other.offsets
            && self.word_ids() == other.word_ids()
            && self.special_tokens_mask() == other.special_tokens_mask()
            && self.attention_mask() == other.attention_mask()
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
            type_ids: hf.get_type_ids().to_vec().into(),
            tokens: Tokens::Owned(hf.get_tokens().to_vec()),
            offsets: hf.get_offsets().to_vec(),
            word_ids: hf.get_word_ids().to_vec().into(),
            special_tokens_mask: hf.get_special_tokens_mask().to_vec().into(),
            attention_mask: hf.get_attention_mask().to_vec().into(),
            overflowing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lazy columns read as their recipes say, through a clone and after padding on either side,
    /// and equal the same values held outright.
    #[test]
    fn lazy_columns_read_as_written() {
        let fill = Lazy::new(Fill::new(6, 7, vec![1, 2], vec![3]));
        assert_eq!(fill.as_slice(), [1, 2, 7, 7, 7, 3]);
        assert_eq!(Lazy::new(Fill::new(3, 0, Vec::new(), Vec::new())).as_slice(), [0, 0, 0]);
        let words = Lazy::new(Words::new(1, vec![0, 0, 1], 2));
        assert_eq!(words.clone().as_slice(), [None, Some(0), Some(0), Some(1), None, None]);
        let mut encoding = Encoding {
            ids: vec![9, 1, 2, 3, 9, 9],
            type_ids: Lazy::new(Fill::new(6, 0, vec![1], Vec::new())),
            offsets: vec![(0, 0), (0, 1), (1, 2), (2, 3), (0, 0), (0, 0)],
            word_ids: words,
            special_tokens_mask: Lazy::new(Fill::new(6, 0, vec![1], vec![1, 1])),
            attention_mask: Lazy::new(Fill::new(6, 1, Vec::new(), Vec::new())),
            ..Encoding::default()
        };
        let held = Encoding {
            type_ids: vec![1, 0, 0, 0, 0, 0].into(),
            word_ids: vec![None, Some(0), Some(0), Some(1), None, None].into(),
            special_tokens_mask: vec![1, 0, 0, 0, 1, 1].into(),
            attention_mask: vec![1; 6].into(),
            ..encoding.clone()
        };
        assert_eq!(encoding, held);
        assert_eq!(format!("{encoding:?}"), format!("{held:?}"));
        for direction in [tokenizers::PaddingDirection::Left, tokenizers::PaddingDirection::Right] {
            let params = tokenizers::PaddingParams { direction, pad_type_id: 5, ..Default::default() };
            let (mut lazy, mut held) = (encoding.clone(), held.clone());
            lazy.pad(8, &params);
            held.pad(8, &params);
            assert_eq!(lazy, held);
            assert_eq!(lazy.attention_mask().len(), 8);
        }
        encoding.pad(7, &tokenizers::PaddingParams::default());
        assert_eq!(encoding.attention_mask(), [1, 1, 1, 1, 1, 1, 0]);
        assert_eq!(encoding.word_ids().last(), Some(&None));
    }
}
