//! Where the tokenizer comes from: a `tokenizer.json` named by `--tokenizer`, or the built-in
//! `cl100k_base` default (see [`crate::cl100k`]). Builds the [`lopt::Tokenizer`] with the shared
//! flags and keeps the JSON for `info`.

use std::path::Path;

use anyhow::{Context, Result};

use crate::args::TokenizerArgs;
use crate::cl100k;
use crate::report;

/// A built tokenizer with where it came from.
pub struct Loaded {
    pub tokenizer: lopt::Tokenizer,
    /// For humans: the path, or `built-in cl100k_base`.
    pub name: String,
    /// The `tokenizer.json` it was built from.
    pub json: Vec<u8>,
}

/// Reads and builds the tokenizer the flags ask for.
///
/// # Errors
/// An unreadable file, a malformed or unsupported `tokenizer.json`, a setting the library rejects
/// (for example `--engine native` where no native engine applies), or a thread pool that does
/// not start.
pub fn load(args: &TokenizerArgs) -> Result<Loaded> {
    match &args.tokenizer {
        Some(path) => load_file(args, path),
        None => load_default(args),
    }
}

fn load_file(args: &TokenizerArgs, path: &Path) -> Result<Loaded> {
    let json = std::fs::read(path).with_context(|| format!("cannot read tokenizer {}", path.display()))?;
    let tokenizer = build_with_flags(args, &json).map_err(|e| name_tokenizer(e, &path.display().to_string()))?;
    Ok(Loaded { tokenizer, name: path.display().to_string(), json })
}

fn load_default(args: &TokenizerArgs) -> Result<Loaded> {
    let name = format!("built-in {}", cl100k::NAME);
    let (json, cached) = cl100k::tokenizer_json()?;
    match build_with_flags(args, &json) {
        Ok(tokenizer) => Ok(Loaded { tokenizer, name, json }),
        // A damaged cache file must not break the default: convert again and replace it.
        Err(e) if cached.is_some() && e.kind() == lopt::ErrorKind::InvalidTokenizer => {
            if let Some(path) = &cached {
                report::note(&format!("ignoring damaged cache {}: {e}", path.display()));
            }
            let json = cl100k::convert_and_cache()?;
            let tokenizer = build_with_flags(args, &json).map_err(|e| name_tokenizer(e, &name))?;
            Ok(Loaded { tokenizer, name, json })
        }
        Err(e) => Err(name_tokenizer(e, &name)),
    }
}

/// Builds a tokenizer from `json` with the flags' settings but another engine.
///
/// # Errors
/// As [`load`], without the I/O case.
pub fn build(args: &TokenizerArgs, engine: lopt::EngineKind, json: &[u8]) -> Result<lopt::Tokenizer> {
    Ok(builder(args).engine(engine).build_from_bytes(json)?)
}

fn build_with_flags(args: &TokenizerArgs, json: &[u8]) -> std::result::Result<lopt::Tokenizer, lopt::Error> {
    builder(args).build_from_bytes(json)
}

fn builder(args: &TokenizerArgs) -> lopt::TokenizerBuilder {
    let mut builder = lopt::TokenizerBuilder::new().engine(args.engine.into()).seed_cache(args.seed_cache.into());
    if let Some(threads) = args.threads {
        builder = builder.threads(threads);
    }
    if let Some(bytes) = args.chunk_size {
        builder = builder.chunk_size(bytes);
    }
    if let Some(bytes) = args.overlap {
        builder = builder.overlap(bytes);
    }
    if let Some(bytes) = args.prefix_cache {
        builder = builder.prefix_cache(bytes);
    }
    if let Some(us) = args.linger_us {
        builder = builder.linger(std::time::Duration::from_micros(us));
    }
    builder
}

/// Prefixes tokenizer-definition errors with the tokenizer's name; configuration errors already
/// say what is wrong.
fn name_tokenizer(err: lopt::Error, name: &str) -> anyhow::Error {
    if err.kind() == lopt::ErrorKind::InvalidTokenizer {
        anyhow::Error::new(err).context(format!("tokenizer {name}"))
    } else {
        err.into()
    }
}

/// Says once, on stderr, that this tokenizer is not encoded in parallel and why.
pub fn note_sequential(tokenizer: &lopt::Tokenizer) {
    if let lopt::Parallelism::Sequential { reason } = tokenizer.parallelism() {
        report::note(&format!("note: this tokenizer is encoded sequentially, one thread per text ({reason})"));
    }
}

/// One line on stderr with the prefix cache's counters, when it is on.
pub fn note_prefix_cache(tokenizer: &lopt::Tokenizer) {
    if let Some(s) = tokenizer.prefix_cache_stats() {
        eprintln!(
            "lopt: prefix cache: {} hits, {} misses, {} bytes reused, {} bytes encoded, {} texts ({} of {} bytes) held",
            s.hits, s.misses, s.bytes_reused, s.bytes_encoded, s.entries, s.bytes_held, s.capacity
        );
    }
}
