//! The two kernel objects the runtime's channels (`pacer_runtime::channel`) rest on: a
//! priority-inheriting `pthread_mutex_t` for their short critical section, and a futex word on
//! which a receiver sleeps until an absolute CLOCK_MONOTONIC deadline. Here with pacer's other
//! system calls, so the channel itself has no `unsafe` and no libc.
//!
//! Why not a condition variable for the sleep: glibc's `pthread_cond_signal` takes the
//! condition's internal lock, which does not inherit priority; a high-priority sender could then
//! wait on a low-priority receiver preempted inside `pthread_cond_timedwait`'s bookkeeping. A
//! `FUTEX_WAKE` only takes the kernel's hash-bucket spinlock, so a send never sleeps on anything
//! but the PI mutex.

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// A failed call: which one, and its errno. Returned by value, without allocating, because the
/// callers are real-time threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OsError {
    /// The call, as written in C.
    pub call: &'static str,
    /// Its errno.
    pub errno: i32,
}

impl std::fmt::Display for OsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} failed: {}",
            self.call,
            std::io::Error::from_raw_os_error(self.errno)
        )
    }
}

impl std::error::Error for OsError {}

impl OsError {
    fn new(call: &'static str, errno: i32) -> OsError {
        OsError { call, errno }
    }

    /// From `errno`; `std::io::Error::last_os_error` reads it without allocating.
    fn last(call: &'static str) -> OsError {
        OsError {
            call,
            errno: std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        }
    }
}

/// A `pthread_mutex_t` with `PTHREAD_PRIO_INHERIT` guarding `S`: a thread that holds it runs at
/// least at the priority (or with the deadline) of the most urgent thread waiting for it, so the
/// wait of a high-priority thread is bounded by the critical section, not by whatever preempts a
/// low-priority holder.
pub struct PiMutex<S> {
    /// Boxed: POSIX forbids moving an initialised mutex, and the box keeps its address while the
    /// `PiMutex` itself moves into the channel's shared state.
    raw: Box<UnsafeCell<libc::pthread_mutex_t>>,
    data: UnsafeCell<S>,
}

// SAFETY: `data` is only reached through a `PiGuard`, which exists only while the pthread mutex
// is held, so at most one thread touches `S` at a time; the mutex itself is made for sharing.
unsafe impl<S: Send> Send for PiMutex<S> {}
// SAFETY: as above.
unsafe impl<S: Send> Sync for PiMutex<S> {}

impl<S> PiMutex<S> {
    pub fn new(data: S) -> Result<PiMutex<S>, OsError> {
        // SAFETY: an all-zero pthread_mutex_t is valid storage (glibc's PTHREAD_MUTEX_INITIALIZER);
        // it is initialised properly below, at the address it keeps.
        let raw = Box::new(UnsafeCell::new(unsafe {
            std::mem::zeroed::<libc::pthread_mutex_t>()
        }));
        // SAFETY: `attr` is initialised before use and destroyed on every path after it was
        // initialised; `raw` is live, boxed storage that no other thread can see yet.
        unsafe {
            let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
            let r = libc::pthread_mutexattr_init(&mut attr);
            if r != 0 {
                return Err(OsError::new("pthread_mutexattr_init", r));
            }
            let r = libc::pthread_mutexattr_setprotocol(&mut attr, libc::PTHREAD_PRIO_INHERIT);
            if r != 0 {
                libc::pthread_mutexattr_destroy(&mut attr);
                return Err(OsError::new(
                    "pthread_mutexattr_setprotocol(PTHREAD_PRIO_INHERIT)",
                    r,
                ));
            }
            let r = libc::pthread_mutex_init(raw.get(), &attr);
            libc::pthread_mutexattr_destroy(&mut attr);
            if r != 0 {
                return Err(OsError::new("pthread_mutex_init", r));
            }
        }
        Ok(PiMutex {
            raw,
            data: UnsafeCell::new(data),
        })
    }

    /// Blocks until the mutex is held. Fails only when the kernel refuses the PI lock (EDEADLK
    /// for a deadlock it detects along a PI chain, for example), never for an ordinary wait.
    pub fn lock(&self) -> Result<PiGuard<'_, S>, OsError> {
        // SAFETY: `raw` was initialised in `new` and stays at its address until `drop`.
        let r = unsafe { libc::pthread_mutex_lock(self.raw.get()) };
        if r != 0 {
            return Err(OsError::new("pthread_mutex_lock", r));
        }
        Ok(PiGuard {
            mutex: self,
            _not_send: PhantomData,
        })
    }
}

impl<S> Drop for PiMutex<S> {
    fn drop(&mut self) {
        // SAFETY: `&mut self` proves no guard is alive (a guard borrows the mutex), so the mutex
        // is unlocked and unused; EBUSY cannot happen and there is nothing to do about others.
        unsafe {
            libc::pthread_mutex_destroy(self.raw.get());
        }
    }
}

/// Proof that the calling thread holds the mutex. Not `Send`: a pthread mutex must be unlocked
/// by the thread that locked it (a PI mutex's owner is recorded in the futex word).
pub struct PiGuard<'a, S> {
    mutex: &'a PiMutex<S>,
    _not_send: PhantomData<*const ()>,
}

impl<S> Deref for PiGuard<'_, S> {
    type Target = S;
    fn deref(&self) -> &S {
        // SAFETY: the guard holds the mutex, so no other thread reaches `data` now.
        unsafe { &*self.mutex.data.get() }
    }
}

impl<S> DerefMut for PiGuard<'_, S> {
    fn deref_mut(&mut self) -> &mut S {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference through this guard.
        unsafe { &mut *self.mutex.data.get() }
    }
}

impl<S> Drop for PiGuard<'_, S> {
    fn drop(&mut self) {
        // SAFETY: this thread locked the mutex when it made the guard (the guard cannot change
        // threads), so unlocking is valid and cannot fail.
        unsafe {
            libc::pthread_mutex_unlock(self.mutex.raw.get());
        }
    }
}

/// CLOCK_MONOTONIC now: a vDSO call on Linux (no system call, no lock).
fn monotonic() -> Result<libc::timespec, OsError> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is valid for writes; CLOCK_MONOTONIC always exists on Linux.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) } != 0 {
        return Err(OsError::last("clock_gettime(CLOCK_MONOTONIC)"));
    }
    Ok(now)
}

/// CLOCK_MONOTONIC now plus `timeout`, saturating: an absolute deadline keeps the total wait at
/// `timeout` however often the receiver wakes without a message.
pub fn deadline_after(timeout: Duration) -> Result<libc::timespec, OsError> {
    let now = monotonic()?;
    // Both below 10⁹, so the sum fits any c_long.
    let mut tv_nsec = now.tv_nsec + timeout.subsec_nanos() as libc::c_long;
    let mut carry: libc::time_t = 0;
    if tv_nsec >= 1_000_000_000 {
        tv_nsec -= 1_000_000_000;
        carry = 1;
    }
    let secs = libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX);
    match now.tv_sec.checked_add(secs).and_then(|s| s.checked_add(carry)) {
        Some(tv_sec) => Ok(libc::timespec { tv_sec, tv_nsec }),
        None => Ok(libc::timespec {
            tv_sec: libc::time_t::MAX,
            tv_nsec: 999_999_999,
        }),
    }
}

/// How a futex wait ended.
pub enum Wait {
    /// Woken, interrupted, or the word had already moved on: look at the queue again.
    Again,
    /// The deadline passed.
    TimedOut,
}

/// Sleeps while `word` still holds `expected`, until `deadline` (absolute, CLOCK_MONOTONIC).
pub fn futex_wait(word: &AtomicU32, expected: u32, deadline: &libc::timespec) -> Result<Wait, OsError> {
    // SAFETY: `word` is a live, aligned u32 for the whole call (the caller borrows it from the
    // channel's `Arc`); `deadline` is a valid timespec. FUTEX_WAIT_BITSET takes an absolute
    // timeout on CLOCK_MONOTONIC (no FUTEX_CLOCK_REALTIME); uaddr2 is unused.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT_BITSET | libc::FUTEX_PRIVATE_FLAG,
            expected,
            deadline as *const libc::timespec,
            std::ptr::null::<u32>(),
            libc::FUTEX_BITSET_MATCH_ANY,
        )
    };
    if r == 0 {
        return Ok(Wait::Again);
    }
    let err = OsError::last("futex(FUTEX_WAIT_BITSET)");
    match err.errno {
        libc::EAGAIN | libc::EINTR => Ok(Wait::Again),
        libc::ETIMEDOUT => Ok(Wait::TimedOut),
        _ => Err(err),
    }
}

/// Wakes the (single) receiver sleeping on `word`, if any. It never blocks; a failure could only
/// come from a bad address, which `&AtomicU32` rules out, so the result is not looked at.
pub fn futex_wake(word: &AtomicU32) {
    // SAFETY: `word` is a live, aligned u32; FUTEX_WAKE reads no other argument past `val`.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        );
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// The protocol is really PTHREAD_PRIO_INHERIT: glibc takes a PI mutex by storing the
    /// owner's thread id in the futex word at the start of `pthread_mutex_t` (the kernel's
    /// FUTEX_LOCK_PI protocol), where a plain mutex stores 1.
    #[test]
    fn the_mutex_word_holds_the_owner_tid_as_pi_futexes_do() {
        let m = PiMutex::new(0u32).unwrap();
        let guard = m.lock().unwrap();
        // SAFETY: reads the first 4 bytes of a live, initialised pthread_mutex_t (at least 40
        // bytes on glibc) that this thread holds; nobody writes it meanwhile.
        let word = unsafe { std::ptr::read_volatile(m.raw.get() as *const u32) };
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        assert_eq!(word & 0x3fff_ffff, tid);
        drop(guard);
        // SAFETY: as above, now unlocked.
        let word = unsafe { std::ptr::read_volatile(m.raw.get() as *const u32) };
        assert_eq!(word, 0);
    }

    #[test]
    fn deadlines_carry_nanoseconds_and_saturate() {
        let d = deadline_after(Duration::new(1, 999_999_999)).unwrap();
        assert!((0..1_000_000_000).contains(&d.tv_nsec));
        let far = deadline_after(Duration::MAX).unwrap();
        assert_eq!(far.tv_sec, libc::time_t::MAX);
    }
}
