//! The data channels of a core's participants: each participant's SCTP association, the
//! channels it opened, and for every other participant of its room the channel the node opened
//! toward that one with the same label and reliability (protocol `p<participant id>`). A
//! message is handed to every receiver's association as the same shared bytes.
//!
//! Nothing is lost silently. Toward each receiver a relayed channel queues what its association
//! cannot take yet (not open, or its send window full), up to the configured backlog, and all
//! its relayed channels together up to [`RECEIVER_BACKLOGS`] of them (`backlog.rs`): a
//! reliable channel past either is closed toward that receiver alone, a lossy one drops its
//! oldest; each counted by reason. A participant's messages past its rates, larger than a
//! receiver takes, or channels past its limit are refused and counted.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::backlog::{Backlog, ReceiverTotal};
use super::dcep::{ChannelParams, Reliability};
use super::sctp::{MessageKind, SctpAssociation, SctpEvent};
use super::DataChannelConfig;
use crate::node::metrics::{DropReason, NodeCounters};
use crate::node::participant::ParticipantId;
use crate::node::peer::PeerId;

/// What the stack may hold unacknowledged on one relayed channel before the relay keeps the
/// rest in its own queue, where it can be bounded and dropped oldest first.
const SEND_WINDOW: usize = 64 * 1024;
/// What all the relayed channels toward one participant may hold together, in backlogs
/// (`backlog_bytes`) of one channel: a participant that reads nothing holds this much, not a
/// backlog for every channel of every other participant.
pub const RECEIVER_BACKLOGS: usize = 8;
/// Channel backlogs another node's link may hold toward it in all: it carries every channel
/// of the rooms it relays, so more than a participant, but a stalled node holds no more.
pub const LINK_BACKLOGS: usize = 64;
/// The longest label and protocol of a channel, together and as JSON writes them
/// ([`written_len`]), that the relay takes: both are copied to every other participant and
/// into each one's event stream (DCEP allows 64 KiB of each, which alone would fill an event
/// stream and close it).
pub const MAX_CHANNEL_NAME: usize = 1024;

/// The bytes `text` takes in an event stream's JSON: a control character is written as six
/// (`\u0001`), a quote or backslash as two, the rest as in UTF-8.
pub fn written_len(text: &str) -> usize {
    text.chars()
        .map(|c| match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if c < ' ' => 6,
            c => c.len_utf8(),
        })
        .sum()
}

/// A channel of a participant, as the room's state and events show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelInfo {
    /// Whose channel.
    pub owner: ParticipantId,
    /// Its stream on the owner's association.
    pub stream: u16,
    /// What it is.
    pub params: ChannelParams,
}

/// What the relay tells the room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayEvent {
    /// A participant opened a channel.
    Opened(ChannelInfo),
    /// A participant's channel closed (by it, or as it left).
    Closed(ChannelInfo),
}

/// A channel toward a receiver: the owner's channel it relays, and what waits for it.
#[derive(Debug)]
struct Relayed {
    /// Its stream on the receiver's association, once opened there.
    stream: Option<u16>,
    /// Acknowledged: messages may go.
    open: bool,
    params: ChannelParams,
    backlog: Backlog,
}

impl Relayed {
    fn lossy(&self) -> bool {
        self.params.unordered && self.params.reliability != Reliability::Reliable
    }
}

/// Messages and bytes a participant sent in the current second.
#[derive(Debug, Clone, Copy)]
struct Rate {
    since: Instant,
    messages: u32,
    bytes: u64,
}

#[derive(Debug)]
struct Member {
    /// A participant's room; none for another node's association.
    room: String,
    public: ParticipantId,
    /// Set for another node's association on a relay link (see `relay_nodes.rs`).
    node: Option<Box<nodes::NodeSide>>,
    sctp: SctpAssociation,
    /// Its channels, by its stream.
    own: BTreeMap<u16, ChannelParams>,
    /// Channels toward it, by their owner and the owner's stream.
    relayed: HashMap<(PeerId, u16), Relayed>,
    /// Its streams the node opened, back to what they relay.
    by_stream: HashMap<u16, (PeerId, u16)>,
    rate: Rate,
    timer: Option<Instant>,
    /// The largest message it takes.
    max_message_size: Option<u64>,
    /// What waits toward it over all its relayed channels.
    waiting: ReceiverTotal,
}

/// Every participant's data channels on one core.
#[derive(Debug, Default)]
pub struct DataRelay {
    config: DataChannelConfig,
    members: HashMap<PeerId, Member>,
    rooms: HashMap<String, Vec<PeerId>>,
    timers: BTreeSet<(Instant, PeerId)>,
    /// SCTP packets for participants' DTLS associations.
    out: VecDeque<(PeerId, Bytes)>,
    /// Events for a room, with the participant whose channel it is.
    events: VecDeque<(String, PeerId, RelayEvent)>,
    counters: NodeCounters,
    /// The latest time an input carried.
    now: Option<Instant>,
    /// Members whose association had events left after its packets were taken.
    unsettled: Vec<PeerId>,
}

impl DataRelay {
    /// A relay under `config`.
    pub fn new(config: DataChannelConfig) -> Self {
        Self {
            config,
            ..Self::default()
        }
    }

    /// Its settings.
    pub fn config(&self) -> &DataChannelConfig {
        &self.config
    }

    /// What it counted.
    pub fn counters(&self) -> &NodeCounters {
        &self.counters
    }

    /// The latest time an input carried; `None` before any.
    pub fn now(&self) -> Option<Instant> {
        self.now
    }

    /// Entries of its tables: zero once every participant left.
    pub fn entries(&self) -> usize {
        self.members.len() + self.rooms.len() + self.timers.len() + self.unsettled.len()
    }

    /// Whether `id` has data channels (its offer had a data section).
    pub fn has(&self, id: PeerId) -> bool {
        self.members.contains_key(&id)
    }

    /// A participant with a data section, in `room`: it gets the channels of those there,
    /// once its association is up. `remote_max` is its `a=max-message-size`.
    pub fn join(
        &mut self,
        now: Instant,
        id: PeerId,
        (room, public): (&str, ParticipantId),
        remote_max: Option<u64>,
    ) {
        self.now = Some(now);
        if self.members.contains_key(&id) {
            return;
        }
        let waiting = ReceiverTotal::default();
        let relayed = self
            .channels_in(room, false, &waiting)
            .into_iter()
            .collect();
        let sctp = SctpAssociation::new(now, self.config.max_message_size, remote_max);
        let rate = Rate {
            since: now,
            messages: 0,
            bytes: 0,
        };
        let member = Member {
            room: room.to_owned(),
            public,
            sctp,
            own: BTreeMap::new(),
            relayed,
            by_stream: HashMap::new(),
            rate,
            node: None,
            timer: None,
            max_message_size: remote_max,
            waiting,
        };
        self.members.insert(id, member);
        self.rooms.entry(room.to_owned()).or_default().push(id);
    }

    /// A participant left: its channels close toward everyone.
    pub fn leave(&mut self, id: PeerId) {
        let Some(member) = self.members.get(&id) else {
            return;
        };
        // Closed while it is still in the room's list, which names their receivers.
        let streams: Vec<u16> = member.own.keys().copied().collect();
        for stream in streams {
            self.close_relays(id, stream);
        }
        let Some(member) = self.members.remove(&id) else {
            return;
        };
        if let Some(at) = member.timer {
            self.timers.remove(&(at, id));
        }
        let rooms = match &member.node {
            Some(node) => node.rooms.iter().cloned().collect(),
            None => vec![member.room.clone()],
        };
        for room in rooms {
            self.leave_room(&room, id);
        }
        if member.node.is_some() {
            return;
        }
        for (stream, params) in member.own {
            let info = ChannelInfo {
                owner: member.public,
                stream,
                params,
            };
            self.events
                .push_back((member.room.clone(), id, RelayEvent::Closed(info)));
        }
    }

    /// An SCTP packet from participant `id` (its DTLS application data).
    pub fn handle_packet(&mut self, now: Instant, id: PeerId, packet: &[u8]) {
        self.now = Some(now);
        let Some(member) = self.members.get_mut(&id) else {
            return;
        };
        if let Err(refused) = member.sctp.handle_packet(now, packet) {
            tracing::trace!(peer = %id, %refused, "SCTP packet refused");
            self.counters.drop(DropReason::DataSctp);
        }
        self.drive(now, id);
        self.settle(now);
    }

    /// When [`handle_timeout`](Self::handle_timeout) is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.first().map(|&(at, _)| at)
    }

    /// Serves every association whose timer is due.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = Some(now);
        while let Some(&(at, id)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            let Some(member) = self.members.get_mut(&id) else {
                continue;
            };
            member.timer = None;
            member.sctp.handle_timeout(now);
            self.drive(now, id);
        }
        self.settle(now);
    }

    /// Drives every member whose association still has events, until none has.
    fn settle(&mut self, now: Instant) {
        while let Some(id) = self.unsettled.pop() {
            self.drive(now, id);
        }
    }

    /// The next SCTP packet for a participant's DTLS association.
    pub fn poll_packet(&mut self) -> Option<(PeerId, Bytes)> {
        self.out.pop_front()
    }

    /// The next event for a room: its name, whose channel, and what happened.
    pub fn poll_event(&mut self) -> Option<(String, PeerId, RelayEvent)> {
        self.events.pop_front()
    }

    /// The channels of participant `id`, for the room's state.
    pub fn channels_of(&self, id: PeerId) -> Vec<ChannelInfo> {
        let Some(member) = self.members.get(&id) else {
            return Vec::new();
        };
        member
            .own
            .iter()
            .map(|(&stream, params)| ChannelInfo {
                owner: member.public,
                stream,
                params: params.clone(),
            })
            .collect()
    }

    /// Everything member `id`'s association has: its events acted on, channels opened toward
    /// it once it is up, queues moved on, packets taken, its timer re-armed.
    fn drive(&mut self, now: Instant, id: PeerId) {
        while let Some(event) = self.members.get_mut(&id).and_then(|m| m.sctp.poll_event()) {
            match event {
                SctpEvent::Opened { stream, params } => self.opened(now, id, stream, params),
                SctpEvent::Acked { stream } => {
                    if let Some(relayed) = self.relayed_by_stream(id, stream) {
                        relayed.open = true;
                    }
                }
                SctpEvent::Message { stream, kind, data } => {
                    self.relay(now, id, stream, kind, &data);
                }
                SctpEvent::UnknownPpid { stream } => {
                    tracing::debug!(peer = %id, stream, "data channel message of an unknown PPID");
                    self.counters.drop(DropReason::DataUnknownPpid);
                }
                SctpEvent::DcepIgnored { stream } => {
                    tracing::debug!(peer = %id, stream, "DCEP message ignored");
                    self.counters.drop(DropReason::DataDcep);
                }
                SctpEvent::Closed { stream } => self.closed(id, stream),
                SctpEvent::TooManyStreams => {
                    tracing::debug!(peer = %id, "data channel association past its streams");
                    self.counters.drop(DropReason::DataStreams);
                }
                SctpEvent::Unfinished => {
                    tracing::debug!(peer = %id, "data channel association left DATA unfinished");
                    self.counters.drop(DropReason::DataUnfinished);
                }
                SctpEvent::Lost => {
                    let streams: Vec<u16> = self.members[&id].own.keys().copied().collect();
                    for stream in streams {
                        self.closed(id, stream);
                    }
                }
            }
        }
        self.open_toward(id);
        self.flush_all(id);
        self.collect(id);
    }

    fn relayed_by_stream(&mut self, id: PeerId, stream: u16) -> Option<&mut Relayed> {
        let member = self.members.get_mut(&id)?;
        let key = member.by_stream.get(&stream)?;
        member.relayed.get_mut(key)
    }

    /// A participant's new channel: kept, and a relayed channel set up toward every other
    /// participant of the room (opened at once where its association is up).
    /// A channel past the participant's limit, with a longer name than [`MAX_CHANNEL_NAME`],
    /// or opened past its message rate (an open counts as a message) is closed as it opens.
    fn opened(&mut self, now: Instant, id: PeerId, stream: u16, params: ChannelParams) {
        let Some(member) = self.members.get_mut(&id) else {
            return;
        };
        if member.node.is_some() {
            self.opened_on_link(id, stream, params);
            return;
        }
        // The rate first: every open counts, refused or not.
        let refused = if !self.config.within_rate(&mut member.rate, now, 0) {
            Some(DropReason::DataRate)
        } else if member.own.len() >= self.config.channels_per_participant {
            Some(DropReason::DataChannelLimit)
        } else if written_len(&params.label) + written_len(&params.protocol) > MAX_CHANNEL_NAME {
            Some(DropReason::DataChannelName)
        } else {
            None
        };
        if let Some(reason) = refused {
            member.sctp.close_channel(stream);
            self.counters.drop(reason);
            return;
        }
        member.own.insert(stream, params.clone());
        let (room, public) = (member.room.clone(), member.public);
        self.relay_opened(id, stream, &params, (&room, public));
        let info = ChannelInfo {
            owner: public,
            stream,
            params,
        };
        self.events.push_back((room, id, RelayEvent::Opened(info)));
    }

    /// Sets up, toward every other member of `room`, the channel relaying `id`'s `stream`
    /// (of participant `public`), opened at once where the receiver's association is up.
    fn relay_opened(
        &mut self,
        id: PeerId,
        stream: u16,
        params: &ChannelParams,
        (room, public): (&str, ParticipantId),
    ) {
        self.for_others(id, stream, |relay, other| {
            if let Some(receiver) = relay.members.get_mut(&other) {
                let link = receiver.node.is_some().then_some(room);
                let relayed = relayed_toward(params, public, link, &receiver.waiting);
                receiver.relayed.insert((id, stream), relayed);
                relay.open_toward(other);
                relay.collect(other);
            }
        });
    }

    /// A channel closed by its peer: the owner's closes toward everyone; a relayed one is
    /// forgotten (its receiver closed it).
    fn closed(&mut self, id: PeerId, stream: u16) {
        let Some(member) = self.members.get_mut(&id) else {
            return;
        };
        if let Some(key) = member.by_stream.remove(&stream) {
            member.relayed.remove(&key);
            return;
        }
        if member.node.is_some() {
            self.closed_on_link(id, stream);
            return;
        }
        let Some(params) = member.own.remove(&stream) else {
            return;
        };
        let info = ChannelInfo {
            owner: member.public,
            stream,
            params,
        };
        let room = member.room.clone();
        self.close_relays(id, stream);
        self.events.push_back((room, id, RelayEvent::Closed(info)));
    }

    /// Closes the channel relaying `owner`'s `stream` toward each other participant.
    fn close_relays(&mut self, owner: PeerId, stream: u16) {
        self.for_others(owner, stream, |relay, other| {
            if let Some(receiver) = relay.members.get_mut(&other) {
                if let Some(Relayed {
                    stream: Some(s), ..
                }) = receiver.relayed.remove(&(owner, stream))
                {
                    receiver.by_stream.remove(&s);
                    receiver.sctp.close_channel(s);
                }
                relay.collect(other);
            }
        });
    }

    /// A message on `id`'s channel `stream`, queued toward every receiver.
    fn relay(&mut self, now: Instant, id: PeerId, stream: u16, kind: MessageKind, data: &Bytes) {
        let Some(member) = self.members.get_mut(&id) else {
            return;
        };
        if !member.own.contains_key(&stream) {
            // A stream no DATA_CHANNEL_OPEN of its own opened (one negotiated out of band, or
            // a channel the node opened toward it): nothing to relay it on.
            self.counters.drop(DropReason::DataNoChannel);
            return;
        }
        let rate = match member.node.as_mut() {
            Some(node) => node.rate_of(stream),
            None => Some(&mut member.rate),
        };
        if !rate.is_some_and(|rate| self.config.within_rate(rate, now, data.len())) {
            self.counters.drop(DropReason::DataRate);
            return;
        }
        self.for_others(id, stream, |relay, other| {
            let Some(receiver) = relay.members.get_mut(&other) else {
                return;
            };
            if receiver
                .max_message_size
                .is_some_and(|max| data.len() as u64 > max)
            {
                relay.counters.drop(DropReason::DataTooLarge);
                return;
            }
            let Some(relayed) = receiver.relayed.get_mut(&(id, stream)) else {
                // Its copy of the channel closed past its backlog: this goes as those did.
                relay.counters.drop(DropReason::DataBacklog);
                return;
            };
            // The same bytes for every receiver: a reference count, no copy.
            relayed.backlog.push(kind, data.clone());
            relay.flush(other, (id, stream));
            relay.collect(other);
        });
    }

    /// Opens, on `id`'s association once it is up, every relayed channel not opened yet.
    fn open_toward(&mut self, id: PeerId) {
        let Some(member) = self.members.get_mut(&id) else {
            return;
        };
        if !member.sctp.is_established() {
            return;
        }
        for (key, relayed) in member
            .relayed
            .iter_mut()
            .filter(|(_, r)| r.stream.is_none())
        {
            match member.sctp.open_channel(&relayed.params) {
                Ok(stream) => {
                    relayed.stream = Some(stream);
                    member.by_stream.insert(stream, *key);
                }
                Err(e) => tracing::debug!(peer = %id, "relayed channel not opened: {e}"),
            }
        }
    }

    /// Moves on what waits on every channel toward `id`.
    fn flush_all(&mut self, id: PeerId) {
        let backlog = self.config.backlog_bytes;
        let Some(member) = self.members.get_mut(&id) else {
            return;
        };
        let Member {
            sctp,
            relayed,
            by_stream,
            node,
            ..
        } = member;
        let counters = &mut self.counters;
        let link = node.is_some();
        relayed.retain(|_, r| {
            let kept = flush(sctp, r, (backlog, link), counters);
            if !kept {
                cut_off(id, r, by_stream);
            }
            kept
        });
    }

    /// Moves on what waits on the channel `key` toward `id`.
    fn flush(&mut self, id: PeerId, key: (PeerId, u16)) {
        let backlog = self.config.backlog_bytes;
        let Some(member) = self.members.get_mut(&id) else {
            return;
        };
        let Some(relayed) = member.relayed.get_mut(&key) else {
            return;
        };
        let limits = (backlog, member.node.is_some());
        if !flush(&mut member.sctp, relayed, limits, &mut self.counters) {
            cut_off(id, relayed, &mut member.by_stream);
            member.relayed.remove(&key);
        }
    }

    /// Takes member `id`'s packets for its DTLS association and re-arms its timer.
    fn collect(&mut self, id: PeerId) {
        let Some(member) = self.members.get_mut(&id) else {
            return;
        };
        while let Some(packet) = member.sctp.poll_transmit() {
            self.out.push_back((id, packet));
        }
        if member.sctp.has_events() && !self.unsettled.contains(&id) {
            self.unsettled.push(id);
        }
        let next = member.sctp.poll_timeout();
        if next != member.timer {
            if let Some(old) = std::mem::replace(&mut member.timer, next) {
                self.timers.remove(&(old, id));
            }
            if let Some(at) = next {
                self.timers.insert((at, id));
            }
        }
    }

    /// Runs `f` for each other member of the room of `id`'s channel `stream`: its room's
    /// participants, and the other nodes' associations that carry the room (none for a
    /// channel from another node: relays do not chain). The room's list is lent out meanwhile
    /// (`f` sees it empty), so a message reaches its receivers with no list made for it.
    fn for_others(&mut self, id: PeerId, stream: u16, mut f: impl FnMut(&mut Self, PeerId)) {
        let Some(member) = self.members.get(&id) else {
            return;
        };
        let from_link = member.node.is_some();
        let Some(ids) = member.room_of(stream).and_then(|r| self.rooms.get_mut(r)) else {
            return;
        };
        let ids = std::mem::take(ids);
        for &other in ids.iter().filter(|&&m| m != id) {
            if from_link && self.members.get(&other).is_some_and(|m| m.node.is_some()) {
                continue;
            }
            f(self, other);
        }
        let room = self.members.get(&id).and_then(|m| m.room_of(stream));
        if let Some(slot) = room.and_then(|r| self.rooms.get_mut(r)) {
            *slot = ids;
        }
    }

    /// Takes member `id` off `room`'s list, and the list away once empty.
    fn leave_room(&mut self, room: &str, id: PeerId) {
        if let Some(ids) = self.rooms.get_mut(room) {
            ids.retain(|&m| m != id);
            if ids.is_empty() {
                self.rooms.remove(room);
            }
        }
    }
}

/// Moves what waits on `relayed` into the receiver's association `sctp` while its send
/// window has room, then holds the rest within `backlog`. Whether the channel stays: a
/// reliable one past its backlog cannot skip a message, so it is closed toward this receiver
/// (its queue counted as dropped); a lossy one drops its oldest.
fn flush(
    sctp: &mut SctpAssociation,
    relayed: &mut Relayed,
    (backlog, link): (usize, bool),
    counters: &mut NodeCounters,
) -> bool {
    if let (Some(stream), true) = (relayed.stream, relayed.open) {
        while sctp.buffered(stream) < SEND_WINDOW {
            let Some((kind, data)) = relayed.backlog.pop() else {
                break;
            };
            match sctp.send(stream, kind, &data) {
                Ok(()) if link => counters.data_link_messages_out += 1,
                Ok(()) => {
                    counters.data_messages_relayed += 1;
                    counters.data_bytes_relayed += data.len() as u64;
                }
                Err(e) => {
                    tracing::debug!("relayed message not sent: {e}");
                    counters.drop(DropReason::SendFailed);
                }
            }
        }
    }
    // Another node's association carries many rooms' channels: more backlogs in all.
    let receiver = backlog.saturating_mul(match link {
        true => LINK_BACKLOGS,
        false => RECEIVER_BACKLOGS,
    });
    let over = |b: &Backlog| b.queued() > backlog || b.receiver_total() > receiver;
    if !over(&relayed.backlog) {
        return true;
    }
    if relayed.lossy() {
        while over(&relayed.backlog) && relayed.backlog.pop().is_some() {
            counters.drop(DropReason::DataLossyOldest);
        }
        return true;
    }
    counters.drop_many(DropReason::DataBacklog, relayed.backlog.len() as u64);
    if let Some(stream) = relayed.stream {
        sctp.close_channel(stream);
    }
    false
}

/// The bookkeeping of a relayed channel toward `id` closed at its backlog.
fn cut_off(id: PeerId, relayed: &Relayed, by_stream: &mut HashMap<u16, (PeerId, u16)>) {
    if let Some(stream) = relayed.stream {
        by_stream.remove(&stream);
    }
    tracing::info!(peer = %id, "relayed channel closed: its backlog is full");
}

impl DataChannelConfig {
    /// Counts a message of `len` bytes against `rate`; whether it is within the limits.
    fn within_rate(&self, rate: &mut Rate, now: Instant, len: usize) -> bool {
        if now.saturating_duration_since(rate.since) >= Duration::from_secs(1) {
            *rate = Rate {
                since: now,
                messages: 0,
                bytes: 0,
            };
        }
        let bytes = rate.bytes + len as u64;
        if rate.messages >= self.messages_per_second || bytes > self.bytes_per_second {
            return false;
        }
        rate.messages += 1;
        rate.bytes = bytes;
        true
    }
}

/// The channel toward a receiver relaying a channel of `owner` with `params`: the same label
/// and reliability, the protocol naming the sender (and its room, toward another node's
/// association, `link`).
fn relayed_toward(
    params: &ChannelParams,
    owner: ParticipantId,
    link: Option<&str>,
    waiting: &ReceiverTotal,
) -> Relayed {
    let protocol = match link {
        Some(room) => link_protocol(owner, room),
        None => format!("p{owner}"),
    };
    Relayed {
        stream: None,
        open: false,
        params: ChannelParams {
            protocol,
            ..params.clone()
        },
        backlog: Backlog::new(waiting),
    }
}

#[path = "relay_nodes.rs"]
mod nodes;
pub use nodes::{link_protocol, parse_link_protocol, LinkChannelError};

#[cfg(test)]
#[path = "relay_tests.rs"]
mod tests;
