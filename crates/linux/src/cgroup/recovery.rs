//! Undoing partitions: [`Partitioning::teardown`] (and drop), which waits for the deadline
//! accounting to settle before the root domains are rebuilt; the state file written before any
//! change; [`CpusetHierarchy::cleanup_stale`] for what a killed run left behind; the claims that
//! keep one partitioning per hierarchy in this process.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::PathBuf;
use std::sync::Mutex;

use super::{v1, v2, CgroupVersion, CpusetError, CpusetHierarchy, Partitioning, PARTITION_PREFIX};
use crate::procfs::{boot_id, process_alive};
use crate::sched::set_affinity;
use crate::sys::parse_cpu_list;

const STATE_MAGIC: &str = "pacer-cpuset-state 1";

/// Roots this process has partitioned right now (see [`Partitioning::create`]).
static CLAIMS: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

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
    /// Directories `pacer-<pid>-*` directly under the root, with their pid.
    pub(super) fn pacer_dirs(&self) -> Result<Vec<(u32, PathBuf)>, CpusetError> {
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
            CgroupVersion::V1 => v1::CPUS,
            CgroupVersion::V2 => v2::EFFECTIVE_CPUS,
        };
        Ok(self
            .pacer_dirs()?
            .into_iter()
            .filter_map(|(_, dir)| fs::read_to_string(dir.join(file)).ok())
            .filter_map(|t| parse_cpu_list(t.trim()))
            .filter(|c| !c.is_empty())
            .collect())
    }

    pub(super) fn state_file(&self, pid: u32) -> PathBuf {
        self.state_dir.join(format!("cpuset-{pid}.state"))
    }

    /// State files in the state directory, parsed; unreadable or foreign files are skipped.
    pub(super) fn state_files(&self) -> Vec<(PathBuf, SavedState)> {
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
    pub(super) fn cleanup_stale_locked(&self, claimed_here: bool) -> Result<CleanupReport, CpusetError> {
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
        let stale: Vec<(u32, PathBuf)> = self
            .pacer_dirs()?
            .into_iter()
            .filter(|(pid, _)| dead(*pid))
            .collect();
        if !stale.is_empty() && !self.fake {
            // The run that left these was killed moments ago, perhaps: its reservations stay
            // counted until their 0-lag times, and removing a partition rebuilds the root
            // domains, which would subtract them twice (the same wait as `teardown`'s).
            crate::audit::wait_consistent(
                &crate::sys::online_cpus(),
                pacer_model::reservation::DEFAULT_PERIOD_MAX.0 + 10_000_000,
            );
        }
        for (pid, dir) in stale {
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
}

/// [`CpusetHierarchy::cleanup_stale`] on the detected hierarchy.
pub fn cleanup_stale() -> Result<CleanupReport, CpusetError> {
    CpusetHierarchy::detect()?.cleanup_stale()
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

pub(super) fn claims() -> std::sync::MutexGuard<'static, BTreeSet<PathBuf>> {
    CLAIMS.lock().unwrap_or_else(|e| e.into_inner())
}

// ---- saved state ----------------------------------------------------------------------------

/// What a partitioning must undo, as kept on disk for after a SIGKILL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SavedState {
    pub(super) boot_id: String,
    pub(super) pid: u32,
    /// Process start time (ticks since boot): tells a recycled pid from the owner.
    pub(super) starttime: u64,
    pub(super) version: CgroupVersion,
    pub(super) root: PathBuf,
    /// (knob file relative to the root, value to write back), in the order they were changed.
    pub(super) restore: Vec<(String, String)>,
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

// ---- teardown -------------------------------------------------------------------------------

impl Partitioning {
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

#[cfg(test)]
mod tests {
    use super::super::fake::*;
    use super::super::PartitionSpec;
    use super::*;
    use crate::procfs::process_start as proc_start;

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
}
