//! # lopt — lossless parallel tokenization
//!
//! `lopt` encodes long texts with any HuggingFace `tokenizer.json` on all cores of a machine and
//! returns exactly what the sequential `tokenizers::Tokenizer::encode` returns: ids, tokens,
//! offsets, word ids, masks, type ids, special tokens, truncation and padding.
//!
//! The pipeline, one module per stage:
//!
//! ```text
//! text ─► split ─────────► engine (parallel) ─► merge ─► post ─► Encoding
//!         safe cut points   one segment each     concat   specials, truncation, padding (once)
//! ```
//!
//! * `spelling` rewrites a `tokenizer.json` into one canonical spelling of its pipeline, so that
//!   equivalent files get the same cut rule and engine.
//! * `boundary` decides, from the tokenizer's components, which byte positions are
//!   *safe cuts*: positions `p` where tokenizing `text[..p]` and `text[p..]` separately gives the
//!   tokens of `text`, whatever surrounds the few characters next to `p`. The argument for every
//!   supported component is in `docs/correctness.md`.
//! * `split` plans segments: it aims at equal-sized chunks and moves each boundary to the nearest
//!   safe cut inside a search window (the overlap); where the window holds none, the chunk grows
//!   into its neighbour instead of guessing.
//! * `engine` tokenizes one segment (HF `tokenizers` as the universal backend; native engines for
//!   byte-level BPE and WordPiece).
//! * `merge` concatenates the segments' tokens, shifting offsets and word ids.
//! * `post` applies truncation, the post-processor and padding once, to the merged result.
//!
//! ```no_run
//! let tokenizer = lopt::TokenizerBuilder::new().threads(4).build_from_file("tokenizer.json")?;
//! let encoding = tokenizer.encode("a very long prompt ...", true)?;
//! println!("{} tokens", encoding.len());
//! # Ok::<(), lopt::Error>(())
//! ```

mod boundary;
mod doc;
mod encoding;
mod engine;
mod error;
mod linger;
mod merge;
mod options;
mod parts;
mod post;
mod prefix;
mod size;
mod spelling;
mod split;
#[cfg(test)]
mod testdata;
mod tokenizer;
pub mod trace;

pub use encoding::{Difference, Encoding};
pub use engine::EngineKind;
pub use error::{Error, ErrorKind};
pub use options::{EncodeOptions, SeedCache};
pub use prefix::PrefixCacheStats;
pub use size::parse_byte_size;
pub use tokenizer::{
    Parallelism, Tokenizer, TokenizerBuilder, DEFAULT_LINGER, DEFAULT_MIN_PARALLEL_BYTES,
    DEFAULT_MIN_PARALLEL_BYTES_HF, DEFAULT_OVERLAP, MAX_PADDING_LENGTH,
};

/// The HuggingFace `tokenizers` crate that lopt is exact against (re-exported so that callers can
/// build the reference tokenizer from the very same version).
pub use tokenizers as hf;
