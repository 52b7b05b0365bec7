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
    let limit = k.dl_bandwidth_limit();
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
