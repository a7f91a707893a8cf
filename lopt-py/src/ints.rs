//! Shared Python `int` objects for small non-negative values, so that the offsets and word ids
//! of an [`Encoding`](crate::encoding::Encoding) are filled with new references instead of new
//! objects where the values are small.
//!
//! Why: CPython caches only -5..=256; every other element of `encoding.offsets` was a fresh
//! allocation. Character offsets and word ids of short prompts are mostly below [`LIMIT`]
//! (`.offsets` 5-15 % faster per call, `docs/benchmarks.md`). Ids do not use it: a table of the
//! whole vocabulary (2^18 objects, ~10 MB), and this small one too, made `.ids` of fresh short
//! texts slower on the shared benchmark machine (rare ids' objects are cache misses where a new
//! object comes from a hot free list).
//!
//! Invariants: the table is process-wide (an `int` is immutable, so one object can sit in any
//! number of lists), filled lazily in blocks of [`BLOCK`] values; values at or over [`LIMIT`] get
//! new objects. Blocks are built with the GIL held through `PyOnceLock`, which cannot deadlock
//! against another thread waiting for the GIL.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyInt;

/// Values per lazily built block.
const BLOCK: usize = 4096;
const BLOCKS: usize = 2;
/// Values below this come from the table.
const LIMIT: usize = BLOCK * BLOCKS;

static TABLE: [PyOnceLock<Box<[Py<PyInt>]>>; BLOCKS] = [const { PyOnceLock::new() }; BLOCKS];

/// The Python `int` for `value`: a new reference to the shared object when `value < LIMIT`.
#[inline]
pub(crate) fn int(py: Python<'_>, value: usize) -> Bound<'_, PyInt> {
    let block = value / BLOCK;
    match TABLE.get(block) {
        Some(slot) => {
            let ints = slot
                .get_or_init(py, || (block * BLOCK..(block + 1) * BLOCK).map(|v| PyInt::new(py, v).unbind()).collect());
            ints[value % BLOCK].bind(py).clone()
        }
        None => {
            debug_assert!(value >= LIMIT);
            PyInt::new(py, value)
        }
    }
}
