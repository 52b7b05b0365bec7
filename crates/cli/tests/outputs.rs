//! Output files (issue 13, docs/output-files.md): what a careless command line used to destroy —
//! devices, links, owners, inputs, old results — is refused or left alone, and what a killed run
//! wrote is found in its temporary file.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn pacer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pacer"))
        .args(args)
        .output()
        .expect("run pacer")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Refused: exit 1, no panic, the flag and the path named, nothing on standard output.
fn assert_refused(out: &Output, needles: &[&str]) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks `{n}`: {err}");
    }
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
}

/// Files of `dir` whose name contains `pacer-tmp` (temporary outputs).
fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("pacer-tmp"))
        .collect()
}

fn gen_to(path: &str) -> Output {
    pacer(&["gen", "-n", "3", "-u", "0.5", "--seed", "1", "-o", path])
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// An rt-app workload pacer can run without privileges: one SCHED_OTHER thread, 1 ms of work
/// every 10 ms.
const SCHED_OTHER_WORKLOAD: &str = r#"{"tasks": {"t": {"policy": "SCHED_OTHER", "run": 1000,
    "timer": {"ref": "a", "period": 10000}}}, "global": {"default_policy": "SCHED_OTHER"}}"#;

#[test]
fn gen_refuses_devices_and_fifos_and_leaves_them_alone() {
    let dir = tempfile::tempdir().unwrap();
    // A FIFO first: the old code replaced it by a file, so this fails before /dev/full is tried.
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(s(&fifo)).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    assert_refused(
        &gen_to(&s(&fifo)),
        &["-o", "fifo", "a named pipe (FIFO), not a regular file"],
    );
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    // As root, a copy of /dev/full in the temporary directory, before the real one.
    let full = dir.path().join("full");
    let c = std::ffi::CString::new(s(&full)).unwrap();
    // SAFETY: a valid NUL-terminated path; makedev(1, 7) is /dev/full's number.
    if unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o644, libc::makedev(1, 7)) } == 0 {
        assert_refused(&gen_to(&s(&full)), &["a character device, not a regular file"]);
        assert!(std::fs::symlink_metadata(&full)
            .unwrap()
            .file_type()
            .is_char_device());
    }
    let out = gen_to("/dev/full");
    assert_refused(
        &out,
        &[
            "-o /dev/full",
            "a character device, not a regular file",
            "/dev/fd/3",
        ],
    );
    assert!(std::fs::symlink_metadata("/dev/full")
        .unwrap()
        .file_type()
        .is_char_device());
    assert!(temporaries(Path::new("/dev")).is_empty());
    // A directory where a file is expected.
    let out = pacer(&[
        "sim",
        &s(&examples().join("textbook.json")),
        "--jobs",
        &s(dir.path()),
    ]);
    assert_refused(&out, &["--jobs", "a directory; expected a file name"]);
}

#[test]
fn gen_through_a_symlink_replaces_the_target_and_keeps_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.json");
    let link = dir.path().join("link.json");
    std::fs::write(&real, "old").unwrap();
    std::os::unix::fs::symlink("real.json", &link).unwrap();
    let out = gen_to(&s(&link));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("is a symbolic link: replaced its target"));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("real.json"));
    let set = pacer_model::read_taskset(&real).unwrap();
    assert_eq!(set.len(), 3);
    assert!(temporaries(dir.path()).is_empty());
}

#[test]
fn gen_over_an_existing_file_keeps_its_mode_and_owner() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("set.json");
    std::fs::write(&f, "old").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    // Root can hand the file to someone else; the replacement must go to them too.
    let owner = if is_root() {
        std::os::unix::fs::chown(&f, Some(65534), Some(65534)).unwrap();
        (65534, 65534)
    } else {
        let m = std::fs::metadata(&f).unwrap();
        (m.uid(), m.gid())
    };
    let out = gen_to(&s(&f));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let m = std::fs::metadata(&f).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o600);
    assert_eq!((m.uid(), m.gid()), owner);
    assert_eq!(pacer_model::read_taskset(&f).unwrap().len(), 3);
    // `-o -` is standard output.
    let out = gen_to("-");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("\"tasks\""));
}

#[test]
fn sim_refuses_to_write_its_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.json");
    std::fs::copy(examples().join("textbook.json"), &input).unwrap();
    let before = std::fs::read(&input).unwrap();
    let hard = dir.path().join("hard.json");
    std::fs::hard_link(&input, &hard).unwrap();
    let dotted = format!("{}/./in.json", dir.path().display());
    for jobs in [s(&input), dotted, s(&hard)] {
        let out = pacer(&["sim", &s(&input), "-d", "100ms", "--jobs", &jobs]);
        assert_refused(&out, &[&format!("--jobs {jobs}"), "the same file as the input"]);
        let out = pacer(&["sim", &s(&input), "-d", "100ms", "--trace", &jobs]);
        assert_refused(&out, &["--trace", "the same file as the input"]);
    }
    assert_eq!(std::fs::read(&input).unwrap(), before);
    assert!(temporaries(dir.path()).is_empty());
    // Standard output carries the summary.
    let out = pacer(&["sim", &s(&input), "-d", "100ms", "--jobs", "-"]);
    assert_refused(&out, &["--jobs -", "standard output"]);
}

#[test]
fn sim_refuses_one_file_for_jobs_and_trace() {
    let dir = tempfile::tempdir().unwrap();
    let o = s(&dir.path().join("o"));
    let f = s(&examples().join("textbook.json"));
    let out = pacer(&["sim", &f, "-d", "100ms", "--jobs", &o, "--trace", &o]);
    assert_refused(
        &out,
        &[&format!("--trace {o}"), &format!("the same file as --jobs {o}")],
    );
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "nothing written"
    );
}

#[test]
fn run_refuses_to_write_its_input() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.json");
    std::fs::write(&w, SCHED_OTHER_WORKLOAD).unwrap();
    let out = pacer(&[
        "run",
        &s(&w),
        "-d",
        "100ms",
        "--calibration",
        "25",
        "--jobs",
        &s(&w),
    ]);
    assert_refused(&out, &["--jobs", "the same file as the input"]);
    assert_eq!(std::fs::read_to_string(&w).unwrap(), SCHED_OTHER_WORKLOAD);
    assert!(temporaries(dir.path()).is_empty());
}

#[test]
fn a_failing_run_leaves_the_old_outputs_alone() {
    let dir = tempfile::tempdir().unwrap();
    // A CPU this machine does not have: the run fails after its outputs are open.
    let w = dir.path().join("w.json");
    std::fs::write(
        &w,
        r#"{"tasks": {"t": {"policy": "SCHED_OTHER", "cpus": [4000], "run": 1000,
            "timer": {"ref": "a", "period": 10000}}}}"#,
    )
    .unwrap();
    let jobs = dir.path().join("old.csv");
    std::fs::write(&jobs, "task,job\nt,0\n").unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    std::fs::write(logs.join("t-0.log"), "old log\n").unwrap();
    let out = pacer(&[
        "run",
        &s(&w),
        "-d",
        "100ms",
        "--calibration",
        "25",
        "--jobs",
        &s(&jobs),
        "--log-dir",
        &s(&logs),
    ]);
    assert_refused(&out, &["CPU 4000"]);
    assert_eq!(std::fs::read_to_string(&jobs).unwrap(), "task,job\nt,0\n");
    assert_eq!(
        std::fs::read_to_string(logs.join("t-0.log")).unwrap(),
        "old log\n"
    );
    assert!(temporaries(dir.path()).is_empty());
    assert!(temporaries(&logs).is_empty());
}

#[test]
fn period_with_a_bad_file_writes_no_spectrum() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.txt");
    let times: String = (0..50).map(|i| format!("{:.3}\n", i as f64 * 0.01)).collect();
    std::fs::write(&good, &times).unwrap();
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "garbage\n").unwrap();
    let sp = s(&dir.path().join("sp.csv"));
    let out = pacer(&["period", &s(&good), &s(&bad), "--spectrum", &sp]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("sp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // The spectrum cannot be an input either.
    let out = pacer(&["period", &s(&good), "--spectrum", &s(&good)]);
    assert_refused(&out, &["--spectrum", "the same file as the input"]);
    assert_eq!(std::fs::read_to_string(&good).unwrap(), times);
}

/// Starts `pacer args…`, kills it with `signal` after `after`, and returns its pid.
fn kill_after(args: &[&str], after: Duration, signal: i32) -> (u32, std::process::ExitStatus) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pacer"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    // SAFETY: signals our own child, still unwaited (its pid cannot have been reused).
    unsafe { libc::kill(child.id() as i32, signal) };
    let status = child.wait().unwrap();
    (child.id(), status)
}

/// Rows (lines after the header) of the temporary jobs file a killed pacer left.
fn rows_left(dir: &Path, pid: u32) -> usize {
    let tmp = dir.join(format!(".jobs.csv.pacer-tmp-{pid}"));
    let text = std::fs::read_to_string(&tmp).unwrap_or_else(|e| panic!("{}: {e}", tmp.display()));
    assert!(text.starts_with("task,job,"), "{text}");
    text.lines().count() - 1
}

#[test]
fn a_killed_sim_leaves_its_flushed_rows_and_the_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("jobs.csv");
    std::fs::write(&jobs, "old\n").unwrap();
    let f = s(&examples().join("textbook.json"));
    let args = ["sim", &f, "-d", "1000000s", "--jobs", &s(&jobs)];
    let (pid, status) = kill_after(&args, Duration::from_millis(2500), libc::SIGKILL);
    assert!(!status.success());
    assert!(rows_left(dir.path(), pid) > 0);
    assert_eq!(std::fs::read_to_string(&jobs).unwrap(), "old\n");
    // SIGTERM is caught: the temporary file goes, the old file stays.
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("jobs.csv");
    std::fs::write(&jobs, "old\n").unwrap();
    let args = ["sim", &f, "-d", "1000000s", "--jobs", &s(&jobs)];
    let (_, status) = kill_after(&args, Duration::from_millis(1000), libc::SIGTERM);
    assert!(!status.success());
    assert!(
        temporaries(dir.path()).is_empty(),
        "{:?}",
        temporaries(dir.path())
    );
    assert_eq!(std::fs::read_to_string(&jobs).unwrap(), "old\n");
}

#[test]
fn a_killed_run_leaves_its_flushed_rows_and_the_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.json");
    std::fs::write(&w, SCHED_OTHER_WORKLOAD).unwrap();
    let jobs = dir.path().join("jobs.csv");
    std::fs::write(&jobs, "old\n").unwrap();
    let args = ["run", &s(&w), "--calibration", "25", "--jobs", &s(&jobs)];
    let (pid, status) = kill_after(&args, Duration::from_millis(2500), libc::SIGKILL);
    assert!(!status.success());
    // 100 jobs a second, flushed every half second: about 200 rows, unless the machine is so
    // loaded that the thread hardly ran (SCHED_OTHER); the old code had flushed none.
    let rows = rows_left(dir.path(), pid);
    assert!(rows > 0, "{rows} rows");
    assert_eq!(std::fs::read_to_string(&jobs).unwrap(), "old\n");
}
