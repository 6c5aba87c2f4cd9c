//! How the room names a track: by its id on its publisher's node. A relayed track has
//! another id on the edge's router, so what a participant is told of it (events, its
//! answer's `a=msid`) and what it names (a choice) go through its origin's id; and as two
//! nodes' tracks may share an id, the participant whose track it is tells them apart.

use super::NodeCore;
use crate::engine::TrackId;
use crate::node::participant::NamedTrack;
use crate::node::peer::{PeerId, PublishedTrack};

impl NodeCore {
    /// The id the room's state and events give `track`.
    pub(super) fn room_track_id(&self, track: TrackId) -> u32 {
        self.published_track(track)
            .and_then(|t| t.origin)
            .unwrap_or(track.0)
    }

    /// The track of the room `named` names, among the tracks participant `id` may receive.
    /// Named without its participant, an id this node gave wins over a relayed track's.
    pub(super) fn named_track(&self, id: PeerId, named: NamedTrack) -> Option<TrackId> {
        let room = &self.peers.get(&id)?.room;
        let candidates = self.room_tracks(room, Some(id));
        let mut found = candidates.into_iter().filter(|&track| {
            self.room_track_id(track) == named.id
                && named
                    .participant
                    .is_none_or(|p| self.track_owner(track) == Some(p))
        });
        let first = found.next()?;
        let own = |&t: &TrackId| self.published_track(t).is_some_and(|t| t.origin.is_none());
        Some(if own(&first) {
            first
        } else {
            found.find(own).unwrap_or(first)
        })
    }

    /// The publisher's description of a track of the router's.
    fn published_track(&self, track: TrackId) -> Option<&PublishedTrack> {
        let transport = self.router.track_transport(track)?;
        let peer = self.peers.get(self.by_transport.get(&transport)?)?;
        let publisher = peer.role.publisher()?;
        publisher.tracks.iter().find(|t| t.id == Some(track))
    }
}
