//! Who is on the other end of a connection, and whether a thread it names is its own.
//!
//! The kernel vouches for the peer: `SO_PEERCRED` gives the process, user and group that
//! connected. A thread is pinned by a pidfd opened with `PIDFD_THREAD` (Linux ≥ 6.9) *before*
//! its owner is checked, so a TID recycled between the check and later use is noticed (the
//! pidfd then polls readable) instead of a stranger's thread being changed.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::protocol::{ErrorCode, WireError};

/// The credentials of a connected process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
}

/// `getsockopt(SO_PEERCRED)` of a connected Unix socket.
pub fn peer_cred(fd: RawFd) -> std::io::Result<Peer> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given; the kernel writes at most
    // `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Peer {
        pid: cred.pid as u32,
        uid: cred.uid,
        gid: cred.gid,
    })
}

/// A user's name, if the system knows it.
pub fn user_name(uid: u32) -> Option<String> {
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 4096];
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the size given; getpwuid_r writes only into them.
    let r = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut out) };
    if r != 0 || out.is_null() {
        return None;
    }
    // SAFETY: on success pw_name points to a NUL-terminated string inside `buf`.
    Some(
        unsafe { CStr::from_ptr(pwd.pw_name) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// A group's name, if the system knows it.
pub fn group_name(gid: u32) -> Option<String> {
    let mut grp: libc::group = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16384];
    let mut out: *mut libc::group = std::ptr::null_mut();
    // SAFETY: as in `user_name`.
    let r = unsafe { libc::getgrgid_r(gid, &mut grp, buf.as_mut_ptr(), buf.len(), &mut out) };
    if r != 0 || out.is_null() {
        return None;
    }
    // SAFETY: on success gr_name points to a NUL-terminated string inside `buf`.
    Some(
        unsafe { CStr::from_ptr(grp.gr_name) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// A process's groups (primary and supplementary) from `/proc/PID/status`, with their names.
pub fn groups_of(pid: u32, primary: u32) -> Vec<(u32, Option<String>)> {
    let mut gids = vec![primary];
    if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
        if let Some(line) = s.lines().find_map(|l| l.strip_prefix("Groups:")) {
            gids.extend(line.split_whitespace().filter_map(|g| g.parse::<u32>().ok()));
        }
    }
    gids.sort_unstable();
    gids.dedup();
    gids.into_iter().map(|g| (g, group_name(g))).collect()
}

/// `Tgid` and real `Uid` of a thread from `/proc/TID/status`.
fn owner_of(tid: u32) -> Option<(u32, u32)> {
    let s = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let field = |name: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u32>().ok())
    };
    Some((field("Tgid:")?, field("Uid:")?))
}

const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;

/// A thread pinned by a pidfd: it polls readable once the thread has exited.
#[derive(Debug)]
pub struct ThreadHandle {
    pub tid: u32,
    /// The thread's process.
    pub pid: u32,
    fd: OwnedFd,
}

impl ThreadHandle {
    /// Opens `tid` and checks that `peer` may name it: a thread of the peer's own process, or,
    /// when `same_uid`, of any process of the peer's user; root may name any user thread. Kernel
    /// threads, PID 1 and the daemon itself are never taken.
    pub fn open_for(tid: u32, peer: &Peer, same_uid: bool) -> Result<ThreadHandle, WireError> {
        let h = Self::pin(tid)?;
        let (pid, uid) = owner_of(tid)
            .ok_or_else(|| WireError::new(ErrorCode::NoSuchThread, format!("no thread {tid}")))?;
        // Read after the pidfd was opened: if it is still alive now, the owner read is the pinned
        // thread's.
        if !h.alive() {
            return Err(WireError::new(
                ErrorCode::NoSuchThread,
                format!("thread {tid} exited"),
            ));
        }
        if pid == std::process::id() || pid == 1 || pacer_linux::procfs::is_kernel_thread(pid) == Some(true) {
            return Err(WireError::new(
                ErrorCode::NotYours,
                format!("thread {tid} (process {pid}) is the daemon, init or a kernel thread: never taken"),
            ));
        }
        let allowed = pid == peer.pid || peer.uid == 0 || (same_uid && uid == peer.uid);
        if !allowed {
            let why = if same_uid {
                format!(
                    "it belongs to process {pid} of uid {uid}, not to uid {}",
                    peer.uid
                )
            } else {
                format!(
                    "it belongs to process {pid}, not to the connected process {} (the configuration does not allow other processes of the same user)",
                    peer.pid
                )
            };
            return Err(WireError::new(
                ErrorCode::NotYours,
                format!("thread {tid}: {why}"),
            ));
        }
        Ok(ThreadHandle { pid, ..h })
    }

    /// `pidfd_open(tid, PIDFD_THREAD)`.
    fn pin(tid: u32) -> Result<ThreadHandle, WireError> {
        let raw = libc::pid_t::try_from(tid)
            .ok()
            .filter(|t| *t > 0)
            .ok_or_else(|| WireError::new(ErrorCode::Invalid, format!("thread id {tid} is out of range")))?;
        // SAFETY: pidfd_open takes integers by value and touches no memory of ours.
        let r = unsafe { libc::syscall(libc::SYS_pidfd_open, raw, PIDFD_THREAD) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ESRCH) => WireError::new(ErrorCode::NoSuchThread, format!("no thread {tid}")),
                Some(libc::EINVAL) => WireError::new(
                    ErrorCode::Unsupported,
                    format!("pidfd_open(PIDFD_THREAD) for thread {tid}: {e} (needs Linux ≥ 6.9)"),
                ),
                _ => WireError::new(ErrorCode::Kernel, format!("pidfd_open({tid}): {e}")),
            });
        }
        // SAFETY: the kernel just returned this descriptor; nobody else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(r as RawFd) };
        Ok(ThreadHandle { tid, pid: 0, fd })
    }

    /// A thread of this very process (the in-process service of the client library): any of
    /// them but the calling (service) thread.
    pub fn open_own(tid: u32) -> Result<ThreadHandle, WireError> {
        let me = Peer {
            pid: std::process::id(),
            // SAFETY: getuid/getgid cannot fail.
            uid: unsafe { libc::getuid() },
            gid: unsafe { libc::getgid() },
        };
        if tid == pacer_linux::sched::gettid() {
            return Err(WireError::new(
                ErrorCode::NotYours,
                format!("thread {tid} is pacer's own service thread"),
            ));
        }
        let h = Self::pin(tid)?;
        match owner_of(tid) {
            Some((pid, _)) if pid == me.pid && h.alive() => Ok(ThreadHandle { pid, ..h }),
            Some((pid, _)) if h.alive() => Err(WireError::new(
                ErrorCode::NotYours,
                format!("thread {tid} belongs to process {pid}, not to this process (in-process mode takes only its own threads)"),
            )),
            _ => Err(WireError::new(ErrorCode::NoSuchThread, format!("no thread {tid}"))),
        }
    }

    /// Whether the thread still runs.
    pub fn alive(&self) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, timeout 0.
        let r = unsafe { libc::poll(&mut pfd, 1, 0) };
        r == 0
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_threads_are_ours_and_strangers_are_not() {
        let me = Peer {
            pid: std::process::id(),
            uid: unsafe { libc::getuid() },
            gid: unsafe { libc::getgid() },
        };
        // The daemon never takes its own threads, even for itself.
        let tid = pacer_linux::sched::gettid();
        let e = ThreadHandle::open_for(tid, &me, false).unwrap_err();
        assert_eq!(e.code, ErrorCode::NotYours);
        let e = ThreadHandle::open_for(0, &me, false).unwrap_err();
        assert_eq!(e.code, ErrorCode::Invalid);
        let e = ThreadHandle::open_for(u32::MAX, &me, false).unwrap_err();
        assert_eq!(e.code, ErrorCode::Invalid);
        // A child process is not the peer's, for a non-root peer without same_uid.
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let stranger = Peer {
            pid: me.pid,
            uid: 12345,
            gid: 12345,
        };
        let e = ThreadHandle::open_for(child.id(), &stranger, false).unwrap_err();
        assert_eq!(e.code, ErrorCode::NotYours, "{e}");
        let peer = Peer {
            pid: child.id(),
            ..stranger.clone()
        };
        let h = ThreadHandle::open_for(child.id(), &peer, false).unwrap();
        assert!(h.alive());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!h.alive());
    }
}
