//! rt-app's `memrun` event for `pacer run`: sized buffers read or written a byte at a time, or
//! walked as a chain of pointers, following src/rt-app.c (`memread()`, `memwrite()`,
//! `memchase_run()`) and src/rt-app_parse_config.c (`init_membuf_resource_sized()`,
//! `init_memchase_resource()`, `bitreverse()`).
//!
//! * Every buffer of the workload ([`pacer_workload::Workload::mem_buffers`]) is allocated and
//!   initialised before the threads start, 64-byte aligned: read and write buffers are set to
//!   0xAA, a chase buffer holds its circular chain (a pointer every `stride` bytes over
//!   `chase_positions` positions, in bit-reversed or linear order). Nothing is allocated in the
//!   timed loop. A buffer named by a `ref` is one buffer for every thread naming it; the others
//!   belong to one thread instance (the parser keys them so), as in rt-app.
//! * `read`/`write` access `count` bytes one at a time from offset 0, wrapping at the buffer's
//!   size; `write` stores the low byte of the offset (`(char)j`). `chase` follows `count` links
//!   from where the buffer's last chase stopped (rt-app stores the final pointer back as the
//!   chain's start), so consecutive events continue around the chain.
//! * On x86-64 the three loops are written in assembly, the instructions gcc -O2 emits for
//!   rt-app's loops (checked on /work/tools/rt-app/bin/rt-app with objdump): `movzbl` + `add` +
//!   `cmp` + `jne` per byte read, `mov %al,(…)` + `add` + `cmp` + `jne` per byte written, one
//!   dependent `mov (%rax),%rax` per hop. A debug build (the tests' `pacer`) then costs what a
//!   release build and rt-app cost, and nothing can elide or merge the accesses. Elsewhere the
//!   portable loops use `read_volatile`, relaxed `AtomicU8` stores (a write buffer may be written
//!   by several threads at once: relaxed atomic byte stores are what such stores are, and no
//!   data race) and unaligned pointer loads whose result is stored back.
//! * The loops run in slices ([`BYTE_SLICE`] bytes, [`HOP_SLICE`] hops) with a look at the stop
//!   flag between them, so a long `memrun` does not hold up the end of the run; the accesses and
//!   their order are rt-app's.
//! * The buffers' total size is checked against the memory available before anything is
//!   allocated: a file asking for more (rt-app would allocate, touch and be killed) is refused.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use pacer_workload::{ChaseOrder, MemAccess, MemBufferId, MemBufferKind, Workload};

use super::sync::Blocked;
use super::RunError;

/// Bytes read or written between two looks at the stop flag (a few µs of work).
pub(crate) const BYTE_SLICE: usize = 64 << 10;
/// Chase hops between two looks at the stop flag (≤ about 1 ms where every hop misses the caches).
pub(crate) const HOP_SLICE: u64 = 4096;
/// Alignment of every buffer: a cache line.
const ALIGN: usize = 64;

/// One zone of memory from the global allocator, cache-line aligned, freed on drop.
pub(crate) struct Zone {
    pub(crate) ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: a zone is plain memory owned by whoever holds it; it is freed once, on drop.
unsafe impl Send for Zone {}

impl Zone {
    /// `bytes` (≥ 1) uninitialised bytes, or `None` when the allocator refuses.
    pub(crate) fn new(bytes: usize) -> Option<Zone> {
        let layout = Layout::from_size_align(bytes, ALIGN).ok()?;
        // SAFETY: the layout has a non-zero size (bytes ≥ 1, checked by the callers).
        let ptr = NonNull::new(unsafe { std::alloc::alloc(layout) })?;
        Some(Zone { ptr, layout })
    }

    pub(crate) fn len(&self) -> usize {
        self.layout.size()
    }
}

impl Drop for Zone {
    fn drop(&mut self) {
        // SAFETY: allocated by `Zone::new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

enum Buffer {
    Read(Zone),
    Write(Zone),
    /// The chain, and where the last chase stopped (rt-app's `chase->base`, written back).
    Chase {
        chain: Zone,
        at: AtomicPtr<u8>,
    },
}

/// The `memrun` buffers of a run, indexed by [`MemBufferId`].
pub(crate) struct MemBuffers {
    bufs: Box<[Buffer]>,
}

// SAFETY: after `MemBuffers::new` the threads only read the read buffers and the chains (nobody
// writes them again), store single bytes into the write buffers (byte stores, atomic on every
// machine Rust targets; relaxed `AtomicU8` stores in the portable loop) and load and store the
// chase positions through `AtomicPtr`. The zones never move and live until the buffers drop,
// after every thread has been joined.
unsafe impl Send for MemBuffers {}
// SAFETY: as above.
unsafe impl Sync for MemBuffers {}

/// Bytes the buffers of `w` take.
pub(crate) fn total_bytes(w: &Workload) -> u64 {
    w.mem_buffers
        .iter()
        .map(|b| b.footprint())
        .fold(0, u64::saturating_add)
}

/// `MemAvailable` of /proc/meminfo, bytes (`None` when it cannot be read).
pub(crate) fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// Why the buffers of `w` cannot be built here, if so (checked before the run).
pub(crate) fn check(w: &Workload) -> Result<(), RunError> {
    for b in &w.mem_buffers {
        if let Some(p) = b.problem() {
            return Err(RunError::MemRun(p));
        }
        if usize::try_from(b.footprint()).is_err() {
            return Err(RunError::MemRun(format!(
                "memrun buffer `{}` of {} bytes cannot be addressed on this machine",
                b.name, b.size
            )));
        }
    }
    let total = total_bytes(w);
    if let Some(avail) = available_bytes().filter(|&a| total > a) {
        return Err(RunError::MemRun(format!(
            "the memrun buffers take {total} bytes, more than the {avail} bytes this machine has \
             available (MemAvailable); share buffers with `ref` or make them smaller"
        )));
    }
    Ok(())
}

impl MemBuffers {
    /// Allocates and initialises every buffer of `w` (before any thread exists).
    pub(crate) fn new(w: &Workload) -> Result<MemBuffers, RunError> {
        let mut bufs = Vec::with_capacity(w.mem_buffers.len());
        for b in &w.mem_buffers {
            if let Some(p) = b.problem() {
                return Err(RunError::MemRun(p));
            }
            let bytes = usize::try_from(b.footprint()).unwrap_or(usize::MAX);
            let zone = Zone::new(bytes).ok_or_else(|| {
                RunError::MemRun(format!(
                    "cannot allocate {bytes} bytes for memrun buffer `{}`",
                    b.name
                ))
            })?;
            bufs.push(match b.kind {
                MemBufferKind::Read | MemBufferKind::Write => {
                    // SAFETY: the zone holds `len` writable bytes.
                    unsafe { std::ptr::write_bytes(zone.ptr.as_ptr(), 0xAA, zone.len()) };
                    if b.kind == MemBufferKind::Read {
                        Buffer::Read(zone)
                    } else {
                        Buffer::Write(zone)
                    }
                }
                MemBufferKind::Chase { stride, order } => {
                    let npos = b.chase_positions().unwrap_or(0) as usize;
                    build_chain(&zone, stride as usize, npos, order);
                    let at = AtomicPtr::new(zone.ptr.as_ptr());
                    Buffer::Chase { chain: zone, at }
                }
            });
        }
        Ok(MemBuffers {
            bufs: bufs.into_boxed_slice(),
        })
    }

    /// Bytes allocated for the buffers.
    pub(crate) fn bytes(&self) -> u64 {
        self.bufs
            .iter()
            .map(|b| match b {
                Buffer::Read(z) | Buffer::Write(z) | Buffer::Chase { chain: z, .. } => z.len() as u64,
            })
            .sum()
    }

    /// Runs a `memrun` event: `count` accesses of `access` to buffer `id`; `Err(Stopped)` when
    /// the run stops meanwhile.
    pub(crate) fn run(
        &self,
        id: MemBufferId,
        access: MemAccess,
        count: u64,
        stop: &AtomicBool,
    ) -> Result<(), Blocked> {
        let stopping = || stop.load(Ordering::Relaxed);
        match (self.bufs.get(id.0), access) {
            (Some(Buffer::Read(z)), MemAccess::Read) | (Some(Buffer::Write(z)), MemAccess::Write) => {
                let write = access == MemAccess::Write;
                let size = z.len();
                // Bytes [from, from + n), `reps` times over; then a look at the stop flag.
                let slice = |from: usize, n: usize, reps: u64| -> Result<(), Blocked> {
                    if n > 0 && reps > 0 {
                        // SAFETY: [from, from + n) lies in the zone.
                        unsafe {
                            if write {
                                write_bytes(z.ptr.as_ptr(), from, n, reps);
                            } else {
                                read_bytes(z.ptr.as_ptr().add(from), n, reps);
                            }
                        }
                    }
                    if stopping() {
                        Err(Blocked::Stopped)
                    } else {
                        Ok(())
                    }
                };
                // rt-app's order: whole passes over the buffer, then the remainder, from 0. Small
                // buffers go several passes per slice, so that the pass loop costs what rt-app's
                // costs rather than a call per pass.
                let (mut passes, rem) = (count / size as u64, (count % size as u64) as usize);
                let per_slice = (BYTE_SLICE / size).max(1) as u64;
                while passes > 0 {
                    if size <= BYTE_SLICE {
                        let reps = passes.min(per_slice);
                        slice(0, size, reps)?;
                        passes -= reps;
                    } else {
                        for from in (0..size).step_by(BYTE_SLICE) {
                            slice(from, (size - from).min(BYTE_SLICE), 1)?;
                        }
                        passes -= 1;
                    }
                }
                for from in (0..rem).step_by(BYTE_SLICE) {
                    slice(from, (rem - from).min(BYTE_SLICE), 1)?;
                }
                Ok(())
            }
            (Some(Buffer::Chase { chain, at }), MemAccess::Chase) => {
                let mut p = at.load(Ordering::Relaxed);
                let mut left = count;
                let mut result = Ok(());
                while left > 0 {
                    let n = left.min(HOP_SLICE);
                    // SAFETY: `p` is a position of the chain, whose every position holds the
                    // address of another position; nothing writes the chain any more.
                    p = unsafe { chase(p, n) };
                    left -= n;
                    if stopping() {
                        result = Err(Blocked::Stopped);
                        break;
                    }
                }
                let off = (p as usize).wrapping_sub(chain.ptr.as_ptr() as usize);
                debug_assert!(off < chain.len(), "the chase left its chain");
                at.store(p, Ordering::Relaxed);
                result
            }
            // `validate` checks every event against its buffer before the run.
            _ => Err(Blocked::Failed(RunError::Setup(
                "internal error: a memrun event names a buffer of another kind".into(),
            ))),
        }
    }
}

/// rt-app's `bitreverse()`: the low `bits` bits of `v` in reverse order.
fn bit_reverse(v: usize, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        v.reverse_bits() >> (usize::BITS - bits)
    }
}

/// Writes the chain of `npos` (a power of two ≥ 2) positions `stride` bytes apart into `zone`,
/// as `init_memchase_resource()`: random, position rev(i) links to rev(i + 1) (indices
/// bit-reversed on log2(npos) bits); sequential, position i links to i + 1; the last to the
/// first either way.
fn build_chain(zone: &Zone, stride: usize, npos: usize, order: ChaseOrder) {
    let bits = npos.trailing_zeros();
    let base = zone.ptr.as_ptr();
    let pos = |i: usize| match order {
        ChaseOrder::Random => bit_reverse(i % npos, bits),
        ChaseOrder::Sequential => i % npos,
    };
    for i in 0..npos {
        // SAFETY: positions are < npos, and npos · stride bytes are allocated, a pointer fitting
        // at each position (stride ≥ 8, checked by `MemBuffer::problem`).
        unsafe {
            let target = base.add(pos(i + 1) * stride);
            base.add(pos(i) * stride)
                .cast::<*mut u8>()
                .write_unaligned(target);
        }
    }
}

/// Reads the `n` (≥ 1) bytes from `p` one at a time, `reps` (≥ 1) times over: rt-app's
/// `(void)p[j]` on a `volatile char *`, pass after pass.
///
/// # Safety
/// `p..p + n` must be readable.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
unsafe fn read_bytes(p: *const u8, n: usize, reps: u64) {
    // SAFETY: the caller guarantees the range; one byte load per inner iteration, `end` > `p`,
    // `reps` ≥ 1.
    unsafe {
        std::arch::asm!(
            "3:",
            "mov {q}, {p}",
            "2:",
            "movzx {t:e}, byte ptr [{q}]",
            "add {q}, 1",
            "cmp {q}, {end}",
            "jne 2b",
            "dec {reps}",
            "jnz 3b",
            p = in(reg) p,
            end = in(reg) p.add(n),
            reps = inout(reg) reps => _,
            q = out(reg) _,
            t = out(reg) _,
            options(nostack, readonly),
        );
    }
}

/// Portable [`read_bytes`].
///
/// # Safety
/// `p..p + n` must be readable.
#[cfg(not(target_arch = "x86_64"))]
#[inline(never)]
unsafe fn read_bytes(p: *const u8, n: usize, reps: u64) {
    for _ in 0..reps {
        for j in 0..n {
            // SAFETY: in range (caller).
            unsafe { std::ptr::read_volatile(p.add(j)) };
        }
    }
}

/// Writes bytes `from..from + n` (n ≥ 1) of the buffer at `base` one at a time, `reps` (≥ 1)
/// times over, byte j getting `j as u8`: rt-app's `p[j] = (char)j` on a `volatile char *`.
///
/// # Safety
/// `base + from..base + from + n` must be writable, by byte stores only while shared.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
unsafe fn write_bytes(base: *mut u8, from: usize, n: usize, reps: u64) {
    // SAFETY: the caller guarantees the range; one byte store per inner iteration, `end` >
    // `from`, `reps` ≥ 1.
    unsafe {
        std::arch::asm!(
            "3:",
            "mov {j}, {from}",
            "2:",
            "mov byte ptr [{base} + {j}], {j:l}",
            "add {j}, 1",
            "cmp {j}, {end}",
            "jne 2b",
            "dec {reps}",
            "jnz 3b",
            base = in(reg) base,
            from = in(reg) from,
            end = in(reg) from + n,
            reps = inout(reg) reps => _,
            j = out(reg) _,
            options(nostack),
        );
    }
}

/// Portable [`write_bytes`].
///
/// # Safety
/// `base + from..base + from + n` must be writable, by byte stores only while shared.
#[cfg(not(target_arch = "x86_64"))]
#[inline(never)]
unsafe fn write_bytes(base: *mut u8, from: usize, n: usize, reps: u64) {
    use std::sync::atomic::AtomicU8;
    for _ in 0..reps {
        for j in from..from + n {
            // SAFETY: in range (caller); AtomicU8 has u8's layout.
            unsafe { AtomicU8::from_ptr(base.add(j)) }.store(j as u8, Ordering::Relaxed);
        }
    }
}

/// Follows `n` (≥ 1) links from `p` and returns where it stops: rt-app's `p = (char **)*p`.
///
/// # Safety
/// `p` must be a position of a chain whose every position holds a position of the chain.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
unsafe fn chase(p: *mut u8, n: u64) -> *mut u8 {
    let out: *mut u8;
    // SAFETY: the caller guarantees every load reads a chain position; `n` ≥ 1.
    unsafe {
        std::arch::asm!(
            "2:",
            "mov {p}, qword ptr [{p}]",
            "dec {n}",
            "jnz 2b",
            p = inout(reg) p => out,
            n = inout(reg) n => _,
            options(nostack, readonly),
        );
    }
    out
}

/// Portable [`chase`].
///
/// # Safety
/// `p` must be a position of a chain whose every position holds a position of the chain.
#[cfg(not(target_arch = "x86_64"))]
#[inline(never)]
unsafe fn chase(mut p: *mut u8, n: u64) -> *mut u8 {
    for _ in 0..n {
        // SAFETY: a chain position holds a pointer (caller).
        p = unsafe { p.cast::<*mut u8>().read_unaligned() };
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacer_workload::MemBuffer;

    fn workload(bufs: Vec<MemBuffer>) -> Workload {
        Workload {
            mem_buffers: bufs,
            ..Workload::default()
        }
    }

    fn buf(name: &str, size: u64, kind: MemBufferKind) -> MemBuffer {
        MemBuffer {
            name: name.into(),
            size,
            kind,
        }
    }

    // The position index of each hop of a chain, from its first position.
    fn walk(b: &MemBuffers, id: usize, stride: usize, hops: usize) -> Vec<usize> {
        let Buffer::Chase { chain: zone, .. } = &b.bufs[id] else {
            panic!("not a chain")
        };
        let base = zone.ptr.as_ptr() as usize;
        let mut p = zone.ptr.as_ptr();
        (0..hops)
            .map(|_| {
                // SAFETY: a built chain.
                p = unsafe { chase(p, 1) };
                (p as usize - base) / stride
            })
            .collect()
    }

    #[test]
    fn bit_reversal_is_rt_apps() {
        // rt-app's example: bitreverse(1, 3) = 4.
        assert_eq!(bit_reverse(1, 3), 4);
        assert_eq!(bit_reverse(6, 3), 3);
        assert_eq!(bit_reverse(1, 1), 1);
        assert_eq!(bit_reverse(0, 0), 0);
    }

    #[test]
    fn chains_are_rt_apps_and_visit_every_position() {
        let seq = MemBufferKind::Chase {
            stride: 64,
            order: ChaseOrder::Sequential,
        };
        let rnd = MemBufferKind::Chase {
            stride: 24,
            order: ChaseOrder::Random,
        };
        // 1000 / 64 = 15 positions → 8; 200 / 24 = 8 → 8.
        let w = workload(vec![buf("s", 1000, seq), buf("r", 200, rnd)]);
        let b = MemBuffers::new(&w).unwrap();
        assert_eq!(walk(&b, 0, 64, 9), [1, 2, 3, 4, 5, 6, 7, 0, 1]);
        // Bit-reversed order on 3 bits from position 0: rev(1) = 4, rev(2) = 2, rev(3) = 6, …
        assert_eq!(walk(&b, 1, 24, 8), [4, 2, 6, 1, 5, 3, 7, 0]);
    }

    #[test]
    fn events_access_the_buffers_as_rt_app() {
        let chase = MemBufferKind::Chase {
            stride: 8,
            order: ChaseOrder::Sequential,
        };
        let w = workload(vec![
            buf("r", 100, MemBufferKind::Read),
            buf("w", 300, MemBufferKind::Write),
            buf("c", 32, chase),
        ]);
        let b = MemBuffers::new(&w).unwrap();
        let stop = AtomicBool::new(false);
        b.run(MemBufferId(0), MemAccess::Read, 250, &stop).unwrap();
        // A whole pass, then 70 bytes.
        b.run(MemBufferId(1), MemAccess::Write, 370, &stop).unwrap();
        let Buffer::Write(z) = &b.bufs[1] else { panic!() };
        // SAFETY: the zone's 300 initialised bytes; no other thread.
        let bytes = unsafe { std::slice::from_raw_parts(z.ptr.as_ptr(), z.len()) };
        for (j, &v) in bytes.iter().enumerate() {
            assert_eq!(v, j as u8, "byte {j}: every byte was written at least once");
        }
        // 70 bytes only: the first 70 get their offsets, the others keep 0xAA.
        let fresh = MemBuffers::new(&w).unwrap();
        fresh.run(MemBufferId(1), MemAccess::Write, 70, &stop).unwrap();
        let Buffer::Write(z) = &fresh.bufs[1] else {
            panic!()
        };
        // SAFETY: as above.
        let bytes = unsafe { std::slice::from_raw_parts(z.ptr.as_ptr(), z.len()) };
        assert!(bytes[..70].iter().enumerate().all(|(j, &v)| v == j as u8));
        assert!(bytes[70..].iter().all(|&v| v == 0xAA));
        // A chase goes on from where the last one stopped: 4 positions, 3 hops then 2.
        let Buffer::Chase { chain: zone, at } = &b.bufs[2] else {
            panic!()
        };
        let base = zone.ptr.as_ptr() as usize;
        b.run(MemBufferId(2), MemAccess::Chase, 3, &stop).unwrap();
        assert_eq!((at.load(Ordering::Relaxed) as usize - base) / 8, 3);
        b.run(MemBufferId(2), MemAccess::Chase, 2, &stop).unwrap();
        assert_eq!((at.load(Ordering::Relaxed) as usize - base) / 8, 1);
        // 0 accesses do nothing; a kind mismatch is an internal error.
        b.run(MemBufferId(2), MemAccess::Chase, 0, &stop).unwrap();
        assert_eq!((at.load(Ordering::Relaxed) as usize - base) / 8, 1);
        assert!(matches!(
            b.run(MemBufferId(0), MemAccess::Write, 1, &stop),
            Err(Blocked::Failed(_))
        ));
    }

    #[test]
    fn a_stopping_run_ends_a_long_memrun() {
        let w = workload(vec![buf("r", 1 << 20, MemBufferKind::Read)]);
        let b = MemBuffers::new(&w).unwrap();
        let stop = AtomicBool::new(true);
        let t = std::time::Instant::now();
        // 1 TB would take minutes; stopped, it ends after one slice.
        assert!(matches!(
            b.run(MemBufferId(0), MemAccess::Read, 1 << 40, &stop),
            Err(Blocked::Stopped)
        ));
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
    }

    #[test]
    fn buffers_beyond_the_available_memory_are_refused() {
        let avail = available_bytes().expect("/proc/meminfo");
        let w = workload(vec![buf("huge", avail + 1, MemBufferKind::Read)]);
        let Err(RunError::MemRun(m)) = check(&w) else {
            panic!("more than the available memory must be refused")
        };
        assert!(m.contains("MemAvailable"), "{m}");
        assert!(check(&workload(vec![buf("small", 4096, MemBufferKind::Read)])).is_ok());
    }
}
