//! Test support shared by pacer's crates: one way for a test that needs root or a kernel feature
//! to say so, so that it is *reported* as not run when it cannot run, and *fails* when it must.
//!
//! libtest has no runtime "skip": a test that returns early counts as passed. So the decision is
//! split in two:
//!
//! - **At build time** the crate's `build.rs` calls [`build::privileged_cfg`], which sets
//!   `cfg(pacer_privileged)` when the build runs as root or with `PACER_REQUIRE_ROOT=1`. Without
//!   it, privileged tests are compiled `#[ignore]`d: `cargo test` lists them as *ignored* (CI's
//!   closing line counts them as skipped), never as passed. `cargo test -- --ignored` still runs
//!   them.
//! - **At run time** the test calls [`require`] for each [`Need`] first. It checks the need for
//!   real (the effective uid, a SCHED_DEADLINE probe, tracefs, a perf event, …) and panics with a
//!   message naming what is missing and how to get it. So when the tests are compiled in (root,
//!   or CI with `PACER_REQUIRE_ROOT=1`) a missing privilege or kernel feature is a failure.
//!
//! In a crate with privileged tests, `Cargo.toml` gets `pacer-testkit` as both a
//! `[build-dependencies]` and a `[dev-dependencies]` entry, and `build.rs` is:
//!
//! ```no_run
//! fn main() {
//!     pacer_testkit::build::privileged_cfg();
//! }
//! ```
//!
//! Each privileged test carries the attribute (always this text, so the ignore reason reads the
//! same everywhere) and states its needs before doing anything:
//!
//! ```no_run
//! use pacer_testkit::{require, Need};
//!
//! #[test]
//! #[cfg_attr(not(pacer_privileged), ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1")]
//! fn traced_wakeups_are_periodic() {
//!     require(Need::Root);
//!     require(Need::SchedDeadline);
//!     require(Need::Tracefs);
//!     // … the test proper
//! }
//! # fn main() {}
//! ```
//!
//! A test that needs privileges for only part of its work is better split in two, so the
//! unprivileged part runs everywhere and the rest is reported as ignored where it cannot run.

// The examples show whole `build.rs` files, whose `fn main` is the point.
#![allow(clippy::needless_doctest_main)]

use std::fmt;
use std::path::{Path, PathBuf};

pub mod build;
#[cfg(feature = "fuzz")]
pub mod fuzz;
pub mod html;

/// Something a test needs from the machine. [`require`] checks it for real.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Need {
    /// Effective uid 0.
    Root,
    /// The calling process may put a thread under SCHED_DEADLINE and admission control has room
    /// for a small reservation (probed on a short-lived thread that puts itself back).
    SchedDeadline,
    /// tracefs is mounted (or mountable by root) with the `sched:sched_wakeup` tracepoint, and
    /// this user may create instances in it.
    Tracefs,
    /// A perf software event (context switches) can be opened on another thread of this process:
    /// root, or `kernel.perf_event_paranoid` ≤ 1.
    PerfEvents,
    /// A cpuset controller whose top cpuset is visible: a cgroup v1 `cpuset` hierarchy or a
    /// cgroup2 mount listing `cpuset` (what `pacer_linux::cpuset::detect` looks for).
    CgroupCpuset,
    /// As [`Need::CgroupCpuset`], and the controller found is the cgroup v1 one.
    CgroupV1Cpuset,
    /// The scheduler's debugfs file (`/sys/kernel/debug/sched/debug`) is readable and shows the
    /// root domains' `dl_bw` accounting.
    SchedDebug,
    /// The calling thread may run on every one of these CPUs.
    Cpus(&'static [usize]),
    /// An executable of this name on `PATH` (or at this path).
    Program(&'static str),
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Need::Root => f.write_str("root"),
            Need::SchedDeadline => f.write_str("SCHED_DEADLINE"),
            Need::Tracefs => f.write_str("tracefs"),
            Need::PerfEvents => f.write_str("perf events"),
            Need::CgroupCpuset => f.write_str("a cgroup cpuset controller"),
            Need::CgroupV1Cpuset => f.write_str("a cgroup v1 cpuset hierarchy"),
            Need::SchedDebug => f.write_str("the scheduler's debugfs (dl_bw)"),
            Need::Cpus(cpus) => write!(f, "CPUs {cpus:?}"),
            Need::Program(p) => write!(f, "the program `{p}`"),
        }
    }
}

/// Panics, naming the need and how to get it, unless the machine provides `need`.
///
/// Call it at the start of every test annotated with
/// `#[cfg_attr(not(pacer_privileged), ignore = "…")]`, once per need.
#[track_caller]
pub fn require(need: Need) {
    if let Err(why) = check(need) {
        panic!(
            "this test needs {need}, which is missing: {why}\n(privileged tests are compiled in \
             when the build runs as root or with PACER_REQUIRE_ROOT=1, and then a missing need \
             fails them; otherwise `cargo test` reports them as ignored)"
        );
    }
}

/// Whether the machine provides `need`; `Err` says what is missing and how to get it.
pub fn check(need: Need) -> Result<(), String> {
    match need {
        Need::Root => root(),
        Need::SchedDeadline => sched_deadline(),
        Need::Tracefs => tracefs(),
        Need::PerfEvents => perf_events(),
        Need::CgroupCpuset => cpuset().map(|_| ()),
        Need::CgroupV1Cpuset => match cpuset()? {
            (Cgroup::V1, _) => Ok(()),
            (Cgroup::V2, at) => Err(format!(
                "the cpuset controller is on cgroup v2 at {}; boot with cgroup v1 \
                 (systemd.unified_cgroup_hierarchy=0) to run these tests",
                at.display()
            )),
        },
        Need::SchedDebug => sched_debug(),
        Need::Cpus(cpus) => allowed_cpus(cpus),
        Need::Program(name) => program(name),
    }
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn root() -> Result<(), String> {
    match euid() {
        0 => Ok(()),
        e => Err(format!(
            "effective uid {e}; run the tests as root (e.g. `sudo -E cargo test …`)"
        )),
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The kernel's `struct sched_attr` (include/uapi/linux/sched/types.h, SCHED_ATTR_SIZE_VER0).
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

const SCHED_OTHER: u32 = 0;
const SCHED_DEADLINE: u32 = 6;

fn sched_setattr_self(attr: &SchedAttr) -> Result<(), i32> {
    // SAFETY: `attr` is a live #[repr(C)] sched_attr whose `size` is its own size; the kernel
    // only reads it. pid 0 is the calling thread.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, attr as *const SchedAttr, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

/// The longest period the kernel accepts for a reservation, capped at its default maximum
/// (2²² µs ≈ 4.19 s).
fn parking_period_ns() -> u64 {
    const DEFAULT_MAX_US: u64 = 1 << 22;
    std::fs::read_to_string("/proc/sys/kernel/sched_deadline_period_max_us")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(DEFAULT_MAX_US)
        .min(DEFAULT_MAX_US)
        * 1000
}

fn sched_deadline() -> Result<(), String> {
    // Admission can be full for a moment when an earlier test's processes are still exiting
    // (a SCHED_DEADLINE thread that leaves the policy with positive lag keeps its bandwidth
    // until its 0-lag time, up to a period later). Wait a bounded while before calling it
    // missing, and say so; a machine that stays full is a failure that names the holders.
    const ATTEMPTS: u32 = 20;
    let mut probe = probe_deadline()?;
    let mut waited = 0;
    while probe == Err(libc::EBUSY) && waited < ATTEMPTS {
        if waited == 0 {
            eprintln!(
                "pacer-testkit: SCHED_DEADLINE admission is full; waiting up to {} s for the \
                 bandwidth to come back\n{}",
                ATTEMPTS / 2,
                deadline_holders()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
        waited += 1;
        probe = probe_deadline()?;
    }
    if waited > 0 && probe.is_ok() {
        eprintln!(
            "pacer-testkit: SCHED_DEADLINE admitted after {} ms of waiting",
            waited * 500
        );
    }
    match probe {
        Ok(()) => Ok(()),
        Err(libc::EPERM) => Err(format!(
            "sched_setattr(SCHED_DEADLINE) -> EPERM (effective uid {}): needs root (CAP_SYS_NICE) \
             and an affinity covering the whole root domain",
            euid()
        )),
        Err(libc::EBUSY) => Err(format!(
            "sched_setattr(SCHED_DEADLINE 0.1 ms / 10 ms) -> EBUSY for {} s: admission control \
             is full; other SCHED_DEADLINE threads on this machine hold the deadline bandwidth \
             (kernel.sched_rt_runtime_us caps it)\n{}",
            ATTEMPTS / 2,
            deadline_holders()
        )),
        Err(e) => Err(format!(
            "sched_setattr(SCHED_DEADLINE) -> {}: this kernel cannot run SCHED_DEADLINE \
             (Linux ≥ 3.14)",
            std::io::Error::from_raw_os_error(e)
        )),
    }
}

/// One admission attempt of 0.1 ms / 10 ms on a thread of its own, left at once; the errno.
fn probe_deadline() -> Result<Result<(), i32>, String> {
    // A thread of its own, so the test thread's policy is never touched.
    std::thread::spawn(|| {
        let size = std::mem::size_of::<SchedAttr>() as u32;
        let dl = |runtime, period| SchedAttr {
            size,
            policy: SCHED_DEADLINE,
            runtime,
            deadline: period,
            period,
            ..SchedAttr::default()
        };
        let r = sched_setattr_self(&dl(100_000, 10_000_000));
        if r.is_ok() {
            // Leaving SCHED_DEADLINE directly defers the bandwidth's release to the 0-lag time,
            // so a test reading `dl_bw->total_bw` right after this would count the probe. A
            // parameter change swaps the bandwidth at once: first shrink the reservation to
            // 1024 ns per ~4 s, which is 0 in the kernel's 20-bit fixed point (as
            // `pacer_linux::sched::set_policy` does), then leave.
            let parked = dl(1024, parking_period_ns());
            sched_setattr_self(&parked).expect("the probe thread shrinks its reservation");
            let other = SchedAttr {
                size,
                policy: SCHED_OTHER,
                ..SchedAttr::default()
            };
            sched_setattr_self(&other).expect("the probe thread leaves SCHED_DEADLINE");
        }
        r
    })
    .join()
    .map_err(|_| "the SCHED_DEADLINE probe thread panicked".to_string())
}

/// Who holds the deadline bandwidth: every SCHED_DEADLINE thread in `/proc` (policy 6 in field
/// 41 of `stat`) and the scheduler's `dl_bw` lines, for a failure that can be diagnosed.
fn deadline_holders() -> String {
    let mut out = String::from("SCHED_DEADLINE threads:");
    let mut any = false;
    for proc_entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(tasks) = std::fs::read_dir(proc_entry.path().join("task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
                continue;
            };
            // comm is parenthesised and may hold spaces; the fields after it are plain.
            let Some(close) = stat.rfind(')') else {
                continue;
            };
            let comm = stat[..close].split_once('(').map_or("?", |(_, c)| c);
            // Field 41 (policy) is the 39th after the closing parenthesis (state is field 3).
            let policy = stat[close + 1..].split_whitespace().nth(38);
            if policy == Some("6") {
                any = true;
                let pid = proc_entry.file_name().to_string_lossy().into_owned();
                let tid = task.file_name().to_string_lossy().into_owned();
                out.push_str(&format!(" {comm}[pid {pid} tid {tid}]"));
            }
        }
    }
    if !any {
        out.push_str(" none");
    }
    if let Ok(debug) = std::fs::read_to_string("/sys/kernel/debug/sched/debug") {
        out.push_str("\nscheduler dl_bw:");
        let mut cpu = "";
        for line in debug.lines() {
            if line.starts_with("dl_rq[") {
                cpu = line.trim_end_matches(':');
            } else if line.contains("dl_bw->") {
                out.push_str(&format!("\n  {cpu} {}", line.trim()));
            }
        }
    }
    out
}

/// `/proc/mounts` escapes space, tab, newline and backslash in paths as `\ooo`.
fn unescape(s: &str) -> PathBuf {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            let v = b[i + 1..i + 4]
                .iter()
                .fold(0u32, |a, c| a * 8 + u32::from(c - b'0'));
            if let Ok(v) = u8::try_from(v) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    PathBuf::from(String::from_utf8_lossy(&out).into_owned())
}

const TRACEFS_PATHS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
const WAKEUP_EVENT: &str = "events/sched/sched_wakeup";

fn tracefs() -> Result<(), String> {
    // Checked first: tracefs and debugfs are root-only, so without root every path below looks
    // missing, which would be the wrong advice.
    if euid() != 0 {
        return Err("tracefs instances and event filters are root-only; run the tests as root".to_string());
    }
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let mounted: Vec<PathBuf> = mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, dir, kind) = (f.next()?, f.next()?, f.next()?);
            match kind {
                "tracefs" => Some(unescape(dir)),
                "debugfs" => Some(unescape(dir).join("tracing")),
                _ => None,
            }
        })
        .chain(TRACEFS_PATHS.iter().map(PathBuf::from))
        .collect();
    if let Some(root) = mounted.iter().find(|p| p.join("events").is_dir()) {
        if !root.join(WAKEUP_EVENT).is_dir() {
            return Err(format!(
                "tracefs at {} has no sched:sched_wakeup tracepoint ({WAKEUP_EVENT} missing)",
                root.display()
            ));
        }
        return Ok(());
    }
    // pacer mounts tracefs itself when it is not mounted (as libtracefs does): fine if it can.
    let known = std::fs::read_to_string("/proc/filesystems")
        .is_ok_and(|f| f.lines().any(|l| l.split_whitespace().last() == Some("tracefs")));
    if known && Path::new(TRACEFS_PATHS[0]).is_dir() {
        return Ok(());
    }
    Err(format!(
        "tracefs is not mounted and cannot be: mount it with `mount -t tracefs nodev {}` \
         (a kernel with CONFIG_FTRACE)",
        TRACEFS_PATHS[0]
    ))
}

/// The first 64 bytes of the kernel's `struct perf_event_attr` (PERF_ATTR_SIZE_VER0), enough
/// for a counting software event.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_CONTEXT_SWITCHES: u64 = 3;
/// `disabled` and `exclude_hv` in the bitfield word: what pacer's counters ask for.
const PERF_ATTR_FLAGS: u64 = 1 | (1 << 6);
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

fn perf_events() -> Result<(), String> {
    // pacer counts *other* threads, which is what the permission rules distinguish: open the
    // event on a helper thread, as the tests do.
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let helper = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions and cannot fail.
        let _ = tid_tx.send(unsafe { libc::gettid() });
        let _ = done_rx.recv();
    });
    let tid = tid_rx
        .recv()
        .map_err(|_| "the perf probe thread died".to_string())?;
    let attr = PerfEventAttr {
        type_: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: PERF_COUNT_SW_CONTEXT_SWITCHES,
        flags: PERF_ATTR_FLAGS,
        ..PerfEventAttr::default()
    };
    // SAFETY: `attr` is a live #[repr(C)] perf_event_attr of exactly `attr.size` bytes that the
    // kernel only reads; the other arguments are integers.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            tid,
            -1 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    let err = errno();
    if fd >= 0 {
        // SAFETY: the kernel just returned this descriptor to us and nothing else uses it.
        unsafe { libc::close(fd as libc::c_int) };
    }
    let _ = done_tx.send(());
    let _ = helper.join();
    if fd >= 0 {
        return Ok(());
    }
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map_or_else(|_| "unknown".to_string(), |s| s.trim().to_string());
    Err(match err {
        libc::EACCES | libc::EPERM => format!(
            "perf_event_open on another thread -> {} (kernel.perf_event_paranoid = {paranoid}); \
             run as root or `sysctl kernel.perf_event_paranoid=1`",
            std::io::Error::from_raw_os_error(err)
        ),
        e => format!(
            "perf_event_open(software context-switches) -> {}: this kernel has no usable perf \
             software events (CONFIG_PERF_EVENTS)",
            std::io::Error::from_raw_os_error(e)
        ),
    })
}

enum Cgroup {
    V1,
    V2,
}

/// The cpuset controller as `pacer_linux::cpuset::detect` finds it: a cgroup2 mount listing
/// `cpuset` first, then a v1 hierarchy; only mounts of the top cgroup count.
fn cpuset() -> Result<(Cgroup, PathBuf), String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    // mountinfo: "id parent maj:min root mount-point options [optional…] - fstype source super".
    let mounts: Vec<(String, PathBuf, String, String)> = text
        .lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let pre: Vec<&str> = pre.split_whitespace().collect();
            let post: Vec<&str> = post.split_whitespace().collect();
            Some((
                pre.get(3)?.to_string(),
                unescape(pre.get(4)?),
                post.first()?.to_string(),
                post.get(2).copied().unwrap_or("").to_string(),
            ))
        })
        .collect();
    let v2 = mounts.iter().filter(|m| m.2 == "cgroup2").filter(|m| {
        std::fs::read_to_string(m.1.join("cgroup.controllers"))
            .is_ok_and(|c| c.split_whitespace().any(|w| w == "cpuset"))
    });
    let v1 = mounts
        .iter()
        .filter(|m| m.2 == "cgroup" && m.3.split(',').any(|o| o == "cpuset"));
    let mut subtree = None;
    for (version, m) in v2.map(|m| (Cgroup::V2, m)).chain(v1.map(|m| (Cgroup::V1, m))) {
        // A container's bind mount of its own sub-tree hides the top cpuset, whose knobs decide
        // the root domains.
        if m.0 != "/" {
            subtree.get_or_insert_with(|| m.1.clone());
            continue;
        }
        return Ok((version, m.1.clone()));
    }
    Err(match subtree {
        Some(at) => format!(
            "the cpuset hierarchy at {} is only a sub-tree (a container?); run on the host",
            at.display()
        ),
        None => "no cpuset controller mounted: mount cgroup v1's \
                 (`mount -t cgroup -o cpuset cpuset /sys/fs/cgroup/cpuset`) or enable it in \
                 cgroup v2 (`echo +cpuset > /sys/fs/cgroup/cgroup.subtree_control`)"
            .to_string(),
    })
}

const SCHED_DEBUG: &str = "/sys/kernel/debug/sched/debug";

fn sched_debug() -> Result<(), String> {
    match std::fs::read_to_string(SCHED_DEBUG) {
        Ok(text) if text.contains("dl_bw->total_bw") => Ok(()),
        Ok(_) => Err(format!("{SCHED_DEBUG} shows no dl_bw->total_bw")),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied || euid() != 0 => Err(format!(
            "cannot read {SCHED_DEBUG}: {e}; debugfs is root-only, run the tests as root"
        )),
        Err(e) => Err(format!(
            "cannot read {SCHED_DEBUG}: {e}; mount debugfs (`mount -t debugfs none \
             /sys/kernel/debug`, a kernel with CONFIG_SCHED_DEBUG)"
        )),
    }
}

fn allowed_cpus(cpus: &[usize]) -> Result<(), String> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if rc != 0 {
        return Err(format!("sched_getaffinity: {}", std::io::Error::last_os_error()));
    }
    let max = 8 * std::mem::size_of_val(&set);
    // SAFETY: CPU_ISSET reads the set at an index below its capacity.
    let has = |c: usize| c < max && unsafe { libc::CPU_ISSET(c, &set) };
    let allowed: Vec<usize> = (0..max).filter(|&c| has(c)).collect();
    if cpus.iter().all(|&c| has(c)) {
        Ok(())
    } else {
        Err(format!(
            "this thread may run on CPUs {allowed:?}, the test uses {cpus:?} (a machine with \
             at least {} CPUs, without an affinity or cpuset restriction)",
            cpus.iter().max().map_or(0, |m| m.saturating_add(1))
        ))
    }
}

fn program(name: &str) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let executable =
        |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    let found = if name.contains('/') {
        executable(Path::new(name))
    } else {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|d| executable(&d.join(name))))
    };
    if found {
        Ok(())
    } else {
        Err(format!("`{name}` is not an executable on PATH; install it"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_paths_are_unescaped() {
        assert_eq!(unescape(r"/a\040b\134c"), PathBuf::from(r"/a b\c"));
        assert_eq!(unescape(r"/trailing\04"), PathBuf::from(r"/trailing\04"));
    }

    #[test]
    fn needs_name_themselves() {
        assert_eq!(Need::Cpus(&[0, 1]).to_string(), "CPUs [0, 1]");
        assert_eq!(Need::Program("setpriv").to_string(), "the program `setpriv`");
    }

    #[test]
    fn unprivileged_needs_are_checked() {
        // Answers known without privileges: every machine has `sh`, none has that name or CPU.
        assert_eq!(check(Need::Program("sh")), Ok(()));
        let e = check(Need::Program("no-such-program-\u{1}")).unwrap_err();
        assert!(e.contains("not an executable on PATH"), "{e}");
        assert!(check(Need::Cpus(&[usize::MAX])).is_err());
    }

    #[test]
    #[should_panic(expected = "this test needs CPUs")]
    fn require_panics_with_the_need() {
        require(Need::Cpus(&[usize::MAX]));
    }
}
