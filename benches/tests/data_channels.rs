//! Data channels through the node's core, in memory, against an independent WebRTC client:
//! channels a participant opens are relayed to the others with the same label and
//! reliability and protocol `p<participant id>`, messages arrive whole and in order, and what
//! the node cannot deliver is bounded and counted.

use benches::data_room::DataRoom;
use sfu::node::datachannel::DataChannelConfig;
use sfu::node::metrics::DropReason;
use sfu::node::session_events::SessionEvent;
use str0m::channel::{ChannelConfig, ChannelId, Reliability};

/// Enough steps for ICE, DTLS, SCTP and DCEP on the room's clock.
const SETUP_STEPS: usize = 2_000;

fn channel(label: &str) -> ChannelConfig {
    ChannelConfig {
        label: label.into(),
        ..Default::default()
    }
}

/// An unordered channel `cursor` whose messages are never retransmitted.
fn cursor() -> ChannelConfig {
    ChannelConfig {
        label: "cursor".into(),
        ordered: false,
        reliability: Reliability::MaxRetransmits { retransmits: 0 },
        ..Default::default()
    }
}

/// Rates far above what a test sends, so only what it checks can drop anything.
fn unlimited() -> DataChannelConfig {
    DataChannelConfig {
        messages_per_second: u32::MAX,
        bytes_per_second: u64::MAX,
        ..DataChannelConfig::default()
    }
}

/// `n` participants of one room, each with a channel `chat`, every channel open everywhere
/// (each has its own and the others').
fn chat_room(config: DataChannelConfig, n: usize) -> DataRoom {
    let mut room = DataRoom::new(config);
    for i in 0..n {
        room.join("room", &format!("p{i}"), &[channel("chat")]);
    }
    let opened = room.run_until(SETUP_STEPS, |r| {
        r.members.iter().all(|m| m.opened.len() >= n)
    });
    assert!(opened, "{:?}", room.members);
    room
}

/// The channel relaying `from`'s channel `label` toward `to`.
fn relayed(room: &mut DataRoom, from: usize, to: usize, label: &str) -> ChannelId {
    let protocol = format!("p{}", room.public(from));
    room.members[to]
        .channel_named(label, &protocol)
        .unwrap_or_else(|| panic!("{to} has no {label} of {protocol}: {:?}", room.members[to]))
}

fn texts(room: &DataRoom, member: usize, channel: ChannelId) -> Vec<String> {
    room.members[member]
        .messages_on(channel)
        .iter()
        .map(|(_, binary, data)| {
            assert!(!binary, "a string stays a string");
            String::from_utf8(data.clone()).expect("UTF-8")
        })
        .collect()
}

#[test]
fn each_message_reaches_every_other_participant_once() {
    let mut room = chat_room(unlimited(), 3);
    for (i, text) in ["from a", "from b", "from c"].iter().enumerate() {
        let own = room.members[i].own[0];
        assert!(room.members[i].write(own, false, text.as_bytes()));
    }
    let delivered = room.run_until(500, |r| r.members.iter().all(|m| m.messages.len() == 2));
    assert!(delivered, "{:?}", room.members);
    for from in 0..3 {
        for to in (0..3).filter(|&to| to != from) {
            let channel = relayed(&mut room, from, to, "chat");
            let text = ["from a", "from b", "from c"][from];
            assert_eq!(texts(&room, to, channel), [text], "{from} to {to}");
        }
    }
    // Nobody gets its own message back.
    for i in 0..3 {
        let own = room.members[i].own[0];
        assert!(room.members[i].messages_on(own).is_empty());
    }
    assert_eq!(room.core.snapshot().node.data_messages_relayed, 6);
}

#[test]
fn relayed_channels_keep_label_reliability_and_order() {
    let lossy = ChannelConfig {
        protocol: "xy".into(),
        ..cursor()
    };
    let timed = ChannelConfig {
        label: "captions".into(),
        reliability: Reliability::MaxPacketLifetime { lifetime: 500 },
        ..Default::default()
    };
    let mut room = DataRoom::new(unlimited());
    room.join("room", "a", &[lossy.clone(), timed.clone()]);
    room.join("room", "b", &[channel("chat")]);
    let opened = room.run_until(SETUP_STEPS, |r| r.members[1].opened.len() >= 3);
    assert!(opened, "{:?}", room.members);
    for (label, config) in [("cursor", &lossy), ("captions", &timed)] {
        let id = relayed(&mut room, 0, 1, label);
        let seen = room.members[1]
            .rtc
            .channel(id)
            .unwrap()
            .config()
            .cloned()
            .unwrap();
        assert_eq!(
            (seen.ordered, seen.reliability),
            (config.ordered, config.reliability),
            "{label}"
        );
    }
    // b's event stream was told of each, a's was not (they are its own).
    let (a_id, b_id) = (room.members[0].id, room.members[1].id);
    let opened: Vec<_> = std::iter::from_fn(|| room.core.poll_session_event())
        .filter_map(|(to, event)| match event {
            SessionEvent::DataChannelOpened(c) => Some((to, c.label)),
            _ => None,
        })
        .collect();
    assert!(opened.contains(&(b_id, "cursor".to_owned())), "{opened:?}");
    assert!(
        opened.contains(&(b_id, "captions".to_owned())),
        "{opened:?}"
    );
    assert!(opened
        .iter()
        .all(|(to, label)| *to != a_id || label == "chat"));
    // The room's state lists a's channels as it opened them.
    let view = room.core.room_view("room", room.now).unwrap();
    let a = view.participants.iter().find(|p| p.name == "a").unwrap();
    let labels: Vec<(&str, bool, &str, &str)> = a
        .channels
        .iter()
        .map(|c| {
            (
                c.label.as_str(),
                c.ordered,
                c.reliability,
                c.protocol.as_str(),
            )
        })
        .collect();
    assert_eq!(
        labels,
        [
            ("cursor", false, "max_retransmits", "xy"),
            ("captions", true, "max_lifetime", "")
        ]
    );
}

#[test]
fn ten_thousand_messages_arrive_in_order() {
    let mut room = chat_room(unlimited(), 2);
    let as_text = |i: usize| i.to_string().into_bytes();
    let done = send_until(&mut room, (10_000, usize::MAX), as_text, |r| {
        r.members[1].messages.len() == 10_000
    });
    assert!(done, "{} arrived", room.members[1].messages.len());
    let channel = relayed(&mut room, 0, 1, "chat");
    let expected: Vec<String> = (0..10_000).map(|i| i.to_string()).collect();
    assert_eq!(texts(&room, 1, channel), expected);
}

#[test]
fn a_message_of_the_largest_size_arrives_whole() {
    let mut room = chat_room(unlimited(), 2);
    let own = room.members[0].own[0];
    let large: Vec<u8> = (0..256 * 1024).map(|i| (i * 7 % 251) as u8).collect();
    assert!(room.members[0].write(own, true, &large));
    assert!(room.members[0].write(own, false, b"after it"));
    let arrived = room.run_until(5_000, |r| r.members[1].messages.len() == 2);
    assert!(arrived, "{:?}", room.core.snapshot().node);
    let got = &room.members[1].messages;
    assert!(got[0].1 && got[0].2 == large, "the bytes as sent, binary");
    assert_eq!((got[1].1, got[1].2.as_slice()), (false, &b"after it"[..]));
}

#[test]
fn messages_sent_before_the_relayed_channel_opens_wait_for_it() {
    let mut room = DataRoom::new(unlimited());
    room.join("room", "a", &[channel("chat")]);
    let b = room.join("room", "b", &[channel("hello")]);
    // b cannot connect yet: nothing the node sends reaches it.
    room.members[b].held = true;
    let own = room.members[0].own[0];
    let open = room.run_until(SETUP_STEPS, |r| {
        r.members[0].opened.iter().any(|(id, _)| *id == own)
    });
    assert!(open);
    for i in 0..5 {
        assert!(room.members[0].write(own, false, format!("early {i}").as_bytes()));
    }
    room.run_until(100, |_| false);
    assert!(room.members[b].opened.is_empty(), "{:?}", room.members[b]);
    room.members[b].held = false;
    let arrived = room.run_until(20 * SETUP_STEPS, |r| r.members[b].messages.len() == 5);
    assert!(arrived, "{:?}", room.members[b]);
    let channel = relayed(&mut room, 0, b, "chat");
    assert_eq!(
        texts(&room, b, channel),
        ["early 0", "early 1", "early 2", "early 3", "early 4"]
    );
}

#[test]
fn a_late_joiner_gets_the_channels_of_those_there() {
    let mut room = chat_room(unlimited(), 2);
    let late = room.join("room", "late", &[channel("hello")]);
    let opened = room.run_until(SETUP_STEPS, |r| r.members[late].opened.len() == 3);
    assert!(opened, "{:?}", room.members[late]);
    let own = room.members[1].own[0];
    assert!(room.members[1].write(own, false, b"welcome"));
    let arrived = room.run_until(500, |r| !r.members[late].messages.is_empty());
    assert!(arrived);
    let channel = relayed(&mut room, 1, late, "chat");
    assert_eq!(texts(&room, late, channel), ["welcome"]);
    // A message on the node's channel toward it has nowhere to go: dropped, counted.
    assert!(room.members[late].write(channel, false, b"back"));
    room.run_until(100, |_| false);
    let dropped = room.core.snapshot().node.dropped(DropReason::DataNoChannel);
    assert_eq!(dropped, 1);
}

#[test]
fn closing_a_channel_or_leaving_closes_its_relayed_channels() {
    let mut room = DataRoom::new(unlimited());
    room.join("room", "a", &[channel("chat"), channel("notes")]);
    room.join("room", "b", &[channel("chat")]);
    room.join("room", "c", &[channel("chat")]);
    let opened = room.run_until(SETUP_STEPS, |r| r.members[2].opened.len() == 4);
    assert!(opened, "{:?}", room.members);
    while room.core.poll_session_event().is_some() {}
    let notes_at_b = relayed(&mut room, 0, 1, "notes");
    let notes = room.members[0].own[1];
    room.members[0].rtc.direct_api().close_data_channel(notes);
    let closed = room.run_until(500, |r| r.members[1].closed.contains(&notes_at_b));
    assert!(closed, "{:?}", room.members[1]);
    let events: Vec<SessionEvent> =
        std::iter::from_fn(|| room.core.poll_session_event().map(|(_, e)| e)).collect();
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, SessionEvent::DataChannelClosed(c) if c.label == "notes"))
            .count(),
        2,
        "b and c are told: {events:?}"
    );

    let chat_at_c = relayed(&mut room, 0, 2, "chat");
    let b_chat_at_c = relayed(&mut room, 1, 2, "chat");
    room.leave(0);
    let closed = room.run_until(500, |r| r.members[2].closed.contains(&chat_at_c));
    assert!(closed, "{:?}", room.members[2]);
    assert!(
        !room.members[2].closed.contains(&b_chat_at_c),
        "b's channel stays"
    );
    let own = room.members[1].own[0];
    assert!(room.members[1].write(own, false, b"still here"));
    let arrived = room.run_until(500, |r| !r.members[2].messages_on(b_chat_at_c).is_empty());
    assert!(arrived);
    room.leave(1);
    room.leave(2);
    room.run_until(100, |_| false);
    assert_eq!(room.core.table_entries(), 0, "nothing left of the channels");
}

#[test]
fn a_receiver_that_falls_behind_is_cut_off_at_its_backlog_while_others_continue() {
    let config = DataChannelConfig {
        backlog_bytes: 64 * 1024,
        ..unlimited()
    };
    let mut room = chat_room(config, 3);
    let slow_chat = relayed(&mut room, 0, 2, "chat");
    room.members[2].held = true;
    // Two messages a step: a pace the receiver that reads keeps up with.
    let kib = |_| vec![b'x'; 1024];
    let done = send_until(&mut room, (400, 2), kib, |r| {
        r.members[1].messages.len() == 400
    });
    assert!(
        done,
        "{} of 400 reached the receiver that keeps up",
        room.members[1].messages.len()
    );
    let dropped = room.core.snapshot().node.dropped(DropReason::DataBacklog);
    assert!(dropped > 0, "the slow receiver's backlog was dropped");
    // Its delivery resumes: it learns its channel was closed, and gets no more of it.
    room.members[2].held = false;
    let closed = room.run_until(SETUP_STEPS, |r| r.members[2].closed.contains(&slow_chat));
    assert!(closed, "{:?}", room.members[2]);
    let got = room.members[2].messages_on(slow_chat).len() as u64;
    assert!(got + dropped <= 400, "{got} delivered, {dropped} dropped");
}

#[test]
fn messages_past_the_senders_rate_are_dropped_and_counted() {
    let config = DataChannelConfig {
        messages_per_second: 10,
        ..unlimited()
    };
    let mut room = chat_room(config, 2);
    let own = room.members[0].own[0];
    for i in 0..25 {
        assert!(room.members[0].write(own, false, format!("{i}").as_bytes()));
    }
    room.run_until(200, |r| r.members[1].messages.len() >= 10);
    room.run_until(50, |_| false);
    let delivered = room.members[1].messages.len() as u64;
    let dropped = room.core.snapshot().node.dropped(DropReason::DataRate);
    assert_eq!(delivered + dropped, 25);
    assert!((10..25).contains(&delivered), "{delivered} delivered");
}

/// Writes `count` messages (the `i`th is `message(i)`) on member 0's first channel, at most
/// `per_step` a step (as many as its client takes), stepping until all are written and
/// `done` holds; whether it did.
fn send_until(
    room: &mut DataRoom,
    (count, per_step): (usize, usize),
    message: impl Fn(usize) -> Vec<u8>,
    mut done: impl FnMut(&DataRoom) -> bool,
) -> bool {
    let own = room.members[0].own[0];
    let mut sent = 0;
    room.run_until(20_000, |r| {
        for _ in 0..per_step {
            if sent == count || !r.members[0].write(own, false, &message(sent)) {
                break;
            }
            sent += 1;
        }
        sent == count && done(r)
    })
}

/// Sends 300 numbered messages, two a step, and lets the room settle; the numbers member 1
/// got on `channel`.
fn numbered_through(room: &mut DataRoom, channel: ChannelId) -> Vec<usize> {
    send_until(room, (300, 2), |i| i.to_string().into_bytes(), |_| true);
    room.run_until(2_000, |_| false);
    texts(room, 1, channel)
        .iter()
        .map(|t| t.parse().expect("a number"))
        .collect()
}

#[test]
fn a_reliable_channel_loses_nothing_under_loss() {
    let mut room = chat_room(unlimited(), 2);
    room.members[1].set_loss(10, 7);
    let channel = relayed(&mut room, 0, 1, "chat");
    let got = numbered_through(&mut room, channel);
    assert_eq!(got, (0..300).collect::<Vec<_>>());
}

#[test]
fn a_channel_without_retransmissions_loses_what_is_lost() {
    let mut room = DataRoom::new(unlimited());
    room.join("room", "a", &[cursor()]);
    room.join("room", "b", &[channel("chat")]);
    let opened = room.run_until(SETUP_STEPS, |r| r.members[1].opened.len() >= 2);
    assert!(opened, "{:?}", room.members);
    let channel = relayed(&mut room, 0, 1, "cursor");
    room.members[1].set_loss(10, 11);
    let got = numbered_through(&mut room, channel);
    // About a tenth lost, none twice, none retransmitted into a late place.
    assert!((200..295).contains(&got.len()), "{} arrived", got.len());
    let mut unique = got.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), got.len(), "each at most once");
}
