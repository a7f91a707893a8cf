//! [`Options`]: one snapshot of a `lopt.Tokenizer`'s per-call settings (truncation and
//! padding), parsed once from the dictionaries HF's `truncation` / `padding` properties return.
//!
//! Invariant: an `Options` is immutable; the Python side swaps in a new one when a setting
//! changes, so an encode in flight keeps the settings it started with, and no lock is held while
//! encoding. The library checks the values on every encode (`Tokenizer::check_options`: padding
//! over `lopt::MAX_PADDING_LENGTH`, a stride that leaves no room).

use lopt::hf::{
    PaddingDirection, PaddingParams, PaddingStrategy, TruncationDirection, TruncationParams, TruncationStrategy,
};
use lopt::EncodeOptions;
use pyo3::conversion::FromPyObjectOwned;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::LoptError;

/// Truncation and padding for one call, built once per change of settings, with and without
/// special tokens.
#[pyclass(module = "lopt._lopt", frozen)]
pub(crate) struct Options {
    with_special: EncodeOptions,
    without_special: EncodeOptions,
}

impl Options {
    /// The library's options for a call that does (or does not) add special tokens.
    pub(crate) fn get(&self, add_special_tokens: bool) -> &EncodeOptions {
        if add_special_tokens {
            &self.with_special
        } else {
            &self.without_special
        }
    }
}

#[pymethods]
impl Options {
    /// Parses HF's `truncation` and `padding` dictionaries (`None` disables each).
    #[new]
    #[pyo3(signature = (truncation=None, padding=None))]
    fn new(truncation: Option<&Bound<'_, PyDict>>, padding: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let options = EncodeOptions::new()
            .truncation(truncation.map(parse_truncation).transpose()?)
            .padding(padding.map(parse_padding).transpose()?);
        Ok(Options { without_special: options.clone().add_special_tokens(false), with_special: options })
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
    let strategy = match item::<usize>(dict, "length")? {
        Some(n) => PaddingStrategy::Fixed(n),
        None => PaddingStrategy::BatchLongest,
    };
    let direction = match item::<String>(dict, "direction")?.as_deref() {
        None | Some("right") => PaddingDirection::Right,
        Some("left") => PaddingDirection::Left,
        Some(other) => return Err(LoptError::new_err(format!("unknown padding direction {other:?}"))),
    };
    Ok(PaddingParams {
        strategy,
        direction,
        pad_to_multiple_of: item(dict, "pad_to_multiple_of")?,
        pad_id: item(dict, "pad_id")?.unwrap_or(0),
        pad_type_id: item(dict, "pad_type_id")?.unwrap_or(0),
        pad_token: item(dict, "pad_token")?.unwrap_or_else(|| "[PAD]".to_owned()),
    })
}
