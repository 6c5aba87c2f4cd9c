//! One data channel message relayed by the node (`sfu::node::datachannel::relay`) to N
//! receivers, at the SCTP layer (the DTLS records around it are the core's wire, measured
//! apart). Each participant's association is set up by an SCTP client over the relay in
//! memory; from then on the bench writes the packets the participants would send itself (the
//! sender's DATA, the receivers' SACKs), so what an operation allocates and costs is the
//! node's alone: the sender's packets read into one message, the message queued toward every
//! receiver as the same shared bytes, each receiver's association writing it into DATA
//! chunks and packets, and each receiver's SACK for them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use crc::{Crc, Table, CRC_32_ISCSI};
use sctp_proto::{
    Association, AssociationHandle, ClientConfig, DatagramEvent, Endpoint, EndpointConfig, Event,
    Payload, PayloadProtocolIdentifier as Ppid, StreamEvent,
};
use sfu::node::datachannel::dcep::{ChannelParams, Dcep, Reliability};
use sfu::node::datachannel::relay::DataRelay;
use sfu::node::datachannel::DataChannelConfig;
use sfu::node::metrics::DropReason;
use sfu::node::participant::ParticipantId;
use sfu::node::peer::PeerId;

use crate::Case;

/// The SCTP checksum (RFC 9260 appendix A).
const CRC32C: Crc<u32, Table<16>> = Crc::<u32, Table<16>>::new(&CRC_32_ISCSI);
/// The client's idea of its peer: the relay does not look at it.
const NODE: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 5000);
/// The user data of one DATA chunk the sender writes, as a browser's stack fragments a
/// message into packets of about its MTU.
const FRAGMENT: usize = 1_024;
/// The receive window the receivers' SACKs announce.
const A_RWND: u32 = 1024 * 1024;
/// DATA chunk flags (RFC 9260 section 3.3.1): the first and the last fragment; and on the
/// last, the I bit (RFC 7053), so the node acknowledges every message at once rather than
/// every second packet: each operation then costs the same.
const BEGINNING: u8 = 0x02;
const ENDING: u8 = 0x01;
const IMMEDIATELY: u8 = 0x08;
const PPID_BINARY: u32 = 53;
/// Messages relayed before a case starts: the congestion windows open and the stack's queues
/// grow to their steady size, so every operation after costs the same.
const WARM_UP: usize = 1_000;

pub fn cases() -> Vec<Case> {
    vec![
        relay_case("data/relay/100B/0", 100, 0),
        relay_case("data/relay/100B/1", 100, 1),
        relay_case("data/relay/100B/10", 100, 10),
        relay_case("data/relay/100B/50", 100, 50),
        relay_case("data/relay/16KiB/0", 16 * 1024, 0),
        relay_case("data/relay/16KiB/1", 16 * 1024, 1),
        relay_case("data/relay/16KiB/10", 16 * 1024, 10),
        relay_case("data/relay/16KiB/50", 16 * 1024, 50),
    ]
}

/// Each op is one binary message of `size` bytes from the sender, relayed to `receivers`
/// (0: the sender's side alone, what a message costs however many receive it).
fn relay_case(name: &'static str, size: usize, receivers: usize) -> Case {
    let mut room = RelayRoom::new(receivers);
    let message: Vec<u8> = (0..size).map(|i| i as u8).collect();
    for _ in 0..WARM_UP {
        room.relay(&message);
    }
    Case::per_unit(name, receivers.max(1) as u64, move || {
        let delivered = room.relay(&message);
        assert_eq!(delivered, receivers, "{name}");
    })
}

/// A relay with one sender (participant 0, one reliable ordered binary channel) and
/// receivers 1..=N, every relayed channel open; and what the bench needs to speak for them.
#[derive(Debug)]
pub struct RelayRoom {
    pub relay: DataRelay,
    now: Instant,
    sender: Sender,
    receivers: Vec<Receiver>,
    /// The packet being written.
    packet: Vec<u8>,
    /// Messages relayed so far.
    messages: u64,
}

/// What the sender's next DATA carries.
#[derive(Debug)]
struct Sender {
    header: [u8; 8],
    next_tsn: u32,
    next_ssn: u16,
}

/// What a receiver was sent and has acknowledged.
#[derive(Debug)]
struct Receiver {
    header: [u8; 8],
    sent: u32,
    acked: u32,
    /// The message it was last sent DATA of.
    message: u64,
}

impl RelayRoom {
    /// The sender and `receivers` receivers, set up through SCTP clients.
    pub fn new(receivers: usize) -> Self {
        let now = Instant::now();
        let config = DataChannelConfig {
            messages_per_second: u32::MAX,
            bytes_per_second: u64::MAX,
            ..DataChannelConfig::default()
        };
        let mut relay = DataRelay::new(config);
        let mut clients: Vec<Client> = (0..=receivers).map(|_| Client::new()).collect();
        for i in 0..=receivers {
            let member = ("room", ParticipantId(i as u64));
            relay.join(now, peer(i), member, Some(256 * 1024));
        }
        pump(&mut relay, &mut clients, now);
        clients[0].open_channel();
        pump(&mut relay, &mut clients, now);
        let opened = clients[1..].iter().all(|c| c.acked_opens == 1);
        assert!(opened, "every receiver has the relayed channel");
        // A first message, whose DATA tells the sender's next TSN and stream sequence number.
        clients[0].write(b"first");
        pump(&mut relay, &mut clients, now);
        let (tsn, ssn) = clients[0].last_data.expect("the sender's DATA");
        let sender = Sender {
            header: clients[0].header,
            next_tsn: tsn.wrapping_add(1),
            next_ssn: ssn.wrapping_add(1),
        };
        let receivers = clients[1..]
            .iter()
            .map(|c| Receiver {
                header: c.header,
                sent: 0,
                acked: 0,
                message: 0,
            })
            .collect();
        Self {
            relay,
            now,
            sender,
            receivers,
            packet: Vec::with_capacity(2048),
            messages: 0,
        }
    }

    /// Relays `message` from the sender: its DATA in, each receiver's packets out and their
    /// SACKs in, until nothing more is sent. Returns the receivers sent DATA.
    pub fn relay(&mut self, message: &[u8]) -> usize {
        self.send(message);
        let mut delivered = 0;
        while let Some(sent) = self.take() {
            delivered += sent;
            self.acknowledge();
        }
        delivered
    }

    /// The sender's DATA for `message`, a packet per fragment: the relay reads the message and
    /// writes it toward every receiver, as far as their windows take it.
    pub fn send(&mut self, message: &[u8]) {
        self.messages += 1;
        let fragments = message.len().div_ceil(FRAGMENT).max(1);
        for (i, fragment) in message.chunks(FRAGMENT).enumerate() {
            let first = if i == 0 { BEGINNING } else { 0 };
            let last = if i + 1 == fragments {
                ENDING | IMMEDIATELY
            } else {
                0
            };
            let sender = &mut self.sender;
            let chunk = DataChunk {
                flags: first | last,
                tsn: sender.next_tsn,
                ssn: sender.next_ssn,
                payload: fragment,
            };
            data(&mut self.packet, sender.header, &chunk);
            sender.next_tsn = sender.next_tsn.wrapping_add(1);
            self.relay.handle_packet(self.now, peer(0), &self.packet);
        }
        self.sender.next_ssn = self.sender.next_ssn.wrapping_add(1);
    }

    /// What a hostile sender costs: `chunks` one-byte DATA chunks, `per_packet` to a packet,
    /// fragments of messages it never finishes. `unordered`: middle fragments of unordered
    /// messages with every other TSN left out; else one ordered message's first fragment and
    /// middle ones after it. Returns the packets the relay refused, and whether it ended the
    /// sender's association.
    pub fn send_unfinished(
        &mut self,
        chunks: usize,
        per_packet: usize,
        unordered: bool,
    ) -> (u64, bool) {
        let dropped = |relay: &DataRelay, reason| relay.counters().dropped(reason);
        let refused_before = dropped(&self.relay, DropReason::DataSctp);
        let (step, flags) = if unordered { (2, 0x04) } else { (1, 0) };
        let ssn = self.sender.next_ssn;
        for packet in 0..chunks.div_ceil(per_packet) {
            self.packet.clear();
            self.packet.extend_from_slice(&self.sender.header);
            self.packet.extend_from_slice(&[0; 4]);
            for i in 0..per_packet {
                let first = !unordered && packet == 0 && i == 0;
                let flags = if first { BEGINNING } else { flags };
                self.packet.extend_from_slice(&[0, flags, 0, 17]);
                self.packet
                    .extend_from_slice(&self.sender.next_tsn.to_be_bytes());
                self.packet.extend_from_slice(&[0, 0]);
                self.packet.extend_from_slice(&ssn.to_be_bytes());
                self.packet.extend_from_slice(&PPID_BINARY.to_be_bytes());
                self.packet.extend_from_slice(&[7, 0, 0, 0]);
                self.sender.next_tsn = self.sender.next_tsn.wrapping_add(step);
            }
            checksum(&mut self.packet);
            self.relay.handle_packet(self.now, peer(0), &self.packet);
            while self.relay.poll_packet().is_some() {}
        }
        let refused = dropped(&self.relay, DropReason::DataSctp) - refused_before;
        (
            refused,
            dropped(&self.relay, DropReason::DataUnfinished) > 0,
        )
    }

    /// Takes the relay's packets, noting the DATA each receiver was sent (the sender's SACKs
    /// are dropped). `None` when none carried DATA, else the receivers first sent DATA of
    /// this message.
    pub fn take(&mut self) -> Option<usize> {
        let mut data = false;
        let mut first = 0;
        while let Some((to, packet)) = self.relay.poll_packet() {
            // Receiver `i` is participant `i + 1`.
            let Some(receiver) = (to.0 as usize)
                .checked_sub(2)
                .and_then(|i| self.receivers.get_mut(i))
            else {
                continue;
            };
            if let Some(chunk) = last_data(&packet) {
                first += usize::from(receiver.message != self.messages);
                receiver.message = self.messages;
                receiver.sent = chunk.tsn;
                data = true;
            }
        }
        data.then_some(first)
    }

    /// Each receiver's SACK for everything it was sent.
    pub fn acknowledge(&mut self) {
        for (i, receiver) in self.receivers.iter_mut().enumerate() {
            if receiver.sent != receiver.acked {
                receiver.acked = receiver.sent;
                sack(&mut self.packet, receiver.header, receiver.acked);
                self.relay
                    .handle_packet(self.now, peer(i + 1), &self.packet);
            }
        }
    }
}

fn peer(i: usize) -> PeerId {
    PeerId(i as u128 + 1)
}

/// One fragment of a message on stream 0.
struct DataChunk<'a> {
    flags: u8,
    tsn: u32,
    ssn: u16,
    payload: &'a [u8],
}

/// Writes a packet with one DATA chunk (RFC 9260 section 3.3.1) into `out`.
fn data(out: &mut Vec<u8>, header: [u8; 8], chunk: &DataChunk<'_>) {
    out.clear();
    out.extend_from_slice(&header);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&[0, chunk.flags]);
    out.extend_from_slice(&(16 + chunk.payload.len() as u16).to_be_bytes());
    out.extend_from_slice(&chunk.tsn.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&chunk.ssn.to_be_bytes());
    out.extend_from_slice(&PPID_BINARY.to_be_bytes());
    out.extend_from_slice(chunk.payload);
    out.resize(out.len().next_multiple_of(4), 0);
    checksum(out);
}

/// Writes a packet with one SACK chunk (RFC 9260 section 3.3.4) acknowledging up to `tsn`.
fn sack(out: &mut Vec<u8>, header: [u8; 8], tsn: u32) {
    out.clear();
    out.extend_from_slice(&header);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&[3, 0, 0, 16]);
    out.extend_from_slice(&tsn.to_be_bytes());
    out.extend_from_slice(&A_RWND.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    checksum(out);
}

fn checksum(packet: &mut [u8]) {
    let crc = CRC32C.checksum(packet);
    packet[8..12].copy_from_slice(&crc.to_le_bytes());
}

/// The last DATA chunk of an SCTP packet, if it has one: its TSN and stream sequence number
/// (the payload left out).
fn last_data(packet: &[u8]) -> Option<DataChunk<'static>> {
    let mut at = 12;
    let mut last = None;
    while let Some(chunk) = packet.get(at..at + 16) {
        let len = usize::from(u16::from_be_bytes([chunk[2], chunk[3]]));
        if chunk[0] == 0 {
            last = Some(DataChunk {
                flags: chunk[1],
                tsn: u32::from_be_bytes([chunk[4], chunk[5], chunk[6], chunk[7]]),
                ssn: u16::from_be_bytes([chunk[10], chunk[11]]),
                payload: &[],
            });
        }
        at += len.max(4).next_multiple_of(4);
    }
    last
}

/// A participant's SCTP client, for the setup.
struct Client {
    endpoint: Endpoint,
    handle: AssociationHandle,
    association: Association,
    /// The common header of its packets once established: ports and the node's tag.
    header: [u8; 8],
    /// The TSN and stream sequence number of the last DATA chunk it sent on stream 0.
    last_data: Option<(u32, u16)>,
    /// DATA_CHANNEL_OPENs of the node it acknowledged.
    acked_opens: usize,
}

impl Client {
    fn new() -> Self {
        let mut endpoint = Endpoint::new(Arc::new(EndpointConfig::default()), None);
        let (handle, association) = endpoint
            .connect(ClientConfig::default(), NODE)
            .expect("a client association");
        Self {
            endpoint,
            handle,
            association,
            header: [0; 8],
            last_data: None,
            acked_opens: 0,
        }
    }

    /// Opens a reliable, ordered channel on stream 0 in band.
    fn open_channel(&mut self) {
        let params = ChannelParams {
            unordered: false,
            reliability: Reliability::Reliable,
            priority: 0,
            label: "bench".into(),
            protocol: String::new(),
        };
        let mut open = Vec::new();
        Dcep::Open(params).write(&mut open).expect("a DCEP open");
        let mut stream = self
            .association
            .open_stream(0, Ppid::Dcep)
            .expect("stream 0");
        stream.write_with_ppi(&open, Ppid::Dcep).expect("written");
    }

    fn write(&mut self, message: &[u8]) {
        let mut stream = self.association.stream(0).expect("stream 0");
        stream
            .write_with_ppi(message, Ppid::Binary)
            .expect("written");
    }

    /// Its packets for the node, remembering its header and its last DATA on stream 0.
    fn transmit(&mut self, now: Instant) -> Vec<Bytes> {
        let mut out = Vec::new();
        while let Some(t) = self.association.poll_transmit(now) {
            if let Payload::RawEncode(packets) = t.payload {
                out.extend(packets);
            }
        }
        for packet in &out {
            if packet[4..8] != [0; 4] {
                self.header.copy_from_slice(&packet[..8]);
            }
            if let Some(chunk) = last_data(packet) {
                self.last_data = Some((chunk.tsn, chunk.ssn));
            }
        }
        out
    }

    /// A packet from the node; acknowledges the node's DATA_CHANNEL_OPENs.
    fn receive(&mut self, now: Instant, packet: Bytes) {
        let event = self.endpoint.handle(now, NODE, None, None, packet);
        if let Some((handle, DatagramEvent::AssociationEvent(event))) = event {
            assert_eq!(handle, self.handle);
            self.association.handle_event(event);
        }
        while let Some(event) = self.association.poll() {
            match event {
                Event::Stream(StreamEvent::Opened { .. }) => {
                    let _ = self.association.accept_stream();
                }
                Event::Stream(StreamEvent::Readable { id }) => self.read(id),
                _ => {}
            }
        }
    }

    fn read(&mut self, id: u16) {
        let Ok(mut stream) = self.association.stream(id) else {
            return;
        };
        while let Ok(Some(chunks)) = stream.read() {
            let mut data = vec![0; chunks.len()];
            let _ = chunks.read(&mut data);
            if chunks.ppi == Ppid::Dcep && matches!(Dcep::parse(&data), Ok(Dcep::Open(_))) {
                let mut ack = Vec::new();
                Dcep::Ack.write(&mut ack).expect("a DCEP ack");
                stream.write_with_ppi(&ack, Ppid::Dcep).expect("written");
                self.acked_opens += 1;
            }
        }
    }
}

/// Carries packets between the clients and the relay until neither sends.
fn pump(relay: &mut DataRelay, clients: &mut [Client], now: Instant) {
    for _ in 0..1_000 {
        let sent: Vec<(usize, Bytes)> = (clients.iter_mut().enumerate())
            .flat_map(|(i, client)| client.transmit(now).into_iter().map(move |p| (i, p)))
            .collect();
        for (i, packet) in &sent {
            relay.handle_packet(now, peer(*i), packet);
        }
        let back: Vec<(PeerId, Bytes)> = std::iter::from_fn(|| relay.poll_packet()).collect();
        if sent.is_empty() && back.is_empty() {
            return;
        }
        for (to, packet) in back {
            clients[to.0 as usize - 1].receive(now, packet);
        }
    }
    panic!("the clients and the relay kept sending");
}
