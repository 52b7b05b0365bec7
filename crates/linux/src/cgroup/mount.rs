//! Where the cpuset controller is mounted: a cgroup2 mount that offers it, else the cgroup v1
//! hierarchy with the `cpuset` option, found in `/proc/self/mountinfo`; and whether a directory
//! is cgroupfs at all (a fake tree for tests is not).

use std::fs;
use std::path::Path;

use super::{v2, CgroupVersion, CpusetError, CpusetHierarchy};
use crate::sys::parse_mountinfo;

/// `statfs` magic numbers of cgroupfs (v1) and cgroup2.
const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// Whether `path` is on cgroupfs or cgroup2 (`statfs(2)` magic).
pub(super) fn on_cgroupfs(path: &Path) -> bool {
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

impl CpusetHierarchy {
    /// Finds the cpuset controller from `/proc/self/mountinfo`: a cgroup2 mount whose
    /// `cgroup.controllers` lists `cpuset`, else the cgroup v1 hierarchy with the `cpuset`
    /// option (a controller is on one of them only).
    pub fn detect() -> Result<CpusetHierarchy, CpusetError> {
        let path = Path::new(crate::sys::MOUNTINFO);
        let text = fs::read_to_string(path).map_err(|e| CpusetError::io("read", path, e))?;
        CpusetHierarchy::detect_in(&text)
    }

    /// [`detect`](Self::detect) on given mountinfo text (the listed mount points are read).
    pub fn detect_in(mountinfo: &str) -> Result<CpusetHierarchy, CpusetError> {
        let mounts = parse_mountinfo(mountinfo);
        let mut subtree = None;
        let v2 = mounts.iter().filter(|m| m.fstype == "cgroup2").find(|m| {
            fs::read_to_string(m.mount_point.join(v2::CONTROLLERS))
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
}

/// [`CpusetHierarchy::detect`].
pub fn detect() -> Result<CpusetHierarchy, CpusetError> {
    CpusetHierarchy::detect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
