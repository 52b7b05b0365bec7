//! The migration and cache-reload cost model (`pacer sim --cache-model FILE`), off by default.
//!
//! rm-vs-edf-multicore-linux.txt §5.2: "each time a job is interrupted, it may resume on a
//! different processor (due to migration); or it may resume after a long interval of time. In
//! these cases, especially when the cumulative WSS of all the tasks exceeds the level-X cache
//! size, it is likely that its data is not present in the cache and must be reloaded from the
//! next level in the memory hierarchy." §6.2 and Fig. 2 show the result: execution times grow
//! from partitioned to clustered to global EDF, with the migrations. This module is that
//! sentence as a capacity model:
//!
//! * Each CPU's private cache holds the working sets of the threads that ran on it, most recent
//!   first, up to `private_cache_bytes` (LRU by thread: a thread that switches in moves to the
//!   front with its whole working set, and whatever no longer fits at the back is evicted,
//!   partly for the entry that straddles the capacity). The shared cache does the same for the
//!   whole machine with `shared_cache_bytes`.
//! * A thread with a working set of W bytes (its largest `pacer_wss`, or a task's `wss_bytes`)
//!   that switches in on a CPU whose private cache holds R of its bytes reloads W − R: the part
//!   the shared cache still holds at the profile's migration rate, the rest at its eviction rate
//!   (both per byte, measured by `pacer calibrate` at the working set's size and order). The
//!   time is added to its switch-in overhead, which counts as its job's execution, as a reload
//!   does on hardware. A warm resume (the CPU still holds all of it) costs nothing.
//! * Writes (one access in five) make the copies in other CPUs' private caches stale, so a
//!   thread that runs on one CPU leaves none of its working set in the others'.
//!
//! The rates come from a profile measured on a machine (docs/simulator.md, "Cache model"): the
//! default profile is the development machine's, data/calibration/dev-vm.json.

use std::sync::Arc;

use pacer_workload::{CacheProfile, Event, ReloadFrom, WssOrder};
use serde::Serialize;

use crate::record::ThreadId;

/// A cache of `cap` bytes holding threads' working sets, most recently run first.
#[derive(Debug, Clone, Default)]
struct Lru {
    cap: u64,
    /// (thread, bytes of its working set still held), most recent first; the bytes sum to at
    /// most `cap`.
    held: Vec<(ThreadId, u64)>,
}

impl Lru {
    fn new(cap: u64) -> Lru {
        Lru {
            cap,
            held: Vec::new(),
        }
    }

    fn resident(&self, t: ThreadId) -> u64 {
        self.held.iter().find(|e| e.0 == t).map_or(0, |e| e.1)
    }

    /// `t` ran here and touched its `bytes`: it moves to the front, and what no longer fits is
    /// evicted from the back.
    fn touch(&mut self, t: ThreadId, bytes: u64) {
        if let Some(i) = self.held.iter().position(|e| e.0 == t) {
            self.held.remove(i);
        }
        self.held.insert(0, (t, bytes.min(self.cap)));
        let mut left = self.cap;
        let mut keep = 0;
        for e in &mut self.held {
            if left == 0 {
                break;
            }
            e.1 = e.1.min(left);
            left -= e.1;
            keep += 1;
        }
        self.held.truncate(keep);
    }

    fn remove(&mut self, t: ThreadId) {
        self.held.retain(|e| e.0 != t);
    }
}

/// What the model charged over a run (`pacer sim --json`: `run.cache`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    /// Switch-ins that reloaded part of a working set on another CPU than the thread's last.
    pub migration_reloads: u64,
    /// Switch-ins on the thread's last CPU that reloaded what others evicted meanwhile.
    pub eviction_reloads: u64,
    /// First switch-ins of threads with a working set (nothing of it cached yet).
    pub cold_loads: u64,
    /// Bytes reloaded from the shared cache, and from memory.
    pub bytes_from_shared: u64,
    pub bytes_from_memory: u64,
    /// Time charged for the reloads, ns.
    pub reload_ns: u64,
    /// Switch-ins of threads with a working set that found it all in place.
    pub warm_resumes: u64,
}

/// The model's state during a run.
#[derive(Debug, Clone)]
pub(crate) struct CacheModel {
    profile: Arc<CacheProfile>,
    private: Vec<Lru>,
    shared: Lru,
    /// Per thread spec: working-set bytes and order (0: none).
    footprint: Vec<(u64, WssOrder)>,
    /// Per thread: the CPU it last switched in on.
    last_cpu: Vec<Option<u32>>,
    stats: CacheStats,
}

/// The working set of a thread spec: its largest `pacer_wss`, with that phase's order.
pub(crate) fn footprint_of(spec: &pacer_workload::ThreadSpec) -> (u64, WssOrder) {
    spec.phases
        .iter()
        .flat_map(|p| p.events.iter())
        .filter_map(|e| match e {
            Event::WorkingSet(ws) => Some((ws.size, ws.order)),
            _ => None,
        })
        .max_by_key(|&(size, _)| size)
        .unwrap_or((0, WssOrder::Sequential))
}

impl CacheModel {
    pub(crate) fn new(
        profile: Arc<CacheProfile>,
        cpus: usize,
        specs: &[pacer_workload::ThreadSpec],
    ) -> CacheModel {
        let private = vec![Lru::new(profile.private_cache_bytes); cpus];
        let shared = Lru::new(profile.shared_cache_bytes);
        CacheModel {
            profile,
            private,
            shared,
            footprint: specs.iter().map(footprint_of).collect(),
            last_cpu: Vec::new(),
            stats: CacheStats::default(),
        }
    }

    pub(crate) fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Thread `t` of spec `spec` switches in on `cpu`: the reload time to charge, ns.
    pub(crate) fn switch_in(&mut self, t: ThreadId, spec: usize, cpu: usize) -> u64 {
        let (w, order) = self
            .footprint
            .get(spec)
            .copied()
            .unwrap_or((0, WssOrder::Sequential));
        if w == 0 {
            return 0;
        }
        let ti = t as usize;
        if self.last_cpu.len() <= ti {
            self.last_cpu.resize(ti + 1, None);
        }
        let last = self.last_cpu[ti].replace(cpu as u32);
        let missing = w - self.private[cpu].resident(t).min(w);
        let from_shared = missing.min(self.shared.resident(t));
        let from_memory = missing - from_shared;
        for (c, lru) in self.private.iter_mut().enumerate() {
            if c == cpu {
                lru.touch(t, w);
            } else {
                lru.remove(t);
            }
        }
        self.shared.touch(t, w);
        if missing == 0 {
            self.stats.warm_resumes += 1;
            return 0;
        }
        let p = &self.profile;
        let ns = from_shared as f64 * p.reload_ns_per_byte(order, w, ReloadFrom::Shared)
            + from_memory as f64 * p.reload_ns_per_byte(order, w, ReloadFrom::Memory);
        let ns = ns.round() as u64;
        let s = &mut self.stats;
        match last {
            None => s.cold_loads += 1,
            Some(c) if c as usize != cpu => s.migration_reloads += 1,
            Some(_) => s.eviction_reloads += 1,
        }
        s.bytes_from_shared += from_shared;
        s.bytes_from_memory += from_memory;
        s.reload_ns += ns;
        ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_keeps_the_most_recent_up_to_its_capacity() {
        let mut l = Lru::new(100);
        l.touch(1, 60);
        l.touch(2, 30);
        assert_eq!((l.resident(1), l.resident(2)), (60, 30));
        l.touch(3, 30); // 30 + 30 + 60 > 100: thread 1 keeps 40
        assert_eq!((l.resident(3), l.resident(2), l.resident(1)), (30, 30, 40));
        l.touch(1, 60); // back to the front, whole: thread 2 keeps 10, thread 3 30
        assert_eq!((l.resident(1), l.resident(3), l.resident(2)), (60, 30, 10));
        l.touch(4, 200); // larger than the cache: only its last 100 bytes stay
        assert_eq!((l.resident(4), l.resident(1)), (100, 0));
        assert_eq!(l.held.len(), 1);
    }
}
