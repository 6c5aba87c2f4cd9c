//! A room as the core keeps it: who publishes, in the order they came (a viewer watches the
//! first publisher, or the one it names), who takes part in the conference, who watches, and
//! which connected viewers still lack a subscription. Sets, so a join or a leave costs the
//! same in a room of two or of thousands.

use std::collections::{HashMap, HashSet};

use super::followed::Followed;
use super::speakers::Speakers;
use crate::node::participant::ParticipantId;
use crate::node::peer::PeerId;

#[derive(Debug, Default)]
pub(super) struct Room {
    /// Sessions that publish or may (WHIP publishers and participants), in the order they came.
    pub publishers: Vec<PeerId>,
    /// Conference participants, in the order they came.
    pub participants: Vec<PeerId>,
    /// Every publishing or conference session by the name it goes by: names are unique in a
    /// room.
    pub names: HashMap<String, PeerId>,
    pub viewers: HashSet<PeerId>,
    /// Connected viewers with a receiving section that has no subscription yet: the only
    /// viewers a new publisher (or a leaving one) concerns.
    pub waiting: HashSet<PeerId>,
    /// Who speaks, once anybody has, as the room's members know it ...
    pub speaker: Option<ParticipantId>,
    /// ... and how it was picked.
    pub speakers: Speakers,
    /// The room's parts on the other nodes of a cluster, while it has some.
    pub followed: Option<Followed>,
}

impl Room {
    pub fn len(&self) -> usize {
        self.publishers.len() + self.viewers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn remove(&mut self, id: PeerId) {
        self.publishers.retain(|&p| p != id);
        self.participants.retain(|&p| p != id);
        self.names.retain(|_, p| *p != id);
        self.viewers.remove(&id);
        self.waiting.remove(&id);
        if self.speakers.current == Some(id) {
            self.speakers = Speakers::default();
            self.speaker = None;
        }
    }
}
