//! Real-kernel tests of `pacer_linux::sched_trace`: a periodic sleeper's context switches and
//! wake-ups are recorded through a private tracefs instance with kernel filters on both sides
//! of a switch, an untraced thread stays out, a thread added later is recorded from then on,
//! and the instance is gone after drop. They need root and tracefs (`pacer_testkit`).

use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use pacer_linux::sched::gettid;
use pacer_linux::sched_trace::{SchedEvent, SchedRecord, SchedTracer};
use pacer_linux::sys::monotonic_ns;
use pacer_testkit::{require, Need};

static SERIAL: Mutex<()> = Mutex::new(());

/// Pins the calling thread to CPU 0. The development VM never records a switch away from the
/// idle task on CPU 1 (docs/linux.md, "Scheduler traces of a run"), which these tests, about
/// the filter, must not count as the filter's doing.
fn pin_to_cpu0() {
    pacer_linux::sched::set_affinity(0, &[0]).expect("sched_setaffinity");
}

/// A thread on CPU 0 that reports its TID, waits for `go`, then sleeps `period` `n` times.
fn sleeper(period: Duration, n: usize, go: Arc<Barrier>) -> (u32, thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel();
    let h = thread::spawn(move || {
        pin_to_cpu0();
        tx.send(gettid()).expect("send tid");
        go.wait();
        for _ in 0..n {
            thread::sleep(period);
        }
    });
    (rx.recv().expect("receive tid"), h)
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn records_both_sides_of_the_traced_threads_switches_and_nothing_else() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    require(Need::Root);
    require(Need::Tracefs);
    const N: usize = 30;
    let tracer = SchedTracer::new().expect("open the tracer");
    let instance = tracer.instance().to_path_buf();
    assert!(instance.is_dir());
    let go = Arc::new(Barrier::new(3));
    let (traced, a) = sleeper(Duration::from_millis(3), N, go.clone());
    let (other, b) = sleeper(Duration::from_millis(3), N, go.clone());
    let start = monotonic_ns();
    tracer.add(&[traced]).expect("add");
    go.wait();
    a.join().unwrap();
    b.join().unwrap();
    let end = monotonic_ns();
    let trace = tracer.finish().expect("finish");
    let ins = trace
        .records
        .iter()
        .filter(|r| matches!(r.event, SchedEvent::Switch { next_pid, .. } if next_pid == traced as i32))
        .count();
    let outs = trace
        .records
        .iter()
        .filter(|r| matches!(r.event, SchedEvent::Switch { prev_pid, .. } if prev_pid == traced as i32))
        .count();
    let wakings = trace
        .records
        .iter()
        .filter(|r| matches!(r.event, SchedEvent::Waking { pid, .. } if pid == traced as i32))
        .count();
    eprintln!(
        "{} records: {ins} switch-ins, {outs} switch-outs, {wakings} wakings of the traced thread; lost {}",
        trace.records.len(),
        trace.lost()
    );
    assert!(ins >= N && outs >= N && wakings >= N, "{ins} {outs} {wakings}");
    for r in &trace.records {
        assert!(
            r.ts_ns >= start && r.ts_ns <= end,
            "{r:?} outside [{start}, {end}]"
        );
        let involved = match r.event {
            SchedEvent::Switch {
                prev_pid, next_pid, ..
            } => prev_pid == traced as i32 || next_pid == traced as i32,
            SchedEvent::Waking { pid, .. } => pid == traced as i32,
        };
        assert!(
            involved,
            "a record not involving {traced} (other: {other}): {r:?}"
        );
    }
    // The switch-in is recorded in the context of the task leaving the CPU.
    assert!(trace.records.iter().any(|r| matches!(r.event,
        SchedEvent::Switch { next_pid, .. } if next_pid == traced as i32)
        && r.common_pid != traced as i32));
    assert!(trace.records.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
    assert_eq!(trace.lost(), 0);
    assert_eq!(trace.tids, vec![traced]);
    drop(tracer);
    assert!(!instance.exists(), "{} left behind", instance.display());
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn threads_added_later_are_recorded_from_then_on_and_bad_tids_are_refused() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    require(Need::Root);
    require(Need::Tracefs);
    let tracer = SchedTracer::new().expect("open the tracer");
    assert!(tracer.add(&[0]).is_err());
    assert!(tracer.add(&[u32::MAX]).is_err());
    assert!(tracer.traced().is_empty());
    let go = Arc::new(Barrier::new(3));
    let (first, a) = sleeper(Duration::from_millis(2), 20, go.clone());
    // Twice as long as the first: it goes on after the first has ended.
    let (second, b) = sleeper(Duration::from_millis(2), 40, go.clone());
    tracer.add(&[first]).expect("add first");
    go.wait();
    a.join().unwrap();
    let added = monotonic_ns();
    tracer.add(&[second, first]).expect("add second");
    b.join().unwrap();
    let trace = tracer.finish().expect("finish");
    let of = |tid: u32| {
        trace
            .records
            .iter()
            .filter(move |r| matches!(r.event, SchedEvent::Switch { next_pid, .. } if next_pid == tid as i32))
    };
    assert!(of(first).count() >= 20);
    // The second thread ran alongside the first: before it was added, only its switches with the
    // first are there (they involve a traced thread).
    let with_first =
        |r: &SchedRecord| matches!(r.event, SchedEvent::Switch { prev_pid, .. } if prev_pid == first as i32);
    assert!(of(second).all(|r| r.ts_ns >= added || with_first(r)));
    assert!(of(second).filter(|r| r.ts_ns >= added).count() >= 5);
    assert_eq!(trace.tids, vec![first.min(second), first.max(second)]);
}
