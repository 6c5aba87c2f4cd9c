//! A room as its members and `GET /rooms/{room}` see it: who is in it, what each publishes
//! (codec, simulcast streams, the layers measured and what each costs), how many receive
//! each track, and who speaks.

use rtp_ext::codec::{Codec, MediaKind};
use serde::Serialize;

use super::datachannel::dcep::Reliability;
use super::datachannel::relay::ChannelInfo;
use super::participant::ParticipantId;
use super::stats::{codec_name, kind_name};

/// The room's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoomView {
    /// The room's name.
    pub room: String,
    /// Conference participants and WHIP publishers, in the order they came.
    pub participants: Vec<ParticipantView>,
    /// WHEP viewers.
    pub viewers: usize,
    /// Who speaks, once anybody has.
    pub dominant_speaker: Option<ParticipantId>,
}

/// One member that publishes or receives on a peer connection of its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ParticipantView {
    /// Its id in the room: what events and other members name it by.
    pub id: ParticipantId,
    /// The name it goes by, unique in the room.
    pub name: String,
    /// `participant` (publishes and receives) or `whip` (publishes only).
    pub kind: &'static str,
    /// What it publishes.
    pub tracks: Vec<TrackView>,
    /// Tracks of the room it receives now.
    pub receiving: usize,
    /// The data channels it opened, relayed to the others.
    pub channels: Vec<ChannelView>,
}

/// A participant's data channel, as the room's state and events show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChannelView {
    /// Whose channel.
    pub participant: ParticipantId,
    /// Its label.
    pub label: String,
    /// Whether its messages arrive in order.
    pub ordered: bool,
    /// `"reliable"`, `"max_retransmits"` or `"max_lifetime"`.
    pub reliability: &'static str,
    /// The retransmissions or milliseconds of a partially reliable channel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Its subprotocol, as its owner gave it.
    pub protocol: String,
}

impl ChannelView {
    /// The view of a relay's channel.
    pub fn of(info: &ChannelInfo) -> Self {
        let (reliability, limit) = match info.params.reliability {
            Reliability::Reliable => ("reliable", None),
            Reliability::MaxRetransmits(n) => ("max_retransmits", Some(n)),
            Reliability::MaxLifetimeMs(ms) => ("max_lifetime", Some(ms)),
        };
        Self {
            participant: info.owner,
            label: info.params.label.clone(),
            ordered: !info.params.unordered,
            reliability,
            limit,
            protocol: info.params.protocol.clone(),
        }
    }
}

/// A published track.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TrackView {
    /// The track's id in this room: what a subscription change names.
    pub id: u32,
    /// Whose it is.
    pub participant: ParticipantId,
    /// `"audio"` or `"video"`.
    #[serde(serialize_with = "kind_name")]
    pub kind: MediaKind,
    /// The codec it is published in, by its SDP encoding name.
    #[serde(serialize_with = "codec_name")]
    pub codec: Codec,
    /// Simulcast streams (1 without simulcast).
    pub streams: usize,
    /// The layers measured over the last seconds, with what each costs a subscriber.
    pub layers: Vec<LayerRate>,
    /// Subscriptions to it: participants' and viewers'.
    pub viewers: usize,
}

/// One layer and its rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LayerRate {
    /// The spatial layer (simulcast stream or SVC spatial layer), from 0.
    pub spatial: u8,
    /// The temporal layer, from 0.
    pub temporal: u8,
    /// What a subscriber sent this layer receives, bits per second, measured over the last
    /// seconds.
    pub bps: u64,
}
