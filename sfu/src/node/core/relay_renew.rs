//! A relay kept up with its publisher's track set: tracks the publisher adds after the relay
//! started (a participant offering again), and simulcast streams whose SSRCs their first
//! packets bind by rid. At every keepalive the origin compares each relay's SSRCs with its
//! publisher's now, and while they differ tells the edge, in an APP packet naming the relay's
//! tag on the link; the edge marks its relay-in, and its node asks the origin for the relay
//! again (at the next heartbeat), which replaces the relay on both ends over the same link:
//! the edge's viewers of it are served again as when a publisher comes.

use super::NodeCore;
use crate::node::peer::PeerId;
use crate::node::remote::Remote;

impl NodeCore {
    /// Tells the edge at `to` of each relay on its link whose publisher's SSRCs changed.
    pub(super) fn announce_changes(&mut self, to: Remote) {
        let Some(link) = self.media_relays.outs.get(&to) else {
            return;
        };
        let changed: Vec<u32> = link
            .relays
            .iter()
            .filter(|relay| {
                let Some(peer) = self.peers.get(&relay.publisher) else {
                    return false;
                };
                let (mut now, mut had) = (self.offer_of(peer).ssrcs(), relay.ssrcs.clone());
                now.sort_unstable();
                had.sort_unstable();
                now != had
            })
            .map(|relay| relay.tag)
            .collect();
        for tag in changed {
            self.send_changed(to, tag);
        }
    }

    /// Whether relay-in `id`'s origin said its track set changed.
    pub(super) fn relay_changed(&self, id: PeerId) -> bool {
        let from = self.media_relays.in_peers.get(&id);
        let link = from.and_then(|from| self.media_relays.ins.get(from));
        link.is_some_and(|l| l.changed.contains(&id))
    }

    /// The relay-in `offer` renews: on the link from `from` named `link`, the one of the
    /// same publisher (by name) in `room`.
    pub(super) fn renewed(
        &self,
        room: &str,
        offer: &super::RelayOffer,
        from: Remote,
        link: &str,
    ) -> Option<PeerId> {
        let held = self.media_relays.ins.get(&from).filter(|l| l.id == link)?;
        let named = self.rooms.get(room)?.names.get(offer.name.as_ref()?)?;
        held.relays.contains_key(named).then_some(*named)
    }

    /// Relay-in `id` leaves for the relay that renews it: without a BYE (the origin replaced
    /// its end already) and without its link ending, should it be the link's last.
    pub(super) fn retire_relay_in(&mut self, from: Remote, id: PeerId) {
        let Some(mut link) = self.media_relays.ins.remove(&from) else {
            return;
        };
        link.relays.remove(&id);
        link.by_ssrc.retain(|_, p| *p != id);
        link.by_tag.retain(|_, p| *p != id);
        link.changed.remove(&id);
        let _ = self.remove_peer(id);
        self.media_relays.ins.insert(from, link);
    }
}
