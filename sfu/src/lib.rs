//! Strata's SFU: the engine, the node and the tools around them.
//!
//! - [`capture`]: packets out of pcap and pcapng files, down to the UDP payload, sorted by
//!   RFC 7983 into RTP, RTCP, STUN and DTLS.
//! - [`engine`]: the sans-IO forwarding engine: receivers, down tracks, the router, NACK,
//!   reception statistics, rewriting, RTCP.
//! - `node`: the networked node around the engine: SDP offer/answer, ICE, DTLS, SRTP, HTTP
//!   signaling. Behind the default feature `node`: a host embedding only the engine and the
//!   capture reader builds with `default-features = false` and pulls no async runtime, HTTP or
//!   WebRTC transport crate.
//! - [`sim`]: a deterministic in-memory network around the router, for tests, the fuzz target
//!   and the benches.

pub mod capture;
#[deny(missing_docs)]
pub mod engine;
#[cfg(feature = "node")]
pub mod node;
#[deny(missing_docs)]
pub mod sim;

#[cfg(feature = "fuzzing")]
pub mod fuzz;
