//! Several relays on one link between two nodes' cores, in memory: two publishers of one room
//! on the origin, a viewer of each on the edge, both relays told apart by their SSRCs; each
//! ends on its own, and the link with the last; the link's limits refuse, counted.

use selector::Layer;
use sfu::engine::TrackId;
use sfu::engine::{StreamConfig, StreamIds, TrackConfig};
use sfu::node::core::{
    CoreError, PullReason, RelayCounters, RelayPull, RelayRefusal, LINKS_PER_NODE,
};
use sfu::node::metrics::DropReason;
use sfu::node::participant::{Choice, NamedTrack, ParticipantId};
use sfu::node::peer::{IceCredentials, Join, PeerId, Role, Viewer};
use sfu::node::remote::Remote;
use sfu::node::session_events::SessionEvent;
use sfu::node::srtp::SrtpProfile;
use sfu::node::testing;
use sfu::node::testing::{av1_track, av1_viewer, keys, publisher, Harness};

use crate::common::{as_rtx, with_rid};
use crate::fixtures::{addr, harness, l3t3, DD_IN, DD_OUT};
use crate::participants::{Client, FINGERPRINT};
use crate::relay::{new_link, Pair, EDGE};

const ALICE: u32 = 0xA1;
const BOB: u32 = 0xB1;

/// A publisher named `name` in "room", connected from `port`.
fn named(h: &mut Harness, name: &str, ssrc: u32, port: u16) -> PeerId {
    named_with(h, ("room", name), av1_track(ssrc, DD_IN), port)
}

/// A publisher of `track` named `name` in `room`, connected from `port`.
fn named_with(
    h: &mut Harness,
    (room, name): (&str, &str),
    track: TrackConfig,
    port: u16,
) -> PeerId {
    let ice = h.next_credentials();
    let join = Join {
        name: Some(name.to_owned()),
        ..Join::new(room, ice.clone())
    };
    let id = h
        .core
        .add_publisher(h.now, join, publisher([track]))
        .expect("a publisher");
    h.connect(id, &ice, addr(port));
    id
}

/// A viewer of `source` only.
fn viewer_of(source: &str, ssrc: u32) -> Viewer {
    Viewer {
        source: Some(source.to_owned()),
        ..av1_viewer(ssrc, Some(DD_OUT), Layer::MAX)
    }
}

/// Two cores on one clock: the origin's and the edge's.
fn two_cores() -> (Harness, Harness) {
    let a = harness();
    let mut b = harness();
    b.now = a.now;
    (a, b)
}

/// Alice and Bob publishing on the origin, a viewer of each on the edge, nothing relayed yet.
fn two_publishers() -> (Pair, [PeerId; 2]) {
    let (mut a, mut b) = two_cores();
    let publishers = [
        named(&mut a, "alice", ALICE, 5000),
        named(&mut a, "bob", BOB, 5001),
    ];
    let viewers = [
        b.viewer("room", viewer_of("alice", 0x10), addr(6001)),
        b.viewer("room", viewer_of("bob", 0x20), addr(6002)),
    ];
    let link = keys(SrtpProfile::AeadAes128Gcm, 7);
    (
        Pair {
            a,
            b,
            viewers,
            link,
        },
        publishers,
    )
}

/// What each edge viewer received of `ssrc`'s packets `from..` (to the 30th) sent from `port`.
fn burst(pair: &mut Pair, ssrc: u32, port: u16, from: usize) -> [usize; 2] {
    let before = [6001, 6002].map(|p| pair.b.media_to(addr(p)).len());
    let packets = l3t3(ssrc, 10);
    for packet in packets.iter().skip(from).take(30) {
        pair.a.send(addr(port), packet);
        pair.shuttle();
    }
    let after = [6001, 6002].map(|p| pair.b.media_to(addr(p)).len());
    [after[0] - before[0], after[1] - before[1]]
}

#[test]
fn two_publishers_cross_one_link_each_to_its_viewer_and_each_relay_ends_alone() {
    let (mut pair, [_, bob]) = two_publishers();
    let link = pair.link.mirrored();
    pair.relay(Some("alice"), &link).expect("alice relayed");
    // Bob's relay joins the link the edge names: under the same keys, whatever new ones the
    // request brought (the edge's are wrong here, and unused).
    let unused = keys(SrtpProfile::AeadAes128Gcm, 9);
    pair.relay(Some("bob"), &unused).expect("bob relayed");
    assert_eq!(pair.a.core.link_count(), (1, 0), "one link");
    assert_eq!(pair.b.core.link_count(), (0, 1));
    assert_eq!(pair.a.core.relay_count(), (2, 0), "two relays on it");
    assert_eq!(pair.b.core.relay_count(), (0, 2));

    let [to_alices, to_bobs] = burst(&mut pair, ALICE, 5000, 0);
    assert!(to_alices > 0, "alice's viewer decodes her");
    assert_eq!(to_bobs, 0, "bob's viewer gets none of alice");
    let [to_alices, to_bobs] = burst(&mut pair, BOB, 5001, 0);
    assert_eq!(to_alices, 0);
    assert!(to_bobs > 0, "bob's viewer decodes him");

    // Bob leaves the origin: his relay ends on both nodes, alice's goes on over the link.
    pair.a.core.remove_peer(bob).expect("bob");
    pair.a.drain();
    pair.shuttle();
    assert_eq!(pair.a.core.relay_count(), (1, 0));
    assert_eq!(pair.b.core.relay_count(), (0, 1), "only bob's relay ended");
    assert_eq!(pair.b.core.link_count(), (0, 1));
    pair.run(std::time::Duration::from_millis(250), 8, false);
    assert_eq!(pair.a.core.relay_counters().links_lost, 0);
    let [to_alices, _] = burst(&mut pair, ALICE, 5000, 30);
    assert!(to_alices > 0, "alice still relayed");
}

/// The relayed publishers go by their origin's public ids on the edge too: the edge's
/// participants receive their tracks under the ids the room's state names them by.
#[test]
fn relayed_publishers_go_by_their_origin_ids_on_the_edge() {
    let (mut pair, _) = two_publishers();
    let link = pair.link.mirrored();
    pair.relay(Some("alice"), &link).expect("alice relayed");
    pair.relay(Some("bob"), &link).expect("bob relayed");
    let ids = |h: &Harness| -> Vec<(String, String)> {
        let view = h.core.room_view("room", h.now).expect("the room");
        let mut ids: Vec<(String, String)> = view
            .participants
            .iter()
            .map(|p| (p.name.clone(), p.id.to_string()))
            .collect();
        ids.sort();
        ids
    };
    let origin = ids(&pair.a);
    assert_eq!(origin.len(), 2, "{origin:?}");
    assert_eq!(
        ids(&pair.b),
        origin,
        "the edge names them as the origin does"
    );
}

#[test]
fn the_last_relay_leaving_ends_the_link_on_both_nodes() {
    let (mut pair, publishers) = two_publishers();
    let link = pair.link.mirrored();
    pair.relay(Some("alice"), &link).expect("alice relayed");
    pair.relay(Some("bob"), &link).expect("bob relayed");
    for publisher in publishers {
        pair.a.core.remove_peer(publisher).expect("a publisher");
        pair.a.drain();
        pair.shuttle();
    }
    assert_eq!(pair.a.core.link_count(), (0, 0));
    assert_eq!(pair.b.core.link_count(), (0, 0));
    assert_eq!(pair.b.core.relay_count(), (0, 0));
    assert_eq!(
        pair.a.core.relay_counters().links_lost,
        0,
        "BYEs, not silence"
    );
    assert_eq!(pair.b.core.relay_counters().links_lost, 0);
}

#[test]
fn a_relay_whose_ssrcs_another_on_the_link_has_is_refused_and_counted() {
    let (mut pair, _) = two_publishers();
    let link = pair.link.mirrored();
    pair.relay(Some("alice"), &link).expect("alice relayed");
    // Alice offered again on the same link, as a second relay: her SSRCs are taken.
    let (offer, id) = pair
        .a
        .core
        .relay_out(
            pair.a.now,
            "room",
            Some("alice"),
            EDGE,
            &[],
            new_link("x", &pair.link),
        )
        .expect("the origin restarts its relay of alice on a new link");
    // Under another name (a publisher of its own to the edge), not a renewal of alice's.
    let mut offer = offer;
    offer.name = Some("mallory".to_owned());
    let edge = new_link("origin-nonce", &link);
    let refused = pair
        .b
        .core
        .relay_in(pair.b.now, "room", offer, crate::relay::ORIGIN, edge);
    assert!(
        matches!(
            refused,
            Err(CoreError::RelayRefused(RelayRefusal::SsrcTaken))
        ),
        "{refused:?}"
    );
    let taken = RelayCounters::REFUSALS
        .iter()
        .position(|r| *r == "ssrc_taken")
        .expect("a label");
    assert_eq!(pair.b.core.relay_counters().refused[taken], 1);
    assert_eq!(id, "x", "the edge named no link: a new one");
}

#[test]
fn an_origin_holds_at_most_its_links_and_counts_the_one_refused() {
    let (mut pair, _) = two_publishers();
    for port in 0..LINKS_PER_NODE as u16 {
        let edge = Remote::Link(std::net::SocketAddr::from(([10, 0, 1, 1], 40_000 + port)));
        let link = new_link(&format!("link-{port}"), &pair.link);
        pair.a
            .core
            .relay_out(pair.a.now, "room", Some("alice"), edge, &[], link)
            .expect("a link of its own");
    }
    assert_eq!(pair.a.core.link_count(), (LINKS_PER_NODE, 0));
    let one_more = new_link("one-more", &pair.link);
    let refused = pair
        .a
        .core
        .relay_out(pair.a.now, "room", Some("alice"), EDGE, &[], one_more);
    assert!(
        matches!(
            refused,
            Err(CoreError::RelayRefused(RelayRefusal::TooManyLinks))
        ),
        "{refused:?}"
    );
    assert_eq!(pair.a.core.relay_counters().refused[1], 1);
}

/// `units` temporal units of an L3T3 stream under `ssrc` with a keyframe every third: an edge
/// viewer served midway gets one soon.
fn keyframes_often(ssrc: u32, units: usize) -> Vec<Vec<u8>> {
    use selector::scalability::{GeneratorConfig, ScalabilityMode, StreamGenerator};
    let config = GeneratorConfig {
        ssrc,
        keyframe_interval_tus: 3,
        ..GeneratorConfig::default()
    };
    let mut generator = StreamGenerator::new(ScalabilityMode::L3T3, config);
    let structure = generator.structure().clone();
    let mut packets = Vec::new();
    let mut done = 0;
    while done < units {
        let packet = generator.next().expect("endless");
        done += usize::from(packet.marker);
        packets.push(packet.rtp_bytes(DD_IN, &structure));
    }
    packets
}

/// A simulcast track of two streams ("q", "f") whose SSRCs their first packets bind.
fn unbound_simulcast() -> TrackConfig {
    let mut config = av1_track(0, DD_IN);
    config.streams = (0..2)
        .map(|_| StreamConfig {
            ssrc: 0,
            rtx_ssrc: None,
        })
        .collect();
    config.stream_ids = StreamIds::Rids {
        rids: ["q", "f"].map(String::from).into_iter().collect(),
        rid_ext: 12,
        repaired_rid_ext: Some(13),
        announced: Default::default(),
    };
    config
}

#[test]
fn a_stream_bound_after_the_relay_started_is_announced_and_relayed_once_the_edge_asks_again() {
    let (mut a, mut b) = two_cores();
    named_with(&mut a, ("room", "alice"), unbound_simulcast(), 5000);
    let viewers = [
        b.viewer("room", viewer_of("alice", 0x10), addr(6001)),
        b.viewer(
            "room",
            av1_viewer(0x20, Some(DD_OUT), Layer::MAX),
            addr(6002),
        ),
    ];
    let link = keys(SrtpProfile::AeadAes128Gcm, 7);
    let mut pair = Pair {
        a,
        b,
        viewers,
        link,
    };
    let edge_keys = pair.link.mirrored();
    pair.relay(Some("alice"), &edge_keys)
        .expect("alice relayed, unbound");

    // Stream f binds on the origin; the edge cannot place it yet.
    let packets: Vec<Vec<u8>> = keyframes_often(0x5151, 12)
        .iter()
        .map(|p| with_rid(p, 12, b"f"))
        .collect();
    let (first, rest) = packets.split_at(20);
    let unknown = |pair: &Pair| pair.b.core.counters().dropped(DropReason::UnknownSsrc);
    let before = unknown(&pair);
    pair.publish(first);
    assert!(
        unknown(&pair) > before,
        "relayed, but under an SSRC the edge was not offered"
    );
    assert!(pair.b.media_to(addr(6001)).is_empty());
    assert!(pair.b.core.relay_room("room").renew.is_empty());

    // The origin's keepalive tells the edge, whose node asks again on the same link: once,
    // however many keepalives tell it meanwhile.
    pair.b.core.enable_relay_pulls();
    pair.run(std::time::Duration::from_millis(250), 6, false);
    assert_eq!(
        pair.b.core.relay_room("room").renew,
        vec!["alice".to_owned()]
    );
    let asked: Vec<RelayPull> = std::iter::from_fn(|| pair.b.core.poll_relay_pull()).collect();
    let alice = RelayPull::Publisher {
        room: "room".into(),
        name: "alice".into(),
        node: None,
    };
    assert_eq!(
        asked,
        [alice],
        "the room is not followed: its node is the directory's"
    );
    let counters = pair.b.core.relay_counters();
    assert_eq!(counters.pulls[PullReason::Changed as usize], 1);
    assert!(counters.changes_held >= 1, "told again while asked");
    pair.relay(Some("alice"), &edge_keys)
        .expect("alice relayed again");
    assert_eq!(pair.b.core.relay_count(), (0, 1), "the relay-in replaced");
    assert_eq!(pair.a.core.relay_count(), (1, 0));
    assert_eq!(pair.b.core.link_count(), (0, 1), "on the same link");
    assert!(pair.b.core.relay_room("room").renew.is_empty());

    let unknown_before = unknown(&pair);
    assert_eq!(pair.publish(rest), rest.len());
    assert_eq!(unknown(&pair), unknown_before, "every packet placed");
    assert!(
        !pair.b.media_to(addr(6001)).is_empty(),
        "alice's viewer served"
    );
    pair.run(std::time::Duration::from_millis(250), 3, false);
    assert!(
        pair.b.core.relay_room("room").renew.is_empty(),
        "nothing changed since"
    );
}

/// The id of session `id`'s first published track.
fn first_track(h: &Harness, id: PeerId) -> TrackId {
    let publisher = h.core.peer(id).and_then(|p| p.role.publisher());
    publisher
        .and_then(|p| p.tracks[0].id)
        .expect("a published track")
}

fn public(h: &Harness, id: PeerId) -> ParticipantId {
    let identity = h.core.peer(id).and_then(|p| p.identity.as_ref());
    identity.expect("a participant").public
}

/// A participant of "room" on `h` receiving in `video` sections that take VP8 and AV1 (or
/// VP8 alone), connected from `port`: its session and the node's answer.
fn receiving_participant(
    h: &mut Harness,
    name: &str,
    video: usize,
    av1: bool,
    port: u16,
) -> (PeerId, String) {
    let mut client = Client::new(port.into(), &[]);
    client.ensure(0, video);
    let mut offer = client.offer();
    if !av1 {
        offer = offer.replace(" 96 97 45 46\r\n", " 96 97\r\n");
        offer = offer
            .lines()
            .filter(|l| !l.contains(":45 ") && !l.contains(":46 "))
            .map(|l| format!("{l}\r\n"))
            .collect();
    }
    let node = (FINGERPRINT, addr(50_000));
    let (id, answer) =
        testing::join_participant(&mut h.core, h.now, ("room", name), &offer, node).expect("joins");
    let line = |key: &str| {
        answer
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .expect("in the answer")
            .to_owned()
    };
    let ice = IceCredentials {
        local_ufrag: line("a=ice-ufrag:"),
        local_pwd: line("a=ice-pwd:"),
    };
    h.connect(id, &ice, addr(port));
    (id, answer)
}

/// The tracks the events for `to` name, with their participants: its layer changes, or the
/// tracks refused to it.
fn tracks_told(h: &mut Harness, to: PeerId, refused: bool) -> Vec<(u32, Option<ParticipantId>)> {
    let mut told = Vec::new();
    while let Some((peer, event)) = h.core.poll_session_event() {
        let named = match event {
            SessionEvent::LayerChanged {
                track, participant, ..
            } if !refused => (track, participant),
            SessionEvent::NotForwarded {
                track, participant, ..
            } if refused => (track, participant),
            _ => continue,
        };
        if peer == to {
            told.push(named);
        }
    }
    told
}

/// A relayed track goes by its origin's id on the edge as the room's state names it: a
/// participant there finds it under that id in its answer and its events, and chooses for it
/// by that id and its publisher's, even where a track of the edge's own has the same id.
#[test]
fn a_participant_on_the_edge_names_a_relayed_track_as_the_room_does() {
    let (mut a, mut b) = two_cores();
    // The origin's ids run ahead of the edge's, so that one of the edge's own can meet alice's.
    for n in 0..16 {
        named_with(
            &mut a,
            ("other", &format!("o{n}")),
            av1_track(0x100 + n, DD_IN),
            4000 + n as u16,
        );
    }
    let alice = named(&mut a, "alice", ALICE, 5000);
    let viewers = [
        b.viewer("room", viewer_of("alice", 0x10), addr(6001)),
        b.viewer("room", viewer_of("bob", 0x20), addr(6002)),
    ];
    let link = keys(SrtpProfile::AeadAes128Gcm, 7);
    let mut pair = Pair {
        a,
        b,
        viewers,
        link,
    };
    let relay_in = pair
        .relay(Some("alice"), &pair.link.mirrored())
        .expect("alice relayed");
    let (named_id, local) = (first_track(&pair.a, alice), first_track(&pair.b, relay_in));
    assert_ne!(
        named_id, local,
        "the edge's router gave alice's track an id of its own"
    );
    // Carol joins the edge until the id its router gives her track is alice's (a session
    // without a track in between when the ids' parity differs).
    let carol = loop {
        let candidate = named(&mut pair.b, "carol", 0xC1, 7000);
        let id = first_track(&pair.b, candidate);
        assert!(id <= named_id, "the edge's ids came past alice's");
        if id == named_id {
            break candidate;
        }
        pair.b.core.remove_peer(candidate).expect("carol");
        if (named_id.0 - id.0) % 2 == 1 {
            pair.b
                .viewer("other", viewer_of("nobody", 0x30), addr(6003));
        }
    };
    let (alice_public, carol_public) = (public(&pair.a, alice), public(&pair.b, carol));

    let (dave, answer) = receiving_participant(&mut pair.b, "dave", 2, true, 6100);
    for owner in [alice_public, carol_public] {
        let msid = format!("msid:p{owner} t{}", named_id.0);
        assert!(answer.contains(&msid), "{msid} in {answer}");
    }
    let pause = Choice {
        paused: true,
        ..Choice::default()
    };
    let alices = NamedTrack {
        id: named_id.0,
        participant: Some(alice_public),
    };
    pair.b
        .core
        .set_choice(dave, alices, pause)
        .expect("alice's track");
    let base = Choice {
        target: Layer::new(0, 0),
        paused: false,
    };
    let unnamed = NamedTrack {
        id: named_id.0,
        participant: None,
    };
    pair.b
        .core
        .set_choice(dave, unnamed, base)
        .expect("the edge's own track of that id");
    let Some(Role::Participant(p)) = pair.b.core.peer(dave).map(|p| &p.role) else {
        panic!("a participant")
    };
    assert_eq!(
        p.choices.get(&local),
        Some(&pause),
        "alice's relayed track paused"
    );
    assert_eq!(
        p.choices.get(&named_id),
        Some(&base),
        "carol's at the base layer"
    );

    // Alice's media reaches dave: the layer he is told of names her track as the room does.
    pair.b
        .core
        .set_choice(dave, alices, Choice::default())
        .expect("alice's track");
    while pair.b.core.poll_session_event().is_some() {}
    for packet in l3t3(ALICE, 10).iter().take(30) {
        pair.a.send(addr(5000), packet);
        pair.shuttle();
    }
    let told = tracks_told(&mut pair.b, dave, false);
    assert!(!told.is_empty(), "dave is told of alice's layer");
    assert!(
        told.iter().all(|&t| t == (named_id.0, Some(alice_public))),
        "{told:?}"
    );

    // A participant that decodes no AV1 is told it does not get either track, each by the
    // id the room names it by and its publisher.
    let (erin, _) = receiving_participant(&mut pair.b, "erin", 2, false, 6200);
    let mut refused = tracks_told(&mut pair.b, erin, true);
    refused.sort();
    let mut expected = vec![
        (named_id.0, Some(alice_public)),
        (named_id.0, Some(carol_public)),
    ];
    expected.sort();
    assert_eq!(refused, expected);
}

/// A relay its origin renews because it bound one more of the publisher's SSRCs long after
/// the relay started (a simulcast stream's retransmissions, first sent at the first loss) is
/// brought up to date in place: the edge's viewers keep their subscription and go on at once,
/// where a relay replaced would have them wait for a keyframe (a freeze in a browser).
#[test]
fn a_relay_renewed_for_a_late_bound_rtx_stream_keeps_its_viewers_going() {
    let (mut a, mut b) = two_cores();
    named_with(&mut a, ("room", "alice"), unbound_simulcast(), 5000);
    // Both on stream q, the one the publisher sends.
    let low = |ssrc| Viewer {
        source: Some("alice".to_owned()),
        ..av1_viewer(ssrc, Some(DD_OUT), Layer::new(0, 2))
    };
    let viewers = [
        b.viewer("room", low(0x10), addr(6001)),
        b.viewer("room", low(0x20), addr(6002)),
    ];
    let link = keys(SrtpProfile::AeadAes128Gcm, 7);
    let mut pair = Pair {
        a,
        b,
        viewers,
        link,
    };
    let raw = keyframes_often(0x5150, 12);
    let packets: Vec<Vec<u8>> = raw.iter().map(|p| with_rid(p, 12, b"q")).collect();
    pair.publish(&packets[..1]);
    let edge_keys = pair.link.mirrored();
    let relayed = pair
        .relay(Some("alice"), &edge_keys)
        .expect("alice relayed");
    let track = first_track(&pair.b, relayed);
    let (before, rest) = packets.split_at(40);
    pair.publish(&before[1..]);
    let served = pair.b.media_to(addr(6001)).len();
    assert!(served > 0, "alice's viewer served");

    // Stream q's retransmissions show up: the origin binds their SSRC and says so.
    let rtx = with_rid(&as_rtx(&raw[30], 0x5152, 1), 13, b"q");
    pair.a.send(addr(5000), &rtx);
    pair.shuttle();
    pair.b.core.enable_relay_pulls();
    pair.run(std::time::Duration::from_millis(250), 6, false);
    assert_eq!(pair.b.core.relay_room("room").renew, ["alice"]);
    let renewed = pair
        .relay(Some("alice"), &edge_keys)
        .expect("alice relayed again");
    assert_eq!(renewed, relayed, "the same relay-in");
    assert_eq!(first_track(&pair.b, renewed), track, "the same track");
    assert!(pair.b.core.relay_room("room").renew.is_empty());

    // The next packets, mid-way between keyframes, reach the viewer as before.
    let unknown = pair.b.core.counters().dropped(DropReason::UnknownSsrc);
    let sent_before = pair.b.media_to(addr(6001)).len();
    pair.publish(&rest[..6]);
    let now_served = pair.b.media_to(addr(6001)).len() - sent_before;
    assert_eq!(now_served, 6, "served at once, no keyframe awaited");
    assert_eq!(
        pair.b.core.counters().dropped(DropReason::UnknownSsrc),
        unknown
    );
    let resent = with_rid(&as_rtx(&raw[42], 0x5152, 2), 13, b"q");
    pair.a.send(addr(5000), &resent);
    pair.shuttle();
    assert_eq!(
        pair.b.core.counters().dropped(DropReason::UnknownSsrc),
        unknown,
        "the retransmission placed on the edge"
    );
}
