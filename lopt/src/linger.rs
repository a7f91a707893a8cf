//! The pool's workers kept awake for a bounded time after a parallel call (OpenMP's active wait
//! policy, bounded), so that the next call's segments start at once instead of after a sleeping
//! worker's wake-up.
//!
//! A rayon worker with nothing to do yields a few dozen times and then sleeps on a condition
//! variable; when its core then idles, a virtual machine may halt the virtual CPU (this project's
//! guests poll 200 µs first), and waking it again for the next call's second segment took
//! 0.07-2.3 ms in `scale --trace` (`docs/benchmarks.md`, "Two threads"): a large part of a
//! 1 MB document's 3-4 ms at two threads. With a linger of `d`, every parallel call leaves, when
//! it returns, one job per pool thread but one (the caller's own core is awake: it called) that
//! spins on the pool, yielding the core to any other runnable thread every few microseconds,
//! until the next parallel call of the same tokenizer starts or `d` has passed; then it returns
//! and rayon parks the thread as before.
//!
//! Invariants:
//! * A lingering job never delays work: each parallel call bumps [`Linger::calls`] before it
//!   hands work to the pool, and a job returns as soon as the count differs from the one it was
//!   left with (checked every spin), so a worker in a lingering job is back in rayon's loop
//!   within microseconds; a job left behind by an older call returns on its first check.
//! * Bounded: a job returns by its deadline whatever happens; nothing waits for it.
//! * Only on an idle core: a job returns as soon as it sees its core taken by another thread
//!   ([`BUSY`]). A busy machine's cores never halt, so there is nothing to save there, and a
//!   spinner that has used its share of the core waits behind other runnable threads when the
//!   next call needs it, where a sleeping thread would be run at once.
//! * Never inside another call: a call leaves jobs only when no other call of the tokenizer is
//!   in flight (threads of the caller's program may share one tokenizer), since a thread of the
//!   pool waiting inside a call may run any queued job, and one that lingers there would hold
//!   that call up. `seen` is read before the in-flight count drops, and a call counts itself in
//!   flight before it bumps `calls`: if `seen` includes a later call's bump, that call is counted
//!   in flight and nothing is left; if it does not, the jobs left return at their first look.
//! * Only calls that used the pool leave jobs: texts encoded on the calling thread (short
//!   prompts, one-thread tokenizers) bump nothing and leave nothing, and neither does a call
//!   made on one of the pool's own threads (a batch's texts), where the jobs would queue behind
//!   the batch's work.
//! * The tokens are not touched: lingering only changes when threads run.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::trace::LingerEnd;

/// Spins between two looks at the clock (and yields of the core): `spin_loop` takes some tens
/// of nanoseconds, so a lingering thread yields and reads the clock every few microseconds.
const SPINS_PER_CHECK: u32 = 64;

/// A gap this long between two looks at the clock means the core went to another thread (the
/// yield ran one, or the thread was preempted): the machine is busy, its cores do not idle, so
/// nothing is gained by lingering, and a thread that spins is a worse candidate for the next
/// call than a sleeping one (the scheduler runs a woken sleeper at once, while a spinner that has
/// used its share waits for its turn behind the other runnable threads). The job returns.
const BUSY: Duration = Duration::from_micros(50);

/// A tokenizer's linger: how long its pool's threads stay awake after a parallel call.
#[derive(Debug)]
pub(crate) struct Linger {
    /// Zero: off.
    time: Duration,
    /// Parallel calls started so far: a lingering job returns when it moves.
    calls: AtomicU64,
    /// Parallel calls in flight.
    active: AtomicU64,
}

impl Linger {
    pub(crate) fn new(time: Duration) -> Arc<Self> {
        Arc::new(Linger { time, calls: AtomicU64::new(0), active: AtomicU64::new(0) })
    }

    /// Marks the start of a parallel call on `pool` (before any work is handed to it): the
    /// lingering jobs return so their threads take the call's work. The returned guard leaves
    /// the next jobs when the call needs the pool no more ([`Awake::leave`], or its drop).
    pub(crate) fn call<'a>(self: &'a Arc<Self>, pool: &'a rayon::ThreadPool) -> Awake<'a> {
        if self.time.is_zero() || pool.current_thread_index().is_some() {
            return Awake { on: None, left: AtomicBool::new(true) };
        }
        self.active.fetch_add(1, Ordering::SeqCst);
        self.calls.fetch_add(1, Ordering::SeqCst);
        Awake { on: Some((self, pool)), left: AtomicBool::new(false) }
    }

    /// Spins until the next call starts (`calls` moves from `seen`), `until`, or the core is
    /// seen busy with other work ([`BUSY`]).
    fn wait(&self, seen: u64, until: Instant) {
        let mut last = Instant::now();
        loop {
            for _ in 0..SPINS_PER_CHECK {
                if self.calls.load(Ordering::Relaxed) != seen {
                    crate::trace::linger_end(LingerEnd::NextCall);
                    return;
                }
                std::hint::spin_loop();
            }
            let now = Instant::now();
            if now >= until || now.duration_since(last) > BUSY {
                crate::trace::linger_end(if now >= until { LingerEnd::Deadline } else { LingerEnd::BusyCore });
                return;
            }
            last = now;
            // Another runnable thread on this core (the caller between two calls, another
            // process) runs first: a lingering thread only fills time the core would idle.
            std::thread::yield_now();
        }
    }
}

/// A parallel call in progress. [`leave`](Self::leave), called on a pool thread once the call
/// needs the pool no more, leaves one lingering job per pool thread but one, unless another call
/// is in flight; there the jobs go to that thread's own queue, so leaving costs the caller
/// nothing (from the calling thread, the spawn's wake-up of a pool thread would be on the
/// call's path). When the guard is dropped without it (a call that finishes on the calling
/// thread with the pool's help, or one that failed), the drop leaves them.
pub(crate) struct Awake<'a> {
    on: Option<(&'a Arc<Linger>, &'a rayon::ThreadPool)>,
    left: AtomicBool,
}

impl Awake<'_> {
    /// The call needs the pool's threads no more: leaves the lingering jobs (once).
    pub(crate) fn leave(&self) {
        let Some((linger, pool)) = self.on else { return };
        if self.left.swap(true, Ordering::SeqCst) {
            return;
        }
        let seen = linger.calls.load(Ordering::SeqCst);
        if linger.active.fetch_sub(1, Ordering::SeqCst) != 1 {
            return;
        }
        let until = Instant::now() + linger.time;
        for _ in 1..pool.current_num_threads() {
            let linger = Arc::clone(linger);
            pool.spawn(move || linger.wait(seen, until));
        }
    }
}

impl Drop for Awake<'_> {
    fn drop(&mut self) {
        self.leave();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap()
    }

    #[test]
    fn a_lingering_job_returns_at_its_deadline() {
        let linger = Linger::new(Duration::from_millis(5));
        let start = Instant::now();
        // By its deadline, or sooner on a busy machine.
        linger.wait(0, start + Duration::from_millis(5));
        assert!(start.elapsed() < Duration::from_secs(60));
    }

    #[test]
    fn a_lingering_job_returns_when_the_next_call_starts() {
        let linger = Linger::new(Duration::from_secs(3600));
        let pool = pool(2);
        drop(linger.call(&pool));
        // The job left for the second thread would spin for an hour: the next call stops it,
        // and both threads take the call's work.
        let start = Instant::now();
        let awake = linger.call(&pool);
        let sum: u64 = pool.install(|| rayon::join(|| 1, || 2)).0 + 2;
        drop(awake);
        assert_eq!(sum, 3);
        assert!(start.elapsed() < Duration::from_secs(60));
        // The last call's job: stopped by a call that bumps the count.
        linger.calls.fetch_add(1, Ordering::SeqCst);
    }

    #[test]
    fn off_and_on_the_pool_nothing_is_left() {
        let off = Linger::new(Duration::ZERO);
        let pool = pool(2);
        drop(off.call(&pool));
        assert_eq!(off.calls.load(Ordering::SeqCst), 0);
        let on = Linger::new(Duration::from_secs(3600));
        pool.install(|| drop(on.call(&pool)));
        assert_eq!(on.calls.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_call_leaves_from_a_pool_thread_once() {
        let linger = Linger::new(Duration::from_secs(3600));
        let pool = pool(2);
        let awake = linger.call(&pool);
        pool.install(|| awake.leave());
        assert_eq!(linger.active.load(Ordering::SeqCst), 0);
        // The drop leaves nothing more (else the count would wrap).
        drop(awake);
        assert_eq!(linger.active.load(Ordering::SeqCst), 0);
        linger.calls.fetch_add(1, Ordering::SeqCst);
    }

    #[test]
    fn a_call_that_ends_inside_another_leaves_nothing() {
        let linger = Linger::new(Duration::from_secs(3600));
        let pool = pool(2);
        let outer = linger.call(&pool);
        // Left now, a job would spin for an hour in the pool while the outer call runs.
        drop(linger.call(&pool));
        let start = Instant::now();
        assert_eq!(pool.install(|| rayon::join(|| 1, || 2)), (1, 2));
        assert!(start.elapsed() < Duration::from_secs(60));
        assert_eq!(linger.active.load(Ordering::SeqCst), 1);
        drop(outer);
        assert_eq!(linger.active.load(Ordering::SeqCst), 0);
        linger.calls.fetch_add(1, Ordering::SeqCst);
    }
}
