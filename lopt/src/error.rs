//! The library's one error type: an opaque [`Error`] with a coarse [`ErrorKind`] and a one-line
//! message that names the problem. Nothing in the library panics on bad input; every failure
//! surfaces here.

use std::fmt;

/// What went wrong, coarsely; match on this, not on the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A file could not be read.
    Io,
    /// The tokenizer definition is malformed (not JSON, or not a valid `tokenizer.json`).
    InvalidTokenizer,
    /// A builder setting is out of range (for example zero threads).
    InvalidConfig,
    /// The underlying tokenizer failed while encoding.
    Encode,
    /// The thread pool could not be created.
    ThreadPool,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::Io => "I/O error",
            ErrorKind::InvalidTokenizer => "invalid tokenizer",
            ErrorKind::InvalidConfig => "invalid configuration",
            ErrorKind::Encode => "encoding failed",
            ErrorKind::ThreadPool => "thread pool error",
        })
    }
}

/// An error from lopt: a [`kind`](Error::kind) plus a message for humans.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into() }
    }

    /// The category of this error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub(crate) fn encode(err: impl fmt::Display) -> Self {
        // HF errors are boxed `dyn Error`s; keep the text, one line.
        Error::new(ErrorKind::Encode, one_line(&err.to_string()))
    }
}

/// Runs `f`, turning a panic inside it into an [`ErrorKind::Encode`] error that names `what`.
///
/// HF `tokenizers` and the Oniguruma binding panic on some hostile inputs (a backtracking regex
/// past Oniguruma's retry limit, a truncation stride not below the length left for the text):
/// a library must answer those with an error, and a Python caller's `except Exception` must see
/// one. State a panic may leave half-updated is at most a cache, which HF skips when its lock is
/// poisoned.
pub(crate) fn catch_panic<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let text = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_owned());
        Err(Error::new(ErrorKind::Encode, format!("{what} failed: {}", one_line(&text))))
    })
}

/// Collapses a possibly multi-line message into one line (errors are printed one per line).
pub(crate) fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub(crate) type Result<T> = std::result::Result<T, Error>;
