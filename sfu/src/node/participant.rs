//! A conference participant: one peer connection that publishes its own tracks and receives
//! the room's other tracks in sections of its own, renegotiated in place as the room changes.
//!
//! The participant always offers and the node always answers: when the room changes, the node
//! tells the participant (its event stream's `renegotiate`) how many receiving sections of
//! each kind it needs, and the participant offers again with at least that many. With one
//! offerer there is no glare; an offer that crosses a change is answered with the room as it
//! is then, and the participant is told to renegotiate once more if that answer is behind.

use std::collections::HashMap;
use std::fmt;

use rtp_ext::codec::MediaKind;
use selector::Layer;

use super::peer::{Publisher, ViewerMedia};
use super::sdp::OfferShape;
use crate::engine::TrackId;

/// How other participants and the room's state name a participant: random, and not the
/// session id (which, on an open node, is the key to the session).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ParticipantId(pub u64);

impl ParticipantId {
    /// A fresh id, unrelated to the session id.
    pub fn random() -> Self {
        Self(rand::random())
    }
}

impl fmt::Display for ParticipantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl serde::Serialize for ParticipantId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ParticipantId {
    /// Reads the 16 hex digits it is written as.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let hex = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
        let bad = || serde::de::Error::custom("not a participant id");
        if hex.len() != 16 {
            return Err(bad());
        }
        u64::from_str_radix(&hex, 16).map(Self).map_err(|_| bad())
    }
}

/// What a participant chose for one of the room's tracks: a layer ceiling, and whether it is
/// paused (nothing forwarded while it is not shown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    /// The highest layer it wants ([`Layer::MAX`]: the best there is).
    pub target: Layer,
    /// Nothing of the track is forwarded while set.
    pub paused: bool,
}

/// A track as the room's state and events name it: its id on its publisher's node, and
/// whose it is (the tracks of two nodes of a room may share an id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamedTrack {
    /// Its id.
    pub id: u32,
    /// Its publisher's public id; left out, the track this node gave the id is meant.
    pub participant: Option<ParticipantId>,
}

impl Default for Choice {
    fn default() -> Self {
        Self {
            target: Layer::MAX,
            paused: false,
        }
    }
}

/// One of a participant's receiving sections.
#[derive(Debug, Clone)]
pub struct ReceiveSection {
    /// The section's mid, which the answer and the room's events name it by.
    pub mid: String,
    /// Audio or video: a section carries tracks of its kind only.
    pub kind: MediaKind,
    /// The SSRCs the node sends it under, the codecs the participant takes in it, and the
    /// subscription while one is made.
    pub media: ViewerMedia,
    /// The track the last answer said the section carries.
    pub answered: Option<TrackId>,
    /// The track it carries now: what was answered, until that track ends.
    pub source: Option<TrackId>,
}

/// How a publishing or conference session is known in its room: the name it joined with
/// (its token's subject, or the one it gave) and the id others see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The name: unique in the room, so a viewer can pick whom to watch by it.
    pub name: String,
    /// The id the room's other members and its state name it by.
    pub public: ParticipantId,
}

/// A conference participant's state besides its peer connection: what it publishes, the
/// sections it receives in and what each carries, its answers' versions and its choices.
#[derive(Debug)]
pub struct Participant {
    /// What it publishes: its sending sections' tracks, each with its mid.
    pub publisher: Publisher,
    /// Its receiving sections, in its offer's order.
    pub sections: Vec<ReceiveSection>,
    /// What its next offer must keep.
    pub shape: OfferShape,
    /// The `o=` line of the node's answers to it: the session id, and the version of the last.
    pub origin: (u64, u64),
    /// Whether it was told to renegotiate and has not offered since.
    pub asked: bool,
    /// Its choices per track of the room.
    pub choices: HashMap<TrackId, Choice>,
    /// Tracks it was told it cannot receive (no codec it offered decodes them), so it is told
    /// once.
    pub undecodable: Vec<TrackId>,
}

impl Participant {
    /// The version its next offer's `If-Match` names: the last answer's.
    pub fn version(&self) -> u64 {
        self.origin.1
    }

    /// The section carrying `track`, if any.
    pub fn section_of(&self, track: TrackId) -> Option<&ReceiveSection> {
        self.sections.iter().find(|s| s.source == Some(track))
    }

    /// Whether the participant can decode a track of `codec` announced with `fmtp`: `None`
    /// while it has no section of that kind to tell by (Chrome offers every codec it decodes
    /// in each section of a kind).
    pub fn decodes(
        &self,
        kind: MediaKind,
        codec: rtp_ext::codec::Codec,
        fmtp: &str,
    ) -> Option<bool> {
        let mut of_kind = self.sections.iter().filter(|s| s.kind == kind).peekable();
        of_kind.peek()?;
        Some(of_kind.any(|s| s.media.codec_for(codec, fmtp).is_some()))
    }
}
