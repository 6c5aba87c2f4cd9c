//! The standalone node (`sfu serve`): WHIP/WHEP signaling over HTTP, ICE-lite, DTLS-SRTP and
//! all media on one UDP port, around the sans-IO engine.
//!
//! - [`config`]: defaults, TOML file, flags and environment.
//! - [`sdp`]: offers read, what to accept negotiated, answers written.
//! - [`auth`]: bearer tokens, static or HS256 JWT with room grants.
//! - [`ice`]: STUN binding requests answered as an ICE-lite agent.
//! - [`dtls`]: each session's sans-IO DTLS 1.2 association (server side), yielding the SRTP
//!   keys and carrying application data.
//! - [`datachannel`]: data channels, SCTP over each participant's DTLS association, relayed
//!   between the participants of a room.
//! - [`srtp`]: SRTP and SRTCP behind our own trait; [`replay`]: its replay windows.
//! - [`peer`]: one WHIP, WHEP or conference session.
//! - [`relays`]: the configured TURN servers' addresses, to count relayed sessions.
//! - [`participant`]: a conference participant: publishing and receiving on one peer
//!   connection, renegotiated in place.
//! - [`core`]: the sessions and the engine behind one UDP port, sans-IO; [`dominant`]: who
//!   speaks, with a hysteresis.
//! - [`remote`]: where a packet comes from and goes: a UDP address or an ICE-TCP connection.
//! - [`tcp`]: ICE over TCP: the listener, its limits, each connection's framing and queue.
//! - [`media_loop`]: the task that owns the core, the socket and the clock.
//! - [`memory`]: freed memory handed back to the system after sessions leave.
//! - [`socket`]: the media socket's buffers and what the kernel dropped;
//!   [`spaced_reads`]: its reads, spaced under load.
//! - [`signaling`]: an offer to a session and an answer.
//! - [`http`]: the WHIP/WHEP routes, CORS, `/metrics`, the demo page.
//! - [`metrics`]: counters and the Prometheus text format.
//! - [`stats`]: one viewer's estimate and layers, for `/metrics` and its resource's `GET`.
//! - [`room_view`]: a room's state as JSON; [`session_events`]: a participant's event stream;
//!   [`event_queue`]: what of it waits in the node, bounded.
//! - [`limits`]: what one node holds at most, and how a refusal reads.
//! - [`listener`]: the HTTP connections: a cap, and timeouts for slow or idle clients.
//! - [`descriptors`]: the open-files limit raised, and shared by HTTP and ICE-TCP connections.
//! - [`server`]: start, run, shut down.
//! - [`cluster`]: nodes sharing a store: registration, rooms' homes, placement, drain.
//! - `testing` (feature `testing`): the core with sessions set up as browsers set them up, for
//!   the tests, the fuzz bodies and the benches.

#![deny(missing_docs)]

pub mod admission;
pub mod arrival;
pub mod auth;
pub mod batch;
pub mod client_key;
pub mod cluster;
pub mod config;
pub mod core;
pub mod datachannel;
pub mod descriptors;
pub mod dominant;
pub mod dtls;
pub mod event_queue;
pub mod forwarded;
pub mod http;
pub mod ice;
pub mod ice_servers;
pub mod limits;
pub mod listener;
pub mod media_loop;
pub mod memory;
pub mod metrics;
pub mod participant;
pub mod peer;
pub mod relays;
pub mod remote;
pub mod replay;
pub mod room_view;
pub mod sdp;
pub mod server;
pub mod session_events;
pub mod shard;
pub mod signaling;
pub mod socket;
pub mod spaced_reads;
pub mod srtp;
pub mod stats;
pub mod tcp;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod tls;
