//! Helpers shared by the test binaries that run `pacer exec` on the real kernel (`exec.rs`,
//! `integrity.rs`): the binary, the privilege check that also serialises the tests (they change
//! global scheduler state), signals, and `--json` lines read on a thread.
#![allow(dead_code)] // each test binary uses a different subset

use std::io::{BufRead, BufReader};
use std::process::{Child, Command};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

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
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for the command under test") {
            break s;
        }
        if Instant::now() >= end && !timed_out {
            timed_out = true;
            // SAFETY: kill(2) on the process group this test created.
            unsafe { libc::kill(-(pgid as i32), libc::SIGTERM) };
            let grace = Instant::now() + Duration::from_secs(5);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < grace {
                std::thread::sleep(Duration::from_millis(50));
            }
            // SAFETY: as above.
            unsafe { libc::kill(-(pgid as i32), libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let collect = |rx: Receiver<Vec<u8>>| rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
    let (stdout, stderr) = (collect(out), collect(err));
    assert!(
        !timed_out,
        "{cmd:?} did not finish within {limit:?}; stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr)
    );
    std::process::Output {
        status,
        stdout,
        stderr,
    }
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
