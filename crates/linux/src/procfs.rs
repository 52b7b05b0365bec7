//! Thread discovery and per-thread CPU time from procfs, and pidfds so a recycled PID is never
//! touched.
//!
//! Follows proc(5) and Documentation/scheduler/sched-stats.rst: `/proc/PID/task/` lists a
//! process's threads, `/proc/PID/task/TID/schedstat` starts with the thread's time on CPU in
//! nanoseconds (the only precise CPU time of *another* process's thread: per-thread CPU clocks
//! only work inside one's own thread group), and `/proc/PID/task/TID/comm` is the thread name.
//! Pidfds follow pidfd_open(2): the descriptor refers to one process for its whole life and
//! polls readable once it exits, so checking it *after* a procfs read proves the data came from
//! that process and not from a new one that reused the PID.
//!
//! The parsing functions take a root directory ([`ProcFs::new`]) so they can be tested against
//! a fake /proc tree.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::sched::{LinuxError, Tid};

/// A procfs mount (normally `/proc`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcFs {
    root: PathBuf,
}

impl Default for ProcFs {
    fn default() -> Self {
        ProcFs::system()
    }
}

/// Maps a failed procfs access: a missing file means the thread (or process) is gone.
fn io_err(path: &Path, tid: Tid, e: io::Error) -> LinuxError {
    if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) {
        LinuxError::NoSuchThread {
            tid,
            path: path.to_path_buf(),
        }
    } else {
        LinuxError::Io {
            path: path.to_path_buf(),
            source: e,
        }
    }
}

impl ProcFs {
    /// The system's `/proc`.
    pub fn system() -> ProcFs {
        ProcFs::new("/proc")
    }

    /// A procfs tree rooted at `root` (a real mount or a fake one in tests).
    pub fn new(root: impl Into<PathBuf>) -> ProcFs {
        ProcFs { root: root.into() }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn task_dir(&self, pid: Tid) -> PathBuf {
        self.root.join(pid.to_string()).join("task")
    }

    /// The thread ids of process `pid`, ascending. Entries that are not numbers are ignored
    /// (procfs has none, but a fake tree might).
    pub fn threads_of(&self, pid: Tid) -> Result<Vec<Tid>, LinuxError> {
        let dir = self.task_dir(pid);
        let entries = fs::read_dir(&dir).map_err(|e| io_err(&dir, pid, e))?;
        let mut tids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_err(&dir, pid, e))?;
            if let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse::<Tid>().ok()) {
                tids.push(tid);
            }
        }
        tids.sort_unstable();
        Ok(tids)
    }

    /// Whether `tid` is, right now, a thread of process `pid`. Thread ids are unique system-wide
    /// while they live, so this is what makes acting on a TID safe: a reused TID belongs to
    /// another process and is not listed here.
    pub fn has_thread(&self, pid: Tid, tid: Tid) -> bool {
        self.root
            .join(pid.to_string())
            .join("task")
            .join(tid.to_string())
            .exists()
    }

    /// Cumulative time on CPU of thread `tid` of process `pid`, ns: the first field of
    /// `/proc/PID/task/TID/schedstat`.
    pub fn cpu_time(&self, pid: Tid, tid: Tid) -> Result<u64, LinuxError> {
        self.sched_info(pid, tid).map(|i| i.run_ns)
    }

    /// Thread `tid`'s whole `/proc/PID/task/TID/schedstat`: time on CPU, time runnable waiting
    /// for a CPU (run delay) and timeslices. The kernel adds a wait to the run delay when it
    /// ends (the thread gets a CPU), so a wait in progress is not in it yet.
    pub fn sched_info(&self, pid: Tid, tid: Tid) -> Result<SchedInfo, LinuxError> {
        let path = self.task_dir(pid).join(tid.to_string()).join("schedstat");
        let text = fs::read_to_string(&path).map_err(|e| io_err(&path, tid, e))?;
        parse_sched_info(&text).ok_or_else(|| LinuxError::Parse {
            path,
            what: "schedstat (three integers: run ns, wait ns, timeslices)",
            content: text.chars().take(200).collect(),
        })
    }

    /// The name of thread `tid` of process `pid` (`/proc/PID/task/TID/comm`, without the newline).
    pub fn comm(&self, pid: Tid, tid: Tid) -> Result<String, LinuxError> {
        let path = self.task_dir(pid).join(tid.to_string()).join("comm");
        let text = fs::read_to_string(&path).map_err(|e| io_err(&path, tid, e))?;
        Ok(text.strip_suffix('\n').unwrap_or(&text).to_string())
    }
}

/// The first field of a schedstat line ("run_ns wait_ns timeslices"); `None` when malformed.
pub(crate) fn parse_schedstat(text: &str) -> Option<u64> {
    parse_sched_info(text).map(|i| i.run_ns)
}

/// A thread's `/proc/PID/task/TID/schedstat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedInfo {
    /// Time on CPU, ns.
    pub run_ns: u64,
    /// Time runnable but waiting for a CPU (run delay), ns, counted as each wait ends.
    pub wait_ns: u64,
    /// Times the thread was given a CPU.
    pub timeslices: u64,
}

pub(crate) fn parse_sched_info(text: &str) -> Option<SchedInfo> {
    let mut fields = text.split_ascii_whitespace().map(|f| f.parse::<u64>().ok());
    let info = SchedInfo {
        run_ns: fields.next()??,
        wait_ns: fields.next()??,
        timeslices: fields.next()??,
    };
    // A real schedstat has exactly three fields; more means this is not a schedstat file.
    fields.next().is_none().then_some(info)
}

/// [`ProcFs::threads_of`] on `/proc`.
pub fn threads_of(pid: Tid) -> Result<Vec<Tid>, LinuxError> {
    ProcFs::system().threads_of(pid)
}

/// [`ProcFs::cpu_time`] on `/proc`.
pub fn cpu_time(pid: Tid, tid: Tid) -> Result<u64, LinuxError> {
    ProcFs::system().cpu_time(pid, tid)
}

/// [`ProcFs::comm`] on `/proc`.
pub fn comm(pid: Tid, tid: Tid) -> Result<String, LinuxError> {
    ProcFs::system().comm(pid, tid)
}

/// A process's command line (`/proc/PID/cmdline`, split at its NULs); empty for a kernel thread.
pub fn cmdline(pid: Tid) -> Result<Vec<String>, LinuxError> {
    let path = PathBuf::from(format!("/proc/{pid}/cmdline"));
    let raw = fs::read(&path).map_err(|e| io_err(&path, pid, e))?;
    Ok(raw
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect())
}

/// The fields of a `stat` file after the command name (field 3, the state, first): the name
/// may contain spaces and parentheses, so the split is at the last ')'.
fn stat_fields_of(path: &str) -> Option<Vec<String>> {
    let stat = fs::read_to_string(path).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

fn stat_fields(pid: Tid) -> Option<Vec<String>> {
    stat_fields_of(&format!("/proc/{pid}/stat"))
}

/// Whether thread `tid` of process `pid` is exiting (`PF_EXITING`; `None` when it is gone).
/// An exiting thread still runs kernel code (unmapping memory, closing files, waking its
/// parent), under whatever policy it has.
pub fn is_exiting(pid: Tid, tid: Tid) -> Option<bool> {
    let flags: u64 = stat_fields_of(&format!("/proc/{pid}/task/{tid}/stat"))?
        .get(6)?
        .parse()
        .ok()?;
    Some(flags & PF_EXITING != 0)
}

/// Whether thread `tid` has died and waits to be reaped (state `Z` or `X` in `/proc/TID/stat`):
/// `None` when it is gone altogether.
pub fn is_dead(tid: Tid) -> Option<bool> {
    let state = stat_fields_of(&format!("/proc/{tid}/stat"))?.first()?.clone();
    Some(matches!(state.as_str(), "Z" | "X"))
}

/// The CPU thread `tid` of process `pid` last ran on (field 39 of its `stat`).
pub fn last_cpu(pid: Tid, tid: Tid) -> Option<usize> {
    // Field 3 (state) is fields[0], so field 39 is fields[36].
    stat_fields_of(&format!("/proc/{pid}/task/{tid}/stat"))?
        .get(36)?
        .parse()
        .ok()
}

/// This boot's id: files written under an earlier boot describe processes and cgroups that no
/// longer exist.
pub fn boot_id() -> String {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Start time of process `pid` in clock ticks since boot (field 22 of /proc/PID/stat), and
/// whether it is a zombie; `None` when it does not exist. With the pid, the start time names one
/// process for the whole uptime, even after the pid is recycled.
pub fn process_start(pid: Tid) -> Option<(u64, bool)> {
    let fields = stat_fields(pid)?;
    let zombie = matches!(fields.first().map(String::as_str), Some("Z") | Some("X"));
    // Field 3 (state) is fields[0], so field 22 is fields[19].
    Some((fields.get(19)?.parse().ok()?, zombie))
}

/// Whether process `pid` is alive (not a zombie) and, when `start` is known, is the same process
/// (not a recycled pid).
pub fn process_alive(pid: Tid, start: Option<u64>) -> bool {
    match process_start(pid) {
        None | Some((_, true)) => false,
        Some((s, false)) => start.is_none_or(|want| want == s),
    }
}

/// `PF_KTHREAD` in the per-process flags (field 9 of /proc/PID/stat, include/linux/sched.h).
const PF_KTHREAD: u64 = 0x0020_0000;
/// `PF_EXITING`: set by `do_exit()` (`exit_signals()`) before the thread tears itself down.
const PF_EXITING: u64 = 0x0000_0004;

/// A numeric field of `/proc/TID/status` (`Tgid`, `PPid`, …).
pub fn status_field(tid: Tid, field: &str) -> Option<Tid> {
    let status = fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

/// The parent process of `pid`.
pub fn parent_of(pid: Tid) -> Option<Tid> {
    status_field(pid, "PPid")
}

/// Whether `pid` is a kernel thread (`None` when it does not exist).
pub fn is_kernel_thread(pid: Tid) -> Option<bool> {
    let flags: u64 = stat_fields(pid)?.get(6)?.parse().ok()?;
    Some(flags & PF_KTHREAD != 0)
}

/// A pidfd: a stable handle on one process. Use [`Pidfd::threads`], [`Pidfd::cpu_time`] and
/// [`Pidfd::comm`] instead of the bare procfs functions when the process is not ours: they
/// re-check liveness after reading, so a PID recycled in between is reported as
/// [`LinuxError::NoSuchThread`] instead of silently returning a stranger's data.
#[derive(Debug)]
pub struct Pidfd {
    fd: OwnedFd,
    pid: Tid,
    proc: ProcFs,
}

impl Pidfd {
    /// `pidfd_open(pid, 0)`. `pid` must be a process (thread-group leader).
    pub fn open(pid: Tid) -> Result<Pidfd, LinuxError> {
        Pidfd::open_with(pid, 0)
    }

    /// `pidfd_open(tid, PIDFD_THREAD)` (Linux ≥ 6.9; EINVAL before): any thread, polling
    /// readable once that thread has exited. [`Pidfd::pid`] is then the thread's id.
    pub fn open_thread(tid: Tid) -> Result<Pidfd, LinuxError> {
        const PIDFD_THREAD: u32 = libc::O_EXCL as u32;
        Pidfd::open_with(tid, PIDFD_THREAD)
    }

    fn open_with(pid: Tid, flags: u32) -> Result<Pidfd, LinuxError> {
        let raw_pid = libc::pid_t::try_from(pid)
            .map_err(|_| LinuxError::InvalidInput(format!("process id {pid} out of range")))?;
        // SAFETY: pidfd_open takes a pid and flags by value and touches no memory of ours.
        let r = unsafe { libc::syscall(libc::SYS_pidfd_open, raw_pid, flags) };
        if r < 0 {
            return Err(LinuxError::syscall("pidfd_open", pid));
        }
        let raw_fd =
            i32::try_from(r).map_err(|_| LinuxError::InvalidInput(format!("pidfd_open returned {r}")))?;
        // SAFETY: the kernel just returned this descriptor to us; nobody else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(raw_fd) };
        Ok(Pidfd {
            fd,
            pid,
            proc: ProcFs::system(),
        })
    }

    /// The process id this pidfd refers to.
    pub fn pid(&self) -> Tid {
        self.pid
    }

    /// Whether the process is still running: a pidfd polls readable once the process exits.
    pub fn is_alive(&self) -> Result<bool, LinuxError> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        loop {
            // SAFETY: `pfd` is one live, writable pollfd and we pass nfds = 1; timeout 0 never
            // blocks.
            let r = unsafe { libc::poll(&mut pfd, 1, 0) };
            if r >= 0 {
                return Ok(pfd.revents & (libc::POLLIN | libc::POLLHUP) == 0);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(LinuxError::Syscall {
                    op: "poll(pidfd)",
                    target: self.pid,
                    source: e,
                });
            }
        }
    }

    /// `pidfd_send_signal(fd, sig, NULL, 0)`: signals exactly this process, never a PID reuser.
    /// Signal 0 checks existence and permission only.
    pub fn send_signal(&self, sig: i32) -> Result<(), LinuxError> {
        // SAFETY: the fd is owned by self and open; info is NULL (the kernel fills it in) and
        // flags 0.
        let r = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.fd.as_raw_fd(),
                sig,
                std::ptr::null::<libc::siginfo_t>(),
                0u32,
            )
        };
        if r != 0 {
            return Err(LinuxError::syscall("pidfd_send_signal", self.pid));
        }
        Ok(())
    }

    /// Runs a procfs read, then proves it came from this process: if the process exited (so the
    /// PID may have been reused) the result is discarded.
    fn verified<T>(&self, read: impl FnOnce(&ProcFs) -> Result<T, LinuxError>) -> Result<T, LinuxError> {
        let gone = || LinuxError::NoSuchThread {
            tid: self.pid,
            path: self.proc.root().join(self.pid.to_string()),
        };
        let value = read(&self.proc);
        if !self.is_alive()? {
            return Err(gone());
        }
        value
    }

    /// The process's threads (see [`ProcFs::threads_of`]), verified against PID reuse.
    pub fn threads(&self) -> Result<Vec<Tid>, LinuxError> {
        self.verified(|p| p.threads_of(self.pid))
    }

    /// A thread's CPU time in ns (see [`ProcFs::cpu_time`]), verified against PID reuse.
    pub fn cpu_time(&self, tid: Tid) -> Result<u64, LinuxError> {
        self.verified(|p| p.cpu_time(self.pid, tid))
    }

    /// A thread's name (see [`ProcFs::comm`]), verified against PID reuse.
    pub fn comm(&self, tid: Tid) -> Result<String, LinuxError> {
        self.verified(|p| p.comm(self.pid, tid))
    }
}

impl AsRawFd for Pidfd {
    /// The descriptor polls readable once the process exits.
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zombie_is_dead_and_a_live_thread_is_not() {
        assert_eq!(is_dead(crate::sched::gettid()), Some(false));
        assert_eq!(is_dead(4_194_400), None, "beyond pid_max: no such thread");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while is_dead(pid) != Some(true) {
            assert!(std::time::Instant::now() < end, "the child never became a zombie");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child.wait().unwrap();
        assert_eq!(is_dead(pid), None, "reaped: gone");
    }

    #[test]
    fn schedstat_parsing() {
        assert_eq!(parse_schedstat("66659168 29275333 85\n"), Some(66_659_168));
        assert_eq!(parse_schedstat("0 0 0"), Some(0));
        assert_eq!(parse_schedstat(""), None);
        assert_eq!(parse_schedstat("abc 1 2\n"), None);
        assert_eq!(parse_schedstat("-5 1 2\n"), None);
        assert_eq!(parse_schedstat("5\n"), None);
        assert_eq!(parse_schedstat("99999999999999999999999 1 2"), None);
    }

    #[test]
    fn sched_info_parsing() {
        assert_eq!(
            parse_sched_info("66659168 29275333 85\n"),
            Some(SchedInfo {
                run_ns: 66_659_168,
                wait_ns: 29_275_333,
                timeslices: 85
            })
        );
        assert_eq!(parse_sched_info("1 x 3"), None);
        assert_eq!(parse_sched_info("1 2"), None);
        assert_eq!(parse_sched_info("1 2 3 4"), None);
    }

    /// Two threads pinned to one CPU and both spinning wait for each other: the run delay of
    /// each grows while they share it, which is what the starvation probe reads.
    #[test]
    fn run_delay_grows_while_a_thread_waits_for_its_cpu() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{mpsc, Arc};
        let pid = std::process::id() as Tid;
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let spinners: Vec<_> = (0..2)
            .map(|_| {
                let (stop, tx) = (stop.clone(), tx.clone());
                std::thread::spawn(move || {
                    let tid = crate::sched::gettid();
                    let pinned = crate::sched::set_affinity(tid, &[0]).is_ok();
                    tx.send((tid, pinned)).expect("test alive");
                    let start = std::time::Instant::now();
                    // Bounded, so a failed assertion cannot leave it spinning.
                    while !stop.load(Ordering::Relaxed) && start.elapsed().as_secs() < 5 {}
                })
            })
            .collect();
        let tids: Vec<(Tid, bool)> = (0..2).map(|_| rx.recv().expect("spinner started")).collect();
        std::thread::sleep(std::time::Duration::from_millis(400));
        let procfs = ProcFs::system();
        let infos: Vec<SchedInfo> = tids
            .iter()
            .map(|&(t, _)| procfs.sched_info(pid, t).expect("spinner's schedstat"))
            .collect();
        stop.store(true, Ordering::Relaxed);
        for h in spinners {
            h.join().expect("spinner");
        }
        for (info, (tid, pinned)) in infos.iter().zip(&tids) {
            assert!(*pinned, "thread {tid} could not be pinned to CPU 0");
            assert!(info.run_ns > 0 && info.timeslices > 0, "{tid}: {info:?}");
            // Each had the CPU about half of the 400 ms; the run delay counts finished waits.
            assert!(info.wait_ns >= 50_000_000, "{tid}: {info:?}");
        }
    }
}
