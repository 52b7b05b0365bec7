//! `pacer daemon` and libpacer on the real kernel: a C program compiled only against `pacer.h`
//! and `libpacer.so`, run as an unprivileged user, gets a SCHED_DEADLINE reservation for its own
//! thread, sees its budget rise after a heavier workUnits hint, is refused over its quota, and
//! gives its bandwidth back to the kernel's `total_bw` within 100 ms of `kill -9`; the same
//! program works in-process as root; a killed daemon's guardian restores its clients' threads.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{client_user, pacer, signal};
use pacer_linux::cpuset::{read_dl_bandwidth, total_bw_of};
use pacer_testkit::{require, Need};

fn total_bw() -> i64 {
    total_bw_of(&read_dl_bandwidth().expect("read dl_bw from debugfs"), 0).expect("CPU 0 in sched debug")
}

/// `total_bw` once the accounting has settled.
fn baseline() -> i64 {
    std::thread::sleep(Duration::from_millis(200));
    total_bw()
}

fn wait_total_bw(baseline: i64, within: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() <= within {
        if total_bw() == baseline {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    None
}

/// `libpacer.so` of this build: `cargo test` leaves it in `deps/` beside the binary under test
/// (only `cargo build` copies it up next to the binary, where an older one may remain).
fn lib_path() -> PathBuf {
    let dir = Path::new(env!("CARGO_BIN_EXE_pacer")).parent().unwrap();
    [dir.join("deps/libpacer.so"), dir.join("libpacer.so")]
        .into_iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("libpacer.so is not in {} or its deps/", dir.display()))
}

struct World {
    dir: tempfile::TempDir,
    program: PathBuf,
    socket: PathBuf,
}

/// Compiles `periodic.c` against the header and the shared library only, in a directory the
/// unprivileged user can read.
fn world() -> World {
    require(Need::Program("cc"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // Installed as a distribution would: the file under its soname, the link name beside it.
    let lib = dir.path().join("libpacer.so.0");
    std::fs::copy(lib_path(), &lib).expect("copying libpacer.so");
    std::os::unix::fs::symlink("libpacer.so.0", dir.path().join("libpacer.so")).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../client");
    let program = dir.path().join("periodic");
    let out = Command::new("cc")
        .arg("-O2")
        .arg("-Wall")
        .arg("-I")
        .arg(root.join("include"))
        .arg("-o")
        .arg(&program)
        .arg(root.join("tests/c/periodic.c"))
        .arg("-L")
        .arg(dir.path())
        .arg("-lpacer")
        .arg(format!("-Wl,-rpath,{}", dir.path().display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [&lib, &program] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let socket = dir.path().join("pacer.sock");
    World { dir, program, socket }
}

struct Daemon {
    child: Child,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        signal(self.child.id(), libc::SIGTERM);
        let _ = self.child.wait();
    }
}

fn daemon(w: &World, config: &str) -> Daemon {
    let cfg = w.dir.path().join("pacerd.toml");
    std::fs::write(&cfg, config).unwrap();
    let child = pacer()
        .arg("daemon")
        .arg("--socket")
        .arg(&w.socket)
        .arg("--config")
        .arg(&cfg)
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while std::os::unix::net::UnixStream::connect(&w.socket).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the daemon did not start listening"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Daemon { child }
}

fn as_user(w: &World, args: &[&str]) -> Command {
    let (uid, gid) = client_user();
    let mut c = Command::new(&w.program);
    c.args(args).env("PACER_SOCKET", &w.socket).uid(uid).gid(gid);
    c
}

/// Starts the C program in `hold` mode as the unprivileged user and waits until it says it is
/// reserved.
fn hold(w: &World) -> Child {
    let mut child = as_user(w, &["hold", "10"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("reserved=") {
        line.clear();
        let n = std::io::BufRead::read_line(&mut reader, &mut line).unwrap();
        assert!(n > 0, "the client ended before it was reserved");
    }
    child
}

/// `pacer status --json` of the test's daemon.
fn status(w: &World) -> serde_json::Value {
    let out = pacer()
        .args(["status", "--json", "--socket"])
        .arg(&w.socket)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

fn fields(out: &str) -> std::collections::BTreeMap<String, String> {
    out.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const CONFIG: &str = "[default]\nbandwidth = 0.5\nthread_bandwidth = 0.45\nsessions = 2\n";

fn privileged() -> std::sync::MutexGuard<'static, ()> {
    let g = common::privileged();
    require(Need::SchedDebug);
    g
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn an_unprivileged_c_program_gets_a_reservation_and_hint_driven_budgets_through_the_daemon() {
    let _g = privileged();
    let w = world();
    let base = baseline();
    let d = daemon(&w, CONFIG);
    let out = as_user(&w, &["run", "10", "40"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let f = fields(&text);
    assert_eq!(f["in_process"], "0", "went through the daemon");
    assert_eq!(f["policy"], "6", "SCHED_DEADLINE");
    let light: u64 = f["light_runtime_ns"].parse().unwrap();
    let heavy: u64 = f["heavy_runtime_ns"].parse().unwrap();
    // 1 unit = 0.4 ms of CPU (plus the marks' own cost in this debug build), learned over 40
    // jobs; 4 units are announced: Q ≈ 4 × 1.1 × C_e(1), below the 4.5 ms ceiling.
    assert!(
        heavy * 2 > 5 * light,
        "budget {light} ns -> {heavy} ns after the 4-unit hint"
    );
    // Over the quota (0.5 CPU for this user): a clear refusal.
    let out = as_user(&w, &["quota", "10", "0.6"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("exceeds the quota of 0.500 CPU by 0.100 CPU"),
        "{text}"
    );
    let v = status(&w);
    assert!(
        v["refusals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["code"] == "Quota"),
        "{v}"
    );
    drop(d);
    assert!(
        wait_total_bw(base, Duration::from_secs(5)).is_some(),
        "total_bw {} != baseline {base}",
        total_bw()
    );
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn a_killed_client_gives_its_bandwidth_back_within_100ms_and_the_next_client_is_served() {
    let _g = privileged();
    let w = world();
    let base = baseline();
    let _d = daemon(&w, CONFIG);
    let mut hold = hold(&w);
    assert!(total_bw() > base, "the reservation is not in total_bw");
    hold.kill().unwrap();
    let killed = Instant::now();
    hold.wait().unwrap();
    let back = wait_total_bw(base, Duration::from_secs(2));
    eprintln!(
        "total_bw back at baseline {back:?} after kill -9 (waited for the exit {:?})",
        killed.elapsed()
    );
    let back = back.unwrap_or_else(|| panic!("total_bw {} != baseline {base}", total_bw()));
    assert!(back <= Duration::from_millis(100), "total_bw back after {back:?}");
    // The daemon noticed and serves the next client.
    let out = as_user(&w, &["run", "10", "35"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let v = status(&w);
    assert_eq!(v["sessions"].as_array().unwrap().len(), 0, "{v}");
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn the_same_c_program_works_in_process_as_root_without_a_daemon() {
    let _g = privileged();
    let w = world();
    let base = baseline();
    // No daemon listens at the socket: root falls back to the in-process service.
    let out = Command::new(&w.program)
        .args(["run", "10", "40"])
        .env("PACER_SOCKET", &w.socket)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fields(&text)["in_process"], "1");
    // And an unprivileged user without a daemon gets a clear error, not a crash.
    let out = as_user(&w, &["run", "10", "5"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success());
    assert!(
        text.contains("error=connect code=-20") && text.contains("is `pacer daemon` running"),
        "{text}"
    );
    assert!(wait_total_bw(base, Duration::from_secs(5)).is_some());
}

fn policy_of(tid: u32) -> u32 {
    pacer_linux::sched::get_attr(tid).unwrap().sched_policy
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn a_killed_daemon_s_guardian_and_a_stopped_daemon_give_every_thread_back() {
    let _g = privileged();
    let w = world();
    let base = baseline();
    for how in ["SIGKILL", "SIGTERM"] {
        let mut d = daemon(&w, CONFIG);
        let mut hold = hold(&w);
        let tid = hold.id();
        assert_eq!(policy_of(tid), 6, "{how}: reserved");
        signal(
            d.child.id(),
            if how == "SIGKILL" {
                libc::SIGKILL
            } else {
                libc::SIGTERM
            },
        );
        d.child.wait().unwrap();
        let start = Instant::now();
        while policy_of(tid) == 6 {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "{how}: thread still SCHED_DEADLINE"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let attr = pacer_linux::sched::get_attr(tid).unwrap();
        assert_eq!(
            (attr.sched_policy, attr.sched_flags & 1),
            (0, 0),
            "{how}: exact original back"
        );
        assert!(
            wait_total_bw(base, Duration::from_secs(5)).is_some(),
            "{how}: total_bw"
        );
        hold.kill().unwrap();
        hold.wait().unwrap();
        std::mem::forget(d);
    }
}

/// A thread of this test process that only sleeps until told to stop.
fn sleeper() -> (u32, std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        tid_tx.send(pacer::gettid()).unwrap();
        let _ = stop_rx.recv();
    });
    (tid_rx.recv().unwrap(), stop_tx, h)
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn one_supervisor_compresses_every_clients_sessions_into_the_bound() {
    let _g = privileged();
    let w = world();
    let base = baseline();
    let _d = daemon(&w, "bound = 0.3\n");
    let (a, stop_a, ha) = sleeper();
    let (b, stop_b, hb) = sleeper();
    // Two clients (two connections), each a session whose proactive controller starts at its
    // ceiling: 0.25 + 0.25 CPU requested, 0.3 granted in all, proportionally.
    let c1 = pacer::Client::connect_to(&w.socket).unwrap();
    let c2 = pacer::Client::connect_to(&w.socket).unwrap();
    let opts = |t| pacer::SessionOptions::new(&[t], 10_000_000).max_bandwidth(0.25);
    let s1 = c1.session_with(&opts(a)).unwrap();
    let s2 = c2.session_with(&opts(b)).unwrap();
    let runtime = |t: u32| pacer_linux::sched::get_attr(t).unwrap().sched_runtime;
    let (ra, rb) = (runtime(a), runtime(b));
    eprintln!("two sessions of 0.25 CPU under a bound of 0.3: {ra} ns and {rb} ns per 10 ms");
    assert!(
        (ra + rb) as f64 <= 0.3 * 10e6 + 2.0,
        "Σ {} ns exceeds the bound",
        ra + rb
    );
    assert!(ra.abs_diff(rb) <= 1, "compressed alike: {ra} vs {rb}");
    assert!(ra >= 1_400_000, "{ra}");
    let v: serde_json::Value = serde_json::from_str(&c1.status_json().unwrap()).unwrap();
    assert_eq!(v["allocation"]["status"], "compressed", "{v}");
    // One client leaves: the other gets its whole request.
    s2.close().unwrap();
    assert_eq!(runtime(a), 2_500_000, "the freed share goes to the session left");
    drop(s1);
    for (s, h) in [(stop_a, ha), (stop_b, hb)] {
        s.send(()).unwrap();
        h.join().unwrap();
    }
    assert!(wait_total_bw(base, Duration::from_secs(5)).is_some());
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn an_unprivileged_client_boosts_its_own_thread_and_the_boost_ends_when_it_blocks() {
    let _g = privileged();
    let w = world();
    let _d = daemon(&w, CONFIG);
    // 200 ms asked; the worker runs 2 ms and blocks, which ends the boost early.
    let out = as_user(&w, &["boost", "200"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let f = fields(&text);
    assert!(f["nice_during"].parse::<i32>().unwrap() < 0, "{text}");
    assert_eq!(f["nice_after"], f["nice_before"], "{text}");
    // The Rust API: a thread of the calling process (root here) that sleeps throughout.
    let (tid, stop, h) = sleeper();
    let c = pacer::Client::connect_to(&w.socket).unwrap();
    let g = c.boost(tid, 30_000_000).unwrap();
    eprintln!("boost of a sleeping thread: {g:?}");
    assert!(!g.actuators.is_empty());
    let attr = pacer_linux::sched::get_attr(tid).unwrap();
    assert!(attr.sched_nice < 0, "boosted: {attr:?}");
    // It sleeps throughout: the boost ends when its 30 ms are up.
    std::thread::sleep(Duration::from_millis(80));
    let attr = pacer_linux::sched::get_attr(tid).unwrap();
    assert_eq!(attr.sched_nice, 0, "undone after its duration: {attr:?}");
    stop.send(()).unwrap();
    h.join().unwrap();
}

/// The lines of a `pacer exec --json` run (its JSON, and the program's own output as strings),
/// read on a thread.
fn exec_lines(child: &mut Child) -> std::sync::mpsc::Receiver<serde_json::Value> {
    let out = child.stdout.take().expect("stdout piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(out)).map_while(Result::ok) {
            let v =
                serde_json::from_str::<serde_json::Value>(&line).unwrap_or(serde_json::Value::String(line));
            if tx.send(v).is_err() {
                break;
            }
        }
    });
    rx
}

/// The `control` object of the thread named `name` in a `pacer exec` status.
fn control_of<'a>(status: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    status["threads"]
        .as_array()?
        .iter()
        .find(|t| t["name"] == name)
        .map(|t| &t["control"])
}

/// `pacer exec --daemon`: an unmodified periodic program, started by an unprivileged user, is
/// traced, detected and reserved by the daemon, under the daemon's one supervisor together with a
/// client's session (Σ within the bound); the program's thread gets SCHED_OTHER back and
/// `total_bw` its baseline when the session ends, also when the `pacer exec` that asked for it
/// is killed with SIGKILL.
#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn exec_sessions_run_in_the_daemon_under_its_one_supervisor() {
    let _g = privileged();
    require(Need::Tracefs);
    let w = world();
    let base = baseline();
    let _d = daemon(
        &w,
        "bound = 0.5\n[default]\nbandwidth = 0.5\nthread_bandwidth = 0.45\nsessions = 2\n",
    );
    // A client session beside it, at its 0.3 ceiling.
    let (a, stop_a, ha) = sleeper();
    let client = pacer::Client::connect_to(&w.socket).unwrap();
    let s1 = client
        .session_with(&pacer::SessionOptions::new(&[a], 10_000_000).max_bandwidth(0.3))
        .unwrap();
    // The unprivileged user's program under `pacer exec --daemon`.
    let (uid, gid) = client_user();
    let mut exec = pacer()
        .args([
            "exec",
            "--daemon",
            "--json",
            "--status-every",
            "250ms",
            "--socket",
        ])
        .arg(&w.socket)
        .args(["--", w.program.to_str().unwrap(), "legacy", "10", "6"])
        .uid(uid)
        .gid(gid)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = exec_lines(&mut exec);
    // Reserved at its period within 5 s, while the client's session holds its share.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut reserved = None;
    while reserved.is_none() && Instant::now() < deadline {
        let Ok(v) = lines.recv_timeout(Duration::from_secs(1)) else {
            continue;
        };
        if let Some(c) = control_of(&v["status"], "periodic") {
            if c["phase"] == "controlled" && c["budget_ns"].as_u64().is_some() {
                reserved = Some(c.clone());
            }
        }
    }
    let c = reserved.unwrap_or_else(|| {
        panic!(
            "not reserved through the daemon within 5 s; daemon: {}",
            status(&w)
        )
    });
    let p = c["period_ns"].as_u64().unwrap();
    eprintln!("pacer exec --daemon: {c}");
    assert!((p as f64 - 10e6).abs() <= 0.01 * 10e6, "period {p} ns");
    let st = status(&w);
    let sessions = st["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 2, "{st}");
    let legacy = sessions
        .iter()
        .find(|s| s["controller"] == "Legacy")
        .expect("the exec session");
    assert_eq!(legacy["uid"], uid, "{st}");
    assert!(
        legacy["exec"]["threads"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{st}"
    );
    let reserved_bw = st["reserved_bandwidth"].as_f64().unwrap();
    assert!(reserved_bw <= 0.5 + 1e-6, "Σ {reserved_bw} over the bound: {st}");
    let code = common::wait_within(&mut exec, Duration::from_secs(120));
    assert!(code.success(), "pacer exec --daemon: {code}");
    let rest: Vec<serde_json::Value> = lines.iter().collect();
    assert!(
        rest.iter().any(|v| v.as_str() == Some("policy=6")),
        "the program did not end reserved: {rest:?}"
    );
    let exit = rest.iter().find(|v| v["type"] == "exit").expect("an exit line");
    assert_eq!(exit["release"]["failed"], serde_json::json!([]), "{exit}");
    // The daemon closed the session when the program exited; the client's is untouched.
    let st = status(&w);
    assert_eq!(st["sessions"].as_array().unwrap().len(), 1, "{st}");
    drop(s1);
    stop_a.send(()).unwrap();
    ha.join().unwrap();
    assert!(
        wait_total_bw(base, Duration::from_secs(2)).is_some(),
        "total_bw {} after the sessions, baseline {base}",
        total_bw()
    );
    // SIGKILL of the `pacer exec` that asked: the daemon sees its connection close and gives
    // the program's thread back at once; the program keeps running.
    let mut exec = pacer()
        .args(["exec", "--daemon", "--period", "10ms", "--json", "--socket"])
        .arg(&w.socket)
        .args(["--", w.program.to_str().unwrap(), "legacy", "10", "30"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let program_pid = || {
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", exec.id()))
            .ok()
            .and_then(|c| c.split_whitespace().next().and_then(|p| p.parse::<u32>().ok()))
    };
    let start = Instant::now();
    let pid = loop {
        if let Some(p) = program_pid().filter(|&p| policy_of(p) == 6) {
            break p;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "not reserved within 5 s: {}",
            status(&w)
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    signal(exec.id(), libc::SIGKILL);
    let _ = exec.wait();
    let start = Instant::now();
    while policy_of(pid) != 0 {
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "the program's thread is still under policy {} after pacer exec was killed",
            policy_of(pid)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    eprintln!(
        "pacer exec killed: thread back to SCHED_OTHER after {:?}",
        start.elapsed()
    );
    signal(pid, libc::SIGKILL);
    assert!(
        wait_total_bw(base, Duration::from_secs(2)).is_some(),
        "total_bw {} after the killed session, baseline {base}",
        total_bw()
    );
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn an_exec_session_in_the_daemon_gives_back_a_thread_in_budget_debt() {
    let _g = privileged();
    require(Need::Tracefs);
    let w = world();
    let base = baseline();
    let _d = daemon(&w, "");
    // As in exec.rs: `late` idles down to the minimum budget under the session, then computes;
    // one tick of work puts it tens of seconds in debt unless the daemon gives it back.
    let late = w.dir.path().join("late");
    std::os::unix::fs::symlink("/bin/sh", &late).unwrap();
    let script = format!(
        "sleep 0.3; exec {} -c 'sleep 1.5; i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done'",
        late.display()
    );
    let mut exec = pacer()
        .args([
            "exec", "--daemon", "--period", "20ms", "--thread", "late", "--socket",
        ])
        .arg(&w.socket)
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = exec.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(15) {
            signal(exec.id(), libc::SIGTERM);
            let _ = exec.wait();
            panic!("the program did not finish within 15 s under the daemon's session");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    assert!(
        wait_total_bw(base, Duration::from_secs(2)).is_some(),
        "total_bw {} after the session, baseline {base}",
        total_bw()
    );
}
