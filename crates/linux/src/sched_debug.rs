//! The scheduler's debugfs file (`/sys/kernel/debug/sched/debug`): each CPU's root-domain
//! SCHED_DEADLINE bandwidth (`dl_bw->bw`, `dl_bw->total_bw`), read without touching
//! `sched_rt_*_us` (whose read rebuilds the root domains, see docs/linux.md); mounting debugfs
//! when it is not.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::cgroup::CpusetError;
use crate::sys::parse_mountinfo;

/// The scheduler debug file with each CPU's root-domain deadline bandwidth.
pub const SCHED_DEBUG: &str = "/sys/kernel/debug/sched/debug";

const DEBUGFS: &str = "/sys/kernel/debug";

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
    let mounted = fs::read_to_string(crate::sys::MOUNTINFO)
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
}
