//! Strata's SFU: the engine, the node and the tools around them.
//!
//! - [`capture`]: packets out of pcap and pcapng files, down to the UDP payload, sorted by
//!   RFC 7983 into RTP, RTCP, STUN and DTLS.
//! - [`engine`]: the sans-IO forwarding engine: receivers, down tracks, the router, NACK,
//!   reception statistics, rewriting, RTCP.
//! - [`node`]: the networked node around the engine: SDP offer/answer, authorization.

pub mod capture;
pub mod engine;
pub mod node;

#[cfg(feature = "fuzzing")]
pub mod fuzz;
