//! A room as the core keeps it: who publishes, in the order they came (a viewer watches the
//! first publisher of each kind), who watches, and which connected viewers still lack a
//! subscription. Sets, so a join or a leave costs the same in a room of two or of thousands.

use std::collections::HashSet;

use crate::node::peer::PeerId;

#[derive(Debug, Default)]
pub(super) struct Room {
    pub publishers: Vec<PeerId>,
    pub viewers: HashSet<PeerId>,
    /// Connected viewers with a receiving section that has no subscription yet: the only
    /// viewers a new publisher (or a leaving one) concerns.
    pub waiting: HashSet<PeerId>,
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
        self.viewers.remove(&id);
        self.waiting.remove(&id);
    }
}
