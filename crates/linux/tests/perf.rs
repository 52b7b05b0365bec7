//! Real-kernel tests of `pacer_linux::perf`: context switches and CPU migrations of chosen
//! threads counted by perf software events. They need perf events the caller may open on other
//! threads: root, or `kernel.perf_event_paranoid` ≤ 1 (`pacer_testkit`: ignored in builds
//! without root or `PACER_REQUIRE_ROOT=1`, failing when a need is missing otherwise). Run with
//! `--nocapture` to see the counts.

use std::sync::mpsc;
use std::sync::Mutex;
use std::thread;
use std::time::Duration;

use pacer_linux::perf::{PerfError, ThreadCounters, ThreadPerf};
use pacer_linux::sched::{get_affinity, gettid, set_affinity, Tid};
use pacer_testkit::{require, Need};

/// The tests share two CPUs; serialise them so one test's busy threads do not add switches to
/// another's counts.
static SERIAL: Mutex<()> = Mutex::new(());

fn serialize() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A thread that reports its TID, waits for `go`, runs `work`, then waits for `done` before
/// exiting (so it can still be counted while alive).
struct Worker {
    tid: Tid,
    go: mpsc::Sender<()>,
    finished: mpsc::Receiver<()>,
    exit: mpsc::Sender<()>,
    handle: Option<thread::JoinHandle<()>>,
}

impl Worker {
    fn spawn(work: impl FnOnce() + Send + 'static) -> Worker {
        let (tid_tx, tid_rx) = mpsc::channel();
        let (go, go_rx) = mpsc::channel::<()>();
        let (fin_tx, finished) = mpsc::channel();
        let (exit, exit_rx) = mpsc::channel::<()>();
        let handle = thread::spawn(move || {
            tid_tx.send(gettid()).expect("tid");
            if go_rx.recv().is_ok() {
                work();
                let _ = fin_tx.send(());
                let _ = exit_rx.recv();
            }
        });
        Worker {
            tid: tid_rx.recv().expect("worker tid"),
            go,
            finished,
            exit,
            handle: Some(handle),
        }
    }

    fn run(&self) {
        self.go.send(()).expect("start worker");
        self.finished.recv().expect("worker finished");
    }

    fn join(mut self) {
        let _ = self.exit.send(());
        if let Some(h) = self.handle.take() {
            h.join().expect("worker panicked");
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.exit.send(());
        let _ = self.go.send(());
    }
}

/// Opens counters on `tid`.
fn open(test: &str, tid: Tid) -> ThreadPerf {
    ThreadPerf::open(tid).unwrap_or_else(|e| panic!("{test}: opening perf counters failed: {e}"))
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn sleeping_thread_switches_at_least_once_per_sleep() {
    let _g = serialize();
    let test = "sleeping_thread_switches_at_least_once_per_sleep";
    require(Need::PerfEvents);
    let w = Worker::spawn(|| {
        for _ in 0..100 {
            thread::sleep(Duration::from_millis(1));
        }
    });
    let perf = open(test, w.tid);
    let before = perf.read().unwrap();
    assert_eq!(
        before.context_switches, 0,
        "counted before the thread ran: {before:?}"
    );
    w.run();
    let c = perf.read().unwrap();
    eprintln!(
        "{test}: tid {}: 100 × 1 ms sleeps -> {} context switches, {} migrations, enabled {} ns, running {} ns",
        w.tid, c.context_switches, c.migrations, c.time_enabled_ns, c.time_running_ns
    );
    assert!(c.context_switches >= 100, "{c:?}");
    assert!(!c.scaled(), "software events should not be multiplexed: {c:?}");

    // disable: nothing more is counted; reset: back to zero; enable: counting again.
    perf.disable().unwrap();
    thread::sleep(Duration::from_millis(5));
    let frozen = perf.read().unwrap();
    assert_eq!(frozen.context_switches, c.context_switches);
    assert!(!perf.exited());
    perf.reset().unwrap();
    let zero = perf.read().unwrap();
    assert_eq!((zero.context_switches, zero.migrations), (0, 0), "{zero:?}");
    perf.enable().unwrap();
    w.join();
    // Joined: the thread has exited, its final counts stay readable and POLLHUP says so.
    let last = perf.read().unwrap();
    eprintln!(
        "{test}: after disable {} switches; after reset+enable and exit {} (exited: {})",
        frozen.context_switches,
        last.context_switches,
        perf.exited()
    );
    assert!(perf.exited());
    // The wake-up to exit is not a switch-out, and the exit's final switch happens after the
    // task's perf context is torn down: nothing (or a preemption) after the reset.
    assert!(last.context_switches <= 1, "{last:?}");
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn alternating_affinity_counts_migrations() {
    let _g = serialize();
    let test = "alternating_affinity_counts_migrations";
    require(Need::PerfEvents);
    require(Need::Cpus(&[0, 1]));
    let cpus = get_affinity(0).unwrap();
    let restore = cpus.clone();
    let w = Worker::spawn(move || {
        for i in 0..20 {
            set_affinity(0, &[i % 2]).expect("pin");
            // sched_setaffinity returns only once the thread runs on an allowed CPU.
        }
        set_affinity(0, &restore).expect("restore affinity");
    });
    let perf = open(test, w.tid);
    w.run();
    let c = perf.read().unwrap();
    eprintln!(
        "{test}: tid {}: 20 alternating pins to CPU 0/1 -> {} migrations, {} context switches",
        w.tid, c.migrations, c.context_switches
    );
    assert!(c.migrations >= 19, "{c:?}");
    w.join();
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn missing_thread_is_a_typed_error() {
    let _g = serialize();
    require(Need::PerfEvents);
    // Above the default pid_max (4 194 304 is the largest possible): no such thread.
    let ghost: Tid = 0x7fff_fff0;
    match ThreadPerf::open(ghost) {
        Err(PerfError::NoSuchThread(t)) => {
            assert_eq!(t, ghost);
            eprintln!("missing_thread_is_a_typed_error: tid {ghost} -> NoSuchThread");
        }
        other => panic!("expected NoSuchThread, got {other:?}"),
    }
    let mut set = ThreadCounters::new();
    match set.add(ghost) {
        Err(PerfError::NoSuchThread(_)) => {}
        other => panic!("expected NoSuchThread, got {other:?}"),
    }
    // sync() skips threads that are gone instead of failing.
    set.sync([ghost]).unwrap();
    assert!(set.is_empty());
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn thread_counters_follow_a_set_of_threads() {
    let _g = serialize();
    let test = "thread_counters_follow_a_set_of_threads";
    require(Need::PerfEvents);
    let a = Worker::spawn(|| {
        for _ in 0..20 {
            thread::sleep(Duration::from_millis(1));
        }
    });
    let b = Worker::spawn(|| {
        for _ in 0..40 {
            thread::sleep(Duration::from_millis(1));
        }
    });
    let mut set = ThreadCounters::new();
    set.add(a.tid).unwrap_or_else(|e| panic!("{test}: {e}"));
    set.sync([a.tid, b.tid]).unwrap();
    assert_eq!(set.tids().collect::<Vec<_>>().len(), 2);
    a.run();
    b.run();
    let samples = set.read_all().unwrap();
    for s in &samples {
        eprintln!(
            "{test}: tid {}: {} switches, {} migrations, exited {}",
            s.tid, s.counts.context_switches, s.counts.migrations, s.exited
        );
    }
    let of = |tid| samples.iter().find(|s| s.tid == tid).unwrap().counts;
    assert!(of(a.tid).context_switches >= 20);
    assert!(of(b.tid).context_switches >= 40);
    assert!(samples.iter().all(|s| !s.exited));

    let (a_tid, b_tid) = (a.tid, b.tid);
    a.join();
    let pruned = set.prune_exited();
    assert_eq!(pruned.len(), 1, "{pruned:?}");
    assert_eq!(pruned[0].tid, a_tid);
    assert!(pruned[0].counts.context_switches >= 20);
    assert!(!set.contains(a_tid) && set.contains(b_tid));
    let last = set.remove(b_tid).expect("final read");
    assert!(last.context_switches >= 40);
    assert!(set.is_empty());
    b.join();
    eprintln!("{test}: exited thread {a_tid} pruned with its final counts; {b_tid} removed");
}
