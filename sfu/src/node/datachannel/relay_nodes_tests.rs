//! Two nodes' relays and their links' associations, carried by the test in `STDC` packets as
//! the core frames them, with a client stack for each participant: one participant on node
//! A, two on node B of the same room.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use sctp_proto::{Event, Payload, PayloadProtocolIdentifier as Ppid, StreamEvent};

use super::super::*;
use super::link_protocol;
use crate::node::cluster::notice::MAX_ROOM_BYTES;
use crate::node::core::{link_data, write_link_data};
use crate::node::datachannel::dcep::{Dcep, Reliability};
use crate::node::datachannel::sctp::tests::{chat, client, client_reads, open_from_client, Client};

/// A's participant; B's two.
const A1: PeerId = PeerId(1);
const B1: PeerId = PeerId(2);
const B2: PeerId = PeerId(3);
/// The link A to B (A its origin): A's end, B's end; and the link B to A.
const A_TO_B: (PeerId, PeerId) = (PeerId(100), PeerId(200));
const B_TO_A: (PeerId, PeerId) = (PeerId(201), PeerId(101));

struct Nodes {
    now: Instant,
    a: DataRelay,
    b: DataRelay,
    clients: HashMap<PeerId, Client>,
    /// SCTP packets each link carried, A to B and B to A.
    carried: [usize; 2],
}

impl Nodes {
    fn new() -> Self {
        Self::with(DataChannelConfig::default(), DataChannelConfig::default())
    }

    /// Node A and node B with their data channel settings.
    fn with(a: DataChannelConfig, b: DataChannelConfig) -> Self {
        let now = Instant::now();
        let (mut a, mut b) = (DataRelay::new(a), DataRelay::new(b));
        a.join(now, A1, ("room", ParticipantId(11)), None);
        b.join(now, B1, ("room", ParticipantId(21)), None);
        b.join(now, B2, ("room", ParticipantId(22)), None);
        // Each link's origin the server, its edge the client.
        a.join_node(now, A_TO_B.0, false);
        b.join_node(now, A_TO_B.1, true);
        b.join_node(now, B_TO_A.0, false);
        a.join_node(now, B_TO_A.1, true);
        let room = BTreeSet::from(["room".to_owned()]);
        a.node_rooms(A_TO_B.0, room.clone());
        b.node_rooms(B_TO_A.0, room);
        let clients = [A1, B1, B2].map(|id| (id, client())).into();
        let mut nodes = Self {
            now,
            a,
            b,
            clients,
            carried: [0; 2],
        };
        nodes.pump();
        nodes
    }

    /// Carries packets between clients, relays and links until none moves.
    fn pump(&mut self) {
        for _ in 0..200 {
            let mut moved = false;
            for (&id, client) in &mut self.clients {
                let relay = if id == A1 { &mut self.a } else { &mut self.b };
                while let Some(t) = client.association.poll_transmit(self.now) {
                    if let Payload::RawEncode(packets) = t.payload {
                        for packet in packets {
                            moved = true;
                            relay.handle_packet(self.now, id, &packet);
                        }
                    }
                }
            }
            moved |= self.deliver(true);
            moved |= self.deliver(false);
            if !moved {
                return;
            }
        }
        panic!("the nodes and clients kept sending");
    }

    /// What node A's relay (or B's) sent: to its clients, or framed onto its links.
    fn deliver(&mut self, from_a: bool) -> bool {
        let (from, to) = match from_a {
            true => (&mut self.a, &mut self.b),
            false => (&mut self.b, &mut self.a),
        };
        let mut moved = false;
        while let Some((id, packet)) = from.poll_packet() {
            moved = true;
            let across = [A_TO_B, B_TO_A]
                .into_iter()
                .flat_map(|(x, y)| [(x, y), (y, x)])
                .find(|&(here, _)| here == id);
            let Some((_, there)) = across else {
                self.clients
                    .get_mut(&id)
                    .expect("a client")
                    .receive(self.now, packet);
                continue;
            };
            self.carried[usize::from(!from_a)] += 1;
            let mut compound = Vec::new();
            write_link_data(1, &packet, &mut compound).expect("framed");
            for sctp in link_data(&compound) {
                to.handle_packet(self.now, there, sctp.expect("reads"));
            }
        }
        moved
    }

    fn client(&mut self, id: PeerId) -> &mut Client {
        self.clients.get_mut(&id).expect("a client")
    }

    /// The channels the node opened toward client `id` since last asked: acknowledged, and
    /// their streams and what they are.
    fn opened(&mut self, id: PeerId) -> Vec<(u16, ChannelParams)> {
        let client = self.client(id);
        let mut opened = Vec::new();
        for stream in (1..16).step_by(2) {
            for (ppid, data) in client_reads(client, stream) {
                if let (Ppid::Dcep, Ok(Dcep::Open(params))) = (ppid, Dcep::parse(&data)) {
                    let mut s = client.association.stream(stream).expect("its stream");
                    s.write_with_ppi(&[0x02], Ppid::Dcep).expect("an ack");
                    opened.push((stream, params));
                }
            }
        }
        opened.sort_by(|x, y| x.1.label.cmp(&y.1.label));
        opened
    }
}

/// The streams the node reset toward `client` since last asked.
fn resets(client: &mut Client) -> BTreeSet<u16> {
    let mut reset = BTreeSet::new();
    while let Some(event) = client.association.poll() {
        if let Event::Stream(StreamEvent::Finished { id } | StreamEvent::Stopped { id, .. }) = event
        {
            reset.insert(id);
        }
    }
    reset
}

fn lossy() -> ChannelParams {
    ChannelParams {
        unordered: true,
        reliability: Reliability::MaxRetransmits(0),
        label: "lossy".into(),
        ..chat()
    }
}

#[test]
fn channels_cross_once_per_node_both_ways_and_close_with_their_link() {
    let mut nodes = Nodes::new();
    assert!(
        nodes.carried[0] > 0 && nodes.carried[1] > 0,
        "both associations up"
    );
    open_from_client(nodes.client(A1), 0, &chat());
    open_from_client(nodes.client(A1), 2, &lossy());
    nodes.pump();

    // Each of B's participants gets both channels, as for a participant of its own node.
    let mut toward = HashMap::new();
    for id in [B1, B2] {
        let opened = nodes.opened(id);
        let expected = [chat(), lossy()].map(|p| ChannelParams {
            protocol: format!("p{}", ParticipantId(11)),
            ..p
        });
        let params: Vec<_> = opened.iter().map(|(_, p)| p.clone()).collect();
        assert_eq!(params, expected, "participant {id}");
        toward.insert(id, (opened[0].0, opened[1].0));
    }
    nodes.pump();

    let before = nodes.carried[0];
    for i in 0..20 {
        let mut s = nodes.client(A1).association.stream(0).unwrap();
        s.write_with_ppi(format!("m{i}").as_bytes(), Ppid::String)
            .unwrap();
    }
    let mut s = nodes.client(A1).association.stream(2).unwrap();
    s.write_with_ppi(b"fast", Ppid::Binary).unwrap();
    nodes.pump();
    let expected: Vec<_> = (0..20)
        .map(|i| (Ppid::String, format!("m{i}").into_bytes()))
        .collect();
    for id in [B1, B2] {
        let (chat, lossy) = toward[&id];
        assert_eq!(client_reads(nodes.client(id), chat), expected, "in order");
        assert_eq!(
            client_reads(nodes.client(id), lossy),
            [(Ppid::Binary, b"fast".to_vec())]
        );
    }
    // Once onto the link, twice on B (its two receivers).
    assert_eq!(nodes.a.counters().data_link_messages_out, 21);
    assert_eq!(nodes.b.counters().data_messages_relayed, 42);
    let packets = nodes.carried[0] - before;
    assert!(
        packets <= 21,
        "{packets} packets: one a message at most, not one per receiver"
    );

    // B1 answers on a channel of its own, which reaches A1 across the link B to A.
    open_from_client(nodes.client(B1), 0, &chat());
    nodes.pump();
    let opened = nodes.opened(A1);
    assert_eq!(opened.len(), 1);
    assert_eq!(opened[0].1.protocol, format!("p{}", ParticipantId(21)));
    nodes.pump();
    let _ = nodes.opened(B2);
    let mut s = nodes.client(B1).association.stream(0).unwrap();
    s.write_with_ppi(b"back", Ppid::String).unwrap();
    nodes.pump();
    assert_eq!(
        client_reads(nodes.client(A1), opened[0].0),
        [(Ppid::String, b"back".to_vec())]
    );
    assert_eq!(nodes.b.counters().data_link_messages_out, 1);

    // The link A to B ends on B: A1's two channels close toward each of B's participants.
    for id in [B1, B2] {
        let _ = resets(nodes.client(id));
    }
    nodes.b.leave_node(A_TO_B.1);
    nodes.pump();
    assert_eq!(nodes.b.counters().data_link_channels_closed, 4);
    for id in [B1, B2] {
        let (chat, lossy) = toward[&id];
        let reset = resets(nodes.client(id));
        assert!(
            reset.contains(&chat) && reset.contains(&lossy),
            "{id}: {reset:?}"
        );
    }
    assert_eq!(nodes.a.counters().dropped(DropReason::DataLinkChannel), 0);
}

/// Nodes may differ in the largest message their participants send: one within A's limit
/// and past B's crosses the link, which stays up, to B's participants.
#[test]
fn a_message_past_the_other_node_s_own_limit_crosses_and_the_link_stays() {
    let limit = |max_message_size| DataChannelConfig {
        max_message_size,
        ..DataChannelConfig::default()
    };
    let mut nodes = Nodes::with(limit(64 * 1024), limit(16 * 1024));
    open_from_client(nodes.client(A1), 0, &chat());
    nodes.pump();
    let toward = nodes.opened(B1)[0].0;
    let _ = nodes.opened(B2);
    nodes.pump();
    let large = vec![7; 32 * 1024];
    for message in [&large[..], b"after"] {
        let mut s = nodes.client(A1).association.stream(0).unwrap();
        s.write_with_ppi(message, Ppid::Binary).unwrap();
        nodes.pump();
    }
    let read = client_reads(nodes.client(B1), toward);
    let sizes: Vec<usize> = read.iter().map(|(_, m)| m.len()).collect();
    assert_eq!(sizes, [32 * 1024, 5]);
}

#[test]
fn a_channel_from_a_node_naming_no_room_closes_and_limits_hold_per_remote_participant() {
    let mut nodes = Nodes::new();
    let config = DataChannelConfig {
        channels_per_participant: 1,
        ..DataChannelConfig::default()
    };
    nodes.b.config = config;
    // A's end opens channels on the link as a node that misbehaves would.
    let bad = ChannelParams {
        protocol: "no room".into(),
        ..chat()
    };
    let link = nodes.a.members.get_mut(&A_TO_B.0).unwrap();
    link.sctp.open_channel(&bad).unwrap();
    let twice = ChannelParams {
        protocol: link_protocol(ParticipantId(11), "room"),
        ..chat()
    };
    link.sctp.open_channel(&twice).unwrap();
    link.sctp.open_channel(&twice).unwrap();
    nodes.a.collect(A_TO_B.0);
    nodes.pump();
    let counters = nodes.b.counters();
    assert_eq!(counters.dropped(DropReason::DataLinkChannel), 1);
    assert_eq!(counters.dropped(DropReason::DataChannelLimit), 1);
    assert_eq!(nodes.opened(B1).len(), 1, "the one within the limit");
}

/// A node's opens are bounded as a participant's are on its own node: the label's length, a
/// room a cluster can name, and the open a message of its owner's.
#[test]
fn a_node_s_channels_are_bounded_in_name_and_rate_as_a_participant_s() {
    let mut nodes = Nodes::new();
    nodes.b.config = DataChannelConfig {
        messages_per_second: 2,
        ..DataChannelConfig::default()
    };
    let of = |owner: u64, room: &str, label: String| ChannelParams {
        protocol: link_protocol(ParticipantId(owner), room),
        label,
        ..chat()
    };
    let opens = [
        of(11, "room", "l".repeat(MAX_CHANNEL_NAME + 1)),
        of(11, &"r".repeat(MAX_ROOM_BYTES + 1), "long room".into()),
        of(12, "room", "first".into()),
        of(12, "room", "second".into()),
        of(12, "room", "past the rate".into()),
    ];
    let link = nodes.a.members.get_mut(&A_TO_B.0).unwrap();
    for params in &opens {
        link.sctp.open_channel(params).unwrap();
    }
    nodes.a.collect(A_TO_B.0);
    nodes.pump();
    let counters = nodes.b.counters();
    assert_eq!(counters.dropped(DropReason::DataChannelName), 2);
    assert_eq!(counters.dropped(DropReason::DataRate), 1);
    let labels: Vec<String> = nodes.opened(B1).into_iter().map(|(_, p)| p.label).collect();
    assert_eq!(labels, ["first", "second"]);
}

#[test]
fn link_protocols_read_back_and_others_are_refused() {
    let written = link_protocol(ParticipantId(42), "a:room");
    assert_eq!(
        parse_link_protocol(&written),
        Ok((ParticipantId(42), "a:room"))
    );
    for (protocol, error) in [
        ("", LinkChannelError::NoOwner),
        ("p42", LinkChannelError::NoOwner),
        ("q42:room", LinkChannelError::NoOwner),
        ("p:room", LinkChannelError::BadOwner),
        ("p42:room", LinkChannelError::BadOwner),
        ("p000000000000000g:room", LinkChannelError::BadOwner),
        ("p+00000000000000a:room", LinkChannelError::BadOwner),
        ("p000000000000000A:room", LinkChannelError::BadOwner),
        ("p000000000000000a", LinkChannelError::NoOwner),
        ("p000000000000000a:", LinkChannelError::NoRoom),
    ] {
        assert_eq!(parse_link_protocol(protocol), Err(error), "{protocol:?}");
    }
}

proptest::proptest! {
    #[test]
    fn any_owner_and_room_read_back(owner: u64, room in ".{1,40}") {
        let written = link_protocol(ParticipantId(owner), &room);
        proptest::prop_assert_eq!(
            parse_link_protocol(&written),
            Ok((ParticipantId(owner), room.as_str()))
        );
    }
}
