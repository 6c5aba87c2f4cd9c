//! Conference participants in the core: a join with an offer, a renegotiation in place, what
//! each participant's receiving sections carry, and the events that tell every participant of
//! the room what changed.
//!
//! A receiving section carries one track of the room at a time. Tracks are given sections
//! only when an answer is written (the participant learns a track's SSRC and stream from the
//! answer alone); a track that ends leaves its section carrying nothing until the next answer
//! says so, and the section is reused for the next track of its kind. Whenever what a
//! participant's last answer says differs from the room, it is asked to offer again.

use rtp_ext::codec::MediaKind;
use selector::LayerLimits;

use super::followed::Names;
use super::room::Room;
use super::{CoreError, NodeCore};
use crate::engine::{DownTrackConfig, TrackId};
use crate::node::participant::{
    Choice, Identity, NamedTrack, Participant, ParticipantId, ReceiveSection,
};
use crate::node::peer::{
    IceCredentials, Join, PeerId, Publisher, RemoteIce, Role, ViewerCodec, ViewerMedia,
};
use crate::node::sdp::{OfferShape, SctpOffer};
use crate::node::session_events::{SessionEvent, Wanted};

/// What signaling makes of a participant's offer.
#[derive(Debug)]
pub struct ParticipantOffer {
    /// The tracks of its sending sections.
    pub publisher: Publisher,
    /// Its receiving sections in order: mid, kind, fresh SSRCs and the codecs it takes.
    pub receive: Vec<(String, MediaKind, ViewerMedia)>,
    /// What a later offer of the session must keep, checked on every renegotiation.
    pub shape: OfferShape,
    /// Its data channel section's SCTP parameters, when it offered one.
    pub data: Option<SctpOffer>,
}

/// What the node's answer says of a participant's receiving sections.
#[derive(Debug, Clone)]
pub struct Negotiated {
    /// The session, whose resource URL the answer's `Location` names.
    pub id: PeerId,
    /// The participant's id as the room's other members see it (the session id stays private).
    pub public: ParticipantId,
    /// The node's ICE credentials for the session: the same in every answer until an offer
    /// restarts ICE.
    pub ice: IceCredentials,
    /// The answer's `o=` session id and version; the version is the answer's `ETag`.
    pub origin: (u64, u64),
    /// Per receiving section, by mid: what is sent in it, or nothing (`inactive`).
    pub sending: Vec<(String, Option<Sending>)>,
    /// The largest data channel message the node takes, for the answer's data section.
    pub max_message_size: u64,
}

/// A track sent in a participant's section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sending {
    /// The SSRC the node sends the track under in this section (the answer's `a=ssrc`).
    pub ssrc: u32,
    /// The SSRC of its retransmissions (RFC 4588), paired with `ssrc` in the answer's
    /// `a=ssrc-group:FID`.
    pub rtx_ssrc: u32,
    /// The participant's codec (payload types) the track goes out in.
    pub codec: ViewerCodec,
    /// Whose track, and which.
    pub owner: ParticipantId,
    /// The track's id as the room's state and events name it.
    pub track: u32,
}

impl NodeCore {
    /// A new participant: its tracks are published, its receiving sections given the room's
    /// tracks, and the room told.
    pub fn add_participant(
        &mut self,
        now: std::time::Instant,
        join: Join,
        offer: ParticipantOffer,
    ) -> Result<Negotiated, CoreError> {
        let name = join.name.clone().unwrap_or_default();
        self.check_name(&join.room, &name, Names::Everywhere)?;
        self.check_participants(&join.room)?;
        self.admit(&join)?;
        let transport = self.router.add_transport();
        let mut publisher = offer.publisher;
        if let Err(e) = self.publish_tracks(transport, &mut publisher) {
            // Just added: known to the router, with what it published so far.
            let _ = self.router.remove_transport(transport);
            self.admission.left(join.client, true);
            return Err(e);
        }
        let participant = Participant {
            publisher,
            sections: Vec::new(),
            shape: offer.shape,
            origin: (rand::random::<u64>() >> 1, 0),
            asked: false,
            choices: Default::default(),
            undecodable: Vec::new(),
        };
        let room = join.room.clone();
        let id = self.add_peer(
            now,
            transport,
            join,
            Role::Participant(Box::new(participant)),
        );
        self.take_sections(id, offer.receive);
        self.start_data(now, id, offer.data);
        let negotiated = self.answer(id);
        self.announce_join(now, &room, id, true);
        negotiated
            .inspect(|n| tracing::info!(peer = %id, participant = %n.public, "participant joined"))
            .ok_or(CoreError::UnknownPeer)
    }

    /// A participant's new offer: its tracks follow its sending sections, its receiving
    /// sections the room. `if_match`, when given, must be the version of its last answer.
    pub fn renegotiate(
        &mut self,
        now: std::time::Instant,
        id: PeerId,
        if_match: Option<u64>,
        offer: ParticipantOffer,
    ) -> Result<Negotiated, CoreError> {
        let peer = self.peers.get_mut(&id).ok_or(CoreError::UnknownPeer)?;
        let (transport, room) = (peer.transport, peer.room.clone());
        let Role::Participant(participant) = &mut peer.role else {
            return Err(CoreError::NotAParticipant);
        };
        if let Some(tag) = if_match.filter(|&tag| tag != participant.version()) {
            return Err(CoreError::Stale {
                named: tag,
                current: participant.version(),
            });
        }
        participant
            .shape
            .check_follows(&offer.shape)
            .map_err(CoreError::OfferMismatch)?;
        // Restarted once the offer is taken, all or none as its tracks.
        let restart = participant
            .shape
            .restarts_ice(&offer.shape)
            .then(|| RemoteIce {
                ufrag: offer.shape.ice_ufrag.clone(),
                pwd: offer.shape.ice_pwd.clone(),
            });
        let shape = std::mem::replace(&mut participant.shape, offer.shape);
        let sending: Vec<&str> = offer
            .publisher
            .tracks
            .iter()
            .map(|t| t.mid.as_str())
            .collect();
        let stopped: Vec<TrackId> = participant
            .publisher
            .tracks
            .iter()
            .filter(|t| !sending.contains(&t.mid.as_str()))
            .filter_map(|t| t.id)
            .collect();
        participant
            .publisher
            .tracks
            .retain(|t| sending.contains(&t.mid.as_str()));
        let known: Vec<String> = participant
            .publisher
            .tracks
            .iter()
            .map(|t| t.mid.clone())
            .collect();
        let mut added = Publisher {
            tracks: offer
                .publisher
                .tracks
                .into_iter()
                .filter(|t| !known.contains(&t.mid))
                .collect(),
            codecs: Vec::new(),
        };
        for track in stopped {
            self.unpublish(&room, track);
            self.broadcast_removed(&room, id, track);
        }
        if let Err(refused) = self.publish_tracks(transport, &mut added) {
            // The offer is refused: the next must follow the last one answered. (The tracks
            // it stopped stay stopped, as its sending sections said.)
            if let Some(participant) = self.participant_mut(id) {
                participant.shape = shape;
            }
            return Err(refused);
        }
        let new_tracks: Vec<TrackId> = added.tracks.iter().filter_map(|t| t.id).collect();
        if let Some(participant) = self.participant_mut(id) {
            participant.publisher.tracks.extend(added.tracks);
            participant.publisher.codecs = offer.publisher.codecs;
        }
        self.take_sections(id, offer.receive);
        // A data section may come in a later offer than the first.
        self.start_data(now, id, offer.data);
        if let Some(remote) = restart {
            self.restart_ice(id, remote);
        }
        let negotiated = self.answer(id).ok_or(CoreError::UnknownPeer)?;
        // This one too is asked again if the room changed while its offer was on its way.
        self.announce_tracks(now, &room, id, &new_tracks);
        Ok(negotiated)
    }

    /// A participant's choice for one of the room's tracks: its layer ceiling, paused or
    /// not. The track must be one the room publishes and not its own.
    pub fn set_choice(
        &mut self,
        id: PeerId,
        named: NamedTrack,
        choice: Choice,
    ) -> Result<(), CoreError> {
        if !self.peers.contains_key(&id) {
            return Err(CoreError::UnknownPeer);
        }
        let track = self.named_track(id, named).ok_or(CoreError::UnknownTrack)?;
        let participant = self.participant_mut(id).ok_or(CoreError::NotAParticipant)?;
        participant.choices.insert(track, choice);
        let section = participant.section_of(track);
        let Some((down_track, media)) =
            section.and_then(|s| Some((s.media.down_track?, s.media.clone())))
        else {
            return Ok(());
        };
        let codec = self.router.receiver_config(track).map(|c| c.codec);
        let limits = subscription_limits(choice, codec, media.dd_ext_id);
        // Known to the router: the section's subscription is live.
        let _ = self.router.set_limits(down_track, limits);
        let _ = self.router.set_muted(down_track, choice.paused);
        Ok(())
    }

    /// Whether `name` may join `room`: not empty, not too long, printable, and not taken
    /// (here, and with [`Names::Everywhere`] on the room's other nodes).
    pub(super) fn check_name(&self, room: &str, name: &str, names: Names) -> Result<(), CoreError> {
        if name.is_empty() || name.len() > MAX_NAME_BYTES || name.chars().any(char::is_control) {
            return Err(CoreError::BadName);
        }
        let elsewhere = |r: &Room| {
            names == Names::Everywhere && r.followed.as_ref().is_some_and(|f| f.has_name(name))
        };
        if self
            .rooms
            .get(room)
            .is_some_and(|r| r.names.contains_key(name) || elsewhere(r))
        {
            return Err(CoreError::NameTaken);
        }
        Ok(())
    }

    /// Publishes a session's tracks on its transport: each gets its router id. All or none:
    /// when one cannot be published, those before it are unpublished again (a refused offer
    /// leaves nothing behind to offer again).
    pub(super) fn publish_tracks(
        &mut self,
        transport: crate::engine::TransportId,
        publisher: &mut Publisher,
    ) -> Result<(), CoreError> {
        for at in 0..publisher.tracks.len() {
            let config = publisher.tracks[at].config.clone();
            match self.router.publish(transport, config) {
                Ok(id) => publisher.tracks[at].id = Some(id),
                Err(_) => {
                    for track in &mut publisher.tracks[..at] {
                        if let Some(id) = track.id.take() {
                            let _ = self.router.unpublish(id);
                        }
                    }
                    return Err(CoreError::SsrcInUse);
                }
            }
        }
        Ok(())
    }

    /// The participant's receiving sections after its offer: the ones it still offers keep
    /// what they carry (unless its codecs no longer decode it), new ones come empty, and the
    /// ones it no longer offers go with their subscriptions.
    fn take_sections(&mut self, id: PeerId, offered: Vec<(String, MediaKind, ViewerMedia)>) {
        let Some(participant) = self.participant_mut(id) else {
            return;
        };
        let mut old = std::mem::take(&mut participant.sections);
        for (mid, kind, media) in offered {
            let section = match old.iter().position(|s| s.mid == mid && s.kind == kind) {
                Some(index) => {
                    let mut kept = old.swap_remove(index);
                    kept.media.codecs = media.codecs;
                    kept
                }
                None => ReceiveSection {
                    mid,
                    kind,
                    media,
                    answered: None,
                    source: None,
                },
            };
            participant.sections.push(section);
        }
        for down_track in old.iter().filter_map(|s| s.media.down_track) {
            // The section's own subscription: known to the router.
            let _ = self.router.unsubscribe(down_track);
        }
        let stale: Vec<usize> = self.participant(id).map_or(Vec::new(), |p| {
            p.sections
                .iter()
                .enumerate()
                .filter(|(_, s)| s.source.is_some_and(|t| !self.decodes(&s.media, t)))
                .map(|(i, _)| i)
                .collect()
        });
        for index in stale {
            self.release_section(id, index);
        }
    }

    /// Gives the room's tracks that have no section yet a free section that decodes them,
    /// subscribes what it can, and writes down what the answer says.
    fn answer(&mut self, id: PeerId) -> Option<Negotiated> {
        let room = self.peers.get(&id)?.room.clone();
        for track in self.room_tracks(&room, Some(id)) {
            self.assign(id, track);
        }
        let connected = self.peers.get(&id)?.srtp.is_some();
        if connected {
            self.connect_sections(id);
        }
        self.note_undecodable(id, &room);
        let peer = self.peers.get_mut(&id)?;
        let ice = peer.ice.clone();
        let public = peer.identity.as_ref()?.public;
        let Role::Participant(participant) = &mut peer.role else {
            return None;
        };
        participant.origin.1 += 1;
        participant.asked = false;
        let mut sending = Vec::new();
        for section in &mut participant.sections {
            section.answered = section.source;
            sending.push((section.mid.clone(), section.source));
        }
        let origin = participant.origin;
        let sending = sending
            .into_iter()
            .map(|(mid, source)| {
                let what = source.and_then(|track| self.sending(id, track));
                (mid, what)
            })
            .collect();
        Some(Negotiated {
            id,
            public,
            ice,
            origin,
            sending,
            max_message_size: self.data.config().max_message_size,
        })
    }

    /// What the participant's section carrying `track` sends.
    fn sending(&self, id: PeerId, track: TrackId) -> Option<Sending> {
        let section = self.participant(id)?.section_of(track)?;
        let config = self.router.receiver_config(track)?;
        let format = self.track_format(track);
        let codec = section.media.codec_for(config.codec, &format)?.clone();
        Some(Sending {
            ssrc: section.media.ssrc,
            rtx_ssrc: section.media.rtx_ssrc,
            codec,
            owner: self.track_owner(track)?,
            track: self.room_track_id(track),
        })
    }

    /// Gives `track` the participant's first free section of its kind that decodes it, with
    /// fresh SSRCs (a new stream for the participant), unless a section carries it already.
    fn assign(&mut self, id: PeerId, track: TrackId) {
        let Some(config) = self.router.receiver_config(track) else {
            return;
        };
        let (codec, format) = (config.codec, self.track_format(track));
        let Some(participant) = self.participant_mut(id) else {
            return;
        };
        if participant.section_of(track).is_some() {
            return;
        }
        let free = participant.sections.iter_mut().find(|s| {
            s.source.is_none()
                && s.kind == codec.kind()
                && s.media.codec_for(codec, &format).is_some()
        });
        if let Some(section) = free {
            section.source = Some(track);
            section.media.ssrc = rand::random();
            section.media.rtx_ssrc = rand::random();
        }
    }

    /// Subscribes every section that carries a track and has no subscription yet.
    pub(super) fn connect_sections(&mut self, id: PeerId) {
        let Some(peer) = self.peers.get(&id) else {
            return;
        };
        let transport = peer.transport;
        let waiting: Vec<(usize, TrackId)> = self.participant(id).map_or(Vec::new(), |p| {
            p.sections
                .iter()
                .enumerate()
                .filter(|(_, s)| s.media.down_track.is_none())
                .filter_map(|(i, s)| Some((i, s.source?)))
                .collect()
        });
        for (index, track) in waiting {
            let Some(sending) = self.sending(id, track) else {
                continue;
            };
            let Some(participant) = self.participant(id) else {
                return;
            };
            let choice = participant.choices.get(&track).copied().unwrap_or_default();
            let media = &participant.sections[index].media;
            let config = DownTrackConfig {
                rtx: sending
                    .codec
                    .rtx_payload_type
                    .map(|pt| (media.rtx_ssrc, pt)),
                dd_ext_id: media.dd_ext_id,
                two_byte_allowed: media.two_byte_allowed,
                transport_cc_ext_id: media.transport_cc_ext_id.filter(|_| self.viewer_estimation),
                ..DownTrackConfig::new(media.ssrc, sending.codec.payload_type)
            };
            let codec = Some(sending.codec.codec);
            let limits = subscription_limits(choice, codec, media.dd_ext_id);
            let Ok(down_track) = self.router.subscribe(transport, track, config, limits) else {
                continue;
            };
            if choice.paused {
                let _ = self.router.set_muted(down_track, true);
            }
            if let Some(participant) = self.participant_mut(id) {
                participant.sections[index].media.down_track = Some(down_track);
            }
        }
    }

    /// The section no longer carries its track: its subscription goes.
    fn release_section(&mut self, id: PeerId, index: usize) {
        let Some(participant) = self.participant_mut(id) else {
            return;
        };
        let Some(section) = participant.sections.get_mut(index) else {
            return;
        };
        section.source = None;
        if let Some(down_track) = section.media.down_track.take() {
            let _ = self.router.unsubscribe(down_track);
        }
    }

    /// An unpublished track: the participants' sections that carried it carry nothing (their
    /// subscriptions went with the track), until their next answers say so.
    pub(super) fn forget_track(&mut self, room: &str, track: TrackId) {
        let Some(members) = self.rooms.get(room) else {
            return;
        };
        for id in members.participants.clone() {
            let Some(participant) = self.participant_mut(id) else {
                continue;
            };
            participant.undecodable.retain(|&t| t != track);
            participant.choices.remove(&track);
            for section in participant
                .sections
                .iter_mut()
                .filter(|s| s.source == Some(track))
            {
                section.source = None;
                section.media.down_track = None;
            }
        }
    }

    /// Tells the participant of tracks of the room no codec it offered decodes, once each.
    fn note_undecodable(&mut self, id: PeerId, room: &str) {
        let mut told = Vec::new();
        for track in self.room_tracks(room, Some(id)) {
            let Some(config) = self.router.receiver_config(track) else {
                continue;
            };
            let (codec, format) = (config.codec, self.track_format(track));
            let Some(participant) = self.participant(id) else {
                return;
            };
            let decodes = participant.decodes(codec.kind(), codec, &format);
            if decodes == Some(false) && !participant.undecodable.contains(&track) {
                let offered = crate::node::sdp::format::describe(codec, &format);
                told.push((
                    track,
                    format!("no codec the participant offered decodes {offered}"),
                ));
            }
        }
        for (track, reason) in told {
            if let Some(participant) = self.participant_mut(id) {
                participant.undecodable.push(track);
            }
            tracing::info!(peer = %id, ?track, %reason, "track not forwarded");
            let event = SessionEvent::NotForwarded {
                track: self.room_track_id(track),
                participant: self.track_owner(track),
                reason,
            };
            self.session_events.push_back((id, event));
        }
    }

    /// Asks every participant of the room whose last answer is behind the room to offer
    /// again, once until it does.
    pub(super) fn ask_renegotiation(&mut self, room: &str) {
        let Some(members) = self.rooms.get(room) else {
            return;
        };
        for id in members.participants.clone() {
            let wanted = self.wanted(id);
            let Some(participant) = self.participant_mut(id) else {
                continue;
            };
            if let (false, Some(wanted)) = (participant.asked, wanted) {
                participant.asked = true;
                self.session_events
                    .push_back((id, SessionEvent::Renegotiate(wanted)));
            }
        }
    }

    /// The receiving sections the participant needs, when its last answer is behind the room:
    /// a section carries nothing now that the answer gave a track, or a track of the room it
    /// can decode (or may: it has no section of that kind to tell) has no section.
    pub(super) fn wanted(&self, id: PeerId) -> Option<Wanted> {
        let participant = self.participant(id)?;
        let room = &self.peers.get(&id)?.room;
        let mut wanted = Wanted { audio: 0, video: 0 };
        let mut behind = participant.sections.iter().any(|s| s.answered != s.source);
        for track in self.room_tracks(room, Some(id)) {
            let Some(config) = self.router.receiver_config(track) else {
                continue;
            };
            let (codec, format) = (config.codec, self.track_format(track));
            if participant.decodes(codec.kind(), codec, &format) == Some(false) {
                continue;
            }
            match codec.kind() {
                MediaKind::Audio => wanted.audio += 1,
                MediaKind::Video => wanted.video += 1,
            }
            behind |= participant.section_of(track).is_none();
        }
        behind.then_some(wanted)
    }

    /// Every live track of the room's publishers in the order they came, but `except`'s own.
    pub(super) fn room_tracks(&self, room: &str, except: Option<PeerId>) -> Vec<TrackId> {
        let Some(members) = self.rooms.get(room) else {
            return Vec::new();
        };
        members
            .publishers
            .iter()
            .filter(|&&p| Some(p) != except)
            .filter_map(|p| self.peers.get(p)?.role.publisher())
            .flat_map(|publisher| publisher.tracks.iter().filter_map(|t| t.id))
            .collect()
    }

    /// A session's published tracks.
    pub(super) fn tracks_of(&self, id: PeerId) -> Vec<TrackId> {
        self.peers
            .get(&id)
            .and_then(|p| p.role.publisher())
            .map_or(Vec::new(), |p| {
                p.tracks.iter().filter_map(|t| t.id).collect()
            })
    }

    /// The public id of a track's publisher.
    pub(super) fn track_owner(&self, track: TrackId) -> Option<ParticipantId> {
        let transport = self.router.track_transport(track)?;
        let peer = self.peers.get(self.by_transport.get(&transport)?)?;
        Some(peer.identity.as_ref()?.public)
    }

    fn decodes(&self, media: &ViewerMedia, track: TrackId) -> bool {
        self.router.receiver_config(track).is_some_and(|c| {
            media
                .codec_for(c.codec, &self.track_format(track))
                .is_some()
        })
    }

    /// Tells the room of a new publishing or conference session: its arrival (unless
    /// `arrival_told` is false: a relay-in of a followed room, which the room's feed shows as
    /// its origin's) and its tracks; the room's viewers get what it publishes, and whoever is
    /// behind is asked to offer.
    pub(super) fn announce_join(
        &mut self,
        now: std::time::Instant,
        room: &str,
        id: PeerId,
        arrival_told: bool,
    ) {
        let view = self.participant_view(id, now).filter(|_| arrival_told);
        if let Some(view) = view {
            self.broadcast(room, id, SessionEvent::ParticipantJoined(view));
        }
        let tracks = self.tracks_of(id);
        self.announce_tracks(now, room, id, &tracks);
    }

    /// Tells the room's other participants of a session's new tracks; the room's viewers get
    /// them, and whoever is behind is asked to offer.
    pub(super) fn announce_tracks(
        &mut self,
        now: std::time::Instant,
        room: &str,
        from: PeerId,
        tracks: &[TrackId],
    ) {
        for &track in tracks {
            if let Some(view) = self.track_view(track, now) {
                self.broadcast(room, from, SessionEvent::TrackAdded(view));
            }
        }
        self.serve_waiting(room);
        self.ask_renegotiation(room);
    }

    /// Tells the room's other participants a session's track ended.
    pub(super) fn broadcast_removed(&mut self, room: &str, from: PeerId, track: TrackId) {
        let Some(participant) = self.peers.get(&from).and_then(|p| p.identity.as_ref()) else {
            return;
        };
        let event = SessionEvent::TrackRemoved {
            track: track.0,
            participant: participant.public,
        };
        self.broadcast(room, from, event);
    }

    /// An event for every participant of the room but `except`.
    pub(super) fn broadcast(&mut self, room: &str, except: PeerId, event: SessionEvent) {
        let Some(members) = self.rooms.get(room) else {
            return;
        };
        for &id in members.participants.iter().filter(|&&p| p != except) {
            self.session_events.push_back((id, event.clone()));
        }
    }

    /// A public id unique on the core: `wanted` when no session here has it, else a new one.
    pub(super) fn identity(&self, name: String, wanted: Option<ParticipantId>) -> Identity {
        let taken = |public: ParticipantId| {
            self.peers
                .values()
                .any(|p| p.identity.as_ref().is_some_and(|i| i.public == public))
        };
        let mut public = wanted.unwrap_or_else(ParticipantId::random);
        while taken(public) {
            public = ParticipantId::random();
        }
        Identity { name, public }
    }

    pub(super) fn participant(&self, id: PeerId) -> Option<&Participant> {
        match &self.peers.get(&id)?.role {
            Role::Participant(participant) => Some(participant),
            _ => None,
        }
    }

    pub(super) fn participant_mut(&mut self, id: PeerId) -> Option<&mut Participant> {
        match &mut self.peers.get_mut(&id)?.role {
            Role::Participant(participant) => Some(participant),
            _ => None,
        }
    }
}

/// The longest name a session may go by, in bytes.
pub const MAX_NAME_BYTES: usize = 64;

/// The limits of a subscription for a choice: its layer ceiling, and for AV1 without the
/// Dependency Descriptor the base spatial layer alone (a decoder fed several spatial layers
/// without their DD cannot sort them).
pub(super) fn subscription_limits(
    choice: Choice,
    codec: Option<rtp_ext::codec::Codec>,
    dd_ext_id: Option<u8>,
) -> LayerLimits {
    let max = if codec == Some(rtp_ext::codec::Codec::Av1) && dd_ext_id.is_none() {
        selector::Layer::new(0, u8::MAX)
    } else {
        selector::Layer::MAX
    };
    LayerLimits {
        target: choice.target,
        max,
    }
}
