//! Strata's RTP wire formats: zero-copy readers and allocation-free writers for what the
//! forwarding path touches. No I/O, no async.
//!
//! - [`bits`]: bit reader and writer (`f(n)`, `ns(n)`).
//! - [`dd`]: the AV1 Dependency Descriptor.

pub mod bits;
pub mod dd;

#[cfg(feature = "fuzzing")]
pub mod fuzz;
