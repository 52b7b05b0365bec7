//! `Synth::render` and `Synth::set_voices` must not allocate (real-time safety): counted with a
//! global allocator that counts the allocations of the test's own thread only.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use pacer_workload::synth::Synth;

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(|c| c.get()) {
            COUNT.with(|c| c.set(c.get() + 1));
        }
        // SAFETY: forwards the caller's layout to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above, i.e. from the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn allocations(f: impl FnOnce()) -> u64 {
    COUNT.with(|c| c.set(0));
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    COUNT.with(|c| c.get())
}

#[test]
fn rendering_and_changing_voices_do_not_allocate() {
    let mut synth = Synth::new(48_000, 64, 3).unwrap();
    let mut buf = vec![0.0f32; 2 * 64];
    // The counter works: a Vec allocates.
    assert_eq!(allocations(|| drop(std::hint::black_box(vec![1u8; 10]))), 1);
    let n = allocations(|| {
        for i in 0..3000 {
            if i % 250 == 0 {
                synth.set_voices([64, 3, 0, 40][(i / 250) % 4]);
            }
            synth.render(&mut buf);
        }
    });
    assert_eq!(n, 0);
    assert!(buf.iter().all(|x| x.is_finite()));
}
