//! The allocation guard: reports every heap allocation a component makes on its real-time path
//! (rtdroid-android-timeliness.txt §3.1: a release may only use the memory its manifest declares;
//! RTDroid's scoped memory makes any other allocation impossible, Rust cannot forbid it, so the
//! runtime watches for it instead).
//!
//! [`GuardedAlloc`] wraps the system allocator; a program that wants the guard installs it once:
//!
//! ```
//! #[global_allocator]
//! static ALLOC: pacer_runtime::guard::GuardedAlloc = pacer_runtime::guard::GuardedAlloc;
//! # fn main() {
//! // Once anything has been allocated through it, the runtime knows it is watching.
//! let v = vec![1u8];
//! assert!(pacer_runtime::guard::installed() && v.len() == 1);
//! # }
//! ```
//!
//! (the `pacer` binary does). The executor then marks each component thread's sections
//! ([`enter`]): during a release, every allocation, reallocation and free on that thread is
//! counted in the component's [`Tally`] as a violation; during the component's `init`, the bytes
//! it allocates are counted as its persistent memory. Outside a section the wrapper costs one
//! thread-local read per call. Nothing is printed from inside the allocator (printing allocates);
//! the executor reports the tallies after the run.
//!
//! Whether the wrapper is the process's allocator at all is known by [`installed`]: it is `true`
//! once any allocation went through it, so a report can say "not watched" instead of "none".

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde::Serialize;

/// The system allocator, with the guard's counting.
pub struct GuardedAlloc;

static INSTALLED: AtomicBool = AtomicBool::new(false);

/// What a section counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    /// A release: every allocator call is a violation.
    RealTime,
    /// Set-up (`init`): allocations are the component's persistent memory.
    Init,
}

thread_local! {
    // Const-initialised and without a destructor: reading it never allocates and works while
    // the thread is being torn down, which an allocator needs.
    static CURRENT: Cell<(*const Tally, bool)> = const { Cell::new((std::ptr::null(), false)) };
}

/// Counts of one component.
#[derive(Debug, Default)]
pub struct Tally {
    /// Allocations (and growing reallocations) during releases.
    rt_allocations: AtomicU64,
    rt_bytes: AtomicU64,
    /// Frees during releases (a free can take the allocator's locks too).
    rt_frees: AtomicU64,
    /// Size of the first allocation during a release (0: none), to help find it.
    rt_first_bytes: AtomicU64,
    /// Bytes allocated, less bytes freed, during `init`.
    init_bytes: AtomicU64,
    init_freed: AtomicU64,
}

/// A snapshot of a [`Tally`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TallyReport {
    pub rt_allocations: u64,
    pub rt_bytes: u64,
    pub rt_frees: u64,
    pub rt_first_bytes: u64,
    /// Heap bytes the component kept from its `init` (allocated less freed).
    pub init_bytes: u64,
}

impl Tally {
    pub fn new() -> Tally {
        Tally::default()
    }

    pub fn report(&self) -> TallyReport {
        let alloc = self.init_bytes.load(Ordering::Relaxed);
        let freed = self.init_freed.load(Ordering::Relaxed);
        TallyReport {
            rt_allocations: self.rt_allocations.load(Ordering::Relaxed),
            rt_bytes: self.rt_bytes.load(Ordering::Relaxed),
            rt_frees: self.rt_frees.load(Ordering::Relaxed),
            rt_first_bytes: self.rt_first_bytes.load(Ordering::Relaxed),
            init_bytes: alloc.saturating_sub(freed),
        }
    }

    fn allocated(&self, rt: bool, bytes: usize) {
        if rt {
            if self.rt_allocations.fetch_add(1, Ordering::Relaxed) == 0 {
                self.rt_first_bytes.store(bytes as u64, Ordering::Relaxed);
            }
            self.rt_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        } else {
            self.init_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        }
    }

    fn freed(&self, rt: bool, bytes: usize) {
        if rt {
            self.rt_frees.fetch_add(1, Ordering::Relaxed);
        } else {
            self.init_freed.fetch_add(bytes as u64, Ordering::Relaxed);
        }
    }
}

/// Whether [`GuardedAlloc`] is this process's global allocator (some allocation went through it).
pub fn installed() -> bool {
    INSTALLED.load(Ordering::Relaxed)
}

/// While this lives, the calling thread's allocator calls are counted in its tally.
pub struct Entered<'a> {
    previous: (*const Tally, bool),
    _tally: std::marker::PhantomData<&'a Tally>,
}

/// Counts the calling thread's allocations in `tally` as `section` until the returned value is
/// dropped. Sections nest; the outer one is back when the inner ends.
pub fn enter(tally: &Tally, section: Section) -> Entered<'_> {
    let previous = CURRENT.with(|c| c.replace((tally as *const Tally, section == Section::RealTime)));
    Entered {
        previous,
        _tally: std::marker::PhantomData,
    }
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.previous));
    }
}

/// The section of the calling thread, if any.
fn current() -> Option<(&'static Tally, bool)> {
    let (p, rt) = CURRENT.try_with(|c| c.get()).ok()?;
    // SAFETY: `enter` stores a pointer to a tally that outlives the `Entered` it returns, and
    // `Entered::drop` takes it out again before that borrow ends; so a non-null pointer here
    // always points to a live tally. The 'static is local to this module's use.
    unsafe { p.as_ref().map(|t| (t, rt)) }
}

fn note_installed() {
    if !INSTALLED.load(Ordering::Relaxed) {
        INSTALLED.store(true, Ordering::Relaxed);
    }
}

// SAFETY: every call is passed to `System` unchanged; the counting touches only atomics and a
// const thread-local, neither of which allocates.
unsafe impl GlobalAlloc for GuardedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_installed();
        if let Some((t, rt)) = current() {
            t.allocated(rt, layout.size());
        }
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_installed();
        if let Some((t, rt)) = current() {
            t.allocated(rt, layout.size());
        }
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if let Some((t, rt)) = current() {
            t.freed(rt, layout.size());
        }
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_installed();
        if let Some((t, rt)) = current() {
            if new_size > layout.size() {
                t.allocated(rt, new_size - layout.size());
            } else {
                t.freed(rt, layout.size() - new_size);
            }
        }
        System.realloc(ptr, layout, new_size)
    }
}
