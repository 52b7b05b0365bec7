//! Credentials the kernel vouches for: the peer of a Unix socket (`SO_PEERCRED`), user and group
//! names (NSS, `getpwuid_r`/`getgrgid_r`), a process's groups and a thread's owner from procfs.
//! `pacer daemon` authenticates its clients with them.

use std::ffi::CStr;
use std::os::fd::RawFd;

/// The credentials of a connected process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
}

impl Peer {
    /// This process, as a peer of itself (the client library's in-process service).
    pub fn this_process() -> Peer {
        // SAFETY: getuid/getgid have no preconditions and cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        Peer {
            pid: std::process::id(),
            uid,
            gid,
        }
    }
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
pub fn owner_of(tid: u32) -> Option<(u32, u32)> {
    let s = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let field = |name: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u32>().ok())
    };
    Some((field("Tgid:")?, field("Uid:")?))
}

/// Whether this process may make its threads SCHED_FIFO at `priority`: what
/// [`may_set_deadline`] allows, or an `RLIMIT_RTPRIO` soft limit of at least `priority`
/// (`sched_setscheduler(2)`: unprivileged threads may use real-time priorities up to it).
pub fn may_set_fifo(priority: u8) -> bool {
    if may_set_deadline() {
        return true;
    }
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a live rlimit the kernel fills.
    unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut r) == 0 && r.rlim_cur >= u64::from(priority) }
}

/// Whether this process may put threads under SCHED_DEADLINE itself: effective uid 0 or
/// `CAP_SYS_NICE` in its effective capabilities (`CapEff` in `/proc/self/status`).
pub fn may_set_deadline() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    const CAP_SYS_NICE: u32 = 23;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << CAP_SYS_NICE) != 0)
}
