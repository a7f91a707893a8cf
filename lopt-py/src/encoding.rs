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
//! * An ids-first result ([`Deferred`]) holds only the ids of an ids-only encode
//!   (`lopt::Tokenizer::encode_ids`, 1.1-1.2x faster than the full encode), because most callers
//!   (transformers, vLLM, SGLang) read only `ids` and `attention_mask` (BERT's also `type_ids`,
//!   which the post-processor's template gives). The first read of anything else (offsets,
//!   tokens, word ids, the helpers, pickling, `pad`) encodes the text again in full, with the
//!   same tokenizer and options (the [`Job`]), checks that the ids agree, and answers from that
//!   result from then on. It is made only for calls without truncation or padding (so its
//!   attention mask is all ones and it has no overflow), and a `Core` stops making it once one
//!   of its encodings needed the full encode (`Job::wants_full`): a caller that reads offsets
//!   pays the second encode once. Such an encoding keeps its tokenizer alive (the `Job`'s
//!   `Arc`) until it is dropped.
//! * HF records a token range for the sequence only when the tokenizer has a post-processor
//!   (`PostProcessor::process` calls `set_sequence_id`); the range is then the span of the
//!   tokens that are neither template specials nor padding, i.e. those with
//!   `special_tokens_mask == 0` (tokens of the text itself, added special tokens included, have
//!   0).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use ahash::AHashMap;
use lopt::hf as tokenizers;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};

use crate::ints::{id_list, int};
use crate::offsets::char_offsets;
use crate::options::Options;
use crate::{guarded, panic_message, LoptError};

/// A lopt result and what is derived from it on demand.
struct Native {
    encoding: lopt::Encoding,
    text: Py<PyString>,
    has_ranges: bool,
    offsets: OnceLock<Vec<(usize, usize)>>,
    hf: OnceLock<tokenizers::Encoding>,
}

/// How an ids-first result encodes its text in full: the call's tokenizer and settings.
pub(crate) struct Job {
    pub(crate) tokenizer: Arc<lopt::Tokenizer>,
    /// The call's settings (truncation and padding off: see the module's invariants).
    pub(crate) options: Py<Options>,
    pub(crate) add_special_tokens: bool,
    pub(crate) has_ranges: bool,
    /// Set when an encoding of this `Core` needed the full encode: it then encodes in full.
    pub(crate) wants_full: Arc<AtomicBool>,
    /// The process whose core encoded: in a forked child its pool has no threads.
    pub(crate) pid: u32,
}

impl Job {
    pub(crate) fn clone_ref(&self, py: Python<'_>) -> Job {
        Job {
            tokenizer: Arc::clone(&self.tokenizer),
            options: self.options.clone_ref(py),
            add_special_tokens: self.add_special_tokens,
            has_ranges: self.has_ranges,
            wants_full: Arc::clone(&self.wants_full),
            pid: self.pid,
        }
    }
}

/// An ids-only result and, once something else was read, the full one.
struct Deferred {
    ids: Vec<u32>,
    text: Py<PyString>,
    job: Job,
    full: OnceLock<Native>,
}

enum Repr {
    Native(Box<Native>),
    Deferred(Box<Deferred>),
    Hf(Box<tokenizers::Encoding>),
}

/// What answers a read: a full lopt result or a `tokenizers::Encoding`.
enum View<'a> {
    Native(&'a Native),
    Hf(&'a tokenizers::Encoding),
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

impl Deferred {
    /// The full result, encoding the text again on first use.
    fn native(&self, py: Python<'_>) -> PyResult<&Native> {
        if let Some(native) = self.full.get() {
            return Ok(native);
        }
        // Encoded before `get_or_init`, not inside it: the encode releases the GIL, and a thread
        // waiting in `get_or_init` with the GIL held would keep this one from taking it back.
        let native = self.encode_full(py)?;
        Ok(self.full.get_or_init(|| native))
    }

    /// The type ids and special-tokens mask, from the post-processor's template and the length
    /// (`None` when they are not that simple: then only the full encode has them).
    fn template_columns(&self) -> Option<(Vec<u32>, Vec<u32>)> {
        let job = &self.job;
        job.tokenizer.template_columns(job.options.get().get(job.add_special_tokens), self.ids.len())
    }

    fn encode_full(&self, py: Python<'_>) -> PyResult<Native> {
        let job = &self.job;
        job.wants_full.store(true, Ordering::Relaxed);
        let text = self.text.bind(py).to_str()?;
        let options = job.options.get().get(job.add_special_tokens);
        let encoding = py.detach(|| {
            if std::process::id() == job.pid {
                guarded(|| job.tokenizer.encode_with(text, options))
            } else {
                encode_in_forked_child(&job.tokenizer, text, job.add_special_tokens)
            }
        })?;
        if encoding.ids() != self.ids.as_slice() {
            return Err(LoptError::new_err("internal error: the full encode of an ids-first encoding gave other ids"));
        }
        Ok(Native::new(encoding, self.text.clone_ref(py), job.has_ranges))
    }
}

/// HF's sequential encode on the calling thread, without truncation or padding (as the ids-first
/// call): in a forked child the tokenizer's pool has no threads, and an encode that waited for
/// them would wait for ever.
fn encode_in_forked_child(
    tokenizer: &lopt::Tokenizer,
    text: &str,
    add_special_tokens: bool,
) -> PyResult<lopt::Encoding> {
    let hf = guarded(|| tokenizer.hf().cloned())?;
    let encoded = catch_unwind(AssertUnwindSafe(move || {
        let mut hf = hf;
        hf.with_padding(None);
        hf.with_truncation(None)?;
        hf.encode(text, add_special_tokens)
    }));
    match encoded {
        Ok(Ok(encoding)) => Ok(lopt::Encoding::from(encoding)),
        Ok(Err(err)) => Err(LoptError::new_err(err.to_string())),
        Err(payload) => Err(LoptError::new_err(format!("internal error: {}", panic_message(payload.as_ref())))),
    }
}

impl Encoding {
    pub(crate) fn native(encoding: lopt::Encoding, text: Py<PyString>, has_ranges: bool) -> Self {
        Encoding { repr: Repr::Native(Box::new(Native::new(encoding, text, has_ranges))) }
    }

    /// An ids-first result: `ids` of `text` from an ids-only encode of `job`'s settings.
    pub(crate) fn deferred(ids: Vec<u32>, text: Py<PyString>, job: Job) -> Self {
        Encoding { repr: Repr::Deferred(Box::new(Deferred { ids, text, job, full: OnceLock::new() })) }
    }

    /// An ids-first result's type ids and special-tokens mask when the template gives them.
    fn template_columns(&self) -> Option<(Vec<u32>, Vec<u32>)> {
        match &self.repr {
            Repr::Deferred(deferred) => deferred.template_columns(),
            _ => None,
        }
    }

    /// What answers a read other than those an ids-first result answers itself (`ids`, `len`,
    /// `attention_mask`, `n_sequences`, `overflowing`, and, from the template, `type_ids` and
    /// `special_tokens_mask`).
    fn view(&self, py: Python<'_>) -> PyResult<View<'_>> {
        Ok(match &self.repr {
            Repr::Native(native) => View::Native(native),
            Repr::Deferred(deferred) => View::Native(deferred.native(py)?),
            Repr::Hf(hf) => View::Hf(hf),
        })
    }

    fn hf(&self, py: Python<'_>) -> PyResult<&tokenizers::Encoding> {
        match self.view(py)? {
            View::Native(native) => native.hf(py),
            View::Hf(hf) => Ok(hf),
        }
    }

    /// The `tokenizers::Encoding`, taking it over for a change in place.
    fn hf_mut(&mut self, py: Python<'_>) -> PyResult<&mut tokenizers::Encoding> {
        if let Repr::Deferred(deferred) = &mut self.repr {
            let native = match deferred.full.take() {
                Some(native) => native,
                None => deferred.encode_full(py)?,
            };
            self.repr = Repr::Native(Box::new(native));
        }
        if let Repr::Native(native) = &mut self.repr {
            let hf = match native.hf.take() {
                Some(hf) => hf,
                None => native.to_hf(py)?,
            };
            self.repr = Repr::Hf(Box::new(hf));
        }
        match &mut self.repr {
            Repr::Hf(hf) => Ok(&mut **hf),
            Repr::Native(_) | Repr::Deferred(_) => Err(LoptError::new_err("internal error: encoding not converted")),
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

    /// Whether this is an ids-first result that has not been encoded in full yet (for tests).
    #[getter]
    fn _ids_first(&self) -> bool {
        matches!(&self.repr, Repr::Deferred(deferred) if deferred.full.get().is_none())
    }

    fn __len__(&self) -> usize {
        match &self.repr {
            Repr::Native(native) => native.encoding.len(),
            Repr::Deferred(deferred) => deferred.ids.len(),
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
            Repr::Deferred(deferred) => id_list(py, &deferred.ids),
            Repr::Hf(hf) => id_list(py, hf.get_ids()),
        }
    }

    #[getter]
    fn type_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        if let Some((type_ids, _)) = self.template_columns() {
            return PyList::new(py, type_ids);
        }
        match self.view(py)? {
            View::Native(native) => PyList::new(py, native.encoding.type_ids()),
            View::Hf(hf) => PyList::new(py, hf.get_type_ids()),
        }
    }

    #[getter]
    fn tokens<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        match self.view(py)? {
            View::Native(native) => PyList::new(py, native.encoding.tokens()),
            View::Hf(hf) => PyList::new(py, hf.get_tokens()),
        }
    }

    /// `(start, end)` character offsets of each token in its input text.
    #[getter]
    fn offsets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        match self.view(py)? {
            View::Native(native) => offset_list(py, native.offsets(py)?),
            View::Hf(hf) => offset_list(py, hf.get_offsets()),
        }
    }

    #[getter]
    fn attention_mask<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        match &self.repr {
            Repr::Native(native) => PyList::new(py, native.encoding.attention_mask()),
            // No padding (the module's invariants): every token is attended to.
            Repr::Deferred(deferred) => PyList::new(py, std::iter::repeat_n(1u32, deferred.ids.len())),
            Repr::Hf(hf) => PyList::new(py, hf.get_attention_mask()),
        }
    }

    #[getter]
    fn special_tokens_mask<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        if let Some((_, mask)) = self.template_columns() {
            return PyList::new(py, mask);
        }
        match self.view(py)? {
            View::Native(native) => PyList::new(py, native.encoding.special_tokens_mask()),
            View::Hf(hf) => PyList::new(py, hf.get_special_tokens_mask()),
        }
    }

    #[getter]
    fn word_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        match self.view(py)? {
            View::Native(native) => word_list(py, native.encoding.word_ids()),
            View::Hf(hf) => word_list(py, hf.get_word_ids()),
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
        match self.view(py)? {
            View::Native(native) => {
                let n = native.encoding.len();
                let ids: Vec<Option<usize>> = match native.range() {
                    None => vec![Some(0); n],
                    Some(range) => (0..n).map(|i| range.contains(&i).then_some(0)).collect(),
                };
                PyList::new(py, ids)
            }
            View::Hf(hf) => PyList::new(py, hf.get_sequence_ids()),
        }
    }

    #[getter]
    fn n_sequences(&self) -> usize {
        match &self.repr {
            Repr::Native(_) | Repr::Deferred(_) => 1,
            Repr::Hf(hf) => hf.n_sequences(),
        }
    }

    #[getter]
    fn overflowing(&self, py: Python<'_>) -> Vec<Encoding> {
        match &self.repr {
            // No truncation (the module's invariants): no overflow.
            Repr::Deferred(_) => Vec::new(),
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
