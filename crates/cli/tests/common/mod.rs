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

/// Checks what `pacer exec` needs (root, SCHED_DEADLINE, tracefs), then takes the machine for
/// this test.
pub fn privileged() -> MutexGuard<'static, ()> {
    require(Need::Root);
    require(Need::SchedDeadline);
    require(Need::Tracefs);
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
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
