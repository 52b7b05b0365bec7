//! Scheduling-policy syscalls: `sched_setattr(2)`/`sched_getattr(2)` with every field of
//! `struct sched_attr`, and CPU affinity through `sched_setaffinity(2)`/`sched_getaffinity(2)`.
//!
//! Follows the sched_setattr(2) man page and Documentation/scheduler/sched-deadline.rst: a
//! SCHED_DEADLINE thread is described by (runtime, deadline, period) in nanoseconds, every change
//! re-runs admission control (EBUSY when the root domain's bandwidth cap would be exceeded), bad
//! parameters give EINVAL, and a reserved thread may only fork/create threads when
//! `SCHED_FLAG_RESET_ON_FORK` is set — so pacer sets it on every reservation it makes.
//!
//! glibc has no wrapper for `sched_setattr`/`sched_getattr`, and neither does `nix`, so both go
//! through `libc::syscall`. The `unsafe` blocks in this module are exactly those syscalls.

use std::io;
use std::path::PathBuf;

use pacer_adapt::KernelError;
use pacer_model::reservation::{
    DEFAULT_PERIOD_MAX, DL_MIN_RUNTIME_NS, SCHED_FLAG_DL_OVERRUN, SCHED_FLAG_RECLAIM,
    SCHED_FLAG_RESET_ON_FORK,
};
use pacer_model::{Duration, Policy, Reservation, ReservationFlags};

/// A thread (or process) id as the kernel knows it. `0` means "the calling thread" in the
/// scheduling syscalls.
pub type Tid = pacer_adapt::Tid;

/// `SCHED_OTHER` (CFS/EEVDF, the default policy).
pub const SCHED_OTHER: u32 = 0;
/// `SCHED_FIFO`.
pub const SCHED_FIFO: u32 = 1;
/// `SCHED_RR`.
pub const SCHED_RR: u32 = 2;
/// `SCHED_BATCH`.
pub const SCHED_BATCH: u32 = 3;
/// `SCHED_IDLE`.
pub const SCHED_IDLE: u32 = 5;
/// `SCHED_DEADLINE`.
pub const SCHED_DEADLINE: u32 = 6;
/// `SCHED_EXT` (BPF scheduler class, Linux ≥ 6.12).
pub const SCHED_EXT: u32 = 7;

/// `SCHED_FLAG_KEEP_POLICY`: change parameters without changing the policy.
pub const SCHED_FLAG_KEEP_POLICY: u64 = 0x08;
/// `SCHED_FLAG_KEEP_PARAMS`: keep the current parameters (used with the util-clamp flags).
pub const SCHED_FLAG_KEEP_PARAMS: u64 = 0x10;
/// `SCHED_FLAG_UTIL_CLAMP_MIN`: `sched_util_min` is valid.
pub const SCHED_FLAG_UTIL_CLAMP_MIN: u64 = 0x20;
/// `SCHED_FLAG_UTIL_CLAMP_MAX`: `sched_util_max` is valid.
pub const SCHED_FLAG_UTIL_CLAMP_MAX: u64 = 0x40;

/// `SCHED_ATTR_SIZE_VER1`: the size of `struct sched_attr` with the util-clamp fields (Linux 5.3+).
pub const SCHED_ATTR_SIZE_VER1: u32 = 56;

/// Largest CPU number the affinity wrappers handle (the kernel's default `CONFIG_NR_CPUS` range
/// and glibc's `CPU_SETSIZE`).
pub const MAX_CPUS: usize = 1024;

/// Errors of the Linux backend (this module, [`crate::procfs`] and [`crate::cpufreq`]).
#[derive(Debug, thiserror::Error)]
pub enum LinuxError {
    /// A syscall failed; `target` is the thread/process it was about.
    #[error("{op}({target}) failed: {source}")]
    Syscall {
        op: &'static str,
        target: Tid,
        #[source]
        source: io::Error,
    },
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A file's content could not be parsed.
    #[error("{}: cannot parse {what} from {content:?}", path.display())]
    Parse {
        path: PathBuf,
        what: &'static str,
        content: String,
    },
    /// The thread (or process) no longer exists; `path` is where that was found out.
    #[error("no such thread {tid} ({})", path.display())]
    NoSuchThread { tid: Tid, path: PathBuf },
    /// The kernel reports a policy pacer's [`Policy`] cannot represent (e.g. SCHED_BATCH).
    #[error("kernel policy {0} has no pacer Policy equivalent")]
    UnknownPolicy(u32),
    /// The interface is missing on this machine (e.g. no cpufreq).
    #[error("not supported here: {0}")]
    Unsupported(String),
    /// A caller-supplied argument is out of range (caught before any syscall).
    #[error("invalid argument: {0}")]
    InvalidInput(String),
}

impl LinuxError {
    /// The errno behind a failed syscall or file access, if any.
    pub fn errno(&self) -> Option<i32> {
        match self {
            LinuxError::Syscall { source, .. } | LinuxError::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    pub(crate) fn syscall(op: &'static str, target: Tid) -> LinuxError {
        LinuxError::Syscall {
            op,
            target,
            source: io::Error::last_os_error(),
        }
    }
}

impl From<LinuxError> for KernelError {
    fn from(e: LinuxError) -> KernelError {
        let msg = e.to_string();
        match &e {
            LinuxError::Syscall { target, source, .. } => match source.raw_os_error() {
                Some(libc::EBUSY) => KernelError::Admission(msg),
                Some(libc::EINVAL) => KernelError::Invalid(msg),
                Some(libc::ESRCH) => KernelError::NoSuchThread(*target),
                Some(libc::EPERM) | Some(libc::EACCES) => KernelError::Permission(msg),
                Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => KernelError::Unsupported(msg),
                _ => KernelError::Other(msg),
            },
            LinuxError::Io { source, .. } => match source.raw_os_error() {
                Some(libc::EBUSY) => KernelError::Admission(msg),
                Some(libc::EINVAL) => KernelError::Invalid(msg),
                Some(libc::EPERM) | Some(libc::EACCES) => KernelError::Permission(msg),
                _ => KernelError::Other(msg),
            },
            LinuxError::NoSuchThread { tid, .. } => KernelError::NoSuchThread(*tid),
            LinuxError::Unsupported(_) | LinuxError::UnknownPolicy(_) => KernelError::Unsupported(msg),
            LinuxError::InvalidInput(_) => KernelError::Invalid(msg),
            LinuxError::Parse { .. } => KernelError::Other(msg),
        }
    }
}

/// The kernel's `struct sched_attr` (include/uapi/linux/sched/types.h), version 1 (56 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SchedAttr {
    /// Size of the structure as the caller knows it; set to [`SCHED_ATTR_SIZE_VER1`].
    pub size: u32,
    /// `SCHED_*` policy.
    pub sched_policy: u32,
    /// `SCHED_FLAG_*` bits.
    pub sched_flags: u64,
    /// Nice value for SCHED_OTHER/SCHED_BATCH (-20..=19).
    pub sched_nice: i32,
    /// Static priority for SCHED_FIFO/SCHED_RR (1..=99), 0 otherwise.
    pub sched_priority: u32,
    /// SCHED_DEADLINE runtime, ns. Since Linux 6.12 this is also a SCHED_OTHER/BATCH task's
    /// requested slice (0 = the default; `sched_getattr` reports the slice in effect), which is
    /// why [`SchedAttr::to_policy`] ignores it for those policies.
    pub sched_runtime: u64,
    /// SCHED_DEADLINE relative deadline, ns.
    pub sched_deadline: u64,
    /// SCHED_DEADLINE period, ns (0 means period = deadline).
    pub sched_period: u64,
    /// Utilization clamp minimum (0..=1024), used with [`SCHED_FLAG_UTIL_CLAMP_MIN`].
    pub sched_util_min: u32,
    /// Utilization clamp maximum (0..=1024), used with [`SCHED_FLAG_UTIL_CLAMP_MAX`].
    pub sched_util_max: u32,
}

// The layout must match the kernel's byte for byte: the kernel reads `size` bytes from us.
const _: () = assert!(std::mem::size_of::<SchedAttr>() == SCHED_ATTR_SIZE_VER1 as usize);

impl SchedAttr {
    /// An all-zero attribute (SCHED_OTHER, nice 0) with `size` filled in.
    pub fn new() -> SchedAttr {
        SchedAttr {
            size: SCHED_ATTR_SIZE_VER1,
            ..SchedAttr::default()
        }
    }

    /// The attribute that sets `policy`, with `SCHED_FLAG_RESET_ON_FORK` added when
    /// `reset_on_fork` is true (for reservations, the reservation's own flags are kept too).
    pub fn from_policy(policy: &Policy, reset_on_fork: bool) -> SchedAttr {
        let mut a = SchedAttr::new();
        match *policy {
            Policy::Other { nice } => {
                a.sched_policy = SCHED_OTHER;
                a.sched_nice = nice;
            }
            Policy::Idle => a.sched_policy = SCHED_IDLE,
            Policy::Batch { nice } => {
                a.sched_policy = SCHED_BATCH;
                a.sched_nice = nice;
            }
            Policy::Fifo { priority } => {
                a.sched_policy = SCHED_FIFO;
                a.sched_priority = u32::from(priority);
            }
            Policy::Rr { priority } => {
                a.sched_policy = SCHED_RR;
                a.sched_priority = u32::from(priority);
            }
            Policy::Deadline(r) => {
                a.sched_policy = SCHED_DEADLINE;
                a.sched_flags = r.flags.bits();
                a.sched_runtime = r.runtime.0;
                a.sched_deadline = r.deadline.0;
                a.sched_period = r.period.0;
            }
        }
        if reset_on_fork {
            a.sched_flags |= SCHED_FLAG_RESET_ON_FORK;
        }
        a
    }

    /// Whether `SCHED_FLAG_RESET_ON_FORK` is set.
    pub fn reset_on_fork(&self) -> bool {
        self.sched_flags & SCHED_FLAG_RESET_ON_FORK != 0
    }

    /// The pacer [`Policy`] this attribute describes; [`LinuxError::UnknownPolicy`] for
    /// policies pacer does not model (SCHED_EXT, future ones). Priorities above 255 (which the
    /// kernel never reports) are an error rather than silently truncated.
    pub fn to_policy(&self) -> Result<Policy, LinuxError> {
        let prio = || {
            u8::try_from(self.sched_priority).map_err(|_| {
                LinuxError::InvalidInput(format!("priority {} out of range", self.sched_priority))
            })
        };
        Ok(match self.sched_policy {
            SCHED_OTHER => Policy::Other {
                nice: self.sched_nice,
            },
            SCHED_IDLE => Policy::Idle,
            SCHED_BATCH => Policy::Batch {
                nice: self.sched_nice,
            },
            SCHED_FIFO => Policy::Fifo { priority: prio()? },
            SCHED_RR => Policy::Rr { priority: prio()? },
            SCHED_DEADLINE => Policy::Deadline(Reservation {
                runtime: Duration(self.sched_runtime),
                deadline: Duration(self.sched_deadline),
                period: Duration(self.sched_period),
                flags: ReservationFlags {
                    reset_on_fork: self.sched_flags & SCHED_FLAG_RESET_ON_FORK != 0,
                    reclaim: self.sched_flags & SCHED_FLAG_RECLAIM != 0,
                    overrun: self.sched_flags & SCHED_FLAG_DL_OVERRUN != 0,
                },
            }),
            other => return Err(LinuxError::UnknownPolicy(other)),
        })
    }
}

impl TryFrom<&SchedAttr> for Policy {
    type Error = LinuxError;
    fn try_from(a: &SchedAttr) -> Result<Policy, LinuxError> {
        a.to_policy()
    }
}

/// Converts a [`Tid`] to the kernel's `pid_t`, refusing values that would turn negative (a
/// negative pid has other meanings in some syscalls).
fn pid_t(tid: Tid) -> Result<libc::pid_t, LinuxError> {
    libc::pid_t::try_from(tid).map_err(|_| LinuxError::InvalidInput(format!("thread id {tid} out of range")))
}

/// The calling thread's id (`gettid(2)`).
pub fn gettid() -> Tid {
    // SAFETY: gettid takes no arguments, cannot fail and touches no memory.
    let t = unsafe { libc::syscall(libc::SYS_gettid) };
    // Thread ids are positive pid_t values, so this conversion never fails in practice.
    Tid::try_from(t).unwrap_or(0)
}

/// `sched_setattr(tid, attr, 0)`. `tid` 0 is the calling thread. The `size` field is forced to
/// [`SCHED_ATTR_SIZE_VER1`] so a caller cannot make the kernel read past the structure.
pub fn set_attr(tid: Tid, attr: &SchedAttr) -> Result<(), LinuxError> {
    let pid = pid_t(tid)?;
    let a = SchedAttr {
        size: SCHED_ATTR_SIZE_VER1,
        ..*attr
    };
    // SAFETY: `a` is a live, properly aligned #[repr(C)] struct of exactly `a.size` bytes that the
    // kernel only reads; the flags argument must be 0.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, pid, &a as *const SchedAttr, 0u32) };
    if r != 0 {
        return Err(LinuxError::syscall("sched_setattr", tid));
    }
    Ok(())
}

/// `sched_getattr(tid, attr, 56, 0)`: the thread's current policy and parameters.
pub fn get_attr(tid: Tid) -> Result<SchedAttr, LinuxError> {
    let pid = pid_t(tid)?;
    let mut a = SchedAttr::new();
    // SAFETY: `a` is a live, writable #[repr(C)] struct of SCHED_ATTR_SIZE_VER1 bytes and we pass
    // that size, so the kernel writes at most that many bytes; flags must be 0.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            pid,
            &mut a as *mut SchedAttr,
            SCHED_ATTR_SIZE_VER1,
            0u32,
        )
    };
    if r != 0 {
        return Err(LinuxError::syscall("sched_getattr", tid));
    }
    Ok(a)
}

/// Sets a thread's policy (and reservation). pacer passes `reset_on_fork = true` for every
/// reservation it makes, since a SCHED_DEADLINE thread without it cannot create threads.
/// Admission refusals come back as a `Syscall` error with errno EBUSY
/// (→ [`KernelError::Admission`]).
///
/// A thread leaving SCHED_DEADLINE by another thread's hand goes through [`shrink_reservation`]
/// first; see there for the kernel behaviour this avoids. A thread demoting itself does not.
pub fn set_policy(tid: Tid, policy: Policy, reset_on_fork: bool) -> Result<(), LinuxError> {
    // A thread demoting itself is running, so the leak `shrink_reservation` avoids (a sleeping
    // thread moved by another) cannot happen; and parking it would throttle it: with its runtime
    // nearly spent it would get the next 1024 ns only 4.19 s later, too little for the
    // demotion's own system call (seen in CI: `pacer run`'s writer thread stuck for minutes at
    // 1024 ns / 4.19 s while `pacer exec` held it).
    let own = tid == 0 || tid == gettid();
    if !own && !matches!(policy, Policy::Deadline(_)) {
        let current = get_attr(tid)?;
        if current.sched_policy == SCHED_DEADLINE {
            shrink_reservation(tid, &current)?;
        }
    }
    set_attr(tid, &SchedAttr::from_policy(&policy, reset_on_fork))
}

/// Period of the reservation a thread passes through on its way out of SCHED_DEADLINE: the
/// longest the kernel accepts, capped at the default maximum (4.19 s).
fn parking_period() -> u64 {
    let max_us = std::fs::read_to_string("/proc/sys/kernel/sched_deadline_period_max_us")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(DEFAULT_PERIOD_MAX.0 / 1000);
    max_us.saturating_mul(1000).min(DEFAULT_PERIOD_MAX.0)
}

/// Changes a SCHED_DEADLINE thread's reservation to 1024 ns every `parking_period()` (4.19 s), whose
/// bandwidth rounds to 0 in the kernel's 20-bit fixed point (1024·2²⁰ / 4.19 s < 1).
///
/// Why (observed on Linux 6.18 in pacer's VM, documented in docs/linux.md): moving a *sleeping*
/// SCHED_DEADLINE thread whose 0-lag time has passed to another policy from a different thread
/// leaves its bandwidth in the root domain's admission accounting (`dl_bw->total_bw` in
/// /sys/kernel/debug/sched/debug never goes back down: `switched_from_dl()` defers the release to
/// the inactive timer, which is no longer armed), so later reservations are refused. A
/// parameter change, by contrast, swaps the bandwidth in the accounting at once, whatever the
/// thread's state. After this step the demotion has nothing left to leak. The thread keeps its
/// current runtime and deadline until the demotion that follows, so it is not throttled by it.
///
/// A thread that has died (a zombie, not yet reaped) is refused with ESRCH, as a thread that is
/// gone: `cgroup_exit()` already took it out of its cpuset's count of SCHED_DEADLINE tasks, and
/// a policy change now would take it out a second time (`switched_from_dl()`). The count goes
/// negative, and from then on every root-domain rebuild skips that cpuset's SCHED_DEADLINE
/// tasks whenever their number equals the deficit, so `total_bw` under-counts and admission
/// control admits too much, until reboot (observed on Linux 6.18, docs/linux.md).
pub fn shrink_reservation(tid: Tid, current: &SchedAttr) -> Result<(), LinuxError> {
    if crate::procfs::is_dead(tid) == Some(true) {
        return Err(LinuxError::Syscall {
            op: "sched_setattr",
            target: tid,
            source: io::Error::from_raw_os_error(libc::ESRCH),
        });
    }
    let period = parking_period();
    let parked = SchedAttr {
        sched_runtime: DL_MIN_RUNTIME_NS,
        sched_deadline: period,
        sched_period: period,
        ..*current
    };
    set_attr(tid, &parked)
}

/// Everything the scheduler keeps about a thread that pacer may change, so that giving a thread
/// back restores it field by field: policy, flags (RESET_ON_FORK as it was), nice, priority,
/// SCHED_DEADLINE parameters, the EEVDF slice (Linux ≥ 6.12), utilisation clamps and CPU
/// affinity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadSched {
    pub attr: SchedAttr,
    pub affinity: Vec<usize>,
}

impl ThreadSched {
    /// The thread's state now.
    pub fn read(tid: Tid) -> Result<ThreadSched, LinuxError> {
        Ok(ThreadSched {
            attr: get_attr(tid)?,
            affinity: get_affinity(tid)?,
        })
    }

    /// The policy as pacer models it (errors for SCHED_BATCH and other unmodelled policies).
    pub fn policy(&self) -> Result<Policy, LinuxError> {
        self.attr.to_policy()
    }

    /// One line of text: `POLICY FLAGS NICE PRIORITY RUNTIME DEADLINE PERIOD UTIL_MIN UTIL_MAX
    /// CPULIST` (numbers as the kernel's fields), for the guardian's pipe and session files.
    pub fn encode(&self) -> String {
        let a = &self.attr;
        let cpus: Vec<String> = self.affinity.iter().map(|c| c.to_string()).collect();
        format!(
            "{} {} {} {} {} {} {} {} {} {}",
            a.sched_policy,
            a.sched_flags,
            a.sched_nice,
            a.sched_priority,
            a.sched_runtime,
            a.sched_deadline,
            a.sched_period,
            a.sched_util_min,
            a.sched_util_max,
            if cpus.is_empty() {
                "-".to_string()
            } else {
                cpus.join(",")
            }
        )
    }

    /// Inverse of [`ThreadSched::encode`]; `None` for anything else.
    pub fn decode(words: &[&str]) -> Option<ThreadSched> {
        if words.len() != 10 {
            return None;
        }
        let n = |i: usize| words[i].parse::<u64>().ok();
        let n32 = |i: usize| words[i].parse::<u32>().ok();
        let affinity = if words[9] == "-" {
            Vec::new()
        } else {
            words[9]
                .split(',')
                .map(|c| c.parse::<usize>().ok().filter(|&c| c < MAX_CPUS))
                .collect::<Option<Vec<_>>>()?
        };
        Some(ThreadSched {
            attr: SchedAttr {
                size: SCHED_ATTR_SIZE_VER1,
                sched_policy: n32(0)?,
                sched_flags: n(1)?,
                sched_nice: words[2].parse().ok().filter(|n| (-20..=19).contains(n))?,
                sched_priority: n32(3).filter(|&p| p <= 99)?,
                sched_runtime: n(4)?,
                sched_deadline: n(5)?,
                sched_period: n(6)?,
                sched_util_min: n32(7)?,
                sched_util_max: n32(8)?,
            },
            affinity,
        })
    }

    /// The fields in which `self` and `other` differ, as `field: a -> b` (empty when equal).
    pub fn differences(&self, other: &ThreadSched) -> Vec<String> {
        let (a, b) = (&self.attr, &other.attr);
        let fields: [(&str, i128, i128); 9] = [
            ("policy", a.sched_policy.into(), b.sched_policy.into()),
            ("flags", a.sched_flags.into(), b.sched_flags.into()),
            ("nice", a.sched_nice.into(), b.sched_nice.into()),
            ("priority", a.sched_priority.into(), b.sched_priority.into()),
            ("runtime", a.sched_runtime.into(), b.sched_runtime.into()),
            ("deadline", a.sched_deadline.into(), b.sched_deadline.into()),
            ("period", a.sched_period.into(), b.sched_period.into()),
            ("util_min", a.sched_util_min.into(), b.sched_util_min.into()),
            ("util_max", a.sched_util_max.into(), b.sched_util_max.into()),
        ];
        let mut out: Vec<String> = fields
            .iter()
            .filter(|(_, x, y)| x != y)
            .map(|(name, x, y)| format!("{name}: {x} -> {y}"))
            .collect();
        if self.affinity != other.affinity {
            out.push(format!("affinity: {:?} -> {:?}", self.affinity, other.affinity));
        }
        out
    }
}

/// The EEVDF slice `sched_getattr` reports for a SCHED_OTHER thread that never asked for one:
/// this process's own first thread, read once (pacer never sets a slice on itself).
pub(crate) fn default_slice() -> u64 {
    static SLICE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SLICE.get_or_init(|| {
        // SAFETY: getpid takes no arguments and cannot fail.
        let pid = unsafe { libc::getpid() } as Tid;
        get_attr(pid).map(|a| a.sched_runtime).unwrap_or(0)
    })
}

/// Gives a thread back exactly the state in `orig` (as read by [`ThreadSched::read`] before pacer
/// first changed it): leaves SCHED_DEADLINE through [`shrink_reservation`], then sets policy,
/// flags, nice, priority and parameters, then the affinity if it differs.
///
/// Utilisation clamps are not passed: the kernel keeps a thread's own (user-defined) clamps
/// across policy changes and resets the default ones, so leaving them out restores both. On
/// Linux ≥ 6.12 `sched_getattr` reports a SCHED_OTHER thread's slice in `sched_runtime` whether
/// or not it asked for one; a slice equal to the default is written back as 0 ("no custom
/// slice"), any other as the custom slice it was.
pub fn restore(tid: Tid, orig: &ThreadSched) -> Result<(), LinuxError> {
    let current = get_attr(tid)?;
    if current.sched_policy == SCHED_DEADLINE && orig.attr.sched_policy != SCHED_DEADLINE {
        shrink_reservation(tid, &current)?;
    }
    let mut a = orig.attr;
    a.sched_flags &= !(SCHED_FLAG_UTIL_CLAMP_MIN
        | SCHED_FLAG_UTIL_CLAMP_MAX
        | SCHED_FLAG_KEEP_POLICY
        | SCHED_FLAG_KEEP_PARAMS);
    if matches!(a.sched_policy, SCHED_OTHER | SCHED_BATCH) && a.sched_runtime == default_slice() {
        a.sched_runtime = 0;
    }
    if matches!(a.sched_policy, SCHED_OTHER | SCHED_BATCH | SCHED_IDLE) {
        a.sched_deadline = 0;
        a.sched_period = 0;
    }
    set_attr(tid, &a)?;
    if !orig.affinity.is_empty() && get_affinity(tid)? != orig.affinity {
        set_affinity(tid, &orig.affinity)?;
    }
    Ok(())
}

/// A thread's current policy as a pacer [`Policy`].
pub fn get_policy(tid: Tid) -> Result<Policy, LinuxError> {
    get_attr(tid)?.to_policy()
}

/// Words of the affinity bit mask (`MAX_CPUS` bits).
const MASK_WORDS: usize = MAX_CPUS / 64;

/// Builds the kernel's affinity bit mask from a CPU list.
fn cpus_to_mask(cpus: &[usize]) -> Result<[u64; MASK_WORDS], LinuxError> {
    if cpus.is_empty() {
        return Err(LinuxError::InvalidInput("empty CPU list".into()));
    }
    let mut mask = [0u64; MASK_WORDS];
    for &c in cpus {
        if c >= MAX_CPUS {
            return Err(LinuxError::InvalidInput(format!("CPU {c} ≥ {MAX_CPUS}")));
        }
        mask[c / 64] |= 1 << (c % 64);
    }
    Ok(mask)
}

/// The CPUs set in an affinity bit mask, ascending.
fn mask_to_cpus(mask: &[u64]) -> Vec<usize> {
    let mut cpus = Vec::new();
    for (w, &bits) in mask.iter().enumerate() {
        for b in 0..64 {
            if bits & (1 << b) != 0 {
                cpus.push(w * 64 + b);
            }
        }
    }
    cpus
}

/// `sched_setaffinity(tid, cpus)`. Note that a SCHED_DEADLINE thread's affinity must cover its
/// whole root domain (the kernel answers EBUSY/EPERM otherwise).
pub fn set_affinity(tid: Tid, cpus: &[usize]) -> Result<(), LinuxError> {
    let pid = pid_t(tid)?;
    let mask = cpus_to_mask(cpus)?;
    // SAFETY: `mask` is a live buffer of exactly `size_of_val(&mask)` bytes that the kernel reads.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_setaffinity,
            pid,
            std::mem::size_of_val(&mask),
            mask.as_ptr(),
        )
    };
    if r != 0 {
        return Err(LinuxError::syscall("sched_setaffinity", tid));
    }
    Ok(())
}

/// `sched_getaffinity(tid)`: the CPUs the thread may run on, ascending.
pub fn get_affinity(tid: Tid) -> Result<Vec<usize>, LinuxError> {
    let pid = pid_t(tid)?;
    let mut mask = [0u64; MASK_WORDS];
    // SAFETY: `mask` is a live, writable buffer of `size_of_val(&mask)` bytes; the raw syscall
    // writes at most that many bytes and returns how many it wrote.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getaffinity,
            pid,
            std::mem::size_of_val(&mask),
            mask.as_mut_ptr(),
        )
    };
    if r < 0 {
        return Err(LinuxError::syscall("sched_getaffinity", tid));
    }
    Ok(mask_to_cpus(&mask))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dl(rt_us: u64, dl_us: u64, p_us: u64, flags: ReservationFlags) -> Policy {
        Policy::Deadline(Reservation {
            runtime: Duration::from_us(rt_us),
            deadline: Duration::from_us(dl_us),
            period: Duration::from_us(p_us),
            flags,
        })
    }

    #[test]
    fn layout_matches_the_kernel() {
        assert_eq!(std::mem::size_of::<SchedAttr>(), 56);
        assert_eq!(std::mem::offset_of!(SchedAttr, sched_flags), 8);
        assert_eq!(std::mem::offset_of!(SchedAttr, sched_nice), 16);
        assert_eq!(std::mem::offset_of!(SchedAttr, sched_runtime), 24);
        assert_eq!(std::mem::offset_of!(SchedAttr, sched_period), 40);
        assert_eq!(std::mem::offset_of!(SchedAttr, sched_util_max), 52);
    }

    #[test]
    fn deadline_round_trip_and_flags() {
        let flags = ReservationFlags {
            reset_on_fork: false,
            reclaim: true,
            overrun: false,
        };
        let p = dl(1000, 10_000, 10_000, flags);
        let a = SchedAttr::from_policy(&p, true);
        assert_eq!(a.size, 56);
        assert_eq!(a.sched_policy, SCHED_DEADLINE);
        assert_eq!(a.sched_runtime, 1_000_000);
        assert_eq!(a.sched_deadline, 10_000_000);
        assert_eq!(a.sched_period, 10_000_000);
        assert_eq!(a.sched_flags, SCHED_FLAG_RECLAIM | SCHED_FLAG_RESET_ON_FORK);
        assert_eq!(a.sched_priority, 0);
        // Reading back reports reset_on_fork as a reservation flag.
        let back = Policy::try_from(&a).unwrap();
        let want = dl(
            1000,
            10_000,
            10_000,
            ReservationFlags {
                reset_on_fork: true,
                ..flags
            },
        );
        assert_eq!(back, want);
        // Without reset_on_fork only the reservation's own flags are set.
        let a = SchedAttr::from_policy(&p, false);
        assert_eq!(a.sched_flags, SCHED_FLAG_RECLAIM);
        assert!(!a.reset_on_fork());
    }

    #[test]
    fn other_policies_round_trip() {
        for p in [
            Policy::Other { nice: -5 },
            Policy::Other { nice: 19 },
            Policy::Idle,
            Policy::Fifo { priority: 50 },
            Policy::Rr { priority: 1 },
        ] {
            let a = SchedAttr::from_policy(&p, false);
            assert_eq!(a.sched_flags, 0);
            assert_eq!(a.to_policy().unwrap(), p);
        }
        let a = SchedAttr::from_policy(&Policy::Fifo { priority: 99 }, true);
        assert_eq!(
            (a.sched_policy, a.sched_priority, a.sched_flags),
            (SCHED_FIFO, 99, 1)
        );
        assert_eq!(SchedAttr::from_policy(&Policy::Idle, false).sched_policy, 5);
        assert_eq!(
            SchedAttr::from_policy(&Policy::Rr { priority: 3 }, false).sched_policy,
            2
        );
    }

    #[test]
    fn unrepresentable_attrs_are_errors_not_panics() {
        let mut a = SchedAttr::new();
        a.sched_policy = SCHED_BATCH;
        assert_eq!(a.to_policy().unwrap(), Policy::Batch { nice: 0 });
        a.sched_policy = 42;
        assert!(matches!(a.to_policy(), Err(LinuxError::UnknownPolicy(42))));
        a.sched_policy = SCHED_FIFO;
        a.sched_priority = 300;
        assert!(matches!(a.to_policy(), Err(LinuxError::InvalidInput(_))));
        assert!(matches!(pid_t(u32::MAX), Err(LinuxError::InvalidInput(_))));
    }

    #[test]
    fn errno_mapping() {
        let sys = |errno| LinuxError::Syscall {
            op: "sched_setattr",
            target: 7,
            source: io::Error::from_raw_os_error(errno),
        };
        assert!(matches!(
            KernelError::from(sys(libc::EBUSY)),
            KernelError::Admission(_)
        ));
        assert!(matches!(
            KernelError::from(sys(libc::EINVAL)),
            KernelError::Invalid(_)
        ));
        assert_eq!(KernelError::from(sys(libc::ESRCH)), KernelError::NoSuchThread(7));
        assert!(matches!(
            KernelError::from(sys(libc::EPERM)),
            KernelError::Permission(_)
        ));
        assert!(matches!(KernelError::from(sys(libc::EIO)), KernelError::Other(_)));
        let msg = KernelError::from(sys(libc::EBUSY)).to_string();
        assert!(msg.contains("sched_setattr(7)"), "{msg}");
        assert!(matches!(
            KernelError::from(LinuxError::Unsupported("cpufreq".into())),
            KernelError::Unsupported(_)
        ));
        assert_eq!(sys(libc::EBUSY).errno(), Some(libc::EBUSY));
    }

    #[test]
    fn affinity_masks() {
        let m = cpus_to_mask(&[0, 3, 64, 1023]).unwrap();
        assert_eq!(m[0], 0b1001);
        assert_eq!(m[1], 1);
        assert_eq!(mask_to_cpus(&m), vec![0, 3, 64, 1023]);
        assert!(matches!(cpus_to_mask(&[]), Err(LinuxError::InvalidInput(_))));
        assert!(matches!(cpus_to_mask(&[1024]), Err(LinuxError::InvalidInput(_))));
    }
}
