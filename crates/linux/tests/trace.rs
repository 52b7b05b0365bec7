//! Real-kernel tests of `pacer_linux::trace`: a periodic sleeper is traced through the
//! `sched:sched_wakeup` tracepoint (a private tracefs instance with a kernel filter), an untraced thread must not show up (kernel filter), and
//! the tracing overhead per wake-up is measured and printed (no timing assertion). They need root
//! and tracefs (`pacer_testkit`: ignored in builds without root or `PACER_REQUIRE_ROOT=1`, failing
//! when a need is missing otherwise).
//!
//! Run with `cargo test -p pacer-linux --test trace -- --nocapture` to see what was measured.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use pacer_linux::trace::{TraceError, WakeupTracer};
use pacer_testkit::{require, Need};

/// The tests share the CPUs; serialise them so counts and overhead numbers are not disturbed.
static SERIAL: Mutex<()> = Mutex::new(());

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    (unsafe { libc::gettid() }) as u32
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Opens a tracer after checking what it needs (tracefs instances and event filters are
/// root-only).
fn tracer(test: &str, kb: usize) -> WakeupTracer {
    require(Need::Root);
    require(Need::Tracefs);
    WakeupTracer::with_buffer_kb(kb).unwrap_or_else(|e| panic!("{test}: opening the tracer failed: {e}"))
}

/// Spawns a thread that reports its TID, waits for `go`, then sleeps `period` `n` times.
fn sleeper(period: Duration, n: usize, go: std::sync::Arc<Barrier>) -> (u32, thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel();
    let h = thread::spawn(move || {
        tx.send(gettid()).expect("send tid");
        go.wait();
        for _ in 0..n {
            thread::sleep(period);
        }
    });
    (rx.recv().expect("receive tid"), h)
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn traces_a_periodic_sleeper_and_filters_out_others() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = "traces_a_periodic_sleeper_and_filters_out_others";
    let mut tracer = tracer(test, 256);
    let go = std::sync::Arc::new(Barrier::new(3));
    let (traced, h1) = sleeper(Duration::from_millis(10), 30, go.clone());
    let (untraced, h2) = sleeper(Duration::from_millis(7), 45, go.clone());
    tracer.add(traced).expect("add traced thread");
    let t0 = monotonic_ns();
    go.wait();
    h1.join().unwrap();
    h2.join().unwrap();
    let t1 = monotonic_ns();

    let mut out = HashMap::new();
    tracer.drain(&mut out).expect("drain");
    let ts = out.get(&traced).cloned().unwrap_or_default();
    let gaps: Vec<u64> = ts.windows(2).map(|w| w[1] - w[0]).collect();
    let med = if gaps.is_empty() { 0 } else { median(gaps.clone()) };
    eprintln!(
        "{test}: {} cpus; traced tid {traced}: {} wake-ups, median spacing {:.3} ms \
         (min {:.3}, max {:.3}); untraced tid {untraced}: {} wake-ups reported; \
         other tids reported: {:?}; lost {}",
        tracer.cpus(),
        ts.len(),
        med as f64 / 1e6,
        gaps.iter().min().copied().unwrap_or(0) as f64 / 1e6,
        gaps.iter().max().copied().unwrap_or(0) as f64 / 1e6,
        out.get(&untraced).map_or(0, Vec::len),
        out.keys().filter(|&&k| k != traced).collect::<Vec<_>>(),
        tracer.lost(),
    );
    assert!(ts.len() >= 25, "expected ≥ 25 wake-ups, got {}", ts.len());
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "timestamps must be sorted");
    assert!(
        ts.iter().all(|&t| t >= t0 && t <= t1),
        "timestamps must be CLOCK_MONOTONIC within the run [{t0}, {t1}]: {:?}..{:?}",
        ts.first(),
        ts.last()
    );
    let target = 10_000_000u64;
    assert!(
        med.abs_diff(target) <= target / 5,
        "median spacing {med} ns not within 20 % of {target} ns"
    );
    assert!(
        !out.contains_key(&untraced),
        "untraced thread reported: the kernel filter leaks"
    );
    assert_eq!(out.len(), 1, "only the traced thread may be reported");
    let instance = tracer.instance().to_path_buf();
    assert_eq!(tracer.lost(), 0);

    // A second drain has nothing new.
    let mut again = Vec::new();
    tracer.drain_tid(traced, &mut again).expect("drain");
    assert!(again.is_empty(), "drain must consume: {again:?}");
    drop(tracer);
    assert!(!instance.exists(), "drop must remove {}", instance.display());
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn remove_stops_reporting_and_bad_tids_are_errors() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = "remove_stops_reporting_and_bad_tids_are_errors";
    let mut tracer = tracer(test, 64);
    assert!(matches!(tracer.add(0), Err(TraceError::InvalidTid(0))));
    assert!(matches!(tracer.add(u32::MAX), Err(TraceError::InvalidTid(_))));

    let go = std::sync::Arc::new(Barrier::new(3));
    let (a, ha) = sleeper(Duration::from_millis(5), 20, go.clone());
    let (b, hb) = sleeper(Duration::from_millis(5), 20, go.clone());
    tracer.add(a).unwrap();
    tracer.add(b).unwrap();
    tracer.add(b).unwrap(); // idempotent
    assert_eq!(tracer.traced().collect::<Vec<_>>(), {
        let mut v = vec![a, b];
        v.sort_unstable();
        v
    });
    go.wait();
    thread::sleep(Duration::from_millis(40));
    // Wake-ups of `b` before removal are kept; after it, none arrive.
    tracer.remove(b).unwrap();
    let removed_at = monotonic_ns();
    ha.join().unwrap();
    hb.join().unwrap();
    let (mut wa, mut wb) = (Vec::new(), Vec::new());
    tracer.drain_tid(a, &mut wa).expect("drain");
    tracer.drain_tid(b, &mut wb).expect("drain");
    eprintln!(
        "{test}: tid {a} (kept): {} wake-ups; tid {b} (removed after ~40 ms): {} wake-ups, \
         last {} ns before removal",
        wa.len(),
        wb.len(),
        wb.last().map_or(0, |&t| removed_at.saturating_sub(t))
    );
    assert!(wa.len() >= 18, "kept thread: {} wake-ups", wa.len());
    assert!(
        (3..=12).contains(&wb.len()),
        "removed thread: {} wake-ups",
        wb.len()
    );
    assert!(wb.iter().all(|&t| t <= removed_at));

    // Removing everything disables the events; removing an unknown tid is a no-op.
    tracer.remove(a).unwrap();
    tracer.remove(12345).unwrap();
    assert_eq!(tracer.traced().count(), 0);
}

/// Round trips over a socket pair between two threads: each round is two blocking reads, i.e.
/// two sched_wakeup events. Returns ns per wake-up (best of 3 runs).
fn ping_pong(rounds: u32, tracer: Option<&mut WakeupTracer>, trace: bool) -> (f64, usize) {
    let (mut a, mut b) = UnixStream::pair().expect("socketpair");
    let (tx, rx) = mpsc::channel();
    let echo = thread::spawn(move || {
        tx.send(gettid()).unwrap();
        let mut buf = [0u8; 1];
        while b.read_exact(&mut buf).is_ok() && buf[0] != 0 {
            b.write_all(&buf).unwrap();
        }
    });
    let echo_tid = rx.recv().unwrap();
    let mut tracer = tracer;
    if let (Some(t), true) = (tracer.as_deref_mut(), trace) {
        t.add(echo_tid).unwrap();
        t.add(gettid()).unwrap();
    }
    let mut best = f64::MAX;
    let mut recorded = 0;
    for _ in 0..3 {
        let start = Instant::now();
        let mut buf = [1u8; 1];
        for _ in 0..rounds {
            a.write_all(&[1]).unwrap();
            a.read_exact(&mut buf).unwrap();
        }
        let per_wakeup = start.elapsed().as_nanos() as f64 / (2.0 * rounds as f64);
        best = best.min(per_wakeup);
        if let Some(t) = tracer.as_deref_mut() {
            let mut out = HashMap::new();
            t.drain(&mut out).expect("drain");
            recorded += out.values().map(Vec::len).sum::<usize>();
        }
    }
    a.write_all(&[0]).unwrap();
    echo.join().unwrap();
    if let Some(t) = tracer {
        let _ = t.remove(echo_tid);
        let _ = t.remove(gettid());
    }
    (best, recorded)
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn measures_overhead_per_wakeup() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = "measures_overhead_per_wakeup";
    let mut tracer = tracer(test, 4096);
    let rounds = 5_000;
    let (base, _) = ping_pong(rounds, None, false);
    // Events enabled, but the filter matches another thread: every wake-up pays the filter only.
    let bystander_go = std::sync::Arc::new(Barrier::new(1));
    let (bystander, hb) = sleeper(Duration::from_millis(1), 0, bystander_go);
    hb.join().unwrap();
    tracer.add(bystander).unwrap();
    let (filtered, _) = ping_pong(rounds, Some(&mut tracer), false);
    tracer.remove(bystander).unwrap();
    // Both ping-pong threads traced: every wake-up is recorded.
    let (traced, recorded) = ping_pong(rounds, Some(&mut tracer), true);
    eprintln!(
        "{test}: socket ping-pong, {rounds} rounds × 3 (best), ns per wake-up: \
         no tracer {base:.0}, tracer filtering out {filtered:.0} ({:+.0}), \
         tracer recording {traced:.0} ({:+.0}); {recorded} records read, {} lost",
        filtered - base,
        traced - base,
        tracer.lost()
    );
    assert!(recorded > 0, "recording run produced no records");
}
