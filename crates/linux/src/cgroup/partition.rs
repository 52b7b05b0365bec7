//! Partitions: what to create ([`PartitionSpec`], checked before anything changes), the
//! [`Partitioning`] that creates them (saving what it changes first) and moves threads and
//! processes in, or starts commands inside.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::recovery::{claims, SavedState};
use super::{v1, v2, CgroupVersion, CpusetError, CpusetHierarchy, PARTITION_PREFIX, PROCS};
use crate::procfs::{boot_id, process_start as proc_start};
use crate::sched::{get_affinity, LinuxError, Tid};
use crate::sys::format_cpu_list;

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
    pub(super) name: String,
    pub(super) dir: PathBuf,
    pub(super) cpus: Vec<usize>,
    pub(super) kind: PartitionKind,
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
    pub(super) hier: CpusetHierarchy,
    pub(super) parts: Vec<Partition>,
    /// Root knobs changed: (file relative to the root, value to restore), in change order.
    pub(super) saved: Vec<(String, String)>,
    /// Affinity of each moved thread before its first move.
    pub(super) affinity: Vec<(Tid, Vec<usize>)>,
    pub(super) active: bool,
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
        match self.hier.version {
            CgroupVersion::V1 => v1::root_changes(&self.hier),
            CgroupVersion::V2 => v2::root_changes(&self.hier),
        }
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
            CgroupVersion::V1 => change(self, v1::CPU_EXCLUSIVE)?,
            // The children have no cpuset files until the controller is enabled for them.
            CgroupVersion::V2 => change(self, v2::SUBTREE)?,
        }
        let mems = match self.hier.version {
            CgroupVersion::V1 => v1::root_mems(&self.hier)?,
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
                CgroupVersion::V1 => v1::make_partition(&self.hier, &dir, &list, &mems)?,
                CgroupVersion::V2 => v2::make_partition(&self.hier, dir, &list, spec.kind)?,
            }
        }
        if self.hier.version == CgroupVersion::V1 {
            // Last, so the kernel rebuilds the domains once, with every partition in place.
            change(self, v1::LOAD_BALANCE)?;
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
        let path = dir.join(v1::TASKS);
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
}

#[cfg(test)]
mod tests {
    use super::super::fake::*;
    use super::*;

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
}
