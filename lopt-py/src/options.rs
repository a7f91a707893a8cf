//! [`Options`]: one snapshot of a `lopt.Tokenizer`'s per-call settings (truncation and
//! padding), parsed once from the dictionaries HF's `truncation` / `padding` properties return.
//!
//! Invariant: an `Options` is immutable; the Python side swaps in a new one when a setting
//! changes, so an encode in flight keeps the settings it started with, and no lock is held while
//! encoding. Sizes that would make the process allocate without bound (a fixed padding length or
//! `pad_to_multiple_of` over [`MAX_PADDING_LENGTH`]) are refused here, before any encode.

use lopt::hf::{
    PaddingDirection, PaddingParams, PaddingStrategy, TruncationDirection, TruncationParams, TruncationStrategy,
};
use pyo3::conversion::FromPyObjectOwned;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::LoptError;

/// The largest padding length accepted (16,777,216 tokens, 64 MiB of ids per column): no model
/// has a context near it, and a larger one only serves to exhaust memory.
pub(crate) const MAX_PADDING_LENGTH: usize = 1 << 24;

/// Truncation and padding for one call, as HF `tokenizers` parameters.
#[pyclass(module = "lopt._lopt", frozen)]
#[allow(dead_code)] // Read by the encoders once the library takes per-call settings.
pub(crate) struct Options {
    pub(crate) truncation: Option<TruncationParams>,
    pub(crate) padding: Option<PaddingParams>,
}

#[pymethods]
impl Options {
    /// Parses HF's `truncation` and `padding` dictionaries (`None` disables each).
    #[new]
    #[pyo3(signature = (truncation=None, padding=None))]
    fn new(truncation: Option<&Bound<'_, PyDict>>, padding: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        Ok(Options {
            truncation: truncation.map(parse_truncation).transpose()?,
            padding: padding.map(parse_padding).transpose()?,
        })
    }
}

fn item<'py, T: FromPyObjectOwned<'py>>(dict: &Bound<'py, PyDict>, key: &str) -> PyResult<Option<T>> {
    match dict.get_item(key)? {
        Some(value) if !value.is_none() => value.extract::<T>().map(Some).map_err(|e| {
            let e: PyErr = e.into();
            LoptError::new_err(format!("bad {key}: {e}"))
        }),
        _ => Ok(None),
    }
}

fn parse_truncation(dict: &Bound<'_, PyDict>) -> PyResult<TruncationParams> {
    let max_length: usize =
        item(dict, "max_length")?.ok_or_else(|| LoptError::new_err("truncation needs a max_length"))?;
    let direction = match item::<String>(dict, "direction")?.as_deref() {
        None | Some("right") => TruncationDirection::Right,
        Some("left") => TruncationDirection::Left,
        Some(other) => return Err(LoptError::new_err(format!("unknown truncation direction {other:?}"))),
    };
    let strategy = match item::<String>(dict, "strategy")?.as_deref() {
        None | Some("longest_first") => TruncationStrategy::LongestFirst,
        Some("only_first") => TruncationStrategy::OnlyFirst,
        Some("only_second") => TruncationStrategy::OnlySecond,
        Some(other) => return Err(LoptError::new_err(format!("unknown truncation strategy {other:?}"))),
    };
    let stride = item(dict, "stride")?.unwrap_or(0);
    Ok(TruncationParams { direction, max_length, strategy, stride })
}

fn parse_padding(dict: &Bound<'_, PyDict>) -> PyResult<PaddingParams> {
    let bounded = |name: &str, n: usize| {
        if n > MAX_PADDING_LENGTH {
            Err(LoptError::new_err(format!("padding {name} {n} is over lopt's limit of {MAX_PADDING_LENGTH} tokens")))
        } else {
            Ok(n)
        }
    };
    let strategy = match item::<usize>(dict, "length")? {
        Some(n) => PaddingStrategy::Fixed(bounded("length", n)?),
        None => PaddingStrategy::BatchLongest,
    };
    let direction = match item::<String>(dict, "direction")?.as_deref() {
        None | Some("right") => PaddingDirection::Right,
        Some("left") => PaddingDirection::Left,
        Some(other) => return Err(LoptError::new_err(format!("unknown padding direction {other:?}"))),
    };
    let pad_to_multiple_of =
        item::<usize>(dict, "pad_to_multiple_of")?.map(|n| bounded("pad_to_multiple_of", n)).transpose()?;
    Ok(PaddingParams {
        strategy,
        direction,
        pad_to_multiple_of,
        pad_id: item(dict, "pad_id")?.unwrap_or(0),
        pad_type_id: item(dict, "pad_type_id")?.unwrap_or(0),
        pad_token: item(dict, "pad_token")?.unwrap_or_else(|| "[PAD]".to_owned()),
    })
}
