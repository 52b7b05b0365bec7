//! Termination signals as events a control loop can poll, instead of handlers that run at any
//! point of the loop: `pacer exec`/`attach` must finish the tick it is in, then restore every
//! thread, whatever arrives (signalfd(2), sigprocmask(2)).
//!
//! The signals are blocked in the calling thread (and so in threads it creates later), and read
//! from a signalfd. A child started with [`spawn_unblocked`] gets the default mask back before
//! `exec`, because a blocked mask survives `exec` and would make the program deaf to Ctrl-C.
//!
//! Commands that do not poll signals get the opposite service from [`remove_on_termination`]:
//! the signal still kills them, but the temporary files they registered go first.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::{Mutex, Once, TryLockError};

use crate::sched::LinuxError;

/// SIGTERM, for callers that hold no libc binding of their own.
pub const SIGTERM: i32 = libc::SIGTERM;

/// The signals that end a control session.
pub const TERMINATING: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

fn sigset(sigs: &[i32]) -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the set it is given; sigaddset only sets bits in it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in sigs {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// While alive, the [`TERMINATING`] signals are blocked in the calling thread (and in threads it
/// creates): one that arrives meanwhile stays pending and takes effect when the guard drops, after
/// the clean-up the guard was taken for (a command holding kernel state that a signal's default
/// action would leave behind, such as `pacer run --trace`'s tracefs instance). Signals read from
/// a [`SignalFd`] meanwhile (the run's) are consumed there and do not come back.
#[derive(Debug)]
pub struct DeferTermination {
    old: libc::sigset_t,
}

impl DeferTermination {
    /// Blocks the signals; take it in the main thread before creating threads.
    pub fn new() -> Result<DeferTermination, LinuxError> {
        let set = sigset(&TERMINATING);
        // SAFETY: an all-zero sigset is valid storage for the old mask; `set` is initialised.
        let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: both pointers are valid for the call.
        let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) };
        if r != 0 {
            return Err(LinuxError::Syscall {
                op: "pthread_sigmask",
                target: 0,
                source: io::Error::from_raw_os_error(r),
            });
        }
        Ok(DeferTermination { old })
    }
}

impl Drop for DeferTermination {
    fn drop(&mut self) {
        // SAFETY: `old` is the mask pthread_sigmask returned; the kernel only reads it.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut()) };
    }
}

/// A signalfd receiving a set of blocked signals.
#[derive(Debug)]
pub struct SignalFd {
    fd: OwnedFd,
}

impl SignalFd {
    /// Blocks `sigs` in the calling thread and opens a non-blocking signalfd for them. Call it
    /// before creating threads, so none of them inherits an unblocked mask.
    pub fn new(sigs: &[i32]) -> Result<SignalFd, LinuxError> {
        let set = sigset(sigs);
        // SAFETY: `set` is an initialised sigset; the old mask is not needed (NULL).
        let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        if r != 0 {
            return Err(LinuxError::Syscall {
                op: "pthread_sigmask",
                target: 0,
                source: io::Error::from_raw_os_error(r),
            });
        }
        // SAFETY: -1 asks for a new descriptor; `set` is a valid sigset.
        let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) };
        if fd < 0 {
            return Err(LinuxError::syscall("signalfd", 0));
        }
        // SAFETY: the kernel just returned this descriptor to us.
        Ok(SignalFd {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// The next pending signal, if any (never blocks).
    pub fn next(&self) -> Option<i32> {
        // SAFETY: zeroed is a valid signalfd_siginfo (plain integers).
        let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: we read at most `size` bytes into `info`, which is that large and writable.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&mut info as *mut libc::signalfd_siginfo).cast(),
                size,
            )
        };
        (n == size as isize).then_some(info.ssi_signo as i32)
    }
}

impl AsRawFd for SignalFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Spawns `cmd` with [`TERMINATING`] unblocked in the child, so it reacts to Ctrl-C and SIGTERM
/// like a program started from a shell.
pub fn spawn_unblocked(cmd: &mut Command) -> io::Result<Child> {
    let set = sigset(&TERMINATING);
    // SAFETY: the closure runs between fork and exec and only calls pthread_sigmask, which is
    // async-signal-safe and touches no memory but the set captured by value.
    unsafe {
        cmd.pre_exec(move || {
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            Ok(())
        });
    }
    cmd.spawn()
}

/// Paths to remove if a termination signal kills the process: `(path, is a directory)`.
static DOOMED: Mutex<Vec<(CString, bool)>> = Mutex::new(Vec::new());
static CLEANUP_HANDLER: Once = Once::new();

/// Removes `path` (unlink, or rmdir when `dir`) if SIGINT, SIGTERM or SIGHUP kills the process
/// before [`keep_on_termination`] is called for it, so that an interrupted command leaves none of
/// its temporary files behind. The signal keeps its effect: after the clean-up the process dies
/// of it as it would have without the handler.
///
/// The handler is installed on first use, and only over the default action: a signal the
/// process ignores (`nohup`) or handles otherwise is left alone, and signals blocked and read
/// from a [`SignalFd`] (`pacer run`, `pacer exec`) never reach it. Paths are removed newest
/// first, so files go before the directories registered before them.
pub fn remove_on_termination(path: &Path, dir: bool) {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return;
    };
    CLEANUP_HANDLER.call_once(install_cleanup_handler);
    doomed().push((c, dir));
}

/// Forgets a path given to [`remove_on_termination`] (it was renamed into place or removed).
pub fn keep_on_termination(path: &Path) {
    let bytes = path.as_os_str().as_bytes();
    let mut list = doomed();
    if let Some(i) = list.iter().rposition(|(p, _)| p.as_bytes() == bytes) {
        list.remove(i);
    }
}

fn doomed() -> std::sync::MutexGuard<'static, Vec<(CString, bool)>> {
    DOOMED.lock().unwrap_or_else(|p| p.into_inner())
}

fn install_cleanup_handler() {
    for sig in TERMINATING {
        // SAFETY: sigaction with a NULL new action only reads the current one into `old`, and
        // the handler installed is async-signal-safe (see `remove_doomed`).
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 || old.sa_sigaction != libc::SIG_DFL {
                continue;
            }
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = remove_doomed as extern "C" fn(libc::c_int) as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

extern "C" fn remove_doomed(sig: libc::c_int) {
    // try_lock, never lock: the interrupted thread may hold the list (then nothing is removed,
    // rather than a deadlock). Reading the list, unlink, rmdir and raise allocate nothing and
    // are async-signal-safe.
    let list = match DOOMED.try_lock() {
        Ok(l) => Some(l),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    };
    if let Some(list) = list {
        for (path, dir) in list.iter().rev() {
            // SAFETY: `path` is a live NUL-terminated string.
            unsafe {
                if *dir {
                    libc::rmdir(path.as_ptr());
                } else {
                    libc::unlink(path.as_ptr());
                }
            }
        }
    }
    // SA_RESETHAND put the default action back; the signal is blocked while this handler runs,
    // so the process dies of it as soon as the handler returns.
    // SAFETY: raise is async-signal-safe.
    unsafe {
        libc::raise(sig);
    }
}

/// Waits until one of `fds` is readable or `timeout_ns` passes; returns which are readable.
/// An interrupted wait returns early with nothing readable.
pub fn wait_readable(fds: &[RawFd], timeout_ns: u64) -> Result<Vec<bool>, LinuxError> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = timeout_ns.div_ceil(1_000_000).min(i32::MAX as u64) as i32;
    // SAFETY: `pfds` is a live, writable array of `pfds.len()` pollfds.
    let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; fds.len()]);
        }
        return Err(LinuxError::Syscall {
            op: "poll",
            target: 0,
            source: e,
        });
    }
    Ok(pfds
        .iter()
        .map(|p| p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_signal_arrives_on_the_fd() {
        // SIGUSR2 is not used elsewhere in this test binary; block it only in this thread.
        let h = std::thread::spawn(|| {
            let sfd = SignalFd::new(&[libc::SIGUSR2]).unwrap();
            assert_eq!(sfd.next(), None);
            // SAFETY: sends a signal to this thread only.
            unsafe {
                libc::syscall(
                    libc::SYS_tgkill,
                    libc::getpid(),
                    libc::syscall(libc::SYS_gettid),
                    libc::SIGUSR2,
                );
            }
            let ready = wait_readable(&[sfd.as_raw_fd()], 1_000_000_000).unwrap();
            assert_eq!(ready, vec![true]);
            assert_eq!(sfd.next(), Some(libc::SIGUSR2));
            assert_eq!(sfd.next(), None);
        });
        h.join().unwrap();
    }

    #[test]
    fn wait_times_out() {
        let sfd = std::thread::spawn(|| SignalFd::new(&[libc::SIGUSR1]).unwrap())
            .join()
            .unwrap();
        let t = std::time::Instant::now();
        assert_eq!(
            wait_readable(&[sfd.as_raw_fd()], 20_000_000).unwrap(),
            vec![false]
        );
        assert!(t.elapsed() >= std::time::Duration::from_millis(19));
    }
}
