//! rt-app's `nodes_membind` in `pacer run`: the thread binds its memory to the nodes with
//! `set_mempolicy(MPOL_BIND)`, what libnuma's `numa_set_membind()` does for rt-app
//! (`set_thread_membind()`): at its start for a thread-level binding, at each pass of a phase
//! that names one when it differs from the current one (sticky, like a phase's policy). The
//! policy is per thread and ends with it. Nodes are checked against the online ones before
//! any thread starts, as rt-app checks against `numa_max_node()`.

use std::io;

use pacer_workload::Workload;

use super::RunError;
use crate::sys::parse_cpu_list;

/// `MPOL_BIND` (include/uapi/linux/mempolicy.h).
const MPOL_BIND: libc::c_int = 2;
const ONLINE: &str = "/sys/devices/system/node/online";

/// The online NUMA nodes (`/sys/devices/system/node/online`; a kernel without NUMA has node 0).
fn online() -> Vec<u32> {
    std::fs::read_to_string(ONLINE)
        .ok()
        .and_then(|t| parse_cpu_list(t.trim()))
        .map_or_else(|| vec![0], |v| v.into_iter().map(|n| n as u32).collect())
}

/// Checks that every node a binding names is online.
pub(crate) fn check(w: &Workload) -> Result<(), RunError> {
    let online = online();
    for t in &w.threads {
        let bindings = t
            .membind
            .iter()
            .chain(t.phases.iter().filter_map(|p| p.membind.as_ref()));
        for nodes in bindings {
            if let Some(n) = nodes.iter().find(|n| !online.contains(n)) {
                return Err(RunError::BadThread {
                    thread: t.name.clone(),
                    message: format!(
                        "nodes_membind names NUMA node {n}, but this machine's online nodes are {online:?} ({ONLINE})"
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Binds the calling thread's memory allocations to `nodes`.
pub(crate) fn bind(nodes: &[u32]) -> io::Result<()> {
    let bits = usize::BITS as usize;
    let top = nodes.iter().copied().max().unwrap_or(0) as usize;
    let mut mask = vec![0 as libc::c_ulong; top / bits + 1];
    for &n in nodes {
        mask[n as usize / bits] |= 1 << (n as usize % bits);
    }
    // The kernel reads `maxnode - 1` bits (get_nodes() in mm/mempolicy.c), hence the + 1, as
    // libnuma passes.
    let maxnode = (mask.len() * bits + 1) as libc::c_ulong;
    // SAFETY: set_mempolicy(2) reads `mask.len()` words from a live buffer of that many words.
    let r = unsafe { libc::syscall(libc::SYS_set_mempolicy, MPOL_BIND, mask.as_ptr(), maxnode) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The calling thread's memory policy mode and the first word of its node mask
/// (`get_mempolicy(2)`); for tests.
pub fn current_policy() -> io::Result<(i32, u64)> {
    let mut mode: libc::c_int = 0;
    let mut mask: [libc::c_ulong; 16] = [0; 16];
    let maxnode = (mask.len() * usize::BITS as usize) as libc::c_ulong;
    // SAFETY: get_mempolicy(2) writes one int and at most `maxnode` bits into live buffers.
    let r = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut mode as *mut libc::c_int,
            mask.as_mut_ptr(),
            maxnode,
            std::ptr::null_mut::<libc::c_void>(),
            0 as libc::c_ulong,
        )
    };
    if r == 0 {
        #[allow(clippy::unnecessary_cast)] // c_ulong is not u64 on every target
        Ok((mode, mask[0] as u64))
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Binding to node 0 (online everywhere) is what get_mempolicy then reports; it is per
    /// thread, so a fresh thread does it and the test's own thread keeps its policy.
    #[test]
    fn binds_the_calling_thread_only() {
        let before = current_policy().unwrap();
        let after = std::thread::spawn(|| {
            bind(&[0]).unwrap();
            current_policy().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(after, (MPOL_BIND, 1));
        assert_eq!(current_policy().unwrap(), before);
    }

    #[test]
    fn offline_nodes_are_refused_before_the_run() {
        let w = pacer_workload::parse_rtapp(r#"{"tasks":{"t":{"run":1,"nodes_membind":[1000]}}}"#, "t.json")
            .unwrap();
        let e = check(&w).unwrap_err().to_string();
        assert!(e.contains("NUMA node 1000") && e.contains("online nodes"), "{e}");
        let ok = pacer_workload::parse_rtapp(r#"{"tasks":{"t":{"run":1,"nodes_membind":[0]}}}"#, "t.json")
            .unwrap();
        check(&ok).unwrap();
    }
}
