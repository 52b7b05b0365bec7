//! Clocks, absolute sleeps, CPU burning and the SCHED_DEADLINE accounting check shared by the
//! real-kernel tests of timed threads (`boost.rs`, `dlstate.rs`, `job_controller.rs`).
#![allow(dead_code)]

use pacer_linux::audit;

pub const MS: u64 = 1_000_000;

/// `clock_gettime(id)` in ns.
pub fn clock(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec into the valid pointer.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC, ns.
pub fn now() -> u64 {
    clock(libc::CLOCK_MONOTONIC)
}

/// Sleeps until `t` (CLOCK_MONOTONIC, absolute: no drift from late wake-ups).
pub fn sleep_until(t: u64) {
    let ts = libc::timespec {
        tv_sec: (t / 1_000_000_000) as libc::time_t,
        tv_nsec: (t % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `ts` is a valid timespec; no remaining-time pointer with TIMER_ABSTIME.
    while unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    } == libc::EINTR
    {}
}

/// Busy loop until the calling thread has used `cpu_ns` more CPU time.
pub fn burn(cpu_ns: u64) {
    let end = clock(libc::CLOCK_THREAD_CPUTIME_ID) + cpu_ns;
    while clock(libc::CLOCK_THREAD_CPUTIME_ID) < end {
        std::hint::black_box(0u64);
    }
}

/// CPU 0's root domain `total_bw`, once settled, and whether it is what the SCHED_DEADLINE
/// threads of the machine hold (other sessions may reserve meanwhile: the check is that the
/// kernel's figure matches the threads, not that it equals the figure before the test).
pub fn total_bw() -> (i64, bool) {
    let (snap, _) = audit::settled(50_000_000, 10).expect("scheduler debugfs");
    let d = snap
        .domains
        .iter()
        .find(|d| d.cpus.contains(&0))
        .expect("CPU 0's root domain");
    (d.reported, d.error() == 0)
}
