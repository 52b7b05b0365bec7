//! Per-thread context-switch and CPU-migration counts from perf *software* events, the sensor
//! behind the RM-vs-EDF study's overhead metrics (rm-vs-edf-multicore-linux.txt: context-switch
//! and migration rates per task) and `pacer exec`'s status view.
//!
//! Follows perf_event_open(2) and include/uapi/linux/perf_event.h: two counting (non-sampling)
//! events, `PERF_COUNT_SW_CONTEXT_SWITCHES` (the group leader) and `PERF_COUNT_SW_CPU_MIGRATIONS`,
//! are opened as one group on one thread (`pid = tid`, `cpu = -1`: follow the thread on every
//! CPU; `inherit = 0`: its future children are not counted) and read together with one `read(2)`
//! of the leader in the `PERF_FORMAT_GROUP | PERF_FORMAT_ID | PERF_FORMAT_TOTAL_TIME_ENABLED |
//! PERF_FORMAT_TOTAL_TIME_RUNNING` layout. A group is scheduled onto the PMU as a unit, so both
//! counts always cover the same interval; software events are never multiplexed in practice, but
//! if `time_running < time_enabled` the counts are scaled as the man page describes.
//!
//! Why software events: they need no hardware PMU (pacer's VM has none), they are exact (counted
//! in the scheduler, not sampled), and they are per thread with no tracefs state to clean up —
//! the descriptors die with the process. `exclude_kernel` stays 0 because the kernel counts both
//! events from kernel context (a context switch happens inside `schedule()`): with
//! `exclude_kernel = 1` they would read 0. That is why an unprivileged caller needs
//! `kernel.perf_event_paranoid` ≤ 1 (or CAP_PERFMON); the error says which value it found.
//!
//! glibc has no `perf_event_open` wrapper, so it goes through `libc::syscall`; the `unsafe`
//! blocks in this module are that syscall, `ioctl`, `read` and `poll` on descriptors we own.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use pacer_adapt::KernelError;

use crate::sched::{LinuxError, Tid};

/// `PERF_TYPE_SOFTWARE`.
const PERF_TYPE_SOFTWARE: u32 = 1;
/// `PERF_COUNT_SW_CONTEXT_SWITCHES`.
const PERF_COUNT_SW_CONTEXT_SWITCHES: u64 = 3;
/// `PERF_COUNT_SW_CPU_MIGRATIONS`.
const PERF_COUNT_SW_CPU_MIGRATIONS: u64 = 4;

/// `read_format` bits.
const PERF_FORMAT_TOTAL_TIME_ENABLED: u64 = 1 << 0;
const PERF_FORMAT_TOTAL_TIME_RUNNING: u64 = 1 << 1;
const PERF_FORMAT_ID: u64 = 1 << 2;
const PERF_FORMAT_GROUP: u64 = 1 << 3;

/// `perf_event_attr` flag bits (the bitfield word at offset 40).
const ATTR_DISABLED: u64 = 1 << 0;
const ATTR_EXCLUDE_HV: u64 = 1 << 6;

/// `perf_event_open` flags: close the descriptor on exec.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// `_IO('$', n)` ioctls on an event descriptor.
const PERF_EVENT_IOC_ENABLE: u64 = 0x2400;
const PERF_EVENT_IOC_DISABLE: u64 = 0x2401;
const PERF_EVENT_IOC_RESET: u64 = 0x2403;
/// Apply the ioctl to the whole group, not only the leader.
const PERF_IOC_FLAG_GROUP: libc::c_ulong = 1;

/// `PERF_ATTR_SIZE_VER8` (Linux 6.3+, adds `config3`): the size of the `perf_event_attr` pacer
/// passes. Older kernels accept a larger structure as long as the bytes they do not know are zero.
pub const PERF_ATTR_SIZE_VER8: u32 = 136;

/// Where the kernel publishes the perf access policy.
const PARANOID_PATH: &str = "/proc/sys/kernel/perf_event_paranoid";

/// The kernel's `struct perf_event_attr` (include/uapi/linux/perf_event.h), version 8. Unions
/// are represented by their first member; the bitfield word is `flags`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved_2: u16,
    aux_sample_size: u32,
    aux_action: u32,
    sig_data: u64,
    config3: u64,
}

// The kernel reads exactly `size` bytes from us: the layout must match byte for byte.
const _: () = assert!(std::mem::size_of::<PerfEventAttr>() == PERF_ATTR_SIZE_VER8 as usize);

impl PerfEventAttr {
    /// A counting software event on one thread, reading in the group layout.
    fn software(config: u64, leader: bool) -> PerfEventAttr {
        PerfEventAttr {
            type_: PERF_TYPE_SOFTWARE,
            size: PERF_ATTR_SIZE_VER8,
            config,
            read_format: PERF_FORMAT_GROUP
                | PERF_FORMAT_ID
                | PERF_FORMAT_TOTAL_TIME_ENABLED
                | PERF_FORMAT_TOTAL_TIME_RUNNING,
            // The leader starts disabled so both events start together when the group is
            // enabled; a member follows its leader's state. exclude_hv: nothing to count there.
            flags: if leader { ATTR_DISABLED } else { 0 } | ATTR_EXCLUDE_HV,
            ..PerfEventAttr::default()
        }
    }
}

/// Counts of one thread since its counters were opened (or last [`ThreadPerf::reset`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SwitchCounts {
    /// Context switches of the thread (voluntary and involuntary), scaled if multiplexed.
    pub context_switches: u64,
    /// Moves of the thread from one CPU to another, scaled if multiplexed.
    pub migrations: u64,
    /// ns the counters were enabled *while the thread was on a CPU* (a per-thread event's
    /// context only exists then, so this is the thread's CPU time while counted, not wall time).
    pub time_enabled_ns: u64,
    /// ns of that the counters were actually counting (less only when multiplexed).
    pub time_running_ns: u64,
}

impl SwitchCounts {
    /// Whether the counts were extrapolated from a partial measurement (multiplexing).
    pub fn scaled(&self) -> bool {
        self.time_running_ns < self.time_enabled_ns
    }
}

/// Why perf counters could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    /// EACCES/EPERM: the perf access policy forbids this. `paranoid` is the value of
    /// `kernel.perf_event_paranoid` (None when unreadable).
    #[error(
        "perf_event_open({tid}) not permitted: {source}; kernel.perf_event_paranoid = {} (counting a thread's context switches needs ≤ 1, CAP_PERFMON or root)",
        paranoid.map_or_else(|| "unreadable".to_string(), |p| p.to_string())
    )]
    Permission {
        tid: Tid,
        paranoid: Option<i32>,
        #[source]
        source: io::Error,
    },
    /// ENOENT/EOPNOTSUPP/ENODEV: the kernel has no such software event (or no perf events).
    #[error("software perf event {event} not supported by this kernel: {source}")]
    Unsupported {
        event: &'static str,
        #[source]
        source: io::Error,
    },
    /// ESRCH: the thread does not exist (or exited before the counters were attached).
    #[error("no such thread {0}")]
    NoSuchThread(Tid),
    /// A TID that cannot name a Linux thread (0 or above `i32::MAX`).
    #[error("invalid thread id {0}")]
    InvalidTid(Tid),
    /// Any other failure of a syscall on the counters.
    #[error("{op}({tid}) failed: {source}")]
    Syscall {
        op: &'static str,
        tid: Tid,
        #[source]
        source: io::Error,
    },
    /// The kernel returned a group read this module does not understand.
    #[error("perf read of thread {tid}: {what}")]
    BadRead { tid: Tid, what: String },
}

impl PerfError {
    /// The errno behind the error, if any.
    pub fn errno(&self) -> Option<i32> {
        match self {
            PerfError::Permission { source, .. }
            | PerfError::Unsupported { source, .. }
            | PerfError::Syscall { source, .. } => source.raw_os_error(),
            PerfError::NoSuchThread(_) => Some(libc::ESRCH),
            _ => None,
        }
    }
}

impl From<PerfError> for LinuxError {
    /// Keeps the errno (so [`KernelError`] conversion through [`LinuxError`] still classifies
    /// it); the paranoid value is only in [`PerfError`]'s own message.
    fn from(e: PerfError) -> LinuxError {
        match e {
            PerfError::Permission { tid, source, .. } | PerfError::Syscall { tid, source, .. } => {
                LinuxError::Syscall {
                    op: "perf_event_open",
                    target: tid,
                    source,
                }
            }
            PerfError::Unsupported { .. } => LinuxError::Unsupported(e.to_string()),
            PerfError::NoSuchThread(tid) => LinuxError::NoSuchThread {
                tid,
                path: "perf_event_open".into(),
            },
            PerfError::InvalidTid(_) => LinuxError::InvalidInput(e.to_string()),
            PerfError::BadRead { .. } => LinuxError::Unsupported(e.to_string()),
        }
    }
}

impl From<PerfError> for KernelError {
    fn from(e: PerfError) -> KernelError {
        match e {
            PerfError::Permission { .. } => KernelError::Permission(e.to_string()),
            PerfError::Unsupported { .. } => KernelError::Unsupported(e.to_string()),
            PerfError::NoSuchThread(tid) => KernelError::NoSuchThread(tid),
            PerfError::InvalidTid(_) => KernelError::Invalid(e.to_string()),
            PerfError::Syscall { .. } | PerfError::BadRead { .. } => KernelError::Other(e.to_string()),
        }
    }
}

/// `kernel.perf_event_paranoid` (2 on most distributions: no kernel-side counting for
/// unprivileged users), or None when it cannot be read.
pub fn perf_event_paranoid() -> Option<i32> {
    fs::read_to_string(PARANOID_PATH).ok()?.trim().parse().ok()
}

/// Opens one event; `group` is the leader's descriptor for the second event.
fn open_event(tid: Tid, config: u64, group: Option<&OwnedFd>) -> Result<OwnedFd, PerfError> {
    let pid = libc::pid_t::try_from(tid).map_err(|_| PerfError::InvalidTid(tid))?;
    if pid == 0 {
        // pid 0 would silently mean "the calling thread".
        return Err(PerfError::InvalidTid(tid));
    }
    let attr = PerfEventAttr::software(config, group.is_none());
    let group_fd: libc::c_int = group.map_or(-1, |g| g.as_raw_fd());
    // SAFETY: `attr` is a live #[repr(C)] struct of exactly `attr.size` bytes that the kernel only
    // reads; the other arguments are plain integers.
    let r = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            pid,
            -1 as libc::c_int,
            group_fd,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if r < 0 {
        let source = io::Error::last_os_error();
        let event = if config == PERF_COUNT_SW_CONTEXT_SWITCHES {
            "context-switches"
        } else {
            "cpu-migrations"
        };
        return Err(match source.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => PerfError::Permission {
                tid,
                paranoid: perf_event_paranoid(),
                source,
            },
            Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) | Some(libc::ENOSYS) => {
                PerfError::Unsupported { event, source }
            }
            Some(libc::ESRCH) => PerfError::NoSuchThread(tid),
            _ => PerfError::Syscall {
                op: "perf_event_open",
                tid,
                source,
            },
        });
    }
    let fd = libc::c_int::try_from(r).map_err(|_| PerfError::BadRead {
        tid,
        what: format!("perf_event_open returned {r}"),
    })?;
    // SAFETY: the kernel just returned this descriptor to us; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `ioctl(PERF_EVENT_IOC_ID)`: the kernel's id of an event, matched against group reads.
fn event_id(fd: &OwnedFd, tid: Tid) -> Result<u64, PerfError> {
    // _IOR('$', 7, __u64 *) in the generic ioctl encoding (x86, arm, riscv): direction read
    // (2) in bits 30-31, the argument size (a pointer) in bits 16-29.
    const PERF_EVENT_IOC_ID: u64 = (2 << 30) | ((std::mem::size_of::<*mut u64>() as u64) << 16) | 0x2407;
    let mut id = 0u64;
    // SAFETY: the descriptor is ours and open; the kernel writes one u64 to `id`.
    let r = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            PERF_EVENT_IOC_ID as libc::Ioctl,
            &mut id as *mut u64,
        )
    };
    if r < 0 {
        return Err(PerfError::Syscall {
            op: "ioctl(PERF_EVENT_IOC_ID)",
            tid,
            source: io::Error::last_os_error(),
        });
    }
    Ok(id)
}

/// Scales a count by enabled/running time (perf_event_open(2), "multiplexing"); exact when the
/// event ran the whole time, 0 when it never ran.
fn scale(value: u64, enabled: u64, running: u64) -> u64 {
    if running == 0 {
        return 0;
    }
    if running >= enabled {
        return value;
    }
    let v = u128::from(value) * u128::from(enabled) / u128::from(running);
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// Decodes a group read: `nr, time_enabled, time_running, {value, id} × nr`.
pub(crate) fn parse_group_read(buf: &[u64], cs_id: u64, mig_id: u64) -> Result<SwitchCounts, String> {
    let (&nr, rest) = buf.split_first().ok_or("empty read")?;
    let [enabled, running, values @ ..] = rest else {
        return Err(format!("read of {} words has no time fields", buf.len()));
    };
    let nr = usize::try_from(nr).map_err(|_| format!("nr = {nr}"))?;
    if values.len() < nr.saturating_mul(2) {
        return Err(format!("nr = {nr} but only {} value words", values.len()));
    }
    let (mut cs, mut mig) = (None, None);
    for pair in values[..nr * 2].chunks_exact(2) {
        let (value, id) = (pair[0], pair[1]);
        if id == cs_id {
            cs = Some(value);
        } else if id == mig_id {
            mig = Some(value);
        }
    }
    let (Some(cs), Some(mig)) = (cs, mig) else {
        return Err(format!("ids {cs_id}/{mig_id} not both in the group read"));
    };
    Ok(SwitchCounts {
        context_switches: scale(cs, *enabled, *running),
        migrations: scale(mig, *enabled, *running),
        time_enabled_ns: *enabled,
        time_running_ns: *running,
    })
}

/// Context-switch and migration counters of one thread: a perf event group, counting from
/// [`open`](Self::open) on. The descriptors close on drop.
#[derive(Debug)]
pub struct ThreadPerf {
    tid: Tid,
    leader: OwnedFd,
    // Kept open: closing a member removes it from the group.
    _migrations: OwnedFd,
    cs_id: u64,
    mig_id: u64,
    /// Thread pidfd for exit detection (see [`ThreadPerf::exited`]).
    exit_fd: Option<OwnedFd>,
}

impl ThreadPerf {
    /// Attaches both counters to thread `tid` (any thread of any process the caller may trace)
    /// and starts them.
    pub fn open(tid: Tid) -> Result<ThreadPerf, PerfError> {
        // Taken first: if the thread dies after this, the pidfd still says so; if it died before,
        // perf_event_open below fails with ESRCH.
        let exit_fd = thread_pidfd(tid);
        let leader = open_event(tid, PERF_COUNT_SW_CONTEXT_SWITCHES, None)?;
        let migrations = open_event(tid, PERF_COUNT_SW_CPU_MIGRATIONS, Some(&leader))?;
        let p = ThreadPerf {
            tid,
            cs_id: event_id(&leader, tid)?,
            mig_id: event_id(&migrations, tid)?,
            leader,
            _migrations: migrations,
            exit_fd,
        };
        p.enable()?;
        Ok(p)
    }

    /// The thread counted.
    pub fn tid(&self) -> Tid {
        self.tid
    }

    fn group_ioctl(&self, op: &'static str, request: u64) -> Result<(), PerfError> {
        // SAFETY: the descriptor is ours and open; these ioctls take an integer argument.
        let r = unsafe {
            libc::ioctl(
                self.leader.as_raw_fd(),
                request as libc::Ioctl,
                PERF_IOC_FLAG_GROUP,
            )
        };
        if r < 0 {
            return Err(PerfError::Syscall {
                op,
                tid: self.tid,
                source: io::Error::last_os_error(),
            });
        }
        Ok(())
    }

    /// Starts (or resumes) counting, both events together.
    pub fn enable(&self) -> Result<(), PerfError> {
        self.group_ioctl("ioctl(PERF_EVENT_IOC_ENABLE)", PERF_EVENT_IOC_ENABLE)
    }

    /// Pauses counting; the counts are kept.
    pub fn disable(&self) -> Result<(), PerfError> {
        self.group_ioctl("ioctl(PERF_EVENT_IOC_DISABLE)", PERF_EVENT_IOC_DISABLE)
    }

    /// Sets both counts to zero (the enabled/running times are not reset by the kernel).
    pub fn reset(&self) -> Result<(), PerfError> {
        self.group_ioctl("ioctl(PERF_EVENT_IOC_RESET)", PERF_EVENT_IOC_RESET)
    }

    /// Reads both counts in one `read(2)` of the group. After the thread exits the final counts
    /// stay readable.
    pub fn read(&self) -> Result<SwitchCounts, PerfError> {
        // nr, enabled, running, 2 × {value, id}.
        let mut buf = [0u64; 7];
        loop {
            // SAFETY: `buf` is a live, writable buffer of `size_of_val(&buf)` bytes; the kernel
            // writes at most that many.
            let n = unsafe {
                libc::read(
                    self.leader.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    std::mem::size_of_val(&buf),
                )
            };
            if n >= 0 {
                let words = n as usize / 8;
                return parse_group_read(&buf[..words], self.cs_id, self.mig_id)
                    .map_err(|what| PerfError::BadRead { tid: self.tid, what });
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(PerfError::Syscall {
                    op: "read(perf group)",
                    tid: self.tid,
                    source: e,
                });
            }
        }
    }

    /// Whether the thread has exited (its final counts stay readable). Uses a thread pidfd
    /// taken at [`open`](Self::open) (`pidfd_open(tid, PIDFD_THREAD)`, Linux 6.9+), which polls
    /// readable when exactly that thread exits; on older kernels, whether `/proc/TID` is gone.
    /// (The perf descriptor itself cannot tell: without a ring buffer it always polls POLLHUP.)
    pub fn exited(&self) -> bool {
        let Some(fd) = &self.exit_fd else {
            return !std::path::Path::new(&format!("/proc/{}", self.tid)).exists();
        };
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live, writable pollfd, nfds = 1, timeout 0 (never blocks).
        let r = unsafe { libc::poll(&mut pfd, 1, 0) };
        r > 0 && pfd.revents & (libc::POLLIN | libc::POLLHUP) != 0
    }
}

/// `pidfd_open(tid, PIDFD_THREAD)`: a descriptor on one thread (not only a thread-group leader)
/// that polls readable when it exits. None when the kernel predates PIDFD_THREAD (6.9) or the
/// thread is already gone.
fn thread_pidfd(tid: Tid) -> Option<OwnedFd> {
    // PIDFD_THREAD is O_EXCL.
    const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;
    let pid = libc::pid_t::try_from(tid).ok()?;
    // SAFETY: pidfd_open takes a pid and flags by value and touches no memory of ours.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, PIDFD_THREAD) };
    let fd = libc::c_int::try_from(r).ok().filter(|&fd| fd >= 0)?;
    // SAFETY: the kernel just returned this descriptor to us; nobody else owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One thread's counts as read by [`ThreadCounters::read_all`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadSample {
    pub tid: Tid,
    pub counts: SwitchCounts,
    /// The thread has exited; `counts` are final.
    pub exited: bool,
}

/// Follows a changing set of threads (e.g. every thread of a process under `pacer exec`): one
/// [`ThreadPerf`] per thread, two descriptors each.
#[derive(Debug, Default)]
pub struct ThreadCounters {
    threads: BTreeMap<Tid, ThreadPerf>,
}

impl ThreadCounters {
    /// An empty set.
    pub fn new() -> ThreadCounters {
        ThreadCounters::default()
    }

    /// Starts counting `tid`; a no-op if it is already followed.
    pub fn add(&mut self, tid: Tid) -> Result<(), PerfError> {
        if let std::collections::btree_map::Entry::Vacant(slot) = self.threads.entry(tid) {
            slot.insert(ThreadPerf::open(tid)?);
        }
        Ok(())
    }

    /// Stops following `tid`, returning its last counts (None if it was not followed or the
    /// final read failed).
    pub fn remove(&mut self, tid: Tid) -> Option<SwitchCounts> {
        self.threads.remove(&tid).and_then(|p| p.read().ok())
    }

    /// Makes the followed set equal to `tids`: opens new threads, drops missing ones. A thread
    /// that exits between being listed and being opened (ESRCH) is skipped, not an error.
    pub fn sync(&mut self, tids: impl IntoIterator<Item = Tid>) -> Result<(), PerfError> {
        let want: std::collections::BTreeSet<Tid> = tids.into_iter().collect();
        self.threads.retain(|t, _| want.contains(t));
        for tid in want {
            match self.add(tid) {
                Ok(()) | Err(PerfError::NoSuchThread(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Whether `tid` is followed.
    pub fn contains(&self, tid: Tid) -> bool {
        self.threads.contains_key(&tid)
    }

    /// The followed threads, ascending.
    pub fn tids(&self) -> impl Iterator<Item = Tid> + '_ {
        self.threads.keys().copied()
    }

    /// Number of followed threads.
    pub fn len(&self) -> usize {
        self.threads.len()
    }

    /// Whether no thread is followed.
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }

    /// Reads every followed thread, ascending by TID.
    pub fn read_all(&self) -> Result<Vec<ThreadSample>, PerfError> {
        self.threads
            .iter()
            .map(|(&tid, p)| {
                // Check exit first: a thread that exits after the read still shows counts that
                // are complete up to the read.
                let exited = p.exited();
                Ok(ThreadSample {
                    tid,
                    counts: p.read()?,
                    exited,
                })
            })
            .collect()
    }

    /// Stops following threads that have exited and returns their final counts.
    pub fn prune_exited(&mut self) -> Vec<ThreadSample> {
        let gone: Vec<Tid> = self
            .threads
            .iter()
            .filter(|(_, p)| p.exited())
            .map(|(&t, _)| t)
            .collect();
        gone.into_iter()
            .filter_map(|tid| {
                let p = self.threads.remove(&tid)?;
                Some(ThreadSample {
                    tid,
                    counts: p.read().ok()?,
                    exited: true,
                })
            })
            .collect()
    }
}

/// `PERF_TYPE_HARDWARE` and `PERF_COUNT_HW_CACHE_MISSES` (last-level cache misses).
const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_COUNT_HW_CACHE_MISSES: u64 = 3;
/// `perf_event_attr.inherit`: threads and processes created later are counted too.
const ATTR_INHERIT: u64 = 1 << 1;

/// Hardware cache misses of the calling thread and of every thread it creates afterwards (an
/// inherited counter: a child's count is added to it when the child exits), for the RM-vs-EDF
/// study's cache-miss metric per run. Needs a hardware PMU: on a VM without one (pacer's) opening
/// fails, and the caller must report the metric as unavailable, never as zero.
#[derive(Debug)]
pub struct CacheMisses {
    fd: OwnedFd,
}

impl CacheMisses {
    /// Starts counting now; `Err` says why the counter is unavailable (no PMU, not permitted).
    pub fn start() -> Result<CacheMisses, String> {
        let attr = PerfEventAttr {
            type_: PERF_TYPE_HARDWARE,
            size: PERF_ATTR_SIZE_VER8,
            config: PERF_COUNT_HW_CACHE_MISSES,
            read_format: PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING,
            flags: ATTR_INHERIT | ATTR_EXCLUDE_HV,
            ..PerfEventAttr::default()
        };
        // SAFETY: `attr` is a live #[repr(C)] struct of exactly `attr.size` bytes that the kernel
        // only reads; pid 0 / cpu -1 = the calling thread on any CPU; no group.
        let r = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                0 as libc::pid_t,
                -1 as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) => {
                    format!("no hardware PMU (perf_event_open of the hardware cache-miss event: {e})")
                }
                Some(libc::EACCES) | Some(libc::EPERM) => format!(
                    "hardware perf events not permitted ({e}; kernel.perf_event_paranoid = {})",
                    perf_event_paranoid().map_or_else(|| "unreadable".to_string(), |p| p.to_string())
                ),
                _ => format!("perf_event_open of the hardware cache-miss event failed: {e}"),
            });
        }
        let fd = libc::c_int::try_from(r).map_err(|_| format!("perf_event_open returned {r}"))?;
        // SAFETY: the kernel just returned this descriptor to us; nobody else owns it.
        Ok(CacheMisses {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Misses counted so far (scaled if the PMU was shared), including threads that have exited.
    pub fn read(&self) -> Result<u64, String> {
        let mut buf = [0u64; 3];
        // SAFETY: reads at most 24 bytes into `buf`, which is that large; the descriptor is ours.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), 24) };
        if n != 24 {
            return Err(format!(
                "reading the cache-miss counter: {}",
                io::Error::last_os_error()
            ));
        }
        Ok(scale(buf[0], buf[1], buf[2]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_layout_matches_the_kernel() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 136);
        assert_eq!(std::mem::offset_of!(PerfEventAttr, config), 8);
        assert_eq!(std::mem::offset_of!(PerfEventAttr, read_format), 32);
        assert_eq!(std::mem::offset_of!(PerfEventAttr, flags), 40);
        assert_eq!(std::mem::offset_of!(PerfEventAttr, wakeup_events), 48);
        assert_eq!(std::mem::offset_of!(PerfEventAttr, config1), 56);
        assert_eq!(std::mem::offset_of!(PerfEventAttr, branch_sample_type), 72);
        assert_eq!(std::mem::offset_of!(PerfEventAttr, clockid), 92);
        assert_eq!(std::mem::offset_of!(PerfEventAttr, sample_regs_intr), 96);
        assert_eq!(std::mem::offset_of!(PerfEventAttr, aux_sample_size), 112);
        assert_eq!(std::mem::offset_of!(PerfEventAttr, sig_data), 120);
        assert_eq!(std::mem::offset_of!(PerfEventAttr, config3), 128);
        let a = PerfEventAttr::software(PERF_COUNT_SW_CPU_MIGRATIONS, true);
        assert_eq!((a.type_, a.size, a.config), (1, 136, 4));
        assert_eq!(a.read_format, 0b1111);
        assert_eq!(a.flags, ATTR_DISABLED | ATTR_EXCLUDE_HV);
        assert_eq!(PerfEventAttr::software(3, false).flags & ATTR_DISABLED, 0);
    }

    #[test]
    fn group_reads_and_scaling() {
        let buf = [2, 1000, 1000, 7, 11, 3, 12];
        let c = parse_group_read(&buf, 11, 12).unwrap();
        assert_eq!((c.context_switches, c.migrations), (7, 3));
        assert!(!c.scaled());
        // Members reported in the other order are matched by id.
        let c = parse_group_read(&[2, 10, 10, 3, 12, 7, 11], 11, 12).unwrap();
        assert_eq!((c.context_switches, c.migrations), (7, 3));
        // Half the time running: counts doubled.
        let c = parse_group_read(&[2, 1000, 500, 7, 11, 3, 12], 11, 12).unwrap();
        assert_eq!((c.context_switches, c.migrations), (14, 6));
        assert!(c.scaled());
        assert_eq!(scale(5, 100, 0), 0);
        assert_eq!(scale(u64::MAX, u64::MAX, 1), u64::MAX);
        for bad in [
            &[][..],
            &[2, 1][..],
            &[2, 1, 1, 7, 11][..],
            &[u64::MAX, 1, 1, 7, 11, 3, 12][..],
        ] {
            assert!(parse_group_read(bad, 11, 12).is_err(), "{bad:?}");
        }
        assert!(parse_group_read(&[2, 1, 1, 7, 11, 3, 99], 11, 12).is_err());
    }

    #[test]
    fn bad_tids_are_refused_before_the_syscall() {
        assert!(matches!(ThreadPerf::open(0), Err(PerfError::InvalidTid(0))));
        assert!(matches!(
            ThreadPerf::open(u32::MAX),
            Err(PerfError::InvalidTid(_))
        ));
    }

    #[test]
    fn error_conversions() {
        let e = PerfError::Permission {
            tid: 5,
            paranoid: Some(2),
            source: io::Error::from_raw_os_error(libc::EACCES),
        };
        assert!(e.to_string().contains("perf_event_paranoid = 2"), "{e}");
        assert!(matches!(KernelError::from(e), KernelError::Permission(_)));
        let e = PerfError::Permission {
            tid: 5,
            paranoid: Some(3),
            source: io::Error::from_raw_os_error(libc::EPERM),
        };
        let l = LinuxError::from(e);
        assert_eq!(l.errno(), Some(libc::EPERM));
        assert!(matches!(KernelError::from(l), KernelError::Permission(_)));
        assert_eq!(
            KernelError::from(PerfError::NoSuchThread(9)),
            KernelError::NoSuchThread(9)
        );
        assert!(matches!(
            KernelError::from(PerfError::Unsupported {
                event: "cpu-migrations",
                source: io::Error::from_raw_os_error(libc::ENOENT)
            }),
            KernelError::Unsupported(_)
        ));
        assert_eq!(PerfError::NoSuchThread(1).errno(), Some(libc::ESRCH));
    }
}
