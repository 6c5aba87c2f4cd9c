//! Strata's RTP wire formats: zero-copy readers and allocation-free writers for what the
//! forwarding path touches. No I/O, no async.
//!
//! - [`bits`]: bit reader and writer (`f(n)`, `ns(n)`).
//! - [`dd`]: the AV1 Dependency Descriptor.
//! - [`rtp`]: the RTP packet view, the forwarding header writer and RTX payloads.
//! - [`ext`]: typed RTP header extensions and their SDP extmap URIs.
//! - [`codec`]: payload descriptors of VP8, VP9, H264 and AV1, and what a selector needs of them.

pub mod bits;
pub mod codec;
pub mod dd;
pub mod ext;
pub mod rtp;

#[cfg(feature = "fuzzing")]
pub mod fuzz;
