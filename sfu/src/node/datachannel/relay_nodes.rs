//! Other nodes' associations in the relay: each relay link between two nodes carries one SCTP
//! association (the edge its client, the origin its server), which the relay holds as one
//! more member that carries the channels of many participants of many rooms.
//!
//! A node's participants' channels cross on the links it is the *origin* of, and only there:
//! each node decides alone where its own channels go, so two links between the same nodes
//! (one each way) never carry a channel twice. Toward such an association the relay opens,
//! for each channel of a participant of a room the link carries, one channel with the same
//! label and reliability, its protocol naming the owner and the room (`p<id>:<room>`); a
//! message goes onto it once, whatever the number of receivers on the other node. Channels
//! the other node opens on an association are relayed to this node's participants of the
//! room they name, as a participant's are (protocol `p<id>`), never on to a third node.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use super::{
    relayed_toward, written_len, ChannelParams, DataRelay, Member, Rate, ReceiverTotal, Relayed,
    SctpAssociation, MAX_CHANNEL_NAME,
};
use crate::node::cluster::notice::MAX_ROOM_BYTES;
use crate::node::metrics::DropReason;
use crate::node::participant::ParticipantId;
use crate::node::peer::PeerId;

/// Why a channel another node opened names no participant of a room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LinkChannelError {
    /// The protocol does not start with `p`, an id and `:`.
    #[error("the protocol names no participant")]
    NoOwner,
    /// The participant's id is not 16 lowercase hex digits.
    #[error("the participant's id is not a number")]
    BadOwner,
    /// Nothing after the `:`.
    #[error("the protocol names no room")]
    NoRoom,
}

/// The protocol of a channel toward another node: its owner and its room.
pub fn link_protocol(owner: ParticipantId, room: &str) -> String {
    format!("p{owner}:{room}")
}

/// Reads what [`link_protocol`] wrote: the owner and the room.
pub fn parse_link_protocol(protocol: &str) -> Result<(ParticipantId, &str), LinkChannelError> {
    let (owner, room) = protocol
        .strip_prefix('p')
        .and_then(|rest| rest.split_once(':'))
        .ok_or(LinkChannelError::NoOwner)?;
    // As the id is written: 16 lowercase hex digits (another spelling of the same id would
    // not read back as sent).
    let digit = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    let hex = owner.len() == 16 && owner.bytes().all(digit);
    let owner = u64::from_str_radix(owner, 16)
        .ok()
        .filter(|_| hex)
        .ok_or(LinkChannelError::BadOwner)?;
    if room.is_empty() {
        return Err(LinkChannelError::NoRoom);
    }
    Ok((ParticipantId(owner), room))
}

/// What the relay keeps of another node's association beyond a member's.
#[derive(Debug, Default)]
pub(super) struct NodeSide {
    /// The rooms whose participants' channels go onto it (those its link relays publishers
    /// of, this node the origin).
    pub rooms: BTreeSet<String>,
    /// Each channel the other node opened: the room and the participant it is of.
    pub owners: HashMap<u16, (String, ParticipantId)>,
    /// Each remote participant's rate and open channels: its limits hold here as on its node.
    senders: HashMap<(String, ParticipantId), Sender>,
}

#[derive(Debug)]
struct Sender {
    rate: Rate,
    channels: usize,
}

impl NodeSide {
    /// The rate of the participant whose channel `stream` is.
    pub fn rate_of(&mut self, stream: u16) -> Option<&mut Rate> {
        let key = self.owners.get(&stream)?;
        self.senders.get_mut(key).map(|s| &mut s.rate)
    }
}

impl Member {
    /// The room of its channel `stream`: a participant's own room, or the one another node
    /// named for it.
    pub(super) fn room_of(&self, stream: u16) -> Option<&str> {
        match &self.node {
            Some(node) => node.owners.get(&stream).map(|(room, _)| room.as_str()),
            None => Some(&self.room),
        }
    }
}

impl DataRelay {
    /// Another node's association on a relay link, as its `client` (the edge's end, which
    /// starts it) or its server (the origin's). It carries no room until
    /// [`node_rooms`](Self::node_rooms) names some.
    pub fn join_node(&mut self, now: Instant, id: PeerId, client: bool) {
        self.now = Some(now);
        if self.members.contains_key(&id) {
            return;
        }
        // Whatever size another node relays: each message is within that node's limit for
        // its participants, which may be above this one's, and past what its stack takes the
        // link's association would end, every room's channels with it. One larger than a
        // receiver here takes is dropped toward that receiver alone.
        let max = u64::from(u32::MAX);
        let sctp = match client {
            true => SctpAssociation::client(now, max).for_link(),
            false => SctpAssociation::new(now, max, None).for_link(),
        };
        let member = Member {
            room: String::new(),
            public: ParticipantId(0),
            node: Some(Box::default()),
            sctp,
            own: Default::default(),
            relayed: HashMap::new(),
            by_stream: HashMap::new(),
            rate: Rate {
                since: now,
                messages: 0,
                bytes: 0,
            },
            timer: None,
            max_message_size: None,
            waiting: ReceiverTotal::default(),
        };
        self.members.insert(id, member);
        // A client's INIT goes at once.
        self.collect(id);
    }

    /// Whether `id` is another node's association.
    pub fn is_node(&self, id: PeerId) -> bool {
        self.members.get(&id).is_some_and(|m| m.node.is_some())
    }

    /// Other nodes' associations that are up.
    pub fn nodes_up(&self) -> usize {
        let nodes = self.members.values().filter(|m| m.node.is_some());
        nodes.filter(|m| m.sctp.is_established()).count()
    }

    /// The rooms whose participants' channels go onto node association `id`: channels of
    /// rooms new to it are opened on it, those of rooms it no longer carries closed.
    pub fn node_rooms(&mut self, id: PeerId, rooms: BTreeSet<String>) {
        let Some(node) = self.members.get(&id).and_then(|m| m.node.as_ref()) else {
            return;
        };
        let gone: Vec<String> = node.rooms.difference(&rooms).cloned().collect();
        let new: Vec<String> = rooms.difference(&node.rooms).cloned().collect();
        for room in gone {
            self.leave_room(&room, id);
            self.close_toward_node(id, &room);
        }
        for room in new {
            let Some(waiting) = self.members.get(&id).map(|m| m.waiting.clone()) else {
                return;
            };
            let channels = self.channels_in(&room, true, &waiting);
            self.rooms.entry(room).or_default().push(id);
            if let Some(member) = self.members.get_mut(&id) {
                member.relayed.extend(channels);
            }
        }
        if let Some(node) = self.members.get_mut(&id).and_then(|m| m.node.as_mut()) {
            node.rooms = rooms;
        }
        self.open_toward(id);
        self.collect(id);
    }

    /// Node association `id` is gone with its link: the channels it carried close toward
    /// this node's participants, each counted.
    pub fn leave_node(&mut self, id: PeerId) {
        let closed = self
            .members
            .values()
            .flat_map(|m| m.relayed.keys())
            .filter(|(owner, _)| *owner == id)
            .count();
        self.counters.data_link_channels_closed += closed as u64;
        self.leave(id);
    }

    /// The channels toward a new member of `room`: its participants' (with the room in
    /// their protocol, toward another node's association), and, toward a participant, those
    /// other nodes opened for the room.
    pub(super) fn channels_in(
        &self,
        room: &str,
        toward_link: bool,
        waiting: &ReceiverTotal,
    ) -> Vec<((PeerId, u16), Relayed)> {
        let mut channels = Vec::new();
        let local = self.rooms.get(room).into_iter().flatten();
        for (&id, member) in local.filter_map(|id| self.members.get_key_value(id)) {
            if member.node.is_some() {
                continue;
            }
            let link = toward_link.then_some(room);
            channels.extend(member.own.iter().map(|(&stream, params)| {
                (
                    (id, stream),
                    relayed_toward(params, member.public, link, waiting),
                )
            }));
        }
        if toward_link {
            return channels;
        }
        for (&id, member) in &self.members {
            let Some(node) = &member.node else {
                continue;
            };
            for (&stream, params) in &member.own {
                match node.owners.get(&stream) {
                    Some((r, owner)) if r == room => {
                        let relayed = relayed_toward(params, *owner, None, waiting);
                        channels.push(((id, stream), relayed));
                    }
                    _ => {}
                }
            }
        }
        channels
    }

    /// Closes, on node association `id`, the channels of `room`'s participants.
    fn close_toward_node(&mut self, id: PeerId, room: &str) {
        let Some(member) = self.members.get(&id) else {
            return;
        };
        let of_room = |owner: &PeerId| {
            let owner = self.members.get(owner);
            owner.is_some_and(|m| m.node.is_none() && m.room == room)
        };
        let keys: Vec<(PeerId, u16)> = member
            .relayed
            .keys()
            .filter(|(owner, _)| of_room(owner))
            .copied()
            .collect();
        let Some(member) = self.members.get_mut(&id) else {
            return;
        };
        for key in keys {
            if let Some(Relayed {
                stream: Some(s), ..
            }) = member.relayed.remove(&key)
            {
                member.by_stream.remove(&s);
                member.sctp.close_channel(s);
            }
        }
    }

    /// A channel another node opened on association `id`: relayed to this node's
    /// participants of the room its protocol names, within its owner's channel limit.
    pub(super) fn opened_on_link(&mut self, id: PeerId, stream: u16, params: ChannelParams) {
        let (Some(member), Some(now)) = (self.members.get_mut(&id), self.now) else {
            return;
        };
        let (owner, room) = match parse_link_protocol(&params.protocol) {
            Ok((owner, room)) => (owner, room.to_owned()),
            Err(e) => {
                tracing::debug!(peer = %id, "a channel from another node refused: {e}");
                member.sctp.close_channel(stream);
                self.counters.drop(DropReason::DataLinkChannel);
                return;
            }
        };
        let Some(node) = member.node.as_mut() else {
            return;
        };
        // Bounded as a participant's open is on its own node: the label (the link's protocol
        // names the owner and the room in place of the owner's), a room a cluster can name,
        // and the open counted as a message of its owner's.
        if written_len(&params.label) > MAX_CHANNEL_NAME || room.len() > MAX_ROOM_BYTES {
            member.sctp.close_channel(stream);
            self.counters.drop(DropReason::DataChannelName);
            return;
        }
        let sender = node.senders.entry((room.clone(), owner)).or_insert(Sender {
            rate: Rate {
                since: now,
                messages: 0,
                bytes: 0,
            },
            channels: 0,
        });
        let refused = if sender.channels >= self.config.channels_per_participant {
            Some(DropReason::DataChannelLimit)
        } else if !self.config.within_rate(&mut sender.rate, now, 0) {
            Some(DropReason::DataRate)
        } else {
            None
        };
        if let Some(reason) = refused {
            member.sctp.close_channel(stream);
            self.counters.drop(reason);
            return;
        }
        sender.channels += 1;
        node.owners.insert(stream, (room.clone(), owner));
        member.own.insert(stream, params.clone());
        self.relay_opened(id, stream, &params, (&room, owner));
    }

    /// A channel another node closed on association `id`: closed toward this node's
    /// participants.
    pub(super) fn closed_on_link(&mut self, id: PeerId, stream: u16) {
        if !self
            .members
            .get(&id)
            .is_some_and(|m| m.own.contains_key(&stream))
        {
            return;
        }
        // Closed while its room is known, which names its receivers.
        self.close_relays(id, stream);
        let Some(member) = self.members.get_mut(&id) else {
            return;
        };
        member.own.remove(&stream);
        let Some(node) = member.node.as_mut() else {
            return;
        };
        let Some(key) = node.owners.remove(&stream) else {
            return;
        };
        if let Some(sender) = node.senders.get_mut(&key) {
            sender.channels -= 1;
            if sender.channels == 0 {
                node.senders.remove(&key);
            }
        }
    }
}

#[cfg(test)]
#[path = "relay_nodes_tests.rs"]
mod tests;
