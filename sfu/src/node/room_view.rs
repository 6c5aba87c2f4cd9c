//! A room as its members and `GET /rooms/{room}` see it: who is in it, what each publishes
//! (codec, simulcast streams, the layers measured and what each costs), how many receive
//! each track, and who speaks.

use rtp_ext::codec::{Codec, MediaKind};
use serde::Serialize;

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
