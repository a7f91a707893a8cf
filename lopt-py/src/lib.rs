//! `lopt._lopt`: the native half of the Python package `lopt`.
//!
//! The Python side (`python/lopt/`) owns the public `lopt.Tokenizer`: it keeps a real
//! `tokenizers.Tokenizer` for everything lopt has no native code for and calls [`Core`] for the
//! rest. This crate holds what must be fast or exact at the byte level:
//! * [`Core`]: a built `lopt::Tokenizer`; encodes with the GIL released.
//! * [`Encoding`](encoding::Encoding): `tokenizers.Encoding`'s Python API over a lopt result,
//!   with byte offsets turned into HF's character offsets lazily ([`offsets`]).
//!
//! Invariants: no call into the library or into HF `tokenizers` from here can unwind into
//! Python (every one runs under [`guarded`], which turns a panic into `lopt.LoptError`), and
//! nothing here holds the GIL while it encodes.

mod encoding;
mod ints;
mod native;
mod offsets;
mod options;

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::prelude::*;

pyo3::create_exception!(
    lopt,
    LoptError,
    pyo3::exceptions::PyValueError,
    "An error from lopt: a bad tokenizer file, bad settings, or a text the tokenizer cannot encode. \
     The message is the library's one-line description."
);

/// Runs `f`, turning a library error or a panic (from lopt or from HF `tokenizers` under it)
/// into `lopt.LoptError`.
pub(crate) fn guarded<T>(f: impl FnOnce() -> Result<T, lopt::Error>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(LoptError::new_err(err.to_string())),
        Err(payload) => Err(LoptError::new_err(format!("internal error: {}", panic_message(payload.as_ref())))),
    }
}

/// The text of a panic payload (panics carry a `&str` or a `String`), on one line.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let text = if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_owned()
    };
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Parses a size in bytes such as `"256MiB"` (the CLI's `--prefix-cache` syntax).
#[pyfunction]
fn parse_byte_size(value: &str) -> PyResult<usize> {
    lopt::parse_byte_size(value).map_err(|e| LoptError::new_err(e.to_string()))
}

#[pymodule]
fn _lopt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("LoptError", m.py().get_type::<LoptError>())?;
    m.add_class::<native::Core>()?;
    m.add_class::<native::PendingCore>()?;
    m.add_class::<encoding::Encoding>()?;
    m.add_class::<options::Options>()?;
    m.add_function(wrap_pyfunction!(parse_byte_size, m)?)?;
    m.add("MAX_PADDING_LENGTH", lopt::MAX_PADDING_LENGTH)?;
    Ok(())
}
