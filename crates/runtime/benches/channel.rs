//! Cost of the runtime's channels (crates/runtime/src/channel.rs); results: docs/BENCHMARKS.md,
//! "Runtime channels".
//!
//! * `channel/uncontended/{bytes}`: one thread sends a message and receives it back (`send` +
//!   `try_recv`), with 8 and 256-byte messages: the two critical sections and the copies,
//!   nothing else.
//! * `channel/4_senders`: the same pair, from a sender of priority 2, while four other threads
//!   send priority-1 messages into the same channel as fast as they can (a short pause between
//!   sends). The channel stays full of their messages, so the measured send steals a slot
//!   (StealLowest) and the receive still gets the measured message first: the cost under lock
//!   contention. On a 2-CPU machine the four senders also take CPU time from the measuring
//!   thread, which is part of what is measured.
//! * `channel/ping_pong`: a round trip between two threads over two channels, each side
//!   sleeping in `recv_timeout` until the other's send wakes it: two futex wake-ups and two
//!   context switches, RTDroid's message-passing latency (Fig. 18).

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use pacer_runtime::channel::{channel, Overflow, RecvError};

fn uncontended(c: &mut Criterion) {
    let mut group = c.benchmark_group("channel/uncontended");
    let (tx, mut rx) = channel::<[u8; 8]>("bench", 64, Overflow::StealLowest, &[1]).expect("channel");
    group.bench_function(BenchmarkId::from_parameter(8), |b| {
        b.iter(|| {
            let _ = tx[0].send(black_box([7; 8]));
            black_box(rx.try_recv().ok())
        })
    });
    let (tx, mut rx) = channel::<[u8; 256]>("bench", 64, Overflow::StealLowest, &[1]).expect("channel");
    group.bench_function(BenchmarkId::from_parameter(256), |b| {
        b.iter(|| {
            let _ = tx[0].send(black_box([7; 256]));
            black_box(rx.try_recv().ok())
        })
    });
    group.finish();
}

fn four_senders(c: &mut Criterion) {
    let (mut tx, mut rx) =
        channel::<[u8; 8]>("bench", 64, Overflow::StealLowest, &[2, 1, 1, 1, 1]).expect("channel");
    let stop = Arc::new(AtomicBool::new(false));
    let background: Vec<_> = tx
        .drain(1..)
        .map(|s| {
            let stop = stop.clone();
            thread::spawn(move || {
                let mut i = 0u8;
                while !stop.load(Ordering::Relaxed) {
                    let _ = s.send([i; 8]);
                    i = i.wrapping_add(1);
                    for _ in 0..64 {
                        std::hint::spin_loop();
                    }
                }
            })
        })
        .collect();
    let measured = &tx[0];
    c.bench_function("channel/4_senders", |b| {
        b.iter(|| {
            let _ = measured.send(black_box([9; 8]));
            let got = rx.try_recv();
            debug_assert!(matches!(got, Ok(e) if e.priority == 2));
            black_box(got.ok())
        })
    });
    stop.store(true, Ordering::Relaxed);
    for h in background {
        let _ = h.join();
    }
}

fn ping_pong(c: &mut Criterion) {
    let (ping_tx, mut ping_rx) = channel::<u64>("ping", 4, Overflow::DropNewest, &[1]).expect("channel");
    let (pong_tx, mut pong_rx) = channel::<u64>("pong", 4, Overflow::DropNewest, &[1]).expect("channel");
    let echo = thread::spawn(move || loop {
        match ping_rx.recv_timeout(Duration::from_secs(60)) {
            Ok(e) => {
                let _ = pong_tx[0].send(e.message);
            }
            Err(RecvError::Disconnected) => break,
            Err(_) => {}
        }
    });
    c.bench_function("channel/ping_pong", |b| {
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
}

criterion_group!(benches, uncontended, four_senders, ping_pong);
criterion_main!(benches);
