//! Sessions in the node's core, driven without sockets or clocks: ICE-lite binding, what is
//! dropped from strangers and before keys, SSRCs that are each session's own, the tables a
//! session leaves, the limits, who may reach a session, and the core's timers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use selector::Layer;
use sfu::engine::RouterConfig;
use sfu::node::admission::Admission;
use sfu::node::core::{CoreError, NodeCore, Resource};
use sfu::node::limits::{LimitError, Limits};
use sfu::node::metrics::DropReason;
use sfu::node::peer::{Join, Kind, Owner, PeerId};
use sfu::node::shard::Steering;
use sfu::node::srtp::Unprotected;
use sfu::node::testing::{
    answer_check, av1_track, av1_viewer, binding_request, credentials, publisher, Harness,
};
use stun::message::{Message, BINDING_SUCCESS};

use crate::common;
use crate::fixtures::{addr, core, harness, l3t3, DD_IN, DD_OUT};

/// A viewer of `room` with `ice`, its checks and handshake to come.
fn unconnected_viewer(h: &mut Harness, ice: &sfu::node::peer::IceCredentials) -> PeerId {
    let viewer = av1_viewer(0x10, None, Layer::MAX);
    let join = Join::new("room", ice.clone());
    h.core
        .add_viewer(h.now, join, viewer)
        .expect("room for a viewer")
}

#[test]
fn binding_requests_are_answered_and_latch_the_nominated_address() {
    let mut h = harness();
    let ice = credentials(1);
    let id = unconnected_viewer(&mut h, &ice);
    h.send(addr(4000), &binding_request(&ice, false));
    h.send(addr(4001), &binding_request(&ice, true));
    for port in [4000, 4001] {
        let mut response = Message::new();
        response.raw = h.sent[&addr(port).into()][0].clone();
        response.decode().expect("STUN");
        assert_eq!(response.typ, BINDING_SUCCESS);
    }
    assert_eq!(
        h.core.peer(id).and_then(|p| p.addr),
        Some(addr(4001).into())
    );
    let mut wrong = credentials(1);
    wrong.local_pwd = "not the password at all".into();
    h.send(addr(4002), &binding_request(&wrong, true));
    assert!(!h.sent.contains_key(&addr(4002).into()));
    assert_eq!(
        h.core.peer(id).and_then(|p| p.addr),
        Some(addr(4001).into())
    );
    assert_eq!(h.core.counters().dropped(DropReason::BadStun), 1);
}

#[test]
fn datagrams_from_strangers_and_before_keys_are_counted_and_dropped() {
    let mut h = harness();
    h.send(addr(8000), &l3t3(0xA1, 1)[0]);
    assert_eq!(h.core.counters().dropped(DropReason::UnknownSource), 1);
    let ice = credentials(9);
    let one = publisher([av1_track(0xA1, DD_IN)]);
    h.core
        .add_publisher(h.now, Join::new("room", ice.clone()), one)
        .expect("free SSRC");
    h.send(addr(8001), &binding_request(&ice, true));
    h.send(addr(8001), &l3t3(0xA1, 1)[0]);
    assert_eq!(h.core.counters().dropped(DropReason::NoKeys), 1);
    h.send(addr(8001), &[0x41, 0x00]);
    assert_eq!(h.core.counters().dropped(DropReason::NotWebRtc), 1);
    // SSRCs are the publisher's own (RFC 3550 section 8): another session may use the same,
    // but one session cannot announce one twice.
    let again = publisher([av1_track(0xA1, DD_IN)]);
    assert!(h
        .core
        .add_publisher(h.now, Join::new("room", credentials(10)), again)
        .is_ok());
    let mut twice = publisher([av1_track(0xB1, DD_IN)]);
    twice.tracks.push(twice.tracks[0].clone());
    let before = h.core.table_entries();
    assert_eq!(
        h.core
            .add_publisher(h.now, Join::new("room", credentials(11)), twice)
            .map(|_| ()),
        Err(CoreError::SsrcInUse)
    );
    assert_eq!(h.core.table_entries(), before, "nothing of it stays");
}

/// Whether a datagram is a PLI (RFC 4585 section 6.3.1: PSFB, FMT 1), alone or in a compound.
fn has_pli(datagram: &[u8]) -> bool {
    let mut rest = datagram;
    while rest.len() >= 4 {
        if rest[0] & 0x1F == 1 && rest[1] == 206 {
            return true;
        }
        let words = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
        rest = rest.get((words + 1) * 4..).unwrap_or_default();
    }
    false
}

#[test]
fn timers_run_on_time_under_an_input_every_100_ms() {
    let mut h = Harness::new(NodeCore::new(
        RouterConfig::default(),
        Duration::from_secs(3),
    ));
    h.publisher("room", publisher([av1_track(0xA1, DD_IN)]), addr(9000));
    h.viewer(
        "room",
        av1_viewer(0x10, Some(DD_OUT), Layer::MAX),
        addr(9001),
    );
    // The stream without its first keyframe: the viewer can only start at a keyframe it has
    // to ask for, and nothing but a timer sends that request upstream.
    let packets = l3t3(0xA1, 60);
    let skip = packets
        .iter()
        .position(|p| p[1] & 0x80 != 0)
        .expect("a marker")
        + 1;
    let started = h.now;
    let mut pli_at = None;
    let mut removed_at = None;
    for packet in packets[skip..].iter().cycle().take(60) {
        h.now += Duration::from_millis(100);
        h.step(addr(9000), packet);
        if pli_at.is_none()
            && h.sent
                .get(&addr(9000).into())
                .is_some_and(|d| d.iter().any(|d| has_pli(d)))
        {
            pli_at = Some(h.now - started);
        }
        if removed_at.is_none() && h.core.poll_removed().is_some() {
            removed_at = Some(h.now - started);
        }
    }
    assert_eq!(
        pli_at,
        Some(Duration::from_millis(100)),
        "the keyframe request goes out with the first packet that needs it"
    );
    // Neither session sends STUN after connecting: both are silent for the 3 s timeout, and
    // the once-a-second sweep removes them within a second after it.
    let removed = removed_at.expect("the silent sessions are swept");
    assert!(
        removed > Duration::from_secs(3) && removed <= Duration::from_millis(4100),
        "swept at {removed:?}"
    );
    assert_eq!(h.core.snapshot().publishers + h.core.snapshot().viewers, 0);
}

#[test]
fn a_publisher_cannot_send_under_another_sessions_ssrc() {
    let mut h = harness();
    h.publisher("a", publisher([av1_track(0xA1, DD_IN)]), addr(9100));
    h.viewer("a", av1_viewer(0x10, Some(DD_OUT), Layer::MAX), addr(9101));
    h.publisher("b", publisher([av1_track(0xB1, DD_IN)]), addr(9102));
    h.viewer("b", av1_viewer(0x20, Some(DD_OUT), Layer::MAX), addr(9103));
    for packet in l3t3(0xA1, 10) {
        h.send(addr(9100), &packet);
    }
    let before = h.media_to(addr(9101)).len();
    assert!(before > 0, "room a's own media flows");
    // Room b's publisher sends under room a's SSRC, with sequence numbers following it.
    let injected = l3t3(0xA1, 20);
    for packet in &injected[before..] {
        h.send(addr(9102), packet);
    }
    assert_eq!(
        h.media_to(addr(9101)).len(),
        before,
        "nothing reached room a"
    );
    assert!(h.media_to(addr(9103)).is_empty(), "nor room b");
    assert_eq!(
        h.core.counters().dropped(DropReason::UnknownSsrc),
        (injected.len() - before) as u64
    );
}

/// Also as one worker of several: the addresses its sessions were bound at leave the shared
/// steering table, whether a session is ended or swept out for silence.
#[test]
fn sessions_that_come_and_go_leave_every_table_empty() {
    let steering = Arc::new(Steering::default());
    let admission = Arc::new(Admission::default());
    let mut h = Harness::new(core().with_shard(1, admission.clone(), steering.clone()));
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut live = Vec::new();
    for i in 0..1000u32 {
        let room = format!("room{}", next() % 7);
        let at = addr(10_000 + (i % 50_000) as u16);
        let id = if next() % 4 == 0 {
            h.publisher(&room, publisher([av1_track(0x1000 + i, DD_IN)]), at)
        } else {
            h.viewer(&room, av1_viewer(0x10, Some(DD_OUT), Layer::MAX), at)
        };
        live.push(id);
        if next() % 3 == 0 {
            let index = (next() % live.len() as u64) as usize;
            h.core.remove_peer(live.swap_remove(index)).expect("live");
        }
    }
    assert!(h.core.table_entries() > 0);
    assert_eq!(
        steering.len(),
        live.len(),
        "one bound address per live session"
    );
    for _ in 0..live.len() / 2 {
        let id = live.pop().expect("live");
        h.core.remove_peer(id).expect("live");
    }
    // The rest fall silent and are swept.
    h.now += Duration::from_secs(31);
    h.core.handle_timeout(h.now);
    h.drain();
    assert_eq!(h.core.table_entries(), 0, "every map is empty");
    assert!(steering.is_empty(), "no address steered to a gone session");
    assert_eq!(admission.entries(), 0, "no place held for a gone session");
    assert_eq!(h.core.room_count(), 0);
    assert_eq!(h.core.remove_peer(PeerId(7)), Err(CoreError::UnknownPeer));
}

#[test]
fn each_limit_refuses_with_its_reason_and_changes_nothing() {
    let limits = Limits {
        sessions: 4,
        sessions_per_room: 2,
        sessions_per_client: 3,
        handshakes: 3,
        ..Limits::default()
    };
    let mut core = core().with_limits(limits);
    let now = Instant::now();
    let client = |n: u8| Some(std::net::IpAddr::from([10, 0, 0, n]));
    let join = |room: &str, n: u32, c: u8| Join {
        client: client(c),
        ..Join::new(room, credentials(n))
    };
    let viewer = || av1_viewer(0x10, None, Layer::MAX);
    let a = core
        .add_viewer(now, join("a", 1, 1), viewer())
        .expect("room");
    let b = core
        .add_viewer(now, join("a", 2, 1), viewer())
        .expect("room");
    let full = |core: &mut NodeCore, join: Join, wanted: LimitError| {
        let before = core.table_entries();
        assert_eq!(
            core.add_viewer(now, join.clone(), viewer()),
            Err(CoreError::Limit(wanted))
        );
        let publisher = publisher([av1_track(0x77, DD_IN)]);
        assert_eq!(
            core.add_publisher(now, join, publisher),
            Err(CoreError::Limit(wanted))
        );
        assert_eq!(core.table_entries(), before, "nothing changed");
        assert_eq!(core.counters().refused(wanted), 2);
    };
    full(&mut core, join("a", 3, 2), LimitError::RoomFull(2));
    core.add_viewer(now, join("b", 4, 1), viewer())
        .expect("room");
    full(&mut core, join("c", 5, 1), LimitError::ClientFull(3));
    full(&mut core, join("c", 6, 2), LimitError::Handshakes(3));
    core.set_srtp(a, Box::new(Unprotected));
    core.add_viewer(now, join("c", 7, 2), viewer())
        .expect("a handshake ended");
    full(&mut core, join("d", 8, 3), LimitError::NodeFull(4));
    core.remove_peer(b).expect("live");
    core.add_viewer(now, join("d", 9, 3), viewer())
        .expect("a session left");
}

#[test]
fn a_resource_answers_only_its_kind_room_and_creator() {
    let mut core = core();
    let now = Instant::now();
    let alice = Owner::of("Bearer alice");
    let join = Join {
        owner: Some(alice),
        ..Join::new("room", credentials(1))
    };
    let id = core
        .add_viewer(now, join, av1_viewer(0x10, None, Layer::MAX))
        .expect("room");
    let resource = |kind, room: &str, owner| Resource {
        kind,
        room: room.to_owned(),
        id,
        owner,
    };
    assert_eq!(
        core.resource(&resource(Kind::Viewer, "room", Some(alice))),
        Ok(id)
    );
    let mallory = Some(Owner::of("Bearer mallory"));
    assert_eq!(
        core.resource(&resource(Kind::Viewer, "room", mallory)),
        Err(CoreError::NotOwner)
    );
    assert_eq!(
        core.resource(&resource(Kind::Viewer, "room", None)),
        Err(CoreError::NotOwner)
    );
    for (kind, room) in [(Kind::Publisher, "room"), (Kind::Viewer, "other")] {
        assert_eq!(
            core.resource(&resource(kind, room, Some(alice))),
            Err(CoreError::UnknownPeer)
        );
    }
    assert_eq!(id.to_string().len(), 32, "128 bits in hex");
    assert_eq!(id.to_string().parse(), Ok(id));
}

#[test]
fn a_packet_the_engine_refuses_is_counted_once() {
    let mut h = harness();
    h.publisher("room", publisher([av1_track(0xA1, DD_IN)]), addr(9200));
    let packets = l3t3(0xA1, 2);
    h.send(addr(9200), &packets[0]);
    h.send(addr(9200), &packets[0]);
    let mut truncated = packets[1].clone();
    truncated.truncate(13);
    h.send(addr(9200), &truncated);
    let counters = h.core.counters();
    assert_eq!(counters.dropped(DropReason::Duplicate), 1, "the duplicate");
    assert_eq!(counters.dropped(DropReason::MalformedRtp), 1, "the cut one");
    assert_eq!(counters.dropped(DropReason::UnknownSsrc), 0, "each once");
    let text = h.core.snapshot().render();
    for (reason, n) in [("duplicate", 1), ("malformed_rtp", 1), ("unknown_ssrc", 0)] {
        let series = format!("strata_dropped_total{{reason=\"{reason}\"}} {n}");
        assert!(text.contains(&series), "{series} in\n{text}");
    }
    assert!(!text.contains("reason=\"engine\""), "no catch-all reason");
}

/// Binding requests keep a session only on the pair in use: one that answers ICE every
/// second but never has its keys is removed once the session timeout has passed since it
/// was made; a connected one whose only checks come from an address other than the one it
/// nominated last is removed once it has been silent there as long.
#[test]
fn only_a_connected_session_s_own_address_keeps_it() {
    let mut h = Harness::new(NodeCore::new(
        RouterConfig::default(),
        Duration::from_secs(3),
    ));
    let ice = h.next_credentials();
    let waiting = unconnected_viewer(&mut h, &ice);
    let moved = h.viewer("room", av1_viewer(0x11, None, Layer::MAX), addr(9301));
    let moved_ice = credentials(2);
    // Nominated elsewhere and moved there (its client answered the node's check), then
    // checks from the old address only.
    h.send(addr(9302), &binding_request(&moved_ice, true));
    let check = h.sent[&addr(9302).into()].last().cloned().expect("a check");
    h.send(addr(9302), &answer_check(&check, &moved_ice));
    assert_eq!(
        h.core.peer(moved).and_then(|p| p.addr),
        Some(addr(9302).into())
    );
    let start = h.now;
    let mut gone = [None, None];
    for _ in 0..50 {
        h.now += Duration::from_millis(100);
        h.send(addr(9300), &binding_request(&ice, true));
        h.send(addr(9301), &binding_request(&moved_ice, false));
        h.core.handle_timeout(h.now);
        for (at, id) in gone.iter_mut().zip([waiting, moved]) {
            if at.is_none() && h.core.peer(id).is_none() {
                *at = Some(h.now - start);
            }
        }
    }
    for at in gone {
        let at = at.expect("removed");
        assert!(
            at > Duration::from_secs(3) && at <= Duration::from_millis(4100),
            "at {at:?}"
        );
    }
}

/// A datagram the loop took late (its socket read in spaced turns) is reported to its
/// publisher as arriving when the kernel stamped it: the transport-wide feedback carries the
/// 5 ms its packets came apart, though the core took them all at one instant.
#[test]
fn a_publisher_hears_when_its_packets_arrived_not_when_they_were_taken() {
    use rtcp::transport_feedbacks::transport_layer_cc::TransportLayerCc;
    const TWCC: u8 = 5;
    let mut h = harness();
    let mut track = av1_track(0xA1, DD_IN);
    track.transport_cc = Some(sfu::engine::TransportCc { ext_id: TWCC });
    h.publisher("room", publisher([track]), addr(9500));
    let start = h.now;
    let taken = start + Duration::from_millis(100);
    for (i, packet) in l3t3(0xA1, 3).iter().enumerate() {
        let sequenced = common::with_rid(packet, TWCC, &(i as u16).to_be_bytes());
        let arrived = start + Duration::from_millis(5 * i as u64);
        h.core
            .handle_datagram_arrived(taken, arrived, addr(9500), sequenced.into());
    }
    for step in 1..=30 {
        h.now = taken + Duration::from_millis(10 * step);
        if h.core.poll_timeout().is_some_and(|at| at <= h.now) {
            h.core.handle_timeout(h.now);
        }
    }
    h.drain();
    let to_publisher = h.sent.get(&addr(9500).into()).cloned().unwrap_or_default();
    let deltas: Vec<i64> = to_publisher
        .iter()
        .filter_map(|d| rtcp::packet::unmarshal(&mut &d[..]).ok())
        .flatten()
        .filter_map(|p| p.as_any().downcast_ref::<TransportLayerCc>().cloned())
        .flat_map(|feedback| feedback.recv_deltas.into_iter().skip(1).map(|d| d.delta))
        .collect();
    assert!(deltas.len() >= 10, "feedback on the packets: {deltas:?}");
    assert!(deltas.iter().all(|&d| d == 5_000), "{deltas:?}");
}
