//! Cost of the runtime's channels (crates/runtime/src/channel.rs); results: docs/BENCHMARKS.md,
//! "Runtime channels".
//!
//! * `channel/uncontended/{bytes}`: one thread sends a message and receives it back (`send` +
//!   `try_recv`), with 8 and 256-byte messages: the two critical sections and the copies,
//!   nothing else.
//! * `channel/byte/{bytes}`: the same pair on a byte channel (`send` + `try_recv_into`), whose
//!   message size is known only at run time, as the executor's channels are: 64 bytes, and
//!   1920 bytes (10 ms of 48 kHz stereo 16-bit audio, one burst).
//! * `channel/4_senders`: the same pair, from a sender of priority 2, while four other threads
//!   (pinned to CPU 1, the measuring thread to CPU 0, so that they contend in parallel) send
//!   priority-1 messages into the same channel as fast as they can (a short pause between
//!   sends). The channel stays full of their messages, so the measured send steals a slot
//!   (StealLowest) and the receive still gets the measured message first: the cost under lock
//!   contention.
//! * `channel/ping_pong`: a round trip between two threads over two channels, each side
//!   sleeping in `recv_timeout` until the other's send wakes it: two futex wake-ups and two
//!   context switches, RTDroid's message-passing latency (Fig. 18).

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use pacer_runtime::channel::{byte_channel, channel, Overflow, RecvError};

fn uncontended(c: &mut Criterion) {
    let mut group = c.benchmark_group("channel/uncontended");
    let (tx, mut rx) = channel::<[u8; 8]>("bench", 64, Overflow::StealLowest, &[1]).expect("channel");
    group.bench_function(BenchmarkId::from_parameter(8), |b| {
        b.iter(|| {
            let _ = tx[0].send(black_box([7; 8]));
            black_box(rx.try_recv().ok())
        })
    });
    let mut samples: Vec<u32> = Vec::with_capacity(SAMPLES);
    for _ in 0..1_000_000 {
        let t0 = Instant::now();
        let _ = tx[0].send(black_box([7; 8]));
        black_box(rx.try_recv().ok());
        samples.push(t0.elapsed().as_nanos().min(u128::from(u32::MAX)) as u32);
    }
    print_percentiles("channel/uncontended/8", &mut samples);
    let (tx, mut rx) = channel::<[u8; 256]>("bench", 64, Overflow::StealLowest, &[1]).expect("channel");
    group.bench_function(BenchmarkId::from_parameter(256), |b| {
        b.iter(|| {
            let _ = tx[0].send(black_box([7; 256]));
            black_box(rx.try_recv().ok())
        })
    });
    group.finish();
}

fn byte(c: &mut Criterion) {
    let mut group = c.benchmark_group("channel/byte");
    for size in [64usize, 1920] {
        let (tx, mut rx) = byte_channel("bench", 64, size, Overflow::StealLowest, &[1]).expect("channel");
        let message = vec![7u8; size];
        let mut buf = vec![0u8; size];
        group.bench_function(BenchmarkId::from_parameter(size), |b| {
            b.iter(|| {
                let _ = tx[0].send(black_box(&message));
                black_box(rx.try_recv_into(&mut buf).ok())
            })
        });
    }
    group.finish();
}

fn four_senders_saturated(c: &mut Criterion) {
    four_senders(c, "saturated", None);
}

fn four_senders_paced(c: &mut Criterion) {
    four_senders(c, "paced_20us", Some(Duration::from_micros(20)));
}

/// Four background senders, each sending as fast as it can (`pace` None) or one message per
/// `pace` (spinning in between, so that no timer wake-up adds noise).
fn four_senders(c: &mut Criterion, label: &str, pace: Option<Duration>) {
    let (mut tx, mut rx) =
        channel::<[u8; 8]>("bench", 64, Overflow::StealLowest, &[2, 1, 1, 1, 1]).expect("channel");
    let stop = Arc::new(AtomicBool::new(false));
    let background: Vec<_> = tx
        .drain(1..)
        .map(|s| {
            let stop = stop.clone();
            thread::spawn(move || {
                // On the other CPU than the measuring thread: they contend for the channel's lock
                // in parallel with it instead of taking its CPU time (five runnable threads on
                // 2 CPUs would measure mostly time-sharing).
                pin_to(1);
                let mut i = 0u64;
                let mut next = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    let _ = s.send([i as u8; 8]);
                    i += 1;
                    match pace {
                        None => {
                            for _ in 0..64 {
                                std::hint::spin_loop();
                            }
                        }
                        Some(p) => {
                            next += p;
                            while Instant::now() < next && !stop.load(Ordering::Relaxed) {
                                std::hint::spin_loop();
                            }
                        }
                    }
                }
                i
            })
        })
        .collect();
    let measured = &tx[0];
    pin_to(0);
    // The measuring thread is the urgent component: SCHED_FIFO above the SCHED_OTHER senders
    // (root only). Then a sender that holds the lock when the measuring thread wants it is
    // boosted to SCHED_FIFO and runs at once, however many senders share its CPU; at equal
    // priority the wait would last until the holder's next time slice (see docs/BENCHMARKS.md).
    let fifo = set_policy(libc::SCHED_FIFO, 10);
    eprintln!(
        "{label}: measuring thread {}",
        if fifo {
            "SCHED_FIFO 10"
        } else {
            "SCHED_OTHER (not root)"
        }
    );
    let start = Instant::now();
    // Each pair is also timed on its own, so that the distribution is seen beside criterion's
    // mean, which a few long waits for a preempted lock holder dominate.
    let mut samples: Vec<u32> = Vec::with_capacity(SAMPLES);
    // Short: a SCHED_FIFO thread that never sleeps holds CPU 0 for the whole measurement (the
    // kernel's RT throttling leaves others 5 %).
    let switches_before = context_switches();
    let mut group = c.benchmark_group("channel/4_senders");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    group.bench_function(label, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t0 = Instant::now();
                let _ = measured.send(black_box([9; 8]));
                let got = rx.try_recv();
                let dt = t0.elapsed();
                debug_assert!(matches!(got, Ok(e) if e.priority == 2));
                black_box(got.ok());
                total += dt;
                if samples.len() < SAMPLES {
                    samples.push(dt.as_nanos().min(u128::from(u32::MAX)) as u32);
                }
            }
            total
        })
    });
    group.finish();
    let (vol, invol) = context_switches();
    // Voluntary switches of the measuring thread are its sleeps in FUTEX_LOCK_PI.
    eprintln!(
        "{label}: measuring thread: {} voluntary, {} involuntary context switches",
        vol - switches_before.0,
        invol - switches_before.1
    );
    stop.store(true, Ordering::Relaxed);
    let sends: u64 = background.into_iter().filter_map(|h| h.join().ok()).sum();
    // How hard the lock was contended: the background senders' rate beside the measurement.
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "{label}: background senders made {:.3} M sends/s",
        sends as f64 / secs / 1e6
    );
    set_policy(libc::SCHED_OTHER, 0);
    print_percentiles(label, &mut samples);
    unpin();
}

/// Pairs timed one by one per benchmark, at most.
const SAMPLES: usize = 4_000_000;

/// Prints the median, p99, p99.9 and maximum of `samples` (ns, each including one clock read).
fn print_percentiles(label: &str, samples: &mut [u32]) {
    if samples.is_empty() {
        return;
    }
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    eprintln!(
        "{label}: {} pairs timed one by one: median {} ns, p99 {} ns, p99.9 {} ns, max {} ns",
        samples.len(),
        at(0.5),
        at(0.99),
        at(0.999),
        at(1.0)
    );
}

/// Pins the calling thread to `cpu` (ignored where that fails: the figures then include
/// time-sharing).
fn pin_to(cpu: usize) {
    // SAFETY: `set` is a valid, zeroed cpu_set_t that CPU_SET fills within its size; pid 0 is the
    // calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        let _ = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// The calling thread's voluntary and involuntary context switches so far.
fn context_switches() -> (i64, i64) {
    // SAFETY: `usage` is valid for writes; RUSAGE_THREAD reports the calling thread.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut usage);
        (usage.ru_nvcsw, usage.ru_nivcsw)
    }
}

/// Sets the calling thread's policy; whether that worked.
fn set_policy(policy: libc::c_int, priority: libc::c_int) -> bool {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid sched_param; pid 0 is the calling thread.
    unsafe { libc::sched_setscheduler(0, policy, &param) == 0 }
}

/// Lets the calling thread run on every CPU again.
fn unpin() {
    // SAFETY: as in `pin_to`.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for cpu in 0..libc::CPU_SETSIZE as usize {
            libc::CPU_SET(cpu, &mut set);
        }
        let _ = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn ping_pong(c: &mut Criterion) {
    ping_pong_on(c, "other_cpu", Some((0, 1)));
    ping_pong_on(c, "same_cpu", Some((0, 0)));
}

/// The round trip with the two threads pinned to `cpus` (the measuring thread's, the echo's).
fn ping_pong_on(c: &mut Criterion, label: &str, cpus: Option<(usize, usize)>) {
    let (ping_tx, mut ping_rx) = channel::<u64>("ping", 4, Overflow::DropNewest, &[1]).expect("channel");
    let (pong_tx, mut pong_rx) = channel::<u64>("pong", 4, Overflow::DropNewest, &[1]).expect("channel");
    // Both ends at SCHED_FIFO 10 where allowed (root), as the runtime's components run: the
    // figure is then the wake-up path, not the wait for a time slice behind whatever else runs.
    // Both sleep every round trip, so nothing else is starved.
    let fifo = set_policy(libc::SCHED_FIFO, 10);
    eprintln!(
        "ping_pong: both threads {}",
        if fifo {
            "SCHED_FIFO 10"
        } else {
            "SCHED_OTHER (not root)"
        }
    );
    if let Some((me, _)) = cpus {
        pin_to(me);
    }
    let echo = thread::spawn(move || {
        if let Some((_, other)) = cpus {
            pin_to(other);
        }
        loop {
            match ping_rx.recv_timeout(Duration::from_secs(60)) {
                Ok(e) => {
                    let _ = pong_tx[0].send(e.message);
                }
                Err(RecvError::Disconnected) => break,
                Err(_) => {}
            }
        }
    });
    c.bench_function(&format!("channel/ping_pong/{label}"), |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for i in 0..iters {
                let _ = ping_tx[0].send(i);
                let _ = black_box(pong_rx.recv_timeout(Duration::from_secs(60)));
            }
            start.elapsed()
        })
    });
    drop(ping_tx);
    let _ = echo.join();
    set_policy(libc::SCHED_OTHER, 0);
    unpin();
}

criterion_group!(
    benches,
    uncontended,
    byte,
    four_senders_saturated,
    four_senders_paced,
    ping_pong
);
criterion_main!(benches);
