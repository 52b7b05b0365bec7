//! `LinuxKernel` against the real kernel: threads, CPU time, traced wake-ups fed to the period
//! analyser, admission limit. The sensors work for any user; wake-up tracing needs root and
//! tracefs, so it is a test of its own (`pacer_testkit`: ignored in builds without root or
//! `PACER_REQUIRE_ROOT=1`, failing when a need is missing otherwise).

use std::time::Duration;

use pacer_adapt::period::{analyse, PeriodConfig, PeriodEstimate};
use pacer_adapt::{Kernel, KernelError};
use pacer_linux::kernel::LinuxKernel;
use pacer_linux::sched::gettid;
use pacer_testkit::{require, Need};

#[test]
fn real_kernel_sensors() {
    let k = LinuxKernel::for_process(std::process::id());
    let me = gettid();
    assert!(k.threads().contains(&me), "own tid {me} in {:?}", k.threads());
    let t0 = k.cpu_time(me).unwrap();
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_millis(30) {
        std::hint::black_box(0u64.wrapping_add(1));
    }
    assert!(
        k.cpu_time(me).unwrap() > t0 + 10_000_000,
        "CPU time advances with busy work"
    );
    let limit = k.dl_bandwidth_limit(None);
    eprintln!(
        "real_kernel: {} CPUs, SCHED_DEADLINE limit {limit:.3} CPUs",
        k.cpus()
    );
    assert!(limit > 0.0 && limit <= k.cpus() as f64);
    match k.frequency(0) {
        Ok(f) => eprintln!("real_kernel: cpufreq policy 0 at {} kHz", f.cur_khz),
        Err(KernelError::Unsupported(m)) => eprintln!("real_kernel: no cpufreq here ({m})"),
        Err(e) => panic!("unexpected cpufreq error: {e}"),
    }
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn real_kernel_period_detection() {
    require(Need::Root);
    require(Need::Tracefs);
    let mut k = LinuxKernel::for_process(std::process::id());
    // A periodic program (sleeps until absolute 16 ms deadlines, so its activations do not drift
    // with scheduling delays), traced for ~0.8 s, then the period analyser.
    let (tx, rx) = std::sync::mpsc::channel();
    let sleeper = std::thread::spawn(move || {
        tx.send(gettid()).unwrap();
        let start = std::time::Instant::now() + Duration::from_millis(50);
        for k in 0..50u32 {
            let next = start + Duration::from_millis(16) * k;
            if let Some(d) = next.checked_duration_since(std::time::Instant::now()) {
                std::thread::sleep(d);
            }
        }
    });
    let tid = rx.recv().unwrap();
    let traced = k.trace_wakeups(tid, true);
    sleeper.join().unwrap();
    traced.unwrap_or_else(|e| panic!("cannot trace wake-ups: {e}"));
    let mut w = Vec::new();
    k.drain_wakeups(tid, &mut w).unwrap();
    assert!(w.len() >= 40, "only {} wake-ups traced", w.len());
    let spacing = (w[w.len() - 1] - w[0]) as f64 / (w.len() - 1) as f64;
    let est = analyse(&w, &PeriodConfig::default());
    eprintln!(
        "real_kernel: {} wake-ups, mean spacing {:.3} ms, analyser: {est:?}",
        w.len(),
        spacing / 1e6
    );
    let PeriodEstimate::Periodic { period_ns, .. } = est else {
        panic!("not periodic: {est:?}")
    };
    let err = (period_ns as f64 - 16e6).abs() / 16e6;
    assert!(err < 0.01, "detected {period_ns} ns for a 16 ms program");
}

/// A thread that sets its own scheduling after pacer took it but before pacer changed anything
/// (a program setting a new thread's nice value or policy at its start) is reported by
/// `changed_before_applied`; once its snapshot is refreshed, a reservation is not mistaken for
/// a conflict, and giving it back restores what the thread chose.
#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn a_thread_setting_its_own_policy_before_pacer_changed_it_keeps_being_controlled() {
    use pacer_linux::sched::{self, ThreadSched};
    use pacer_model::{Duration as D, Policy, Reservation};
    require(Need::Root);
    require(Need::SchedDeadline);
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        tid_tx.send(gettid()).unwrap();
        go_rx.recv().unwrap();
        // What `pacer run`'s threads do at their start.
        sched::set_policy(0, Policy::Other { nice: 3 }, true).unwrap();
        done_tx.send(()).unwrap();
        let _ = stop_rx.recv();
    });
    let tid = tid_rx.recv().unwrap();
    let mut k = LinuxKernel::for_process(std::process::id());
    k.remember_original(tid, ThreadSched::read(tid).unwrap());
    assert!(k.changed_before_applied().is_empty());
    go_tx.send(()).unwrap();
    done_rx.recv().unwrap();
    let changed = k.changed_before_applied();
    assert_eq!(changed.len(), 1, "{changed:?}");
    let (t, now) = changed.into_iter().next().unwrap();
    assert_eq!(t, tid);
    assert_eq!(now.policy().unwrap(), Policy::Other { nice: 3 });
    k.remember_original(tid, now);
    let r = Reservation::new(D::from_us(500), D::from_ms(10), D::from_ms(10));
    k.set_policy(tid, Policy::Deadline(r))
        .expect("reserved, not left alone");
    assert!(k.take_foreign_changes().is_empty());
    k.set_policy(tid, Policy::Other { nice: 0 }).unwrap();
    let back = ThreadSched::read(tid).unwrap();
    assert_eq!(
        back.policy().unwrap(),
        Policy::Other { nice: 3 },
        "the thread's own choice"
    );
    stop_tx.send(()).unwrap();
    h.join().unwrap();
}
