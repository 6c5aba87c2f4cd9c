//! Conference rooms in the node's core, driven without sockets or clocks: participants that
//! publish and receive on one session each, offering in SDP as a browser does and applying the
//! node's answers (both through the SDP parser), renegotiating when the core asks. Every
//! participant must end up receiving exactly the other participants' live tracks, a leave must
//! free everything the participant held, and media must reach each receiver under the SSRC
//! its answer gave.

use crate::participants;

use std::time::Duration;

use participants::{sends, speaking_room, Client, Conference, Section, Send, ROOM};
use proptest::prelude::*;
use rtp_ext::codec::MediaKind;
use sfu::engine::RouterConfig;
use sfu::node::core::{CoreError, Followed, NodeCore};
use sfu::node::limits::Limits;
use sfu::node::participant::{Choice, NamedTrack, ParticipantId};
use sfu::node::room_view::ParticipantView;
use sfu::node::sdp::{negotiate_participant, parse_offer};
use sfu::node::session_events::SessionEvent;
use sfu::node::signaling::participant_offer;

/// Participants 1 and 2 joined, every renegotiation done.
fn two_participants() -> Conference {
    let mut c = Conference::new(Limits::default());
    c.join(Client::new(1, &sends(1))).expect("room");
    c.join(Client::new(2, &sends(2))).expect("room");
    c.settle();
    c
}

#[test]
fn three_participants_each_receive_the_other_two_and_a_leave_reaches_everyone() {
    let mut c = Conference::new(Limits::default());
    for n in 1..=3 {
        c.join(Client::new(n, &sends(n))).expect("room for it");
        c.settle();
    }
    c.check_everyone_receives_the_others();
    // Participant 1 (audio and VP8) receives 2's VP8, and 3's audio and AV1.
    assert_eq!(c.clients[&1].receiving.len(), 3);
    let joined = c.events[&1]
        .iter()
        .filter(|e| matches!(e, SessionEvent::ParticipantJoined(_)))
        .count();
    assert_eq!(joined, 2, "1 heard of 2 and 3 joining");
    c.leave(2);
    c.settle();
    c.check_everyone_receives_the_others();
    let left = |c: &Conference, n: u32| {
        c.events[&n].iter().any(
            |e| matches!(e, SessionEvent::ParticipantLeft { name, .. } if name == "participant 2"),
        )
    };
    assert!(left(&c, 1) && left(&c, 3));
    // The section that carried 2's video is reused for the next participant's.
    let sections_before = c.clients[&1].sections.len();
    c.join(Client::new(4, &[Send::Vp8(4001)])).expect("room");
    c.settle();
    c.check_everyone_receives_the_others();
    assert_eq!(
        c.clients[&1].sections.len(),
        sections_before,
        "no new section needed"
    );
}

#[test]
fn a_track_started_and_stopped_mid_call_reaches_everyone_in_place() {
    let mut c = two_participants();
    let before = c.clients[&2].received_tracks().len();
    // 1 starts a second video (a screen, say): a new sending section, offered again.
    let client = c.clients.get_mut(&1).expect("a client");
    let mid = client.mid();
    client.sections.push(Section::Send {
        mid,
        what: Send::Vp8(1777),
    });
    c.renegotiate(1).expect("follows the session");
    c.settle();
    c.check_everyone_receives_the_others();
    assert_eq!(c.clients[&2].received_tracks().len(), before + 1);
    let added = c.events[&2]
        .iter()
        .filter(|e| matches!(e, SessionEvent::TrackAdded(_)))
        .count();
    assert!(added >= 1, "2 heard of the new track");
    // 1 stops it: the section turns inactive, and 2's section that carried it too.
    let client = c.clients.get_mut(&1).expect("a client");
    let index = client.sections.len() - 1;
    client.sections[index] = Section::Stopped {
        mid,
        kind: MediaKind::Video,
    };
    c.renegotiate(1).expect("follows the session");
    c.settle();
    c.check_everyone_receives_the_others();
    assert_eq!(c.clients[&2].received_tracks().len(), before);
    assert!(
        c.events[&2]
            .iter()
            .any(|e| matches!(e, SessionEvent::TrackRemoved { .. })),
        "2 heard of it ending"
    );
}

#[test]
fn media_reaches_each_receiver_under_the_ssrc_its_answer_gave() {
    let mut c = Conference::new(Limits::default());
    for n in 1..=2 {
        c.join(Client::new(n, &[Send::Vp8(1000 * n)]))
            .expect("room");
        c.settle();
    }
    for n in 1..=2 {
        c.connect(n);
    }
    c.sent();
    // A VP8 keyframe in one packet from participant 1: the payload descriptor (start of
    // partition, picture id, TL0PICIDX, temporal layer 0) and a keyframe's frame tag and start
    // code (RFC 7741).
    let mut packet = vec![0x80, 0x80 | 96, 0, 1, 0, 0, 0, 1];
    packet.extend_from_slice(&1000u32.to_be_bytes());
    packet.extend_from_slice(&[0x90, 0xE0, 0x80, 0x01, 0x00, 0x20]);
    packet.extend_from_slice(&[0x10, 0x02, 0x00, 0x9d, 0x01, 0x2a]);
    packet.resize(200, 0);
    c.core.handle_datagram(c.now, Conference::addr(1), &packet);
    let to_2 = c.sent().remove(&Conference::addr(2)).unwrap_or_default();
    let (_, _, ssrc) = c.clients[&2]
        .receiving
        .values()
        .next()
        .cloned()
        .expect("receives 1");
    assert_eq!(to_2, vec![ssrc]);
    // Its stats (the GET on a viewer, the series in /metrics) count what it was sent.
    let stats = c
        .core
        .viewer_stats(c.clients[&2].id.expect("joined"))
        .expect("a receiving session");
    assert_eq!(stats.tracks.len(), 1, "{stats:?}");
    assert_eq!(stats.tracks[0].packets_sent, 1);
}

#[test]
fn a_stale_or_mismatched_offer_is_refused_and_changes_nothing() {
    let mut c = two_participants();
    let id = c.clients[&1].id.expect("joined");
    let entries = c.core.table_entries();
    let offer_of = |client: &Client| {
        let text = client.offer();
        let offer = parse_offer(&text).expect("parses");
        let plan = negotiate_participant(&offer).expect("served");
        participant_offer(&plan, &offer).expect("served")
    };
    // If-Match naming an older answer: 412.
    let stale = c.clients[&1].version - 1;
    let refused = c
        .core
        .renegotiate(c.now, id, Some(stale), offer_of(&c.clients[&1]));
    assert!(
        matches!(refused, Err(CoreError::Stale { .. })),
        "{refused:?}"
    );
    // Sections reordered: the offer is not this session's.
    let mut reordered = Client::new(1, &[]);
    reordered.sections = c.clients[&1].sections.iter().rev().cloned().collect();
    let refused = c.core.renegotiate(c.now, id, None, offer_of(&reordered));
    assert!(
        matches!(refused, Err(CoreError::OfferMismatch(_))),
        "{refused:?}"
    );
    // New ICE credentials restart ICE: answered with the node's new ones, once the offer is
    // taken; the session's own are the new ones from then on.
    let before = c.core.peer(id).map(|p| p.ice.clone()).expect("the session");
    let mut restarted = Client::new(9, &[]);
    restarted.sections = c.clients[&1].sections.clone();
    let negotiated = c
        .core
        .renegotiate(c.now, id, None, offer_of(&restarted))
        .expect("a restart");
    assert_ne!(negotiated.ice, before, "the node's new credentials");
    let again = c.core.renegotiate(c.now, id, None, offer_of(&restarted));
    assert_eq!(
        again.map(|n| n.ice),
        Ok(negotiated.ice.clone()),
        "no restart"
    );
    // Its old credentials are held until the new ones are used: one entry more.
    assert_eq!(c.core.table_entries(), entries + 1);
    let entries = entries + 1;
    // Two more sending sections, the second with the SSRC of one it has: refused, again and
    // again, and the first of them not left published each time.
    let mut conflicting = Client::new(1, &[]);
    conflicting.sections = c.clients[&1].sections.clone();
    conflicting.next_mid = c.clients[&1].next_mid;
    let taken = c.clients[&1].sections.iter().find_map(|s| match s {
        Section::Send { what, .. } => Some(match *what {
            Send::Vp8(ssrc) | Send::Av1(ssrc) | Send::Opus(ssrc) => ssrc,
        }),
        _ => None,
    });
    for what in [
        Send::Vp8(4242),
        Send::Vp8(taken.expect("a sending section")),
    ] {
        let mid = conflicting.mid();
        conflicting.sections.push(Section::Send { mid, what });
    }
    for _ in 0..5 {
        let refused = c.core.renegotiate(c.now, id, None, offer_of(&conflicting));
        assert!(matches!(refused, Err(CoreError::SsrcInUse)), "{refused:?}");
    }
    assert_eq!(c.core.table_entries(), entries, "nothing changed");
    c.check_everyone_receives_the_others();
}

#[test]
fn names_are_unique_per_room_and_the_cap_holds() {
    let limits = Limits {
        participants_per_room: 2,
        ..Limits::default()
    };
    let mut c = Conference::new(limits);
    c.join(Client::new(1, &sends(1))).expect("room");
    let mut same_name = Client::new(2, &sends(2));
    same_name.name = "participant 1".into();
    assert_eq!(c.join(same_name).err(), Some(CoreError::NameTaken));
    c.join(Client::new(2, &sends(2))).expect("room");
    let refused = c.join(Client::new(3, &sends(3))).err();
    assert!(
        matches!(
            refused,
            Some(CoreError::Limit(
                sfu::node::limits::LimitError::ParticipantsFull(2)
            ))
        ),
        "{refused:?}"
    );
    c.settle();
    c.check_everyone_receives_the_others();
}

#[test]
fn a_choice_names_a_track_of_the_room_and_pauses_it() {
    let mut c = two_participants();
    let id = c.clients[&1].id.expect("joined");
    let theirs: u32 = c.clients[&1].received_tracks().iter().next().expect("one")[1..]
        .parse()
        .expect("a number");
    let pause = Choice {
        paused: true,
        ..Choice::default()
    };
    let named = |id: u32| NamedTrack {
        id,
        participant: None,
    };
    c.core
        .set_choice(id, named(theirs), pause)
        .expect("a track of the room");
    let own = c
        .core
        .peer(id)
        .expect("a session")
        .role
        .publisher()
        .expect("publishes")
        .tracks[0]
        .id
        .expect("published");
    assert_eq!(
        c.core.set_choice(id, named(own.0), pause),
        Err(CoreError::UnknownTrack)
    );
    assert_eq!(
        c.core.set_choice(id, named(9999), pause),
        Err(CoreError::UnknownTrack)
    );
    let stranger = NamedTrack {
        id: theirs,
        participant: Some(ParticipantId(1)),
    };
    assert_eq!(
        c.core.set_choice(id, stranger, pause),
        Err(CoreError::UnknownTrack),
        "the track's id, named as another participant's"
    );
}

#[test]
fn a_thousand_joins_and_leaves_leave_nothing_behind() {
    let mut c = two_participants();
    let entries = c.core.table_entries();
    for n in 3..1003 {
        c.join(Client::new(n, &sends(n))).expect("room");
        c.settle();
        c.leave(n);
        c.settle();
        assert_eq!(
            c.core.table_entries(),
            entries,
            "after participant {n} left"
        );
    }
    c.check_everyone_receives_the_others();
    // The two that stayed reuse their sections: three per client at most.
    for client in c.clients.values() {
        assert!(client.sections.len() <= 5, "{:?}", client.sections);
    }
    c.leave(1);
    c.leave(2);
    c.settle();
    assert_eq!(c.core.table_entries(), 0);
}

#[test]
fn the_dominant_speaker_takes_over_only_when_clearly_louder_for_a_second() {
    let mut c = speaking_room(NodeCore::new(
        RouterConfig::default(),
        Duration::from_secs(30),
    ));
    c.speak(Duration::from_secs(1), &[(1, 30), (3, 100), (4, 100)]);
    c.settle();
    assert_eq!(c.speakers_heard(4), ["participant 1"]);
    // 3 speaks 10 dB louder than 1: it takes over after a second, not before.
    // (3's smoothed level takes some 0.9 s to pass 1's by the margin, then a second.)
    c.speak(Duration::from_millis(1500), &[(1, 40), (3, 30), (4, 100)]);
    c.settle();
    assert_eq!(c.speakers_heard(4), ["participant 1"], "not yet");
    c.speak(Duration::from_millis(1000), &[(1, 40), (3, 30), (4, 100)]);
    c.settle();
    assert_eq!(c.speakers_heard(4), ["participant 1", "participant 3"]);
    // 3 and 4 talk over each other, a few dB apart, turn by turn: no flicker.
    for turn in 0..20 {
        let (three, four) = if turn % 2 == 0 { (30, 33) } else { (33, 30) };
        c.speak(
            Duration::from_millis(200),
            &[(1, 100), (3, three), (4, four)],
        );
    }
    c.settle();
    assert_eq!(c.speakers_heard(1), ["participant 1", "participant 3"]);
    let room = c.core.room_view(ROOM, c.now).expect("a room");
    assert_eq!(room.dominant_speaker, c.clients[&3].public);
}

#[test]
fn a_clustered_rooms_speaker_is_its_homes_and_the_nodes_own_a_candidate() {
    let mut c = speaking_room(NodeCore::new(
        RouterConfig::default(),
        Duration::from_secs(30),
    ));
    let far = ParticipantView {
        id: ParticipantId(0xfa),
        name: "far".into(),
        kind: "participant",
        tracks: Vec::new(),
        receiving: 0,
        channels: Vec::new(),
    };
    let followed = Followed {
        before: vec![far.clone()],
        after: Vec::new(),
        viewers: 2,
        speaker: Some(far.id),
        nodes: Vec::new(),
    };
    c.core.follow_room(c.now, ROOM, Some(followed.clone()));
    c.settle();
    // What participant 4 heard of the room's members and speaker (media's events aside).
    let heard = |c: &Conference| -> Vec<SessionEvent> {
        let room_events = c.events[&4].iter().filter(|e| {
            matches!(
                e,
                SessionEvent::ParticipantJoined(_)
                    | SessionEvent::ParticipantLeft { .. }
                    | SessionEvent::DominantSpeaker { .. }
            )
        });
        room_events.cloned().collect()
    };
    assert_eq!(
        heard(&c)[heard(&c).len() - 2..],
        [
            SessionEvent::ParticipantJoined(far.clone()),
            SessionEvent::DominantSpeaker {
                participant: far.id
            }
        ]
    );
    let told = heard(&c).len();
    // Participant 1 speaks: the node's own speaker, its candidate for the home, not the room's.
    c.speak(Duration::from_secs(1), &[(1, 30), (3, 100), (4, 100)]);
    c.settle();
    assert_eq!(heard(&c).len(), told, "{:?}", &heard(&c)[told..]);
    let part = c.core.local_parts(c.now).remove(0);
    let (candidate, level) = part.candidate.expect("a candidate");
    assert_eq!(Some(candidate), c.clients[&1].public);
    assert!(level > 67.0, "speaking: {level}");
    assert_eq!(
        part.participants.len(),
        3,
        "the node's own participants only"
    );
    let room = c.core.room_view(ROOM, c.now).expect("a room");
    assert_eq!(room.participants[0], far, "nodes in the room's order");
    assert_eq!((room.participants.len(), room.viewers), (4, 2));
    assert_eq!(room.dominant_speaker, Some(far.id));
    // Far's node is gone: far leaves, and the node's own speaker is the room's again.
    c.core.follow_room(c.now, ROOM, None);
    c.settle();
    assert_eq!(
        heard(&c)[told..],
        [
            SessionEvent::ParticipantLeft {
                participant: far.id,
                name: far.name.clone()
            },
            SessionEvent::DominantSpeaker {
                participant: candidate
            }
        ]
    );
}

#[test]
fn with_a_limit_only_the_loudest_speakers_are_forwarded() {
    let core = NodeCore::new(RouterConfig::default(), Duration::from_secs(30))
        .with_loudest_speakers(Some(1));
    let mut c = speaking_room(core);
    let ssrc_from = |c: &Conference, to: u32, from: u32| {
        let track = c
            .core
            .peer(c.clients[&from].id.expect("joined"))
            .expect("a session");
        let audio = track.role.publisher().expect("publishes").tracks[0]
            .id
            .expect("published");
        c.clients[&to]
            .receiving
            .values()
            .find(|(t, ..)| *t == format!("t{}", audio.0))
            .map(|&(_, _, ssrc)| ssrc)
            .expect("receives it")
    };
    // One speaks: everybody's audio goes out (fewer speak than the limit allows).
    let sent = c.speak(Duration::from_secs(1), &[(1, 30), (3, 120), (4, 120)]);
    let to_4 = &sent[&Conference::addr(4)];
    assert!(
        to_4.contains(&ssrc_from(&c, 4, 3)),
        "3 is quiet, and forwarded"
    );
    // Two speak: only the louder one reaches the third (once the second's level has risen
    // past speaking).
    c.speak(Duration::from_millis(1500), &[(1, 30), (3, 45), (4, 120)]);
    let sent = c.speak(Duration::from_secs(1), &[(1, 30), (3, 45), (4, 120)]);
    let to_4 = &sent[&Conference::addr(4)];
    assert!(
        to_4.contains(&ssrc_from(&c, 4, 1)),
        "the loudest is forwarded"
    );
    assert!(
        !to_4.contains(&ssrc_from(&c, 4, 3)),
        "the second is held back"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Participants join and leave in any order; once every renegotiation asked for is done,
    /// each receives exactly the others' live tracks, and once all have left nothing is held.
    #[test]
    fn any_order_of_joins_and_leaves_ends_with_everyone_receiving_the_others(
        steps in proptest::collection::vec((any::<bool>(), 0u32..8), 1..40)
    ) {
        let mut c = Conference::new(Limits::default());
        let mut next = 1;
        for (join, pick) in steps {
            if join || c.clients.is_empty() {
                c.join(Client::new(next, &sends(next))).expect("room");
                next += 1;
            } else {
                let n = *c.clients.keys().nth(pick as usize % c.clients.len()).expect("one");
                c.leave(n);
            }
            c.settle();
            c.check_everyone_receives_the_others();
        }
        let all: Vec<u32> = c.clients.keys().copied().collect();
        for n in all {
            c.leave(n);
        }
        c.settle();
        prop_assert_eq!(c.core.table_entries(), 0);
    }
}
