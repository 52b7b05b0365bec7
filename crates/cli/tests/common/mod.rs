//! Helpers shared by the test binaries that run `pacer exec` on the real kernel (`exec.rs`,
//! `integrity.rs`): the binary, the privilege check that also serialises the tests (they change
//! global scheduler state), signals, and `--json` lines read on a thread.
#![allow(dead_code)] // each test binary uses a different subset

use std::io::{BufRead, BufReader};
use std::process::{Child, Command};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pacer_linux::cpuset::{read_dl_bandwidth, total_bw_of};
use pacer_testkit::{require, Need};
use serde_json::Value;

static SERIAL: Mutex<()> = Mutex::new(());

/// The `pacer` binary under test.
pub fn pacer() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pacer"))
}

/// Takes the machine for this test, then checks what `pacer exec` needs (root, SCHED_DEADLINE,
/// tracefs).
pub fn privileged() -> MutexGuard<'static, ()> {
    // The machine first, then the probes: the SCHED_DEADLINE probe holds a small reservation
    // for a moment, which a test reading its `total_bw` baseline meanwhile would count (seen:
    // a baseline 53 above the fair servers' 104856, then "difference -53").
    let g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    require(Need::Root);
    require(Need::SchedDeadline);
    require(Need::Tracefs);
    g
}

/// `kill(pid, sig)`.
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) with a pid this test started (or its child) and a valid signal number.
    unsafe {
        libc::kill(pid as i32, sig);
    }
}

/// The JSON objects with a `type` that `child` prints on its stdout, one per line, read on a
/// thread (a controlled `pacer run` shares that stdout; its lines are not such objects).
pub fn json_lines(child: &mut Child) -> Receiver<Value> {
    let out = child.stdout.take().expect("stdout piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                if v.get("type").is_some() && tx.send(v).is_err() {
                    break;
                }
            }
        }
    });
    rx
}

/// Waits up to `timeout` for a `{"type":"notice"}` line containing `text`.
pub fn wait_notice(rx: &Receiver<Value>, text: &str, timeout: Duration) -> bool {
    let end = Instant::now() + timeout;
    while let Ok(v) = rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
        if v["type"] == "notice" && v["message"].as_str().unwrap_or("").contains(text) {
            return true;
        }
    }
    false
}

/// The busy loop's calibration (ns per loop), measured once per test binary by a 1-s `pacer run`,
/// for programs run under `pacer exec` as `pacer run --calibration C`: without it the program
/// calibrates itself at start under SCHED_FIFO and then returns to SCHED_OTHER, which pacer
/// rightly reports as a thread changing its own policy, and which test load can make overlap
/// pacer's first steps.
pub fn calibration() -> String {
    static CAL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CAL.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path().join("cal.json");
        std::fs::write(
            &w,
            r#"{"global":{"duration":1},"tasks":{"c":{"loop":1,"run":10}}}"#,
        )
        .unwrap();
        let out = pacer().args(["run", "--json"]).arg(&w).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["run"]["calibration_ns_per_loop"].as_f64().unwrap().to_string()
    })
    .clone()
}

/// `cmd.output()` with a deadline: a test whose program hangs (a thread the kernel never runs
/// again, a wait that never ends) fails with what the program printed so far instead of
/// stalling the suite. The command runs in its own process group; at the deadline the group gets
/// SIGTERM (pacer restores what it changed on it), then SIGKILL 5 s later.
pub fn output_within(cmd: &mut Command, limit: Duration) -> std::process::Output {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let mut child = cmd
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the command under test");
    // Read on threads and collected with a timeout: a process left behind that still holds the
    // pipe must not stall the test either.
    let pump = |mut r: Box<dyn Read + Send>| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            let _ = tx.send(buf);
        });
        rx
    };
    let out = pump(Box::new(child.stdout.take().expect("piped")));
    let err = pump(Box::new(child.stderr.take().expect("piped")));
    let pgid = child.id();
    let end = Instant::now() + limit;
    let mut timed_out = false;
    let mut hung = String::new();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for the command under test") {
            break s;
        }
        if Instant::now() >= end && !timed_out {
            timed_out = true;
            hung = stop_hung(&mut child, |sig| {
                // SAFETY: kill(2) on the process group this test created.
                unsafe { libc::kill(-(pgid as i32), sig) };
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let collect = |rx: Receiver<Vec<u8>>| rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
    let (stdout, stderr) = (collect(out), collect(err));
    assert!(
        !timed_out,
        "{cmd:?} did not finish within {limit:?}; its processes then:\n{hung}stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr)
    );
    std::process::Output {
        status,
        stdout,
        stderr,
    }
}

/// Waits for `child` up to `limit`; past it, fails the test naming what every process under it
/// was doing ([`describe_tree`]), after SIGTERM to `child` (pacer restores what it changed) and
/// SIGKILL to the whole tree 5 s later: a hang is a failure with its cause on record, not a
/// suite that stalls until CI's own limit.
pub fn wait_within(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let end = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().expect("wait for the command under test") {
            return s;
        }
        if Instant::now() >= end {
            let (pid, tree) = (child.id(), descendants(child.id()));
            let hung = stop_hung(child, |sig| match sig {
                libc::SIGTERM => signal(pid, sig),
                _ => tree.iter().for_each(|&p| signal(p, sig)),
            });
            let _ = child.wait();
            panic!(
                "pacer (PID {}) did not finish within {limit:?}; its processes then:\n{hung}",
                child.id()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What a hung `child` and the processes under it were doing ([`describe_tree`]); then
/// `kill(SIGTERM)` (pacer restores what it changed) and, if it has not exited within 5 s,
/// `kill(SIGKILL)`.
fn stop_hung(child: &mut Child, kill: impl Fn(i32)) -> String {
    let hung = describe_tree(child.id());
    kill(libc::SIGTERM);
    let grace = Instant::now() + Duration::from_secs(5);
    while child.try_wait().ok().flatten().is_none() && Instant::now() < grace {
        std::thread::sleep(Duration::from_millis(50));
    }
    kill(libc::SIGKILL);
    hung
}

/// `pid` and every process descended from it, parents first.
pub fn descendants(pid: u32) -> Vec<u32> {
    use pacer_linux::procfs;
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| Some((p, procfs::parent_of(p)?)))
        .collect();
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(parents.iter().filter(|(_, pp)| *pp == parent).map(|(p, _)| *p));
        i += 1;
    }
    tree
}

/// Every thread of every process under `pid`: name, state, wait channel, policy and, for
/// SCHED_DEADLINE, its runtime left and deadline (from `/proc/TID/sched`), and its kernel stack
/// (root): what a test that hangs prints, so that the hang can be explained from the CI log.
pub fn describe_tree(pid: u32) -> String {
    use pacer_linux::procfs;
    let read = |path: String| std::fs::read_to_string(path).unwrap_or_default();
    let mut out = String::new();
    for p in descendants(pid) {
        let cmdline = procfs::cmdline(p).unwrap_or_default().join(" ");
        out.push_str(&format!("PID {p}: {cmdline}\n"));
        for t in procfs::threads_of(p).unwrap_or_default() {
            let base = format!("/proc/{p}/task/{t}");
            let stat = read(format!("{base}/stat"));
            let state = stat
                .rfind(')')
                .and_then(|i| stat.get(i + 2..i + 3))
                .unwrap_or("?")
                .to_string();
            let sched: Vec<String> = read(format!("{base}/sched"))
                .lines()
                .filter(|l| {
                    let k = l.split(':').next().unwrap_or("").trim();
                    matches!(
                        k,
                        "policy" | "prio" | "dl.runtime" | "dl.deadline" | "se.sum_exec_runtime"
                    )
                })
                .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
                .collect();
            out.push_str(&format!(
                "  TID {t} {} state {state} wchan {} | {}\n",
                procfs::comm(p, t).unwrap_or_default(),
                read(format!("{base}/wchan")).trim(),
                sched.join("; ")
            ));
            for frame in read(format!("{base}/stack")).lines().take(12) {
                out.push_str(&format!("      {frame}\n"));
            }
        }
    }
    // dl.deadline is on the runqueue clock, in ns: CPU 0's, in ms, to compare it with.
    let clock = read("/sys/kernel/debug/sched/debug".into())
        .lines()
        .find(|l| l.trim_start().starts_with(".clock "))
        .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    out.push_str(&format!("(runqueue clock {clock} ms)\n"));
    out
}

/// The unprivileged user tests run clients as: `pacer-ci`, created if missing (CI is root on a
/// fresh machine), else `nobody`.
pub fn client_user() -> (u32, u32) {
    let lookup = |name: &str| -> Option<(u32, u32)> {
        let out = Command::new("id").args(["-u", name]).output().ok()?;
        let uid = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
        let out = Command::new("id").args(["-g", name]).output().ok()?;
        let gid = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
        Some((uid, gid))
    };
    if lookup("pacer-ci").is_none() {
        let _ = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                "pacer-ci",
            ])
            .status();
    }
    lookup("pacer-ci")
        .or_else(|| lookup("nobody"))
        .expect("an unprivileged user")
}

/// The kernel's admitted SCHED_DEADLINE bandwidth of CPU 0's root domain.
pub fn total_bw() -> i64 {
    total_bw_of(&read_dl_bandwidth().expect("read dl_bw from debugfs"), 0).expect("CPU 0 in sched debug")
}

/// `total_bw` once the accounting has settled: a reservation of the previous test that ended
/// moments ago is still counted until its 0-lag time.
///
/// Also waits (up to 10 s) for reservations left by earlier tests' programs to end, and names
/// them: one that ends during this test would move `total_bw` by its bandwidth (seen in CI: a
/// baseline 53 too high, a 1024 ns / 20 ms reservation, then "difference -53").
pub fn baseline() -> i64 {
    let cpus: Vec<usize> = (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
    let start = Instant::now();
    let mut others = pacer_linux::audit::dl_threads();
    while !others.is_empty() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
        others = pacer_linux::audit::dl_threads();
    }
    if !others.is_empty() || start.elapsed() > Duration::from_millis(100) {
        eprintln!(
            "baseline: waited {:?} for reservations of earlier programs; still reserved: {:?}",
            start.elapsed(),
            others
                .iter()
                .map(|t| format!("{} ({}) {}/{} ns", t.tid, t.name, t.runtime_ns, t.period_ns))
                .collect::<Vec<_>>()
        );
    }
    // A reservation that overran a small budget before its thread ended keeps its bandwidth
    // counted for overrun/budget periods (the kernel postpones its deadline that far): seen in
    // CI, a 1024 ns / 20 ms reservation held 53 for more than 5 s after its thread was gone.
    // Below the truth nothing will heal (a double subtraction of an earlier program, seen in CI
    // as −53): the accounting is rebuilt at once, as `pacer doctor --repair` does, so the test
    // starts from the kernel's own count. Above it, a grace period may still end: wait first.
    let settling = Instant::now();
    let error = || accounting_error(&cpus);
    if error() > 0 {
        pacer_linux::audit::wait_consistent(&cpus, 120_000_000_000);
    }
    if error() != 0 {
        eprintln!(
            "baseline: total_bw differs from its threads by {} after {:?}; rebuilding the root domains",
            error(),
            settling.elapsed()
        );
        pacer_linux::audit::rebuild().expect("rebuild the root domains");
        pacer_linux::audit::wait_consistent(&cpus, 5_000_000_000);
    } else if settling.elapsed() > Duration::from_millis(100) {
        eprintln!(
            "baseline: waited {:?} for ended reservations' 0-lag times",
            settling.elapsed()
        );
    }
    total_bw()
}

/// `total_bw` minus what the fair servers and SCHED_DEADLINE threads hold, summed over the root
/// domains of `cpus`.
pub fn accounting_error(cpus: &[usize]) -> i64 {
    pacer_linux::audit::snapshot()
        .expect("read the scheduler's accounting")
        .domains
        .iter()
        .filter(|d| d.cpus.iter().any(|c| cpus.contains(c)))
        .map(|d| d.error())
        .sum()
}

/// Waits for `total_bw` to come back to `baseline` (up to 5 s: a torn-down reservation is
/// released at its 0-lag time), and fails with both figures if it does not.
///
/// A different figure is accepted when it is the kernel's own count and no SCHED_DEADLINE thread
/// is left (so it is the fair servers' bandwidth alone): then the difference is a reservation of an earlier program
/// whose grace period ended during the test, not something this test left. A figure that
/// differs from both is what pacer must never leave: a leak, or a bandwidth subtracted twice.
pub fn assert_total_bw_back(baseline: i64, what: &str) {
    let cpus: Vec<usize> = (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
    let start = Instant::now();
    loop {
        let now = total_bw();
        if now == baseline {
            return;
        }
        let error = accounting_error(&cpus);
        if error == 0 && pacer_linux::audit::dl_threads().is_empty() {
            eprintln!(
                "{what}: total_bw {now}, baseline {baseline}: the kernel's own count (an earlier \
                 program's reservation ended during the test)"
            );
            return;
        }
        // Above the count, a grace period of this test's threads may last overrun/budget periods.
        let limit = if error > 0 { 120 } else { 5 };
        if start.elapsed() > Duration::from_secs(limit) {
            panic!(
                "{what}: dl_bw->total_bw is {now}, baseline {baseline} (difference {}); the \
                 threads and fair servers hold {} less than total_bw",
                now - baseline,
                error
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
