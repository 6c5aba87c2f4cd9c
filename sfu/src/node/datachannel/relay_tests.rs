//! The relay against the SCTP stack as a client runs it, for what the independent client of
//! the in-memory tests cannot send: a PPID of none of RFC 8831's, DATA on a stream no DCEP
//! opened (a channel negotiated out of band), and empty messages (which that client's stack
//! writes as no chunk at all).

use std::collections::BTreeSet;
use std::time::Instant;

use bytes::Bytes;
use sctp_proto::{Payload, PayloadProtocolIdentifier as Ppid};

use super::*;
use crate::node::datachannel::sctp::tests::{
    chat, client, client_reads, exchange, open_from_client, Client, NodeEnd,
};

/// The relay as the client of its one participant reaches it.
struct Through<'a> {
    relay: &'a mut DataRelay,
    id: PeerId,
}

impl NodeEnd for Through<'_> {
    fn receive(&mut self, now: Instant, packet: &[u8]) {
        self.relay.handle_packet(now, self.id, packet);
    }

    fn transmit(&mut self) -> Option<Bytes> {
        let (to, packet) = self.relay.poll_packet()?;
        assert_eq!(to, self.id, "the relay has one participant");
        Some(packet)
    }
}

#[test]
fn messages_of_an_unknown_ppid_or_on_no_channel_are_counted_by_reason() {
    let now = Instant::now();
    let mut relay = DataRelay::new(DataChannelConfig::default());
    let id = PeerId(1);
    relay.join(now, id, ("room", ParticipantId(1)), Some(256 * 1024));
    let mut client = client();
    let mut node = Through {
        relay: &mut relay,
        id,
    };
    exchange(now, &mut client, &mut node);
    open_from_client(&mut client, 0, &chat());
    exchange(now, &mut client, &mut node);
    assert_eq!(relay.channels_of(id).len(), 1, "its channel opened");

    let mut node = Through {
        relay: &mut relay,
        id,
    };
    let mut s = client.association.stream(0).unwrap();
    s.write_with_ppi(b"?", Ppid::Unknown).unwrap();
    s.write_with_ppi(b"ok", Ppid::String).unwrap();
    // Stream 2, as a channel negotiated out of band would use it: no DCEP before its DATA.
    let mut s = client.association.open_stream(2, Ppid::String).unwrap();
    s.write_with_ppi(b"out of band", Ppid::String).unwrap();
    exchange(now, &mut client, &mut node);

    // The string on its channel is no drop: it has no one else to go to.
    let counters = relay.counters();
    assert_eq!(counters.dropped(DropReason::DataUnknownPpid), 1);
    assert_eq!(counters.dropped(DropReason::DataNoChannel), 1);
}

/// Carries packets between the relay and the clients (client `i` is participant `i + 1`)
/// until none moves; packets toward a participant past the clients are lost (one that never
/// answers).
fn pump(now: Instant, relay: &mut DataRelay, clients: &mut [Client]) {
    for _ in 0..100 {
        let mut moved = false;
        for (i, client) in clients.iter_mut().enumerate() {
            while let Some(t) = client.association.poll_transmit(now) {
                if let Payload::RawEncode(packets) = t.payload {
                    for packet in packets {
                        moved = true;
                        relay.handle_packet(now, PeerId(i as u128 + 1), &packet);
                    }
                }
            }
        }
        while let Some((to, packet)) = relay.poll_packet() {
            if let Some(client) = clients.get_mut(to.0 as usize - 1) {
                moved = true;
                client.receive(now, packet);
            }
        }
        if !moved {
            return;
        }
    }
    panic!("the clients and the relay kept sending");
}

#[test]
fn empty_messages_are_relayed_as_empty_with_their_type() {
    let now = Instant::now();
    let mut relay = DataRelay::new(DataChannelConfig::default());
    for i in 1..=2 {
        relay.join(now, PeerId(i), ("room", ParticipantId(i as u64)), None);
    }
    let mut clients = [client(), client()];
    pump(now, &mut relay, &mut clients);
    open_from_client(&mut clients[0], 0, &chat());
    pump(now, &mut relay, &mut clients);
    // The node opened a's channel toward b on its first odd stream; b acknowledges it.
    let opened = client_reads(&mut clients[1], 1);
    assert!(
        matches!(&opened[..], [(Ppid::Dcep, open)] if open[0] == 0x03),
        "{opened:?}"
    );
    let mut s = clients[1].association.stream(1).unwrap();
    s.write_with_ppi(&[0x02], Ppid::Dcep).unwrap();
    pump(now, &mut relay, &mut clients);

    // An empty message is one byte 0 under its own PPID (RFC 8831 section 6.6).
    let mut s = clients[0].association.stream(0).unwrap();
    for (ppid, bytes) in [
        (Ppid::StringEmpty, &[0][..]),
        (Ppid::BinaryEmpty, &[0][..]),
        (Ppid::String, &b"after"[..]),
    ] {
        s.write_with_ppi(bytes, ppid).unwrap();
    }
    pump(now, &mut relay, &mut clients);
    assert_eq!(
        client_reads(&mut clients[1], 1),
        [
            (Ppid::StringEmpty, vec![0]),
            (Ppid::BinaryEmpty, vec![0]),
            (Ppid::String, b"after".to_vec())
        ]
    );
    assert_eq!(relay.counters().data_messages_relayed, 3);
    assert_eq!(
        relay.counters().data_bytes_relayed,
        5,
        "the empty ones count none"
    );
}

/// A channel whose name is longer than the relay takes (as JSON writes it: a control
/// character takes six bytes), or opened past the participant's message rate (every open
/// counts as a message, refused or not), is closed as it opens, counted by reason; the ones
/// within both stay.
#[test]
fn long_names_and_opens_past_the_rate_are_closed_as_they_open() {
    let now = Instant::now();
    let config = DataChannelConfig {
        messages_per_second: 6,
        ..DataChannelConfig::default()
    };
    let mut relay = DataRelay::new(config);
    let id = PeerId(1);
    relay.join(now, id, ("room", ParticipantId(1)), None);
    let mut client = client();
    let mut node = Through {
        relay: &mut relay,
        id,
    };
    exchange(now, &mut client, &mut node);
    let named = |label: usize, protocol: usize| ChannelParams {
        label: "l".repeat(label),
        protocol: "p".repeat(protocol),
        ..chat()
    };
    let escaped = ChannelParams {
        label: "\u{1}".repeat(200),
        ..chat()
    };
    let opens = [
        named(1000, 24),
        named(1000, 25),
        named(MAX_CHANNEL_NAME + 1, 0),
        escaped,
        named(4, 0),
        named(4, 0),
        named(4, 0),
    ];
    for (i, params) in opens.iter().enumerate() {
        open_from_client(&mut client, 2 * i as u16, params);
    }
    exchange(now, &mut client, &mut node);
    let kept: Vec<u16> = relay.channels_of(id).iter().map(|c| c.stream).collect();
    assert_eq!(
        kept,
        [0, 8, 10],
        "the first within the name, then two within the rate"
    );
    let counters = relay.counters();
    assert_eq!(counters.dropped(DropReason::DataChannelName), 3);
    assert_eq!(counters.dropped(DropReason::DataRate), 1);
}

/// A relay of 4 KB backlogs with participants 1 and 2 in `room`.
fn two_with_small_backlogs(now: Instant) -> DataRelay {
    let config = DataChannelConfig {
        backlog_bytes: 4096,
        ..DataChannelConfig::default()
    };
    let mut relay = DataRelay::new(config);
    for i in 1..=2 {
        relay.join(now, PeerId(i), ("room", ParticipantId(i as u64)), None);
    }
    relay
}

/// A participant that reads nothing (its association never comes up) holds at most
/// `RECEIVER_BACKLOGS` channel backlogs in all, however many channels send toward it: lossy
/// channels drop their oldest past it, reliable ones close toward it; each counted.
#[test]
fn a_receiver_that_reads_nothing_holds_a_bounded_backlog_over_all_channels() {
    let now = Instant::now();
    let mut relay = two_with_small_backlogs(now);
    // Only the sender answers; the receiver's association never starts.
    let mut clients = [client()];
    pump(now, &mut relay, &mut clients);
    let lossy = ChannelParams {
        unordered: true,
        reliability: Reliability::MaxRetransmits(0),
        ..chat()
    };
    // Twelve lossy channels and four reliable ones, 3 KB on each: 48 KB toward the receiver,
    // each channel within its own 4 KB.
    for stream in 0..16u16 {
        let params = if stream < 12 { lossy.clone() } else { chat() };
        open_from_client(&mut clients[0], 2 * stream, &params);
    }
    pump(now, &mut relay, &mut clients);
    assert_eq!(relay.channels_of(PeerId(1)).len(), 16);
    for stream in 0..16u16 {
        let mut s = clients[0].association.stream(2 * stream).unwrap();
        for _ in 0..3 {
            s.write_with_ppi(&[7; 1000], Ppid::Binary).unwrap();
        }
        pump(now, &mut relay, &mut clients);
    }
    let waiting = relay.members[&PeerId(2)].waiting.get();
    assert!(
        waiting <= RECEIVER_BACKLOGS * 4096,
        "{waiting} bytes wait toward the receiver"
    );
    // The lossy channels' 36 messages filled it: what they keep and what they dropped add up.
    let counters = relay.counters();
    let kept = (waiting / (1000 + 64)) as u64;
    assert_eq!(kept + counters.dropped(DropReason::DataLossyOldest), 36);
    // Each reliable channel found it full at its first message: closed toward the receiver
    // with it, and its two later messages, which have no channel toward it, dropped too.
    assert_eq!(counters.dropped(DropReason::DataBacklog), 4 + 4 * 2);
    assert_eq!(relay.members[&PeerId(2)].relayed.len(), 12);
}

/// Another node's link that takes nothing (its association never comes up) holds at most
/// `LINK_BACKLOGS` channel backlogs in all, whatever the channels of its rooms: past them its
/// reliable channels close toward it, counted.
#[test]
fn a_link_that_takes_nothing_holds_a_bounded_backlog_over_all_channels() {
    let now = Instant::now();
    let mut relay = two_with_small_backlogs(now);
    let link = PeerId(100);
    relay.join_node(now, link, false);
    relay.node_rooms(link, BTreeSet::from(["room".to_owned()]));
    let mut clients = [client(), client()];
    pump(now, &mut relay, &mut clients);
    // Forty channels each, four messages of 900 bytes on each: some 300 KB toward the link.
    for client in &mut clients {
        for stream in 0..40u16 {
            open_from_client(client, 2 * stream, &chat());
        }
    }
    pump(now, &mut relay, &mut clients);
    for sender in 0..2 {
        for stream in 0..40u16 {
            let mut s = clients[sender].association.stream(2 * stream).unwrap();
            for _ in 0..4 {
                s.write_with_ppi(&[7; 900], Ppid::Binary).unwrap();
            }
            pump(now, &mut relay, &mut clients);
        }
    }
    let waiting = relay.members[&link].waiting.get();
    assert!(
        waiting <= LINK_BACKLOGS * 4096,
        "{waiting} bytes wait toward the link"
    );
    assert!(relay.counters().dropped(DropReason::DataBacklog) > 0);
}
