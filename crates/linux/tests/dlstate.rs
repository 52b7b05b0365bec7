//! `pacer_linux::dlstate` and `LinuxKernel::dl_state` against the real kernel: a thread under
//! SCHED_DEADLINE burning CPU sees its remaining runtime fall by the CPU time it used and, once
//! throttled and replenished, its deadline advance by exactly one period. The reads on the
//! reserved thread must not allocate (counted by this binary's allocator). Needs root
//! (`pacer_testkit`: ignored in builds without root or `PACER_REQUIRE_ROOT=1`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use pacer_adapt::{DlState, Kernel};
use pacer_linux::dlstate::DlStateReader;
use pacer_linux::kernel::LinuxKernel;
use pacer_linux::sched::{self, gettid};
use pacer_model::{Duration, Policy, Reservation};
use pacer_testkit::{require, Need};

mod support;
use support::{burn, total_bw, MS};

/// Counts the allocations of the calling thread.
struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the counter is a const-initialised thread-local
// Cell, which needs no allocation.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn deadline_state_follows_runtime_and_replenishment() {
    require(Need::Root);
    require(Need::SchedDeadline);
    require(Need::SchedDebug);
    let test = "deadline_state_follows_runtime_and_replenishment";
    let (before, _) = total_bw();
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        let reader = DlStateReader::open_self().expect("own sched file");
        let p = Policy::Deadline(Reservation::new(
            Duration(5 * MS),
            Duration(20 * MS),
            Duration(20 * MS),
        ));
        sched::set_policy(0, p, true).expect("5/20 ms reservation");
        tid_tx.send(gettid()).unwrap();
        // Seen from outside while it sleeps.
        go_rx.recv().unwrap();
        let a0 = allocs();
        let (c0, s0) = reader.read_own().expect("read");
        burn(2 * MS);
        let (c1, s1) = reader.read_own().expect("read");
        // Past the 5 ms budget: throttled, replenished at the deadline with deadline += period.
        burn(4 * MS);
        let (c2, s2) = reader.read_own().expect("read");
        let s3 = reader.read().expect("read");
        let allocated = allocs() - a0;
        // Leaves SCHED_DEADLINE itself, while running: its bandwidth comes back at once.
        let back = sched::set_policy(0, Policy::Other { nice: 0 }, false);
        let after = reader.read();
        (
            allocated,
            [(c0, s0), (c1, s1), (c2, s2)],
            s3,
            back.is_ok(),
            after.ok(),
        )
    });
    let tid = tid_rx.recv().unwrap();
    let k = LinuxKernel::for_process(std::process::id());
    let outside = k.dl_state(tid).expect("dl_state of a sleeping reserved thread");
    go_tx.send(()).unwrap();
    let (allocated, reads, s3, back, after) = worker.join().expect("worker");
    assert!(back, "the worker left SCHED_DEADLINE");
    eprintln!("{test}: seen from another thread while sleeping: {outside:?}");
    for (i, (c, s)) in reads.iter().enumerate() {
        eprintln!("{test}: read {i}: cpu {c} ns, {s:?}");
    }
    let outside = outside.expect("Some while reserved");
    let st = |i: usize| -> DlState { reads[i].1.expect("Some while reserved") };
    let (s0, s1, s2) = (st(0), st(1), st(2));
    assert!(outside.runtime > 0 && outside.runtime <= 5 * MS as i64);
    // Runtime falls by the CPU time used between the reads (same clock, refreshed at each read).
    let used = (reads[1].0 - reads[0].0) as i64;
    let fell = s0.runtime - s1.runtime;
    assert_eq!(s1.deadline, s0.deadline, "no replenishment within the budget");
    assert!(
        (fell - used).abs() < 200_000,
        "runtime fell {fell} ns while the thread used {used} ns"
    );
    // Throttled once, then replenished: the deadline advanced by exactly one period, the
    // runtime is the budget minus what was used since the replenishment.
    assert_eq!(
        s2.deadline - s1.deadline,
        20 * MS,
        "deadline advanced by the period"
    );
    assert!(s2.runtime > 0 && s2.runtime < 5 * MS as i64, "{s2:?}");
    assert!(s3.is_some());
    assert_eq!(allocated, 0, "reads on the real-time thread allocated");
    assert_eq!(after, Some(None), "not SCHED_DEADLINE any more: None");
    let (end, consistent) = total_bw();
    eprintln!(
        "{test}: runtime fell {fell} ns for {used} ns of CPU; deadline +{} ns after the throttle; \
         {allocated} allocations; total_bw {before} -> {end} (matches the reserved threads: {consistent})",
        s2.deadline - s1.deadline
    );
    assert!(
        consistent,
        "total_bw {end} is not what the reserved threads hold: leaked"
    );
}

#[test]
fn dl_state_of_a_fair_thread_is_none_and_of_a_missing_thread_an_error() {
    let k = LinuxKernel::for_process(std::process::id());
    assert_eq!(k.dl_state(gettid()), Ok(None));
    assert_eq!(
        k.dl_state(4_194_400),
        Err(pacer_adapt::KernelError::NoSuchThread(4_194_400))
    );
}
