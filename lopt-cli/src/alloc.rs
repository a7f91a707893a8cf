//! The process's allocator settings: glibc keeps the memory that encodes free, instead of giving
//! it back to the kernel after every call and faulting it in again for the next one.
//!
//! Why: each encode allocates its output columns (and the engines' segment columns) afresh, some
//! megabytes for a 1 MB document, and frees them when the caller is done. With glibc's default,
//! dynamic thresholds the top of the heap is trimmed (`brk` shrinks) whenever the freed top
//! exceeds twice the largest mmapped block freed so far, so the next document touches fresh pages
//! again: about 3,000 minor faults per 1 MB BERT document, 35-40 % of the CPU time of a fresh
//! encode in this VM (docs/benchmarks.md, "WordPiece, session 7"). Whether a run trims at all
//! depended on how load-time allocations happened to lie in the heap, which made timings move by
//! 10 % with unrelated changes (serde_json's map type, the trie builder).
//!
//! Invariants: applied once, before any thread starts, and only where the user has not chosen the
//! same settings through `GLIBC_TUNABLES`. Peak memory is unchanged (only memory already reached
//! is kept); between calls the process keeps up to [`TRIM_THRESHOLD`] bytes of freed heap per
//! malloc arena. A library caller (e.g. Python) keeps its own process's allocator settings.

/// Freed heap kept per arena before glibc gives memory back (256 MiB: a 1 MB document peaks at
/// about 25 MB; a 10 MB one at about 250 MB).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: libc::c_int = 256 << 20;

/// Allocations from this size on get their own mapping (and are unmapped when freed); 32 MiB is
/// glibc's largest allowed value on 64-bit targets, which keeps a 1 MB document's columns on the
/// heap.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 32 << 20;

/// Applies the settings above; a setting glibc refuses is left at its default (speed only).
pub(crate) fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
        if tunables.contains("trim_threshold") || tunables.contains("mmap_threshold") {
            return;
        }
        for (param, value) in [(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD), (libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD)] {
            // SAFETY: `mallopt` takes two integers and only changes malloc's own parameters under
            // its arena lock; no pointer is passed and no memory of ours is touched. Its only
            // failure (an out-of-range value) is reported by returning 0, which is checked.
            let applied = unsafe { libc::mallopt(param, value) };
            if applied == 0 {
                return;
            }
        }
    }
}
