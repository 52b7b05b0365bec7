//! The system calls the executor's timed threads make, wrapped once: clocks, sleeping, per-thread
//! counters, the thread name, and the "kick" that interrupts a sleeping thread when the run
//! stops. Everything here that runs inside a timed thread's loop allocates nothing and does no
//! I/O (the `/proc` reader is only used before and after the loop).

use std::io;

// CLOCK_MONOTONIC is the clock of every timestamp of a run, as in rt-app.
use crate::sys::clock_ns;
pub(crate) use crate::sys::monotonic_ns as now_ns;

/// CPU time of the calling thread, ns (CLOCK_THREAD_CPUTIME_ID).
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// (voluntary, involuntary) context switches of the calling thread so far
/// (`getrusage(RUSAGE_THREAD)`: `ru_nvcsw`, `ru_nivcsw`).
pub fn context_switches() -> (u64, u64) {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is live and writable; RUSAGE_THREAD reports the calling thread only.
    let r = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    if r != 0 {
        return (0, 0);
    }
    (ru.ru_nvcsw.max(0) as u64, ru.ru_nivcsw.max(0) as u64)
}

/// The CPU the calling thread runs on now (`sched_getcpu`, served from rseq/vDSO without a
/// system call on current kernels and glibc).
pub fn current_cpu() -> u32 {
    // SAFETY: no arguments, no memory touched.
    let c = unsafe { libc::sched_getcpu() };
    c.max(0) as u32
}

/// How a sleep ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slept {
    /// The time was reached.
    Done,
    /// A signal (the executor's kick, or a stray one) interrupted it.
    Interrupted,
}

fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000).min(libc::time_t::MAX as u64) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, abs_ns)`.
pub(crate) fn sleep_until(abs_ns: u64) -> Slept {
    if crate::sys::sleep_until_ns(abs_ns) {
        Slept::Done
    } else {
        Slept::Interrupted
    }
}

/// Relative `clock_nanosleep(CLOCK_MONOTONIC, 0, ns)`; on interruption `remaining` is set to what
/// was left.
pub(crate) fn sleep_for(ns: u64, remaining: &mut u64) -> Slept {
    let ts = timespec(ns);
    let mut rem = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is read, `rem` written by the kernel; both are live timespecs.
    let r = unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, 0, &ts, &mut rem) };
    if r == libc::EINTR {
        *remaining = (rem.tv_sec.max(0) as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(rem.tv_nsec.max(0) as u64);
        Slept::Interrupted
    } else {
        *remaining = 0;
        Slept::Done
    }
}

/// `sched_yield()`.
pub(crate) fn yield_now() {
    // SAFETY: no arguments, no memory touched.
    unsafe {
        libc::sched_yield();
    }
}

/// Names the calling thread (`prctl(PR_SET_NAME)`): the kernel keeps 15 bytes, so the name is cut
/// there, at a character boundary; NUL bytes (impossible in a C string) become `_`.
pub fn set_thread_name(name: &str) {
    let mut buf = [0u8; 16];
    let mut len = 0;
    for ch in name.chars() {
        let ch = if ch == '\0' { '_' } else { ch };
        let n = ch.len_utf8();
        if len + n > 15 {
            break;
        }
        ch.encode_utf8(&mut buf[len..len + n]);
        len += n;
    }
    // SAFETY: `buf` is a NUL-terminated buffer of 16 bytes, which PR_SET_NAME reads at most.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, buf.as_ptr() as libc::c_ulong, 0, 0, 0);
    }
}

/// The calling thread's migration count (`se.nr_migrations` in /proc/thread-self/sched), if the
/// kernel exposes it. Reads a file: only for use outside the timed loop.
pub(crate) fn thread_migrations() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/sched").ok()?;
    parse_sched_field(&text, "se.nr_migrations")
}

/// The value of `field` in the `key : value` lines of /proc/…/sched.
pub(crate) fn parse_sched_field(text: &str, field: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == field)
            .then(|| v.trim().parse::<u64>().ok())
            .flatten()
    })
}

/// The signal that interrupts a timed thread's sleep when the run stops: the first real-time
/// signal glibc leaves to applications, which nothing else in pacer uses.
pub(crate) fn kick_signal() -> i32 {
    libc::SIGRTMIN()
}

extern "C" fn on_kick(_: libc::c_int) {
    // Nothing to do: being delivered is the point, it makes clock_nanosleep return EINTR.
}

/// While alive, [`kick_signal`] runs a no-op handler (without SA_RESTART, so sleeps end with
/// EINTR); the previous disposition comes back on drop.
pub(crate) struct KickHandler {
    old: libc::sigaction,
}

impl KickHandler {
    pub(crate) fn install() -> io::Result<KickHandler> {
        // SAFETY: zeroed sigaction structs are valid; sigemptyset initialises the mask; the
        // handler is an extern "C" fn that touches nothing.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_kick as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = 0;
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(kick_signal(), &sa, &mut old) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(KickHandler { old })
        }
    }
}

impl Drop for KickHandler {
    fn drop(&mut self) {
        // SAFETY: restores the disposition saved by `install`.
        unsafe {
            libc::sigaction(kick_signal(), &self.old, std::ptr::null_mut());
        }
    }
}

/// Sends [`kick_signal`] to one thread of this process.
pub(crate) fn kick(thread: libc::pthread_t) {
    // SAFETY: `thread` comes from a JoinHandle that has not been joined, so it names a live (or
    // exited but unjoined, hence still valid) thread.
    unsafe {
        libc::pthread_kill(thread, kick_signal());
    }
}

/// The calling thread's signal mask.
pub(crate) fn signal_mask() -> libc::sigset_t {
    // SAFETY: an all-zero sigset is valid storage; with a NULL new set pthread_sigmask only
    // writes the current mask into it.
    unsafe {
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut old);
        old
    }
}

/// Sets the calling thread's signal mask.
pub(crate) fn set_signal_mask(mask: &libc::sigset_t) {
    // SAFETY: `mask` is a valid sigset the kernel only reads.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, mask, std::ptr::null_mut());
    }
}

/// Whether RLIMIT_NICE lets this process take nice value `nice` without CAP_SYS_NICE (the
/// kernel's `can_nice()`: 20 − nice ≤ the soft limit), which is also what lets a thread leave
/// SCHED_IDLE for that nice value.
pub(crate) fn rlimit_allows_nice(nice: i32) -> bool {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a live rlimit the kernel writes.
    if unsafe { libc::getrlimit(libc::RLIMIT_NICE, &mut r) } != 0 {
        return false;
    }
    let needed = (20 - i64::from(nice)).max(0) as u64;
    r.rlim_cur == libc::RLIM_INFINITY || needed <= r.rlim_cur
}

/// `mlockall(MCL_CURRENT | MCL_FUTURE)`: keeps page faults out of the timed threads (rt-app's
/// `lock_pages`, on by default).
pub fn lock_memory() -> io::Result<()> {
    // SAFETY: plain flags, no memory passed.
    let r = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `munlockall()`.
pub fn unlock_memory() {
    // SAFETY: no arguments.
    unsafe {
        libc::munlockall();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn clocks_advance_and_sleeps_end() {
        let t0 = now_ns();
        let c0 = thread_cpu_ns();
        assert_eq!(sleep_until(t0 + 2_000_000), Slept::Done);
        let t1 = now_ns();
        assert!(t1 >= t0 + 2_000_000, "slept until the absolute time");
        let mut rem = 7;
        assert_eq!(sleep_for(1_000_000, &mut rem), Slept::Done);
        assert_eq!(rem, 0);
        assert!(now_ns() >= t1 + 1_000_000);
        // Sleeping costs almost no CPU time.
        assert!(thread_cpu_ns() - c0 < 2_000_000);
        // A past absolute time returns at once.
        assert_eq!(sleep_until(t0), Slept::Done);
    }

    #[test]
    fn names_are_cut_at_15_bytes_on_a_char_boundary() {
        let h = std::thread::spawn(|| {
            set_thread_name("ééééééééé-long-name");
            std::fs::read_to_string("/proc/thread-self/comm").unwrap()
        });
        // 7 two-byte characters fit in 15 bytes, the 8th would not.
        assert_eq!(h.join().unwrap().trim_end(), "ééééééé");
        let h = std::thread::spawn(|| {
            set_thread_name("a\0b");
            std::fs::read_to_string("/proc/thread-self/comm").unwrap()
        });
        assert_eq!(h.join().unwrap().trim_end(), "a_b");
    }

    #[test]
    fn sched_fields_parse() {
        let text = "x (1, #threads: 1)\n---\nse.nr_migrations   :   42\nnr_switches : 7\n";
        assert_eq!(parse_sched_field(text, "se.nr_migrations"), Some(42));
        assert_eq!(parse_sched_field(text, "nr_switches"), Some(7));
        assert_eq!(parse_sched_field(text, "missing"), None);
    }

    /// Tests that install the kick handler (directly or through `run::run`) take this first: the
    /// disposition is process-wide, and one restored under another's feet would let a kick
    /// terminate the test process.
    pub(crate) static KICK: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn a_kick_interrupts_a_sleep() {
        let _g = KICK.lock().unwrap_or_else(|p| p.into_inner());
        let _h = KickHandler::install().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            tx.send(()).unwrap();
            let start = now_ns();
            let r = sleep_until(start + 5_000_000_000);
            (r, now_ns() - start)
        });
        rx.recv().unwrap();
        use std::os::unix::thread::JoinHandleExt;
        // Kick until the thread is seen asleep and wakes (it may not have entered the sleep yet).
        let pt = t.as_pthread_t();
        while !t.is_finished() {
            kick(pt);
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let (r, took) = t.join().unwrap();
        assert_eq!(r, Slept::Interrupted);
        assert!(took < 1_000_000_000, "{took}");
    }
}
