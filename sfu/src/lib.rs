//! Strata's SFU: the engine, the node and the tools around them.
//!
//! - [`capture`]: packets out of pcap and pcapng files, down to the UDP payload, sorted by
//!   RFC 7983 into RTP, RTCP, STUN and DTLS.

pub mod capture;

#[cfg(feature = "fuzzing")]
pub mod fuzz;
