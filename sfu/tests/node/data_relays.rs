//! Relays of a room's data alone between two nodes' cores, in memory, and what a core asks
//! its node to pull: a room's data crosses a link of its own (no tracks), counts among the
//! link's relays, and ends by the edge's word once the edge's room has nobody; the room's
//! state read has a core ask for the publishers and data it lacks, each at most once a while.

use std::time::Duration;

use sfu::node::core::{
    CoreError, Followed, FollowedNode, RelayPull, RelayRefusal, LINGER, PULL_AGAIN, RELAYS_PER_LINK,
};
use sfu::node::peer::PeerId;
use sfu::node::testing::{join_participant, Harness};

use crate::fixtures::addr;
use crate::relay::{new_link, Pair, EDGE, ORIGIN};

const PARTICIPANT: &str =
    include_str!("../../src/node/sdp/fixtures/chromium_participant_datachannel.sdp");
const FINGERPRINT: &str = "sha-256 AB:CD";

/// Participant `name` of "room" on `h` (receiving, with a data channel section).
fn participant(h: &mut Harness, name: &str) -> PeerId {
    let joined = join_participant(
        &mut h.core,
        h.now,
        ("room", name),
        PARTICIPANT,
        (FINGERPRINT, addr(50_000)),
    );
    joined.expect("a participant").0
}

/// The relay of `room`'s data from the pair's origin to its edge, as the edge asks for it:
/// its tag.
fn relay_data(pair: &mut Pair, room: &str) -> Result<u32, CoreError> {
    let known = pair.b.core.links_in();
    let link = new_link("origin-nonce", &pair.link);
    let out = pair
        .a
        .core
        .relay_data_out(pair.a.now, room, EDGE, &known, link, Some("edge"))?;
    let edge_keys = new_link(&out.link, &pair.link.mirrored());
    pair.b
        .core
        .relay_data_in(pair.b.now, (room, "origin"), ORIGIN, edge_keys, out.tag)?;
    pair.b.drain();
    pair.shuttle();
    Ok(out.tag)
}

fn data_relays(h: &Harness) -> (usize, usize) {
    h.core.snapshot().media_relay.data_relays
}

#[test]
fn a_rooms_data_crosses_a_link_of_its_own_and_ends_by_the_edges_word() {
    let mut pair = Pair::new();
    let tag = relay_data(&mut pair, "room").expect("the room's data relayed");
    assert_eq!(
        (data_relays(&pair.a), data_relays(&pair.b)),
        ((1, 0), (0, 1))
    );
    assert_eq!(
        (pair.a.core.link_count(), pair.b.core.link_count()),
        ((1, 0), (0, 1))
    );
    let up = |h: &Harness| h.core.snapshot().media_relay.data_links;
    assert_eq!((up(&pair.a), up(&pair.b)), (1, 1), "its association up");
    assert_eq!(pair.a.core.relay_count(), (0, 0), "no publisher relayed");
    assert_eq!(
        relay_data(&mut pair, "room"),
        Ok(tag),
        "asked again: the same"
    );
    assert_eq!(pair.a.core.relay_counters().data_started_out, 1);

    // Keepalives hold it while the edge's room has nobody for less than the linger ...
    let tick = Duration::from_millis(250);
    let steps = (LINGER.as_millis() / tick.as_millis()) as u32;
    pair.run(tick, steps - 2, false);
    assert_eq!(data_relays(&pair.b), (0, 1));
    // ... then the edge ends it, and the origin with it, and the link with its last relay.
    pair.run(tick, 4, false);
    assert_eq!(pair.b.core.relay_counters().data_ended, 1);
    assert_eq!(
        (data_relays(&pair.a), data_relays(&pair.b)),
        ((0, 0), (0, 0))
    );
    assert_eq!(
        (pair.a.core.link_count(), pair.b.core.link_count()),
        ((0, 0), (0, 0))
    );
    assert_eq!(
        pair.a.core.relay_counters().links_lost,
        0,
        "ended by its word"
    );
}

#[test]
fn a_rooms_data_counts_among_the_links_relays_and_is_refused_past_them() {
    let mut pair = Pair::new();
    for n in 0..RELAYS_PER_LINK - 1 {
        relay_data(&mut pair, &format!("room{n}")).expect("room on the link");
    }
    let edge_keys = pair.link.mirrored();
    pair.start(&edge_keys);
    assert_eq!(
        pair.a.core.relay_count(),
        (1, 0),
        "the publisher's relay fills it"
    );
    let refused = relay_data(&mut pair, "one-more");
    assert_eq!(
        refused,
        Err(CoreError::RelayRefused(RelayRefusal::LinkFull))
    );
    assert!(
        relay_data(&mut pair, "room0").is_ok(),
        "a room relayed already"
    );
    assert_eq!(
        pair.a.core.relay_counters().refused[RelayRefusal::LinkFull as usize],
        1
    );
}

/// What the room's state shows of node `a`: participants, and a publisher `alice`.
fn far_node(publishers: &[&str]) -> Followed {
    Followed {
        nodes: vec![FollowedNode {
            node: "a".to_owned(),
            participants: true,
            publishers: publishers.iter().map(|p| (*p).to_owned()).collect(),
        }],
        ..Followed::default()
    }
}

fn pulls(h: &mut Harness) -> Vec<RelayPull> {
    std::iter::from_fn(|| h.core.poll_relay_pull()).collect()
}

#[test]
fn the_room_state_read_asks_for_what_this_node_lacks_once_a_while() {
    let mut b = crate::fixtures::harness();
    let bo = participant(&mut b, "bo");
    // A node without the relay asks for nothing.
    b.core
        .follow_room(b.now, "room", Some(far_node(&["alice"])));
    assert!(pulls(&mut b).is_empty());
    b.core.enable_relay_pulls();
    b.core
        .follow_room(b.now, "room", Some(far_node(&["alice"])));
    let alice = RelayPull::Publisher {
        room: "room".into(),
        name: "alice".into(),
        node: Some("a".into()),
    };
    let data = RelayPull::Data {
        room: "room".into(),
        node: "a".into(),
    };
    assert_eq!(pulls(&mut b), [alice.clone(), data.clone()]);
    // Each read after (every look, 200 ms) asks nothing new until asked long enough ago.
    b.now += PULL_AGAIN / 2;
    b.core
        .follow_room(b.now, "room", Some(far_node(&["alice"])));
    assert!(pulls(&mut b).is_empty());
    b.now += PULL_AGAIN;
    b.core
        .follow_room(b.now, "room", Some(far_node(&["alice"])));
    assert_eq!(pulls(&mut b), [alice, data]);
    let counted = b.core.relay_counters().pulls;
    assert_eq!(counted, [2, 0, 2, 0], "publisher, changed, data, answer");
    // A node of the room with nobody in it is pulled nothing from.
    let empty = Followed {
        nodes: vec![FollowedNode {
            node: "a".to_owned(),
            ..FollowedNode::default()
        }],
        ..Followed::default()
    };
    b.now += PULL_AGAIN;
    b.core.follow_room(b.now, "room", Some(empty));
    assert!(pulls(&mut b).is_empty());
    // Bo leaves: nothing asked for the room is kept.
    b.core
        .follow_room(b.now, "room", Some(far_node(&["alice"])));
    assert_eq!(pulls(&mut b).len(), 2);
    b.core.remove_peer(bo).expect("bo was there");
    assert_eq!(b.core.table_entries(), 0);
}

#[test]
fn an_origin_with_participants_has_the_edges_data_pulled_in_turn() {
    let mut pair = Pair::new();
    let link = || new_link("origin-nonce", &pair.link);
    let known: Vec<String> = Vec::new();
    let asked = pair
        .a
        .core
        .relay_data_out(pair.a.now, "room", EDGE, &known, link(), Some("edge"))
        .expect("relayed");
    assert!(!asked.pull_back, "nobody here in the conference");
    participant(&mut pair.a, "ada");
    let asked = pair
        .a
        .core
        .relay_data_out(
            pair.a.now,
            "room",
            EDGE,
            &[asked.link],
            link(),
            Some("edge"),
        )
        .expect("relayed");
    assert!(asked.pull_back, "ada is here, the edge's data is not");
    assert_eq!(pair.a.core.relay_counters().pulls[3], 1);
}
