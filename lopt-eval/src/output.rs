//! What every method returns and accuracy compares ([`Output`]: ids and attention mask, what the
//! paper's "string to tensors" latency covers), and the one-line form of a `tokenizers` error.
//!
//! This module sits below both `methods` and `baselines`, so that the baselines need nothing from
//! the module that dispatches to them: imports in this crate run one way.

use anyhow::anyhow;
use lopt::hf;

/// What accuracy compares: ids and attention mask.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    pub ids: Vec<u32>,
    pub attention_mask: Vec<u32>,
}

impl Output {
    /// The ids and mask of an HF encoding.
    pub fn from_hf(e: &hf::Encoding) -> Self {
        Output { ids: e.get_ids().to_vec(), attention_mask: e.get_attention_mask().to_vec() }
    }

    /// The ids and mask of a lopt encoding.
    pub fn from_lopt(e: &lopt::Encoding) -> Self {
        Output { ids: e.ids().to_vec(), attention_mask: e.attention_mask().to_vec() }
    }
}

/// `tokenizers` errors are boxed trait objects; give them one line of context.
pub fn hf_err(e: hf::Error) -> anyhow::Error {
    anyhow!("tokenizers: {e}")
}
