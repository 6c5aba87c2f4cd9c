//! What the host tells the engine about a published track and a subscription: the wire
//! parameters negotiated in SDP.

use rtp_ext::codec::{Codec, MediaKind};
use rtp_ext::rtp::ExtensionIds;
use smallvec::SmallVec;

use super::binding::StreamIds;

/// A published track, as the router names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TrackId(pub u32);

/// A subscription to a track (one DownTrack), as the router names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DownTrackId(pub u32);

/// One RTP stream of a published track: the only one, or one simulcast layer (its index in
/// the publisher's rid list is the spatial layer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamConfig {
    /// The media SSRC.
    pub ssrc: u32,
    /// The RTX stream repairing it (RFC 4588), if negotiated.
    pub rtx_ssrc: Option<u32>,
}

/// A published track.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackConfig {
    /// The codec the track is sent in.
    pub codec: Codec,
    /// RTP clock rate: 90 kHz for video, 48 kHz for Opus.
    pub clock_rate: u32,
    /// One stream, or the simulcast streams lowest layer first.
    pub streams: SmallVec<[StreamConfig; 4]>,
    /// Local id of the Dependency Descriptor extension, if negotiated.
    pub dd_ext_id: Option<u8>,
    /// Local id of the audio level extension (RFC 6464), if negotiated.
    pub audio_level_ext_id: Option<u8>,
    /// Transport-wide congestion control feedback for this track's publisher, if negotiated.
    pub transport_cc: Option<TransportCc>,
    /// REMB toward this track's publisher, if it negotiated REMB and not transport-wide CC.
    pub remb: Option<PublisherRemb>,
    /// How streams whose SSRCs the signaling did not give are named in their packets; their
    /// `ssrc` in [`streams`](Self::streams) is taken from the first packet so named.
    pub stream_ids: StreamIds,
}

/// The transport-wide sequence number extension of a publisher's transport. Tracks of one
/// transport share one sequence space and one feedback, kept by the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportCc {
    /// The local id of the transport-wide sequence number extension.
    pub ext_id: u8,
}

/// REMB toward a publisher that estimates nothing itself (it negotiated `goog-remb` and not
/// transport-wide CC): the router estimates its uplink from the send times its packets carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublisherRemb {
    /// The local id of the abs-send-time extension.
    pub abs_send_time_ext_id: u8,
}

impl TrackConfig {
    /// A single-stream track.
    pub fn single(codec: Codec, ssrc: u32) -> Self {
        Self {
            codec,
            clock_rate: if codec.kind() == MediaKind::Audio {
                48_000
            } else {
                90_000
            },
            streams: SmallVec::from_slice(&[StreamConfig {
                ssrc,
                rtx_ssrc: None,
            }]),
            dd_ext_id: None,
            audio_level_ext_id: None,
            transport_cc: None,
            remb: None,
            stream_ids: StreamIds::Signaled,
        }
    }

    /// Whether it is sent as several simulcast streams.
    pub fn is_simulcast(&self) -> bool {
        self.streams.len() > 1
    }
}

/// A subscription: how packets go out to this subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownTrackConfig {
    /// The SSRC the subscription sends under, unique on its transport.
    pub ssrc: u32,
    /// The payload type the subscriber negotiated for the codec.
    pub payload_type: u8,
    /// RTX stream and payload type for retransmissions, if negotiated.
    pub rtx: Option<(u32, u8)>,
    /// Local id of the Dependency Descriptor extension on this leg, if negotiated. Without it
    /// the subscriber gets no DD (and for AV1 SVC, one spatial layer only).
    pub dd_ext_id: Option<u8>,
    /// Source extension ids copied to this leg unchanged (ids negotiated identically).
    pub keep_extensions: ExtensionIds,
    /// Whether `a=extmap-allow-mixed` was negotiated: the two-byte header form for elements
    /// above 16 bytes (a keyframe's DD).
    pub two_byte_allowed: bool,
    /// Local id of the transport-wide sequence number extension on this leg, if the
    /// subscriber negotiated transport-wide CC: every packet then carries the transport's
    /// sequence, for the subscriber's feedback.
    pub transport_cc_ext_id: Option<u8>,
}

impl DownTrackConfig {
    /// A subscription sending under `ssrc` with `payload_type`, other settings at their defaults.
    pub fn new(ssrc: u32, payload_type: u8) -> Self {
        Self {
            ssrc,
            payload_type,
            rtx: None,
            dd_ext_id: None,
            keep_extensions: ExtensionIds::NONE,
            transport_cc_ext_id: None,
            two_byte_allowed: true,
        }
    }
}
