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
//! Mounts are found in `/proc/self/mountinfo` (proc(5)); [`CpusetHierarchy::new`] takes any root
//! directory instead, which is how the v2 logic is tested against fake trees on this v1 machine.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use crate::procfs::{boot_id, process_alive, process_start as proc_start};
use crate::sched::{get_affinity, set_affinity, LinuxError, Tid};

/// Directory-name prefix of every cpuset pacer creates: `pacer-<pid>-<name>`.
pub const PARTITION_PREFIX: &str = "pacer-";
/// Where the saved knob values live while a partitioning exists (tmpfs on most systems).
pub const DEFAULT_STATE_DIR: &str = "/run/pacer";
/// The scheduler debug file with each CPU's root-domain deadline bandwidth.
pub const SCHED_DEBUG: &str = "/sys/kernel/debug/sched/debug";

const DEBUGFS: &str = "/sys/kernel/debug";
const STATE_MAGIC: &str = "pacer-cpuset-state 1";

// cgroup v1 cpuset files.
const V1_CPUS: &str = "cpuset.cpus";
const V1_EFFECTIVE_CPUS: &str = "cpuset.effective_cpus";
const V1_MEMS: &str = "cpuset.mems";
const V1_EFFECTIVE_MEMS: &str = "cpuset.effective_mems";
const V1_CPU_EXCLUSIVE: &str = "cpuset.cpu_exclusive";
const V1_LOAD_BALANCE: &str = "cpuset.sched_load_balance";
const V1_TASKS: &str = "tasks";
// cgroup v2 files.
const V2_CONTROLLERS: &str = "cgroup.controllers";
const V2_SUBTREE: &str = "cgroup.subtree_control";
const V2_CPUS: &str = "cpuset.cpus";
const V2_EFFECTIVE_CPUS: &str = "cpuset.cpus.effective";
const V2_PARTITION: &str = "cpuset.cpus.partition";
const V2_THREADS: &str = "cgroup.threads";
// Both.
const PROCS: &str = "cgroup.procs";

/// `statfs` magic numbers of cgroupfs (v1) and cgroup2.
const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// Roots this process has partitioned right now (see [`Partitioning::create`]).
static CLAIMS: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

/// Which cgroup interface the cpuset controller is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

impl CgroupVersion {
    fn as_str(self) -> &'static str {
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
    fn io(op: &'static str, path: &Path, source: io::Error) -> CpusetError {
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

// ---- /proc/self/mountinfo -------------------------------------------------------------------

/// One line of `/proc/self/mountinfo` (proc(5)), the fields pacer needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountInfo {
    /// Field 4: the directory of the file system mounted here (`/` for a whole cgroup hierarchy;
    /// something else for a bind mount of a sub-tree, as in containers).
    pub root: String,
    /// Field 5: where it is mounted.
    pub mount_point: PathBuf,
    /// The file system type after the `-` separator (`cgroup`, `cgroup2`, `debugfs`, …).
    pub fstype: String,
    /// The source after the type.
    pub source: String,
    /// The per-superblock options (for cgroup v1: the controllers, e.g. `rw,cpuset`).
    pub super_options: Vec<String>,
}

/// Parses `/proc/self/mountinfo`. Malformed lines are skipped; octal escapes (`\040` for a
/// space) in paths are decoded.
pub fn parse_mountinfo(text: &str) -> Vec<MountInfo> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            // id parent major:minor root mount-point options [optional…] - type source super
            let sep = fields.iter().position(|f| *f == "-")?;
            if sep < 6 || fields.len() < sep + 3 {
                return None;
            }
            Some(MountInfo {
                root: crate::trace::unescape_mount_path(fields[3]),
                mount_point: PathBuf::from(crate::trace::unescape_mount_path(fields[4])),
                fstype: fields[sep + 1].to_string(),
                source: crate::trace::unescape_mount_path(fields[sep + 2]),
                super_options: fields
                    .get(sep + 3)
                    .map(|o| o.split(',').map(str::to_string).collect())
                    .unwrap_or_default(),
            })
        })
        .collect()
}

// ---- CPU lists ------------------------------------------------------------------------------

/// Parses a kernel CPU list ("0-3,6", or space-separated as in cpufreq's `related_cpus`; empty
/// for an empty set) into ascending, distinct CPUs; None when malformed. The one CPU-list parser
/// of the crate (cpufreq and the tracer use it too).
pub fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut cpus = BTreeSet::new();
    for part in s
        .split(|c: char| c == ',' || c.is_ascii_whitespace())
        .filter(|p| !p.is_empty())
    {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                // Bounded so a hostile "0-4294967295" cannot allocate gigabytes.
                if b < a || b >= crate::sched::MAX_CPUS {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => {
                let c: usize = part.trim().parse().ok()?;
                if c >= crate::sched::MAX_CPUS {
                    return None;
                }
                cpus.insert(c);
            }
        }
    }
    Some(cpus.into_iter().collect())
}

/// Formats CPUs as the kernel's compact list ("0-3,6").
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let set: BTreeSet<usize> = cpus.iter().copied().collect();
    let mut out: Vec<String> = Vec::new();
    let mut it = set.into_iter().peekable();
    while let Some(start) = it.next() {
        let mut end = start;
        while it.peek() == Some(&(end + 1)) {
            end += 1;
            it.next();
        }
        out.push(if end == start {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    out.join(",")
}

// ---- the hierarchy --------------------------------------------------------------------------

/// A fake kernel for unit tests: sees every write first and may handle it (`Some`) instead of
/// the plain file write.
#[cfg(test)]
type FakeKernel = std::sync::Arc<dyn Fn(&Path, &str) -> Option<io::Result<()>> + Send + Sync>;

/// A mounted cpuset hierarchy: its root directory and cgroup version.
#[derive(Clone)]
pub struct CpusetHierarchy {
    version: CgroupVersion,
    root: PathBuf,
    state_dir: PathBuf,
    /// The root is not on cgroupfs (a fake tree): control files must be created on write and
    /// removed before rmdir, as the kernel would do.
    fake: bool,
    #[cfg(test)]
    kernel: Option<FakeKernel>,
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

/// Whether `path` is on cgroupfs or cgroup2 (`statfs(2)` magic).
fn on_cgroupfs(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: an all-zero statfs is a valid value of this plain C struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a live, writable statfs.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    #[allow(clippy::unnecessary_cast)] // f_type's type differs between architectures
    let magic = st.f_type as i64;
    magic == CGROUP_SUPER_MAGIC || magic == CGROUP2_SUPER_MAGIC
}

/// The pid in a directory name `pacer-<pid>-<name>`.
fn partition_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PARTITION_PREFIX)?;
    let (pid, part) = rest.split_once('-')?;
    if part.is_empty() {
        return None;
    }
    pid.parse().ok()
}

impl CpusetHierarchy {
    /// A hierarchy rooted at `root` (a real mount or a fake tree), with state files in
    /// [`DEFAULT_STATE_DIR`].
    pub fn new(version: CgroupVersion, root: impl Into<PathBuf>) -> CpusetHierarchy {
        let root = root.into();
        CpusetHierarchy {
            version,
            fake: !on_cgroupfs(&root),
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

    /// Finds the cpuset controller from `/proc/self/mountinfo`: a cgroup2 mount whose
    /// `cgroup.controllers` lists `cpuset`, else the cgroup v1 hierarchy with the `cpuset`
    /// option (a controller is on one of them only).
    pub fn detect() -> Result<CpusetHierarchy, CpusetError> {
        let path = Path::new("/proc/self/mountinfo");
        let text = fs::read_to_string(path).map_err(|e| CpusetError::io("read", path, e))?;
        CpusetHierarchy::detect_in(&text)
    }

    /// [`detect`](Self::detect) on given mountinfo text (the listed mount points are read).
    pub fn detect_in(mountinfo: &str) -> Result<CpusetHierarchy, CpusetError> {
        let mounts = parse_mountinfo(mountinfo);
        let mut subtree = None;
        let v2 = mounts.iter().filter(|m| m.fstype == "cgroup2").find(|m| {
            fs::read_to_string(m.mount_point.join(V2_CONTROLLERS))
                .is_ok_and(|c| c.split_whitespace().any(|w| w == "cpuset"))
        });
        let v1 = mounts
            .iter()
            .filter(|m| m.fstype == "cgroup" && m.super_options.iter().any(|o| o == "cpuset"));
        for (version, m) in v2
            .map(|m| (CgroupVersion::V2, m))
            .into_iter()
            .chain(v1.map(|m| (CgroupVersion::V1, m)))
        {
            // A bind mount of a sub-tree (containers) does not give access to the top cpuset,
            // whose knobs decide the root domains.
            if m.root != "/" {
                subtree.get_or_insert_with(|| (m.mount_point.clone(), m.root.clone()));
                continue;
            }
            return Ok(CpusetHierarchy::new(version, &m.mount_point));
        }
        Err(CpusetError::Unsupported(match subtree {
            Some((mp, root)) => format!(
                "the cpuset hierarchy is only mounted as its sub-tree {root} at {} \
                 (pacer needs the top cpuset, e.g. outside a container)",
                mp.display()
            ),
            None => "no cpuset controller in /proc/self/mountinfo: neither a cgroup v1 hierarchy with \
                     the cpuset option nor a cgroup2 mount listing cpuset in cgroup.controllers"
                .to_string(),
        }))
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
    fn with_fake_kernel(mut self, k: FakeKernel) -> CpusetHierarchy {
        self.kernel = Some(k);
        self
    }

    fn read(&self, path: &Path) -> Result<String, CpusetError> {
        fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .map_err(|e| CpusetError::io("read", path, e))
    }

    /// One value per `write(2)`, as cgroupfs expects. Control files are never created on the
    /// real cgroupfs (a missing knob must be an error, not an EACCES from O_CREAT).
    fn write(&self, path: &Path, value: &str) -> Result<(), CpusetError> {
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
    fn read_ids(&self, path: &Path) -> Result<Vec<Tid>, CpusetError> {
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

    fn read_cpus(&self, path: &Path) -> Result<Vec<usize>, CpusetError> {
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
                let eff = self.root.join(V1_EFFECTIVE_CPUS);
                if eff.exists() {
                    self.read_cpus(&eff)
                } else {
                    self.read_cpus(&self.root.join(V1_CPUS))
                }
            }
            CgroupVersion::V2 => self.read_cpus(&self.root.join(V2_EFFECTIVE_CPUS)),
        }
    }

    /// The file listing (and accepting) single threads of a cgroup: v1 `tasks`, v2
    /// `cgroup.threads`.
    fn threads_file(&self, dir: &Path) -> PathBuf {
        dir.join(match self.version {
            CgroupVersion::V1 => V1_TASKS,
            CgroupVersion::V2 => V2_THREADS,
        })
    }

    /// Moves every task of cgroup `dir` to the root: v1 thread by thread (`tasks`), v2 process by
    /// process (`cgroup.procs`). Repeats while tasks appear (a task may fork meanwhile); a task
    /// that exits on the way is not an error. Returns how many were moved.
    fn evacuate(&self, dir: &Path) -> Result<usize, CpusetError> {
        let (list, dest) = match self.version {
            CgroupVersion::V1 => (dir.join(V1_TASKS), self.root.join(V1_TASKS)),
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
    fn remove_cgroup(&self, dir: &Path) -> Result<(), CpusetError> {
        if self.version == CgroupVersion::V2 {
            // Dissolve the partition first so its CPUs return to the parent in one known step;
            // best effort, since rmdir dissolves it too.
            let _ = self.write(&dir.join(V2_PARTITION), "member");
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

    /// Directories `pacer-<pid>-*` directly under the root, with their pid.
    fn pacer_dirs(&self) -> Result<Vec<(u32, PathBuf)>, CpusetError> {
        let entries = fs::read_dir(&self.root).map_err(|e| CpusetError::io("list", &self.root, e))?;
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            if let Some(pid) = name.to_str().and_then(partition_owner) {
                if entry.path().is_dir() {
                    out.push((pid, entry.path()));
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// The `pacer-<pid>-*` cpusets whose pacer process is gone, without touching anything (what
    /// [`cleanup_stale`](Self::cleanup_stale) would remove); `pacer doctor` reports them.
    pub fn stale_partitions(&self) -> Result<Vec<PathBuf>, CpusetError> {
        let own = std::process::id();
        let states = self.state_files();
        let start_of = |pid: u32| {
            states
                .iter()
                .find(|(_, s)| s.pid == pid)
                .map(|(_, s)| s.starttime)
        };
        Ok(self
            .pacer_dirs()?
            .into_iter()
            .filter(|&(pid, _)| pid != own && !process_alive(pid, start_of(pid)))
            .map(|(_, dir)| dir)
            .collect())
    }

    /// The CPUs of each `pacer-<pid>-*` cpuset now (each is its own root domain while it exists).
    pub fn partition_cpus(&self) -> Result<Vec<Vec<usize>>, CpusetError> {
        let file = match self.version {
            CgroupVersion::V1 => "cpuset.cpus",
            CgroupVersion::V2 => "cpuset.cpus.effective",
        };
        Ok(self
            .pacer_dirs()?
            .into_iter()
            .filter_map(|(_, dir)| fs::read_to_string(dir.join(file)).ok())
            .filter_map(|t| parse_cpu_list(t.trim()))
            .filter(|c| !c.is_empty())
            .collect())
    }

    fn state_file(&self, pid: u32) -> PathBuf {
        self.state_dir.join(format!("cpuset-{pid}.state"))
    }

    /// State files in the state directory, parsed; unreadable or foreign files are skipped.
    fn state_files(&self) -> Vec<(PathBuf, SavedState)> {
        let Ok(entries) = fs::read_dir(&self.state_dir) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if !(name.starts_with("cpuset-") && name.ends_with(".state")) {
                continue;
            }
            if let Some(state) = fs::read_to_string(entry.path())
                .ok()
                .and_then(|t| SavedState::parse(&t))
            {
                out.push((entry.path(), state));
            }
        }
        out
    }

    /// Removes the leftovers of pacer processes that are gone (killed by SIGKILL, or whose
    /// teardown failed): moves every task of each `pacer-<pid>-*` cpuset whose process is dead
    /// back to the root, removes the directory, then restores the root knobs that process had
    /// saved (only when all its directories are gone, and only from a state file of this boot and
    /// this hierarchy). Idempotent: a second call finds nothing to do.
    pub fn cleanup_stale(&self) -> Result<CleanupReport, CpusetError> {
        // Held throughout, so a Partitioning of this process being created meanwhile is never
        // mistaken for a leftover.
        let claims = claims();
        self.cleanup_stale_locked(claims.contains(&self.root))
    }

    /// [`cleanup_stale`](Self::cleanup_stale) with the claims lock held by the caller;
    /// `claimed_here` says whether this process has a live partitioning of this root.
    fn cleanup_stale_locked(&self, claimed_here: bool) -> Result<CleanupReport, CpusetError> {
        let own = std::process::id();
        let boot = boot_id();
        let mut report = CleanupReport::default();
        let mut errors = Vec::new();
        let mut states = Vec::new();
        for (file, state) in self.state_files() {
            if state.boot_id != boot {
                // From an earlier boot: its cgroups and its pid mean nothing any more.
                match fs::remove_file(&file) {
                    Ok(()) => report.state_files_removed += 1,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => errors.push(CpusetError::io("remove", &file, e).to_string()),
                }
            } else if state.root == self.root {
                states.push((file, state));
            }
        }
        let start_of = |pid: u32| {
            states
                .iter()
                .find(|(_, s)| s.pid == pid)
                .map(|(_, s)| s.starttime)
        };
        let dead = |pid: u32| {
            if pid == own {
                // Our own leftovers are stale unless a live Partitioning of ours holds the root.
                !claimed_here
            } else {
                !process_alive(pid, start_of(pid))
            }
        };
        let mut failed_pids = BTreeSet::new();
        for (pid, dir) in self.pacer_dirs()? {
            if !dead(pid) {
                continue;
            }
            let step = self
                .evacuate(&dir)
                .and_then(|n| self.remove_cgroup(&dir).map(|()| n));
            match step {
                Ok(n) => {
                    report.tasks_moved += n;
                    report.removed.push(dir);
                }
                Err(e) => {
                    failed_pids.insert(pid);
                    errors.push(e.to_string());
                }
            }
        }
        for (file, state) in &states {
            if !dead(state.pid) || failed_pids.contains(&state.pid) {
                continue;
            }
            let mut restored = true;
            for (knob, value) in state.restore.iter().rev() {
                let path = self.root.join(knob);
                match self.write(&path, value) {
                    Ok(()) => report.knobs_restored.push((path, value.clone())),
                    Err(e) => {
                        restored = false;
                        errors.push(e.to_string());
                    }
                }
            }
            if !restored {
                // Kept, so a later clean-up can try again.
                continue;
            }
            match fs::remove_file(file) {
                Ok(()) => report.state_files_removed += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => errors.push(CpusetError::io("remove", file, e).to_string()),
            }
        }
        if errors.is_empty() {
            Ok(report)
        } else {
            Err(CpusetError::Incomplete {
                what: "stale clean-up",
                root: self.root.clone(),
                errors,
            })
        }
    }

    /// Rebuilds every root domain's SCHED_DEADLINE bandwidth accounting by toggling the v1 root
    /// `cpuset.sched_load_balance` 1 → 0 → 1: each toggle makes the kernel rebuild the sched
    /// domains and recompute `dl_bw->total_bw` from the tasks that are SCHED_DEADLINE now, which
    /// drops bandwidth leaked by the kernel (docs/linux.md). Only done when the knob is 1;
    /// returns whether it toggled (0 means the hierarchy is partitioned: toggling would merge the
    /// partitions). Unsupported on v2, which has no such knob.
    pub fn rebuild_root_domains(&self) -> Result<bool, CpusetError> {
        if self.version != CgroupVersion::V1 {
            return Err(CpusetError::Unsupported(
                "rebuilding root domains needs the cgroup v1 root cpuset.sched_load_balance".into(),
            ));
        }
        let knob = self.root.join(V1_LOAD_BALANCE);
        if self.read(&knob)? != "1" {
            return Ok(false);
        }
        self.write(&knob, "0")?;
        // Restoring 1 must not be skipped: retry once, and say so if the root stays unbalanced.
        if let Err(first) = self.write(&knob, "1") {
            self.write(&knob, "1").map_err(|_| first)?;
        }
        Ok(true)
    }
}

/// [`CpusetHierarchy::detect`].
pub fn detect() -> Result<CpusetHierarchy, CpusetError> {
    CpusetHierarchy::detect()
}

/// [`CpusetHierarchy::cleanup_stale`] on the detected hierarchy.
pub fn cleanup_stale() -> Result<CleanupReport, CpusetError> {
    CpusetHierarchy::detect()?.cleanup_stale()
}

/// [`CpusetHierarchy::rebuild_root_domains`] on the detected hierarchy.
pub fn rebuild_root_domains() -> Result<bool, CpusetError> {
    CpusetHierarchy::detect()?.rebuild_root_domains()
}

/// What [`CpusetHierarchy::cleanup_stale`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanupReport {
    /// Stale partition directories removed.
    pub removed: Vec<PathBuf>,
    /// Tasks moved back to the root from them.
    pub tasks_moved: usize,
    /// Root knobs written back (file, value).
    pub knobs_restored: Vec<(PathBuf, String)>,
    /// State files of dead processes deleted.
    pub state_files_removed: usize,
}

impl CleanupReport {
    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.knobs_restored.is_empty() && self.state_files_removed == 0
    }
}

fn claims() -> std::sync::MutexGuard<'static, BTreeSet<PathBuf>> {
    CLAIMS.lock().unwrap_or_else(|e| e.into_inner())
}

// ---- saved state ----------------------------------------------------------------------------

/// What a partitioning must undo, as kept on disk for after a SIGKILL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SavedState {
    boot_id: String,
    pid: u32,
    /// Process start time (ticks since boot): tells a recycled pid from the owner.
    starttime: u64,
    version: CgroupVersion,
    root: PathBuf,
    /// (knob file relative to the root, value to write back), in the order they were changed.
    restore: Vec<(String, String)>,
}

impl SavedState {
    pub(crate) fn render(&self) -> Option<String> {
        let root = self.root.to_str().filter(|r| !r.contains('\n'))?;
        let mut s = format!(
            "{STATE_MAGIC}\nboot_id {}\npid {}\nstarttime {}\nversion {}\nroot {root}\n",
            self.boot_id,
            self.pid,
            self.starttime,
            self.version.as_str()
        );
        for (k, v) in &self.restore {
            s.push_str(&format!("restore {k} {v}\n"));
        }
        Some(s)
    }

    pub(crate) fn parse(text: &str) -> Option<SavedState> {
        let mut lines = text.lines();
        if lines.next()? != STATE_MAGIC {
            return None;
        }
        let (mut boot_id, mut pid, mut starttime, mut version, mut root) = (None, None, None, None, None);
        let mut restore = Vec::new();
        for line in lines {
            let (key, value) = line.split_once(' ')?;
            match key {
                "boot_id" => boot_id = Some(value.to_string()),
                "pid" => pid = value.parse().ok(),
                "starttime" => starttime = value.parse().ok(),
                "version" => {
                    version = match value {
                        "v1" => Some(CgroupVersion::V1),
                        "v2" => Some(CgroupVersion::V2),
                        _ => None,
                    }
                }
                "root" => root = Some(PathBuf::from(value)),
                "restore" => {
                    let (k, v) = value.split_once(' ')?;
                    // Only knob names directly in the root: a corrupt file must not make
                    // clean-up write elsewhere.
                    if k.contains('/') || k.starts_with('.') {
                        return None;
                    }
                    restore.push((k.to_string(), v.to_string()));
                }
                _ => return None,
            }
        }
        Some(SavedState {
            boot_id: boot_id?,
            pid: pid?,
            starttime: starttime?,
            version: version?,
            root: root?,
            restore,
        })
    }
}

// ---- partitions -----------------------------------------------------------------------------

/// The kind of cgroup v2 partition; cgroup v1 only has [`PartitionKind::Root`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PartitionKind {
    /// Its own root domain with load balancing inside (v2 `root`; v1 exclusive cpuset with
    /// `sched_load_balance = 1`): partitioned EDF on one CPU, clustered EDF on several.
    #[default]
    Root,
    /// v2 `isolated`: no load balancing inside. Its CPUs get no sched domain, so (as with v1
    /// CPUs outside every balanced cpuset) SCHED_DEADLINE should account them in the kernel's
    /// default root domain — not verified here, this VM has no v2 cpuset; use it for one-CPU
    /// partitions only.
    Isolated,
}

/// A partition to create: a name (letters, digits, `_`, `.`, `-`; at most 64) and its CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionSpec {
    pub name: String,
    pub cpus: Vec<usize>,
    pub kind: PartitionKind,
}

impl PartitionSpec {
    /// A [`PartitionKind::Root`] partition.
    pub fn new(name: impl Into<String>, cpus: &[usize]) -> PartitionSpec {
        PartitionSpec {
            name: name.into(),
            cpus: cpus.to_vec(),
            kind: PartitionKind::Root,
        }
    }
}

/// A partition that exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    name: String,
    dir: PathBuf,
    cpus: Vec<usize>,
    kind: PartitionKind,
}

impl Partition {
    /// The name it was created with.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Its cgroup directory (`<root>/pacer-<pid>-<name>`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// Its CPUs, ascending.
    pub fn cpus(&self) -> &[usize] {
        &self.cpus
    }
    /// Its kind.
    pub fn kind(&self) -> PartitionKind {
        self.kind
    }
}

/// Checks names and CPU sets before anything is touched.
fn validate(specs: &[PartitionSpec], available: &[usize], version: CgroupVersion) -> Result<(), CpusetError> {
    if specs.is_empty() {
        return Err(CpusetError::Invalid("no partitions given".into()));
    }
    let mut names = BTreeSet::new();
    let mut used = BTreeSet::new();
    for s in specs {
        let ok_name = !s.name.is_empty()
            && s.name.len() <= 64
            && !s.name.starts_with('.')
            && s.name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
        if !ok_name {
            return Err(CpusetError::Invalid(format!(
                "partition name {:?}: use 1 to 64 letters, digits, '_', '.', '-' (not starting with '.')",
                s.name
            )));
        }
        if !names.insert(s.name.as_str()) {
            return Err(CpusetError::Invalid(format!(
                "partition name {:?} given twice",
                s.name
            )));
        }
        if s.cpus.is_empty() {
            return Err(CpusetError::Invalid(format!(
                "partition {:?} has no CPUs",
                s.name
            )));
        }
        for &c in &s.cpus {
            if !available.contains(&c) {
                return Err(CpusetError::Invalid(format!(
                    "partition {:?}: CPU {c} is not available (the root cpuset has {})",
                    s.name,
                    format_cpu_list(available)
                )));
            }
            if !used.insert(c) {
                return Err(CpusetError::Invalid(format!(
                    "CPU {c} is in two partitions (partitions must be disjoint)"
                )));
            }
        }
        if s.kind == PartitionKind::Isolated && version == CgroupVersion::V1 {
            return Err(CpusetError::Unsupported(format!(
                "partition {:?}: isolated partitions need cgroup v2 (on v1, CPUs without load \
                 balancing would all share the default root domain)",
                s.name
            )));
        }
    }
    Ok(())
}

/// A set of exclusive cpusets, each its own root domain, owned by this process; undone by
/// [`teardown`](Self::teardown) or on drop.
#[derive(Debug)]
pub struct Partitioning {
    hier: CpusetHierarchy,
    parts: Vec<Partition>,
    /// Root knobs changed: (file relative to the root, value to restore), in change order.
    saved: Vec<(String, String)>,
    /// Affinity of each moved thread before its first move.
    affinity: Vec<(Tid, Vec<usize>)>,
    active: bool,
}

impl Partitioning {
    /// Creates the partitions (after [`CpusetHierarchy::cleanup_stale`]). Nothing is left
    /// changed when this fails. [`CpusetError::Busy`] when another live partitioning holds the
    /// hierarchy.
    pub fn create(hier: &CpusetHierarchy, specs: &[PartitionSpec]) -> Result<Partitioning, CpusetError> {
        validate(specs, &hier.cpus()?, hier.version)?;
        let own = std::process::id();
        {
            let mut claims = claims();
            if claims.contains(&hier.root) {
                return Err(CpusetError::Busy {
                    root: hier.root.clone(),
                    pid: own,
                });
            }
            // Holding the lock while cleaning keeps two threads of this process from racing.
            hier.cleanup_stale_locked(false)?;
            let other = hier
                .pacer_dirs()?
                .into_iter()
                .map(|(pid, _)| pid)
                .chain(
                    hier.state_files()
                        .into_iter()
                        .filter(|(_, s)| s.root == hier.root)
                        .map(|(_, s)| s.pid),
                )
                .find(|&pid| pid != own);
            if let Some(pid) = other {
                return Err(CpusetError::Busy {
                    root: hier.root.clone(),
                    pid,
                });
            }
            claims.insert(hier.root.clone());
        }
        // From here on, Drop undoes every step taken, including the claim.
        let mut p = Partitioning {
            hier: hier.clone(),
            parts: Vec::new(),
            saved: Vec::new(),
            affinity: Vec::new(),
            active: true,
        };
        p.setup(specs)?;
        Ok(p)
    }

    /// Root knob changes this partitioning makes: (file, wanted value, value to restore).
    fn root_changes(&self) -> Result<Vec<(&'static str, &'static str, String)>, CpusetError> {
        let root = &self.hier.root;
        Ok(match self.hier.version {
            CgroupVersion::V1 => {
                let mut out = Vec::new();
                for (knob, want) in [(V1_CPU_EXCLUSIVE, "1"), (V1_LOAD_BALANCE, "0")] {
                    let now = self.hier.read(&root.join(knob))?;
                    if now != want {
                        out.push((knob, want, now));
                    }
                }
                out
            }
            CgroupVersion::V2 => {
                let now = self.hier.read(&root.join(V2_SUBTREE))?;
                if now.split_whitespace().any(|c| c == "cpuset") {
                    Vec::new()
                } else {
                    vec![(V2_SUBTREE, "+cpuset", "-cpuset".to_string())]
                }
            }
        })
    }

    fn write_state(&self, restore: &[(String, String)]) -> Result<(), CpusetError> {
        let own = std::process::id();
        let state = SavedState {
            boot_id: boot_id(),
            pid: own,
            starttime: proc_start(own).map_or(0, |(s, _)| s),
            version: self.hier.version,
            root: self.hier.root.clone(),
            restore: restore.to_vec(),
        };
        let text = state.render().ok_or_else(|| {
            CpusetError::Invalid(format!(
                "hierarchy root {} is not a UTF-8 path without newlines",
                self.hier.root.display()
            ))
        })?;
        let dir = &self.hier.state_dir;
        fs::create_dir_all(dir).map_err(|e| CpusetError::io("create", dir, e))?;
        // Written whole then renamed, so clean-up never reads half a file.
        let file = self.hier.state_file(own);
        let tmp = file.with_extension("tmp");
        fs::write(&tmp, text).map_err(|e| CpusetError::io("write", &tmp, e))?;
        fs::rename(&tmp, &file).map_err(|e| CpusetError::io("rename", &file, e))
    }

    fn setup(&mut self, specs: &[PartitionSpec]) -> Result<(), CpusetError> {
        let changes = self.root_changes()?;
        let restore: Vec<(String, String)> = changes
            .iter()
            .map(|(k, _, old)| (k.to_string(), old.clone()))
            .collect();
        // Saved on disk before anything changes: a SIGKILL from here on is recoverable.
        self.write_state(&restore)?;
        let root = self.hier.root.clone();
        let change = |p: &mut Partitioning, knob: &str| -> Result<(), CpusetError> {
            if let Some((k, want, old)) = changes.iter().find(|(k, _, _)| *k == knob) {
                p.hier.write(&root.join(k), want)?;
                p.saved.push((k.to_string(), old.clone()));
            }
            Ok(())
        };
        match self.hier.version {
            CgroupVersion::V1 => change(self, V1_CPU_EXCLUSIVE)?,
            // The children have no cpuset files until the controller is enabled for them.
            CgroupVersion::V2 => change(self, V2_SUBTREE)?,
        }
        let mems = match self.hier.version {
            CgroupVersion::V1 => {
                let m = self.hier.read(&root.join(V1_MEMS))?;
                if m.is_empty() {
                    self.hier.read(&root.join(V1_EFFECTIVE_MEMS))?
                } else {
                    m
                }
            }
            CgroupVersion::V2 => String::new(),
        };
        for spec in specs {
            let dir = root.join(format!("{PARTITION_PREFIX}{}-{}", std::process::id(), spec.name));
            fs::create_dir(&dir).map_err(|e| CpusetError::io("mkdir", &dir, e))?;
            let mut cpus = spec.cpus.clone();
            cpus.sort_unstable();
            self.parts.push(Partition {
                name: spec.name.clone(),
                dir: dir.clone(),
                cpus,
                kind: spec.kind,
            });
            let list = format_cpu_list(&spec.cpus);
            match self.hier.version {
                CgroupVersion::V1 => {
                    self.hier.write(&dir.join(V1_CPUS), &list)?;
                    self.hier.write(&dir.join(V1_MEMS), &mems)?;
                    self.hier.write(&dir.join(V1_CPU_EXCLUSIVE), "1")?;
                    self.hier.write(&dir.join(V1_LOAD_BALANCE), "1")?;
                }
                CgroupVersion::V2 => {
                    self.hier.write(&dir.join(V2_CPUS), &list)?;
                    let want = match spec.kind {
                        PartitionKind::Root => "root",
                        PartitionKind::Isolated => "isolated",
                    };
                    let path = dir.join(V2_PARTITION);
                    self.hier.write(&path, want)?;
                    let state = self.hier.read(&path)?;
                    if state != want {
                        return Err(CpusetError::Rejected { dir, state });
                    }
                }
            }
        }
        if self.hier.version == CgroupVersion::V1 {
            // Last, so the kernel rebuilds the domains once, with every partition in place.
            change(self, V1_LOAD_BALANCE)?;
        }
        Ok(())
    }

    /// The hierarchy.
    pub fn hierarchy(&self) -> &CpusetHierarchy {
        &self.hier
    }

    /// The partitions, in creation order.
    pub fn partitions(&self) -> &[Partition] {
        &self.parts
    }

    /// The partition called `name`.
    pub fn get(&self, name: &str) -> Option<&Partition> {
        self.parts.iter().find(|p| p.name == name)
    }

    fn dir_of(&self, name: &str) -> Result<PathBuf, CpusetError> {
        if !self.active {
            return Err(CpusetError::Invalid("the partitioning has been torn down".into()));
        }
        self.get(name)
            .map(|p| p.dir.clone())
            .ok_or_else(|| CpusetError::Invalid(format!("no partition named {name:?}")))
    }

    /// Remembers a thread's affinity before its first move, to restore it on teardown.
    fn save_affinity(&mut self, tid: Tid) -> Result<(), LinuxError> {
        if !self.affinity.iter().any(|(t, _)| *t == tid) {
            let cpus = get_affinity(tid)?;
            self.affinity.push((tid, cpus));
        }
        Ok(())
    }

    /// Moves one thread into partition `name` (cgroup v1 `tasks`). The kernel sets its affinity
    /// to the partition's CPUs; a sleeping thread moves CPU only when it next wakes (see the
    /// module documentation). [`CpusetError::Unsupported`] on cgroup v2.
    pub fn move_thread(&mut self, name: &str, tid: Tid) -> Result<(), CpusetError> {
        let dir = self.dir_of(name)?;
        if self.hier.version == CgroupVersion::V2 {
            return Err(CpusetError::Unsupported(
                "cgroup v2 moves whole processes (cgroup.procs); moving single threads needs threaded \
                 cgroups, which pacer does not create: use move_process"
                    .into(),
            ));
        }
        let path = dir.join(V1_TASKS);
        let gone = |path: &Path| CpusetError::NoSuchThread {
            tid,
            path: path.to_path_buf(),
        };
        if tid == 0 {
            // 0 would mean "the writing thread" to the kernel.
            return Err(CpusetError::Invalid("thread id 0".into()));
        }
        self.save_affinity(tid).map_err(|e| match e.errno() {
            Some(libc::ESRCH) => gone(&path),
            _ => CpusetError::Invalid(e.to_string()),
        })?;
        self.hier
            .write(&path, &tid.to_string())
            .map_err(|e| match e.errno() {
                Some(libc::ESRCH) => gone(&path),
                _ => e,
            })
    }

    /// Moves a whole process (every thread, and its future children) into partition `name`
    /// (`cgroup.procs`, v1 and v2).
    pub fn move_process(&mut self, name: &str, pid: Tid) -> Result<(), CpusetError> {
        let dir = self.dir_of(name)?;
        let path = dir.join(PROCS);
        if pid == 0 {
            return Err(CpusetError::Invalid("process id 0".into()));
        }
        let gone = || CpusetError::NoSuchThread {
            tid: pid,
            path: path.clone(),
        };
        let threads = crate::procfs::threads_of(pid).map_err(|_| gone())?;
        for tid in threads {
            // A thread that exits meanwhile has nothing to restore.
            let _ = self.save_affinity(tid);
        }
        self.hier
            .write(&path, &pid.to_string())
            .map_err(|e| match e.errno() {
                Some(libc::ESRCH) => gone(),
                _ => e,
            })
    }

    /// The threads in partition `name` (v1 `tasks`, v2 `cgroup.threads`), ascending.
    pub fn threads(&self, name: &str) -> Result<Vec<Tid>, CpusetError> {
        let dir = self.dir_of(name)?;
        let mut ids = self.hier.read_ids(&self.hier.threads_file(&dir))?;
        ids.sort_unstable();
        Ok(ids)
    }

    /// The processes in partition `name` (`cgroup.procs`), ascending.
    pub fn processes(&self, name: &str) -> Result<Vec<Tid>, CpusetError> {
        let dir = self.dir_of(name)?;
        let mut ids = self.hier.read_ids(&dir.join(PROCS))?;
        ids.sort_unstable();
        Ok(ids)
    }

    /// Makes `cmd` start inside partition `name`: the child writes `0` ("myself") to the
    /// partition's `cgroup.procs` between fork and exec, so it runs on the partition's CPUs from
    /// its first instruction (and may be given SCHED_DEADLINE right away). Spawning fails if the
    /// write fails.
    pub fn join_on_spawn(&self, name: &str, cmd: &mut Command) -> Result<(), CpusetError> {
        use std::os::unix::process::CommandExt;
        let dir = self.dir_of(name)?;
        let path = dir.join(PROCS);
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| CpusetError::Invalid(format!("path {} contains NUL", path.display())))?;
        let hook = move || -> io::Result<()> {
            // Only async-signal-safe calls between fork and exec: open, write, close, errno.
            // SAFETY: `c_path` is a NUL-terminated string owned by the closure.
            let fd = unsafe { libc::open(c_path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: writes 1 byte from a static buffer to the descriptor opened above.
            let n = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
            let err = (n != 1).then(io::Error::last_os_error);
            // SAFETY: closes the descriptor opened above, once.
            unsafe { libc::close(fd) };
            err.map_or(Ok(()), Err)
        };
        // SAFETY: the hook only makes async-signal-safe syscalls and allocates nothing.
        unsafe {
            cmd.pre_exec(hook);
        }
        Ok(())
    }

    /// Undoes everything: moves every task left in a partition back to the root, restores moved
    /// threads' affinity, removes the directories, restores the root knobs, deletes the state
    /// file. Every step is attempted even when one fails; failures come back together as
    /// [`CpusetError::Incomplete`] (the state file is then kept for
    /// [`CpusetHierarchy::cleanup_stale`]).
    pub fn teardown(mut self) -> Result<(), CpusetError> {
        let errors = self.undo();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(CpusetError::Incomplete {
                what: "partition teardown",
                root: self.hier.root.clone(),
                errors,
            })
        }
    }

    fn undo(&mut self) -> Vec<String> {
        if !self.active {
            return Vec::new();
        }
        self.active = false;
        if !self.hier.fake {
            // Removing a partition rebuilds the root domains; a reservation of the command that
            // ended moments ago is still counted until its 0-lag time, and a rebuild before then
            // subtracts it twice (docs/linux.md). Wait for the accounting to settle: at most the
            // longest period the kernel accepts.
            let cpus: Vec<usize> = self.parts.iter().flat_map(|p| p.cpus.iter().copied()).collect();
            crate::audit::wait_consistent(&cpus, pacer_model::reservation::DEFAULT_PERIOD_MAX.0 + 10_000_000);
        }
        let mut errors = Vec::new();
        let mut removed_all = true;
        for part in self.parts.iter().rev() {
            let step = self
                .hier
                .evacuate(&part.dir)
                .and_then(|_| self.hier.remove_cgroup(&part.dir));
            if let Err(e) = step {
                removed_all = false;
                errors.push(e.to_string());
            }
        }
        // Back in the root, each thread got the root's CPUs; give back what it had. Failures are
        // not errors: the thread may have exited or changed its own affinity meanwhile.
        for (tid, cpus) in &self.affinity {
            let _ = set_affinity(*tid, cpus);
        }
        // Root knobs only once the partitions are gone: restoring sched_load_balance = 1 with
        // partitions left would silently merge them into one root domain.
        if removed_all {
            for (knob, value) in self.saved.iter().rev() {
                if let Err(e) = self.hier.write(&self.hier.root.join(knob), value) {
                    errors.push(e.to_string());
                }
            }
            if errors.is_empty() {
                let file = self.hier.state_file(std::process::id());
                if let Err(e) = fs::remove_file(&file) {
                    if e.kind() != io::ErrorKind::NotFound {
                        errors.push(CpusetError::io("remove", &file, e).to_string());
                    }
                }
            }
        }
        claims().remove(&self.hier.root);
        errors
    }
}

impl Drop for Partitioning {
    fn drop(&mut self) {
        // Best effort: a destructor cannot report; call teardown() to see failures.
        let _ = self.undo();
    }
}

// ---- deadline bandwidth per root domain -----------------------------------------------------

/// One CPU's view of its root domain's SCHED_DEADLINE bandwidth, from
/// `/sys/kernel/debug/sched/debug` (`dl_rq[cpu]`: `.dl_bw->bw`, `.dl_bw->total_bw`). Both are in
/// the kernel's 20-bit fixed point (2²⁰ = one CPU). Every CPU of a root domain reports the same
/// root-domain numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DlBandwidth {
    pub cpu: usize,
    /// Admission cap per CPU (`sched_rt_runtime_us / sched_rt_period_us`).
    pub bw: u64,
    /// Bandwidth admitted in the root domain (reservations plus fair servers on Linux ≥ 6.12).
    /// Signed: a corrupted accounting goes below zero (see [`crate::admission`]), and the
    /// kernel prints it so.
    pub total_bw: i64,
}

/// Parses the `dl_rq[N]:` sections of the scheduler debug file; sections without both values
/// are skipped.
pub fn parse_sched_debug(text: &str) -> Vec<DlBandwidth> {
    let mut out = Vec::new();
    let mut cur: Option<(usize, Option<u64>, Option<i64>)> = None;
    let mut flush = |cur: &mut Option<(usize, Option<u64>, Option<i64>)>| {
        if let Some((cpu, Some(bw), Some(total_bw))) = cur.take() {
            out.push(DlBandwidth { cpu, bw, total_bw });
        }
    };
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("dl_rq[") {
            flush(&mut cur);
            cur = rest
                .split_once(']')
                .and_then(|(n, _)| n.parse().ok())
                .map(|cpu| (cpu, None, None));
            continue;
        }
        if t.is_empty() || !t.starts_with('.') {
            // A new section (or the end of this one).
            if !t.is_empty() {
                flush(&mut cur);
            }
            continue;
        }
        let Some(c) = cur.as_mut() else { continue };
        let Some((key, value)) = t.split_once(':') else {
            continue;
        };
        // Kernels print these as signed or unsigned longs: accept both spellings of a value
        // (-1 and 18446744073709551615 are the same bits).
        let value = value.trim();
        let bits = value
            .parse::<u64>()
            .ok()
            .or_else(|| value.parse::<i64>().ok().map(|v| v as u64));
        match key.trim() {
            ".dl_bw->bw" => c.1 = bits,
            ".dl_bw->total_bw" => c.2 = bits.map(|b| b as i64),
            _ => {}
        }
    }
    flush(&mut cur);
    out
}

/// The admitted bandwidth of the root domain `cpu` belongs to.
pub fn total_bw_of(samples: &[DlBandwidth], cpu: usize) -> Option<i64> {
    samples.iter().find(|s| s.cpu == cpu).map(|s| s.total_bw)
}

/// Makes [`SCHED_DEBUG`] readable: mounts debugfs at /sys/kernel/debug when it is not mounted
/// (needs CAP_SYS_ADMIN).
pub fn ensure_debugfs() -> Result<PathBuf, CpusetError> {
    let file = PathBuf::from(SCHED_DEBUG);
    if file.exists() {
        return Ok(file);
    }
    let mounted = fs::read_to_string("/proc/self/mountinfo")
        .map(|t| {
            parse_mountinfo(&t)
                .iter()
                .any(|m| m.fstype == "debugfs" && m.mount_point == Path::new(DEBUGFS))
        })
        .unwrap_or(false);
    if !mounted {
        let (src, dir, kind) = (c"debugfs", c"/sys/kernel/debug", c"debugfs");
        // SAFETY: NUL-terminated static strings; data is null.
        let rc = unsafe { libc::mount(src.as_ptr(), dir.as_ptr(), kind.as_ptr(), 0, std::ptr::null()) };
        if rc != 0 {
            return Err(CpusetError::io(
                "mount debugfs at",
                Path::new(DEBUGFS),
                io::Error::last_os_error(),
            ));
        }
    }
    if file.exists() {
        Ok(file)
    } else {
        Err(CpusetError::Unsupported(format!(
            "{SCHED_DEBUG} missing although debugfs is mounted (kernel without scheduler debug)"
        )))
    }
}

/// debugfs mounted by [`debugfs_for_now`], unmounted when dropped.
#[derive(Debug)]
pub struct DebugfsMount(());

impl Drop for DebugfsMount {
    fn drop(&mut self) {
        // SAFETY: a NUL-terminated static path; MNT_DETACH so a reader still open cannot keep it.
        unsafe {
            libc::umount2(c"/sys/kernel/debug".as_ptr(), libc::MNT_DETACH);
        }
    }
}

/// Makes [`SCHED_DEBUG`] readable for as long as the returned guard lives: when debugfs was not
/// mounted, it is mounted now and unmounted again when the guard is dropped, so a command that
/// only looks leaves the machine as it found it (`None`: it was mounted already).
pub fn debugfs_for_now() -> Result<Option<DebugfsMount>, CpusetError> {
    if Path::new(SCHED_DEBUG).exists() {
        return Ok(None);
    }
    ensure_debugfs()?;
    Ok(Some(DebugfsMount(())))
}

/// Every CPU's root-domain deadline bandwidth, read now (mounting debugfs if needed).
pub fn read_dl_bandwidth() -> Result<Vec<DlBandwidth>, CpusetError> {
    let path = ensure_debugfs()?;
    let text = fs::read_to_string(&path).map_err(|e| CpusetError::io("read", &path, e))?;
    let v = parse_sched_debug(&text);
    if v.is_empty() {
        return Err(CpusetError::Parse {
            path,
            what: "dl_rq[N] sections with .dl_bw->bw and .dl_bw->total_bw",
            content: text.chars().take(200).collect(),
        });
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A pid above any possible pid_max (2²² = 4 194 304): never alive.
    const DEAD_PID: u32 = 4_194_400;

    type Log = Arc<Mutex<Vec<(String, String)>>>;

    /// Moves `id` into the cgroup whose `file` (tasks / cgroup.procs) is `path`: removed from
    /// every other cgroup of the fake tree, appended here — what the kernel does on a write.
    fn move_id(root: &Path, file: &str, path: &Path, id: &str) -> io::Result<()> {
        let dir = path.parent().unwrap();
        if !dir.is_dir() {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        let mut dirs = vec![root.to_path_buf()];
        for e in fs::read_dir(root)?.flatten() {
            if e.path().is_dir() {
                dirs.push(e.path());
            }
        }
        for d in dirs {
            for f in [file, "tasks", "cgroup.procs"] {
                let p = d.join(f);
                if let Ok(t) = fs::read_to_string(&p) {
                    let kept: Vec<&str> = t.lines().filter(|l| *l != id).collect();
                    fs::write(&p, kept.iter().map(|l| format!("{l}\n")).collect::<String>())?;
                }
            }
        }
        let mut t = fs::read_to_string(path).unwrap_or_default();
        t.push_str(&format!("{id}\n"));
        fs::write(path, t)
    }

    /// A fake cgroup kernel: task moves, `+cpuset`/`-cpuset`, and v2 partition validation
    /// (overlap with a sibling partition, or `reject_partitions`, gives "root invalid (…)").
    fn fake_kernel(root: PathBuf, log: Log, reject_partitions: bool) -> FakeKernel {
        Arc::new(move |path: &Path, value: &str| {
            let rel = path.strip_prefix(&root).unwrap().to_string_lossy().into_owned();
            log.lock().unwrap().push((rel, value.to_string()));
            let file = path.file_name()?.to_str()?.to_string();
            Some(match file.as_str() {
                "tasks" | "cgroup.procs" => move_id(&root, &file, path, value),
                "cgroup.subtree_control" => match value {
                    "+cpuset" => fs::write(path, "cpuset\n"),
                    "-cpuset" => fs::write(path, "\n"),
                    _ => Err(io::Error::from_raw_os_error(libc::EINVAL)),
                },
                "cpuset.cpus.partition" => {
                    let dir = path.parent().unwrap();
                    let mine = parse_cpu_list(&fs::read_to_string(dir.join("cpuset.cpus")).unwrap()).unwrap();
                    let overlap = fs::read_dir(&root).unwrap().flatten().any(|e| {
                        e.path() != dir
                            && fs::read_to_string(e.path().join("cpuset.cpus.partition"))
                                .is_ok_and(|p| p.trim() == "root")
                            && fs::read_to_string(e.path().join("cpuset.cpus"))
                                .ok()
                                .and_then(|c| parse_cpu_list(&c))
                                .is_some_and(|c| c.iter().any(|x| mine.contains(x)))
                    });
                    let state = if value == "member" {
                        "member".to_string()
                    } else if reject_partitions || overlap {
                        format!("{value} invalid (Cpu list in cpuset.cpus not exclusive)")
                    } else {
                        value.to_string()
                    };
                    fs::write(path, format!("{state}\n"))
                }
                _ => return None,
            })
        })
    }

    struct Fake {
        _tmp: tempfile::TempDir,
        root: PathBuf,
        state: PathBuf,
        log: Log,
    }

    fn fake_tree(version: CgroupVersion) -> Fake {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("cgroup");
        fs::create_dir(&root).unwrap();
        let files: &[(&str, &str)] = match version {
            CgroupVersion::V1 => &[
                ("cpuset.cpus", "0-3\n"),
                ("cpuset.effective_cpus", "0-3\n"),
                ("cpuset.mems", "0\n"),
                ("cpuset.cpu_exclusive", "1\n"),
                ("cpuset.sched_load_balance", "1\n"),
                ("tasks", "1\n2\n"),
                ("cgroup.procs", "1\n"),
            ],
            CgroupVersion::V2 => &[
                ("cgroup.controllers", "cpuset cpu io memory hugetlb pids\n"),
                ("cgroup.subtree_control", "\n"),
                ("cpuset.cpus.effective", "0-3\n"),
                ("cgroup.procs", "1\n"),
            ],
        };
        for (f, v) in files {
            fs::write(root.join(f), v).unwrap();
        }
        Fake {
            state: tmp.path().join("state"),
            root,
            _tmp: tmp,
            log: Arc::default(),
        }
    }

    impl Fake {
        fn hier(&self, version: CgroupVersion, reject: bool) -> CpusetHierarchy {
            CpusetHierarchy::new(version, &self.root)
                .with_state_dir(&self.state)
                .with_fake_kernel(fake_kernel(self.root.clone(), self.log.clone(), reject))
        }
        fn read(&self, rel: &str) -> String {
            fs::read_to_string(self.root.join(rel))
                .unwrap()
                .trim()
                .to_string()
        }
        fn pacer_dirs(&self) -> Vec<String> {
            let mut v: Vec<String> = fs::read_dir(&self.root)
                .unwrap()
                .flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        }
        fn state_files(&self) -> usize {
            fs::read_dir(&self.state).map(|d| d.count()).unwrap_or(0)
        }
    }

    /// A real, live child process (its affinity can be read) that the fake kernel can "move".
    struct Child(std::process::Child);
    impl Child {
        fn sleep() -> Child {
            Child(Command::new("sleep").arg("30").spawn().expect("spawn sleep"))
        }
        fn pid(&self) -> u32 {
            self.0.id()
        }
    }
    impl Drop for Child {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    const MOUNTINFO: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime shared:9 - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/mem\\040ory rw,relatime master:3 shared:10 - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
garbage line
44 23 0:8 / /sys/kernel/debug rw,relatime - debugfs
";

    #[test]
    fn parses_mountinfo() {
        let m = parse_mountinfo(MOUNTINFO);
        assert_eq!(m.len(), 4, "{m:?}");
        assert_eq!(m[1].mount_point, Path::new("/sys/fs/cgroup/cpuset"));
        assert_eq!((m[1].fstype.as_str(), m[1].root.as_str()), ("cgroup", "/"));
        assert_eq!(m[1].super_options, vec!["rw", "cpuset"]);
        // Optional fields (shared:, master:) before the separator; octal escapes decoded.
        assert_eq!(m[2].mount_point, Path::new("/sys/fs/cgroup/mem ory"));
        assert_eq!(m[3].fstype, "cgroup2");
        assert_eq!(m[3].super_options, vec!["rw", "nsdelegate"]);
        assert_eq!(crate::trace::unescape_mount_path("a\\134b\\"), "a\\b\\");
        assert_eq!(crate::trace::unescape_mount_path("\\77"), "\\77");
        assert!(parse_mountinfo("").is_empty());
        assert!(parse_mountinfo("1 2 3 4 5 6 -").is_empty());
    }

    #[test]
    fn detects_v2_v1_subtree_and_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let (v1, v2) = (tmp.path().join("cpuset"), tmp.path().join("unified"));
        fs::create_dir(&v1).unwrap();
        fs::create_dir(&v2).unwrap();
        fs::write(v2.join("cgroup.controllers"), "hugetlb\n").unwrap();
        let info = |v1_root: &str| {
            format!(
                "34 31 0:31 {v1_root} {} rw - cgroup cgroup rw,cpuset\n41 31 0:38 / {} rw - cgroup2 cgroup2 rw\n",
                v1.display(),
                v2.display()
            )
        };
        // This machine's situation: cgroup2 without cpuset, cpuset on v1.
        let h = CpusetHierarchy::detect_in(&info("/")).unwrap();
        assert_eq!((h.version(), h.root()), (CgroupVersion::V1, v1.as_path()));
        // cpuset on cgroup2 wins (a controller cannot be on both in reality).
        fs::write(v2.join("cgroup.controllers"), "cpuset cpu hugetlb\n").unwrap();
        let h = CpusetHierarchy::detect_in(&info("/")).unwrap();
        assert_eq!((h.version(), h.root()), (CgroupVersion::V2, v2.as_path()));
        fs::write(v2.join("cgroup.controllers"), "cpusets\n").unwrap();
        // A container's bind mount of a sub-tree is refused with the reason.
        match CpusetHierarchy::detect_in(&info("/docker/abc")) {
            Err(CpusetError::Unsupported(m)) => assert!(m.contains("/docker/abc"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            CpusetHierarchy::detect_in("22 27 0:21 / /proc rw - proc proc rw\n"),
            Err(CpusetError::Unsupported(_))
        ));
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,6\n"), Some(vec![0, 1, 2, 3, 6]));
        assert_eq!(parse_cpu_list("6,0-1,1"), Some(vec![0, 1, 6]));
        assert_eq!(parse_cpu_list("\n"), Some(vec![]));
        for bad in ["3-1", "a", "1-", "0-99999999999", "5000"] {
            assert_eq!(parse_cpu_list(bad), None, "{bad}");
        }
        assert_eq!(format_cpu_list(&[6, 0, 1, 2, 3, 9, 10]), "0-3,6,9-10");
        assert_eq!(format_cpu_list(&[1]), "1");
        assert_eq!(format_cpu_list(&[]), "");
    }

    #[test]
    fn validation_happens_before_any_change() {
        let f = fake_tree(CgroupVersion::V1);
        let h = f.hier(CgroupVersion::V1, false);
        let cases: Vec<(Vec<PartitionSpec>, &str)> = vec![
            (vec![], "no partitions"),
            (vec![PartitionSpec::new("a", &[])], "no CPUs"),
            (vec![PartitionSpec::new("a/b", &[1])], "name"),
            (vec![PartitionSpec::new(".a", &[1])], "name"),
            (vec![PartitionSpec::new("", &[1])], "name"),
            (
                vec![PartitionSpec::new("a", &[1]), PartitionSpec::new("a", &[2])],
                "twice",
            ),
            (
                vec![PartitionSpec::new("a", &[1]), PartitionSpec::new("b", &[1, 2])],
                "two partitions",
            ),
            (vec![PartitionSpec::new("a", &[4])], "not available"),
        ];
        for (specs, want) in cases {
            match Partitioning::create(&h, &specs) {
                Err(CpusetError::Invalid(m)) => assert!(m.contains(want), "{m} / {want}"),
                other => panic!("{specs:?}: {other:?}"),
            }
        }
        let iso = PartitionSpec {
            kind: PartitionKind::Isolated,
            ..PartitionSpec::new("a", &[1])
        };
        assert!(matches!(
            Partitioning::create(&h, &[iso]),
            Err(CpusetError::Unsupported(_))
        ));
        assert!(f.log.lock().unwrap().is_empty());
        assert_eq!(f.pacer_dirs(), Vec::<String>::new());
        assert_eq!(f.state_files(), 0);
    }

    #[test]
    fn v1_setup_order_and_full_restore() {
        let f = fake_tree(CgroupVersion::V1);
        fs::write(f.root.join("cpuset.cpu_exclusive"), "0\n").unwrap();
        let h = f.hier(CgroupVersion::V1, false);
        let pid = std::process::id();
        let p = Partitioning::create(
            &h,
            &[
                PartitionSpec::new("rt", &[1]),
                PartitionSpec::new("rest", &[0, 2, 3]),
            ],
        )
        .unwrap();
        let dir = format!("pacer-{pid}-rt");
        assert_eq!(p.get("rt").unwrap().dir(), f.root.join(&dir));
        assert_eq!(p.get("rest").unwrap().cpus(), &[0, 2, 3]);
        assert_eq!(f.read(&format!("{dir}/cpuset.cpus")), "1");
        assert_eq!(f.read(&format!("{dir}/cpuset.mems")), "0");
        assert_eq!(f.read(&format!("pacer-{pid}-rest/cpuset.cpus")), "0,2-3");
        assert_eq!(f.read("cpuset.sched_load_balance"), "0");
        assert_eq!(f.read("cpuset.cpu_exclusive"), "1");
        let state = fs::read_to_string(f.state.join(format!("cpuset-{pid}.state"))).unwrap();
        assert!(state.contains("restore cpuset.cpu_exclusive 0\nrestore cpuset.sched_load_balance 1\n"));
        // The sched-deadline.rst §5.1 order: root exclusive first, children exclusive and
        // balanced, the root's load balancing off last.
        let log: Vec<(String, String)> = f.log.lock().unwrap().clone();
        let at = |k: &str, v: &str| log.iter().position(|(a, b)| a == k && b == v).unwrap();
        assert_eq!(at("cpuset.cpu_exclusive", "1"), 0);
        assert!(at(&format!("{dir}/cpuset.mems"), "0") < at(&format!("{dir}/cpuset.cpu_exclusive"), "1"));
        assert_eq!(
            log.last().unwrap(),
            &("cpuset.sched_load_balance".into(), "0".into())
        );
        p.teardown().unwrap();
        assert_eq!(f.pacer_dirs(), Vec::<String>::new());
        assert_eq!(f.read("cpuset.sched_load_balance"), "1");
        assert_eq!(f.read("cpuset.cpu_exclusive"), "0");
        assert_eq!(f.state_files(), 0);
    }

    #[test]
    fn v2_lifecycle_on_a_fake_tree() {
        let f = fake_tree(CgroupVersion::V2);
        let h = f.hier(CgroupVersion::V2, false);
        let pid = std::process::id();
        let mut p = Partitioning::create(
            &h,
            &[
                PartitionSpec::new("a", &[2]),
                PartitionSpec {
                    kind: PartitionKind::Isolated,
                    ..PartitionSpec::new("b", &[3])
                },
            ],
        )
        .unwrap();
        assert_eq!(f.read("cgroup.subtree_control"), "cpuset");
        assert_eq!(f.read(&format!("pacer-{pid}-a/cpuset.cpus")), "2");
        assert_eq!(f.read(&format!("pacer-{pid}-a/cpuset.cpus.partition")), "root");
        assert_eq!(
            f.read(&format!("pacer-{pid}-b/cpuset.cpus.partition")),
            "isolated"
        );
        assert!(
            !f.log
                .lock()
                .unwrap()
                .iter()
                .any(|(k, _)| k.ends_with("cpuset.mems")),
            "v2 needs no mems"
        );

        let child = Child::sleep();
        p.move_process("a", child.pid()).unwrap();
        assert_eq!(p.processes("a").unwrap(), vec![child.pid()]);
        assert!(!f.read("cgroup.procs").contains(&child.pid().to_string()));
        assert!(matches!(
            p.move_thread("a", child.pid()),
            Err(CpusetError::Unsupported(_))
        ));
        assert!(matches!(
            p.move_process("zz", child.pid()),
            Err(CpusetError::Invalid(_))
        ));
        assert!(matches!(
            p.move_process("a", DEAD_PID),
            Err(CpusetError::NoSuchThread { tid: DEAD_PID, .. })
        ));
        // A second partitioning of the same hierarchy in this process is refused.
        assert!(matches!(
            Partitioning::create(&h, &[PartitionSpec::new("c", &[1])]),
            Err(CpusetError::Busy { pid: p2, .. }) if p2 == pid
        ));

        p.teardown().unwrap();
        assert!(f
            .read("cgroup.procs")
            .lines()
            .any(|l| l == child.pid().to_string()));
        assert_eq!(f.pacer_dirs(), Vec::<String>::new());
        assert_eq!(f.read("cgroup.subtree_control"), "");
        assert_eq!(f.state_files(), 0);
        let log = f.log.lock().unwrap().clone();
        assert!(log.contains(&(format!("pacer-{pid}-a/cpuset.cpus.partition"), "member".into())));
        // Torn down: the claim is released.
        Partitioning::create(&h, &[PartitionSpec::new("c", &[1])]).unwrap();
    }

    #[test]
    fn v2_rejected_partition_leaves_nothing_behind() {
        let f = fake_tree(CgroupVersion::V2);
        let h = f.hier(CgroupVersion::V2, true);
        match Partitioning::create(&h, &[PartitionSpec::new("a", &[1])]) {
            Err(CpusetError::Rejected { state, .. }) => assert!(state.contains("invalid"), "{state}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(f.pacer_dirs(), Vec::<String>::new());
        assert_eq!(f.read("cgroup.subtree_control"), "");
        assert_eq!(f.state_files(), 0);
        // Overlap with another (foreign) partition is reported the same way.
        let f = fake_tree(CgroupVersion::V2);
        fs::write(f.root.join("cgroup.subtree_control"), "cpuset\n").unwrap();
        let other = f.root.join("docker");
        fs::create_dir(&other).unwrap();
        fs::write(other.join("cpuset.cpus"), "1-2\n").unwrap();
        fs::write(other.join("cpuset.cpus.partition"), "root\n").unwrap();
        let h = f.hier(CgroupVersion::V2, false);
        assert!(matches!(
            Partitioning::create(&h, &[PartitionSpec::new("a", &[2])]),
            Err(CpusetError::Rejected { .. })
        ));
        // cpuset was already enabled: it stays enabled.
        assert_eq!(f.read("cgroup.subtree_control"), "cpuset");
        assert_eq!(f.pacer_dirs(), vec!["docker".to_string()]);
    }

    #[test]
    fn drop_tears_down() {
        let f = fake_tree(CgroupVersion::V1);
        let h = f.hier(CgroupVersion::V1, false);
        {
            let _p = Partitioning::create(&h, &[PartitionSpec::new("x", &[3])]).unwrap();
            assert_eq!(f.read("cpuset.sched_load_balance"), "0");
        }
        assert_eq!(f.read("cpuset.sched_load_balance"), "1");
        assert_eq!(f.pacer_dirs(), Vec::<String>::new());
        assert_eq!(f.state_files(), 0);
    }

    fn stale_state(f: &Fake, pid: u32, boot: &str, restore: &[(&str, &str)]) {
        let s = SavedState {
            boot_id: boot.to_string(),
            pid,
            starttime: 1,
            version: CgroupVersion::V1,
            root: f.root.clone(),
            restore: restore
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        fs::create_dir_all(&f.state).unwrap();
        fs::write(f.state.join(format!("cpuset-{pid}.state")), s.render().unwrap()).unwrap();
    }

    #[test]
    fn cleanup_removes_dead_leftovers_only_and_is_idempotent() {
        let f = fake_tree(CgroupVersion::V1);
        let h = f.hier(CgroupVersion::V1, false);
        // A pacer killed by SIGKILL: its partition with a task in it, the root unbalanced.
        let dead = f.root.join(format!("pacer-{DEAD_PID}-rt"));
        fs::create_dir(&dead).unwrap();
        fs::write(dead.join("tasks"), "77\n").unwrap();
        fs::write(f.root.join("cpuset.sched_load_balance"), "0\n").unwrap();
        stale_state(&f, DEAD_PID, &boot_id(), &[("cpuset.sched_load_balance", "1")]);
        // A state file from an earlier boot: deleted, never applied.
        stale_state(&f, DEAD_PID + 1, "old-boot", &[("cpuset.cpu_exclusive", "0")]);
        // A live process's partition (pid 1 always exists) and a foreign cgroup: untouched.
        let live = f.root.join("pacer-1-x");
        fs::create_dir(&live).unwrap();
        fs::create_dir(f.root.join("pacer-notapid")).unwrap();

        let r = h.cleanup_stale().unwrap();
        assert_eq!(r.removed, vec![dead.clone()]);
        assert_eq!(r.tasks_moved, 1);
        assert_eq!(
            r.knobs_restored,
            vec![(f.root.join("cpuset.sched_load_balance"), "1".to_string())]
        );
        assert_eq!(r.state_files_removed, 2);
        assert!(f.read("tasks").lines().any(|l| l == "77"));
        assert_eq!(f.read("cpuset.sched_load_balance"), "1");
        assert_eq!(f.read("cpuset.cpu_exclusive"), "1");
        assert_eq!(
            f.pacer_dirs(),
            vec!["pacer-1-x".to_string(), "pacer-notapid".to_string()]
        );
        let again = h.cleanup_stale().unwrap();
        assert!(again.is_empty(), "{again:?}");
        // The live partition makes the hierarchy busy.
        assert!(matches!(
            Partitioning::create(&h, &[PartitionSpec::new("a", &[1])]),
            Err(CpusetError::Busy { pid: 1, .. })
        ));
    }

    #[test]
    fn own_unclaimed_leftovers_are_stale() {
        let f = fake_tree(CgroupVersion::V1);
        let h = f.hier(CgroupVersion::V1, false);
        let mine = f.root.join(format!("pacer-{}-old", std::process::id()));
        fs::create_dir(&mine).unwrap();
        // create() cleans it up first, then works.
        let p = Partitioning::create(&h, &[PartitionSpec::new("new", &[2])]).unwrap();
        assert!(!mine.exists());
        // While claimed, our own partition is not stale.
        assert!(h.cleanup_stale().unwrap().is_empty());
        assert!(p.get("new").unwrap().dir().exists());
        drop(p);
    }

    #[test]
    fn join_on_spawn_writes_zero_from_the_child() {
        let f = fake_tree(CgroupVersion::V2);
        let h = f.hier(CgroupVersion::V2, false);
        let p = Partitioning::create(&h, &[PartitionSpec::new("a", &[1])]).unwrap();
        let procs = p.get("a").unwrap().dir().join("cgroup.procs");
        fs::write(&procs, "").unwrap();
        let mut cmd = Command::new("true");
        p.join_on_spawn("a", &mut cmd).unwrap();
        assert!(cmd.status().unwrap().success());
        assert_eq!(fs::read_to_string(&procs).unwrap(), "0");
        // A failing write fails the spawn instead of running outside the partition.
        fs::remove_file(&procs).unwrap();
        let mut cmd = Command::new("true");
        p.join_on_spawn("a", &mut cmd).unwrap();
        assert!(cmd.status().is_err());
    }

    #[test]
    fn rebuild_toggles_only_a_balanced_v1_root() {
        let f = fake_tree(CgroupVersion::V1);
        let h = f.hier(CgroupVersion::V1, false);
        assert!(h.rebuild_root_domains().unwrap());
        let log = f.log.lock().unwrap().clone();
        assert_eq!(
            log,
            vec![
                ("cpuset.sched_load_balance".to_string(), "0".to_string()),
                ("cpuset.sched_load_balance".to_string(), "1".to_string())
            ]
        );
        fs::write(f.root.join("cpuset.sched_load_balance"), "0\n").unwrap();
        assert!(!h.rebuild_root_domains().unwrap());
        let f2 = fake_tree(CgroupVersion::V2);
        assert!(matches!(
            f2.hier(CgroupVersion::V2, false).rebuild_root_domains(),
            Err(CpusetError::Unsupported(_))
        ));
    }

    #[test]
    fn state_files_round_trip_and_refuse_paths() {
        let s = SavedState {
            boot_id: "b".into(),
            pid: 42,
            starttime: 1234,
            version: CgroupVersion::V2,
            root: PathBuf::from("/sys/fs/cgroup"),
            restore: vec![("cgroup.subtree_control".into(), "-cpuset".into())],
        };
        assert_eq!(SavedState::parse(&s.render().unwrap()), Some(s.clone()));
        let evil = s
            .render()
            .unwrap()
            .replace("restore cgroup", "restore ../../etc/x cgroup");
        assert_eq!(SavedState::parse(&evil), None);
        assert_eq!(SavedState::parse("something else\n"), None);
        assert_eq!(SavedState::parse(&format!("{STATE_MAGIC}\npid 1\n")), None);
        let nl = SavedState {
            root: PathBuf::from("/a\nb"),
            ..s
        };
        assert_eq!(nl.render(), None);
        assert_eq!(partition_owner("pacer-12-rt"), Some(12));
        assert_eq!(partition_owner("pacer-12-"), None);
        assert_eq!(partition_owner("pacer-x-rt"), None);
        assert_eq!(partition_owner("other-12-rt"), None);
        assert!(!process_alive(DEAD_PID, None));
        assert!(process_alive(std::process::id(), None));
        let (start, zombie) = proc_start(std::process::id()).unwrap();
        assert!(!zombie);
        assert!(process_alive(std::process::id(), Some(start)));
        assert!(
            !process_alive(std::process::id(), Some(start + 1)),
            "recycled pid"
        );
    }

    #[test]
    fn parses_sched_debug() {
        let text = "\
Sched Debug Version: v0.11, 6.18.44
cpu#0, 2495.998 MHz
  .nr_running                    : 1
rt_rq[0]:/
  .rt_runtime                    : 950.000000

dl_rq[0]:
  .dl_nr_running                 : 0
  .dl_bw->bw                     : 996147
  .dl_bw->total_bw               : 157285

runnable tasks:
 S            task   PID
cpu#1
dl_rq[1]:
  .dl_nr_running                 : 1
  .dl_bw->bw                     : 996147
  .dl_bw->total_bw               : 52428
dl_rq[2]:
  .dl_bw->bw                     : 996147
dl_rq[x]:
  .dl_bw->total_bw               : 5
";
        let v = parse_sched_debug(text);
        assert_eq!(
            v,
            vec![
                DlBandwidth {
                    cpu: 0,
                    bw: 996147,
                    total_bw: 157285
                },
                DlBandwidth {
                    cpu: 1,
                    bw: 996147,
                    total_bw: 52428
                }
            ]
        );
        assert_eq!(total_bw_of(&v, 1), Some(52428));
        assert_eq!(total_bw_of(&v, 5), None);
        assert!(parse_sched_debug("").is_empty());
    }

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
