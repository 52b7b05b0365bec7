//! cgroup v2 cpusets (sched-deadline.rst §5.2, cgroup-v2.rst "Cpuset"): `+cpuset` in the root's
//! subtree control, each partition a child with `cpuset.cpus.partition = root` (or `isolated`),
//! which the kernel may refuse by reading back "… invalid (reason)"; work moves by process.

use std::path::PathBuf;

use super::{CpusetError, CpusetHierarchy, PartitionKind};

pub(super) const CONTROLLERS: &str = "cgroup.controllers";
pub(super) const SUBTREE: &str = "cgroup.subtree_control";
pub(super) const CPUS: &str = "cpuset.cpus";
pub(super) const EFFECTIVE_CPUS: &str = "cpuset.cpus.effective";
pub(super) const PARTITION: &str = "cpuset.cpus.partition";
pub(super) const THREADS: &str = "cgroup.threads";

/// The root change a v2 partitioning needs: `+cpuset` in the root's subtree control (the
/// children have no cpuset files until then), unless it is there already.
pub(super) fn root_changes(
    hier: &CpusetHierarchy,
) -> Result<Vec<(&'static str, &'static str, String)>, CpusetError> {
    let now = hier.read(&hier.root.join(SUBTREE))?;
    Ok(if now.split_whitespace().any(|c| c == "cpuset") {
        Vec::new()
    } else {
        vec![(SUBTREE, "+cpuset", "-cpuset".to_string())]
    })
}

/// Makes the new cgroup `dir` a partition of CPUs `list`, and checks that the kernel agreed:
/// it accepts the write and reports a refusal only in what the file reads back.
pub(super) fn make_partition(
    hier: &CpusetHierarchy,
    dir: PathBuf,
    list: &str,
    kind: PartitionKind,
) -> Result<(), CpusetError> {
    hier.write(&dir.join(CPUS), list)?;
    let want = match kind {
        PartitionKind::Root => "root",
        PartitionKind::Isolated => "isolated",
    };
    let path = dir.join(PARTITION);
    hier.write(&path, want)?;
    let state = hier.read(&path)?;
    if state != want {
        return Err(CpusetError::Rejected { dir, state });
    }
    Ok(())
}
