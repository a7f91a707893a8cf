//! Lowering a background thread's scheduling priority, for work (the BPE engine's background
//! seed) that should take a core only when no encode wants it.
//!
//! Invariants: only a thread lopt started for such work is ever lowered (checked by its name),
//! never a pool thread or a caller's; the priority is a hint, so where it cannot be set nothing
//! else changes (the work runs at normal priority, as before).

/// Sets the calling thread to the lowest priority (nice 19) when it is the thread named
/// `expected` and the system gives each thread its own priority (Linux); otherwise does nothing.
pub(crate) fn lower_this_thread(expected: &str) {
    if std::thread::current().name() != Some(expected) {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `setpriority` takes plain integers and reads or writes no memory of ours. On
        // Linux the nice value is per thread and `PRIO_PROCESS` with `who == 0` names the calling
        // thread alone (setpriority(2), "BUGS"), so no other thread of the process changes; the
        // name check above keeps this to lopt's own background thread. Raising the nice value
        // needs no privilege; a failure leaves the thread as it was, which is harmless.
        let _failed = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 19) } != 0;
    }
}
