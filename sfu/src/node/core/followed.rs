//! A clustered room's parts on the other nodes, as this node follows them. The room's feed
//! (`cluster::room_feed`, outside the core) reads what each node of the room published under
//! its home and hands it in here with [`NodeCore::follow_room`]; the core shows it in the
//! room's state and tells its participants what changed, as it tells them of its own
//! sessions. It hands out this node's own part with [`NodeCore::local_parts`].
//!
//! Without a part of another node (a lone node, or a room on one node only) nothing is handed
//! in, and the room is as the core alone sees it.

use std::collections::HashMap;
use std::time::Instant;

use super::NodeCore;
use crate::node::participant::ParticipantId;
use crate::node::room_view::ParticipantView;
use crate::node::session_events::SessionEvent;

/// What the other nodes of a clustered room hold of it, as the room's feed last read it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Followed {
    /// The participants of the nodes whose ids sort before this node's, in the room's order
    /// (nodes by id, each node's participants in the order they came) ...
    pub before: Vec<ParticipantView>,
    /// ... and of those whose ids sort after it.
    pub after: Vec<ParticipantView>,
    /// Their WHEP viewers.
    pub viewers: usize,
    /// The room's dominant speaker, as its home decided from every node's candidate.
    pub speaker: Option<ParticipantId>,
    /// What each of those nodes holds, for the relay to pull from it.
    pub nodes: Vec<FollowedNode>,
}

/// What another node of a clustered room holds of it, as the relay pulls it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FollowedNode {
    /// The node's id.
    pub node: String,
    /// Whether it has conference participants there, whose data channels cross.
    pub participants: bool,
    /// The names of its publishers with tracks there.
    pub publishers: Vec<String>,
}

impl Followed {
    /// The other nodes' participants, in the room's order.
    pub fn participants(&self) -> impl Iterator<Item = &ParticipantView> {
        self.before.iter().chain(&self.after)
    }

    /// Whether a participant of another node goes by `name`.
    pub fn has_name(&self, name: &str) -> bool {
        self.participants().any(|p| p.name == name)
    }
}

/// Where a name joining a room must be free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Names {
    /// Among the room's participants here and on its other nodes: a new participant.
    Everywhere,
    /// Among those here only: a relay-in, which goes by its publisher's name on the
    /// publisher's node.
    Here,
}

/// This node's part of one of its rooms, for the room's other nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalPart {
    /// The room.
    pub room: String,
    /// Its participants and WHIP publishers here, in the order they came (relays of other
    /// nodes' publishers left out: those are their origin's).
    pub participants: Vec<ParticipantView>,
    /// Its WHEP viewers here.
    pub viewers: usize,
    /// This node's own dominant speaker of the room, and how loud it is now (dB above
    /// silence; 0 when it does not speak): the home decides the room's from these.
    pub candidate: Option<(ParticipantId, f32)>,
}

impl NodeCore {
    /// Whether `room` is followed: its other nodes' parts are shown here, and with them its
    /// relayed publishers, as their origins' (so a relay-in's own comings and goings are
    /// not told).
    pub(super) fn is_followed(&self, room: &str) -> bool {
        self.rooms.get(room).is_some_and(|r| r.followed.is_some())
    }

    /// Every room's part on this node.
    pub fn local_parts(&self, now: Instant) -> Vec<LocalPart> {
        self.rooms
            .iter()
            .map(|(room, members)| {
                let participants = members
                    .publishers
                    .iter()
                    .filter(|&&id| !self.is_relay_in(id))
                    .filter_map(|&id| self.participant_view(id, now))
                    .collect();
                let candidate = members.speakers.current.and_then(|id| {
                    let public = self.peers.get(&id)?.identity.as_ref()?.public;
                    let levels = self.loudness(room, now);
                    let level = levels.iter().find(|l| l.0 == id).map_or(0.0, |l| l.1);
                    Some((public, level))
                });
                LocalPart {
                    room: room.clone(),
                    participants,
                    viewers: members.viewers.len(),
                    candidate,
                }
            })
            .collect()
    }

    /// What the other nodes of `room` hold of it now (`None`: nothing, the room is this
    /// node's alone). The room's participants hear of who joined or left there, of tracks
    /// added or removed, and of the room's dominant speaker when it changes; what this node
    /// lacks of the other nodes is asked for (see `relay_pulls.rs`). A room without a
    /// session here keeps nothing.
    pub fn follow_room(&mut self, now: Instant, room: &str, followed: Option<Followed>) {
        let Some(members) = self.rooms.get_mut(room) else {
            return;
        };
        let shown = |f: &Option<Followed>| f.as_ref().map_or(members.speaker, |f| f.speaker);
        let speaker_before = shown(&members.followed);
        let speaker_now = shown(&followed);
        let before = std::mem::replace(&mut members.followed, followed);
        let old: Vec<&ParticipantView> = before.iter().flat_map(Followed::participants).collect();
        let new: Vec<&ParticipantView> = members
            .followed
            .iter()
            .flat_map(Followed::participants)
            .collect();
        let mut events = changes(&old, &new);
        if let Some(participant) = speaker_now.filter(|_| speaker_now != speaker_before) {
            events.push(SessionEvent::DominantSpeaker { participant });
        }
        for &to in &members.participants {
            for event in &events {
                self.session_events.push_back((to, event.clone()));
            }
        }
        self.want_relays(now, room);
    }
}

/// The events that tell a room's participants how the other nodes' participants changed, in
/// the order the node tells of its own: a leaver's tracks, then the leaver; a newcomer, then
/// its tracks.
fn changes(old: &[&ParticipantView], new: &[&ParticipantView]) -> Vec<SessionEvent> {
    let was: HashMap<ParticipantId, &ParticipantView> = old.iter().map(|p| (p.id, *p)).collect();
    let is: HashMap<ParticipantId, &ParticipantView> = new.iter().map(|p| (p.id, *p)).collect();
    let mut events = Vec::new();
    for gone in old.iter().filter(|p| !is.contains_key(&p.id)) {
        events.extend(removed(gone, &[]));
        events.push(SessionEvent::ParticipantLeft {
            participant: gone.id,
            name: gone.name.clone(),
        });
    }
    for now in new {
        match was.get(&now.id) {
            None => {
                events.push(SessionEvent::ParticipantJoined((*now).clone()));
                events.extend(now.tracks.iter().cloned().map(SessionEvent::TrackAdded));
            }
            Some(then) => {
                events.extend(removed(then, &now.tracks));
                let added = now
                    .tracks
                    .iter()
                    .filter(|t| !then.tracks.iter().any(|o| o.id == t.id));
                events.extend(added.cloned().map(SessionEvent::TrackAdded));
            }
        }
    }
    events
}

/// The tracks of `then` that are not among `kept`, as `track_removed` events.
fn removed<'a>(
    then: &'a ParticipantView,
    kept: &'a [crate::node::room_view::TrackView],
) -> impl Iterator<Item = SessionEvent> + 'a {
    then.tracks
        .iter()
        .filter(|t| !kept.iter().any(|k| k.id == t.id))
        .map(|t| SessionEvent::TrackRemoved {
            track: t.id,
            participant: t.participant,
        })
}
