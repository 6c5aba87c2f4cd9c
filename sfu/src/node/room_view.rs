//! A room as its members and `GET /rooms/{room}` see it: who is in it, what each publishes
//! (codec, simulcast streams, the layers measured and what each costs), how many receive
//! each track, and who speaks. A participant's view reads back from its JSON too: the nodes
//! of a clustered room hand each other their participants so (see `cluster::room_feed`).

use rtp_ext::codec::{Codec, MediaKind};
use serde::{Deserialize, Serialize};

use super::datachannel::dcep::Reliability;
use super::datachannel::relay::ChannelInfo;
use super::participant::ParticipantId;
use super::stats::{codec_by_name, codec_name, kind_by_name, kind_name};

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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParticipantView {
    /// Its id in the room: what events and other members name it by.
    pub id: ParticipantId,
    /// The name it goes by, unique in the room.
    pub name: String,
    /// `participant` (publishes and receives) or `whip` (publishes only).
    #[serde(deserialize_with = "participant_kind")]
    pub kind: Name,
    /// What it publishes.
    pub tracks: Vec<TrackView>,
    /// Tracks of the room it receives now.
    pub receiving: usize,
    /// The data channels it opened, relayed to the others.
    pub channels: Vec<ChannelView>,
}

/// A participant's data channel, as the room's state and events show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelView {
    /// Whose channel.
    pub participant: ParticipantId,
    /// Its label.
    pub label: String,
    /// Whether its messages arrive in order.
    pub ordered: bool,
    /// `"reliable"`, `"max_retransmits"` or `"max_lifetime"`.
    #[serde(deserialize_with = "channel_reliability")]
    pub reliability: Name,
    /// The retransmissions or milliseconds of a partially reliable channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrackView {
    /// The track's id in this room: what a subscription change names.
    pub id: u32,
    /// Whose it is.
    pub participant: ParticipantId,
    /// `"audio"` or `"video"`.
    #[serde(serialize_with = "kind_name", deserialize_with = "kind_by_name")]
    pub kind: MediaKind,
    /// The codec it is published in, by its SDP encoding name.
    #[serde(serialize_with = "codec_name", deserialize_with = "codec_by_name")]
    pub codec: Codec,
    /// Simulcast streams (1 without simulcast).
    pub streams: usize,
    /// The layers measured over the last seconds, with what each costs a subscriber.
    pub layers: Vec<LayerRate>,
    /// Subscriptions to it: participants' and viewers'.
    pub viewers: usize,
}

/// One layer and its rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerRate {
    /// The spatial layer (simulcast stream or SVC spatial layer), from 0.
    pub spatial: u8,
    /// The temporal layer, from 0.
    pub temporal: u8,
    /// What a subscriber sent this layer receives, bits per second, measured over the last
    /// seconds.
    pub bps: u64,
}

/// One of a few names the node writes (a kind, a reliability), read back as the same static
/// string. An alias, so that reading a view borrows nothing from its JSON: serde would take a
/// field spelled `&'static str` to borrow from the input for good.
pub type Name = &'static str;

/// Reads a participant's `kind` back: one of the names the node writes.
fn participant_kind<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Name, D::Error> {
    one_of(d, &["participant", "whip"])
}

/// Reads a channel's `reliability` back: one of the names the node writes.
fn channel_reliability<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Name, D::Error> {
    one_of(d, &["reliable", "max_retransmits", "max_lifetime"])
}

fn one_of<'de, D: serde::Deserializer<'de>>(d: D, names: &[Name]) -> Result<Name, D::Error> {
    let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
    let found = names.iter().find(|n| **n == name).copied();
    found.ok_or_else(|| serde::de::Error::custom(format!("not one of {names:?}")))
}
