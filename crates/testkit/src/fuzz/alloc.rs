//! A counting global allocator: the memory half of the harness.
//!
//! Counts are per thread, so that tests running in parallel in one binary do not see each other's
//! allocations: each parse runs on a thread of its own (the watchdog's worker), and the peak of
//! that thread's live bytes while the parse runs is the parse's memory use. Memory freed on the
//! worker but allocated elsewhere only lowers the count, so the peak is never overstated.
//!
//! The peak is checked against the soft bound after the parse, where a failure can be shrunk. A
//! parse that asks for far more than that (gigabytes from a count in the input) must not get it:
//! it would take the machine down or abort with nothing but "memory allocation failed". So while
//! a parse is *armed*, an allocation beyond the hard cap is refused after this module has printed
//! the target, the seed and the input on standard error; the process then aborts, as Rust does on
//! any failed allocation. Nothing here allocates: the report is written with `write(2)` from
//! buffers on the stack.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The global allocator of a fuzz test binary: `System`, counted.
///
/// ```
/// #[global_allocator]
/// static ALLOC: pacer_testkit::fuzz::CountingAlloc = pacer_testkit::fuzz::CountingAlloc;
/// # fn main() {
/// // Unarmed, it passes every request to the system allocator.
/// let v = vec![7u8; 1 << 20];
/// assert_eq!(v[12345], 7);
/// # }
/// ```
pub struct CountingAlloc;

/// What the allocator prints if an armed parse goes past the hard cap. Raw parts, because the
/// allocator cannot allocate to format anything.
#[derive(Clone, Copy)]
struct Report {
    target: (*const u8, usize),
    input: (*const u8, usize),
    /// The base seed (`PACER_FUZZ_SEED`), for the command that reproduces.
    seed: u64,
    cap: usize,
}

const NO_REPORT: Report = Report {
    target: (std::ptr::null(), 0),
    input: (std::ptr::null(), 0),
    seed: 0,
    cap: 0,
};

thread_local! {
    // Const-initialised and without destructors: usable from inside the allocator at any point
    // of the thread's life, and never allocate themselves.
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
    /// Largest `LIVE` an allocation may reach (`isize::MAX`: not armed).
    static CAP: Cell<isize> = const { Cell::new(isize::MAX) };
    static REPORT: Cell<Report> = const { Cell::new(NO_REPORT) };
}

fn live() -> isize {
    LIVE.try_with(Cell::get).unwrap_or(0)
}

fn add(n: usize) {
    let _ = LIVE.try_with(|l| {
        let v = l.get().saturating_add(n as isize);
        l.set(v);
        let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
    });
}

fn sub(n: usize) {
    let _ = LIVE.try_with(|l| l.set(l.get().saturating_sub(n as isize)));
}

/// Whether `more` bytes may be allocated now; prints the report when they may not.
fn admit(more: usize) -> bool {
    let cap = CAP.try_with(Cell::get).unwrap_or(isize::MAX);
    if cap == isize::MAX || live().saturating_add(more.min(isize::MAX as usize) as isize) <= cap {
        return true;
    }
    // Print once: the abort follows, and a second refusal (from the report itself) must not loop.
    let _ = CAP.try_with(|c| c.set(isize::MAX));
    print_report(more);
    false
}

/// Arms the current thread: from now on its live bytes may not exceed `cap` (relative to now),
/// and the peak restarts from the current count. `target` and `input` are what the report
/// prints (with `seed`, the base seed); they must outlive the matching [`disarm`].
pub(super) fn arm(cap: usize, target: &'static str, input: &[u8], seed: u64) {
    let now = live();
    let _ = PEAK.try_with(|p| p.set(now));
    let _ = REPORT.try_with(|r| {
        r.set(Report {
            target: (target.as_ptr(), target.len()),
            input: (input.as_ptr(), input.len()),
            seed,
            cap,
        })
    });
    let _ = CAP.try_with(|c| c.set(now.saturating_add(cap.min(isize::MAX as usize) as isize)));
}

/// Disarms the current thread; returns the peak of live bytes above the count at [`arm`].
pub(super) fn disarm(at_arm: isize) -> usize {
    let _ = CAP.try_with(|c| c.set(isize::MAX));
    let _ = REPORT.try_with(|r| r.set(NO_REPORT));
    let peak = PEAK.try_with(Cell::get).unwrap_or(0);
    peak.saturating_sub(at_arm).max(0) as usize
}

/// The current thread's live bytes (the reference point of [`disarm`]).
pub(super) fn current() -> isize {
    live()
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the counting
// only touches thread-local cells.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !admit(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded as received.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !admit(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded as received.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as received.
        unsafe { System.dealloc(ptr, layout) };
        sub(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() && !admit(new_size - layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded as received.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            add(new_size);
            sub(layout.size());
        }
        p
    }
}

// ---- the report, without allocating ---------------------------------------------------------

fn write_all(mut b: &[u8]) {
    while !b.is_empty() {
        // SAFETY: `b` is a live buffer of `b.len()` bytes; fd 2 is standard error.
        let n = unsafe { libc::write(2, b.as_ptr().cast(), b.len()) };
        if n <= 0 {
            return;
        }
        b = &b[n as usize..];
    }
}

fn write_u64(v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut v = v;
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    write_all(&buf[i..]);
}

/// Writes `bytes` as a Rust byte-string body (`\n`, `\"`, `\xNN` for the rest of the
/// non-printable bytes), so that it can be pasted into a regression test.
pub(super) fn write_escaped(bytes: &[u8]) {
    let mut out = [0u8; 512];
    let mut n = 0;
    for &b in bytes {
        if n + 4 > out.len() {
            write_all(&out[..n]);
            n = 0;
        }
        let esc: &[u8] = match b {
            b'\n' => b"\\n",
            b'\t' => b"\\t",
            b'\r' => b"\\r",
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x20..=0x7e => {
                out[n] = b;
                n += 1;
                continue;
            }
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out[n..n + 4].copy_from_slice(&[
                    b'\\',
                    b'x',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 15)],
                ]);
                n += 4;
                continue;
            }
        };
        out[n..n + esc.len()].copy_from_slice(esc);
        n += esc.len();
    }
    write_all(&out[..n]);
}

fn write_hex(v: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [0u8; 18];
    buf[0] = b'0';
    buf[1] = b'x';
    for (i, b) in buf[2..].iter_mut().enumerate() {
        *b = HEX[((v >> (60 - 4 * i)) & 15) as usize];
    }
    write_all(&buf);
}

fn print_report(more: usize) {
    let r = REPORT.try_with(Cell::get).unwrap_or(NO_REPORT);
    // SAFETY: `arm` stored the parts of a `&'static str` and of an input that outlives the armed
    // parse (the runner keeps it alive until after `disarm`).
    let (target, input) = unsafe {
        (
            std::slice::from_raw_parts(r.target.0, r.target.1),
            std::slice::from_raw_parts(r.input.0, r.input.1),
        )
    };
    write_all(b"\nfuzz target `");
    write_all(target);
    write_all(b"`: a parse asked for ");
    write_u64(more as u64);
    write_all(b" more bytes, beyond the hard cap of ");
    write_u64(r.cap as u64);
    write_all(b" for this input (memory sized by the input's content, not by its length).\nInput (");
    write_u64(input.len() as u64);
    write_all(b" bytes):\nb\"");
    write_escaped(input);
    write_all(b"\"\nReproduce: PACER_FUZZ_SEED=");
    write_hex(r.seed);
    write_all(b" cargo test --test fuzz_parsers -- ");
    write_all(target);
    write_all(b"\nThe process aborts now (a failed allocation).\n");
}
