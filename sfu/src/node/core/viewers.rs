//! WHEP viewers and the room's tracks: which publisher a viewer watches, its subscription to
//! the first track of each kind it decodes (made once it is connected, or when a publisher
//! comes), its layer choice, and its wait for the next publisher when the one it watched
//! leaves.

use selector::Layer;

use super::{CoreError, NodeCore};
use crate::engine::{DownTrackConfig, DownTrackId, RouterError, TrackId};
use crate::node::peer::{Peer, PeerId, Role, Viewer};
use crate::node::sdp::RoomCodec;

impl NodeCore {
    /// What the publisher a new viewer watches sends (the one named `source`, or the room's
    /// first that publishes): the viewer's codecs must match it.
    pub fn room_codecs(
        &self,
        room: &str,
        source: Option<&str>,
    ) -> Result<Vec<RoomCodec>, CoreError> {
        let Some(members) = self.rooms.get(room) else {
            return match source {
                Some(_) => Err(CoreError::NoSuchParticipant),
                None => Ok(Vec::new()),
            };
        };
        let publisher = |id: &PeerId| self.peers.get(id)?.role.publisher();
        match source {
            Some(name) => {
                let id = members
                    .names
                    .get(name)
                    .ok_or(CoreError::NoSuchParticipant)?;
                Ok(publisher(id).map(|p| p.codecs.clone()).unwrap_or_default())
            }
            None => Ok(members
                .publishers
                .iter()
                .filter_map(publisher)
                .find(|p| !p.codecs.is_empty())
                .map(|p| p.codecs.clone())
                .unwrap_or_default()),
        }
    }

    /// Unpublishes a track; its subscriptions go with it, and their viewers wait for the
    /// room's next publisher.
    pub(super) fn unpublish(&mut self, room: &str, track: TrackId) {
        let subscribers: Vec<(DownTrackId, Option<PeerId>)> = self
            .router
            .subscribers(track)
            .iter()
            .map(|&d| (d, self.owner_of(d)))
            .collect();
        let _ = self.router.unpublish(track);
        self.forget_track(room, track);
        for (down_track, owner) in subscribers {
            let Some(owner) = owner else {
                continue;
            };
            if let Some(viewer) = self.peers.get_mut(&owner).and_then(Peer::viewer_mut) {
                for media in [&mut viewer.video, &mut viewer.audio].into_iter().flatten() {
                    if media.down_track == Some(down_track) {
                        media.down_track = None;
                    }
                }
                if let Some(room) = self.rooms.get_mut(room) {
                    room.waiting.insert(owner);
                }
            }
        }
    }

    /// Subscribes each waiting viewer of the room to the room's first published track of
    /// each kind it lacks, in a codec it accepts. Costs the waiting viewers, not the room; run
    /// when the room's tracks changed (a track published, a publisher gone), since nothing
    /// else gives a waiting viewer something new to watch.
    pub(super) fn serve_waiting(&mut self, room: &str) {
        let Some(members) = self.rooms.get(room) else {
            return;
        };
        if members.waiting.is_empty() {
            return;
        }
        let waiting: Vec<PeerId> = members.waiting.iter().copied().collect();
        for viewer in waiting {
            self.serve_viewer(room, viewer);
        }
    }

    /// Subscribes one viewer to what it lacks of the room's tracks: it waits in the room
    /// until it has every kind it asked for. A viewer that connects is served alone: the
    /// others wait for tracks it does not bring.
    pub(super) fn serve_viewer(&mut self, room: &str, viewer: PeerId) {
        for track in self.watched_tracks(room, viewer) {
            self.connect(viewer, track);
        }
        let served = self
            .peers
            .get_mut(&viewer)
            .and_then(Peer::viewer_mut)
            .is_none_or(|v| v.is_served());
        if let Some(members) = self.rooms.get_mut(room) {
            if served {
                members.waiting.remove(&viewer);
            } else {
                members.waiting.insert(viewer);
            }
        }
    }

    /// The tracks a viewer may watch: the named publisher's, or every publisher's in the order
    /// they came (it takes the first of each kind that it decodes).
    pub(super) fn watched_tracks(&self, room: &str, viewer: PeerId) -> Vec<TrackId> {
        let source = match self.peers.get(&viewer).map(|p| &p.role) {
            Some(Role::Viewer(v)) => v.source.clone(),
            _ => return Vec::new(),
        };
        match source {
            Some(name) => self
                .rooms
                .get(room)
                .and_then(|r| r.names.get(&name))
                .map_or(Vec::new(), |&id| self.tracks_of(id)),
            None => self.room_tracks(room, None),
        }
    }

    pub(super) fn connect(&mut self, viewer_id: PeerId, track: TrackId) {
        let Some(config) = self.router.receiver_config(track) else {
            return;
        };
        let codec = config.codec;
        let format = self.track_format(track);
        let Some(peer) = self.peers.get_mut(&viewer_id) else {
            return;
        };
        let transport = peer.transport;
        let Some(viewer) = peer.viewer_mut() else {
            return;
        };
        let Some(dd) = viewer.media_mut(codec.kind()).map(|m| m.dd_ext_id) else {
            return;
        };
        let limits = viewer.limits(codec, dd);
        let Some(media) = viewer.media_mut(codec.kind()) else {
            return;
        };
        if media.down_track.is_some() {
            return;
        }
        let Some(accepted) = media.codec_for(codec, &format) else {
            return;
        };
        let down = DownTrackConfig {
            rtx: accepted.rtx_payload_type.map(|pt| (media.rtx_ssrc, pt)),
            dd_ext_id: media.dd_ext_id,
            two_byte_allowed: media.two_byte_allowed,
            transport_cc_ext_id: media.transport_cc_ext_id.filter(|_| self.viewer_estimation),
            ..DownTrackConfig::new(media.ssrc, accepted.payload_type)
        };
        if let Ok(down_track) = self.router.subscribe(transport, track, down, limits) {
            media.down_track = Some(down_track);
        }
    }

    /// The session a subscription sends to.
    pub(super) fn owner_of(&self, down_track: DownTrackId) -> Option<PeerId> {
        let transport = self.router.down_track_info(down_track)?.transport;
        self.by_transport.get(&transport).copied()
    }

    /// The format parameters the track's publisher announced it with.
    pub(super) fn track_format(&self, track: TrackId) -> String {
        let publisher = self
            .router
            .track_transport(track)
            .and_then(|t| self.by_transport.get(&t))
            .and_then(|p| self.peers.get(p));
        publisher
            .and_then(|p| p.role.publisher())
            .and_then(|p| p.format_of(track))
            .unwrap_or_default()
            .to_owned()
    }

    /// A new layer choice for a viewer's video (PATCH on its resource).
    pub fn set_target(&mut self, id: PeerId, target: Layer) -> Result<(), CoreError> {
        let viewer = self
            .peers
            .get_mut(&id)
            .ok_or(CoreError::UnknownPeer)?
            .viewer_mut()
            .ok_or(CoreError::NotAViewer)?;
        viewer.target = target;
        let Some(media) = &viewer.video else {
            return Ok(());
        };
        let Some(down_track) = media.down_track else {
            return Ok(());
        };
        let limits = viewer.limits(
            self.router
                .down_track_info(down_track)
                .and_then(|d| self.router.receiver_config(d.track))
                .map_or(rtp_ext::codec::Codec::Vp8, |c| c.codec),
            media.dd_ext_id,
        );
        self.router
            .set_limits(down_track, limits)
            .map_err(|_: RouterError| CoreError::UnknownPeer)
    }
}

impl Peer {
    fn viewer_mut(&mut self) -> Option<&mut Viewer> {
        match &mut self.role {
            Role::Viewer(viewer) => Some(viewer),
            Role::Publisher(_) | Role::Participant(_) => None,
        }
    }
}
