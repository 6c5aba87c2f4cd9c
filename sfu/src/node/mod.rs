//! The standalone node (`sfu serve`): WHIP/WHEP signaling over HTTP, ICE-lite, DTLS-SRTP and
//! all media on one UDP port, around the sans-IO engine.
//!
//! - [`config`]: defaults, TOML file, flags and environment.
//! - [`ice`]: STUN binding requests answered as an ICE-lite agent.
//! - [`peer`]: one WHIP or WHEP session.
//! - [`core`]: the sessions and the engine behind one UDP port, sans-IO.
//! - [`metrics`]: counters and the Prometheus text format.

pub mod config;
pub mod core;
pub mod ice;
pub mod metrics;
pub mod peer;
pub mod srtp;
