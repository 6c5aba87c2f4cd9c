//! A relay kept up with its publisher's track set: tracks the publisher adds after the relay
//! started (a participant offering again), and simulcast streams whose SSRCs their first
//! packets bind by rid. At every keepalive the origin compares each relay's SSRCs with its
//! publisher's now, and while they differ tells the edge, in an APP packet naming the relay's
//! tag on the link; the edge marks its relay-in, and its node asks the origin for the relay
//! again at once. The origin's answer renews the relay over the same link. When only SSRCs
//! were bound since (a simulcast stream's first packets; its retransmissions', first sent at
//! the publisher's first loss, whenever that comes), the edge binds them into its relay-in in
//! place: its viewers keep their subscriptions and decoders. Otherwise (tracks added) the
//! relay-in is replaced, and the edge's viewers of it are served again as when a publisher
//! comes, from a keyframe.

use super::relay::RelayOffer;
use super::NodeCore;
use crate::engine::{StreamConfig, TrackConfig, TrackId};
use crate::node::peer::{PeerId, PublishedTrack};
use crate::node::remote::Remote;

/// A stream of a relay-in's track to bind anew: the track's place among the publisher's, its
/// router id, the stream's index and its SSRCs now.
type Rebind = (usize, TrackId, usize, StreamConfig);

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
        offer: &RelayOffer,
        from: Remote,
        link: &str,
    ) -> Option<PeerId> {
        let held = self.media_relays.ins.get(&from).filter(|l| l.id == link)?;
        let named = self.rooms.get(room)?.names.get(offer.name.as_ref()?)?;
        held.relays.contains_key(named).then_some(*named)
    }

    /// Brings relay-in `id`, on the link from `from`, up to `offer`, which renews it, when the
    /// two differ in SSRCs their origin bound since and nothing else: the engine's streams
    /// bound anew, the link's maps to match. False, with the relay-in as it was, otherwise
    /// (or when an SSRC is another relay's on the link): it is then replaced.
    pub(super) fn rebind_relay_in(&mut self, from: Remote, id: PeerId, offer: &RelayOffer) -> bool {
        let Some(rebinds) = self.rebinds(from, id, offer) else {
            return false;
        };
        for &(_, track, index, streams) in &rebinds {
            if self.router.bind_stream(track, index, streams).is_err() {
                // Bound in part: the relay-in is replaced, with all its tracks.
                return false;
            }
        }
        if let Some(publisher) = self.peers.get_mut(&id).and_then(|p| p.role.publisher_mut()) {
            for (at, _, index, streams) in rebinds {
                publisher.tracks[at].config.streams[index] = streams;
            }
        }
        if let Some(link) = self.media_relays.ins.get_mut(&from) {
            link.by_ssrc.retain(|_, p| *p != id);
            link.by_ssrc
                .extend(offer.ssrcs().into_iter().map(|s| (s, id)));
            link.by_tag.retain(|_, p| *p != id);
            link.by_tag.insert(offer.tag, id);
            link.changed.remove(&id);
        }
        self.media_relays.counters.rebound += 1;
        tracing::info!(peer = %id, ?from, "a relay's streams bound anew in place");
        true
    }

    /// The streams relay-in `id` is to bind for `offer`: none when its tracks differ in more
    /// than their streams' SSRCs, or an SSRC of the offer is another relay's on the link.
    fn rebinds(&self, from: Remote, id: PeerId, offer: &RelayOffer) -> Option<Vec<Rebind>> {
        let link = self.media_relays.ins.get(&from)?;
        let taken = offer.ssrcs().into_iter();
        if taken.filter_map(|s| link.by_ssrc.get(&s)).any(|&p| p != id) {
            return None;
        }
        let held = &self.peers.get(&id)?.role.publisher()?.tracks;
        if held.len() != offer.tracks.len() {
            return None;
        }
        let mut rebinds = Vec::new();
        for (at, track) in held.iter().enumerate() {
            let track_id = track.id?;
            let now = self.router.receiver_config(track_id)?;
            let new = offer.tracks.iter().find(|o| o.origin == track.origin)?;
            if !same_but_ssrcs(track, now, new) {
                return None;
            }
            let streams = now.streams.iter().zip(&new.config.streams).enumerate();
            let changed = streams.filter(|(_, (was, is))| was != is);
            rebinds.extend(changed.map(|(index, (_, &is))| (at, track_id, index, is)));
        }
        Some(rebinds)
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

/// Whether `new`, a relayed track as the origin offers it now, is `held` (the engine's config
/// of it `now`) but for its streams' SSRCs.
fn same_but_ssrcs(held: &PublishedTrack, now: &TrackConfig, new: &PublishedTrack) -> bool {
    let shape = |c: &TrackConfig| {
        (
            c.codec,
            c.clock_rate,
            c.dd_ext_id,
            c.audio_level_ext_id,
            c.streams.len(),
        )
    };
    held.origin.is_some() && held.mid == new.mid && shape(now) == shape(&new.config)
}
