//! Who is on the other end of a connection, and whether a thread it names is its own.
//!
//! The kernel vouches for the peer: `SO_PEERCRED` gives the process, user and group that
//! connected. A thread is pinned by a pidfd opened with `PIDFD_THREAD` (Linux ≥ 6.9) *before*
//! its owner is checked, so a TID recycled between the check and later use is noticed (the
//! pidfd then polls readable) instead of a stranger's thread being changed.

use pacer_linux::cred::owner_of;
pub use pacer_linux::cred::{group_name, groups_of, peer_cred, user_name, Peer};
use pacer_linux::procfs::Pidfd;

use crate::protocol::{ErrorCode, WireError};

/// A thread pinned by a pidfd: it polls readable once the thread has exited.
#[derive(Debug)]
pub struct ThreadHandle {
    pub tid: u32,
    /// The thread's process.
    pub pid: u32,
    fd: Pidfd,
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

    /// Pins `tid` with a thread pidfd.
    fn pin(tid: u32) -> Result<ThreadHandle, WireError> {
        if tid == 0 || libc::pid_t::try_from(tid).is_err() {
            return Err(WireError::new(
                ErrorCode::Invalid,
                format!("thread id {tid} is out of range"),
            ));
        }
        let fd = Pidfd::open_thread(tid).map_err(|e| match e.errno() {
            Some(libc::ESRCH) => WireError::new(ErrorCode::NoSuchThread, format!("no thread {tid}")),
            Some(libc::EINVAL) => WireError::new(
                ErrorCode::Unsupported,
                format!("thread {tid}: {e} (thread pidfds need Linux ≥ 6.9)"),
            ),
            _ => WireError::new(ErrorCode::Kernel, format!("thread {tid}: {e}")),
        })?;
        Ok(ThreadHandle { tid, pid: 0, fd })
    }

    /// A thread of this very process (the in-process service of the client library): any of
    /// them but the calling (service) thread.
    pub fn open_own(tid: u32) -> Result<ThreadHandle, WireError> {
        let me = Peer::this_process();
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
        self.fd.is_alive().unwrap_or(false)
    }

    /// Opens thread `tid` of process `pid`, which [`may_attach`] allowed: pinned first, then
    /// checked to still be that process's.
    pub fn open_in(pid: u32, tid: u32) -> Result<ThreadHandle, WireError> {
        let h = Self::pin(tid)?;
        match owner_of(tid) {
            Some((owner, _)) if owner == pid && h.alive() => Ok(ThreadHandle { pid, ..h }),
            _ => Err(WireError::new(
                ErrorCode::NoSuchThread,
                format!("thread {tid} is no longer a thread of process {pid}"),
            )),
        }
    }
}

/// Whether `peer` may have the daemon run LFS++ on process `pid` ([`crate::protocol::Request::Attach`]):
/// root may, for any user process; another user for its own child (what `pacer exec --daemon`
/// starts), or for any process of its user when `same_uid`. The daemon, PID 1 and kernel
/// threads are never taken.
pub fn may_attach(pid: u32, peer: &Peer, same_uid: bool) -> Result<(), WireError> {
    pacer_linux::control::check_target(pid)
        .map_err(|e| WireError::new(ErrorCode::NotYours, e.to_string()))?;
    let (_, uid) =
        owner_of(pid).ok_or_else(|| WireError::new(ErrorCode::NoSuchThread, format!("no process {pid}")))?;
    let child = pacer_linux::procfs::parent_of(pid) == Some(peer.pid);
    if peer.uid == 0 || (uid == peer.uid && (child || same_uid)) {
        return Ok(());
    }
    let why = if uid != peer.uid {
        format!("it belongs to uid {uid}, not to uid {}", peer.uid)
    } else {
        format!(
            "it is not a child of the connected process {} (the configuration does not allow other processes of the same user)",
            peer.pid
        )
    };
    Err(WireError::new(
        ErrorCode::NotYours,
        format!("process {pid}: {why}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_threads_are_ours_and_strangers_are_not() {
        let me = Peer::this_process();
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

    /// Who may have a process attached: its parent, another process of its user only with
    /// `same_uid`, never a process of another user; never init or the daemon itself.
    #[test]
    fn a_user_may_attach_to_its_own_child() {
        let me = Peer::this_process();
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let (_, uid) = owner_of(child.id()).expect("the child's owner");
        let parent = Peer {
            pid: me.pid,
            uid: if uid == 0 { 12345 } else { uid },
            gid: me.gid,
        };
        if uid != 0 {
            assert!(may_attach(child.id(), &parent, false).is_ok());
            let cousin = Peer {
                pid: 1,
                ..parent.clone()
            };
            let e = may_attach(child.id(), &cousin, false).unwrap_err();
            assert_eq!(e.code, ErrorCode::NotYours, "{e}");
            assert!(e.message.contains("not a child"), "{e}");
            assert!(may_attach(child.id(), &cousin, true).is_ok());
        }
        let stranger = Peer {
            uid: uid.wrapping_add(1).max(1),
            ..parent.clone()
        };
        let e = may_attach(child.id(), &stranger, true).unwrap_err();
        assert_eq!(e.code, ErrorCode::NotYours, "{e}");
        let root = Peer { uid: 0, ..stranger };
        assert!(may_attach(child.id(), &root, false).is_ok());
        for never in [1, me.pid] {
            let e = may_attach(never, &root, true).unwrap_err();
            assert_eq!(e.code, ErrorCode::NotYours, "{never}: {e}");
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
