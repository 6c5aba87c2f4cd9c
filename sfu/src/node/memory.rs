//! Handing freed memory back to the system. The node's own heap is the `sfu` command's
//! allocator's (mimalloc, see `main.rs`), which returns freed pages itself after a short
//! delay; the C libraries it links (the SRTP and DTLS ciphers' contexts) allocate from the C
//! library's heap, which keeps the pages of freed chunks that are not at its top (measured
//! when the whole node used it: ~740 MB kept after 5,500 sessions were reaped, `cargo run
//! --release -p benches --bin sessions`). `malloc_trim` returns every wholly free page of
//! that heap; the media loop calls it after a reap, at most once per
//! [`RELEASE_INTERVAL`](super::media_loop).

/// Returns the pages of freed heap memory to the system, where the C library can.
pub fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[expect(
        unsafe_code,
        reason = "malloc_trim takes no pointers and only touches the allocator's own free lists"
    )]
    // SAFETY: malloc_trim(3) is thread-safe and has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}
