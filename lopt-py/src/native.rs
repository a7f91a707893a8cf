//! [`Core`]: a built `lopt::Tokenizer` as seen from Python.
//!
//! Invariants: the GIL is released for every encode (a single text too) and for loading; texts
//! are borrowed from their Python `str` objects (UTF-8 views, no copy) and those objects are kept
//! alive by the caller's frame for the whole call; a `Core` is immutable (`frozen`), so Python
//! threads share it without borrow flags.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyString};

use crate::encoding::{Encoding, Job};
use crate::options::Options;
use crate::{guarded, panic_message, LoptError};

/// A lopt tokenizer: parallel, exact encoding of single texts and batches.
#[pyclass(module = "lopt._lopt", frozen)]
pub(crate) struct Core {
    tokenizer: Arc<lopt::Tokenizer>,
    /// Whether the tokenizer has a post-processor: HF then records the sequence's token range
    /// in each encoding (`sequence_ids` is `None` on the specials), otherwise it does not.
    has_ranges: bool,
    /// Set once an ids-first encoding of this core needed the full encode (`crate::encoding`):
    /// from then on `encode` and `encode_batch` encode in full.
    wants_full: Arc<AtomicBool>,
    /// The process that built this core (a forked child builds its own: `_tokenizer.py`).
    pid: u32,
}

/// The `str` items of a list or tuple, or `None` when any item is something else (a pair, a
/// pre-tokenized list): the Python side then hands the whole batch to HF.
fn strings<'py>(texts: &Bound<'py, PyAny>) -> PyResult<Option<Vec<Bound<'py, PyString>>>> {
    let mut out = Vec::with_capacity(texts.len().unwrap_or(0));
    for item in texts.try_iter()? {
        match item?.cast_into::<PyString>() {
            Ok(s) => out.push(s),
            Err(_) => return Ok(None),
        }
    }
    Ok(Some(out))
}

fn views<'a>(texts: &'a [Bound<'_, PyString>]) -> PyResult<Vec<&'a str>> {
    texts.iter().map(|t| t.to_str()).collect()
}

/// `values` as native-endian bytes in a new `bytearray` (numpy reads it without a copy).
fn bytearray<'py, T: Copy, const N: usize>(
    py: Python<'py>,
    values: impl ExactSizeIterator<Item = T>,
    to_bytes: impl Fn(T) -> [u8; N],
) -> PyResult<Bound<'py, PyByteArray>> {
    let len = values.len() * N;
    PyByteArray::new_with(py, len, |buf| {
        for (chunk, value) in buf.chunks_exact_mut(N).zip(values) {
            chunk.copy_from_slice(&to_bytes(value));
        }
        Ok(())
    })
}

/// Builds the library's tokenizer from a `tokenizer.json`'s bytes (no GIL needed).
fn build(json: &[u8], threads: Option<usize>, prefix_cache: usize) -> PyResult<lopt::Tokenizer> {
    guarded(|| {
        let builder = lopt::TokenizerBuilder::new().prefix_cache(prefix_cache);
        let builder = match threads {
            Some(n) => builder.threads(n),
            None => builder,
        };
        builder.build_from_bytes(json)
    })
}

/// A [`Core`] being built on a thread of its own ([`Core::start`]).
#[pyclass(module = "lopt._lopt", frozen)]
pub(crate) struct PendingCore {
    /// `None` once joined.
    handle: Mutex<Option<JoinHandle<PyResult<lopt::Tokenizer>>>>,
}

#[pymethods]
impl PendingCore {
    /// Waits (GIL released) for the build and returns the core.
    ///
    /// # Errors
    /// The build's error as `LoptError`; `LoptError` too when called a second time.
    fn join(&self, py: Python<'_>) -> PyResult<Core> {
        let handle = self.handle.lock().ok().and_then(|mut handle| handle.take());
        let Some(handle) = handle else {
            return Err(LoptError::new_err("internal error: this core was already joined"));
        };
        let built = py.detach(|| handle.join());
        match built {
            Ok(tokenizer) => Ok(Core::new(tokenizer?)),
            Err(payload) => Err(LoptError::new_err(format!("internal error: {}", panic_message(payload.as_ref())))),
        }
    }
}

impl Core {
    fn new(tokenizer: lopt::Tokenizer) -> Core {
        let has_ranges = tokenizer.has_post_processor();
        Core { tokenizer: Arc::new(tokenizer), has_ranges, wants_full: Arc::default(), pid: std::process::id() }
    }

    /// How an ids-first encoding of a call with `options` would encode in full, or `None` when
    /// the call should encode in full now: the options truncate or pad (the full result's mask
    /// and overflow are then not trivial), the ids-only mode would encode in full anyway, or an
    /// earlier encoding of this core needed the full result.
    fn ids_first(&self, options: Option<&Bound<'_, Options>>, add_special_tokens: bool) -> Option<Job> {
        let options = options?;
        let settings = options.get().get(add_special_tokens);
        let plain = settings.truncation_params().is_none() && settings.padding_params().is_none();
        if !plain || self.wants_full.load(Ordering::Relaxed) || !self.tokenizer.encodes_ids_only(settings) {
            return None;
        }
        Some(Job {
            tokenizer: Arc::clone(&self.tokenizer),
            options: options.clone().unbind(),
            add_special_tokens,
            has_ranges: self.has_ranges,
            wants_full: Arc::clone(&self.wants_full),
            pid: self.pid,
        })
    }

    /// Encodes one text with the call's options (`None`: the `tokenizer.json`'s own), GIL released.
    fn run(
        &self,
        py: Python<'_>,
        text: &str,
        add_special_tokens: bool,
        options: Option<&Options>,
    ) -> PyResult<lopt::Encoding> {
        py.detach(|| {
            guarded(|| match options {
                Some(options) => self.tokenizer.encode_with(text, options.get(add_special_tokens)),
                None => self.tokenizer.encode(text, add_special_tokens),
            })
        })
    }

    /// The ids of one text with the call's options, ids-only mode, GIL released.
    fn run_ids(
        &self,
        py: Python<'_>,
        text: &str,
        add_special_tokens: bool,
        options: Option<&Options>,
    ) -> PyResult<Vec<u32>> {
        py.detach(|| {
            guarded(|| match options {
                Some(options) => self.tokenizer.encode_ids(text, options.get(add_special_tokens)),
                None => self.tokenizer.encode_ids_default(text, add_special_tokens),
            })
        })
    }

    /// The ids of a batch with the call's options, ids-only mode, GIL released.
    fn run_batch_ids(
        &self,
        py: Python<'_>,
        texts: &[&str],
        add_special_tokens: bool,
        options: Option<&Options>,
    ) -> PyResult<Vec<Vec<u32>>> {
        py.detach(|| {
            guarded(|| match options {
                Some(options) => self.tokenizer.encode_batch_ids(texts, options.get(add_special_tokens)),
                None => self.tokenizer.encode_batch_ids_default(texts, add_special_tokens),
            })
        })
    }

    /// Encodes a batch with the call's options, GIL released.
    fn run_batch(
        &self,
        py: Python<'_>,
        texts: &[&str],
        add_special_tokens: bool,
        options: Option<&Options>,
    ) -> PyResult<Vec<lopt::Encoding>> {
        py.detach(|| {
            guarded(|| match options {
                Some(options) => self.tokenizer.encode_batch_with(texts, options.get(add_special_tokens)),
                None => self.tokenizer.encode_batch(texts, add_special_tokens),
            })
        })
    }
}

#[pymethods]
impl Core {
    /// Builds a tokenizer from the text of a `tokenizer.json`; `threads=None` means one per core;
    /// `prefix_cache` bounds the prefix cache in bytes (0: off).
    #[staticmethod]
    #[pyo3(signature = (json, threads=None, prefix_cache=0))]
    fn from_str(py: Python<'_>, json: &str, threads: Option<usize>, prefix_cache: usize) -> PyResult<Core> {
        let tokenizer = py.detach(|| build(json.as_bytes(), threads, prefix_cache))?;
        Ok(Core::new(tokenizer))
    }

    /// Starts building a tokenizer from a `tokenizer.json`'s text (`str`) or bytes on a thread of
    /// its own, which never takes the GIL, so that the caller can parse the same file into HF's
    /// object meanwhile; [`PendingCore::join`] waits for it. Arguments as
    /// [`from_str`](Core::from_str).
    ///
    /// # Errors
    /// `TypeError` when `json` is neither `str` nor `bytes`; the build's own errors come from
    /// `join`.
    #[staticmethod]
    #[pyo3(signature = (json, threads=None, prefix_cache=0))]
    fn start(json: &Bound<'_, PyAny>, threads: Option<usize>, prefix_cache: usize) -> PyResult<PendingCore> {
        // A copy, made with the GIL held, so that the thread needs nothing from Python.
        let json = match json.cast::<PyBytes>() {
            Ok(bytes) => bytes.as_bytes().to_vec(),
            Err(_) => json.cast::<PyString>()?.to_str()?.as_bytes().to_vec(),
        };
        let handle = std::thread::Builder::new()
            .name("lopt-load".to_owned())
            .spawn(move || build(&json, threads, prefix_cache))
            .map_err(|e| LoptError::new_err(format!("cannot start a thread to load the tokenizer: {e}")))?;
        Ok(PendingCore { handle: Mutex::new(Some(handle)) })
    }

    /// The prefix cache's counters as a dict (`None` when the cache is off).
    fn prefix_cache_stats<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(stats) = self.tokenizer.prefix_cache_stats() else { return Ok(None) };
        let dict = PyDict::new(py);
        dict.set_item("hits", stats.hits)?;
        dict.set_item("misses", stats.misses)?;
        dict.set_item("bytes_reused", stats.bytes_reused)?;
        dict.set_item("bytes_encoded", stats.bytes_encoded)?;
        dict.set_item("bytes_held", stats.bytes_held)?;
        dict.set_item("entries", stats.entries)?;
        dict.set_item("capacity", stats.capacity)?;
        Ok(Some(dict))
    }

    /// Why this tokenizer encodes each text whole (`None` when it cuts long texts in parallel).
    #[getter]
    fn sequential_reason(&self) -> Option<String> {
        match self.tokenizer.parallelism() {
            lopt::Parallelism::Sequential { reason } => Some(reason.clone()),
            _ => None,
        }
    }

    /// The engine that tokenizes (`bpe`, `wordpiece`, `hf`).
    #[getter]
    fn engine(&self) -> &'static str {
        self.tokenizer.engine_name()
    }

    /// The number of threads of the tokenizer's pool.
    #[getter]
    fn threads(&self) -> usize {
        self.tokenizer.threads()
    }

    /// Encodes one text; `options=None` means the `tokenizer.json`'s own truncation and padding.
    /// Without truncation and padding the result is ids-first (`crate::encoding`).
    #[pyo3(signature = (text, add_special_tokens=true, options=None))]
    fn encode(
        &self,
        py: Python<'_>,
        text: Bound<'_, PyString>,
        add_special_tokens: bool,
        options: Option<&Bound<'_, Options>>,
    ) -> PyResult<Encoding> {
        if let Some(job) = self.ids_first(options, add_special_tokens) {
            let ids = self.run_ids(py, text.to_str()?, add_special_tokens, options.map(Bound::get))?;
            return Ok(Encoding::deferred(ids, text.unbind(), job));
        }
        let encoding = self.run(py, text.to_str()?, add_special_tokens, options.map(Bound::get))?;
        Ok(Encoding::native(encoding, text.unbind(), self.has_ranges))
    }

    /// Encodes a list of texts; `None` when an item is not a `str`. Without truncation and
    /// padding the results are ids-first (`crate::encoding`).
    #[pyo3(signature = (texts, add_special_tokens=true, options=None))]
    fn encode_batch(
        &self,
        py: Python<'_>,
        texts: &Bound<'_, PyAny>,
        add_special_tokens: bool,
        options: Option<&Bound<'_, Options>>,
    ) -> PyResult<Option<Vec<Encoding>>> {
        let Some(texts) = strings(texts)? else { return Ok(None) };
        if let Some(job) = self.ids_first(options, add_special_tokens) {
            let all = self.run_batch_ids(py, &views(&texts)?, add_special_tokens, options.map(Bound::get))?;
            return Ok(Some(
                all.into_iter()
                    .zip(texts)
                    .map(|(ids, text)| Encoding::deferred(ids, text.unbind(), job.clone_ref(py)))
                    .collect(),
            ));
        }
        let encodings = self.run_batch(py, &views(&texts)?, add_special_tokens, options.map(Bound::get))?;
        Ok(Some(
            encodings
                .into_iter()
                .zip(texts)
                .map(|(encoding, text)| Encoding::native(encoding, text.unbind(), self.has_ranges))
                .collect(),
        ))
    }

    /// The ids of one text as native-endian `uint32` bytes.
    #[pyo3(signature = (text, add_special_tokens=true, options=None))]
    fn encode_ids<'py>(
        &self,
        py: Python<'py>,
        text: Bound<'py, PyString>,
        add_special_tokens: bool,
        options: Option<&Bound<'py, Options>>,
    ) -> PyResult<Bound<'py, PyByteArray>> {
        let ids = self.run_ids(py, text.to_str()?, add_special_tokens, options.map(Bound::get))?;
        bytearray(py, ids.into_iter(), u32::to_ne_bytes)
    }

    /// The ids of many texts, concatenated, as native-endian `uint32` bytes, and the `int64`
    /// row offsets (`len(texts) + 1` of them: row `i` is `ids[offsets[i]:offsets[i + 1]]`);
    /// `None` when an item is not a `str`.
    #[pyo3(signature = (texts, add_special_tokens=true, options=None))]
    #[allow(clippy::type_complexity)]
    fn encode_batch_ids<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        add_special_tokens: bool,
        options: Option<&Bound<'py, Options>>,
    ) -> PyResult<Option<(Bound<'py, PyByteArray>, Bound<'py, PyByteArray>)>> {
        let Some(texts) = strings(texts)? else { return Ok(None) };
        let all = self.run_batch_ids(py, &views(&texts)?, add_special_tokens, options.map(Bound::get))?;
        let mut rows = Vec::with_capacity(all.len() + 1);
        rows.push(0i64);
        let mut total = 0usize;
        for ids in &all {
            total += ids.len();
            rows.push(i64::try_from(total).unwrap_or(i64::MAX));
        }
        let ids = bytearray(py, all.concat().into_iter(), u32::to_ne_bytes)?;
        let rows = bytearray(py, rows.into_iter(), i64::to_ne_bytes)?;
        Ok(Some((ids, rows)))
    }

    /// Keeps this tokenizer's memory and thread pool alive for good. Called in a forked child on
    /// the parent's tokenizer: its pool's threads do not exist there, and tearing the pool down
    /// could wait on a lock that a parent thread held at the fork.
    fn leak(&self) {
        std::mem::forget(Arc::clone(&self.tokenizer));
    }
}
