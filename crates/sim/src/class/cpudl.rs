//! Per-CPU key heaps for CPU selection, push and pull, after `kernel/sched/cpudeadline.c`
//! (cpudl, Juri Lelli): the kernel keeps, per root domain, a max-heap of the deadlines running on
//! each CPU (`elements[]` with the `cpu_to_idx` back-pointers, `cpudl_set()`/`cpudl_clear()`
//! in O(log M)) and a mask of the CPUs running no deadline task (`free_cpus`), so that
//! `cpudl_find()` answers "where may this waking or preempted task go?" without looking at every
//! CPU.
//!
//! The engine (`crate::engine`) asks that question on every wake-up (`select_cpu`), push and pull;
//! answered by scanning all CPUs, with 48 CPUs and 192 tasks under global EDF the scans were about
//! 60 % of the run time. [`CpuHeap`] is the same structure over the engine's [`Key`] (all classes,
//! so one heap serves deadline, rt and fair; a free CPU has the key [`Key::Idle`], the largest),
//! and [`RootHeaps`] keeps one pair per root domain, as the kernel keeps `rd->cpudl` (a domain of
//! at most [`SCAN_MAX_CPUS`] CPUs is scanned instead, which is cheaper there):
//!
//! - [`CpuDl`] (= `CpuHeap<Max>`), keyed by the running thread's key: [`CpuHeap::best`] is the CPU
//!   whose running thread is least urgent (an idle CPU if there is one), [`CpuDl::find`] is
//!   `cpudl_find()`, [`CpuHeap::find_free`] is the `free_cpus` lookup.
//! - [`CpuQueued`] (= `CpuHeap<Min>`), keyed by each CPU's most urgent *queued* thread (`Idle` when
//!   nothing is queued): [`CpuQueued::find_pull`] finds the queued thread `pull()` takes, visiting
//!   the CPUs most urgent first and stopping as soon as no further CPU can hold a better one (the
//!   kernel's `pull_dl_task()` instead walks the overload mask, skipping run queues whose
//!   `earliest_dl.next` is not earlier; this heap orders that walk).
//!
//! Differences from the kernel, and why:
//! - Every CPU stays in the heap, an idle one with the key `Idle` (the kernel removes a CPU with no
//!   deadline task from the heap and keeps it only in `free_cpus`). Since `Idle` is the largest key,
//!   the heap top is then an idle CPU whenever there is one, and ties among idle CPUs follow the
//!   same rule as every other tie. The free set is kept too, for affinity-restricted look-ups.
//! - The heap order is total: (key, CPU index), equal keys ordered by the lower CPU index. The top
//!   is therefore unique and deterministic, which the engine needs (its results must not depend on
//!   the history of updates), and it makes the answers equal to the engine's scans (see
//!   [`CpuDl::find`]).
//! - Restricted affinities. The kernel's `cpudl_find()` looks only at `free_cpus` ∩ affinity and
//!   then at the heap top; if neither gives a CPU it reports failure and `find_later_rq()` returns
//!   -1 (the task stays where it is), and a task pinned to one CPU is not looked up at all
//!   (`nr_cpus_allowed == 1`). The kernel accepts that approximation; the engine's results must
//!   not change, so [`CpuDl::find`] does the same two checks and then falls back to a linear scan
//!   of the keys: its answer is always the exact best one.

use std::marker::PhantomData;

use super::Key;

/// Orientation of a [`CpuHeap`]: which of two keys is nearer the top.
pub(crate) trait Order {
    /// `a` goes strictly before `b` (regardless of CPU indices).
    fn better(a: Key, b: Key) -> bool;
    /// `k` as an integer that is larger the nearer the top `k` goes: `better(a, b)` iff
    /// `rank(a) > rank(b)`. At most 66 bits.
    fn rank(k: Key) -> u128;
}

/// `k` as an integer in the order of [`Key`] (class, then the class's key): 66 bits.
fn key_rank(k: Key) -> u128 {
    match k {
        Key::Deadline(d) => d as u128,
        Key::Rt(p) => 1 << 64 | p as u128,
        Key::Fair(v) => 2 << 64 | v as u128,
        Key::Idle => 3 << 64,
    }
}

/// A heap entry: the key's rank in bits 32.., and the CPU as `u32::MAX − cpu` in bits 0..32, so
/// that of two CPUs with equal keys the lower index has the larger entry. Entries are distinct and
/// the heap compares them as plain integers, without looking anything up.
fn entry<O: Order>(k: Key, cpu: u32) -> u128 {
    O::rank(k) << 32 | (u32::MAX - cpu) as u128
}

/// The CPU of a heap entry.
fn cpu_of(e: u128) -> usize {
    (u32::MAX - e as u32) as usize
}

/// Largest key on top: the least urgent running thread, or an idle CPU (cpudl's max-heap).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Max {}

/// Smallest key on top: the most urgent (queued) thread.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Min {}

impl Order for Max {
    fn better(a: Key, b: Key) -> bool {
        a > b
    }
    fn rank(k: Key) -> u128 {
        key_rank(k)
    }
}

impl Order for Min {
    fn better(a: Key, b: Key) -> bool {
        a < b
    }
    fn rank(k: Key) -> u128 {
        key_rank(Key::Idle) - key_rank(k)
    }
}

/// Keys of the running threads: `select_cpu` and `push`.
pub(crate) type CpuDl = CpuHeap<Max>;
/// Keys of the most urgent queued thread of each CPU: `pull`.
pub(crate) type CpuQueued = CpuHeap<Min>;

/// A key per CPU (`0..M`) in an indexed binary heap, plus the set of free CPUs (key `Idle`).
///
/// Order: CPU `a` goes before CPU `b` when `O::better(key[a], key[b])`, or the keys are equal and
/// `a < b`. This is a total order, so the top ([`CpuHeap::best`]) is unique.
///
/// Costs: [`set`](CpuHeap::set) O(log M); [`best`](CpuHeap::best),
/// [`is_free`](CpuHeap::is_free) O(1); [`find_free`](CpuHeap::find_free) O(M / 64 + free CPUs
/// tested).
#[derive(Debug, Clone)]
pub(crate) struct CpuHeap<O: Order> {
    /// Key of each CPU.
    key: Vec<Key>,
    /// The heap of [`entry`]s (key and CPU): every entry is larger than its children `2i + 1`,
    /// `2i + 2`.
    heap: Vec<u128>,
    /// `pos[cpu]`: where `cpu` is in `heap` (cpudl's `cpu_to_idx`).
    pos: Vec<u32>,
    /// Bit `cpu` set iff `key[cpu] == Key::Idle` (cpudl's `free_cpus`).
    free: Vec<u64>,
    _order: PhantomData<O>,
}

/// The best allowed CPU of `0..n` (keys `key(c)`), with the tie-break of the engine's scans:
/// `prefer` if it is allowed and its key equals the best allowed key, else the lowest allowed
/// index with that key. Linear: one `allowed` call per CPU.
fn scan<O: Order>(
    n: usize,
    key: impl Fn(usize) -> Key,
    allowed: impl Fn(usize) -> bool,
    prefer: usize,
) -> Option<usize> {
    let mut best: Option<(Key, usize)> = None;
    if prefer < n && allowed(prefer) {
        best = Some((key(prefer), prefer));
    }
    for c in 0..n {
        if c == prefer || !allowed(c) {
            continue;
        }
        let k = key(c);
        if best.is_none_or(|(bk, _)| O::better(k, bk)) {
            best = Some((k, c));
        }
    }
    best.map(|(_, c)| c)
}

/// Moves `v[i]` up to its place; `placed(x, j)` is told every element `x` stored at index `j`.
fn sift_up<T: Copy>(
    v: &mut [T],
    mut i: usize,
    before: impl Fn(T, T) -> bool,
    mut placed: impl FnMut(T, usize),
) {
    let x = v[i];
    while i > 0 {
        let p = (i - 1) / 2;
        if !before(x, v[p]) {
            break;
        }
        v[i] = v[p];
        placed(v[i], i);
        i = p;
    }
    v[i] = x;
    placed(x, i);
}

/// Moves `v[i]` down to its place; `placed` as in [`sift_up`].
fn sift_down<T: Copy>(
    v: &mut [T],
    mut i: usize,
    before: impl Fn(T, T) -> bool,
    mut placed: impl FnMut(T, usize),
) {
    let x = v[i];
    let n = v.len();
    loop {
        let l = 2 * i + 1;
        if l >= n {
            break;
        }
        let r = l + 1;
        let c = if r < n && before(v[r], v[l]) { r } else { l };
        if !before(v[c], x) {
            break;
        }
        v[i] = v[c];
        placed(v[i], i);
        i = c;
    }
    v[i] = x;
    placed(x, i);
}

impl<O: Order> CpuHeap<O> {
    /// `m` CPUs, all free (key `Idle`).
    ///
    /// # Panics
    /// If `m == 0` (the engine rejects platforms without CPUs) or `m` does not fit in a `u32`.
    pub(crate) fn new(m: usize) -> Self {
        assert!(m > 0, "CpuHeap needs at least one CPU");
        let n = u32::try_from(m).expect("CPU count fits in u32");
        let mut free = vec![u64::MAX; m.div_ceil(64)];
        if !m.is_multiple_of(64) {
            *free.last_mut().expect("m > 0") = (1u64 << (m % 64)) - 1;
        }
        // All keys equal: ascending CPU order is a valid heap (a parent's index, hence CPU, is
        // smaller than its children's).
        CpuHeap {
            key: vec![Key::Idle; m],
            heap: (0..n).map(|c| entry::<O>(Key::Idle, c)).collect(),
            pos: (0..n).collect(),
            free,
            _order: PhantomData,
        }
    }

    /// All keys, indexed by CPU.
    #[cfg(test)]
    fn keys(&self) -> &[Key] {
        &self.key
    }

    /// Whether `cpu`'s key is `Idle` (for [`CpuDl`]: nothing runs there; for [`CpuQueued`]: nothing
    /// is queued there).
    pub(crate) fn is_free(&self, cpu: usize) -> bool {
        self.free[cpu / 64] >> (cpu % 64) & 1 == 1
    }

    /// Sets `cpu`'s key (`cpudl_set()`, and `cpudl_clear()` when `key` is `Idle`). O(log M).
    pub(crate) fn set(&mut self, cpu: usize, key: Key) {
        let old = std::mem::replace(&mut self.key[cpu], key);
        if old == key {
            return;
        }
        let bit = 1u64 << (cpu % 64);
        if key == Key::Idle {
            self.free[cpu / 64] |= bit;
        } else {
            self.free[cpu / 64] &= !bit;
        }
        let Self { heap, pos, .. } = self;
        let i = pos[cpu] as usize;
        let e = entry::<O>(key, cpu as u32);
        let up = e > heap[i];
        heap[i] = e;
        let before = |a: u128, b: u128| a > b;
        let placed = |x: u128, j: usize| pos[cpu_of(x)] = j as u32;
        if up {
            sift_up(heap, i, before, placed);
        } else {
            sift_down(heap, i, before, placed);
        }
    }

    /// The CPU at the top: the best key, the lowest CPU index among equal best keys. O(1).
    pub(crate) fn best(&self) -> usize {
        cpu_of(self.heap[0])
    }

    /// A free CPU (key `Idle`) with `allowed(cpu)`: `prefer` if it qualifies, else the lowest
    /// qualifying index; `None` if there is none. `prefer >= M` means no preference.
    ///
    /// This is the order of the engine's `select_cpu` for fair threads: `prev` first, then
    /// `0..M` ascending. Cost: O(M / 64) plus one `allowed` call per free CPU tested.
    pub(crate) fn find_free(&self, allowed: impl Fn(usize) -> bool, prefer: usize) -> Option<usize> {
        if prefer < self.key.len() && self.is_free(prefer) && allowed(prefer) {
            return Some(prefer);
        }
        for (w, &word) in self.free.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let cpu = w * 64 + bits.trailing_zeros() as usize;
                if allowed(cpu) {
                    return Some(cpu);
                }
                bits &= bits - 1;
            }
        }
        None
    }

    /// The CPUs in heap order (best first, ties by lower index), visiting only as many heap nodes
    /// as are taken plus their children: O(k log k) for the first k. `frontier` is scratch space
    /// (cleared here) so that repeated walks do not allocate.
    pub(crate) fn ordered<'a>(&'a self, frontier: &'a mut Vec<u32>) -> Ordered<'a, O> {
        frontier.clear();
        frontier.push(0);
        Ordered { heap: self, frontier }
    }

    /// [`scan`] over this heap's keys.
    fn scan(&self, allowed: impl Fn(usize) -> bool, prefer: usize) -> Option<usize> {
        scan::<O>(self.key.len(), |c| self.key[c], allowed, prefer)
    }

    /// Checks the heap property, the back-pointers and the free set.
    #[cfg(test)]
    fn check(&self) {
        let m = self.key.len();
        assert_eq!(self.heap.len(), m);
        assert_eq!(self.pos.len(), m);
        for (i, &e) in self.heap.iter().enumerate() {
            let c = cpu_of(e);
            assert_eq!(self.pos[c] as usize, i, "pos of cpu {c}");
            assert_eq!(e, entry::<O>(self.key[c], c as u32), "entry of cpu {c}");
            if i > 0 {
                assert!(self.heap[(i - 1) / 2] > e, "heap order at {i}");
            }
        }
        for c in 0..m {
            assert_eq!(self.is_free(c), self.key[c] == Key::Idle, "free bit of cpu {c}");
        }
        for c in m..self.free.len() * 64 {
            assert_eq!(self.free[c / 64] >> (c % 64) & 1, 0, "free bit {c} beyond M");
        }
    }
}

impl CpuHeap<Max> {
    /// `cpudl_find()`: the CPU a thread that may run on the CPUs with `allowed(cpu)` should go to,
    /// if any allowed CPU runs something it `beats` (or is idle).
    ///
    /// Result: among the allowed CPUs, the largest key K; ties go to `prefer` if it is allowed and
    /// has key K, else to the lowest allowed index with key K. Then `Some(cpu)` if `beats(K)`,
    /// `None` otherwise. `prefer >= M` means no preference.
    ///
    /// This is exactly what the engine's scans return (`best` replaced only by a strictly larger
    /// key, so the first CPU in scan order wins ties):
    /// - `select_cpu` (deadline/rt): scan `prev`, then `0..M` ascending without `prev`, over the
    ///   allowed CPUs whose key the waker beats → `find(allowed, beats, prev)`;
    /// - `push`: scan `0..M` ascending without `from` → `find(|c| c != from && allowed(c), beats,
    ///   from)` (`prefer` excluded by `allowed` has no effect).
    ///
    /// Requirement: `beats` is upward closed (if `beats(k)` and `k' > k`, then `beats(k')`), so
    /// that the best CPU the waker beats is the best allowed CPU, if the waker beats it at all.
    /// The engine's `beats(a, ·)` is: a deadline or rt key beats every larger key; a fair key beats
    /// only `Idle` (fair does not preempt fair on wake-up; deadline and rt keys are smaller).
    ///
    /// Cost: O(1) when the heap top is allowed (global scheduling, and whenever a CPU is idle and
    /// the thread may use it). Otherwise the free set is searched if some CPU is idle
    /// (O(M / 64 + idle CPUs tested)), and failing that the keys are scanned (O(M), the cost of
    /// today's scan) — where the kernel gives up instead (see the module documentation).
    /// Partitioned threads (a single allowed CPU) are best answered by the caller without calling
    /// this, as `find_later_rq()` does.
    pub(crate) fn find(
        &self,
        allowed: impl Fn(usize) -> bool,
        beats: impl Fn(Key) -> bool,
        prefer: usize,
    ) -> Option<usize> {
        let top = self.best();
        let kmax = self.key[top];
        let cpu = if allowed(top) {
            // `top` is the lowest index with the largest key overall, hence among the allowed.
            if prefer != top && prefer < self.key.len() && self.key[prefer] == kmax && allowed(prefer) {
                prefer
            } else {
                top
            }
        } else if kmax == Key::Idle {
            // Some CPU is idle: an allowed idle CPU has the largest possible key.
            match self.find_free(&allowed, prefer) {
                Some(c) => c,
                None => self.scan(&allowed, prefer)?,
            }
        } else {
            self.scan(&allowed, prefer)?
        };
        beats(self.key[cpu]).then_some(cpu)
    }
}

impl CpuHeap<Min> {
    /// `pull()`: the thread to take from another CPU.
    ///
    /// - `allowed(c)`: CPU `c` may be pulled from (the engine: `c != cpu` and in `cpu`'s root
    ///   domain);
    /// - `first(c)`: the most urgent thread queued on `c` that may run on the pulling CPU, as
    ///   (key, payload) — the engine's `first_allowed(c, cpu)`. Its key must be `>=` the key this
    ///   heap holds for `c` (the most urgent queued key regardless of affinity; checked in debug
    ///   builds), and it must be `None` when `c`'s key is `Idle`;
    /// - `beats(k)`: a thread with key `k` should be pulled (the engine: `beats(k, local)`); it
    ///   must be closed toward smaller keys (if `beats(k)` and `k' < k`, then `beats(k')`), which
    ///   the engine's `beats(·, local)` is.
    ///
    /// Result: among the allowed CPUs `c` with `first(c) = Some((k, t))`, the smallest `k`, ties to
    /// the lowest `c`; then `Some((c, k, t))` if `beats(k)`, else `None`. This is the engine's scan
    /// of `0..M` ascending in which a candidate is replaced only by a strictly smaller key.
    ///
    /// The CPUs are visited in heap order (smallest key first) and the walk stops at the first
    /// CPU whose heap key cannot lead to a better answer: a CPU holding (heap key, index)
    /// lexicographically after the best (key, index) found so far, one whose key `beats` rejects,
    /// or one with nothing queued. Under global scheduling `first(c)` is the heap key itself and
    /// the walk takes O(log M), with one `first` call. `frontier` is scratch space.
    pub(crate) fn find_pull<T>(
        &self,
        allowed: impl Fn(usize) -> bool,
        mut first: impl FnMut(usize) -> Option<(Key, T)>,
        beats: impl Fn(Key) -> bool,
        frontier: &mut Vec<u32>,
    ) -> Option<(usize, Key, T)> {
        let mut best: Option<(Key, usize, T)> = None;
        for c in self.ordered(frontier) {
            let k = self.key[c];
            if k == Key::Idle || !beats(k) {
                break;
            }
            // Every later CPU `c'` has (key(c'), c') after (k, c), and first(c') >= key(c').
            if best.as_ref().is_some_and(|&(bk, bc, _)| (k, c) > (bk, bc)) {
                break;
            }
            if !allowed(c) {
                continue;
            }
            if let Some((fk, t)) = first(c) {
                debug_assert!(
                    fk >= k,
                    "first({c}) = {fk:?} is more urgent than the heap key {k:?}"
                );
                if best.as_ref().is_none_or(|&(bk, bc, _)| (fk, c) < (bk, bc)) {
                    best = Some((fk, c, t));
                }
            }
        }
        best.filter(|&(k, _, _)| beats(k)).map(|(k, c, t)| (c, k, t))
    }
}

/// Iterator of [`CpuHeap::ordered`]: a best-first walk of the heap, keeping the not yet visited
/// children of visited nodes in a small heap of their own (`frontier`, holding heap indices).
pub(crate) struct Ordered<'a, O: Order> {
    heap: &'a CpuHeap<O>,
    frontier: &'a mut Vec<u32>,
}

impl<O: Order> Iterator for Ordered<'_, O> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let h = self.heap;
        let n = h.heap.len();
        // Heap index `i` goes before heap index `j` when the CPU at `i` goes before the one at `j`.
        let before = |i: u32, j: u32| h.heap[i as usize] > h.heap[j as usize];
        let f = &mut *self.frontier;
        let i = *f.first()?;
        let last = f.pop().expect("not empty");
        if !f.is_empty() {
            f[0] = last;
            sift_down(f, 0, before, |_, _| {});
        }
        for child in [2 * i + 1, 2 * i + 2] {
            if (child as usize) < n {
                f.push(child);
                let at = f.len() - 1;
                sift_up(f, at, before, |_, _| {});
            }
        }
        Some(cpu_of(h.heap[i as usize]))
    }
}

/// Root domains of at most this many CPUs are answered by scanning them (the engine's scans before
/// the heaps): for a handful of CPUs a scan costs less than keeping heaps up to date. Measured on
/// generated G-EDF sets of 4 tasks per CPU: heaps and scans break even at 8 CPUs, heaps win from
/// 10 (2 CPUs: scans ~10 % faster).
pub(crate) const SCAN_MAX_CPUS: usize = 8;

/// The look-up structures of every root domain, addressed by CPU number: the kernel keeps a cpudl
/// per root domain (`rd->cpudl`), so that a look-up never meets a CPU the task cannot reach. Root
/// domains are the connected components of the threads' affinities (`crate::engine`), so every
/// affinity lies within one domain and a thread's CPU is in the domain of all its allowed CPUs.
///
/// A domain of more than [`SCAN_MAX_CPUS`] CPUs has a [`CpuDl`] and a [`CpuQueued`] over its CPUs
/// in ascending order (local index `i` is the domain's `i`-th CPU), so that "lower index" means
/// the same locally and globally and the tie-breaks of [`CpuDl::find`], [`CpuHeap::find_free`] and
/// [`CpuQueued::find_pull`] carry over unchanged. A smaller domain is scanned, in the same order
/// and with the same tie-breaks; the answers do not depend on which is used.
///
/// Heap updates are lazy: [`RootHeaps::set_running`] and [`RootHeaps::queued_changed`] only note
/// the CPU, and the heaps take the latest keys when a look-up needs them. A context switch sets a
/// CPU's running key twice (idle, then the next thread) and changes its queue twice (the
/// preempted thread back on it, the next one off it); the heaps see each CPU once per look-up,
/// and not at all where nothing looks (partitioned threads, one-CPU domains).
#[derive(Debug, Clone)]
pub(crate) struct RootHeaps {
    /// Per CPU: its domain and its index within the domain.
    at: Vec<(u32, u32)>,
    /// Per domain: its CPUs, ascending.
    cpus: Vec<Vec<usize>>,
    /// Per domain: its heaps, `None` for a domain that is scanned.
    heaps: Vec<Option<Heaps>>,
    /// Per CPU: the key of its running thread now (the heaps may lag behind).
    running_now: Vec<Key>,
    /// CPUs whose running key the heaps have not seen, and whose queue they have not looked at
    /// since it changed; `stale` says which list holds a CPU (bit 0: running, bit 1: queued; both
    /// for good for a CPU of a scanned domain, which has no heaps to update).
    stale_running: Vec<u32>,
    stale_queued: Vec<u32>,
    stale: Vec<u8>,
    /// Scratch space of [`CpuQueued::find_pull`].
    frontier: Vec<u32>,
    /// Some domain has heaps (else there is nothing to keep up to date).
    any_heaps: bool,
}

/// The heaps of one root domain.
#[derive(Debug, Clone)]
struct Heaps {
    /// The running keys (cpudl).
    running: CpuDl,
    /// The most urgent queued key of each CPU (what `pull()` walks).
    queued: CpuQueued,
}

const STALE_RUNNING: u8 = 1;
const STALE_QUEUED: u8 = 2;

impl RootHeaps {
    /// Look-ups for the domains `domains` (each a non-empty list of CPUs, ascending; together a
    /// partition of `0..M`), every CPU idle with nothing queued.
    pub(crate) fn new(domains: &[Vec<usize>]) -> Self {
        let m = domains.iter().map(Vec::len).sum();
        let mut at = vec![(u32::MAX, u32::MAX); m];
        let mut stale = vec![0; m];
        for (d, cpus) in domains.iter().enumerate() {
            debug_assert!(cpus.windows(2).all(|w| w[0] < w[1]), "domain {d} not ascending");
            for (i, &c) in cpus.iter().enumerate() {
                at[c] = (d as u32, i as u32);
                if cpus.len() <= SCAN_MAX_CPUS {
                    stale[c] = STALE_RUNNING | STALE_QUEUED;
                }
            }
        }
        assert!(
            at.iter().all(|&(d, _)| d != u32::MAX),
            "domains must cover 0..{m}"
        );
        let heaps: Vec<Option<Heaps>> = domains
            .iter()
            .map(|c| {
                (c.len() > SCAN_MAX_CPUS).then(|| Heaps {
                    running: CpuDl::new(c.len()),
                    queued: CpuQueued::new(c.len()),
                })
            })
            .collect();
        RootHeaps {
            any_heaps: heaps.iter().any(Option::is_some),
            at,
            cpus: domains.to_vec(),
            heaps,
            running_now: vec![Key::Idle; m],
            stale_running: Vec::with_capacity(m),
            stale_queued: Vec::with_capacity(m),
            stale,
            frontier: Vec::new(),
        }
    }

    fn at(&self, cpu: usize) -> (usize, usize) {
        let (d, i) = self.at[cpu];
        (d as usize, i as usize)
    }

    /// The key of the thread running on `cpu` (`Idle` when none).
    pub(crate) fn running_key(&self, cpu: usize) -> Key {
        self.running_now[cpu]
    }

    /// `cpu` now runs a thread of key `key`, or nothing (`Idle`).
    pub(crate) fn set_running(&mut self, cpu: usize, key: Key) {
        self.running_now[cpu] = key;
        if self.any_heaps && self.stale[cpu] & STALE_RUNNING == 0 {
            self.stale[cpu] |= STALE_RUNNING;
            self.stale_running.push(cpu as u32);
        }
    }

    /// `cpu`'s run queue changed: its most urgent queued key is asked again at the next pull.
    pub(crate) fn queued_changed(&mut self, cpu: usize) {
        if self.any_heaps && self.stale[cpu] & STALE_QUEUED == 0 {
            self.stale[cpu] |= STALE_QUEUED;
            self.stale_queued.push(cpu as u32);
        }
    }

    /// The running heaps take the running keys set since the last look-up.
    fn sync_running(&mut self) {
        for c in self.stale_running.drain(..) {
            let c = c as usize;
            self.stale[c] &= !STALE_RUNNING;
            let (d, i) = self.at[c];
            if let Some(h) = &mut self.heaps[d as usize] {
                h.running.set(i as usize, self.running_now[c]);
            }
        }
    }

    /// The queued heaps take `queued_key(cpu)` of every CPU whose queue changed since the last
    /// look-up.
    fn sync_queued(&mut self, queued_key: impl Fn(usize) -> Key) {
        for c in self.stale_queued.drain(..) {
            let c = c as usize;
            self.stale[c] &= !STALE_QUEUED;
            let (d, i) = self.at[c];
            if let Some(h) = &mut self.heaps[d as usize] {
                h.queued.set(i as usize, queued_key(c));
            }
        }
    }

    /// [`CpuDl::find`] in the root domain of `cpu`, preferring `cpu`; `allowed` and the result
    /// are CPU numbers. Every CPU outside the domain counts as not allowed.
    ///
    /// The scan of a small domain is inlined into the caller (with its closures: a few CPUs
    /// cost less than a call), the heaps' look-up is not.
    #[inline]
    pub(crate) fn find(
        &mut self,
        cpu: usize,
        allowed: impl Fn(usize) -> bool,
        beats: impl Fn(Key) -> bool,
    ) -> Option<usize> {
        let (d, i) = self.at(cpu);
        if self.heaps[d].is_some() {
            return self.find_in_heaps(d, i, allowed, beats);
        }
        // The scan: `cpu` first, then ascending, a candidate replaced only by a larger key.
        let keys = &self.running_now;
        let mut best: Option<(Key, usize)> = None;
        for c in std::iter::once(cpu).chain(self.cpus[d].iter().copied().filter(|&c| c != cpu)) {
            let ck = keys[c];
            if allowed(c) && beats(ck) && best.is_none_or(|(bk, _)| ck > bk) {
                best = Some((ck, c));
            }
        }
        best.map(|(_, c)| c)
    }

    /// [`RootHeaps::find`] in domain `d`, which has heaps, preferring its `i`-th CPU.
    #[inline(never)]
    fn find_in_heaps(
        &mut self,
        d: usize,
        i: usize,
        allowed: impl Fn(usize) -> bool,
        beats: impl Fn(Key) -> bool,
    ) -> Option<usize> {
        self.sync_running();
        let cpus = &self.cpus[d];
        let h = self.heaps[d].as_ref().expect("a domain with heaps");
        h.running.find(|j| allowed(cpus[j]), beats, i).map(|j| cpus[j])
    }

    /// [`CpuHeap::find_free`] over the running keys of the root domain of `cpu`, preferring
    /// `cpu`: an idle allowed CPU.
    #[inline]
    pub(crate) fn find_free(&mut self, cpu: usize, allowed: impl Fn(usize) -> bool) -> Option<usize> {
        let (d, i) = self.at(cpu);
        if self.heaps[d].is_some() {
            return self.find_free_in_heaps(d, i, allowed);
        }
        let idle = |c: usize| self.running_now[c] == Key::Idle && allowed(c);
        std::iter::once(cpu)
            .chain(self.cpus[d].iter().copied())
            .find(|&c| idle(c))
    }

    /// [`RootHeaps::find_free`] in domain `d`, which has heaps, preferring its `i`-th CPU.
    #[inline(never)]
    fn find_free_in_heaps(&mut self, d: usize, i: usize, allowed: impl Fn(usize) -> bool) -> Option<usize> {
        self.sync_running();
        let cpus = &self.cpus[d];
        let h = self.heaps[d].as_ref().expect("a domain with heaps");
        h.running.find_free(|j| allowed(cpus[j]), i).map(|j| cpus[j])
    }

    /// [`CpuQueued::find_pull`] for `cpu`: over the other CPUs of its root domain, with
    /// `first(c)` and the result in CPU numbers, for a puller whose most urgent queued thread has
    /// the key `local()` (`Idle` when none): a thread is pulled if it preempts that
    /// ([`Key::preempts`]). `queued_key(c)` is the key of the most urgent thread queued on CPU
    /// `c` that a pull may take (`Idle` when none), asked of the CPUs whose queues changed since
    /// the last pull.
    ///
    /// The scan of a small domain finds the most urgent candidate first and calls `local` only if
    /// there is one (`preempts(·, local)` holds for every key below one it holds for, so the most
    /// urgent candidate preempts if any does).
    #[inline]
    pub(crate) fn find_pull<T>(
        &mut self,
        cpu: usize,
        queued_key: impl Fn(usize) -> Key,
        mut first: impl FnMut(usize) -> Option<(Key, T)>,
        local: impl FnOnce() -> Key,
    ) -> Option<(usize, Key, T)> {
        let (d, i) = self.at(cpu);
        if self.heaps[d].is_some() {
            return self.find_pull_in_heaps(d, i, queued_key, first, local());
        }
        // The scan: ascending, a candidate replaced only by a strictly more urgent one.
        let mut best: Option<(Key, usize, T)> = None;
        for &c in &self.cpus[d] {
            if c == cpu {
                continue;
            }
            if let Some((k, t)) = first(c) {
                if best.as_ref().is_none_or(|&(bk, _, _)| k < bk) {
                    best = Some((k, c, t));
                }
            }
        }
        let (k, c, t) = best?;
        k.preempts(local()).then_some((c, k, t))
    }

    /// [`RootHeaps::find_pull`] in domain `d`, which has heaps, for its `i`-th CPU.
    #[inline(never)]
    fn find_pull_in_heaps<T>(
        &mut self,
        d: usize,
        i: usize,
        queued_key: impl Fn(usize) -> Key,
        mut first: impl FnMut(usize) -> Option<(Key, T)>,
        local: Key,
    ) -> Option<(usize, Key, T)> {
        self.sync_queued(queued_key);
        let cpus = &self.cpus[d];
        let h = self.heaps[d].as_ref().expect("a domain with heaps");
        let beats = |k: Key| k.preempts(local);
        h.queued
            .find_pull(|j| j != i, |j| first(cpus[j]), beats, &mut self.frontier)
            .map(|(j, k, t)| (cpus[j], k, t))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The engine's `Sim::beats`.
    fn beats(a: Key, b: Key) -> bool {
        !matches!((a, b), (Key::Fair(_), Key::Fair(_))) && a < b
    }

    /// The engine's `select_cpu` loop (deadline/rt), over explicit keys.
    fn scan_select(keys: &[Key], allowed: &dyn Fn(usize) -> bool, k: Key, prev: usize) -> Option<usize> {
        let order = std::iter::once(prev).chain((0..keys.len()).filter(move |&c| c != prev));
        let mut best: Option<(Key, usize)> = None;
        for c in order {
            if !allowed(c) {
                continue;
            }
            let ck = keys[c];
            if beats(k, ck) && best.is_none_or(|(bk, _)| ck > bk) {
                best = Some((ck, c));
            }
        }
        best.map(|(_, c)| c)
    }

    /// The engine's `push` loop.
    fn scan_push(keys: &[Key], allowed: &dyn Fn(usize) -> bool, k: Key, from: usize) -> Option<usize> {
        let mut best: Option<(Key, usize)> = None;
        for (c, &ck) in keys.iter().enumerate() {
            if c == from || !allowed(c) {
                continue;
            }
            if beats(k, ck) && best.is_none_or(|(bk, _)| ck > bk) {
                best = Some((ck, c));
            }
        }
        best.map(|(_, c)| c)
    }

    /// The engine's fair `select_cpu` idle search (without the `first_allowed` fallback).
    fn scan_free(keys: &[Key], allowed: &dyn Fn(usize) -> bool, prev: usize) -> Option<usize> {
        std::iter::once(prev)
            .chain((0..keys.len()).filter(|&c| c != prev))
            .find(|&c| c < keys.len() && allowed(c) && keys[c] == Key::Idle)
    }

    /// The engine's `pull` loop; `first(c)` stands for `first_allowed(c, cpu)`.
    fn scan_pull(
        m: usize,
        allowed: &dyn Fn(usize) -> bool,
        first: &dyn Fn(usize) -> Option<Key>,
        local: Key,
    ) -> Option<(usize, Key)> {
        let mut cand: Option<(Key, usize)> = None;
        for other in 0..m {
            if !allowed(other) {
                continue;
            }
            if let Some(k) = first(other) {
                if beats(k, local) && cand.is_none_or(|(ck, _)| k < ck) {
                    cand = Some((k, other));
                }
            }
        }
        cand.map(|(k, c)| (c, k))
    }

    fn dl(d: u64) -> Key {
        Key::Deadline(d)
    }

    #[test]
    fn new_is_all_idle() {
        for m in [1, 2, 63, 64, 65, 130] {
            let h = CpuDl::new(m);
            h.check();
            assert_eq!(h.keys().len(), m);
            assert_eq!(h.best(), 0);
            assert!((0..m).all(|c| h.is_free(c) && h.keys()[c] == Key::Idle));
            assert_eq!(h.find_free(|_| true, m - 1), Some(m - 1));
            assert_eq!(h.find_free(|c| c > 0, m), (m > 1).then_some(1));
        }
    }

    #[test]
    fn max_is_latest_deadline_then_lowest_index() {
        let mut h = CpuDl::new(4);
        for (c, d) in [(0, 10), (1, 30), (2, 20), (3, 30)] {
            h.set(c, dl(d));
            h.check();
        }
        assert_eq!(h.best(), 1);
        assert!((0..4).all(|c| !h.is_free(c)));
        h.set(1, dl(5));
        assert_eq!(h.best(), 3);
        h.set(2, Key::Rt(0));
        assert_eq!(h.best(), 2);
        h.set(0, Key::Idle);
        assert_eq!(h.best(), 0);
        assert!(h.is_free(0));
        assert_eq!(h.keys(), &[Key::Idle, dl(5), Key::Rt(0), dl(30)]);
        h.check();
    }

    #[test]
    fn find_prefers_prev_on_ties_and_respects_beats() {
        let mut h = CpuDl::new(4);
        for (c, d) in [(0, 30), (1, 10), (2, 30), (3, 30)] {
            h.set(c, dl(d));
        }
        let all = |_: usize| true;
        assert_eq!(h.find(all, |k| beats(dl(20), k), 2), Some(2));
        assert_eq!(h.find(all, |k| beats(dl(20), k), 1), Some(0));
        assert_eq!(h.find(all, |k| beats(dl(30), k), 0), None);
        // Top (CPU 0) not allowed: the fallback scan, ties to `prefer` then the lowest index.
        assert_eq!(h.find(|c| c != 0, |k| beats(dl(20), k), 3), Some(3));
        assert_eq!(h.find(|c| c != 0, |k| beats(dl(20), k), 1), Some(2));
        assert_eq!(h.find(|c| c == 1, |k| beats(dl(5), k), 1), Some(1));
        assert_eq!(h.find(|_| false, |_| true, 1), None);
        // An idle CPU outside the affinity: the free set, then the scan.
        h.set(1, Key::Idle);
        assert_eq!(h.find(|c| c != 1, |k| beats(dl(20), k), 3), Some(3));
        h.set(3, Key::Idle);
        assert_eq!(h.find(|c| c != 1, |k| beats(dl(20), k), 0), Some(3));
        assert_eq!(h.find(|c| c != 1, |k| beats(Key::Fair(0), k), 0), Some(3));
        assert_eq!(h.find(|c| c == 0, |k| beats(Key::Fair(0), k), 0), None);
    }

    #[test]
    fn ordered_walks_in_heap_order() {
        let mut h = CpuQueued::new(6);
        for (c, k) in [
            (0, dl(9)),
            (1, dl(3)),
            (2, Key::Idle),
            (3, dl(3)),
            (4, Key::Rt(1)),
            (5, dl(1)),
        ] {
            h.set(c, k);
        }
        let mut f = Vec::new();
        assert_eq!(h.ordered(&mut f).collect::<Vec<_>>(), [5, 1, 3, 0, 4, 2]);
        assert_eq!(h.best(), 5);
        assert_eq!(h.ordered(&mut f).take(2).collect::<Vec<_>>(), [5, 1]);
    }

    #[test]
    fn find_pull_skips_threads_not_allowed_here() {
        let mut h = CpuQueued::new(4);
        // CPU 1's most urgent queued thread (deadline 1) may not run on the puller; its next is 7.
        for (c, k) in [(0, Key::Idle), (1, dl(1)), (2, dl(5)), (3, dl(5))] {
            h.set(c, k);
        }
        let first = |c: usize| match c {
            1 => Some((dl(7), 'a')),
            2 => Some((dl(5), 'b')),
            3 => Some((dl(5), 'c')),
            _ => None,
        };
        let mut f = Vec::new();
        let pull = |allowed: &dyn Fn(usize) -> bool, local: Key, f: &mut Vec<u32>| {
            h.find_pull(allowed, first, |k| beats(k, local), f)
        };
        assert_eq!(pull(&|c| c != 0, Key::Idle, &mut f), Some((2, dl(5), 'b')));
        assert_eq!(pull(&|c| c != 2, Key::Idle, &mut f), Some((3, dl(5), 'c')));
        assert_eq!(pull(&|c| c == 1, Key::Idle, &mut f), Some((1, dl(7), 'a')));
        assert_eq!(pull(&|c| c == 1, dl(7), &mut f), None);
        assert_eq!(pull(&|_| true, dl(5), &mut f), None);
        assert_eq!(pull(&|_| false, Key::Idle, &mut f), None);
    }

    #[test]
    fn root_heaps_answer_in_cpu_numbers_within_a_domain() {
        // Domains {0, 2, 3} (scanned, or with `pad` more CPUs, heaps) and {1, 4}: local indices
        // differ from CPU numbers. The padding CPUs run the most urgent key and queue nothing,
        // so that no answer changes.
        for pad in [0, SCAN_MAX_CPUS] {
            let m = 5 + pad;
            let big: Vec<usize> = [0, 2, 3].into_iter().chain(5..m).collect();
            let mut h = RootHeaps::new(&[big, vec![1, 4]]);
            assert_eq!(h.heaps[0].is_some(), pad > 0);
            for c in 5..m {
                h.set_running(c, dl(0));
            }
            for (c, d) in [(0, 10), (1, 50), (2, 30), (3, 20), (4, 40)] {
                h.set_running(c, dl(d));
            }
            assert_eq!(h.running_key(2), dl(30));
            let all = |_: usize| true;
            // The latest deadline of CPU 0's domain is CPU 2's (CPU 1's is in the other one).
            assert_eq!(h.find(0, all, |k| beats(dl(25), k)), Some(2));
            assert_eq!(h.find(0, |c| c != 2, |k| beats(dl(15), k)), Some(3));
            assert_eq!(h.find(4, all, |k| beats(dl(45), k)), Some(1));
            assert_eq!(h.find(4, all, |k| beats(dl(55), k)), None);
            assert_eq!(h.find_free(0, all), None);
            // Set twice before a look-up: the heaps see the last key.
            h.set_running(3, dl(99));
            h.set_running(3, Key::Idle);
            h.set_running(4, Key::Idle);
            assert_eq!(h.running_key(3), Key::Idle);
            assert_eq!(h.find_free(0, all), Some(3));
            assert_eq!(h.find_free(1, all), Some(4));
            assert_eq!(h.find_free(4, |c| c != 4), None);
            assert_eq!(h.find(2, all, |k| beats(dl(99), k)), Some(3));
            // Pull: CPU 1 holds the most urgent queued thread overall, but only CPU 4 may take it.
            let mut queued = vec![Key::Idle; m];
            queued[1..4].copy_from_slice(&[dl(1), dl(5), dl(7)]);
            for c in 0..m {
                h.queued_changed(c);
            }
            let pull = |h: &mut RootHeaps, q: &[Key], cpu: usize, local: Key| {
                h.find_pull(
                    cpu,
                    |c| q[c],
                    |c| (q[c] != Key::Idle).then_some((q[c], c)),
                    || local,
                )
            };
            assert_eq!(pull(&mut h, &queued, 0, Key::Idle), Some((2, dl(5), 2)));
            assert_eq!(pull(&mut h, &queued, 3, Key::Idle), Some((2, dl(5), 2)));
            assert_eq!(pull(&mut h, &queued, 2, Key::Idle), Some((3, dl(7), 3)));
            assert_eq!(pull(&mut h, &queued, 2, dl(7)), None);
            assert_eq!(pull(&mut h, &queued, 4, Key::Idle), Some((1, dl(1), 1)));
            assert_eq!(pull(&mut h, &queued, 1, Key::Idle), None);
            // A queue that changed is asked again.
            queued[3] = dl(2);
            queued[2] = dl(3);
            h.queued_changed(3);
            h.queued_changed(2);
            assert_eq!(pull(&mut h, &queued, 0, Key::Idle), Some((3, dl(2), 3)));
        }
        // A domain of one CPU has nothing to pull.
        let mut one = RootHeaps::new(&[vec![0], vec![1]]);
        one.queued_changed(1);
        assert_eq!(
            one.find_pull(0, |_| dl(1), |c| Some((dl(1), c)), || Key::Idle),
            None
        );
    }

    /// Keys from a small set, so that ties are frequent.
    fn key() -> impl Strategy<Value = Key> {
        prop_oneof![
            (0u64..6).prop_map(Key::Deadline),
            (0u8..3).prop_map(Key::Rt),
            (0u64..3).prop_map(Key::Fair),
            Just(Key::Idle),
        ]
    }

    /// Keys over their whole ranges.
    fn any_key() -> impl Strategy<Value = Key> {
        prop_oneof![
            any::<u64>().prop_map(Key::Deadline),
            any::<u8>().prop_map(Key::Rt),
            any::<u64>().prop_map(Key::Fair),
            Just(Key::Idle),
            Just(Key::Deadline(u64::MAX)),
            Just(Key::Fair(0)),
        ]
    }

    #[derive(Debug, Clone)]
    enum Op {
        Set(usize, Key),
        /// Waker key, random bits, affinity shape (see [`mask`]), prefer.
        Query(Key, u64, u8, usize),
    }

    /// An affinity mask over `m` CPUs: all, about a half, about a quarter, or a single CPU.
    fn mask(m: usize, bits: u64, shape: u8) -> u64 {
        match shape {
            0 => u64::MAX,
            1 => bits,
            2 => bits & bits.rotate_left(7),
            _ => 1 << (bits % m as u64),
        }
    }

    #[derive(Debug, Clone)]
    enum RhOp {
        /// CPU, key, and whether it is the queued key (else the running one).
        Set(usize, Key, bool),
        /// Waker key, random bits, affinity shape (see [`mask`]), CPU (prev, from, puller),
        /// the puller's local key.
        Query(Key, u64, u8, usize, Key),
    }

    fn ops() -> impl Strategy<Value = (usize, Vec<Op>)> {
        (1usize..=64).prop_flat_map(|m| {
            let op = prop_oneof![
                3 => (0..m, key()).prop_map(|(c, k)| Op::Set(c, k)),
                2 => (key(), any::<u64>(), 0u8..4, 0..m + 1)
                    .prop_map(|(k, bits, shape, p)| Op::Query(k, bits, shape, p)),
            ];
            (Just(m), prop::collection::vec(op, 0..200))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn ranks_and_entries_follow_the_key_order(
            a in any_key(), b in any_key(), ca in 0u32..u32::MAX, cb in 0u32..u32::MAX,
        ) {
            prop_assert_eq!(Max::rank(a).cmp(&Max::rank(b)), a.cmp(&b));
            prop_assert_eq!(Min::rank(a).cmp(&Min::rank(b)), b.cmp(&a));
            prop_assert!(Max::rank(a) >> 66 == 0 && Min::rank(a) >> 66 == 0);
            // Entries: the better key first, then the lower CPU.
            let max = (a, std::cmp::Reverse(ca)).cmp(&(b, std::cmp::Reverse(cb)));
            prop_assert_eq!(entry::<Max>(a, ca).cmp(&entry::<Max>(b, cb)), max);
            let min = (b, cb).cmp(&(a, ca));
            prop_assert_eq!(entry::<Min>(a, ca).cmp(&entry::<Min>(b, cb)), min);
            prop_assert_eq!(cpu_of(entry::<Max>(a, ca)), ca as usize);
            prop_assert_eq!(cpu_of(entry::<Min>(b, cb)), cb as usize);
        }

        #[test]
        fn cpudl_matches_engine_scans((m, ops) in ops()) {
            let mut h = CpuDl::new(m);
            let mut keys = vec![Key::Idle; m];
            for op in ops {
                match op {
                    Op::Set(c, k) => {
                        h.set(c, k);
                        keys[c] = k;
                        h.check();
                    }
                    Op::Query(k, bits, shape, prefer) => {
                        let mask = mask(m, bits, shape);
                        let allowed = |c: usize| mask >> c & 1 == 1;
                        prop_assert_eq!(h.keys(), &keys[..]);
                        let top = (0..m).max_by_key(|&c| (keys[c], std::cmp::Reverse(c))).unwrap();
                        prop_assert_eq!(h.best(), top);
                        // `prefer == m`: no preference, the plain ascending scan.
                        let expect = if prefer < m {
                            scan_select(&keys, &allowed, k, prefer)
                        } else {
                            scan_push(&keys, &allowed, k, m)
                        };
                        prop_assert_eq!(h.find(allowed, |ck| beats(k, ck), prefer), expect, "select_cpu");
                        let from = prefer.min(m - 1);
                        prop_assert_eq!(
                            h.find(|c| c != from && allowed(c), |ck| beats(k, ck), from),
                            scan_push(&keys, &allowed, k, from),
                            "push"
                        );
                        prop_assert_eq!(h.find_free(allowed, prefer), scan_free(&keys, &allowed, prefer), "free");
                    }
                }
            }
        }

        #[test]
        fn root_heaps_match_engine_scans(
            (m, labels, ops) in (1usize..=40).prop_flat_map(|m| {
                let labels = prop_oneof![
                    Just(vec![0usize; m]),
                    prop::collection::vec(0usize..2, m),
                    prop::collection::vec(0usize..4, m),
                ];
                let op = prop_oneof![
                    3 => (0..m, key(), any::<bool>()).prop_map(|(c, k, q)| RhOp::Set(c, k, q)),
                    2 => (key(), any::<u64>(), 0u8..4, 0..m, key())
                        .prop_map(|(k, bits, shape, c, local)| RhOp::Query(k, bits, shape, c, local)),
                ];
                (Just(m), labels, prop::collection::vec(op, 0..300))
            }),
            extra in prop::collection::vec((any::<bool>(), 0u64..4), 40),
        ) {
            let domains: Vec<Vec<usize>> = (0..4)
                .map(|l| (0..m).filter(|&c| labels[c] == l).collect::<Vec<_>>())
                .filter(|d| !d.is_empty())
                .collect();
            let mut h = RootHeaps::new(&domains);
            let (mut running, mut queued) = (vec![Key::Idle; m], vec![Key::Idle; m]);
            for op in ops {
                match op {
                    RhOp::Set(c, k, false) => {
                        h.set_running(c, k);
                        running[c] = k;
                    }
                    RhOp::Set(c, k, true) => {
                        h.queued_changed(c);
                        queued[c] = k;
                    }
                    RhOp::Query(k, bits, shape, cpu, local) => {
                        let dom = |c: usize| labels[c] == labels[cpu];
                        let mask = mask(m, bits, shape);
                        let allowed = |c: usize| dom(c) && mask >> c & 1 == 1;
                        prop_assert_eq!(h.running_key(cpu), running[cpu]);
                        prop_assert_eq!(
                            h.find(cpu, allowed, |ck| beats(k, ck)),
                            scan_select(&running, &allowed, k, cpu),
                            "select"
                        );
                        prop_assert_eq!(
                            h.find(cpu, |c| c != cpu && allowed(c), |ck| beats(k, ck)),
                            scan_push(&running, &allowed, k, cpu),
                            "push"
                        );
                        prop_assert_eq!(h.find_free(cpu, allowed), scan_free(&running, &allowed, cpu), "free");
                        // What CPU c offers the puller: as in `find_pull_matches_engine_scan`.
                        let first = |c: usize| -> Option<Key> {
                            match (queued[c], extra[c]) {
                                (Key::Idle, _) | (_, (true, 0)) => None,
                                (Key::Deadline(d), (true, e)) => Some(Key::Deadline(d + e)),
                                (Key::Rt(p), (true, e)) => Some(Key::Rt(p + e as u8)),
                                (Key::Fair(v), (true, e)) => Some(Key::Fair(v + e)),
                                (k, (false, _)) => Some(k),
                            }
                        };
                        let got = h.find_pull(cpu, |c| queued[c], |c| first(c).map(|k| (k, c)), || local);
                        let others = |c: usize| c != cpu && dom(c);
                        prop_assert_eq!(
                            got.map(|(c, k, t)| { assert_eq!(c, t); (c, k) }),
                            scan_pull(m, &others, &first, local),
                            "pull"
                        );
                    }
                }
            }
        }

        #[test]
        fn find_pull_matches_engine_scan(
            (m, ops) in ops(),
            extra in prop::collection::vec((any::<bool>(), 0u64..4), 64),
        ) {
            // The heap key of each CPU is its most urgent queued key; the thread the puller may
            // take from CPU c is either that one or, when `extra[c].0`, a less urgent one (its
            // most urgent queued thread is not allowed on the puller), or none at all.
            let mut h = CpuQueued::new(m);
            let mut keys = vec![Key::Idle; m];
            let mut frontier = Vec::new();
            for op in ops {
                match op {
                    Op::Set(c, k) => {
                        h.set(c, k);
                        keys[c] = k;
                        h.check();
                    }
                    Op::Query(local, bits, shape, cpu) => {
                        let mask = mask(m, bits, shape);
                        let allowed = |c: usize| c != cpu && mask >> c & 1 == 1;
                        let first = |c: usize| -> Option<Key> {
                            let k = keys[c];
                            match (k, extra[c]) {
                                (Key::Idle, _) | (_, (true, 0)) => None,
                                (Key::Deadline(d), (true, e)) => Some(Key::Deadline(d + e)),
                                (Key::Rt(p), (true, e)) => Some(Key::Rt(p + e as u8)),
                                (Key::Fair(v), (true, e)) => Some(Key::Fair(v + e)),
                                (k, (false, _)) => Some(k),
                            }
                        };
                        let got = h.find_pull(allowed, |c| first(c).map(|k| (k, c)), |k| beats(k, local), &mut frontier);
                        prop_assert_eq!(got.map(|(c, k, t)| { assert_eq!(c, t); (c, k) }), scan_pull(m, &allowed, &first, local));
                        let mut walk: Vec<usize> = h.ordered(&mut frontier).collect();
                        let mut sorted: Vec<usize> = (0..m).collect();
                        sorted.sort_by_key(|&c| (keys[c], c));
                        prop_assert_eq!(&walk, &sorted);
                        walk.sort_unstable();
                        prop_assert_eq!(walk, (0..m).collect::<Vec<_>>());
                        let top = (0..m).min_by_key(|&c| (keys[c], c)).unwrap();
                        prop_assert_eq!(h.best(), top);
                    }
                }
            }
        }
    }
}
