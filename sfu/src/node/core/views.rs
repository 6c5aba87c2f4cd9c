//! The room as JSON: `GET /rooms/{room}`, the snapshot an event stream opens with, and the
//! participants and tracks its events carry.

use std::time::Instant;

use selector::Layer;

use super::NodeCore;
use crate::engine::{TrackId, MEASURED_LAYERS};
use crate::node::peer::{PeerId, Role};
use crate::node::room_view::{ChannelView, LayerRate, ParticipantView, RoomView, TrackView};
use crate::node::session_events::SessionEvent;

impl NodeCore {
    /// The room's state; `None` for a room with nobody in it.
    pub fn room_view(&self, room: &str, now: Instant) -> Option<RoomView> {
        let members = self.rooms.get(room)?;
        let followed = members.followed.as_ref();
        // A clustered room shows its relayed publishers once: as their origin's.
        let local = members
            .publishers
            .iter()
            .filter(|&&id| followed.is_none() || !self.is_relay_in(id))
            .filter_map(|&id| self.participant_view(id, now));
        let (before, after) = followed.map_or((&[][..], &[][..]), |f| (&f.before, &f.after));
        Some(RoomView {
            room: room.to_owned(),
            participants: before
                .iter()
                .cloned()
                .chain(local)
                .chain(after.iter().cloned())
                .collect(),
            viewers: (members.viewers.len()).saturating_add(followed.map_or(0, |f| f.viewers)),
            dominant_speaker: followed.map_or(members.speaker, |f| f.speaker),
        })
    }

    /// What an event stream opens with: the room, who the session is, and whether it must
    /// offer again now (an ask made before the stream opened is not lost).
    pub fn session_snapshot(&self, id: PeerId, now: Instant) -> Option<SessionEvent> {
        let peer = self.peers.get(&id)?;
        let you = peer.identity.as_ref()?.public;
        Some(SessionEvent::State {
            you,
            room: self.room_view(&peer.room, now)?,
            renegotiate: self.wanted(id),
        })
    }

    /// A publishing or conference session as its room sees it.
    pub(super) fn participant_view(&self, id: PeerId, now: Instant) -> Option<ParticipantView> {
        let peer = self.peers.get(&id)?;
        let identity = peer.identity.as_ref()?;
        let (kind, receiving) = match &peer.role {
            Role::Participant(p) => {
                let receiving = p.sections.iter().filter(|s| s.source.is_some()).count();
                ("participant", receiving)
            }
            Role::Publisher(_) => ("whip", 0),
            Role::Viewer(_) => return None,
        };
        Some(ParticipantView {
            id: identity.public,
            name: identity.name.clone(),
            kind,
            tracks: self
                .tracks_of(id)
                .into_iter()
                .filter_map(|t| self.track_view(t, now))
                .collect(),
            receiving,
            channels: self
                .data
                .channels_of(id)
                .iter()
                .map(ChannelView::of)
                .collect(),
        })
    }

    /// A published track: its codec, streams, the layers measured and its subscriptions.
    pub(super) fn track_view(&self, track: TrackId, now: Instant) -> Option<TrackView> {
        let config = self.router.receiver_config(track)?;
        let rates = self.router.layer_bitrates(track, now)?;
        let layers = (0..MEASURED_LAYERS as u8)
            .flat_map(|s| (0..MEASURED_LAYERS as u8).map(move |t| Layer::new(s, t)))
            .filter_map(|layer| {
                let bps = rates.bps(layer);
                (bps > 0).then_some(LayerRate {
                    spatial: layer.spatial,
                    temporal: layer.temporal,
                    bps,
                })
            })
            .collect();
        Some(TrackView {
            id: track.0,
            participant: self.track_owner(track)?,
            kind: config.codec.kind(),
            codec: config.codec,
            streams: config.streams.len(),
            layers,
            viewers: self.router.subscribers(track).len(),
        })
    }
}
