//! Trace: timestamps of the phases of one parallel encode, for finding where its wall time goes on
//! a many-core machine (issue 8: the caller's serial parts, the pool's wake-up, the segments'
//! imbalance).
//!
//! Compiled in only with the `trace` feature; without it [`span`] returns a zero-sized guard and
//! reads no clock, so the hot path is unchanged. With it, every span (a phase of the calling
//! thread, or one segment or copy job on a pool thread) is appended to one process-wide list when
//! it ends, with the pool thread's index, the span's start and end in nanoseconds since the first
//! span of the process, a size (bytes of a segment, tokens of a copy job), and the CPU time and
//! minor page faults of its thread during it (Linux: `CLOCK_THREAD_CPUTIME_ID` and
//! `RUSAGE_THREAD`, read at both ends, so that time a loaded machine's other processes took from
//! the thread is told apart from slower work; two system calls per end, about a microsecond, few
//! dozen spans per encode). Invariant: a span
//! records exactly one event, when its guard drops; [`take`] empties the list. The list is behind a
//! mutex: one lock per segment and phase, a few dozen per encode, far below the work they time.
//!
//! A trace build also reads `LOPT_SCHEDULE` once ([`schedule`]), so that one prepared run on a
//! many-core machine can compare ways of handing the segments to the pool; other builds always
//! use [`Schedule::Tree`] and read no environment.

/// How the segments of one text are handed to the pool (the trace build's experiment switch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// `install` + `par_iter`: rayon halves the range, workers wake one after another.
    Tree,
    /// `broadcast`: every pool thread is woken at once and takes segments from a shared counter.
    Broadcast,
    /// `in_place_scope`: one spawn per segment but the first, which the caller encodes itself.
    Flat,
    /// `in_place_scope` + `spawn_broadcast`: every pool thread woken at once, and the caller
    /// too takes segments from the shared counter until none is left.
    Share,
}

/// The schedule of this process: `LOPT_SCHEDULE=tree|broadcast|flat|share` in a trace build, else
/// [`Schedule::Tree`].
pub fn schedule() -> Schedule {
    #[cfg(feature = "trace")]
    {
        static CHOSEN: std::sync::OnceLock<Schedule> = std::sync::OnceLock::new();
        *CHOSEN.get_or_init(|| match std::env::var("LOPT_SCHEDULE").as_deref() {
            Ok("broadcast") => Schedule::Broadcast,
            Ok("flat") => Schedule::Flat,
            Ok("share") => Schedule::Share,
            _ => Schedule::Tree,
        })
    }
    #[cfg(not(feature = "trace"))]
    Schedule::Tree
}

/// One finished span.
#[derive(Clone, Debug)]
pub struct Event {
    /// What ran: `plan`, `encode` (the pool's part), `segment`, `finish`, `alloc`, `fill`,
    /// `copy` (one part on a pool thread), `free`, `call` (the whole `encode`).
    pub what: &'static str,
    /// The pool thread that ran it (`None`: a thread outside the pool, usually the caller).
    pub thread: Option<usize>,
    /// Start, nanoseconds since the process's first span.
    pub start_ns: u64,
    /// End, nanoseconds since the process's first span.
    pub end_ns: u64,
    /// Bytes of a segment, tokens of a copy job, 0 otherwise.
    pub size: usize,
    /// CPU time of the span's thread between its start and end, nanoseconds (0 where the
    /// thread's clock cannot be read): the span's wall time less the time the thread was not on
    /// a core, so that a loaded machine's preemptions can be told apart from slower work.
    pub cpu_ns: u64,
    /// Minor page faults of the span's thread between its start and end (0 where they cannot be
    /// read).
    pub faults: u64,
}

#[cfg(feature = "trace")]
mod on {
    use super::Event;
    use std::sync::{Mutex, OnceLock};
    use std::time::Instant;

    static EPOCH: OnceLock<Instant> = OnceLock::new();
    static EVENTS: Mutex<Vec<Event>> = Mutex::new(Vec::new());

    fn now_ns() -> u64 {
        let epoch = EPOCH.get_or_init(Instant::now);
        u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The calling thread's CPU time, nanoseconds (0 where it cannot be read).
    fn thread_cpu_ns() -> u64 {
        #[cfg(target_os = "linux")]
        {
            let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: `clock_gettime` writes one `timespec` through the pointer, which points to
            // a live, writable local of that type; its failure (-1) is checked.
            let read = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
            if read == 0 {
                let (secs, nanos) = (u64::try_from(now.tv_sec).unwrap_or(0), u64::try_from(now.tv_nsec).unwrap_or(0));
                return secs.saturating_mul(1_000_000_000).saturating_add(nanos);
            }
        }
        0
    }

    /// The calling thread's minor page faults so far (0 where they cannot be read).
    fn thread_faults() -> u64 {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: `rusage` is plain data, for which all-zero bytes are a valid value.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: `getrusage` writes one `rusage` through the pointer, which points to a
            // live, writable local of that type; its failure (-1) is checked.
            if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } == 0 {
                return u64::try_from(usage.ru_minflt).unwrap_or(0);
            }
        }
        0
    }

    /// Records its span when dropped.
    pub(crate) struct Span {
        what: &'static str,
        start_ns: u64,
        start_cpu_ns: u64,
        start_faults: u64,
        size: usize,
    }

    pub(crate) fn span(what: &'static str, size: usize) -> Span {
        Span { what, start_ns: now_ns(), start_cpu_ns: thread_cpu_ns(), start_faults: thread_faults(), size }
    }

    impl Drop for Span {
        fn drop(&mut self) {
            let event = Event {
                what: self.what,
                thread: rayon::current_thread_index(),
                start_ns: self.start_ns,
                end_ns: now_ns(),
                size: self.size,
                cpu_ns: thread_cpu_ns().saturating_sub(self.start_cpu_ns),
                faults: thread_faults().saturating_sub(self.start_faults),
            };
            // A poisoned list (a panic while pushing) only loses trace events.
            if let Ok(mut events) = EVENTS.lock() {
                events.push(event);
            }
        }
    }

    pub(crate) fn take() -> Vec<Event> {
        EVENTS.lock().map(|mut events| std::mem::take(&mut *events)).unwrap_or_default()
    }
}

#[cfg(not(feature = "trace"))]
mod on {
    use super::Event;

    /// Zero-sized: without the feature a span costs nothing.
    pub(crate) struct Span;

    #[inline(always)]
    pub(crate) fn span(_what: &'static str, _size: usize) -> Span {
        Span
    }

    // An empty drop, so that callers may end a span early with `drop` in both builds.
    impl Drop for Span {
        #[inline(always)]
        fn drop(&mut self) {}
    }

    pub(crate) fn take() -> Vec<Event> {
        Vec::new()
    }
}

pub(crate) use on::span;

/// Whether this build records spans (the `trace` feature).
pub const ENABLED: bool = cfg!(feature = "trace");

/// The spans recorded since the last call, in the order they ended; empty without the `trace`
/// feature.
pub fn take() -> Vec<Event> {
    on::take()
}

/// Why a lingering job of the pool (`crate::linger`) returned: the index of its count in
/// [`linger_ends`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum LingerEnd {
    /// The next parallel call started.
    NextCall = 0,
    /// Its deadline passed.
    Deadline = 1,
    /// Its core was seen busy with other work.
    BusyCore = 2,
}

/// How the pool's lingering jobs ended so far in this process, counted by [`LingerEnd`]: when the
/// next call started, at their deadline, or on a core seen busy with other work; zeros without
/// the `trace` feature.
pub fn linger_ends() -> [u64; 3] {
    LINGER_ENDS.each_ref().map(|count| count.load(std::sync::atomic::Ordering::Relaxed))
}

static LINGER_ENDS: [std::sync::atomic::AtomicU64; 3] = [const { std::sync::atomic::AtomicU64::new(0) }; 3];

/// Counts a lingering job's end in a trace build.
pub(crate) fn linger_end(end: LingerEnd) {
    if ENABLED {
        LINGER_ENDS[end as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}
