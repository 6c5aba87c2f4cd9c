//! The router's settings, errors, outputs and events: what crosses its API.

use std::time::Duration;

use selector::Layer;

use crate::engine::down_track::Transmit;
use crate::engine::keyframe::DEFAULT_KEYFRAME_INTERVAL;
use crate::engine::track::{DownTrackId, StreamConfig, TrackId};
use crate::engine::transport::TransportId;

/// Router settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouterConfig {
    /// At most one keyframe request per published stream per interval.
    pub keyframe_interval: Duration,
    /// Round-trip time to publishers assumed for NACK retries until one is measured.
    pub rtt: Duration,
    /// SSRC the router sends its own RTCP from.
    pub rtcp_ssrc: u32,
    /// Receiver reports to publishers and sender reports to subscribers, this often.
    pub report_interval: Duration,
    /// How keyframes are asked of publishers.
    pub keyframe_request: KeyframeRequest,
    /// Where a viewer's transport-wide estimate starts, bit/s: low enough that a viewer on a
    /// narrow link is not sent the top layer of a camera before its first feedback (its
    /// queue would overflow and the video freeze before the estimate came down); a viewer on
    /// a wide link gets there through the probe clusters its first feedback allows.
    pub initial_estimate_bps: u64,
}

impl Default for RouterConfig {
    fn default() -> Self {
        Self {
            keyframe_interval: DEFAULT_KEYFRAME_INTERVAL,
            rtt: Duration::from_millis(100),
            rtcp_ssrc: 1,
            report_interval: Duration::from_secs(1),
            keyframe_request: KeyframeRequest::Pli,
            initial_estimate_bps: 1_000_000,
        }
    }
}

/// Misuse of the router's API: all [`Fault::Host`](crate::engine::Fault::Host).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RouterError {
    /// The transport was never added, or was removed.
    #[error("unknown transport")]
    UnknownTransport,
    /// The track was never published, or was unpublished.
    #[error("unknown track")]
    UnknownTrack,
    /// The subscription never existed, or ended.
    #[error("unknown down track")]
    UnknownDownTrack,
    /// An SSRC is already the transport's: another track it publishes has it, or another
    /// subscription sends to it under it.
    #[error("ssrc already in use on the transport")]
    SsrcInUse,
    /// The track has no stream at that index.
    #[error("unknown stream of the track")]
    UnknownStream,
}

/// Where an RTCP packet from [`Router::poll_rtcp`](crate::engine::Router::poll_rtcp) goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtcpTarget {
    /// To the publisher of this track.
    Publisher(TrackId),
    /// To the subscriber of this subscription.
    Subscriber(DownTrackId),
}

/// An RTCP packet written into the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtcpTransmit {
    /// The peer connection it goes out on.
    pub transport: TransportId,
    /// Whom it is for.
    pub to: RtcpTarget,
    /// Bytes written into the caller's buffer.
    pub len: usize,
}

/// A media packet for one subscriber, written into the caller's buffer plus a shared payload.
#[derive(Debug, Clone)]
pub struct Output {
    /// The subscriber's peer connection.
    pub transport: TransportId,
    /// The subscription it belongs to.
    pub down_track: DownTrackId,
    /// The header written and the payload to send after it.
    pub transmit: Transmit,
}

/// Something the host may want to act on or show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The layer a subscriber receives changed (None: nothing decodable is forwarded, e.g.
    /// while it waits for a keyframe).
    LayerChanged {
        /// The subscriber's peer connection.
        transport: TransportId,
        /// The subscription.
        down_track: DownTrackId,
        /// The layer it now receives.
        layer: Option<Layer>,
    },
    /// A stream the signaling gave no SSRC for was bound to the SSRC its packets came
    /// under (by rid, mid or payload type).
    StreamBound {
        /// The publisher's peer connection.
        transport: TransportId,
        /// The published track.
        track: TrackId,
        /// The stream's index within the track: its simulcast layer.
        stream: u8,
        /// Its SSRCs now.
        ssrcs: StreamConfig,
    },
    /// A simulcast publisher paused or resumed streams of a track (a stream without media
    /// for [`PAUSE_AFTER`](crate::engine::PAUSE_AFTER) or more while another flows is
    /// paused); its subscribers followed.
    StreamsSent {
        /// The published track.
        track: TrackId,
        /// Bit `i` set while stream `i` is sent.
        active: u8,
    },
    /// Allocation capped a subscription at this layer to fit its transport's estimate.
    LayerAllocated {
        /// The subscriber's peer connection.
        transport: TransportId,
        /// The subscription.
        down_track: DownTrackId,
        /// The most it may now be sent.
        layer: Layer,
    },
    /// A keyframe request went to a publisher.
    KeyframeRequested {
        /// The publisher's peer connection.
        transport: TransportId,
        /// The published track asked.
        track: TrackId,
    },
    /// A subscriber transport's bandwidth estimate changed (its REMB): its layers are
    /// allocated to fit it.
    BandwidthEstimate {
        /// The viewer transport the estimate is for.
        transport: TransportId,
        /// The estimate, in bits per second.
        bitrate_bps: u64,
    },
}

/// How keyframes are asked of publishers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyframeRequest {
    /// Picture loss indication (RFC 4585 6.3.1).
    Pli,
    /// Full intra request (RFC 5104 4.3.1), for publishers that prefer it.
    Fir,
}

/// Router-wide counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouterCounters {
    /// RTP packets given to `handle_rtp`.
    pub rtp_in: u64,
    /// Packets under an SSRC the transport does not publish: dropped.
    pub unknown_ssrc: u64,
    /// Of those, packets that named a stream bound from its packets, under other SSRCs than
    /// it was bound to less than [`REBIND_HOLD`](crate::engine::REBIND_HOLD) ago.
    pub rebinds_held: u64,
    /// Packets that did not parse or that the receiver refused (duplicates, out of window).
    pub dropped_in: u64,
    /// RTCP datagrams given to `handle_rtcp`.
    pub rtcp_in: u64,
    /// RTCP datagrams that did not parse: dropped whole.
    pub bad_rtcp: u64,
    /// Subscriber packets that did not fit the caller's buffer.
    pub write_failures: u64,
    /// NACK packets sent to publishers.
    pub nacks_sent: u64,
    /// Subscriber NACKs not answered: the subscriber's estimate had no room for them.
    pub retransmissions_over_budget: u64,
    /// Sequence numbers one RTCP datagram NACKed for one subscription past the
    /// [`SEND_HISTORY`](crate::engine::down_track::SEND_HISTORY) it remembers: not answered.
    pub nacks_over_history: u64,
    /// Retransmissions refused because their viewer's closed pacer held as many as it may
    /// (two send histories' worth) already.
    pub retransmissions_queue_full: u64,
    /// Packets sent past a viewer's pacer after waiting [`MAX_HOLD`](crate::engine::MAX_HOLD) for
    /// it: what the viewer was allocated exceeded its pacing rate.
    pub paced_overdue: u64,
    /// Probe clusters started toward viewers held below the layers they asked for.
    pub probe_clusters: u64,
    /// Keyframe requests (PLI or FIR) sent to publishers.
    pub keyframe_requests_sent: u64,
    /// REMB packets sent to publishers that negotiated REMB and not transport-wide CC.
    pub rembs_sent: u64,
}
