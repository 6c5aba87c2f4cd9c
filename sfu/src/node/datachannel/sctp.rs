//! One participant's SCTP association (RFC 8261) over its DTLS association, on the sans-IO
//! `sctp-proto` stack, behind the node's own small interface: SCTP packets and `now` in,
//! packets, a timer and channel events out. The node is the DTLS server, so the channels it
//! opens take odd stream ids (RFC 8832 section 6); DCEP ([`super::dcep`]) opens them in band.
//! The same association runs between two nodes over a relay link, the edge's end as the
//! client ([`SctpAssociation::client`], even stream ids), the origin's as the server.
//!
//! Where it allocates: each packet in is copied into one buffer the association keeps, which
//! it takes back once the stack let go of the packet before (a SACK, a whole message read),
//! so only a packet whose chunks the stack still holds costs a new one; a message read is
//! gathered from its chunks into one buffer of its length (never concatenated piece by piece);
//! a message written is handed over as shared bytes, which the stack slices into chunks
//! without copying (a chunk's header and each packet it builds are the stack's allocations).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use sctp_proto::{
    Association, AssociationHandle, ClientConfig, DatagramEvent, Endpoint, EndpointConfig, Event,
    Payload, PayloadProtocolIdentifier as Ppid, ReliabilityType, ServerConfig, StreamEvent,
    TransportConfig,
};
use smallvec::SmallVec;

use super::dcep::{ChannelParams, Dcep, DcepError, Reliability};
use super::held::Held;
use super::screen::{screen, SctpRefusal};
#[cfg(doc)]
use crate::node::dtls::MTU;

/// The SCTP stack wants a peer address; the DTLS association is the only peer.
const PEER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 5000);
/// The most user data one DATA chunk carries. The stack bundles chunks into a packet up to
/// this plus its headers (28 bytes), but counts neither each chunk's padding (up to 3 bytes)
/// nor the last chunk's header: a packet of many one-byte messages overshoots by a fifth. At
/// 900, the largest packet (about 1,120 bytes) stays within what a DTLS record of [`MTU`]
/// takes.
const MAX_CHUNK_PAYLOAD: u32 = 900;
/// The one byte an empty message carries (RFC 8831 section 6.6).
const EMPTY: &[u8] = &[0];
/// The highest stream id a channel takes: an association has at most 65,535 streams.
const LAST_STREAM: u16 = 65_534;
/// Free stream ids a channel's open tries before it gives up: the stack refuses one whose
/// reset it has not finished (it no longer lists it, but waits for the peer's answer).
const STREAM_TRIES: usize = 4;
/// Streams the peer may make the stack hold at once. A browser opens one per channel
/// (a participant has at most a few dozen; a relay link, one per channel it relays); the
/// stack makes one for DATA on any stream id (about 300 bytes each, never freed unless
/// reset), so a peer past this has its association ended.
pub const MAX_PEER_STREAMS: usize = 4096;

fn clamp(size: u64) -> u32 {
    u32::try_from(size).unwrap_or(u32::MAX)
}

fn endpoint_config() -> Arc<EndpointConfig> {
    let mut config = EndpointConfig::default();
    config.max_payload_size(MAX_CHUNK_PAYLOAD);
    Arc::new(config)
}

/// A data channel's reliability is per stream; the association never gives up.
fn transport(max_message_size: u64) -> Arc<TransportConfig> {
    let transport = TransportConfig::default()
        .with_max_init_retransmits(None)
        .with_max_data_retransmits(None)
        .with_max_receive_message_size(clamp(max_message_size));
    Arc::new(transport)
}

/// Why the association refused something.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SctpError {
    /// The association is not established (or is gone).
    #[error("the SCTP association is not established")]
    NotEstablished,
    /// No more odd stream ids are free.
    #[error("no stream id left")]
    NoStreamId,
    /// The stream is not an open channel.
    #[error("stream {0} is not an open channel")]
    UnknownStream(u16),
    /// The stack refused: its reason.
    #[error("SCTP: {0}")]
    Stack(String),
    /// A DCEP message that could not be read or written.
    #[error(transparent)]
    Dcep(#[from] DcepError),
}

/// What a message is (RFC 8831 section 8): its PPID, the empty variants folded in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    /// A string (PPID 51, or 56 empty).
    String,
    /// Binary (PPID 53, or 57 empty).
    Binary,
}

/// What the association has for the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SctpEvent {
    /// The peer opened a channel (its DATA_CHANNEL_OPEN, acknowledged).
    Opened {
        /// Its stream.
        stream: u16,
        /// What it is.
        params: ChannelParams,
    },
    /// A channel the node opened is acknowledged.
    Acked {
        /// Its stream.
        stream: u16,
    },
    /// A whole message.
    Message {
        /// Its stream.
        stream: u16,
        /// String or binary.
        kind: MessageKind,
        /// Its bytes, empty for the empty variants.
        data: Bytes,
    },
    /// A message whose PPID is none of RFC 8831 section 8's (nor DCEP): not a WebRTC message,
    /// nothing to relay.
    UnknownPpid {
        /// Its stream.
        stream: u16,
    },
    /// A DCEP message left unanswered: an open on a stream in use, an ack for nothing, one
    /// that does not read, or an open whose ack could not be written.
    DcepIgnored {
        /// Its stream.
        stream: u16,
    },
    /// The peer closed a channel (reset its stream).
    Closed {
        /// Its stream.
        stream: u16,
    },
    /// The peer sent on more streams than [`MAX_PEER_STREAMS`]: the association is ended (a
    /// [`SctpEvent::Lost`] follows).
    TooManyStreams,
    /// The peer left more DATA unfinished or unread than any message needs (see `held.rs`):
    /// the association is ended (a [`SctpEvent::Lost`] follows).
    Unfinished,
    /// The association ended.
    Lost,
}

/// A channel's state on this association.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Channel {
    /// The node's: its DATA_CHANNEL_OPEN sent, no ACK yet.
    Opening,
    /// Open both ways.
    Open,
}

/// One participant's SCTP association, server side: the peer's INIT starts it.
pub struct SctpAssociation {
    endpoint: Endpoint,
    association: Option<(AssociationHandle, Association)>,
    established: bool,
    channels: BTreeMap<u16, Channel>,
    /// The largest message the peer takes (its `a=max-message-size`).
    remote_max_message_size: u32,
    next_stream: u16,
    /// Streams the peer may make the stack hold ([`MAX_PEER_STREAMS`]); `None` on a relay
    /// link, whose streams are not counted at all.
    max_peer_streams: Option<usize>,
    /// Whether this end takes the peer's INIT (the server's, until it has its association).
    takes_init: bool,
    events: VecDeque<SctpEvent>,
    /// Packets polled from the stack, one SCTP packet each.
    transmit: VecDeque<Bytes>,
    /// Where packets in are copied for the stack, which takes them as shared bytes.
    inbound: BytesMut,
    /// What the stack holds of the peer's DATA.
    held: Held,
    now: Instant,
}

impl std::fmt::Debug for SctpAssociation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SctpAssociation")
            .field("established", &self.established)
            .field("channels", &self.channels)
            .finish_non_exhaustive()
    }
}

impl SctpAssociation {
    /// An association waiting for the peer's INIT, taking messages up to `max_message_size`
    /// and sending the peer messages up to `remote_max_message_size` (`None`: no limit).
    pub fn new(now: Instant, max_message_size: u64, remote_max_message_size: Option<u64>) -> Self {
        let transport = transport(max_message_size);
        let mut server = ServerConfig::default();
        server.transport = transport;
        let endpoint = Endpoint::new(endpoint_config(), Some(Arc::new(server)));
        let held = Held::new(max_message_size, false);
        let mut server = Self::over(now, endpoint, None, remote_max_message_size, held);
        server.takes_init = true;
        server
    }

    /// An association that starts itself (its INIT is its first packet), as the client end:
    /// the edge's end of a relay link between nodes. Its channels take even stream ids.
    pub fn client(now: Instant, max_message_size: u64) -> Self {
        let mut endpoint = Endpoint::new(endpoint_config(), None);
        let mut config = ClientConfig::default();
        config.transport = transport(max_message_size);
        let association = endpoint.connect(config, PEER).ok();
        let held = Held::new(max_message_size, true);
        let mut client = Self::over(now, endpoint, association, None, held);
        client.next_stream = 0;
        client
    }

    fn over(
        now: Instant,
        endpoint: Endpoint,
        association: Option<(AssociationHandle, Association)>,
        remote_max_message_size: Option<u64>,
        held: Held,
    ) -> Self {
        Self {
            endpoint,
            association,
            established: false,
            channels: BTreeMap::new(),
            remote_max_message_size: remote_max_message_size.map_or(u32::MAX, clamp),
            next_stream: 1,
            max_peer_streams: Some(MAX_PEER_STREAMS),
            takes_init: false,
            events: VecDeque::new(),
            transmit: VecDeque::new(),
            inbound: BytesMut::new(),
            held,
            now,
        }
    }

    /// The same association as a relay link's end: its peer is another node of the cluster,
    /// which relays every channel of the rooms the link carries, as many as stream ids go,
    /// with as many TSNs outstanding as they need.
    pub fn for_link(mut self) -> Self {
        self.max_peer_streams = None;
        self.held = self.held.for_link();
        self
    }

    /// Whether channels can be opened and written.
    pub fn is_established(&self) -> bool {
        self.established
    }

    /// An SCTP packet from the peer (a DTLS record's application data); refused, why (see
    /// [`screen`](super::screen)).
    pub fn handle_packet(&mut self, now: Instant, packet: &[u8]) -> Result<(), SctpRefusal> {
        self.now = now;
        // One association per DTLS association: a second INIT restarts nothing here.
        let takes_init = self.takes_init && self.association.is_none();
        screen(packet, takes_init)?;
        if let Err(refused) = self.held.check(packet) {
            if refused == SctpRefusal::Unfinished {
                self.end_unfinished();
            }
            return Err(refused);
        }
        // Takes the buffer back when nothing shares it any more, else makes a new one.
        self.inbound.reserve(packet.len());
        self.inbound.extend_from_slice(packet);
        let data = self.inbound.split().freeze();
        let taken = match self.endpoint.handle(now, PEER, None, None, data) {
            Some((handle, DatagramEvent::NewAssociation(association)))
                if self.association.is_none() =>
            {
                self.association = Some((handle, association));
                true
            }
            Some((handle, DatagramEvent::AssociationEvent(event))) => {
                match self.association.as_mut() {
                    Some((ours, association)) if *ours == handle => {
                        association.handle_event(event);
                        true
                    }
                    _ => false,
                }
            }
            _ => false,
        };
        if taken {
            self.held.taken(packet);
        }
        self.process();
        taken.then_some(()).ok_or(SctpRefusal::Unread)
    }

    /// Ends the association of a peer that left too much unfinished, once.
    fn end_unfinished(&mut self) {
        let Some((_, association)) = self.association.as_mut() else {
            return;
        };
        if !association.is_closed() {
            // Its loss comes next from the stack, as any other's.
            let _ = association.close();
            self.events.push_back(SctpEvent::Unfinished);
            self.process();
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.association.as_ref()?.1.poll_timeout()
    }

    /// The stack's retransmission and other timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        if let Some((_, association)) = self.association.as_mut() {
            association.handle_timeout(now);
        }
        self.process();
    }

    /// The next SCTP packet for the peer, for its DTLS association.
    pub fn poll_transmit(&mut self) -> Option<Bytes> {
        if self.transmit.is_empty() {
            self.gather_transmits();
        }
        self.transmit.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<SctpEvent> {
        self.events.pop_front()
    }

    /// Whether events wait: sending ([`poll_transmit`](Self::poll_transmit)) lets the stack
    /// move on, which may read what had arrived.
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// Opens a channel toward the peer: the next odd stream, its DATA_CHANNEL_OPEN sent. Its
    /// messages may be written once [`SctpEvent::Acked`] says so.
    pub fn open_channel(&mut self, params: &ChannelParams) -> Result<u16, SctpError> {
        let mut open = Vec::new();
        Dcep::Open(params.clone()).write(&mut open)?;
        let (kind, value) = reliability_params(params.reliability);
        let candidates = self.free_streams();
        let (_, association) = self.established()?;
        let mut refused = SctpError::NoStreamId;
        for stream in candidates {
            // The stack refuses an id whose reset it has not finished: the next one, then.
            let mut s = match association.open_stream(stream, Ppid::Dcep) {
                Ok(s) => s,
                Err(e) => {
                    refused = stack(e);
                    continue;
                }
            };
            s.set_reliability_params(params.unordered, kind, value)
                .map_err(stack)?;
            s.write_with_ppi(&open, Ppid::Dcep).map_err(stack)?;
            self.next_stream = stream.wrapping_add(2);
            self.channels.insert(stream, Channel::Opening);
            return Ok(stream);
        }
        Err(refused)
    }

    /// The streams the next channel the node opens may take, best first: the next ids of its
    /// parity from the last one taken, past those in use (a channel's, or one the stack still
    /// holds), wrapping past [`LAST_STREAM`] to take again the ids closed channels left, so
    /// however many channels open and close in turn, ids last.
    fn free_streams(&self) -> SmallVec<[u16; STREAM_TRIES]> {
        let held: BTreeSet<u16> = self
            .association
            .as_ref()
            .map(|(_, a)| a.stream_ids().into_iter().collect())
            .unwrap_or_default();
        let parity = u32::from(self.next_stream % 2);
        let ids = (u32::from(LAST_STREAM) - parity) / 2 + 1;
        let first = u32::from(self.next_stream) / 2;
        (0..ids)
            .filter_map(|i| u16::try_from((first + i) % ids * 2 + parity).ok())
            .filter(|id| !self.channels.contains_key(id) && !held.contains(id))
            .take(STREAM_TRIES)
            .collect()
    }

    /// Writes one message on an open channel, its bytes shared with the caller's.
    pub fn send(&mut self, stream: u16, kind: MessageKind, data: &Bytes) -> Result<(), SctpError> {
        if self.channels.get(&stream) != Some(&Channel::Open) {
            return Err(SctpError::UnknownStream(stream));
        }
        let (_, association) = self.established()?;
        let mut s = association.stream(stream).map_err(stack)?;
        let (ppid, bytes) = match (kind, data.is_empty()) {
            (MessageKind::String, false) => (Ppid::String, data.clone()),
            (MessageKind::Binary, false) => (Ppid::Binary, data.clone()),
            (MessageKind::String, true) => (Ppid::StringEmpty, Bytes::from_static(EMPTY)),
            (MessageKind::Binary, true) => (Ppid::BinaryEmpty, Bytes::from_static(EMPTY)),
        };
        // The default PPID is the one a write of shared bytes goes under.
        s.set_default_payload_type(ppid).map_err(stack)?;
        s.write_chunks(&mut [bytes]).map_err(stack)?;
        Ok(())
    }

    /// Bytes written on `stream` that the peer has not acknowledged yet.
    pub fn buffered(&mut self, stream: u16) -> usize {
        self.association
            .as_mut()
            .and_then(|(_, a)| a.stream(stream).ok()?.buffered_amount().ok())
            .unwrap_or(0)
    }

    /// Closes a channel: its stream reset (RFC 8831 section 6.7).
    pub fn close_channel(&mut self, stream: u16) {
        if self.channels.remove(&stream).is_none() {
            return;
        }
        if let Some((_, association)) = self.association.as_mut() {
            if let Ok(mut s) = association.stream(stream) {
                let _ = s.close();
            }
        }
    }

    fn established(&mut self) -> Result<&mut (AssociationHandle, Association), SctpError> {
        match self.association.as_mut() {
            Some(association) if self.established => Ok(association),
            _ => Err(SctpError::NotEstablished),
        }
    }

    /// Takes the stack's events: the association's state, streams opened, read and reset.
    fn process(&mut self) {
        let Some((handle, association)) = self.association.as_mut() else {
            return;
        };
        while let Some(event) = association.poll_endpoint_event() {
            if let Some(back) = self.endpoint.handle_event(*handle, event) {
                association.handle_event(back);
            }
        }
        while let Some(event) = association.poll() {
            match event {
                Event::Connected => {
                    association.set_max_send_message_size(self.remote_max_message_size);
                    self.established = true;
                }
                Event::AssociationLost { .. } | Event::HandshakeFailed { .. } => {
                    self.established = false;
                    self.channels.clear();
                    self.events.push_back(SctpEvent::Lost);
                }
                Event::Stream(StreamEvent::Opened { .. }) => {
                    // Known by its id from here on; the queue of accepted streams is not used.
                    let _ = association.accept_stream();
                    // Counting lists the stack's ids (linear in the streams held): only where
                    // there is a bound, and opens are charged against the peer's message rate.
                    let Some(max) = self.max_peer_streams else {
                        continue;
                    };
                    // The peer's are every stream but the channels the node opened: the
                    // stack makes one for DATA on an id of either parity.
                    let ours = self.next_stream % 2;
                    let opened = self.channels.keys().filter(|&&id| id % 2 == ours).count();
                    let ids = association.stream_ids();
                    if ids.len().saturating_sub(opened) > max {
                        // Its loss comes next from the stack, as any other's.
                        let _ = association.close();
                        self.events.push_back(SctpEvent::TooManyStreams);
                    }
                }
                Event::Stream(StreamEvent::Readable { id }) => {
                    let (channels, events) = (&mut self.channels, &mut self.events);
                    read_stream(association, id, channels, events, &mut self.held);
                }
                // The peer reset the stream: a channel's end (a stream never opened is nothing).
                Event::Stream(StreamEvent::Finished { id } | StreamEvent::Stopped { id, .. }) => {
                    let known = self.channels.remove(&id).is_some();
                    self.events
                        .extend(known.then_some(SctpEvent::Closed { stream: id }));
                }
                _ => {}
            }
        }
    }

    fn gather_transmits(&mut self) {
        while let Some(transmit) = self.endpoint.poll_transmit() {
            queue(transmit.payload, &mut self.held, &mut self.transmit);
        }
        let Some((_, association)) = self.association.as_mut() else {
            return;
        };
        while let Some(transmit) = association.poll_transmit(self.now) {
            queue(transmit.payload, &mut self.held, &mut self.transmit);
        }
        // Sending may have finished resets or changed the stack's state.
        self.process();
    }
}

/// Queues the stack's packets for the peer, each seen by `held` on its way.
fn queue(payload: Payload, held: &mut Held, transmit: &mut VecDeque<Bytes>) {
    if let Payload::RawEncode(packets) = payload {
        for packet in &packets {
            held.sent(packet);
        }
        transmit.extend(packets);
    }
}

/// Reads every whole message waiting on `id`: DCEP opens and acks the channel, the rest are
/// messages.
fn read_stream(
    association: &mut Association,
    id: u16,
    channels: &mut BTreeMap<u16, Channel>,
    events: &mut VecDeque<SctpEvent>,
    held: &mut Held,
) {
    let Ok(mut stream) = association.stream(id) else {
        return;
    };
    while let Ok(Some(chunks)) = stream.read() {
        held.read(chunks.chunks.len());
        // One buffer of the message's length, filled from its chunks in one pass.
        let mut data = BytesMut::zeroed(chunks.len());
        let Ok(len) = chunks.read(&mut data) else {
            continue;
        };
        data.truncate(len);
        let kind = match chunks.ppi {
            Ppid::Dcep => {
                on_dcep(&mut stream, id, &data, channels, events);
                continue;
            }
            Ppid::String => MessageKind::String,
            Ppid::Binary => MessageKind::Binary,
            Ppid::StringEmpty => {
                data.clear();
                MessageKind::String
            }
            Ppid::BinaryEmpty => {
                data.clear();
                MessageKind::Binary
            }
            Ppid::Unknown => {
                events.push_back(SctpEvent::UnknownPpid { stream: id });
                continue;
            }
        };
        // Whatever its channel, the message goes on: the relay drops (and counts) one on a
        // stream that is no channel it relays.
        events.push_back(SctpEvent::Message {
            stream: id,
            kind,
            data: data.freeze(),
        });
    }
}

fn on_dcep(
    stream: &mut sctp_proto::Stream<'_>,
    id: u16,
    data: &[u8],
    channels: &mut BTreeMap<u16, Channel>,
    events: &mut VecDeque<SctpEvent>,
) {
    match (Dcep::parse(data), channels.get(&id)) {
        (Ok(Dcep::Open(params)), None) => {
            let (kind, value) = reliability_params(params.reliability);
            let mut ack = Vec::with_capacity(1);
            let acked = stream
                .set_reliability_params(params.unordered, kind, value)
                .and_then(|()| {
                    let _ = Dcep::Ack.write(&mut ack);
                    stream.write_with_ppi(&ack, Ppid::Dcep)
                });
            match acked {
                Ok(_) => {
                    channels.insert(id, Channel::Open);
                    events.push_back(SctpEvent::Opened { stream: id, params });
                }
                Err(_) => events.push_back(SctpEvent::DcepIgnored { stream: id }),
            }
        }
        (Ok(Dcep::Ack), Some(Channel::Opening)) => {
            channels.insert(id, Channel::Open);
            events.push_back(SctpEvent::Acked { stream: id });
        }
        // An open on a stream in use, an ack for nothing, or not DCEP: the stream is left as is.
        _ => events.push_back(SctpEvent::DcepIgnored { stream: id }),
    }
}

fn reliability_params(reliability: Reliability) -> (ReliabilityType, u32) {
    match reliability {
        Reliability::Reliable => (ReliabilityType::Reliable, 0),
        Reliability::MaxRetransmits(n) => (ReliabilityType::Rexmit, n),
        Reliability::MaxLifetimeMs(ms) => (ReliabilityType::Timed, ms),
    }
}

fn stack(error: sctp_proto::Error) -> SctpError {
    SctpError::Stack(error.to_string())
}

#[cfg(test)]
#[path = "sctp_tests.rs"]
pub(super) mod tests;

#[cfg(test)]
#[path = "sctp_held_tests.rs"]
mod held_tests;
