//! Real-kernel tests of `pacer_linux::sched`: they set SCHED_DEADLINE/SCHED_FIFO on real threads,
//! so they need root and a kernel with SCHED_DEADLINE (`pacer_testkit`: ignored in builds
//! without root or `PACER_REQUIRE_ROOT=1`, failing when a need is missing otherwise). When they
//! run they print what they verified.

use std::sync::mpsc::{channel, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;

use pacer_adapt::KernelError;
use pacer_linux::sched::{
    self, get_affinity, get_attr, get_policy, gettid, set_affinity, set_policy, LinuxError, Tid,
    SCHED_DEADLINE, SCHED_OTHER,
};
use pacer_model::{Duration, Policy, Reservation, ReservationFlags};
use pacer_testkit::{require, Need};

/// Admission control is global: tests in this file must not hold bandwidth at the same time.
static KERNEL: Mutex<()> = Mutex::new(());

fn serialize() -> std::sync::MutexGuard<'static, ()> {
    KERNEL.lock().unwrap_or_else(|e| e.into_inner())
}

const OTHER: Policy = Policy::Other { nice: 0 };

fn dl(runtime: Duration, deadline: Duration, period: Duration) -> Policy {
    Policy::Deadline(Reservation::new(runtime, deadline, period))
}

/// A helper thread that blocks until told otherwise (so it holds a reservation without using
/// CPU). It leaves SCHED_DEADLINE *itself* ([`Parked::demote`]) or by exiting: on Linux 6.18
/// another thread demoting a sleeping SCHED_DEADLINE thread leaked that thread's bandwidth from
/// the root domain's admission accounting (observed in this VM through
/// /sys/kernel/debug/sched/debug `dl_bw->total_bw`), which would starve later runs.
struct Parked {
    tid: Tid,
    commands: Option<Sender<Sender<Result<(), String>>>>,
    handle: Option<JoinHandle<()>>,
}

impl Parked {
    fn new() -> Parked {
        let (tid_tx, tid_rx) = channel();
        let (commands, inbox) = channel::<Sender<Result<(), String>>>();
        let handle = std::thread::spawn(move || {
            tid_tx.send(gettid()).expect("report tid");
            // Each message asks the thread to return itself to SCHED_OTHER; a closed channel
            // means exit (a SCHED_DEADLINE thread's bandwidth is released when it dies).
            while let Ok(reply) = inbox.recv() {
                let _ = reply.send(set_policy(0, OTHER, false).map_err(|e| e.to_string()));
            }
        });
        let tid = tid_rx.recv().expect("parked thread tid");
        Parked {
            tid,
            commands: Some(commands),
            handle: Some(handle),
        }
    }

    /// Has the thread set itself back to SCHED_OTHER (while running, which the kernel accounts
    /// correctly).
    fn demote(&self) -> Result<(), String> {
        let (tx, rx) = channel();
        self.commands
            .as_ref()
            .ok_or("gone")?
            .send(tx)
            .map_err(|e| e.to_string())?;
        rx.recv().map_err(|e| e.to_string())?
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        drop(self.commands.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Restores the calling thread to SCHED_OTHER even when an assertion fails.
struct RestoreSelf;

impl Drop for RestoreSelf {
    fn drop(&mut self) {
        let _ = set_policy(0, OTHER, false);
    }
}

/// What every SCHED_DEADLINE test here needs.
fn require_deadline() {
    require(Need::Root);
    require(Need::SchedDeadline);
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn deadline_set_read_back_and_restore() {
    let _g = serialize();
    require_deadline();
    let me = gettid();
    let _restore = RestoreSelf;
    let p = dl(Duration::from_ms(1), Duration::from_ms(10), Duration::from_ms(10));
    set_policy(me, p, true).expect("1ms/10ms/10ms reservation");

    let a = get_attr(me).unwrap();
    assert_eq!(a.size, 56);
    assert_eq!(a.sched_policy, SCHED_DEADLINE);
    assert_eq!(
        (a.sched_runtime, a.sched_deadline, a.sched_period),
        (1_000_000, 10_000_000, 10_000_000)
    );
    assert!(a.reset_on_fork(), "flags {:#x}", a.sched_flags);
    let back = get_policy(0).unwrap();
    let want = Policy::Deadline(Reservation {
        flags: ReservationFlags {
            reset_on_fork: true,
            ..ReservationFlags::default()
        },
        ..Reservation::new(Duration::from_ms(1), Duration::from_ms(10), Duration::from_ms(10))
    });
    assert_eq!(back, want);
    eprintln!(
        "deadline_set_read_back_and_restore: tid {me}: sched_getattr -> policy {} runtime {} deadline {} period {} flags {:#x}",
        a.sched_policy, a.sched_runtime, a.sched_deadline, a.sched_period, a.sched_flags
    );

    // RESET_ON_FORK is what lets a reserved thread create threads; the child starts as SCHED_OTHER.
    let child = std::thread::spawn(|| get_attr(0).map(|a| (a.sched_policy, a.sched_flags)))
        .join()
        .expect("child thread");
    let (child_policy, _) = child.expect("child get_attr");
    assert_eq!(child_policy, SCHED_OTHER);
    eprintln!("deadline_set_read_back_and_restore: thread created from the reserved thread runs SCHED_OTHER");

    set_policy(me, OTHER, false).expect("restore SCHED_OTHER");
    let a = get_attr(me).unwrap();
    // sched_runtime is not checked: since Linux 6.12 it reports a fair task's slice.
    assert_eq!((a.sched_policy, a.sched_flags), (SCHED_OTHER, 0));
    assert_eq!(get_policy(me).unwrap(), OTHER);
    eprintln!(
        "deadline_set_read_back_and_restore: restored SCHED_OTHER (fair slice reported as sched_runtime {} ns)",
        a.sched_runtime
    );
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn over_admission_is_refused_with_admission() {
    let _g = serialize();
    require_deadline();
    let threads: Vec<Parked> = (0..3).map(|_| Parked::new()).collect();
    let big = dl(
        Duration::from_us(9500),
        Duration::from_ms(10),
        Duration::from_ms(10),
    );
    let mut admitted = 0;
    let mut refusals = Vec::new();
    for t in &threads {
        match set_policy(t.tid, big, true) {
            Ok(()) => admitted += 1,
            Err(e) => {
                assert_eq!(e.errno(), Some(libc::EBUSY), "{e}");
                refusals.push(KernelError::from(e));
            }
        }
    }
    eprintln!(
        "over_admission_is_refused_with_admission: 3 × 0.95 CPU on {} CPUs: {admitted} admitted, {} refused",
        get_affinity(0).map(|c| c.len()).unwrap_or(0),
        refusals.len()
    );
    for r in &refusals {
        eprintln!("over_admission_is_refused_with_admission:   {r}");
    }
    // 3 × 0.95 exceeds any cap on a machine with fewer than 3 CPUs' worth of DL bandwidth
    // (95 % of 2 CPUs here, less the fair servers' reserve).
    assert!(!refusals.is_empty(), "no refusal: {admitted} admitted");
    assert!(refusals.iter().all(|r| matches!(r, KernelError::Admission(_))));
    for t in &threads {
        t.demote().expect("restore SCHED_OTHER");
        assert_eq!(get_attr(t.tid).unwrap().sched_policy, SCHED_OTHER);
    }
    eprintln!("over_admission_is_refused_with_admission: all helper threads restored to SCHED_OTHER");
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn invalid_parameters_are_invalid() {
    let _g = serialize();
    require_deadline();
    let _restore = RestoreSelf;
    let cases = [
        (
            "runtime > deadline",
            dl(Duration::from_ms(2), Duration::from_ms(1), Duration::from_ms(10)),
        ),
        (
            "deadline > period",
            dl(Duration::from_ms(1), Duration::from_ms(20), Duration::from_ms(10)),
        ),
        (
            "runtime < 1024 ns",
            dl(Duration(500), Duration::from_ms(1), Duration::from_ms(1)),
        ),
    ];
    for (what, p) in cases {
        let e = set_policy(0, p, true).expect_err(what);
        let k = KernelError::from(e);
        assert!(matches!(k, KernelError::Invalid(_)), "{what}: {k:?}");
        eprintln!("invalid_parameters_are_invalid: {what}: {k}");
    }
    assert_eq!(get_attr(0).unwrap().sched_policy, SCHED_OTHER);
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn fifo_round_trip_and_missing_thread() {
    let _g = serialize();
    require_deadline();
    let t = Parked::new();
    set_policy(t.tid, Policy::Fifo { priority: 10 }, true).unwrap();
    assert_eq!(get_policy(t.tid).unwrap(), Policy::Fifo { priority: 10 });
    assert!(get_attr(t.tid).unwrap().reset_on_fork());
    set_policy(t.tid, Policy::Other { nice: 5 }, false).unwrap();
    assert_eq!(get_policy(t.tid).unwrap(), Policy::Other { nice: 5 });
    set_policy(t.tid, Policy::Idle, false).unwrap();
    assert_eq!(get_policy(t.tid).unwrap(), Policy::Idle);
    eprintln!(
        "fifo_round_trip_and_missing_thread: FIFO 10, OTHER nice 5 and IDLE read back on tid {}",
        t.tid
    );

    // Above any pid_max: the kernel cannot have such a thread.
    let ghost: Tid = 0x7fff_fff0;
    let e = get_attr(ghost).unwrap_err();
    assert_eq!(KernelError::from(e), KernelError::NoSuchThread(ghost));
    let e = set_policy(ghost, OTHER, false).unwrap_err();
    assert_eq!(KernelError::from(e), KernelError::NoSuchThread(ghost));
    assert!(matches!(get_attr(u32::MAX), Err(LinuxError::InvalidInput(_))));
    eprintln!("fifo_round_trip_and_missing_thread: tid {ghost} -> NoSuchThread");
}

#[test]
fn affinity_round_trip() {
    let _g = serialize();
    let t = Parked::new();
    let all = get_affinity(t.tid).unwrap();
    assert!(!all.is_empty());
    set_affinity(t.tid, &all[..1]).unwrap();
    assert_eq!(get_affinity(t.tid).unwrap(), all[..1].to_vec());
    set_affinity(t.tid, &all).unwrap();
    assert_eq!(get_affinity(t.tid).unwrap(), all);
    assert!(matches!(
        set_affinity(t.tid, &[]),
        Err(LinuxError::InvalidInput(_))
    ));
    assert!(matches!(
        set_affinity(t.tid, &[sched::MAX_CPUS]),
        Err(LinuxError::InvalidInput(_))
    ));
    eprintln!(
        "affinity_round_trip: tid {} affinity {all:?} -> {:?} -> {all:?}",
        t.tid,
        &all[..1]
    );
}

/// Demoting a sleeping SCHED_DEADLINE thread from another thread must give its bandwidth back to
/// admission control (`dl_bw->total_bw`); see `sched::shrink_reservation` for the kernel behaviour
/// this guards against.
#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn demoting_a_sleeping_thread_does_not_leak_bandwidth() {
    let _g = serialize();
    let test = "demoting_a_sleeping_thread_does_not_leak_bandwidth";
    require_deadline();
    require(Need::SchedDebug);
    // A margin for reservations of earlier tests still on their way out (a thread demoted
    // without shrinking first is released at its 0-lag time, within its period).
    std::thread::sleep(std::time::Duration::from_millis(50));
    let before = pacer_linux::cpuset::read_dl_bandwidth()
        .unwrap_or_else(|e| panic!("{test}: cannot read dl_bw->total_bw from debugfs: {e}"));
    let total = |s: &[pacer_linux::cpuset::DlBandwidth]| pacer_linux::cpuset::total_bw_of(s, 0).unwrap();
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("spawn sleep");
    let tid = child.id();
    let p = dl(Duration::from_ms(1), Duration::from_ms(10), Duration::from_ms(10));
    set_policy(tid, p, true).expect("reserve the sleeping child");
    let during = pacer_linux::cpuset::read_dl_bandwidth().unwrap();
    // Past the 0-lag time: the inactive timer has fired, the case where the kernel leaked.
    std::thread::sleep(std::time::Duration::from_millis(300));
    set_policy(tid, OTHER, false).expect("demote from this thread");
    std::thread::sleep(std::time::Duration::from_millis(100));
    let after = pacer_linux::cpuset::read_dl_bandwidth().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    eprintln!(
        "{test}: total_bw before {}, reserved {}, after demotion {}",
        total(&before),
        total(&during),
        total(&after)
    );
    assert!(total(&during) > total(&before), "the reservation was accounted");
    assert_eq!(
        total(&after),
        total(&before),
        "bandwidth returned after demoting a sleeping thread"
    );
}

/// A thread leaving SCHED_DEADLINE itself, even after sleeping past its 0-lag time, gives its
/// bandwidth back, at the latest at its 0-lag time (within one period; the kernel's inactive timer
/// is armed for a running thread): `control::preflight`'s probe relies on it to skip the parking
/// step that would throttle it (see there). Checked against `dl_bw->total_bw`, with the probe.
#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn a_thread_leaving_deadline_itself_returns_its_bandwidth() {
    let _g = serialize();
    let test = "a_thread_leaving_deadline_itself_returns_its_bandwidth";
    require_deadline();
    require(Need::SchedDebug);
    std::thread::sleep(std::time::Duration::from_millis(50));
    let total = move || {
        let s = pacer_linux::cpuset::read_dl_bandwidth()
            .unwrap_or_else(|e| panic!("{test}: cannot read dl_bw->total_bw from debugfs: {e}"));
        pacer_linux::cpuset::total_bw_of(&s, 0).unwrap()
    };
    let before = total();
    let (during, left) = std::thread::spawn(move || {
        let p = dl(Duration::from_ms(1), Duration::from_ms(10), Duration::from_ms(10));
        set_policy(0, p, true).expect("reserve this thread");
        let during = total();
        // Past the 0-lag time, the case where a demotion by another thread leaked.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let other = pacer_linux::sched::SchedAttr::from_policy(&OTHER, false);
        let started = std::time::Instant::now();
        pacer_linux::sched::set_attr(0, &other).expect("leave SCHED_DEADLINE");
        (during, started.elapsed())
    })
    .join()
    .unwrap();
    let t = std::time::Instant::now();
    for _ in 0..5 {
        pacer_linux::control::preflight(false).expect("preflight");
    }
    let probes = t.elapsed();
    // The probes' 100 ms period: the latest 0-lag time of the last one.
    std::thread::sleep(std::time::Duration::from_millis(150));
    let after = total();
    eprintln!(
        "{test}: total_bw before {before}, reserved {during}, after leaving {after}; \
         left in {left:?}, 5 probes in {probes:?}"
    );
    assert!(during > before, "the reservation was accounted");
    assert_eq!(
        after, before,
        "bandwidth returned by threads that left SCHED_DEADLINE themselves"
    );
    assert!(
        probes < std::time::Duration::from_secs(2),
        "a probe was throttled: {probes:?}"
    );
}
