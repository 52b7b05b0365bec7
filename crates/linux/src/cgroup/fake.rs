//! Test support: a fake cgroup tree in a temporary directory and a fake kernel that handles
//! the writes cgroupfs would (task moves, subtree control, v2 partition validation).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use super::{CgroupVersion, CpusetHierarchy, FakeKernel};
use crate::sys::parse_cpu_list;

/// A pid above any possible pid_max (2²² = 4 194 304): never alive.
pub(super) const DEAD_PID: u32 = 4_194_400;

pub(super) type Log = Arc<Mutex<Vec<(String, String)>>>;

/// Moves `id` into the cgroup whose `file` (tasks / cgroup.procs) is `path`: removed from
/// every other cgroup of the fake tree, appended here — what the kernel does on a write.
pub(super) fn move_id(root: &Path, file: &str, path: &Path, id: &str) -> io::Result<()> {
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
pub(super) fn fake_kernel(root: PathBuf, log: Log, reject_partitions: bool) -> FakeKernel {
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

pub(super) struct Fake {
    pub(super) _tmp: tempfile::TempDir,
    pub(super) root: PathBuf,
    pub(super) state: PathBuf,
    pub(super) log: Log,
}

pub(super) fn fake_tree(version: CgroupVersion) -> Fake {
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
    pub(super) fn hier(&self, version: CgroupVersion, reject: bool) -> CpusetHierarchy {
        CpusetHierarchy::new(version, &self.root)
            .with_state_dir(&self.state)
            .with_fake_kernel(fake_kernel(self.root.clone(), self.log.clone(), reject))
    }
    pub(super) fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.root.join(rel))
            .unwrap()
            .trim()
            .to_string()
    }
    pub(super) fn pacer_dirs(&self) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(&self.root)
            .unwrap()
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
    pub(super) fn state_files(&self) -> usize {
        fs::read_dir(&self.state).map(|d| d.count()).unwrap_or(0)
    }
}

/// A real, live child process (its affinity can be read) that the fake kernel can "move".
pub(super) struct Child(std::process::Child);
impl Child {
    pub(super) fn sleep() -> Child {
        Child(Command::new("sleep").arg("30").spawn().expect("spawn sleep"))
    }
    pub(super) fn pid(&self) -> u32 {
        self.0.id()
    }
}
impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
