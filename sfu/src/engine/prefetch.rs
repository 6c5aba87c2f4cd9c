//! Asking the CPU for a cache line ahead of its use, without waiting for it.
//!
//! With hundreds of subscribers, each one's state is out of cache by the time its next packet
//! is written. A load that misses holds up everything after it; a prefetch does not: the line
//! arrives while other work runs. Prefetching changes nothing a program can observe, only
//! when memory arrives, so it is safe for any address, valid or not.

/// Brings the cache line holding `value`'s first byte in, without waiting.
#[inline(always)]
pub(crate) fn prefetch<T: ?Sized>(value: &T) {
    prefetch_addr((value as *const T).cast());
}

/// Brings in the cache lines of the first `bytes` of `value` (at most its size).
#[inline(always)]
pub(crate) fn prefetch_lines<T>(value: &T, bytes: usize) {
    prefetch_range((value as *const T).cast(), bytes.min(size_of::<T>()));
}

/// Brings in the cache lines of `bytes` bytes from `start`.
#[inline(always)]
pub(crate) fn prefetch_range(start: *const u8, bytes: usize) {
    for offset in (0..bytes).step_by(LINE) {
        prefetch_addr(start.wrapping_add(offset));
    }
}

const LINE: usize = 64;

#[inline(always)]
fn prefetch_addr(addr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it reads nothing into the program and cannot fault,
    // whatever the address (Intel SDM, PREFETCHh).
    #[allow(unsafe_code)]
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(addr.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}
