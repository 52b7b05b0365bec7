//! cgroup v1 cpusets (sched-deadline.rst §5.1, cgroup-v1/cpusets.rst §1.7): each partition an
//! exclusive, balanced child cpuset, the root exclusive and unbalanced; threads move singly
//! (`tasks`). Also the v1-only rebuild of every root domain's deadline accounting.

use std::path::Path;

use super::{CgroupVersion, CpusetError, CpusetHierarchy};

pub(super) const CPUS: &str = "cpuset.cpus";
pub(super) const EFFECTIVE_CPUS: &str = "cpuset.effective_cpus";
pub(super) const MEMS: &str = "cpuset.mems";
pub(super) const EFFECTIVE_MEMS: &str = "cpuset.effective_mems";
pub(super) const CPU_EXCLUSIVE: &str = "cpuset.cpu_exclusive";
pub(super) const LOAD_BALANCE: &str = "cpuset.sched_load_balance";
pub(crate) const TASKS: &str = "tasks";

/// The root knobs a v1 partitioning needs, with their values now: (file, wanted, to restore),
/// for those that differ. `sched_load_balance` is last: the kernel rebuilds the domains when it
/// changes, which must happen once, with every partition in place.
pub(super) fn root_changes(
    hier: &CpusetHierarchy,
) -> Result<Vec<(&'static str, &'static str, String)>, CpusetError> {
    let mut out = Vec::new();
    for (knob, want) in [(CPU_EXCLUSIVE, "1"), (LOAD_BALANCE, "0")] {
        let now = hier.read(&hier.root.join(knob))?;
        if now != want {
            out.push((knob, want, now));
        }
    }
    Ok(out)
}

/// The root's memory nodes, which every partition copies (v1 refuses tasks while a cpuset has
/// none).
pub(super) fn root_mems(hier: &CpusetHierarchy) -> Result<String, CpusetError> {
    let m = hier.read(&hier.root.join(MEMS))?;
    if m.is_empty() {
        hier.read(&hier.root.join(EFFECTIVE_MEMS))
    } else {
        Ok(m)
    }
}

/// Makes the new cgroup `dir` an exclusive, balanced cpuset of CPUs `list`.
pub(super) fn make_partition(
    hier: &CpusetHierarchy,
    dir: &Path,
    list: &str,
    mems: &str,
) -> Result<(), CpusetError> {
    hier.write(&dir.join(CPUS), list)?;
    hier.write(&dir.join(MEMS), mems)?;
    hier.write(&dir.join(CPU_EXCLUSIVE), "1")?;
    hier.write(&dir.join(LOAD_BALANCE), "1")
}

impl CpusetHierarchy {
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
        let knob = self.root.join(LOAD_BALANCE);
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

/// [`CpusetHierarchy::rebuild_root_domains`] on the detected hierarchy.
pub fn rebuild_root_domains() -> Result<bool, CpusetError> {
    CpusetHierarchy::detect()?.rebuild_root_domains()
}

#[cfg(test)]
mod tests {
    use super::super::fake::*;
    use super::*;
    use std::fs;

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
}
