//! Handing freed memory back to the system. The C library's allocator keeps the pages of
//! freed heap chunks that are not at the top of its heap, so after thousands of sessions
//! came and went the node's resident memory stayed near its peak (measured: ~740 MB kept
//! after 5,500 sessions were reaped, `cargo run --release -p benches --bin sessions`).
//! `malloc_trim` returns every wholly free page; the media loop calls it after a reap, at
//! most once per [`RELEASE_INTERVAL`](super::media_loop).

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
