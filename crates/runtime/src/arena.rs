//! Per-release memory (rtdroid-android-timeliness.txt §3.1, "memSizes": RTDroid gives every
//! release of a real-time component a scoped memory area that is emptied when the release ends,
//! so the memory a component can use is bounded by its manifest, not by how long it has run).
//!
//! An [`Arena`] is a bump allocator over one chunk allocated, and touched page by page, before the
//! component's first release: allocating in it is a pointer increment, never a call into the
//! process's allocator, and the executor calls [`Arena::reset`] after every release. The bump
//! itself is `bumpalo`'s; what this type adds is the manifest's bound. bumpalo would take a new
//! chunk from the global allocator when its chunk is full (on the real-time path), and its chunk
//! may be larger than asked for; here every request is counted against the declared budget and
//! refused with [`ArenaFull`] beyond it, and bumpalo's own limit is set so that it never grows.

use std::cell::Cell;
use std::mem::{align_of, size_of};

use bumpalo::Bump;
use thiserror::Error;

/// A request the arena's budget cannot hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("arena full: {requested} bytes asked for with {used} of {budget} in use")]
pub struct ArenaFull {
    pub requested: usize,
    pub used: usize,
    pub budget: usize,
}

/// A bounded bump arena for one component's releases.
pub struct Arena {
    bump: Bump,
    budget: usize,
    /// Bytes handed out since the last reset, alignment padding included.
    used: Cell<usize>,
    /// The largest `used` seen at a reset: the component's real per-release need.
    peak: usize,
    /// Requests refused since the arena was made.
    refused: Cell<u64>,
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena")
            .field("budget", &self.budget)
            .field("used", &self.used.get())
            .field("peak", &self.peak)
            .field("refused", &self.refused.get())
            .finish()
    }
}

/// Largest alignment a request may ask for: bounds the padding the chunk must have room for.
const MAX_ALIGN: usize = 64;

impl Arena {
    /// An arena of `budget` bytes, allocated and touched now (so its pages are resident before
    /// the first release, and locked with the rest of the process under `mlockall`).
    pub fn new(budget: usize) -> Arena {
        // Room for the budget and for the worst alignment padding of one request, so that a
        // request within budget always fits the one chunk.
        let chunk = budget.saturating_add(MAX_ALIGN);
        let mut bump = Bump::with_capacity(chunk);
        // Touch every page so the first release does not take page faults. Should bumpalo's
        // chunk be short of `chunk`, this makes it take a big enough one, which the reset keeps.
        if let Ok(s) = bump.try_alloc_slice_fill_copy(chunk, 0u8) {
            std::hint::black_box(s);
        }
        bump.reset();
        // From here on the chunk is all there is: no request ever reaches the global allocator.
        bump.set_allocation_limit(Some(0));
        Arena {
            bump,
            budget,
            used: Cell::new(0),
            peak: 0,
            refused: Cell::new(0),
        }
    }

    /// The declared budget, bytes.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Bytes in use since the last reset.
    pub fn used(&self) -> usize {
        self.used.get()
    }

    /// The most bytes any finished release used.
    pub fn peak(&self) -> usize {
        self.peak.max(self.used.get())
    }

    /// Requests refused so far.
    pub fn refused(&self) -> u64 {
        self.refused.get()
    }

    /// Counts `bytes` at alignment `align` against the budget.
    fn charge(&self, bytes: usize, align: usize) -> Result<(), ArenaFull> {
        let used = self.used.get();
        // Charge the padding the bump will insert, so `used` is what the chunk really lost.
        let pad = (align - (used % align)) % align;
        let total = bytes.checked_add(pad).and_then(|b| b.checked_add(used));
        match total {
            Some(t) if t <= self.budget && align <= MAX_ALIGN => {
                self.used.set(t);
                Ok(())
            }
            _ => {
                self.refused.set(self.refused.get() + 1);
                Err(ArenaFull {
                    requested: bytes,
                    used,
                    budget: self.budget,
                })
            }
        }
    }

    /// `n` copies of `fill`, valid until the next [`Arena::reset`].
    pub fn alloc_slice<T: Copy>(&self, n: usize, fill: T) -> Result<&mut [T], ArenaFull> {
        let bytes = n.checked_mul(size_of::<T>()).ok_or(ArenaFull {
            requested: usize::MAX,
            used: self.used.get(),
            budget: self.budget,
        })?;
        self.charge(bytes, align_of::<T>())?;
        // Within budget, so within the chunk: bumpalo's limit of 0 new chunks cannot trigger.
        self.bump
            .try_alloc_slice_fill_copy(n, fill)
            .map_err(|_| ArenaFull {
                requested: bytes,
                used: self.used.get(),
                budget: self.budget,
            })
    }

    /// A copy of `value`, valid until the next [`Arena::reset`].
    pub fn alloc<T: Copy>(&self, value: T) -> Result<&mut T, ArenaFull> {
        Ok(&mut self.alloc_slice(1, value)?[0])
    }

    /// A copy of `bytes`, valid until the next [`Arena::reset`].
    pub fn alloc_bytes(&self, bytes: &[u8]) -> Result<&mut [u8], ArenaFull> {
        self.charge(bytes.len(), 1)?;
        self.bump.try_alloc_slice_copy(bytes).map_err(|_| ArenaFull {
            requested: bytes.len(),
            used: self.used.get(),
            budget: self.budget,
        })
    }

    /// Empties the arena: everything allocated since the last reset is gone (the borrow checker
    /// makes sure nothing still refers to it). Called by the executor after every release.
    pub fn reset(&mut self) {
        self.peak = self.peak.max(self.used.get());
        self.used.set(0);
        self.bump.reset();
    }
}
