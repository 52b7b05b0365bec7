//! The working-set phase (`pacer_wss`) on the real machine: the test program of
//! rm-vs-edf-multicore-linux.txt §5.2, an array of 64-byte elements accessed four reads to one
//! write, sequentially or in a seeded random order (the sequence itself is
//! `pacer_workload::wss`, shared with the simulator and the tests).
//!
//! * Each thread owns one buffer of its largest working set
//!   ([`pacer_workload::ThreadSpec::working_set_bytes`]), allocated, written through once
//!   (prefaulted, so no page fault lands in a job) and its line orders computed in the thread's
//!   setup, before the start gate: nothing is allocated while the thread runs. It is allocated
//!   after the thread's affinity and NUMA binding are set, so its pages are the thread's node's.
//! * A read is a volatile 8-byte load at the start of the line, summed and passed through
//!   `black_box`; a write is a volatile store of the access's number. Volatile accesses are
//!   never elided, merged or reordered among themselves by the compiler, so the loop makes every
//!   access the phase names, in its order (the 4-byte reads of the order array come on top: 1/16
//!   of the traffic).
//! * The accesses run in slices of 16 Ki accesses with a look at the stop flag between them.
//! * `pacer calibrate` (crate::cachecal) times the same loop, so the profile's warm cost per line
//!   is the cost of this code.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

use pacer_workload::wss::{drive, LineAccess, WorkingSet, WssAmount, WssOrder, LINE_BYTES};
use pacer_workload::{CacheProfile, Event, ThreadRng, ThreadSpec};

use super::memrun::Zone;
use super::sync::Blocked;
use super::RunError;

/// The profile whose warm cost per line turns a `run` amount into accesses: the one measured on
/// the development machine (`CacheProfile::measured`), parsed once, in the threads' setup.
pub(crate) fn measured_profile() -> &'static CacheProfile {
    static MEASURED: std::sync::LazyLock<CacheProfile> = std::sync::LazyLock::new(CacheProfile::measured);
    &MEASURED
}

/// Line accesses between two looks at the stop flag (tens of µs at most).
pub(crate) const SLICE: u64 = 16 << 10;

/// A thread's working set: its buffer and the line order of each (size, order, seed) its events
/// use.
pub struct WssBuffer {
    zone: Zone,
    orders: Vec<((u64, WssOrder, u64), Vec<u32>)>,
}

/// The memory a pass touches.
struct Lines {
    base: NonNull<u8>,
    sum: u64,
}

impl LineAccess for Lines {
    #[inline(always)]
    fn read(&mut self, line: u32) {
        // SAFETY: `drive` passes lines of the order, all below size / 64, and the zone holds
        // size bytes, 64-byte aligned, so the 8-byte load is in bounds and aligned.
        let v = unsafe {
            std::ptr::read_volatile(self.base.as_ptr().add(line as usize * LINE_BYTES as usize) as *const u64)
        };
        self.sum = self.sum.wrapping_add(v);
    }

    #[inline(always)]
    fn write(&mut self, line: u32, k: u64) {
        // SAFETY: as for `read`; the buffer is the thread's own, so no other thread writes it.
        unsafe {
            std::ptr::write_volatile(
                self.base.as_ptr().add(line as usize * LINE_BYTES as usize) as *mut u64,
                k,
            )
        }
    }
}

impl WssBuffer {
    /// A prefaulted buffer of `size` bytes (a multiple of 64, ≥ 64) with the orders of `sets`.
    pub fn new<'a>(size: u64, sets: impl IntoIterator<Item = &'a WorkingSet>) -> Option<WssBuffer> {
        let zone = Zone::new(usize::try_from(size).ok()?)?;
        // SAFETY: the zone holds `len` writable bytes; writing them all faults every page in.
        unsafe { std::ptr::write_bytes(zone.ptr.as_ptr(), 0, zone.len()) };
        let mut orders: Vec<((u64, WssOrder, u64), Vec<u32>)> = Vec::new();
        for ws in sets {
            let key = (ws.size, ws.order, ws.seed);
            if ws.size <= size && !orders.iter().any(|(k, _)| *k == key) {
                orders.push((key, ws.line_order()));
            }
        }
        Some(WssBuffer { zone, orders })
    }

    /// The thread's buffer, if its program has a working-set phase; an error naming the thread
    /// when it cannot be allocated.
    pub(crate) fn for_thread(spec: &ThreadSpec) -> Result<Option<WssBuffer>, RunError> {
        let size = spec.working_set_bytes();
        if size == 0 {
            return Ok(None);
        }
        // Parsed here, before the start gate, rather than in the first job.
        measured_profile();
        let sets = spec
            .phases
            .iter()
            .flat_map(|p| p.events.iter())
            .filter_map(|e| match e {
                Event::WorkingSet(ws) => Some(ws),
                _ => None,
            });
        WssBuffer::new(size, sets)
            .map(Some)
            .ok_or_else(|| RunError::BadThread {
                thread: spec.name.clone(),
                message: format!("cannot allocate its {size}-byte working set (pacer_wss)"),
            })
    }

    /// The line order of `ws`, if the buffer was built for it.
    pub fn order_of(&self, ws: &WorkingSet) -> Option<&[u32]> {
        let key = (ws.size, ws.order, ws.seed);
        self.orders.iter().find(|(k, _)| *k == key).map(|(_, o)| &o[..])
    }

    /// Accesses `first .. first + count` over `order` (from [`WssBuffer::order_of`]); returns
    /// the sum of what was read, which callers pass to `black_box`.
    #[inline(never)]
    pub fn access(&self, order: &[u32], first: u64, count: u64) -> u64 {
        let mut lines = Lines {
            base: self.zone.ptr,
            sum: 0,
        };
        drive(order, first, count, &mut lines);
        std::hint::black_box(lines.sum)
    }

    /// Writes one word in every line of the buffer (the eviction buffer of `pacer calibrate`).
    pub fn sweep(&self, value: u64) {
        let base = self.zone.ptr.as_ptr();
        for off in (0..self.zone.len()).step_by(LINE_BYTES as usize) {
            // SAFETY: off < len, 64-byte aligned within the zone.
            unsafe { std::ptr::write_volatile(base.add(off) as *mut u64, value) };
        }
    }

    /// Runs one execution of the phase `ws` in slices; `Err(Stopped)` when the run stops.
    pub(crate) fn run(
        &self,
        ws: &WorkingSet,
        rng: &mut ThreadRng,
        units: u64,
        profile: &CacheProfile,
        stop: &AtomicBool,
    ) -> Result<(), Blocked> {
        let Some(order) = self.order_of(ws) else {
            return Err(Blocked::Failed(RunError::Setup(format!(
                "internal error: no line order for a {}-byte working set",
                ws.size
            ))));
        };
        let count = match &ws.amount {
            WssAmount::Work { work } => {
                let w = work.sample_for(rng, units).ns();
                WorkingSet::accesses_for_work(w, profile.warm_line_ns(ws.order, ws.size))
            }
            _ => ws.fixed_accesses().unwrap_or(0),
        };
        let mut done = 0;
        while done < count {
            if stop.load(Ordering::Relaxed) {
                return Err(Blocked::Stopped);
            }
            let n = SLICE.min(count - done);
            self.access(order, done, n);
            done += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_passes_write_every_fifth_access_and_read_it_back() {
        let ws = WorkingSet {
            size: 512,
            order: WssOrder::Sequential,
            seed: 0,
            amount: WssAmount::Passes { passes: 2 },
        };
        let buf = WssBuffer::new(512, [&ws]).unwrap();
        let order = buf.order_of(&ws).unwrap().to_vec();
        // Eight lines, two passes: writes at accesses 4, 9, 14 (lines 4, 1, 6); access 12 reads
        // line 4 back after the write of access 4, the only read of a written line.
        assert_eq!(buf.access(&order, 0, 16), 4);
        // SAFETY: lines 0..8 of a 512-byte zone.
        let word = |line: usize| unsafe { *(buf.zone.ptr.as_ptr().add(line * 64) as *const u64) };
        let written: Vec<(usize, u64)> = (0..8).filter(|&l| word(l) != 0).map(|l| (l, word(l))).collect();
        assert_eq!(written, vec![(1, 9), (4, 4), (6, 14)]);
    }
}
