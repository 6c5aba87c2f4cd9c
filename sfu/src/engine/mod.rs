//! The forwarding engine: sans-IO, every input carries `now` and every output is polled; nothing
//! here reads a clock or touches a socket.
//!
//! - [`nack`]: which lost packets of a published stream to NACK, and when (RFC 4585).
//! - [`receive_stats`]: reception statistics of a published stream for RTCP report blocks
//!   (RFC 3550).
//! - [`munger`]: a subscriber's output sequence numbers and timestamps, continuous across
//!   deliberate drops and simulcast switches.
//! - [`packet_ring`]: recent packets by extended sequence number, to answer NACKs.
//! - [`rtcp`]: RTCP feedback both ways, parsed into our own typed view and written into caller
//!   buffers.

pub mod munger;
pub mod nack;
pub mod packet_ring;
pub mod receive_stats;
pub mod rtcp;
