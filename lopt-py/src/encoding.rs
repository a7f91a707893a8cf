//! `lopt.Encoding`: the Python API of `tokenizers.Encoding` (same attributes, helpers, methods
//! and results) over either a lopt result or a `tokenizers::Encoding`.
//!
//! Invariants:
//! * A lopt result ([`Native`]) keeps the input `str` (a reference, not a copy) and its byte
//!   offsets; character offsets are computed once, on first use ([`crate::offsets`]). Columns
//!   are turned into Python lists only when read.
//! * Everything that needs HF's sequence bookkeeping (the char/word/token helpers, `pad`,
//!   `truncate`, `merge`, pickling) runs on a `tokenizers::Encoding` built from the lopt result
//!   once (with character offsets and the sequence range HF would record), so it is HF's own code
//!   that answers.
//! * HF records a token range for the sequence only when the tokenizer has a post-processor
//!   (`PostProcessor::process` calls `set_sequence_id`); the range is then the span of the
//!   tokens that are neither template specials nor padding, i.e. those with
//!   `special_tokens_mask == 0` (tokens of the text itself, added special tokens included, have
//!   0).

use std::sync::OnceLock;

use ahash::AHashMap;
use lopt::hf as tokenizers;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};

use crate::ints::{id_list, int};
use crate::offsets::char_offsets;
use crate::{guarded, LoptError};

/// A lopt result and what is derived from it on demand.
struct Native {
    encoding: lopt::Encoding,
    text: Py<PyString>,
    has_ranges: bool,
    offsets: OnceLock<Vec<(usize, usize)>>,
    hf: OnceLock<tokenizers::Encoding>,
}

enum Repr {
    Native(Box<Native>),
    Hf(Box<tokenizers::Encoding>),
}

/// The result of encoding one input: ids, tokens, offsets (in characters) and everything
/// `tokenizers.Encoding` has.
#[pyclass(module = "lopt", name = "Encoding")]
pub(crate) struct Encoding {
    repr: Repr,
}

impl Native {
    fn offsets(&self, py: Python<'_>) -> PyResult<&[(usize, usize)]> {
        if let Some(offsets) = self.offsets.get() {
            return Ok(offsets);
        }
        let text = self.text.to_str(py)?;
        Ok(self.offsets.get_or_init(|| char_offsets(text, self.encoding.offsets())))
    }

    /// The token range HF records for the sequence, if any.
    fn range(&self) -> Option<std::ops::Range<usize>> {
        if !self.has_ranges {
            return None;
        }
        let mask = self.encoding.special_tokens_mask();
        let start = mask.iter().position(|&m| m == 0);
        let end = mask.iter().rposition(|&m| m == 0);
        Some(match (start, end) {
            (Some(start), Some(end)) => start..end + 1,
            _ => 0..0,
        })
    }

    fn to_hf(&self, py: Python<'_>) -> PyResult<tokenizers::Encoding> {
        let e = &self.encoding;
        let overflowing = e
            .overflowing()
            .iter()
            .map(|part| Native::new(part.clone(), self.text.clone_ref(py), self.has_ranges).to_hf(py))
            .collect::<PyResult<Vec<_>>>()?;
        let mut ranges = AHashMap::new();
        if let Some(range) = self.range() {
            ranges.insert(0, range);
        }
        Ok(tokenizers::Encoding::new(
            e.ids().to_vec(),
            e.type_ids().to_vec(),
            e.tokens().to_vec(),
            e.word_ids().to_vec(),
            self.offsets(py)?.to_vec(),
            e.special_tokens_mask().to_vec(),
            e.attention_mask().to_vec(),
            overflowing,
            ranges,
        ))
    }

    fn hf(&self, py: Python<'_>) -> PyResult<&tokenizers::Encoding> {
        if let Some(hf) = self.hf.get() {
            return Ok(hf);
        }
        let hf = self.to_hf(py)?;
        Ok(self.hf.get_or_init(|| hf))
    }

    fn new(encoding: lopt::Encoding, text: Py<PyString>, has_ranges: bool) -> Self {
        Native { encoding, text, has_ranges, offsets: OnceLock::new(), hf: OnceLock::new() }
    }
}

impl Encoding {
    pub(crate) fn native(encoding: lopt::Encoding, text: Py<PyString>, has_ranges: bool) -> Self {
        Encoding { repr: Repr::Native(Box::new(Native::new(encoding, text, has_ranges))) }
    }

    fn hf(&self, py: Python<'_>) -> PyResult<&tokenizers::Encoding> {
        match &self.repr {
            Repr::Native(native) => native.hf(py),
            Repr::Hf(hf) => Ok(hf),
        }
    }

    /// The `tokenizers::Encoding`, taking it over for a change in place.
    fn hf_mut(&mut self, py: Python<'_>) -> PyResult<&mut tokenizers::Encoding> {
        if let Repr::Native(native) = &mut self.repr {
            let hf = match native.hf.take() {
                Some(hf) => hf,
                None => native.to_hf(py)?,
            };
            self.repr = Repr::Hf(Box::new(hf));
        }
        match &mut self.repr {
            Repr::Hf(hf) => Ok(&mut **hf),
            Repr::Native(_) => Err(LoptError::new_err("internal error: encoding not converted")),
        }
    }
}

/// A list of `(start, end)` tuples (small offsets as shared ints, [`crate::ints`]).
fn offset_list<'py>(py: Python<'py>, offsets: &[(usize, usize)]) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, offsets.iter().map(|&(start, end)| (int(py, start), int(py, end))))
}

/// A list of word ids, `None` for tokens of no word.
fn word_list<'py>(py: Python<'py>, words: &[Option<u32>]) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, words.iter().map(|w| w.map(|w| int(py, w as usize))))
}

fn direction_error(direction: &str) -> PyErr {
    pyo3::exceptions::PyValueError::new_err(format!("Unknown `direction`: `{direction}`. Use one of `left` or `right`"))
}

#[pymethods]
impl Encoding {
    #[new]
    fn empty() -> Self {
        Encoding { repr: Repr::Hf(Box::default()) }
    }

    /// Pickles as HF does: the JSON of the `tokenizers::Encoding`.
    fn __getstate__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let json = serde_json::to_vec(self.hf(py)?)
            .map_err(|e| LoptError::new_err(format!("cannot serialize the encoding: {e}")))?;
        Ok(PyBytes::new(py, &json))
    }

    fn __setstate__(&mut self, state: &[u8]) -> PyResult<()> {
        let hf =
            serde_json::from_slice(state).map_err(|e| LoptError::new_err(format!("not a pickled encoding: {e}")))?;
        self.repr = Repr::Hf(Box::new(hf));
        Ok(())
    }

    /// Wraps a `tokenizers.Encoding` (given its `__getstate__()`).
    #[staticmethod]
    fn _from_state(state: &[u8]) -> PyResult<Self> {
        let mut encoding = Self::empty();
        encoding.__setstate__(state)?;
        Ok(encoding)
    }

    fn __len__(&self) -> usize {
        match &self.repr {
            Repr::Native(native) => native.encoding.len(),
            Repr::Hf(hf) => hf.len(),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "Encoding(num_tokens={}, attributes=[ids, type_ids, tokens, offsets, attention_mask, special_tokens_mask, overflowing])",
            self.__len__()
        )
    }

    #[getter]
    fn ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        match &self.repr {
            // Shared objects only for long encodings (`crate::ints`).
            Repr::Native(native) => id_list(py, native.encoding.ids()),
            Repr::Hf(hf) => id_list(py, hf.get_ids()),
        }
    }

    #[getter]
    fn type_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        match &self.repr {
            Repr::Native(native) => PyList::new(py, native.encoding.type_ids()),
            Repr::Hf(hf) => PyList::new(py, hf.get_type_ids()),
        }
    }

    #[getter]
    fn tokens<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        match &self.repr {
            Repr::Native(native) => PyList::new(py, native.encoding.tokens()),
            Repr::Hf(hf) => PyList::new(py, hf.get_tokens()),
        }
    }

    /// `(start, end)` character offsets of each token in its input text.
    #[getter]
    fn offsets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        match &self.repr {
            Repr::Native(native) => offset_list(py, native.offsets(py)?),
            Repr::Hf(hf) => offset_list(py, hf.get_offsets()),
        }
    }

    #[getter]
    fn attention_mask<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        match &self.repr {
            Repr::Native(native) => PyList::new(py, native.encoding.attention_mask()),
            Repr::Hf(hf) => PyList::new(py, hf.get_attention_mask()),
        }
    }

    #[getter]
    fn special_tokens_mask<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        match &self.repr {
            Repr::Native(native) => PyList::new(py, native.encoding.special_tokens_mask()),
            Repr::Hf(hf) => PyList::new(py, hf.get_special_tokens_mask()),
        }
    }

    #[getter]
    fn word_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        match &self.repr {
            Repr::Native(native) => word_list(py, native.encoding.word_ids()),
            Repr::Hf(hf) => word_list(py, hf.get_word_ids()),
        }
    }

    /// Deprecated alias of `word_ids` (as in `tokenizers`).
    #[getter]
    fn words<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyErr::warn(
            py,
            &py.get_type::<pyo3::exceptions::PyDeprecationWarning>(),
            c"Deprecated in 0.9.4: Encoding.words is deprecated, please use Encoding.word_ids instead.",
            1,
        )?;
        self.word_ids(py)
    }

    #[getter]
    fn sequence_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        match &self.repr {
            Repr::Native(native) => {
                let n = native.encoding.len();
                let ids: Vec<Option<usize>> = match native.range() {
                    None => vec![Some(0); n],
                    Some(range) => (0..n).map(|i| range.contains(&i).then_some(0)).collect(),
                };
                PyList::new(py, ids)
            }
            Repr::Hf(hf) => PyList::new(py, hf.get_sequence_ids()),
        }
    }

    #[getter]
    fn n_sequences(&self) -> usize {
        match &self.repr {
            Repr::Native(_) => 1,
            Repr::Hf(hf) => hf.n_sequences(),
        }
    }

    #[getter]
    fn overflowing(&self, py: Python<'_>) -> Vec<Encoding> {
        match &self.repr {
            Repr::Native(native) => native
                .encoding
                .overflowing()
                .iter()
                .map(|part| Encoding::native(part.clone(), native.text.clone_ref(py), native.has_ranges))
                .collect(),
            Repr::Hf(hf) => {
                hf.get_overflowing().iter().map(|e| Encoding { repr: Repr::Hf(Box::new(e.clone())) }).collect()
            }
        }
    }

    #[pyo3(signature = (char_pos, sequence_index=0))]
    fn char_to_token(&self, py: Python<'_>, char_pos: usize, sequence_index: usize) -> PyResult<Option<usize>> {
        Ok(self.hf(py)?.char_to_token(char_pos, sequence_index))
    }

    #[pyo3(signature = (char_pos, sequence_index=0))]
    fn char_to_word(&self, py: Python<'_>, char_pos: usize, sequence_index: usize) -> PyResult<Option<u32>> {
        Ok(self.hf(py)?.char_to_word(char_pos, sequence_index))
    }

    fn token_to_chars(&self, py: Python<'_>, token_index: usize) -> PyResult<Option<(usize, usize)>> {
        Ok(self.hf(py)?.token_to_chars(token_index).map(|(_, offsets)| offsets))
    }

    fn token_to_sequence(&self, py: Python<'_>, token_index: usize) -> PyResult<Option<usize>> {
        Ok(self.hf(py)?.token_to_sequence(token_index))
    }

    fn token_to_word(&self, py: Python<'_>, token_index: usize) -> PyResult<Option<u32>> {
        Ok(self.hf(py)?.token_to_word(token_index).map(|(_, word)| word))
    }

    #[pyo3(signature = (word_index, sequence_index=0))]
    fn word_to_chars(
        &self,
        py: Python<'_>,
        word_index: u32,
        sequence_index: usize,
    ) -> PyResult<Option<(usize, usize)>> {
        Ok(self.hf(py)?.word_to_chars(word_index, sequence_index))
    }

    #[pyo3(signature = (word_index, sequence_index=0))]
    fn word_to_tokens(
        &self,
        py: Python<'_>,
        word_index: u32,
        sequence_index: usize,
    ) -> PyResult<Option<(usize, usize)>> {
        Ok(self.hf(py)?.word_to_tokens(word_index, sequence_index))
    }

    fn set_sequence_id(&mut self, py: Python<'_>, sequence_id: usize) -> PyResult<()> {
        self.hf_mut(py)?.set_sequence_id(sequence_id);
        Ok(())
    }

    #[pyo3(signature = (length, direction="right", pad_id=0, pad_type_id=0, pad_token="[PAD]"))]
    fn pad(
        &mut self,
        py: Python<'_>,
        length: usize,
        direction: &str,
        pad_id: u32,
        pad_type_id: u32,
        pad_token: &str,
    ) -> PyResult<()> {
        let direction = match direction {
            "left" => tokenizers::PaddingDirection::Left,
            "right" => tokenizers::PaddingDirection::Right,
            other => return Err(direction_error(other)),
        };
        if length > lopt::MAX_PADDING_LENGTH {
            return Err(LoptError::new_err(format!(
                "padding to {length} tokens is over lopt's limit of {}",
                lopt::MAX_PADDING_LENGTH
            )));
        }
        let hf = self.hf_mut(py)?;
        guarded(|| {
            hf.pad(length, pad_id, pad_type_id, pad_token, direction);
            Ok(())
        })
    }

    #[pyo3(signature = (max_length, stride=0, direction="right"))]
    fn truncate(&mut self, py: Python<'_>, max_length: usize, stride: usize, direction: &str) -> PyResult<()> {
        let direction = match direction {
            "left" => tokenizers::TruncationDirection::Left,
            "right" => tokenizers::TruncationDirection::Right,
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "Invalid truncation direction value : {other}"
                )))
            }
        };
        let hf = self.hf_mut(py)?;
        guarded(|| {
            hf.truncate(max_length, stride, direction);
            Ok(())
        })
    }

    /// Merges encodings into one (as `tokenizers.Encoding.merge`).
    #[staticmethod]
    #[pyo3(signature = (encodings, growing_offsets=true))]
    fn merge(py: Python<'_>, encodings: Vec<PyRef<'_, Encoding>>, growing_offsets: bool) -> PyResult<Encoding> {
        let parts = encodings.iter().map(|e| e.hf(py).cloned()).collect::<PyResult<Vec<_>>>()?;
        Ok(Encoding { repr: Repr::Hf(Box::new(tokenizers::Encoding::merge(parts, growing_offsets))) })
    }
}
