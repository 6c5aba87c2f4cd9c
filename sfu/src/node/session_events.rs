//! What a participant's event stream (`text/event-stream` on its resource) tells it: the room
//! as it is when the stream opens, then every change that concerns it, each a server-sent
//! event (`event:` its kind, `data:` one line of JSON).

use selector::Layer;
use serde::Serialize;

use super::participant::ParticipantId;
use super::room_view::{ChannelView, ParticipantView, RoomView, TrackView};
use super::stats::LayerView;

/// One event for one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEvent {
    /// The room as the stream opens, who the session is in it, and whether it must offer
    /// again now.
    State {
        /// The session's own participant id, as the room's other members know it.
        you: ParticipantId,
        /// The room: its participants, their tracks, its viewers and who speaks.
        room: RoomView,
        /// `Some` when its last answer lacks sections for the room's tracks: it must offer again.
        renegotiate: Option<Wanted>,
    },
    /// Someone joined the room, with the tracks it publishes.
    ParticipantJoined(ParticipantView),
    /// Someone left the room (DELETE, silence, a failed handshake).
    ParticipantLeft {
        /// Who left.
        participant: ParticipantId,
        /// The name it went by, free again in the room.
        name: String,
    },
    /// A track joined the room; a session receives it once an answer gives it a section.
    TrackAdded(TrackView),
    /// A track of the room ended: the section that carried it carries nothing until the next
    /// answer says so.
    TrackRemoved {
        /// The track, by the id the room's events gave it.
        track: u32,
        /// Whose it was.
        participant: ParticipantId,
    },
    /// The session should offer again, with at least this many receiving sections.
    Renegotiate(Wanted),
    /// A track the session receives is now sent at this layer (none: nothing decodable).
    LayerChanged {
        /// The track, by its id in the room.
        track: u32,
        /// Whose it is.
        participant: Option<ParticipantId>,
        /// The layer now sent; `None` while no decodable layer is.
        layer: Option<Layer>,
    },
    /// Who speaks now.
    DominantSpeaker {
        /// The participant whose audio leads; its video gets the first share of every estimate.
        participant: ParticipantId,
    },
    /// The node's bandwidth estimate toward the session.
    Estimate {
        /// Bits per second; told when it moves by a twentieth or more.
        bitrate_bps: u64,
    },
    /// A track of the room the session does not get, and why.
    NotForwarded {
        /// The track, by its id in the room.
        track: u32,
        /// Whose it is.
        participant: Option<ParticipantId>,
        /// Why, for a person to read: which codec and format no offered codec decodes.
        reason: String,
    },
    /// A participant opened a data channel: the node opens it toward the session.
    DataChannelOpened(ChannelView),
    /// A participant's data channel closed (by it, or as it left).
    DataChannelClosed(ChannelView),
}

/// Receiving sections a session needs, per kind: one per track of the room it can receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Wanted {
    /// Receiving audio sections.
    pub audio: usize,
    /// Receiving video sections.
    pub video: usize,
}

impl SessionEvent {
    /// The event's name on the stream.
    pub fn name(&self) -> &'static str {
        match self {
            Self::State { .. } => "state",
            Self::ParticipantJoined(_) => "participant_joined",
            Self::ParticipantLeft { .. } => "participant_left",
            Self::TrackAdded(_) => "track_added",
            Self::TrackRemoved { .. } => "track_removed",
            Self::Renegotiate(_) => "renegotiate",
            Self::LayerChanged { .. } => "layer_changed",
            Self::DominantSpeaker { .. } => "dominant_speaker",
            Self::Estimate { .. } => "estimate",
            Self::NotForwarded { .. } => "not_forwarded",
            Self::DataChannelOpened(_) => "data_channel_opened",
            Self::DataChannelClosed(_) => "data_channel_closed",
        }
    }

    /// The event's data: one line of JSON.
    pub fn data(&self) -> String {
        let value = match self {
            Self::State {
                you,
                room,
                renegotiate,
            } => serde_json::json!({ "you": you, "room": room, "renegotiate": renegotiate }),
            Self::ParticipantJoined(participant) => serde_json::json!(participant),
            Self::ParticipantLeft { participant, name } => {
                serde_json::json!({ "participant": participant, "name": name })
            }
            Self::TrackAdded(track) => serde_json::json!(track),
            Self::TrackRemoved { track, participant } => {
                serde_json::json!({ "track": track, "participant": participant })
            }
            Self::Renegotiate(wanted) => serde_json::json!(wanted),
            Self::LayerChanged {
                track,
                participant,
                layer,
            } => {
                let layer = layer.map(LayerView::from);
                serde_json::json!({ "track": track, "participant": participant, "layer": layer })
            }
            Self::DominantSpeaker { participant } => {
                serde_json::json!({ "participant": participant })
            }
            Self::Estimate { bitrate_bps } => serde_json::json!({ "bitrate_bps": bitrate_bps }),
            Self::NotForwarded {
                track,
                participant,
                reason,
            } => {
                serde_json::json!({ "track": track, "participant": participant, "reason": reason })
            }
            Self::DataChannelOpened(channel) | Self::DataChannelClosed(channel) => {
                serde_json::json!(channel)
            }
        };
        value.to_string()
    }

    /// The whole event as the stream carries it (RFC: the HTML event-stream format).
    pub fn to_wire(&self) -> String {
        format!("event: {}\ndata: {}\n\n", self.name(), self.data())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_event_is_one_named_line_of_json() {
        let event = SessionEvent::LayerChanged {
            track: 7,
            participant: Some(ParticipantId(0xc)),
            layer: Some(Layer::new(1, 2)),
        };
        assert_eq!(
            event.to_wire(),
            "event: layer_changed\ndata: {\"track\":7,\"participant\":\"000000000000000c\",\
             \"layer\":{\"spatial\":1,\"temporal\":2}}\n\n"
        );
        let left = SessionEvent::ParticipantLeft {
            participant: ParticipantId(0xab),
            name: "line\nbreak \"quoted\"".into(),
        };
        let wire = left.to_wire();
        // A name with a line break stays on the data line: JSON escapes it.
        assert_eq!(wire.trim_end().lines().count(), 2, "{wire}");
        let data: serde_json::Value =
            serde_json::from_str(wire.lines().nth(1).unwrap().trim_start_matches("data: "))
                .unwrap();
        assert_eq!(data["participant"], "00000000000000ab");
        assert_eq!(data["name"], "line\nbreak \"quoted\"");
    }
}
