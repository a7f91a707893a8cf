//! Shared Python `int` objects for non-negative values, so that the columns of an
//! [`Encoding`](crate::encoding::Encoding) read from Python are filled with new references instead
//! of new objects.
//!
//! Why: CPython caches only -5..=256; every other element of a list such as `encoding.offsets` was
//! a fresh allocation.
//! - Character offsets and word ids of short prompts are mostly below [`SMALL_LIMIT`], so they
//!   come from a small table ([`int`]; `.offsets` 5-15 % faster per call, `docs/benchmarks.md`).
//! - Ids of a long encoding come from a table of the vocabulary ([`id_list`]). A million-byte
//!   document's 250 K new `int`s took fresh pymalloc arenas from the kernel on every call (about
//!   35 ns an id, three times fastokens' `.ids`), because the previous call's arenas had been
//!   given back when its list was freed.
//! - Short encodings' ids stay new objects: there the shared objects of rare ids were cache misses
//!   where a new `int` comes from a hot free list (a table of the whole vocabulary made `.ids` of
//!   256-4096-character texts 1.19-1.31x slower).
//!
//! Invariants: the tables are process-wide (an `int` is immutable, so one object can sit in any
//! number of lists), filled lazily in blocks of [`BLOCK`] values; values past a table get new
//! objects. Blocks are built with the GIL held through `PyOnceLock`, which cannot deadlock against
//! another thread waiting for the GIL. Memory bound: [`SMALL_LIMIT`] + [`ID_LIMIT`] objects of
//! 32 bytes and their pointers, about 10 MiB when every block is built (only the blocks of ids that
//! long encodings held are).

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyInt, PyList};

/// Values per lazily built block.
const BLOCK: usize = 4096;
/// Values below this come from the small table.
const SMALL_LIMIT: usize = BLOCK * 2;
/// Ids below this come from the ids' table (2^18: every fixture's vocabulary).
const ID_LIMIT: usize = BLOCK * 64;
/// Encodings with at least this many ids take them from the ids' table.
const SHARED_IDS_FROM: usize = 16_384;

/// A table of shared `int`s for `0..BLOCKS * BLOCK`.
struct Shared<const BLOCKS: usize> {
    blocks: [PyOnceLock<Box<[Py<PyInt>]>>; BLOCKS],
}

impl<const BLOCKS: usize> Shared<BLOCKS> {
    const fn new() -> Self {
        Shared { blocks: [const { PyOnceLock::new() }; BLOCKS] }
    }

    /// The Python `int` for `value`: a new reference to the shared object when the table covers
    /// `value`, else a new object.
    #[inline]
    fn int<'py>(&self, py: Python<'py>, value: usize) -> Bound<'py, PyInt> {
        let block = value / BLOCK;
        match self.blocks.get(block) {
            Some(slot) => {
                let ints = slot.get_or_init(py, || {
                    (block * BLOCK..(block + 1) * BLOCK).map(|v| PyInt::new(py, v).unbind()).collect()
                });
                ints[value % BLOCK].bind(py).clone()
            }
            None => PyInt::new(py, value),
        }
    }
}

static SMALL: Shared<{ SMALL_LIMIT / BLOCK }> = Shared::new();
static IDS: Shared<{ ID_LIMIT / BLOCK }> = Shared::new();

/// The Python `int` for `value`: a new reference to a shared object when `value < SMALL_LIMIT`.
#[inline]
pub(crate) fn int(py: Python<'_>, value: usize) -> Bound<'_, PyInt> {
    SMALL.int(py, value)
}

/// The list of `ids`: shared objects for a long encoding, new ones for a short one.
///
/// # Errors
/// As `PyList::new` (a Python error while building the list).
pub(crate) fn id_list<'py>(py: Python<'py>, ids: &[u32]) -> PyResult<Bound<'py, PyList>> {
    if ids.len() < SHARED_IDS_FROM {
        return PyList::new(py, ids);
    }
    PyList::new(py, ids.iter().map(|&id| IDS.int(py, id as usize)))
}
