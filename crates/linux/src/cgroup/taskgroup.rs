//! rt-app task groups for `pacer run`: the groups named by `taskgroup` (paths under the cpu
//! controller, `/` its root) are created before the run, each thread moves itself into its
//! group when it starts and when a phase names one, and the groups pacer created are removed
//! after the run. What rt-app does (src/rt-app_taskgroups.c: `add_cgroups()`, `cgroup_mkdir()`,
//! `set_thread_taskgroup()`, `remove_cgroups()`), with pacer's rule that the machine is left as
//! it was:
//!
//! - Only the cgroup v1 cpu controller (a `cgroup` mount with the `cpu` option), as in rt-app:
//!   a group takes single threads (`tasks`). cgroup v2 moves single threads only inside threaded
//!   sub-trees of the process's own cgroup, which would not be the paths the file names.
//! - A group that exists is used and left alone; the directories pacer creates are written to a
//!   state file (`<state dir>/taskgroups-<pid>.state`, /run/pacer by default) *before* they are
//!   created, and removed
//!   after the run, deepest first. A run killed before that leaves them, with the state file:
//!   [`stale_task_groups`] (shown by `pacer doctor`) finds them and [`cleanup_stale_task_groups`]
//!   (`pacer doctor --repair`, and the next `pacer run` with task groups) moves any task left in
//!   them to the root and removes them.
//! - A thread goes back to the cgroup it started in before it ends (rt-app moves it to the root),
//!   so that the groups are empty when they are removed.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::{CpusetError, DEFAULT_STATE_DIR};
use crate::procfs::{boot_id, process_alive, process_start};
use crate::sched::Tid;
use crate::sys::parse_mountinfo;

const STATE_MAGIC: &str = "pacer-taskgroups-state 1";

/// The cgroup v1 cpu controller's hierarchy.
#[derive(Debug, Clone)]
pub struct CpuHierarchy {
    root: PathBuf,
    state_dir: PathBuf,
}

impl CpuHierarchy {
    /// Finds the v1 cpu controller in `/proc/self/mountinfo`; state files go to pacer's state
    /// directory (`$PACER_STATE_DIR`, else [`DEFAULT_STATE_DIR`]).
    pub fn detect() -> Result<CpuHierarchy, CpusetError> {
        let path = Path::new(crate::sys::MOUNTINFO);
        let text = fs::read_to_string(path).map_err(|e| CpusetError::io("read", path, e))?;
        CpuHierarchy::detect_in(&text)
    }

    /// [`detect`](Self::detect) on given mountinfo text.
    pub fn detect_in(mountinfo: &str) -> Result<CpuHierarchy, CpusetError> {
        let mounts = parse_mountinfo(mountinfo);
        let cpu = mounts
            .iter()
            .find(|m| m.fstype == "cgroup" && m.super_options.iter().any(|o| o == "cpu"));
        match cpu {
            Some(m) if m.root == "/" => {
                Ok(CpuHierarchy::new(&m.mount_point).with_state_dir(crate::ledger::dir()))
            }
            Some(m) => Err(CpusetError::Unsupported(format!(
                "task groups: the cgroup v1 cpu controller is only mounted as its sub-tree {} at {} \
                 (task group paths are from the controller's root, e.g. outside a container)",
                m.root,
                m.mount_point.display()
            ))),
            None => Err(CpusetError::Unsupported(
                "task groups need the cgroup v1 cpu controller (a `cgroup` mount with the `cpu` \
                 option), as rt-app does: there is none in /proc/self/mountinfo (cgroup v2 moves \
                 single threads only within threaded sub-trees)"
                    .into(),
            )),
        }
    }

    /// A hierarchy mounted at `root` (or a directory standing for one, in tests), with its state
    /// files in [`DEFAULT_STATE_DIR`].
    pub fn new(root: impl Into<PathBuf>) -> CpuHierarchy {
        CpuHierarchy {
            root: root.into(),
            state_dir: PathBuf::from(DEFAULT_STATE_DIR),
        }
    }

    /// Keeps state files in `dir` instead of [`DEFAULT_STATE_DIR`].
    pub fn with_state_dir(mut self, dir: impl Into<PathBuf>) -> CpuHierarchy {
        self.state_dir = dir.into();
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of group `group` (`/` is the root).
    pub fn dir(&self, group: &str) -> PathBuf {
        components(group).fold(self.root.clone(), |d, c| d.join(c))
    }

    fn state_file(&self, pid: u32) -> PathBuf {
        self.state_dir.join(format!("taskgroups-{pid}.state"))
    }
}

/// The components of a group path (empty ones, from repeated slashes, skipped).
fn components(group: &str) -> impl Iterator<Item = &str> {
    group.split('/').filter(|c| !c.is_empty())
}

/// Checks a group path before anything is created: from the root, no `.`/`..` components.
fn check(group: &str) -> Result<(), CpusetError> {
    if !group.starts_with('/') || components(group).any(|c| c == "." || c == ".." || c.contains('\n')) {
        return Err(CpusetError::Invalid(format!(
            "task group {group:?}: expected a path from the cpu controller's root, such as \"/tg1\""
        )));
    }
    Ok(())
}

/// The groups of one run: the directories this process created, to remove afterwards.
#[derive(Debug)]
pub struct TaskGroups {
    hier: CpuHierarchy,
    /// Created directories, in creation order (parents first).
    created: Vec<PathBuf>,
    state_file: Option<PathBuf>,
    torn_down: bool,
}

impl TaskGroups {
    /// Creates the directories of `groups` that do not exist (after removing what killed runs
    /// left, see the module documentation). Nothing is left behind on error.
    pub fn create(hier: &CpuHierarchy, groups: &[String]) -> Result<TaskGroups, CpusetError> {
        for g in groups {
            check(g)?;
        }
        cleanup_stale_task_groups(hier)?;
        let mut missing: Vec<PathBuf> = Vec::new();
        for g in groups {
            let mut dir = hier.root.clone();
            for c in components(g) {
                dir = dir.join(c);
                if !dir.exists() && !missing.contains(&dir) {
                    missing.push(dir.clone());
                }
            }
        }
        let mut tg = TaskGroups {
            hier: hier.clone(),
            created: Vec::new(),
            state_file: None,
            torn_down: false,
        };
        if missing.is_empty() {
            return Ok(tg);
        }
        // The whole list first, so that a run killed half-way through is cleaned up too.
        let file = hier.state_file(std::process::id());
        write_state(&file, &hier.root, &missing)?;
        tg.state_file = Some(file);
        for dir in missing {
            match fs::create_dir(&dir) {
                Ok(()) => tg.created.push(dir),
                // Created meanwhile by someone else: theirs, not ours to remove.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    let err = CpusetError::io("create", &dir, e);
                    // Drop removes what was created.
                    return Err(err);
                }
            }
        }
        Ok(tg)
    }

    pub fn hierarchy(&self) -> &CpuHierarchy {
        &self.hier
    }

    /// The directories this run created, parents first.
    pub fn created(&self) -> &[PathBuf] {
        &self.created
    }

    /// Removes the directories this run created, deepest first, after moving any task left in
    /// them to the root; the state file goes once all are gone.
    pub fn teardown(mut self) -> Result<(), CpusetError> {
        self.teardown_inner()
    }

    fn teardown_inner(&mut self) -> Result<(), CpusetError> {
        if self.torn_down {
            return Ok(());
        }
        self.torn_down = true;
        let errors = remove_dirs(&self.hier.root, &self.created);
        if errors.is_empty() {
            if let Some(f) = self.state_file.take() {
                let _ = fs::remove_file(f);
            }
            Ok(())
        } else {
            Err(CpusetError::Incomplete {
                what: "removing the task groups",
                root: self.hier.root.clone(),
                errors,
            })
        }
    }
}

impl Drop for TaskGroups {
    fn drop(&mut self) {
        if let Err(e) = self.teardown_inner() {
            eprintln!("pacer: {e} (pacer doctor --repair removes them)");
        }
    }
}

/// Moves the calling thread into `group` (rt-app's `cgroup_attach_task()`: its TID to `tasks`).
pub fn attach_self(hier: &CpuHierarchy, group: &str) -> Result<(), CpusetError> {
    attach(&hier.dir(group), crate::sched::gettid())
}

/// Moves thread `tid` into the group at `dir`.
pub fn attach(dir: &Path, tid: Tid) -> Result<(), CpusetError> {
    let tasks = dir.join("tasks");
    let mut f = fs::OpenOptions::new()
        .write(true)
        .open(&tasks)
        .map_err(|e| CpusetError::io("open", &tasks, e))?;
    f.write_all(tid.to_string().as_bytes())
        .map_err(|e| CpusetError::io("write", &tasks, e))
}

/// The cpu-controller group thread `tid` of this process is in now (its directory), from
/// `/proc/self/task/TID/cgroup` (v1 lines `ID:controllers:path`).
pub fn current_dir(hier: &CpuHierarchy, tid: Tid) -> Result<PathBuf, CpusetError> {
    let path = PathBuf::from(format!("/proc/self/task/{tid}/cgroup"));
    let text = fs::read_to_string(&path).map_err(|e| CpusetError::io("read", &path, e))?;
    text.lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctl, p) = (f.next()?, f.next()?, f.next()?);
            ctl.split(',').any(|c| c == "cpu").then(|| hier.dir(p))
        })
        .next()
        .ok_or(CpusetError::Parse {
            path,
            what: "the cpu controller's group",
            content: text.chars().take(200).collect(),
        })
}

/// Removes `dirs` deepest first; a task still in one moves to the root first. Errors are
/// collected, every directory is tried.
fn remove_dirs(root: &Path, dirs: &[PathBuf]) -> Vec<String> {
    let mut errors = Vec::new();
    for dir in dirs.iter().rev() {
        if !dir.exists() {
            continue;
        }
        if let Ok(text) = fs::read_to_string(dir.join("tasks")) {
            for tid in text.lines().filter_map(|l| l.trim().parse::<Tid>().ok()) {
                // A task that exits meanwhile is gone from the group anyway.
                let _ = attach(root, tid);
            }
        }
        if let Err(e) = fs::remove_dir(dir) {
            if e.kind() != io::ErrorKind::NotFound {
                errors.push(format!("remove {}: {e}", dir.display()));
            }
        }
    }
    errors
}

fn write_state(file: &Path, root: &Path, dirs: &[PathBuf]) -> Result<(), CpusetError> {
    let pid = std::process::id();
    let start = process_start(pid).map_or(0, |(s, _)| s);
    let mut text = format!(
        "{STATE_MAGIC}\nboot_id {}\npid {pid}\nstarttime {start}\nroot {}\n",
        boot_id(),
        root.display()
    );
    for d in dirs {
        let rel = d.strip_prefix(root).unwrap_or(d);
        text.push_str(&format!("dir {}\n", rel.display()));
    }
    if let Some(parent) = file.parent() {
        fs::create_dir_all(parent).map_err(|e| CpusetError::io("create", parent, e))?;
    }
    fs::write(file, text).map_err(|e| CpusetError::io("write", file, e))
}

/// A state file left by a run: its owner and the directories it may have created.
#[derive(Debug, Clone, PartialEq)]
struct State {
    boot_id: String,
    pid: u32,
    starttime: u64,
    root: PathBuf,
    /// Relative to `root`, parents first.
    dirs: Vec<PathBuf>,
}

fn parse_state(text: &str) -> Option<State> {
    let mut lines = text.lines();
    if lines.next()? != STATE_MAGIC {
        return None;
    }
    let (mut boot, mut pid, mut start, mut root) = (None, None, None, None);
    let mut dirs = Vec::new();
    for line in lines {
        let (k, v) = line.split_once(' ')?;
        match k {
            "boot_id" => boot = Some(v.to_string()),
            "pid" => pid = v.parse().ok(),
            "starttime" => start = v.parse().ok(),
            "root" => root = Some(PathBuf::from(v)),
            "dir" => {
                // Only paths below the root: a corrupt file must not make clean-up remove
                // anything else.
                let p = PathBuf::from(v);
                if p.is_absolute()
                    || p.components()
                        .any(|c| !matches!(c, std::path::Component::Normal(_)))
                {
                    return None;
                }
                dirs.push(p);
            }
            _ => return None,
        }
    }
    Some(State {
        boot_id: boot?,
        pid: pid?,
        starttime: start?,
        root: root?,
        dirs,
    })
}

/// State files of this hierarchy whose run is gone (this boot's only: after a reboot the groups
/// are gone with the old hierarchy, and the file is merely old).
fn stale_states(hier: &CpuHierarchy) -> Vec<(PathBuf, Option<State>)> {
    let Ok(entries) = fs::read_dir(&hier.state_dir) else {
        return Vec::new();
    };
    let boot = boot_id();
    let own = std::process::id();
    let mut out = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !(name.starts_with("taskgroups-") && name.ends_with(".state")) {
            continue;
        }
        let state = fs::read_to_string(e.path()).ok().and_then(|t| parse_state(&t));
        match state {
            Some(s) if s.root != hier.root => {}
            Some(s) if s.boot_id != boot => out.push((e.path(), None)),
            Some(s) if s.pid == own || process_alive(s.pid, Some(s.starttime)) => {}
            Some(s) => out.push((e.path(), Some(s))),
            None => {}
        }
    }
    out
}

/// The task-group directories that runs which are gone created and left (what
/// [`cleanup_stale_task_groups`] would remove), without touching anything.
pub fn stale_task_groups(hier: &CpuHierarchy) -> Vec<PathBuf> {
    stale_states(hier)
        .into_iter()
        .filter_map(|(_, s)| s)
        .flat_map(|s| s.dirs.into_iter().map(move |d| s.root.join(d)))
        .filter(|d| d.exists())
        .collect()
}

/// Removes what runs that are gone left: their directories (tasks in them moved to the root
/// first), then their state files. Returns the directories removed.
pub fn cleanup_stale_task_groups(hier: &CpuHierarchy) -> Result<Vec<PathBuf>, CpusetError> {
    let mut removed = Vec::new();
    let mut errors = Vec::new();
    for (file, state) in stale_states(hier) {
        if let Some(s) = state {
            let dirs: Vec<PathBuf> = s.dirs.iter().map(|d| s.root.join(d)).collect();
            let present: Vec<PathBuf> = dirs.iter().filter(|d| d.exists()).cloned().collect();
            let errs = remove_dirs(&s.root, &dirs);
            if !errs.is_empty() {
                errors.extend(errs);
                continue;
            }
            removed.extend(present);
        }
        let _ = fs::remove_file(file);
    }
    if errors.is_empty() {
        Ok(removed)
    } else {
        Err(CpusetError::Incomplete {
            what: "removing task groups left by killed runs",
            root: hier.root.clone(),
            errors,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
30 25 0:26 / /sys/fs/cgroup/cpu rw,relatime shared:11 - cgroup cgroup rw,cpu
31 25 0:27 / /sys/fs/cgroup/cpuacct rw,relatime shared:12 - cgroup cgroup rw,cpuacct
35 25 0:31 / /sys/fs/cgroup/unified rw,relatime shared:16 - cgroup2 cgroup2 rw
";

    #[test]
    fn detects_the_v1_cpu_controller_only() {
        let h = CpuHierarchy::detect_in(MOUNTINFO).unwrap();
        assert_eq!(h.root(), Path::new("/sys/fs/cgroup/cpu"));
        assert_eq!(h.dir("/tg1//tg11/"), PathBuf::from("/sys/fs/cgroup/cpu/tg1/tg11"));
        assert_eq!(h.dir("/"), PathBuf::from("/sys/fs/cgroup/cpu"));
        let v2_only = "35 25 0:31 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n";
        let e = CpuHierarchy::detect_in(v2_only).unwrap_err();
        assert!(e.to_string().contains("cgroup v1 cpu controller"), "{e}");
        let sub = "30 25 0:26 /docker/x /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu,cpuacct\n";
        let e = CpuHierarchy::detect_in(sub).unwrap_err();
        assert!(e.to_string().contains("sub-tree /docker/x"), "{e}");
        // A combined cpu,cpuacct mount is the cpu controller too.
        let combined = "30 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n";
        assert!(CpuHierarchy::detect_in(combined).is_ok());
    }

    #[test]
    fn paths_are_checked_before_anything_is_created() {
        let root = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let h = CpuHierarchy::new(root.path()).with_state_dir(state.path());
        for bad in ["tg1", "/tg1/../x", "/./a"] {
            let e = TaskGroups::create(&h, &[bad.to_string()]).unwrap_err();
            assert!(matches!(e, CpusetError::Invalid(_)), "{bad}: {e}");
        }
        assert_eq!(fs::read_dir(root.path()).unwrap().count(), 0);
    }

    /// Creation, the state file written first, teardown deepest first; an existing group is
    /// used and kept.
    #[test]
    fn creates_only_what_is_missing_and_removes_only_that() {
        let root = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        fs::create_dir(root.path().join("mine")).unwrap();
        let h = CpuHierarchy::new(root.path()).with_state_dir(state.path());
        let groups = [
            "/tg1/tg11".to_string(),
            "/tg1".into(),
            "/mine/sub".into(),
            "/".into(),
        ];
        let tg = TaskGroups::create(&h, &groups).unwrap();
        assert_eq!(
            tg.created(),
            [
                root.path().join("tg1"),
                root.path().join("tg1/tg11"),
                root.path().join("mine/sub")
            ]
        );
        let file = state
            .path()
            .join(format!("taskgroups-{}.state", std::process::id()));
        let s = parse_state(&fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(
            s.dirs,
            [PathBuf::from("tg1"), "tg1/tg11".into(), "mine/sub".into()]
        );
        // Our own run is not stale.
        assert!(stale_task_groups(&h).is_empty());
        tg.teardown().unwrap();
        assert!(!root.path().join("tg1").exists());
        assert!(!root.path().join("mine/sub").exists());
        assert!(root.path().join("mine").exists(), "an existing group is kept");
        assert!(!file.exists());
    }

    /// What a killed run left is found and removed; a live run's, a foreign hierarchy's and a
    /// corrupt file's are not touched.
    #[test]
    fn leftovers_of_dead_runs_are_cleaned_up() {
        let root = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let h = CpuHierarchy::new(root.path()).with_state_dir(state.path());
        fs::create_dir_all(root.path().join("a/b")).unwrap();
        fs::create_dir_all(root.path().join("live")).unwrap();
        let dead = State {
            boot_id: boot_id(),
            pid: u32::MAX - 1,
            starttime: 1,
            root: root.path().to_path_buf(),
            dirs: vec!["a".into(), "a/b".into()],
        };
        let render = |s: &State| {
            let mut t = format!(
                "{STATE_MAGIC}\nboot_id {}\npid {}\nstarttime {}\nroot {}\n",
                s.boot_id,
                s.pid,
                s.starttime,
                s.root.display()
            );
            for d in &s.dirs {
                t.push_str(&format!("dir {}\n", d.display()));
            }
            t
        };
        fs::write(state.path().join("taskgroups-1.state"), render(&dead)).unwrap();
        let me = std::process::id();
        let live = State {
            pid: me,
            starttime: process_start(me).unwrap().0,
            dirs: vec!["live".into()],
            ..dead.clone()
        };
        fs::write(state.path().join("taskgroups-2.state"), render(&live)).unwrap();
        fs::write(
            state.path().join("taskgroups-3.state"),
            format!("{STATE_MAGIC}\nboot_id x\npid 1\nstarttime 1\nroot /\ndir ../etc\n"),
        )
        .unwrap();
        assert_eq!(
            stale_task_groups(&h),
            [root.path().join("a"), root.path().join("a/b")]
        );
        let removed = cleanup_stale_task_groups(&h).unwrap();
        assert_eq!(removed.len(), 2);
        assert!(!root.path().join("a").exists());
        assert!(root.path().join("live").exists());
        assert!(!state.path().join("taskgroups-1.state").exists());
        assert!(state.path().join("taskgroups-2.state").exists());
        assert!(state.path().join("taskgroups-3.state").exists());
        assert!(cleanup_stale_task_groups(&h).unwrap().is_empty(), "idempotent");
    }
}
