//! Exclusive cpusets for partitioned and clustered runs: each partition is its own
//! SCHED_DEADLINE *root domain*, so a reserved thread may be confined to a subset of the CPUs and
//! admission control counts only that subset's bandwidth.
//!
//! Why: a SCHED_DEADLINE thread's affinity must cover its whole root domain (sched_setattr(2)
//! answers EPERM otherwise), so `sched_setaffinity` cannot build partitioned or clustered EDF;
//! Documentation/scheduler/sched-deadline.rst §5 says to create restricted root domains with the
//! cpuset controller instead, and gives the recipes followed here:
//!
//! - **cgroup v1** (§5.1, and Documentation/admin-guide/cgroup-v1/cpusets.rst §1.7 on
//!   `sched_load_balance`): one child cpuset per partition with `cpuset.cpus`, `cpuset.mems`
//!   (copied from the root: v1 refuses tasks while it is empty), `cpuset.cpu_exclusive = 1` and
//!   `cpuset.sched_load_balance = 1`; the root gets `cpuset.cpu_exclusive = 1` and
//!   `cpuset.sched_load_balance = 0`, so the kernel builds one sched domain — one root domain —
//!   per balanced child instead of one over all CPUs. `mem_exclusive` is *not* set (the §5.1
//!   example does): two partitions on a one-node machine would conflict, and it plays no part in
//!   root domains. CPUs not in any partition are left without load balancing and share the
//!   default root domain; cover every CPU with partitions for clustered runs.
//! - **cgroup v2** (§5.2, Documentation/admin-guide/cgroup-v2.rst "Cpuset"): `+cpuset` in the
//!   root's `cgroup.subtree_control`, one child per partition with `cpuset.cpus` and
//!   `cpuset.cpus.partition = root` (or `isolated`: no load balancing inside). The kernel accepts
//!   the write and reports problems by reading back `root invalid (reason)`, so the value is
//!   read back and anything but the requested word is [`CpusetError::Rejected`].
//!
//! Moving work in: v1 takes single threads (`tasks`, TIDs) or whole processes (`cgroup.procs`);
//! v2 only whole processes (`cgroup.procs`) — moving single threads needs *threaded* cgroups
//! inside the process's own domain, which pacer does not create, so
//! [`Partitioning::move_thread`] answers [`CpusetError::Unsupported`] on v2.
//! [`Partitioning::join_on_spawn`] starts a command inside a partition (written from the child
//! before exec), which is the reliable way: **measured on Linux 6.18 (v1)**, a thread that is
//! asleep when moved keeps its old CPU until it next wakes, and `sched_setattr(SCHED_DEADLINE)`
//! on it fails with EPERM until then (admission looks at the root domain of the CPU it last ran
//! on, whose span its new affinity does not cover).
//!
//! What is changed and restored: the root knobs above are read first and written back on
//! teardown ([`Partitioning::teardown`], or [`Drop`]), in reverse order and only if pacer changed
//! them; every task still in a partition is moved back to the root, a moved thread's affinity
//! is set back to what it was before the move (a thread still SCHED_DEADLINE keeps its
//! reservation: the kernel re-admits it in the root's domain), and the directories are removed.
//! The saved
//! values are also written to a state file (`/run/pacer/cpuset-PID.state`) before anything is
//! changed. On SIGKILL (no destructor runs) the partitions survive with their tasks confined and
//! the root knobs changed; [`CpusetHierarchy::cleanup_stale`] — run automatically by the next
//! [`Partitioning::create`] — moves the tasks back, removes directories named
//! `pacer-<pid>-<name>` whose pid is dead (or recycled: the state file records the process
//! start time) and restores the knobs from the dead process's state file. It is idempotent.
//! Only one partitioning per hierarchy exists at a time (system-wide), since a second one would
//! save the first one's values as "previous".
//!
//! Also here: [`CpusetHierarchy::rebuild_root_domains`] (v1 root `sched_load_balance` 1→0→1,
//! which makes the kernel recompute every root domain's deadline bandwidth from the tasks that
//! really are SCHED_DEADLINE — the recovery for leaked bandwidth, see docs/linux.md) and
//! [`read_dl_bandwidth`], which reads each CPU's root-domain `dl_bw` from
//! `/sys/kernel/debug/sched/debug`.
//!
//! Mounts are found in `/proc/self/mountinfo` (proc(5), [`crate::sys::mounts`]);
//! [`CpusetHierarchy::new`] takes any root directory instead, which is how the v2 logic is tested
//! against fake trees on this v1 machine.
//!
//! Layout: [`mount`] (finding the hierarchy), [`v1`] and [`v2`] (each interface's files and
//! recipe), [`partition`] (creating partitions and moving work in), [`recovery`] (teardown, which
//! waits for the deadline accounting to settle, clean-up of what a killed run left, the claims
//! that keep one partitioning per hierarchy). `pacer_linux::cpuset` is this module under its old
//! name, and re-exports the CPU-list and mountinfo helpers of [`crate::sys`] and the debugfs
//! bandwidth read-out of [`crate::sched_debug`] it used to hold.

pub mod mount;
pub mod partition;
pub mod recovery;
pub mod taskgroup;
pub mod v1;
pub mod v2;

#[cfg(test)]
mod fake;

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::sched::{LinuxError, Tid};

pub use crate::sched_debug::{
    debugfs_for_now, ensure_debugfs, parse_sched_debug, read_dl_bandwidth, total_bw_of, DebugfsMount,
    DlBandwidth, SCHED_DEBUG,
};
pub use crate::sys::{format_cpu_list, parse_cpu_list, parse_mountinfo, MountInfo};
pub use mount::detect;
pub use partition::{Partition, PartitionKind, PartitionSpec, Partitioning};
pub(crate) use recovery::SavedState;
pub use recovery::{cleanup_stale, CleanupReport};
pub use v1::rebuild_root_domains;

/// Directory-name prefix of every cpuset pacer creates: `pacer-<pid>-<name>`.
pub const PARTITION_PREFIX: &str = "pacer-";
/// Where the saved knob values live while a partitioning exists (tmpfs on most systems).
pub const DEFAULT_STATE_DIR: &str = "/run/pacer";
/// The file of processes, in both versions.
pub(super) const PROCS: &str = "cgroup.procs";

/// Which cgroup interface the cpuset controller is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

impl CgroupVersion {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            CgroupVersion::V1 => "v1",
            CgroupVersion::V2 => "v2",
        }
    }
}

/// Why a cpuset operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CpusetError {
    /// No usable cpuset controller, or an operation this cgroup version does not offer.
    #[error("not supported here: {0}")]
    Unsupported(String),
    /// Reading, writing, creating or removing a cgroup file or directory failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A cgroup or debug file had unexpected content.
    #[error("{}: cannot parse {what} from {content:?}", path.display())]
    Parse {
        path: PathBuf,
        what: &'static str,
        content: String,
    },
    /// The requested partitions are malformed (caught before anything is changed).
    #[error("invalid partitioning: {0}")]
    Invalid(String),
    /// cgroup v2 accepted the partition write but did not make the cgroup a valid partition.
    #[error("the kernel did not make {} a partition: cpuset.cpus.partition reads {state:?}", dir.display())]
    Rejected { dir: PathBuf, state: String },
    /// The thread or process to move does not exist.
    #[error("no such thread {tid} ({})", path.display())]
    NoSuchThread { tid: Tid, path: PathBuf },
    /// Another live partitioning (of pacer process `pid`) holds the hierarchy.
    #[error(
        "{} is already partitioned by pacer process {pid} (one partitioning per hierarchy at a time; \
         if that process is gone, cleanup_stale removes its leftovers)",
        root.display()
    )]
    Busy { root: PathBuf, pid: u32 },
    /// Teardown or clean-up did every step it could, but some failed; the state file is kept so
    /// a later [`CpusetHierarchy::cleanup_stale`] can finish.
    #[error("{what} of {} incomplete: {}", root.display(), errors.join("; "))]
    Incomplete {
        what: &'static str,
        root: PathBuf,
        errors: Vec<String>,
    },
}

impl CpusetError {
    pub(crate) fn io(op: &'static str, path: &Path, source: io::Error) -> CpusetError {
        CpusetError::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }

    /// The errno behind the error, if any.
    pub fn errno(&self) -> Option<i32> {
        match self {
            CpusetError::Io { source, .. } => source.raw_os_error(),
            CpusetError::NoSuchThread { .. } => Some(libc::ESRCH),
            _ => None,
        }
    }
}

impl From<CpusetError> for LinuxError {
    /// Keeps the errno and path where there is one, so the `KernelError` classification of
    /// [`LinuxError`] (EACCES → Permission, …) still applies.
    fn from(e: CpusetError) -> LinuxError {
        match e {
            CpusetError::Unsupported(m) => LinuxError::Unsupported(m),
            CpusetError::Io { path, source, .. } => LinuxError::Io { path, source },
            CpusetError::Parse { path, what, content } => LinuxError::Parse { path, what, content },
            CpusetError::Invalid(_) | CpusetError::Rejected { .. } => LinuxError::InvalidInput(e.to_string()),
            CpusetError::NoSuchThread { tid, path } => LinuxError::NoSuchThread { tid, path },
            CpusetError::Busy { ref root, .. } => LinuxError::Io {
                path: root.clone(),
                source: io::Error::new(io::ErrorKind::ResourceBusy, e.to_string()),
            },
            CpusetError::Incomplete { ref root, .. } => LinuxError::Io {
                path: root.clone(),
                source: io::Error::other(e.to_string()),
            },
        }
    }
}

impl From<CpusetError> for pacer_adapt::KernelError {
    fn from(e: CpusetError) -> pacer_adapt::KernelError {
        LinuxError::from(e).into()
    }
}

// ---- the hierarchy --------------------------------------------------------------------------

/// A fake kernel for unit tests: sees every write first and may handle it (`Some`) instead of
/// the plain file write.
#[cfg(test)]
pub(super) type FakeKernel = std::sync::Arc<dyn Fn(&Path, &str) -> Option<io::Result<()>> + Send + Sync>;

/// A mounted cpuset hierarchy: its root directory and cgroup version.
#[derive(Clone)]
pub struct CpusetHierarchy {
    pub(super) version: CgroupVersion,
    pub(super) root: PathBuf,
    pub(super) state_dir: PathBuf,
    /// The root is not on cgroupfs (a fake tree): control files must be created on write and
    /// removed before rmdir, as the kernel would do.
    pub(super) fake: bool,
    #[cfg(test)]
    pub(super) kernel: Option<FakeKernel>,
}

impl std::fmt::Debug for CpusetHierarchy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpusetHierarchy")
            .field("version", &self.version)
            .field("root", &self.root)
            .field("state_dir", &self.state_dir)
            .field("fake", &self.fake)
            .finish()
    }
}

impl CpusetHierarchy {
    /// A hierarchy rooted at `root` (a real mount or a fake tree), with state files in
    /// [`DEFAULT_STATE_DIR`].
    pub fn new(version: CgroupVersion, root: impl Into<PathBuf>) -> CpusetHierarchy {
        let root = root.into();
        CpusetHierarchy {
            version,
            fake: !mount::on_cgroupfs(&root),
            root,
            state_dir: PathBuf::from(DEFAULT_STATE_DIR),
            #[cfg(test)]
            kernel: None,
        }
    }

    /// Keeps state files in `dir` instead of [`DEFAULT_STATE_DIR`] (tests, or systems without
    /// a writable /run).
    pub fn with_state_dir(mut self, dir: impl Into<PathBuf>) -> CpusetHierarchy {
        self.state_dir = dir.into();
        self
    }

    /// The cgroup version.
    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    /// The hierarchy's root directory (the parent of every partition).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where state files are kept.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    #[cfg(test)]
    pub(super) fn with_fake_kernel(mut self, k: FakeKernel) -> CpusetHierarchy {
        self.kernel = Some(k);
        self
    }

    pub(super) fn read(&self, path: &Path) -> Result<String, CpusetError> {
        fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .map_err(|e| CpusetError::io("read", path, e))
    }

    /// One value per `write(2)`, as cgroupfs expects. Control files are never created on the
    /// real cgroupfs (a missing knob must be an error, not an EACCES from O_CREAT).
    pub(super) fn write(&self, path: &Path, value: &str) -> Result<(), CpusetError> {
        #[cfg(test)]
        if let Some(k) = &self.kernel {
            if let Some(r) = k(path, value) {
                return r.map_err(|e| CpusetError::io("write", path, e));
            }
        }
        let mut f = fs::OpenOptions::new()
            .write(true)
            .truncate(self.fake)
            .create(self.fake)
            .open(path)
            .map_err(|e| CpusetError::io("open", path, e))?;
        f.write_all(value.as_bytes())
            .map_err(|e| CpusetError::io("write", path, e))
    }

    /// Ids listed one per line in a cgroup file; a missing file (a removed cgroup, or a fake
    /// tree not written yet) is an empty list.
    pub(super) fn read_ids(&self, path: &Path) -> Result<Vec<Tid>, CpusetError> {
        let text = match fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(CpusetError::io("read", path, e)),
        };
        text.split_whitespace()
            .map(|w| {
                w.parse().map_err(|_| CpusetError::Parse {
                    path: path.to_path_buf(),
                    what: "task ids",
                    content: text.chars().take(200).collect(),
                })
            })
            .collect()
    }

    pub(super) fn read_cpus(&self, path: &Path) -> Result<Vec<usize>, CpusetError> {
        let text = self.read(path)?;
        parse_cpu_list(&text).ok_or(CpusetError::Parse {
            path: path.to_path_buf(),
            what: "CPU list",
            content: text.chars().take(200).collect(),
        })
    }

    /// The CPUs the root may give to partitions (its effective CPUs).
    pub fn cpus(&self) -> Result<Vec<usize>, CpusetError> {
        match self.version {
            CgroupVersion::V1 => {
                // effective_cpus excludes offline CPUs; very old kernels only have cpus.
                let eff = self.root.join(v1::EFFECTIVE_CPUS);
                if eff.exists() {
                    self.read_cpus(&eff)
                } else {
                    self.read_cpus(&self.root.join(v1::CPUS))
                }
            }
            CgroupVersion::V2 => self.read_cpus(&self.root.join(v2::EFFECTIVE_CPUS)),
        }
    }

    /// The file listing (and accepting) single threads of a cgroup: v1 `tasks`, v2
    /// `cgroup.threads`.
    pub(super) fn threads_file(&self, dir: &Path) -> PathBuf {
        dir.join(match self.version {
            CgroupVersion::V1 => v1::TASKS,
            CgroupVersion::V2 => v2::THREADS,
        })
    }

    /// Moves every task of cgroup `dir` to the root: v1 thread by thread (`tasks`), v2 process by
    /// process (`cgroup.procs`). Repeats while tasks appear (a task may fork meanwhile); a task
    /// that exits on the way is not an error. Returns how many were moved.
    pub(super) fn evacuate(&self, dir: &Path) -> Result<usize, CpusetError> {
        let (list, dest) = match self.version {
            CgroupVersion::V1 => (dir.join(v1::TASKS), self.root.join(v1::TASKS)),
            CgroupVersion::V2 => (dir.join(PROCS), self.root.join(PROCS)),
        };
        let mut moved = 0;
        for _ in 0..10 {
            let ids = self.read_ids(&list)?;
            if ids.is_empty() {
                return Ok(moved);
            }
            for id in ids {
                match self.write(&dest, &id.to_string()) {
                    Ok(()) => moved += 1,
                    Err(e) if e.errno() == Some(libc::ESRCH) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let left = self.read_ids(&list)?;
        if left.is_empty() {
            return Ok(moved);
        }
        Err(CpusetError::Incomplete {
            what: "moving tasks back",
            root: self.root.clone(),
            errors: vec![format!("{} still holds {left:?}", dir.display())],
        })
    }

    /// Removes a (now empty) cgroup directory. A cgroup whose last task just exited may stay
    /// busy for a moment (the task is released after it is reaped), hence a few retries.
    pub(super) fn remove_cgroup(&self, dir: &Path) -> Result<(), CpusetError> {
        match self.version {
            CgroupVersion::V2 => {
                // Dissolve the partition first so its CPUs return to the parent in one known
                // step; best effort, since rmdir dissolves it too.
                let _ = self.write(&dir.join(v2::PARTITION), "member");
            }
            CgroupVersion::V1 => {
                // rmdir of a load-balanced v1 cpuset rebuilds the root domains later, from a
                // workqueue (measured here: ~25 ms after the remover exited). A rebuild while
                // any SCHED_DEADLINE thread on the machine is between its exit and its 0-lag
                // time subtracts that thread's bandwidth twice (docs/linux.md), and at that
                // point nobody is watching. Clearing the flag first rebuilds now, in the state
                // the caller has just checked; the offline then has nothing to rebuild.
                let _ = self.write(&dir.join(v1::LOAD_BALANCE), "0");
            }
        }
        let mut last = None;
        for _ in 0..50 {
            match fs::remove_dir(dir) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                // A fake tree holds the control files as real files.
                Err(_) if self.fake => {
                    return fs::remove_dir_all(dir).map_err(|e| CpusetError::io("remove", dir, e));
                }
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    last = Some(e);
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(e) => return Err(CpusetError::io("rmdir", dir, e)),
            }
        }
        Err(CpusetError::io(
            "rmdir",
            dir,
            last.unwrap_or_else(|| io::Error::from_raw_os_error(libc::EBUSY)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_conversions() {
        use pacer_adapt::KernelError;
        let io = CpusetError::Io {
            op: "write",
            path: "/x".into(),
            source: io::Error::from_raw_os_error(libc::EACCES),
        };
        assert_eq!(io.errno(), Some(libc::EACCES));
        assert!(matches!(KernelError::from(io), KernelError::Permission(_)));
        let busy = CpusetError::Busy {
            root: "/r".into(),
            pid: 7,
        };
        assert!(busy.to_string().contains("pacer process 7"));
        assert!(matches!(KernelError::from(busy), KernelError::Other(_)));
        assert!(matches!(
            KernelError::from(CpusetError::Rejected {
                dir: "/d".into(),
                state: "root invalid".into()
            }),
            KernelError::Invalid(_)
        ));
        assert_eq!(
            KernelError::from(CpusetError::NoSuchThread {
                tid: 3,
                path: "/t".into()
            }),
            KernelError::NoSuchThread(3)
        );
        assert!(matches!(
            LinuxError::from(CpusetError::Unsupported("v2".into())),
            LinuxError::Unsupported(_)
        ));
    }
}
