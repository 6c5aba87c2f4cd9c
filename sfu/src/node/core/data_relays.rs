//! Relays of a room's data alone. A link carries its origin's participants' data channels of
//! the rooms it relays publishers of (`relay_data.rs`); a room whose participants on the two
//! nodes publish nothing (data-only participants, say) needs a link all the same. So an edge
//! with participants in a room asks every other node with participants there for a relay of
//! the room's *data*: no tracks, only the room among those whose channels the link's
//! association carries (its origin's participants', per the once-per-node rule). Each node
//! asks the other, so channels cross both ways.
//!
//! It lives as a publisher's relay does: on the link the two nodes share (or a new one),
//! counted among the link's relays and refused past the same limits; the origin answers with
//! its tag on the link. The edge ends it once, for [`LINGER`], the room has had no
//! participant here or none on the origin's node (as the room's state shows), with an RTCP
//! APP packet `STDE` naming its tag; a lost link ends it with everything on it, and the next
//! pull makes it again.

use std::time::Instant;

use super::relay::{NewLink, RelayRefusal, LINGER, RELAYS_PER_LINK};
use super::relay_pulls::PullReason;
use super::{CoreError, NodeCore};
use crate::node::remote::Remote;

/// What the origin's core answers a relay of a room's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataRelayed {
    /// The relay's tag on its link.
    pub tag: u32,
    /// The link's id.
    pub link: String,
    /// Whether this node has participants in the room and no relay of the asking node's
    /// data: to be pulled in turn, before the answer best, so that what the asking node's
    /// participants write from their first moment crosses too.
    pub pull_back: bool,
}

/// The edge's end of a relay of a room's data.
#[derive(Debug)]
pub(super) struct DataIn {
    /// The room.
    pub room: String,
    /// The origin's node id.
    pub node: String,
    /// Its tag on the link.
    pub tag: u32,
    /// Since when the room has had no participant here or on the origin's node.
    pub idle: Option<Instant>,
}

impl NodeCore {
    /// On the origin: relays the data channels of `room`'s participants here (those there now
    /// and those to come) to the node at `to`, on the link to it whose id is among `known` or
    /// on `link`, a new one. A room relayed there already is relayed on as it was. When `edge`
    /// (the asking node's id) has no relay of its own data here while this node has
    /// participants in the room, the node is to pull that one in turn.
    pub fn relay_data_out(
        &mut self,
        now: Instant,
        room: &str,
        to: Remote,
        known: &[String],
        link: NewLink,
        edge: Option<&str>,
    ) -> Result<DataRelayed, CoreError> {
        let relayed = |rooms: &[(String, u32)]| rooms.iter().find(|(r, _)| r == room).map(|r| r.1);
        let out = self.join_link_out(now, to, known, link, |existing| {
            let full = existing.len() >= RELAYS_PER_LINK;
            match relayed(&existing.data_rooms).is_none() && full {
                true => Err(RelayRefusal::LinkFull),
                false => Ok(()),
            }
        })?;
        let tag = match relayed(&out.data_rooms) {
            Some(tag) => tag,
            None => {
                let tag = out.take_tag();
                out.data_rooms.push((room.to_owned(), tag));
                self.media_relays.counters.data_started_out += 1;
                tracing::info!(room, ?to, "relaying a room's data to another node");
                tag
            }
        };
        let id = self.media_relays.outs.get(&to).map(|l| l.id.clone());
        self.sync_data_rooms(to);
        self.arm_relay_tick(now);
        let pull_back =
            edge.is_some_and(|e| self.has_participants(room) && self.needs_data(room, e));
        if pull_back {
            self.media_relays.counters.pulls[PullReason::Answer as usize] += 1;
        }
        Ok(DataRelayed {
            tag,
            link: id.unwrap_or_default(),
            pull_back,
        })
    }

    /// On the edge: `room`'s data from node `node` at `from`, which relays it under `tag` on
    /// the link named `link.id` (or a new one under `link`'s keys).
    pub fn relay_data_in(
        &mut self,
        now: Instant,
        (room, node): (&str, &str),
        from: Remote,
        link: NewLink,
        tag: u32,
    ) -> Result<(), CoreError> {
        let known = |held: &super::relay::LinkIn| held.data_rooms.iter().any(|d| d.room == room);
        self.join_link_in(now, from, link, |held| {
            match !known(held) && held.len() >= RELAYS_PER_LINK {
                true => Err(RelayRefusal::LinkFull),
                false => Ok(()),
            }
        })?;
        let held = self
            .media_relays
            .ins
            .get_mut(&from)
            .ok_or(CoreError::UnknownPeer)?;
        match held.data_rooms.iter_mut().find(|d| d.room == room) {
            Some(data) => (data.tag, data.node) = (tag, node.to_owned()),
            None => {
                held.data_rooms.push(DataIn {
                    room: room.to_owned(),
                    node: node.to_owned(),
                    tag,
                    idle: None,
                });
                self.media_relays.counters.data_started_in += 1;
                tracing::info!(room, ?from, "relaying a room's data from another node");
            }
        }
        self.arm_relay_tick(now);
        Ok(())
    }

    /// Whether `room`'s data from node `node` is to be pulled: no relay of it comes here.
    pub fn needs_data(&self, room: &str, node: &str) -> bool {
        let links = self.media_relays.ins.values();
        !links
            .flat_map(|l| &l.data_rooms)
            .any(|d| d.room == room && d.node == node)
    }

    /// Ends the relays of rooms' data on the link from `from` whose room has had nobody on
    /// one of the two nodes for [`LINGER`]; the link ends with its last relay.
    pub(super) fn check_data_in(&mut self, now: Instant, from: Remote) {
        let Some(link) = self.media_relays.ins.get(&from) else {
            return;
        };
        let wanted: Vec<bool> = link
            .data_rooms
            .iter()
            .map(|d| self.has_participants(&d.room) && self.has_participants_on(&d.room, &d.node))
            .collect();
        let Some(link) = self.media_relays.ins.get_mut(&from) else {
            return;
        };
        let mut ended = Vec::new();
        for (data, wanted) in link.data_rooms.iter_mut().zip(wanted) {
            if wanted {
                data.idle = None;
            } else if now.saturating_duration_since(*data.idle.get_or_insert(now)) >= LINGER {
                ended.push(data.tag);
            }
        }
        if ended.is_empty() {
            return;
        }
        link.data_rooms.retain(|d| !ended.contains(&d.tag));
        for tag in ended {
            tracing::info!(
                ?from,
                tag,
                "a room's data relay has nobody on one side any more"
            );
            self.media_relays.counters.data_ended += 1;
            self.send_data_ended(from, tag);
        }
        self.end_link_if_empty(from);
    }

    /// On the origin: the edge at `to` ended the relay of a room's data tagged `tag`.
    pub(super) fn end_data_out(&mut self, to: Remote, tag: u32) {
        let Some(link) = self.media_relays.outs.get_mut(&to) else {
            return;
        };
        link.data_rooms.retain(|(_, t)| *t != tag);
        match link.len() {
            0 => {
                self.remove_link_out(to);
            }
            _ => self.sync_data_rooms(to),
        }
    }

    /// Whether `room` has conference participants here.
    fn has_participants(&self, room: &str) -> bool {
        let members = self.rooms.get(room);
        members.is_some_and(|r| !r.participants.is_empty())
    }

    /// Whether the room's state, as last read, shows conference participants of `room` on
    /// node `node`.
    fn has_participants_on(&self, room: &str, node: &str) -> bool {
        let followed = self.rooms.get(room).and_then(|r| r.followed.as_ref());
        let nodes = followed.iter().flat_map(|f| &f.nodes);
        nodes.into_iter().any(|n| n.node == node && n.participants)
    }
}
