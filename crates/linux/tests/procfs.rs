//! Tests of `pacer_linux::procfs`: against the real /proc for this process and a child, and
//! against fake /proc trees for the parsing and error paths.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::sync::mpsc::channel;
use std::time::Instant;

use pacer_adapt::KernelError;
use pacer_linux::procfs::{self, Pidfd, ProcFs};
use pacer_linux::sched::{gettid, LinuxError, Tid};
use pacer_testkit::{require, Need};

fn my_pid() -> Tid {
    std::process::id()
}

#[test]
fn real_threads_comm_and_cpu_time() {
    let pid = my_pid();
    let me = gettid();
    let (tid_tx, tid_rx) = channel();
    let (release, wait) = channel::<()>();
    let helper = std::thread::Builder::new()
        .name("pacer-probe".into())
        .spawn(move || {
            tid_tx.send(gettid()).unwrap();
            let _ = wait.recv();
        })
        .unwrap();
    let helper_tid = tid_rx.recv().unwrap();

    let threads = procfs::threads_of(pid).unwrap();
    assert!(threads.contains(&pid) && threads.contains(&me) && threads.contains(&helper_tid));
    assert_eq!(procfs::comm(pid, helper_tid).unwrap(), "pacer-probe");

    let before = procfs::cpu_time(pid, me).unwrap();
    let start = Instant::now();
    let mut x = 0u64;
    while start.elapsed().as_millis() < 50 {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    let after = procfs::cpu_time(pid, me).unwrap();
    let wall = start.elapsed().as_nanos() as u64;
    eprintln!(
        "real_threads_comm_and_cpu_time: pid {pid}: {} threads, tid {me} CPU time {before} -> {after} ns \
         (+{} ns in {wall} ns of busy wall time)",
        threads.len(),
        after - before
    );
    assert!(after > before, "CPU time did not increase: {before} -> {after}");
    // One thread cannot run longer than the wall-clock time it had (schedstat lags by at most a tick).
    assert!(
        after - before <= wall + 5_000_000,
        "{} ns CPU in {wall} ns",
        after - before
    );

    drop(release);
    helper.join().unwrap();
}

#[test]
fn pidfd_tracks_one_process() {
    // Needs no privilege: every machine that builds pacer has `sleep`, so this is not ignored.
    require(Need::Program("sleep"));
    let mut child = Command::new("sleep").arg("30").spawn().expect("spawn `sleep`");
    let pid = child.id();
    let fd = Pidfd::open(pid).unwrap();
    assert_eq!(fd.pid(), pid);
    assert!(fd.is_alive().unwrap());
    fd.send_signal(0).unwrap();
    assert_eq!(fd.threads().unwrap(), vec![pid]);
    // The child reports the parent's name until its exec of `sleep` completes: wait for it
    // (bounded), rather than racing the exec.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut comm = fd.comm(pid).unwrap();
    while comm != "sleep" && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
        comm = fd.comm(pid).unwrap();
    }
    assert_eq!(comm, "sleep");
    let cpu = fd.cpu_time(pid).unwrap();

    fd.send_signal(libc::SIGKILL).unwrap();
    child.wait().unwrap();
    assert!(!fd.is_alive().unwrap());
    // After exit (and reaping) the PID may be reused: every read through the pidfd must refuse.
    let e = fd.threads().unwrap_err();
    assert!(
        matches!(e, LinuxError::NoSuchThread { tid, .. } if tid == pid),
        "{e}"
    );
    assert!(matches!(fd.cpu_time(pid), Err(LinuxError::NoSuchThread { .. })));
    let e = fd.send_signal(0).unwrap_err();
    assert_eq!(e.errno(), Some(libc::ESRCH));
    eprintln!(
        "pidfd_tracks_one_process: child {pid} alive (cpu {cpu} ns) -> killed: pidfd reads refused: {e}"
    );

    let e = Pidfd::open(0x7fff_fff0).unwrap_err();
    assert_eq!(KernelError::from(e), KernelError::NoSuchThread(0x7fff_fff0));
    assert!(Pidfd::open(my_pid()).unwrap().is_alive().unwrap());
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

#[test]
fn fake_proc_tree() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(&root.join("123/task/123/schedstat"), "5000 10 2\n");
    write(&root.join("123/task/123/comm"), "main\n");
    write(&root.join("123/task/130/schedstat"), "777777 0 9\n");
    write(&root.join("123/task/130/comm"), "worker\n");
    write(&root.join("123/task/131/schedstat"), "lots of time\n");
    write(&root.join("123/task/132/schedstat"), "");
    fs::create_dir_all(root.join("123/task/not-a-tid")).unwrap();

    let p = ProcFs::new(root);
    assert_eq!(p.threads_of(123).unwrap(), vec![123, 130, 131, 132]);
    assert_eq!(p.cpu_time(123, 123).unwrap(), 5000);
    assert_eq!(p.cpu_time(123, 130).unwrap(), 777_777);
    assert_eq!(p.comm(123, 130).unwrap(), "worker");

    for tid in [131, 132] {
        let e = p.cpu_time(123, tid).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, LinuxError::Parse { .. }), "{msg}");
        assert!(msg.contains(&format!("123/task/{tid}/schedstat")), "{msg}");
    }
    let e = p.cpu_time(123, 999).unwrap_err();
    assert!(matches!(e, LinuxError::NoSuchThread { tid: 999, .. }), "{e}");
    assert!(e.to_string().contains("123/task/999/schedstat"), "{e}");
    assert_eq!(KernelError::from(e), KernelError::NoSuchThread(999));
    let e = p.threads_of(456).unwrap_err();
    assert!(matches!(e, LinuxError::NoSuchThread { tid: 456, .. }), "{e}");
    assert!(matches!(p.comm(123, 999), Err(LinuxError::NoSuchThread { .. })));
}
