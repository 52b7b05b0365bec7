//! The calibrated busy loop behind rt-app's `run` event: work is given in nanoseconds at the
//! CPU's full speed, and the executor turns it into a number of iterations of a fixed loop.
//!
//! rt-app measures "ns per loop" once at start-up (`calibrate_cpu_cycles()`, taking the minimum of
//! two methods so the result corresponds to the highest compute capacity) or takes it from the
//! file's `calibration`. pacer does the same with its own loop: it times the loop several times
//! at SCHED_FIFO 99 (when allowed) pinned to one CPU, and keeps the fastest, so that an interrupt
//! or a preemption during one measurement cannot make every later `run` too short. A job's work
//! then stretches naturally when the CPU is slower or shared, exactly what `run` is meant to
//! model. The value is kept in picoseconds per loop, because one loop lasts only tens of
//! nanoseconds and whole nanoseconds would round it by several per cent.
//!
//! rt-app's own `calibration` values time a different loop, so they cannot be given to pacer's.
//! When a file gives a numeric `global.calibration` (p ns per loop), rt-app runs
//! floor(t·1000/p) iterations of its own loop for `run t` (t in µs; `loadwait()`, one burst per
//! whole second first), so how long a `run` takes depends on how p compares with this machine:
//! a file calibrated on a slower machine runs longer here. To keep that meaning, `pacer run` then
//! runs rt-app's loop ([`rtapp_waste`], rt-app's `waste_cpu_cycles()` as gcc compiles it: four
//! libm `ldexp` calls per iteration, see there why not twelve) for rt-app's number of iterations
//! ([`rtapp_loops`]). Without a numeric calibration (`"CPU0"`, the default) `run` does its work
//! with pacer's loop and pacer's calibration, as above. `runtime` is wall-clock time either way.

use std::hint::black_box;

use pacer_model::Policy;
use serde::Serialize;

use super::sys;
use crate::sched;

/// Dependent multiply/xor-shift steps per loop. The chain is non-linear, so the compiler cannot
/// fold it, and each step waits for the previous one, so its speed does not depend on how many
/// execution units the CPU has free.
const STEPS: u32 = 16;

/// Runs `loops` iterations of the busy loop.
///
/// On x86-64 the loop is written in assembly, registers only: it then runs the same instructions
/// whatever the optimisation level, so a debug build (the tests' `pacer`) loads the CPU like a
/// release build. Compiled Rust did not: unoptimised, the loop went through the stack and function
/// calls, and its speed jumped between two levels about 2× apart from one job to the next on the
/// development VM, while the assembly loop stays within the few per cent of the hardware.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
pub fn waste(loops: u64) {
    if loops == 0 {
        return;
    }
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    // SAFETY: register-only arithmetic and a counted branch; no memory, stack or flags consumer
    // outside the block. `n` ≥ 1, so the count down ends at 0.
    unsafe {
        std::arch::asm!(
            "2:",
            ".rept {steps}",
            "mov {t}, {x}",
            "shr {t}, 29",
            "xor {x}, {t}",
            "imul {x}, {k}",
            ".endr",
            "dec {n}",
            "jnz 2b",
            x = inout(reg) x,
            k = in(reg) 0xBF58_476D_1CE4_E5B9u64,
            t = out(reg) _,
            n = inout(reg) loops => _,
            steps = const STEPS,
            options(nomem, nostack),
        );
    }
    black_box(x);
}

/// Runs `loops` iterations of the busy loop (portable version: the same chain in Rust).
#[cfg(not(target_arch = "x86_64"))]
#[inline(never)]
pub fn waste(loops: u64) {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..loops {
        for _ in 0..STEPS {
            x ^= x >> 29;
            x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        }
        x = black_box(x);
    }
    black_box(x);
}

extern "C" {
    // libm, which the standard library already links on Linux.
    fn ldexp(x: f64, exp: libc::c_int) -> f64;
}

/// The exponent of the outer `ldexp` of rt-app's loop: `(int)ldexp(0.95, (int)ldexp(0.95, 4))`
/// = `(int)ldexp(0.95, 15)` = `(int)31129.6`.
const RTAPP_EXPONENT: libc::c_int = 31129;

/// Runs `loops` iterations of rt-app's busy loop (`waste_cpu_cycles()` in src/rt-app.c), as the
/// compiled rt-app runs it.
///
/// The source makes four `ldexp(0.95, ldexp(0.95, ldexp(0.95, 4)))` per iteration, but the two
/// inner calls have exact constant results, so gcc folds them (to the `int` exponent 31129) and
/// keeps only the outer call, which overflows to infinity and sets `errno` (a side effect it may
/// not drop): four libm calls per iteration. That is what Debian's rt-app 1.0 binary does
/// (`objdump -d /usr/bin/rt-app`: `mov $0x7999,%edi; call ldexp@plt`, four times per loop) and
/// what any `-O2` build does. On x86-64 the loop is assembly that makes exactly those calls, so
/// that its speed does not depend on pacer's optimisation level (a debug build's loop overhead
/// would be a large part of the ≈ 13 ns an iteration takes here).
#[cfg(target_arch = "x86_64")]
#[inline(never)]
pub fn rtapp_waste(loops: u64) {
    if loops == 0 {
        return;
    }
    // gcc keeps `param` in memory and reloads it before every call; so does this loop.
    static PARAM: f64 = 0.95;
    // SAFETY: the block calls libm's ldexp(double, int) with the C ABI: the argument in xmm0
    // (loaded from PARAM, whose address is in r14) and edi, the stack aligned for a call as Rust
    // guarantees at the start of an asm block without `nostack`; `clobber_abi("C")` declares
    // every register the callee may change, and r13 (the count) and r14 are callee-saved, so
    // the calls preserve them. `loops` ≥ 1, so the count down ends at 0.
    unsafe {
        std::arch::asm!(
            "2:",
            ".rept 4",
            "mov rax, qword ptr [r14]",
            "mov edi, {e}",
            "movq xmm0, rax",
            "call {f}",
            ".endr",
            "dec r13",
            "jnz 2b",
            inout("r13") loops => _,
            in("r14") &PARAM,
            e = const RTAPP_EXPONENT,
            f = sym ldexp,
            clobber_abi("C"),
        );
    }
}

/// Runs `loops` iterations of rt-app's busy loop (portable version: the same four libm calls).
#[cfg(not(target_arch = "x86_64"))]
#[inline(never)]
pub fn rtapp_waste(loops: u64) {
    for _ in 0..loops {
        for _ in 0..4 {
            // SAFETY: ldexp is a libm function of two numbers.
            black_box(unsafe { ldexp(black_box(0.95), black_box(RTAPP_EXPONENT)) });
        }
    }
}

/// rt-app's iterations of its loop for `run exec_us` at `ns_per_loop` (`loadwait()`): whole
/// seconds as bursts of floor(10⁹/p), then floor(rest·1000/p).
pub fn rtapp_loops(exec_us: u64, ns_per_loop: u64) -> u64 {
    let p = ns_per_loop.max(1);
    let secs = exec_us / 1_000_000;
    let rest = exec_us % 1_000_000;
    secs.saturating_mul(1_000_000_000 / p)
        .saturating_add(rest * 1000 / p)
}

/// Speed of the busy loop on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Calibration {
    /// Picoseconds per loop at full speed.
    pub ps_per_loop: u64,
    /// Whether it was measured by this run (false: given with `--calibration`).
    pub measured: bool,
    /// Whether the measurement ran at SCHED_FIFO 99 (it falls back to the caller's policy when
    /// that is not permitted, and is then more exposed to interference).
    pub realtime: bool,
}

impl Calibration {
    /// A calibration given by the user, in nanoseconds per loop (decimals allowed).
    pub fn from_ns_per_loop(ns: f64) -> Option<Calibration> {
        let ps = (ns * 1000.0).round();
        (ns.is_finite() && (1.0..1e15).contains(&ps)).then_some(Calibration {
            ps_per_loop: ps as u64,
            measured: false,
            realtime: false,
        })
    }

    /// Nanoseconds per loop.
    pub fn ns_per_loop(&self) -> f64 {
        self.ps_per_loop as f64 / 1000.0
    }

    /// Loops that do `work_ns` of work.
    pub fn loops_for(&self, work_ns: u64) -> u64 {
        ((work_ns as u128 * 1000) / self.ps_per_loop.max(1) as u128).min(u64::MAX as u128) as u64
    }
}

/// Measurements kept; the fastest wins.
const TRIALS: u32 = 20;
/// Length of one measurement.
const TRIAL_NS: u64 = 1_000_000;

/// Measures the loop (about 25 ms) on a helper thread, at SCHED_FIFO 99 when permitted. The helper
/// sets its policy itself and puts itself back to SCHED_OTHER before it ends.
pub fn calibrate() -> Calibration {
    let worker = std::thread::spawn(|| {
        sys::set_thread_name("pacer-calib");
        let cpu = sys::current_cpu() as usize;
        // Pinning keeps a migration out of a measurement; failure only costs precision.
        let _ = sched::set_affinity(0, &[cpu]);
        let realtime = sched::set_policy(0, Policy::Fifo { priority: 99 }, true).is_ok();
        let result = measure();
        if realtime {
            let _ = sched::set_policy(0, Policy::Other { nice: 0 }, false);
        }
        (result, realtime)
    });
    let (ps_per_loop, realtime) = worker.join().unwrap_or((0, false));
    let ps_per_loop = if ps_per_loop == 0 {
        // The helper could not be run: measure here, at whatever priority this thread has.
        measure()
    } else {
        ps_per_loop
    };
    Calibration {
        ps_per_loop: ps_per_loop.max(1),
        measured: true,
        realtime: realtime && ps_per_loop > 0,
    }
}

/// Fastest of [`TRIALS`] timings of ≈ [`TRIAL_NS`] each, in ps per loop.
fn measure() -> u64 {
    // Warm up (caches, branch predictors, any frequency ramp) and size the trials.
    let mut loops = 1_000u64;
    loop {
        let t = sys::now_ns();
        waste(loops);
        let dt = sys::now_ns() - t;
        if dt >= TRIAL_NS / 4 || loops >= 1 << 40 {
            loops = ((loops as u128 * TRIAL_NS as u128) / dt.max(1) as u128).max(1) as u64;
            break;
        }
        loops *= 4;
    }
    let mut best = u64::MAX;
    for _ in 0..TRIALS {
        let t = sys::now_ns();
        waste(loops);
        let dt = sys::now_ns() - t;
        best = best.min(((dt as u128 * 1000) / loops as u128).min(u64::MAX as u128) as u64);
    }
    best.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibrated_loops_take_the_asked_time() {
        let c = calibrate();
        assert!(c.measured);
        assert!(c.ps_per_loop > 0);
        // 5 ms of work takes at least ~5 ms (the calibration is the fastest run) and, on a
        // machine that is not overloaded, not wildly more; min of a few tries against noise.
        let loops = c.loops_for(5_000_000);
        let mut best = u64::MAX;
        for _ in 0..5 {
            let t = sys::thread_cpu_ns();
            waste(loops);
            best = best.min(sys::thread_cpu_ns() - t);
        }
        assert!(
            best > 4_000_000 && best < 10_000_000,
            "5 ms of work took {best} ns of CPU"
        );
    }

    #[test]
    fn rtapp_iterations_follow_loadwait() {
        assert_eq!(rtapp_loops(1000, 100), 10_000);
        assert_eq!(rtapp_loops(999, 7), 142_714);
        // 2.5 s at 3 ns: two bursts of floor(1e9/3) and floor(500000·1000/3).
        assert_eq!(rtapp_loops(2_500_000, 3), 2 * 333_333_333 + 166_666_666);
        assert_eq!(rtapp_loops(5, 0), 5000);
    }

    #[test]
    fn rtapp_loop_takes_time_in_proportion() {
        // Not folded away: 10× the iterations take clearly longer than 1×.
        let time = |n| {
            let mut best = u64::MAX;
            for _ in 0..3 {
                let t = sys::thread_cpu_ns();
                rtapp_waste(n);
                best = best.min(sys::thread_cpu_ns() - t);
            }
            best
        };
        let one = time(20_000);
        let ten = time(200_000);
        assert!(one > 0 && ten > 5 * one, "{one} ns vs {ten} ns");
    }

    #[test]
    fn user_calibration() {
        let c = Calibration::from_ns_per_loop(12.5).unwrap();
        assert_eq!(c.ps_per_loop, 12_500);
        assert_eq!(c.loops_for(1_000_000), 80_000);
        assert!(!c.measured);
        assert_eq!(Calibration::from_ns_per_loop(0.0), None);
        assert_eq!(Calibration::from_ns_per_loop(-3.0), None);
        assert_eq!(Calibration::from_ns_per_loop(f64::NAN), None);
        assert_eq!(c.ns_per_loop(), 12.5);
    }
}
