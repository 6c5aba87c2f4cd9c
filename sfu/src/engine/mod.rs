//! The forwarding engine: sans-IO, every input carries `now` and every output is polled.
//!
//! - [`rtcp`]: RTCP feedback both ways, parsed into our own typed view and written into caller
//!   buffers.

pub mod rtcp;
