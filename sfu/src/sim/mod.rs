//! A deterministic in-memory network around the engine, for tests, the fuzz target and the
//! benches: a [`Router`](crate::engine::Router) and, per transport, an uplink to it and a
//! downlink from it, each a [`Link`] with its own delay, jitter, loss, reordering, duplicates
//! and optional bottleneck (a rate and a drop-tail queue), all drawn from one seed.
//!
//! Time is simulated and moves in jumps: [`Network::step`] goes straight to the earliest of
//! the next delivery on any link, the next packet scheduled to be sent and the router's
//! [`poll_timeout`](crate::engine::Router::poll_timeout), and does what is due then. Nothing
//! ticks at a fixed rate, so a timeout reported late (or not at all) shows as a duty done late
//! (or never), not hidden by a loop that would have called the router anyway.
//!
//! The host loop is the one the Router documents: after every input, drain `poll_transmit`,
//! then `poll_rtcp`, then `poll_event`; media and RTCP go down the downlink of the transport
//! they name. Peers are the caller's: it sends RTP and RTCP up a transport's uplink (now or at
//! a set time) and takes what arrived at a transport, with the time it arrived.

//!
//! Beyond raw datagrams (`peer`), a peer writes an RTCP item and sends it up its transport
//! ([`Network::send_feedback`]) and reads the media that arrived at it by its RTP header
//! ([`Network::take_media`], [`Arrival::media`]).

mod link;
mod network;
mod peer;

pub use link::{Bottleneck, Link, LinkConfig, LinkCounters, QueueLimit};
pub use network::{Arrival, Delivery, Direction, Network, NetworkCounters, Refusal, SimError};
pub use peer::ReceivedMedia;
