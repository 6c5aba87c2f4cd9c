//! The node's association against a peer that leaves DATA unfinished, and against a client's
//! stack whose messages are whole but come out of order, or are abandoned on a lossy path: the
//! first is ended once it has left more than any message needs; the others are not.

use std::time::{Duration, Instant};

use bytes::Bytes;
use crc::{Crc, CRC_32_ISCSI};
use sctp_proto::{Payload, PayloadProtocolIdentifier as Ppid, ReliabilityType};

use super::super::held::{MIN_FRAGMENT, WINDOW};
use super::super::screen::{chunks, DATA};
use super::tests::{chat, client, exchange, open_from_client, Client};
use super::*;

const CRC32C: Crc<u32> = Crc::<u32>::new(&CRC_32_ISCSI);
const MAX_MESSAGE: u64 = 256 * 1024;

fn events(node: &mut SctpAssociation) -> Vec<SctpEvent> {
    std::iter::from_fn(|| node.poll_event()).collect()
}

/// The client's packets as it sends them now.
fn sent(now: Instant, client: &mut Client) -> Vec<Bytes> {
    let mut packets = Vec::new();
    while let Some(t) = client.association.poll_transmit(now) {
        if let Payload::RawEncode(more) = t.payload {
            packets.extend(more);
        }
    }
    packets
}

/// A client with channel `chat` open on stream 0, and what its next DATA carries: its
/// packets' common header (less the checksum), its next TSN and stream sequence number.
fn opened(now: Instant, node: &mut SctpAssociation) -> (Client, [u8; 8], u32, u16) {
    let mut client = client();
    exchange(now, &mut client, node);
    open_from_client(&mut client, 0, &chat());
    exchange(now, &mut client, node);
    let mut stream = client.association.stream(0).unwrap();
    stream.write_with_ppi(b"first", Ppid::Binary).unwrap();
    let packets = sent(now, &mut client);
    let packet = packets.last().expect("the client's DATA");
    let (_, _, data) = chunks(packet).find(|&(kind, ..)| kind == DATA).unwrap();
    let tsn = u32::from_be_bytes(data[4..8].try_into().unwrap());
    let ssn = u16::from_be_bytes(data[10..12].try_into().unwrap());
    for packet in &packets {
        node.handle_packet(now, packet).unwrap();
    }
    let header = packet[..8].try_into().unwrap();
    (client, header, tsn + 1, ssn + 1)
}

/// A packet of one-byte DATA chunks on stream 0, each `(tsn, flags)`, sequence number `ssn`.
fn one_bytes(header: [u8; 8], ssn: u16, data: impl Iterator<Item = (u32, u8)>) -> Vec<u8> {
    let mut packet = header.to_vec();
    packet.extend_from_slice(&[0; 4]);
    for (tsn, flags) in data {
        packet.extend_from_slice(&[DATA, flags, 0, 17]);
        packet.extend_from_slice(&tsn.to_be_bytes());
        packet.extend_from_slice(&[0, 0]);
        packet.extend_from_slice(&ssn.to_be_bytes());
        packet.extend_from_slice(&[0, 0, 0, 53, 7, 0, 0, 0]);
    }
    let checksum = CRC32C.checksum(&packet);
    packet[8..12].copy_from_slice(&checksum.to_le_bytes());
    packet
}

#[test]
fn a_peer_that_never_finishes_a_message_has_its_association_ended() {
    let now = Instant::now();
    let mut node = SctpAssociation::new(now, MAX_MESSAGE, None);
    let (_client, header, first, ssn) = opened(now, &mut node);
    events(&mut node);
    // One message's first fragment, then middle ones of a byte, 50 to a packet.
    let mut tsn = first;
    let mut given = 0;
    let mut result = Ok(());
    // Up to twice the bound's chunks, which the stack alone would hold.
    while result.is_ok() && given < 10_000 {
        let data = (tsn..tsn + 50).map(|t| (t, if t == first { 0x02 } else { 0 }));
        result = node.handle_packet(now, &one_bytes(header, ssn, data));
        if result.is_ok() {
            tsn += 50;
            given += 50;
        }
        while node.poll_transmit().is_some() {}
    }
    assert_eq!(result, Err(SctpRefusal::Unfinished));
    // Taken while the chunks walked were within the bound, then refused.
    let bound = MAX_MESSAGE / MIN_FRAGMENT + u64::from(WINDOW);
    assert_eq!(given, (bound / 50 + 1) * 50);
    assert_eq!(events(&mut node), [SctpEvent::Unfinished, SctpEvent::Lost]);
    assert!(!node.is_established());
    // Ended once: what comes after is refused, and told no more.
    let packet = one_bytes(header, ssn, [(tsn, 0x03)].into_iter());
    assert_eq!(
        node.handle_packet(now, &packet),
        Err(SctpRefusal::Unfinished)
    );
    assert_eq!(events(&mut node), []);
}

#[test]
fn data_past_the_window_is_refused_and_the_rest_taken() {
    let now = Instant::now();
    let mut node = SctpAssociation::new(now, MAX_MESSAGE, None);
    let (_client, header, first, ssn) = opened(now, &mut node);
    // Every other TSN of unordered middle fragments: never whole, the walk never moves.
    let mut refused = 0;
    for packet in 0..100 {
        let tsns = (0..50).map(|i| first + 100 * packet + 2 * i);
        let packet = one_bytes(header, ssn, tsns.map(|t| (t, 0x04)));
        match node.handle_packet(now, &packet) {
            Ok(()) => {}
            Err(SctpRefusal::Window) => refused += 1,
            Err(other) => panic!("{other}"),
        }
        while node.poll_transmit().is_some() {}
    }
    // The packets up to the window's last TSN were taken (40 of them), the rest refused.
    assert_eq!(refused, 100 - (WINDOW as usize - 1) / 100);
    assert!(node.is_established());
    // Of all taken, the walk had only the first TSN.
    assert_eq!(node.held.unread(), 1);
}

/// A message of 200 KiB, its fragments given in reverse order a flight at a time.
#[test]
fn a_message_in_fragments_out_of_order_is_read_and_not_counted() {
    let now = Instant::now();
    let mut node = SctpAssociation::new(now, MAX_MESSAGE, None);
    let (mut client, ..) = opened(now, &mut node);
    events(&mut node);
    let message: Vec<u8> = (0..200 * 1024).map(|i| i as u8).collect();
    let max = u32::try_from(MAX_MESSAGE).unwrap();
    client.association.set_max_send_message_size(max);
    let mut stream = client.association.stream(0).unwrap();
    stream.write_with_ppi(&message, Ppid::Binary).unwrap();
    let mut at = now;
    let mut read = Vec::new();
    for _ in 0..200 {
        for packet in sent(at, &mut client).iter().rev() {
            node.handle_packet(at, packet).unwrap();
        }
        while let Some(packet) = node.poll_transmit() {
            client.receive(at, packet);
        }
        read.extend(events(&mut node));
        at += Duration::from_millis(10);
        client.association.handle_timeout(at);
        node.handle_timeout(at);
    }
    let [SctpEvent::Message { data, .. }] = &read[..] else {
        panic!("{read:?}")
    };
    assert_eq!(data[..], message[..]);
    assert_eq!(node.held.unread(), 0);
}

/// Channels that retransmit nothing, ordered and unordered, over a path that loses a packet
/// in ten: the client abandons what was lost (FORWARD TSN), and the node's count of what
/// its stack holds follows the stack's.
#[test]
fn messages_abandoned_on_a_lossy_path_leave_nothing_counted() {
    let now = Instant::now();
    let mut node = SctpAssociation::new(now, MAX_MESSAGE, None);
    let (mut client, ..) = opened(now, &mut node);
    let lossy = ChannelParams {
        unordered: true,
        reliability: Reliability::MaxRetransmits(0),
        ..chat()
    };
    open_from_client(&mut client, 2, &lossy);
    exchange(now, &mut client, &mut node);
    for (stream, unordered) in [(0, false), (2, true)] {
        let mut s = client.association.stream(stream).unwrap();
        s.set_reliability_params(unordered, ReliabilityType::Rexmit, 0)
            .unwrap();
    }
    events(&mut node);
    let message = vec![7; 3_000];
    let (mut at, mut forwards, mut messages) = (now, 0, 0);
    // A packet in ten lost, as a generator of numbers chooses.
    let mut state = 0x2545_f491_u32;
    let mut lost = move || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state.is_multiple_of(10)
    };
    // Messages for 20 s, then nothing for 20 s more while what was lost is abandoned.
    for round in 0..800 {
        for stream in [0, 2].into_iter().filter(|_| round < 400) {
            let mut s = client.association.stream(stream).unwrap();
            s.write_with_ppi(&message, Ppid::Binary).unwrap();
        }
        for packet in sent(at, &mut client) {
            forwards += chunks(&packet).filter(|&(kind, ..)| kind == 192).count();
            if !lost() {
                node.handle_packet(at, &packet).unwrap();
            }
        }
        while let Some(packet) = node.poll_transmit() {
            client.receive(at, packet);
        }
        let read = events(&mut node);
        assert!(
            read.iter().all(|e| matches!(e, SctpEvent::Message { .. })),
            "{read:?}"
        );
        messages += read.len();
        at += Duration::from_millis(50);
        client.association.handle_timeout(at);
        node.handle_timeout(at);
    }
    assert!(
        forwards > 10,
        "the client abandoned messages {forwards} times"
    );
    assert!(messages > 200, "{messages} messages read");
    assert!(node.is_established());
    assert_eq!(node.held.unread(), 0);
}
