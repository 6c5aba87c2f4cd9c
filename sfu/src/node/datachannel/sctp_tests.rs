//! The node's association against the SCTP stack as a client would run it: DCEP both ways,
//! the node's channels on odd streams, and every PPID of RFC 8831 section 8, the empty
//! variants included, and one of none of them (which the independent client of the in-memory
//! tests cannot send). The relay's tests drive it through the same client.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use sctp_proto::{
    Association, AssociationHandle, ClientConfig, DatagramEvent, Endpoint, EndpointConfig, Payload,
    PayloadProtocolIdentifier as Ppid,
};

use super::*;

/// The client's end: an endpoint and the association it started.
pub(in crate::node::datachannel) struct Client {
    endpoint: Endpoint,
    handle: AssociationHandle,
    pub association: Association,
}

/// The node's end of a client's association: its own, or the relay holding it.
pub(in crate::node::datachannel) trait NodeEnd {
    /// A packet from the client.
    fn receive(&mut self, now: Instant, packet: &[u8]);
    /// The next packet for the client.
    fn transmit(&mut self) -> Option<Bytes>;
}

impl NodeEnd for SctpAssociation {
    fn receive(&mut self, now: Instant, packet: &[u8]) {
        // What the client's stack sends is taken: the tests that drive it check its effect.
        let _ = self.handle_packet(now, packet);
    }

    fn transmit(&mut self) -> Option<Bytes> {
        self.poll_transmit()
    }
}

impl Client {
    /// A packet from the node.
    pub(in crate::node::datachannel) fn receive(&mut self, now: Instant, packet: Bytes) {
        let event = self.endpoint.handle(now, PEER, None, None, packet);
        if let Some((handle, DatagramEvent::AssociationEvent(event))) = event {
            assert_eq!(handle, self.handle);
            self.association.handle_event(event);
        }
    }
}

pub(in crate::node::datachannel) fn client() -> Client {
    let mut endpoint = Endpoint::new(Arc::new(EndpointConfig::default()), None);
    let (handle, association) = endpoint
        .connect(ClientConfig::default(), PEER)
        .expect("a client association");
    Client {
        endpoint,
        handle,
        association,
    }
}

/// Carries packets both ways until neither side sends.
pub(in crate::node::datachannel) fn exchange(
    now: Instant,
    client: &mut Client,
    node: &mut impl NodeEnd,
) {
    for _ in 0..100 {
        let mut moved = false;
        while let Some(t) = client.association.poll_transmit(now) {
            if let Payload::RawEncode(packets) = t.payload {
                for packet in packets {
                    moved = true;
                    node.receive(now, &packet);
                }
            }
        }
        while let Some(packet) = node.transmit() {
            moved = true;
            client.receive(now, packet);
        }
        if !moved {
            return;
        }
    }
    panic!("the two sides kept sending");
}

/// Every whole message the client has on `stream`, with its PPID; none without the stream.
pub(in crate::node::datachannel) fn client_reads(
    client: &mut Client,
    stream: u16,
) -> Vec<(Ppid, Vec<u8>)> {
    while client.association.poll().is_some() {}
    let Ok(mut s) = client.association.stream(stream) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    while let Ok(Some(chunks)) = s.read() {
        let mut data = vec![0; chunks.len()];
        chunks.read(&mut data).expect("the message");
        out.push((chunks.ppi, data));
    }
    out
}

/// A reliable, ordered channel `chat`.
pub(in crate::node::datachannel) fn chat() -> ChannelParams {
    ChannelParams {
        unordered: false,
        reliability: Reliability::Reliable,
        priority: 0,
        label: "chat".into(),
        protocol: String::new(),
    }
}

/// The client opens a channel on `stream` in band: its DATA_CHANNEL_OPEN written.
pub(in crate::node::datachannel) fn open_from_client(
    client: &mut Client,
    stream: u16,
    params: &ChannelParams,
) {
    let mut open = Vec::new();
    Dcep::Open(params.clone()).write(&mut open).unwrap();
    let mut s = client.association.open_stream(stream, Ppid::Dcep).unwrap();
    s.write_with_ppi(&open, Ppid::Dcep).unwrap();
}

fn events(node: &mut SctpAssociation) -> Vec<SctpEvent> {
    std::iter::from_fn(|| node.poll_event()).collect()
}

#[test]
fn channels_open_both_ways_and_every_ppid_is_kept() {
    let now = Instant::now();
    let mut node = SctpAssociation::new(now, 256 * 1024, Some(256 * 1024));
    let mut client = client();
    exchange(now, &mut client, &mut node);
    assert!(node.is_established());

    // The client's channel: even stream, DCEP open, the node acks.
    let params = chat();
    open_from_client(&mut client, 0, &params);
    exchange(now, &mut client, &mut node);
    assert_eq!(
        events(&mut node),
        [SctpEvent::Opened {
            stream: 0,
            params: params.clone()
        }]
    );
    assert_eq!(client_reads(&mut client, 0), [(Ppid::Dcep, vec![0x02])]);

    // Each PPID, the empty ones carrying their one byte on the wire and none to the node; one
    // of none of RFC 8831's (the stack writes its `Unknown` as 58) is reported as such.
    let mut s = client.association.stream(0).unwrap();
    for (ppid, bytes) in [
        (Ppid::String, &b"hi"[..]),
        (Ppid::StringEmpty, &[0][..]),
        (Ppid::Unknown, &b"?"[..]),
        (Ppid::Binary, &[1, 2][..]),
        (Ppid::BinaryEmpty, &[0][..]),
    ] {
        s.write_with_ppi(bytes, ppid).unwrap();
    }
    exchange(now, &mut client, &mut node);
    let message = |kind, data: &'static [u8]| SctpEvent::Message {
        stream: 0,
        kind,
        data: Bytes::from_static(data),
    };
    assert_eq!(
        events(&mut node),
        [
            message(MessageKind::String, b"hi"),
            message(MessageKind::String, b""),
            SctpEvent::UnknownPpid { stream: 0 },
            message(MessageKind::Binary, &[1, 2]),
            message(MessageKind::Binary, b""),
        ]
    );

    // The node's channel: an odd stream, usable once the client acks it.
    let stream = node.open_channel(&params).unwrap();
    assert_eq!(stream % 2, 1, "the DTLS server's streams are odd");
    assert_eq!(
        node.send(stream, MessageKind::String, &Bytes::new()),
        Err(SctpError::UnknownStream(stream)),
        "not before its ack"
    );
    exchange(now, &mut client, &mut node);
    let opened = client_reads(&mut client, stream);
    assert_eq!(opened.len(), 1);
    assert_eq!(Dcep::parse(&opened[0].1), Ok(Dcep::Open(params)));
    let mut s = client.association.stream(stream).unwrap();
    s.write_with_ppi(&[0x02], Ppid::Dcep).unwrap();
    exchange(now, &mut client, &mut node);
    assert_eq!(events(&mut node), [SctpEvent::Acked { stream }]);
    for (kind, data) in [
        (MessageKind::String, Bytes::new()),
        (MessageKind::Binary, Bytes::new()),
        (MessageKind::Binary, Bytes::from_static(b"bin")),
    ] {
        node.send(stream, kind, &data).unwrap();
    }
    exchange(now, &mut client, &mut node);
    assert_eq!(
        client_reads(&mut client, stream),
        [
            (Ppid::StringEmpty, vec![0]),
            (Ppid::BinaryEmpty, vec![0]),
            (Ppid::Binary, b"bin".to_vec())
        ]
    );

    // The client resets its channel: the node reports it closed.
    client.association.stream(0).unwrap().close().unwrap();
    exchange(now, &mut client, &mut node);
    assert!(events(&mut node).contains(&SctpEvent::Closed { stream: 0 }));
}

/// Past the last stream id the node's channels wrap around to the ids closed channels left,
/// skipping those still in use.
#[test]
fn channel_streams_wrap_around_past_those_in_use() {
    let now = Instant::now();
    let mut node = SctpAssociation::new(now, 256 * 1024, None);
    let mut client = client();
    exchange(now, &mut client, &mut node);
    let params = chat();
    assert_eq!(node.open_channel(&params), Ok(1));
    node.next_stream = LAST_STREAM - 3;
    assert_eq!(node.open_channel(&params), Ok(LAST_STREAM - 3));
    assert_eq!(node.open_channel(&params), Ok(LAST_STREAM - 1));
    assert_eq!(node.open_channel(&params), Ok(3), "1 is in use");
    exchange(now, &mut client, &mut node);
    // Closed as a browser closes it: each end resets its outgoing stream.
    node.close_channel(LAST_STREAM - 3);
    exchange(now, &mut client, &mut node);
    node.next_stream = LAST_STREAM - 3;
    assert_eq!(
        node.free_streams()[0],
        5,
        "held until the peer resets its end too"
    );
    let mut s = client.association.stream(LAST_STREAM - 3).unwrap();
    s.close().unwrap();
    exchange(now, &mut client, &mut node);
    // Listed free, its reset not finished: the stack refuses it, the next free one is taken.
    assert_eq!(node.free_streams()[0], LAST_STREAM - 3);
    assert_eq!(node.open_channel(&params), Ok(5));
    node.next_stream = LAST_STREAM - 3;
    // The acknowledgements the stacks delay, sent.
    let later = now + std::time::Duration::from_secs(1);
    node.handle_timeout(later);
    client.association.handle_timeout(later);
    exchange(later, &mut client, &mut node);
    assert_eq!(
        node.open_channel(&params),
        Ok(LAST_STREAM - 3),
        "its reset done, the id is free again"
    );
}

/// A peer that sends on more streams than the association may hold has it ended: the
/// stack's state for each is gone with it.
#[test]
fn a_peer_past_its_streams_has_its_association_ended() {
    let now = Instant::now();
    let mut node = SctpAssociation::new(now, 256 * 1024, None);
    node.max_peer_streams = Some(8);
    let mut client = client();
    exchange(now, &mut client, &mut node);
    send_on_streams(now, &mut client, &mut node, (0..8).map(|s| 2 * s));
    assert!(node.is_established(), "eight streams fit");
    send_on_streams(now, &mut client, &mut node, [16]);
    let events = events(&mut node);
    assert!(
        events.ends_with(&[SctpEvent::TooManyStreams, SctpEvent::Lost]),
        "{events:?}"
    );
    assert!(!node.is_established());
    assert_eq!(node.open_channel(&chat()), Err(SctpError::NotEstablished));
}

/// A relay link's peer is another node relaying every channel of its rooms: its streams are
/// not bounded (nor counted).
#[test]
fn a_link_s_peer_may_send_on_more_streams_than_a_participant() {
    let now = Instant::now();
    let mut node = SctpAssociation::new(now, 256 * 1024, None).for_link();
    let mut client = client();
    exchange(now, &mut client, &mut node);
    let past = u16::try_from(MAX_PEER_STREAMS + 1).unwrap();
    for first in (0..past).step_by(512) {
        let streams = first..(first + 512).min(past);
        send_on_streams(now, &mut client, &mut node, streams.map(|s| 2 * s));
    }
    assert!(node.is_established());
    assert!(!events(&mut node).contains(&SctpEvent::TooManyStreams));
}

/// One message on each of `streams`, DATA no DCEP opened, as out-of-band channels send it.
fn send_on_streams(
    now: Instant,
    client: &mut Client,
    node: &mut SctpAssociation,
    streams: impl IntoIterator<Item = u16>,
) {
    for stream in streams {
        let mut s = client
            .association
            .open_stream(stream, Ppid::String)
            .unwrap();
        s.write_with_ppi(b"x", Ppid::String).unwrap();
    }
    exchange(now, client, node);
}

/// The stack makes a stream for DATA on an id of either parity: the peer's on the node's
/// (odd) ids count against its bound as on its own.
#[test]
fn streams_on_the_node_s_parity_count_against_the_peer_s_bound() {
    let now = Instant::now();
    let mut node = SctpAssociation::new(now, 256 * 1024, None);
    node.max_peer_streams = Some(8);
    let mut client = client();
    exchange(now, &mut client, &mut node);
    send_on_streams(now, &mut client, &mut node, (0..9).map(|s| 2 * s + 1));
    let events = events(&mut node);
    assert!(events.contains(&SctpEvent::TooManyStreams), "{events:?}");
}

/// The client's first packet, its INIT.
fn init_of(now: Instant, client: &mut Client) -> Bytes {
    let transmit = client.association.poll_transmit(now).expect("an INIT");
    let Payload::RawEncode(mut packets) = transmit.payload else {
        panic!("a packet");
    };
    packets.remove(0)
}

/// An INIT to an end that has its association is refused before the stack sees it: the
/// client's end (a relay link's edge) takes none, and the stack would panic on one; the
/// server's end has its association and keeps it.
#[test]
fn an_init_to_an_end_with_its_association_is_refused() {
    let now = Instant::now();
    let mut edge = SctpAssociation::client(now, 256 * 1024);
    let init = init_of(now, &mut client());
    assert_eq!(edge.handle_packet(now, &init), Err(SctpRefusal::Init));
    let mut node = SctpAssociation::new(now, 256 * 1024, None);
    let mut first = client();
    exchange(now, &mut first, &mut node);
    assert!(node.is_established());
    let again = init_of(now, &mut client());
    assert_eq!(node.handle_packet(now, &again), Err(SctpRefusal::Init));
    assert!(node.is_established());
    assert_eq!(node.handle_packet(now, &[0; 20]), Err(SctpRefusal::Unread));
}

/// DCEP the association does not act on is told, so the relay counts it: an open on a stream
/// in use, an ack for nothing, bytes that are not DCEP.
#[test]
fn dcep_left_unanswered_is_told() {
    let now = Instant::now();
    let mut node = SctpAssociation::new(now, 256 * 1024, None);
    let mut client = client();
    exchange(now, &mut client, &mut node);
    open_from_client(&mut client, 0, &chat());
    exchange(now, &mut client, &mut node);
    let _ = events(&mut node);
    let mut open = Vec::new();
    Dcep::Open(chat()).write(&mut open).unwrap();
    // Again on its open stream, an ack (0x02) on a new one, a message type DCEP has not.
    for (stream, bytes) in [(0, open), (2, vec![0x02]), (4, vec![0x7F])] {
        let mut s = match client.association.stream(stream) {
            Ok(s) => s,
            Err(_) => client.association.open_stream(stream, Ppid::Dcep).unwrap(),
        };
        s.write_with_ppi(&bytes, Ppid::Dcep).unwrap();
    }
    exchange(now, &mut client, &mut node);
    let ignored: Vec<u16> = events(&mut node)
        .into_iter()
        .filter_map(|e| match e {
            SctpEvent::DcepIgnored { stream } => Some(stream),
            _ => None,
        })
        .collect();
    assert_eq!(ignored, [0, 2, 4]);
}
