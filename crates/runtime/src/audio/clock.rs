//! The device clocks every backend is timed by: the audio paper's Fig. 3 model for playback
//! (`pacer_workload::audio::AudioSink`) and its mirror image for capture.
//!
//! Playback: the device starts at t₀ with a buffer of k bursts primed with silence and reads
//! burst j at t₀ + (j + k)·T whatever the writer does. Burst j is the j-th one written. Written
//! after that read it is an underrun: the device played silence in its place and the burst is
//! discarded, so what a device plays (and the file backend writes) is always one burst per T.
//!
//! Capture: the device starts at t₀ and completes burst j at t₀ + (j + 1)·T into a ring of k
//! bursts, overwriting the oldest. A reader asking for its next burst j at `now` gets it if it is
//! complete and still in the ring; if the device has since overwritten it, the bursts lost are
//! counted (an overrun) and the reader continues with the oldest burst still held.

use pacer_workload::audio::{AudioSink, BurstOutcome, SinkCount};
use serde::Serialize;

/// Where one burst written to a playback device stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PlayOutcome {
    /// The burst's index since t₀ (0, 1, …).
    pub burst: u64,
    /// When the device plays (or, for an underrun, played silence instead of) this burst:
    /// t₀ + (j + k)·T.
    pub play_at_ns: u64,
    /// Judged by the Fig. 3 model: on time, late (after its soft deadline t₀ + (j + 1)·T, the
    /// fill level dropped) or an underrun (after `play_at_ns`: not played).
    pub outcome: BurstOutcome,
    /// What became of the bytes passed.
    pub delivery: Delivery,
}

/// What became of the bytes of one burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// A whole burst, handed to the device.
    Whole,
    /// Shorter than a burst: handed over padded with silence.
    Padded,
    /// Longer than a burst: not a burst of this session; silence was handed over instead.
    Refused,
    /// Too late (an underrun): the device played silence and the burst is discarded.
    Discarded,
    /// The file backend's queue was full: the burst was dropped (and is missing from the file).
    QueueFull,
}

/// The playback clock of one session.
#[derive(Debug, Clone)]
pub struct PlayClock {
    sink: AudioSink,
    t0: u64,
    written: u64,
    count: SinkCount,
    late: u64,
}

impl PlayClock {
    pub fn new(sink: AudioSink, t0: u64) -> PlayClock {
        PlayClock {
            sink,
            t0,
            written: 0,
            count: SinkCount::default(),
            late: 0,
        }
    }

    /// Judges the next burst, written at `now`.
    pub fn next(&mut self, now: u64) -> (u64, u64, BurstOutcome) {
        let j = self.written;
        self.written += 1;
        let o = self.sink.outcome(self.t0, j, now);
        match o {
            BurstOutcome::Underrun => {
                self.count.underruns += 1;
                self.count.soft_misses += 1;
            }
            BurstOutcome::Late => {
                self.count.soft_misses += 1;
                self.late += 1;
            }
            BurstOutcome::OnTime => {}
        }
        self.count.reads = self.written;
        let play_at = self.t0.saturating_add(
            (j.saturating_add(u64::from(self.sink.bursts))).saturating_mul(self.sink.period_ns),
        );
        (j, play_at, o)
    }

    /// The counts so far, as `AudioSink::count` gives them for these write times and a horizon at
    /// the last burst's read time (`reads` = bursts written).
    pub fn count(&self) -> SinkCount {
        self.count
    }

    /// Bursts written after their soft deadline but in time to be played.
    pub fn late(&self) -> u64 {
        self.late
    }

    pub fn written(&self) -> u64 {
        self.written
    }
}

/// Where one burst read from a capture device stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ReadOutcome {
    /// Burst `burst` was complete and still held; `backlog` newer bursts are complete too (the
    /// reader is that many bursts behind the device, within its buffer).
    Fresh {
        burst: u64,
        captured_at_ns: u64,
        backlog: u64,
    },
    /// The reader was later than the device's buffer: `dropped` bursts were overwritten before
    /// they were read (an overrun). `burst` is the oldest one still held, delivered now.
    Overrun {
        burst: u64,
        captured_at_ns: u64,
        dropped: u64,
    },
    /// The next burst is not complete before `available_at_ns`; the buffer was filled with
    /// silence.
    NotYet { burst: u64, available_at_ns: u64 },
    /// The caller's buffer is not one burst long: nothing was read.
    WrongSize { expected: usize, found: usize },
}

/// The capture clock of one session.
#[derive(Debug, Clone)]
pub struct CaptureClock {
    period_ns: u64,
    bursts: u64,
    t0: u64,
    next: u64,
}

impl CaptureClock {
    pub fn new(period_ns: u64, bursts: u32, t0: u64) -> CaptureClock {
        CaptureClock {
            period_ns: period_ns.max(1),
            bursts: u64::from(bursts.max(1)),
            t0,
            next: 0,
        }
    }

    /// When burst `j` is complete: t₀ + (j + 1)·T.
    pub fn available_at(&self, j: u64) -> u64 {
        self.t0
            .saturating_add(j.saturating_add(1).saturating_mul(self.period_ns))
    }

    /// Decides which burst a read at `now` gets and advances past it; `NotYet` does not advance.
    pub fn next(&mut self, now: u64) -> ReadOutcome {
        let j = self.next;
        let at = self.available_at(j);
        if now < at {
            return ReadOutcome::NotYet {
                burst: j,
                available_at_ns: at,
            };
        }
        // The newest complete burst: the largest l with t0 + (l + 1)·T ≤ now (l ≥ j here).
        let newest = (now - self.t0) / self.period_ns - 1;
        let oldest_held = (newest + 1).saturating_sub(self.bursts);
        if j < oldest_held {
            self.next = oldest_held + 1;
            ReadOutcome::Overrun {
                burst: oldest_held,
                captured_at_ns: self.available_at(oldest_held),
                dropped: oldest_held - j,
            }
        } else {
            self.next = j + 1;
            ReadOutcome::Fresh {
                burst: j,
                captured_at_ns: at,
                backlog: newest - j,
            }
        }
    }
}
