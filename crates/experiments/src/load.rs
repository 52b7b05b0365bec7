//! Background load for the experiments on the real kernel: CPU hogs (SCHED_OTHER threads that
//! never sleep), periodic SCHED_FIFO noise that takes a given share of a CPU at a given priority
//! (the interference that makes a SCHED_FIFO audio callback miss and that a SCHED_DEADLINE
//! reservation is immune to, issue 17), and memory hogs that stream through a buffer larger than
//! the last-level cache (RTDroid's memory-intensive background noise, rtdroid-android-
//! timeliness.txt §5: they evict the real-time threads' data and load the memory bus).
//!
//! The noise thread runs `utilisation · period` of CPU time every period, counted on its own
//! CPU clock, so a noise thread that is itself preempted still takes its share once it runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use pacer_linux::sched;
use pacer_linux::sys::{clock_ns, monotonic_ns, sleep_until_ns};
use pacer_model::Policy;
use serde::Serialize;
use thiserror::Error;

/// Why the load could not start.
#[derive(Debug, Error)]
pub enum LoadError {
    #[error("{0}")]
    Input(String),
    #[error("{what}: {why}")]
    Setup { what: String, why: String },
}

/// What to run beside the audio.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct LoadSpec {
    /// SCHED_OTHER busy threads.
    pub hogs: usize,
    /// SCHED_FIFO noise: share of one CPU in (0, 1).
    pub noise: Option<f64>,
    /// The noise's period, ns.
    pub noise_period_ns: u64,
    /// The noise's SCHED_FIFO priority.
    pub noise_priority: u8,
    /// Memory hogs: SCHED_OTHER threads copying through `mem_bytes` buffers.
    pub mem_hogs: usize,
    /// Each memory hog's buffer, bytes (default [`DEFAULT_MEM_BYTES`] when 0).
    pub mem_bytes: usize,
    /// Pin every load thread to this CPU.
    pub cpu: Option<usize>,
}

/// A memory hog's buffer: 64 MiB, twice the development VM's shared L3, so every pass misses it.
pub const DEFAULT_MEM_BYTES: usize = 64 << 20;

impl LoadSpec {
    pub fn is_empty(&self) -> bool {
        self.hogs == 0 && self.noise.is_none() && self.mem_hogs == 0
    }

    /// One line for reports: "2 hogs + SCHED_FIFO noise 50 % (10 ms, priority 51) on CPU 1".
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.hogs > 0 {
            parts.push(format!(
                "{} SCHED_OTHER hog{}",
                self.hogs,
                if self.hogs == 1 { "" } else { "s" }
            ));
        }
        if self.mem_hogs > 0 {
            let bytes = if self.mem_bytes == 0 {
                DEFAULT_MEM_BYTES
            } else {
                self.mem_bytes
            };
            parts.push(format!(
                "{} memory hog{} ({} MiB each)",
                self.mem_hogs,
                if self.mem_hogs == 1 { "" } else { "s" },
                bytes >> 20
            ));
        }
        if let Some(u) = self.noise {
            parts.push(format!(
                "SCHED_FIFO noise {:.0} % of a CPU ({} ms period, priority {})",
                u * 100.0,
                self.noise_period_ns as f64 / 1e6,
                self.noise_priority
            ));
        }
        if parts.is_empty() {
            return "none".into();
        }
        let mut s = parts.join(" + ");
        if let Some(c) = self.cpu {
            s.push_str(&format!(" on CPU {c}"));
        }
        s
    }
}

/// Starts a thread that first sets itself up (`setup` returns whether that worked and the work
/// to do), reports the outcome, then works only if it succeeded; an error here names `what`.
fn spawn_ready<F, W>(name: &str, what: &str, setup: F) -> Result<JoinHandle<()>, LoadError>
where
    F: FnOnce() -> (Result<(), String>, W) + Send + 'static,
    W: FnOnce(),
{
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            let (ready, work) = setup();
            let ok = ready.is_ok();
            let _ = tx.send(ready);
            if ok {
                work();
            }
        })
        .map_err(|e| LoadError::Setup {
            what: format!("starting {what}"),
            why: e.to_string(),
        })?;
    match rx.recv() {
        Ok(Ok(())) => Ok(h),
        Ok(Err(why)) => {
            let _ = h.join();
            Err(LoadError::Setup {
                what: what.to_string(),
                why,
            })
        }
        Err(_) => Err(LoadError::Setup {
            what: what.to_string(),
            why: "it ended at start".into(),
        }),
    }
}

/// Running load threads; they stop when this is dropped or [`Load::stop`]ped.
pub struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Load {
    /// Starts the load. The noise thread's policy is set before this returns, so a refusal (no
    /// privilege for SCHED_FIFO) is an error here rather than a quiet run without noise.
    pub fn start(spec: &LoadSpec) -> Result<Load, LoadError> {
        if let Some(u) = spec.noise {
            if !(u > 0.0 && u < 1.0) {
                return Err(LoadError::Input(format!(
                    "noise: expected a share of a CPU in (0, 1), got {u}"
                )));
            }
            if spec.noise_period_ns < 100_000 {
                return Err(LoadError::Input(format!(
                    "noise period: expected at least 100 µs, got {} ns",
                    spec.noise_period_ns
                )));
            }
            if !(1..=99).contains(&spec.noise_priority) {
                return Err(LoadError::Input(format!(
                    "noise priority: expected 1..=99, got {}",
                    spec.noise_priority
                )));
            }
        }
        let mut load = Load {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
        };
        for i in 0..spec.hogs {
            let stop = load.stop.clone();
            let cpu = spec.cpu;
            let h = spawn_ready(&format!("pacer-hog-{i}"), &format!("hog {i}"), move || {
                let tid = sched::gettid();
                let ready = match cpu {
                    Some(c) => {
                        sched::set_affinity(tid, &[c]).map_err(|e| format!("pinning it to CPU {c}: {e}"))
                    }
                    None => Ok(()),
                };
                let spin = move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..10_000 {
                            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                        }
                    }
                };
                (ready, spin)
            })?;
            load.threads.push(h);
        }
        for i in 0..spec.mem_hogs {
            let stop = load.stop.clone();
            let cpu = spec.cpu;
            let bytes = if spec.mem_bytes == 0 {
                DEFAULT_MEM_BYTES
            } else {
                spec.mem_bytes
            }
            .max(4096);
            let h = spawn_ready(
                &format!("pacer-memhog-{i}"),
                &format!("memory hog {i}"),
                move || {
                    let tid = sched::gettid();
                    let ready = match cpu {
                        Some(c) => {
                            sched::set_affinity(tid, &[c]).map_err(|e| format!("pinning it to CPU {c}: {e}"))
                        }
                        None => Ok(()),
                    };
                    let stream = move || {
                        // Two halves copied into each other: every byte is read and written once
                        // per pass, at the memory bus's pace once the buffer exceeds the caches.
                        let mut buf = vec![1u8; bytes];
                        let half = bytes / 2;
                        while !stop.load(Ordering::Relaxed) {
                            let (a, b) = buf.split_at_mut(half);
                            let n = a.len().min(b.len());
                            b[..n].copy_from_slice(&a[..n]);
                            a[0] = a[0].wrapping_add(b[n - 1]);
                            std::hint::black_box(&mut buf);
                        }
                    };
                    (ready, stream)
                },
            )?;
            load.threads.push(h);
        }
        if let Some(u) = spec.noise {
            let stop = load.stop.clone();
            let cpu = spec.cpu;
            let period = spec.noise_period_ns;
            let busy = (u * period as f64) as u64;
            let prio = spec.noise_priority;
            let h = spawn_ready("pacer-noise", "the SCHED_FIFO noise thread", move || {
                let tid = sched::gettid();
                let mut ready = Ok(());
                if let Some(c) = cpu {
                    ready = sched::set_affinity(tid, &[c]).map_err(|e| format!("pinning it to CPU {c}: {e}"));
                }
                if ready.is_ok() {
                    ready = sched::set_policy(tid, Policy::Fifo { priority: prio }, true)
                        .map_err(|e| format!("setting SCHED_FIFO priority {prio}: {e}"));
                }
                let work = move || {
                    let mut next = monotonic_ns();
                    while !stop.load(Ordering::Relaxed) {
                        let start = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
                        while clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).saturating_sub(start) < busy {
                            std::hint::spin_loop();
                        }
                        next += period;
                        let now = monotonic_ns();
                        if next < now {
                            // Preempted past its period: start the next one now, do not catch up.
                            next = now;
                        } else {
                            sleep_until_ns(next);
                        }
                    }
                };
                (ready, work)
            })?;
            load.threads.push(h);
        }
        Ok(load)
    }

    /// Stops every load thread and waits for them.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.halt();
    }
}
