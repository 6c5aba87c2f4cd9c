//! A global allocator that counts allocations per thread, so a test or benchmark can measure
//! exactly what one operation allocates while other threads (test harness, logging) run.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    // Const-initialised: touching these never allocates, which the allocator relies on.
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    static BYTES: Cell<u64> = const { Cell::new(0) };
}

/// Install with `#[global_allocator] static A: CountingAllocator = CountingAllocator;`.
#[derive(Debug)]
pub struct CountingAllocator;

/// Allocations and bytes requested by the current thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AllocCount {
    pub allocs: u64,
    pub bytes: u64,
}

impl AllocCount {
    /// The current thread's totals so far.
    pub fn now() -> Self {
        Self {
            allocs: ALLOCS.with(Cell::get),
            bytes: BYTES.with(Cell::get),
        }
    }

    /// What the current thread allocated while running `f`.
    pub fn during(f: impl FnOnce()) -> Self {
        let before = Self::now();
        f();
        let after = Self::now();
        Self {
            allocs: after.allocs - before.allocs,
            bytes: after.bytes - before.bytes,
        }
    }
}

fn record(size: usize) {
    // `try_with` because the thread-locals are gone during thread teardown.
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
    let _ = BYTES.try_with(|c| c.set(c.get() + size as u64));
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; counting
// touches only const-initialised thread-locals, which never allocate.
#[expect(
    unsafe_code,
    reason = "a global allocator is an unsafe trait; it only wraps System"
)]
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(new_size);
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}
