//! The forwarding engine: sans-IO, every input carries `now` and every output is polled; nothing
//! here reads a clock or touches a socket. [`Router`] is the entry point: publish tracks,
//! subscribe to them, feed packets and RTCP in, poll packets out. Data flows one way: a
//! Receiver per published track parses each packet once and keeps it; each subscriber's
//! DownTrack selects, rewrites the DD, munges sequence numbers and timestamps and writes the
//! header into the caller's buffer, sharing the payload.
//!
//! - `transport`: one peer connection and what concerns it alone: the SSRCs it publishes and
//!   receives under, the congestion feedback it is owed as a publisher, and as a viewer its
//!   estimate, pacer and probe clusters. The router dispatches between receivers, down tracks
//!   and transports.
//! - `allocation`: fitting a viewer's layers to its estimate.
//! - `nack`: which lost packets of a published stream to NACK, and when (RFC 4585).
//! - `receive_stats`: reception statistics of a published stream for RTCP report blocks
//!   (RFC 3550).
//! - `munger`: a subscriber's output sequence numbers and timestamps, continuous across
//!   deliberate drops and simulcast switches.
//! - `packet_ring`: recent packets by extended sequence number, to answer NACKs.
//! - [`rtcp`]: RTCP feedback both ways, parsed into our own typed view and written into caller
//!   buffers.
//!
//! Every error type here implements [`std::error::Error`] and sorts itself by [`Fault`]: the
//! peer's bytes, the host's misuse, or a limit reached.

mod allocation;
mod binding;
pub mod bwe;
mod down_track;
mod fault;
mod forwarder;
pub(crate) mod id_map;
mod keyframe;
mod layer_rates;
mod munger;
mod nack;
mod packet;
mod packet_ring;
pub(crate) mod prefetch;
mod receive_stats;
mod receiver;
mod router;
pub mod rtcp;
mod rtx_budget;
mod sent_dd;
mod speech;
mod stream_activity;
mod track;
mod transport;

// What an embedder uses: the router, what it is configured with and names, and what it
// returns.
pub use allocation::LayerOrder;
pub use binding::{StreamIds, REBIND_HOLD};
pub use down_track::{DownTrackCounters, SubscriberReception, Transmit, MAX_RESENDS, SEND_HISTORY};
pub use fault::Fault;
pub use keyframe::{KeyframeCounters, DEFAULT_KEYFRAME_INTERVAL};
pub use layer_rates::{LayerBitrates, MEASURED_LAYERS};
pub use receiver::{ReceiveError, ReceiverCounters};
pub use router::{
    DownTrackInfo, Event, KeyframeRequest, Output, Router, RouterConfig, RouterCounters,
    RouterError, RtcpTarget, RtcpTransmit,
};
pub use stream_activity::PAUSE_AFTER;
pub use track::{
    DownTrackConfig, DownTrackId, PublisherRemb, StreamConfig, TrackConfig, TrackId, TransportCc,
};
pub use transport::{
    TransportId, MAX_HOLD, PACING_BURST, PACING_PERCENT, PUBLISHER_INITIAL_BPS, REMB_INTERVAL,
};

// The router's parts on their own, for the benches that measure them one by one: not an
// embedder's API, and free to change.
#[cfg(feature = "internal")]
pub use down_track::{DownTrack, WriteError, Written};
#[cfg(feature = "internal")]
pub use packet::ParsedPacket;
#[cfg(feature = "internal")]
pub use receiver::{PacketRef, Receiver, RECEIVE_RING};
