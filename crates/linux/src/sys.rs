//! The /proc and /sys helpers used across the crate, in one place: kernel CPU lists (parse and
//! format), the online CPUs, the mount table (`/proc/self/mountinfo`), and the clocks.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::PathBuf;

/// The mount table of this process's mount namespace (proc(5)).
pub const MOUNTINFO: &str = "/proc/self/mountinfo";
/// The online CPUs, as a CPU list.
pub const ONLINE_CPUS: &str = "/sys/devices/system/cpu/online";

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
                root: unescape_mount_path(fields[3]),
                mount_point: PathBuf::from(unescape_mount_path(fields[4])),
                fstype: fields[sep + 1].to_string(),
                source: unescape_mount_path(fields[sep + 2]),
                super_options: fields
                    .get(sep + 3)
                    .map(|o| o.split(',').map(str::to_string).collect())
                    .unwrap_or_default(),
            })
        })
        .collect()
}

/// The mounts of this process's namespace, from [`MOUNTINFO`].
pub fn mounts() -> io::Result<Vec<MountInfo>> {
    Ok(parse_mountinfo(&fs::read_to_string(MOUNTINFO)?))
}

/// The mount table escapes space, tab, newline and backslash as octal.
pub fn unescape_mount_path(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            let d = &b[i + 1..i + 4];
            if d.iter().all(|c| (b'0'..=b'7').contains(c)) {
                let v = d.iter().fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
                if let Ok(v) = u8::try_from(v) {
                    out.push(v);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
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

/// Online CPUs from [`ONLINE_CPUS`] ("0-3,6"); falls back to `0..sysconf(_SC_NPROCESSORS_ONLN)`.
pub fn online_cpus() -> Vec<usize> {
    let parsed = fs::read_to_string(ONLINE_CPUS)
        .ok()
        .and_then(|s| parse_cpu_list(&s))
        .filter(|cpus| !cpus.is_empty());
    parsed.unwrap_or_else(|| {
        // SAFETY: sysconf has no memory-safety preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        (0..n.max(1) as usize).collect()
    })
}

// ---- clocks ---------------------------------------------------------------------------------

/// `clock_gettime(clock)` in nanoseconds. The clocks pacer uses cannot fail on Linux; a failure
/// would read as 0.
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable timespec; clock_gettime only writes it.
    let r = unsafe { libc::clock_gettime(clock, &mut ts) };
    if r != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// The kernel as `uname` names it, read from /proc/sys/kernel (an empty field where that file
/// cannot be read); `machine` is the architecture pacer was built for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uname {
    pub sysname: String,
    pub version: String,
    pub release: String,
    pub hostname: String,
    pub machine: String,
}

impl Uname {
    /// This machine's.
    pub fn this_machine() -> Uname {
        let read = |f: &str| {
            std::fs::read_to_string(format!("/proc/sys/kernel/{f}"))
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        Uname {
            sysname: read("ostype"),
            version: read("version"),
            release: read("osrelease"),
            hostname: read("hostname"),
            machine: std::env::consts::ARCH.to_string(),
        }
    }
}

/// CLOCK_MONOTONIC now, ns: the clock of the adaptation engine, of traced wake-ups and of every
/// timestamp of a run.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `send(fd, buf, MSG_DONTWAIT | MSG_NOSIGNAL)`: queue `buf` on a socket without blocking or
/// raising SIGPIPE (the client library's notifications, sent from real-time threads).
/// Allocation-free; `Interrupted` is retried.
pub fn send_nowait(fd: std::os::fd::RawFd, buf: &[u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is initialised and valid for reads of its length; flags are plain bits.
        let r = unsafe {
            libc::send(
                fd,
                buf.as_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

// The calling thread's clocks, counters and name for timed loops, written for the rt-app
// executor and shared with the component runtime (`pacer_runtime::exec`).
pub use crate::run::sys::{
    context_switches, current_cpu, lock_memory, set_thread_name, thread_cpu_ns, unlock_memory,
};

/// `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, abs_ns)`; false if a signal interrupted it
/// (the only error a valid absolute request can give).
pub fn sleep_until_ns(abs_ns: u64) -> bool {
    let ts = libc::timespec {
        tv_sec: (abs_ns / 1_000_000_000).min(libc::time_t::MAX as u64) as libc::time_t,
        tv_nsec: (abs_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `ts` is a live timespec the kernel only reads; no remainder is asked for.
    let r = unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
    // clock_nanosleep returns the error number instead of setting errno.
    r != libc::EINTR
}

/// Σ over CPUs of `steal` in /proc/stat, ns (the `cpu` line's 8th value, in USER_HZ ticks).
pub fn steal_ns() -> Option<u64> {
    steal_by_cpu_ns()?
        .into_iter()
        .find(|(cpu, _)| cpu.is_none())
        .map(|(_, ns)| ns)
}

/// Steal time so far from /proc/stat, ns: the all-CPU line (`None`) and each CPU's line.
pub fn steal_by_cpu_ns() -> Option<Vec<(Option<usize>, u64)>> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Some(parse_steal(&stat, if hz > 0 { hz as u64 } else { 100 }))
}

fn parse_steal(stat: &str, hz: u64) -> Vec<(Option<usize>, u64)> {
    stat.lines()
        .filter_map(|l| {
            let mut f = l.split_ascii_whitespace();
            let cpu = match f.next()?.strip_prefix("cpu")? {
                "" => None,
                n => Some(n.parse().ok()?),
            };
            let ticks: u64 = f.nth(7)?.parse().ok()?;
            Some((cpu, ticks.saturating_mul(1_000_000_000) / hz))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const MOUNTINFO: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime shared:9 - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/mem\\040ory rw,relatime master:3 shared:10 - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
garbage line
44 23 0:8 / /sys/kernel/debug rw,relatime - debugfs
";

    #[test]
    fn steal_is_read_per_cpu_and_in_all() {
        let stat = "cpu  2844493 122299 507232 2708579 22473 0 3037 6115 0 0\n\
                    cpu0 1 2 3 4 5 6 7 250 0 0\n\
                    cpu1 1 2 3 4 5 6 7 3 0 0\n\
                    intr 1 2 3\n";
        assert_eq!(
            parse_steal(stat, 100),
            vec![
                (None, 61_150_000_000),
                (Some(0), 2_500_000_000),
                (Some(1), 30_000_000)
            ]
        );
    }

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
        assert_eq!(unescape_mount_path("a\\134b\\"), "a\\b\\");
        assert_eq!(unescape_mount_path("\\77"), "\\77");
        assert_eq!(unescape_mount_path("/a\\040b"), "/a b");
        assert_eq!(unescape_mount_path("/plain\\"), "/plain\\");
        assert!(parse_mountinfo("").is_empty());
        assert!(parse_mountinfo("1 2 3 4 5 6 -").is_empty());
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
}

/// A PM QoS request for CPU wake-up latency (`/dev/cpu_dma_latency`, kernel
/// Documentation/power/pm_qos_interface.rst): while the file is open with a value written, the
/// cpuidle governor keeps every CPU out of idle states whose exit latency exceeds it. With 0 a
/// CPU polls instead of halting, which is what keeps a real-time thread's wake-up from paying
/// an idle exit (on the development VM, a halted vCPU added up to milliseconds; see
/// docs/experiments/rtdroid.md). The kernel drops the request when the file is closed, so it
/// ends with this value or with the process, however it ends.
#[derive(Debug)]
pub struct CpuLatencyRequest {
    _file: std::fs::File,
    pub us: u32,
}

impl CpuLatencyRequest {
    /// Asks for at most `us` microseconds of wake-up latency (needs root).
    pub fn new(us: u32) -> io::Result<CpuLatencyRequest> {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/cpu_dma_latency")?;
        // The binary form (a 32-bit integer) is what the kernel reads in one write.
        f.write_all(&(us.min(i32::MAX as u32) as i32).to_ne_bytes())?;
        Ok(CpuLatencyRequest { _file: f, us })
    }
}
