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
    // The channel's open counted as one of its second's ten.
    room.run_until(200, |r| r.members[1].messages.len() >= 9);
    room.run_until(50, |_| false);
    let delivered = room.members[1].messages.len() as u64;
    let dropped = room.core.snapshot().node.dropped(DropReason::DataRate);
    assert_eq!(delivered + dropped, 25);
    assert!((9..25).contains(&delivered), "{delivered} delivered");
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

/// Participant a with its channel `config` (relayed to b as `label`), b with a chat; the
/// channel relaying a's toward b.
fn lossy_pair(config: ChannelConfig, label: &str) -> (DataRoom, ChannelId) {
    let mut room = DataRoom::new(unlimited());
    room.join("room", "a", &[config]);
    room.join("room", "b", &[channel("chat")]);
    let opened = room.run_until(SETUP_STEPS, |r| r.members[1].opened.len() >= 2);
    assert!(opened, "{:?}", room.members);
    let channel = relayed(&mut room, 0, 1, label);
    (room, channel)
}

#[test]
fn an_unordered_reliable_channel_loses_nothing_under_loss() {
    let events = ChannelConfig {
        label: "events".into(),
        ordered: false,
        ..Default::default()
    };
    let (mut room, channel) = lossy_pair(events, "events");
    room.members[1].set_loss(10, 5);
    let mut got = numbered_through(&mut room, channel);
    // Each once; the order is the network's.
    got.sort_unstable();
    assert_eq!(got, (0..300).collect::<Vec<_>>());
}

#[test]
fn a_channel_without_retransmissions_loses_what_is_lost() {
    let (mut room, channel) = lossy_pair(cursor(), "cursor");
    room.members[1].set_loss(10, 11);
    let got = numbered_through(&mut room, channel);
    // About a tenth lost, none twice, none retransmitted into a late place.
    assert!((200..295).contains(&got.len()), "{} arrived", got.len());
    let mut unique = got.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), got.len(), "each at most once");
    // Once the loss ends, what was lost stays lost: the node never sends it again.
    room.members[1].set_loss(0, 11);
    room.run_until(2_000, |_| false);
    assert_eq!(numbers(&room, 1, channel), got);
}

/// A channel whose messages live 200 ms (`maxPacketLifeTime`): toward a receiver cut off for
/// two seconds, what was sent meanwhile is given up (never delivered late, never twice), and
/// what is sent once it is back arrives.
#[test]
fn a_lifetime_limited_channel_gives_up_what_outlived_its_lifetime() {
    let captions = ChannelConfig {
        label: "captions".into(),
        reliability: Reliability::MaxPacketLifetime { lifetime: 200 },
        ..Default::default()
    };
    let (mut room, channel) = lossy_pair(captions, "captions");
    let numbered = |from: usize| move |i: usize| (from + i).to_string().into_bytes();
    let arrived = |n: usize| move |r: &DataRoom| numbers(r, 1, channel).len() >= n;
    assert!(send_until(&mut room, (50, 2), numbered(0), arrived(50)));
    room.members[1].set_loss(100, 3);
    let cut = room.now;
    let two_seconds = |r: &DataRoom| r.now >= cut + std::time::Duration::from_secs(2);
    assert!(send_until(&mut room, (50, 2), numbered(50), two_seconds));
    room.members[1].set_loss(0, 3);
    // Long enough for the node's retransmission timer, backed off over the cut, to fire.
    assert!(send_until(&mut room, (50, 2), numbered(100), arrived(100)));
    room.run_until(2_000, |_| false);
    let expected: Vec<usize> = (0..50).chain(100..150).collect();
    assert_eq!(numbers(&room, 1, channel), expected);
}

/// The numbers in the messages `member` got on `channel` (each starts with its number).
fn numbers(room: &DataRoom, member: usize, channel: ChannelId) -> Vec<usize> {
    room.members[member]
        .messages_on(channel)
        .iter()
        .map(|(_, _, data)| {
            let digits = data.iter().take_while(|b| b.is_ascii_digit()).count();
            let text = std::str::from_utf8(&data[..digits]).expect("digits");
            text.parse().expect("a number")
        })
        .collect()
}

#[test]
fn a_lossy_channel_toward_a_receiver_behind_drops_its_oldest_and_the_newest_arrive() {
    let config = DataChannelConfig {
        backlog_bytes: 16 * 1024,
        ..unlimited()
    };
    let mut room = DataRoom::new(config);
    room.join("room", "a", &[cursor()]);
    let b = room.join("room", "b", &[channel("chat")]);
    let opened = room.run_until(SETUP_STEPS, |r| r.members[b].opened.len() >= 2);
    assert!(opened, "{:?}", room.members);
    let channel = relayed(&mut room, 0, b, "cursor");
    room.members[b].held = true;
    // 200 messages of 1 KiB at once: the stack's send window toward b takes the first, the
    // relay's backlog the last 15 or so, the ones between are the oldest it drops.
    let own = room.members[0].own[0];
    for i in 0..200 {
        let message = format!("{i} {}", "x".repeat(1020));
        assert!(room.members[0].write(own, false, message.as_bytes()));
    }
    let taken = room.run_until(SETUP_STEPS, |r| {
        let sender = r.members[0].rtc.channel(own);
        sender.is_some_and(|mut c| c.buffered_amount() == 0)
    });
    assert!(taken, "the node took every message from the sender");
    let node = room.core.snapshot().node;
    let handed = node.data_messages_relayed;
    let dropped = node.dropped(DropReason::DataLossyOldest);
    assert!(dropped > 0, "the oldest were dropped toward b");
    assert_eq!(
        node.dropped(DropReason::DataBacklog),
        0,
        "the channel stays"
    );
    // What the backlog holds is the newest, queued in order behind everything else.
    let queued = 200 - handed - dropped;
    assert!(queued > 0, "{handed} handed on, {dropped} dropped");

    room.members[b].held = false;
    let newest = room.run_until(SETUP_STEPS, |r| numbers(r, b, channel).contains(&199));
    assert!(newest, "{:?}", room.members[b]);
    room.run_until(100, |_| false);
    let got = numbers(&room, b, channel);
    let missing: Vec<u64> = (200 - queued..200)
        .filter(|&i| !got.contains(&(i as usize)))
        .collect();
    assert!(
        missing.is_empty(),
        "the newest, {missing:?}, did not arrive"
    );
    let node = room.core.snapshot().node;
    assert_eq!(
        node.data_messages_relayed,
        200 - dropped,
        "the rest went on"
    );
    assert_eq!(node.dropped(DropReason::SendFailed), 0);
}

#[test]
fn a_channel_past_the_participants_limit_is_closed_as_it_opens_and_counted() {
    let config = DataChannelConfig {
        channels_per_participant: 2,
        ..unlimited()
    };
    let labels = ["one", "two", "three"];
    let mut room = DataRoom::new(config);
    room.join("room", "a", &labels.map(channel));
    let b = room.join("room", "b", &[channel("chat")]);
    let opened = room.run_until(SETUP_STEPS, |r| r.members[b].opened.len() >= 3);
    assert!(opened, "{:?}", room.members);
    room.run_until(200, |_| false);
    let node = room.core.snapshot().node;
    assert_eq!(node.dropped(DropReason::DataChannelLimit), 1);

    // b gets two of a's channels; the room's state lists the same two.
    let protocol = format!("p{}", room.public(0));
    let at_b: Vec<&str> = labels
        .into_iter()
        .filter(|label| room.members[b].channel_named(label, &protocol).is_some())
        .collect();
    assert_eq!(at_b.len(), 2, "{:?}", room.members[b]);
    let view = room.core.room_view("room", room.now).unwrap();
    let a = view.participants.iter().find(|p| p.name == "a").unwrap();
    let listed: Vec<&str> = a.channels.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(listed.len(), 2);
    assert!(listed.iter().all(|l| at_b.contains(l)), "{listed:?}");
    // a's third channel is closed toward it: it is the one b does not get.
    let a = &room.members[0];
    assert_eq!(a.closed.len(), 1, "{a:?}");
    let refused = a.own.iter().position(|&c| c == a.closed[0]).unwrap();
    assert!(
        !at_b.contains(&labels[refused]),
        "{} refused",
        labels[refused]
    );
}

#[test]
fn a_message_larger_than_a_receiver_takes_is_dropped_toward_it_alone() {
    let mut room = DataRoom::new(unlimited());
    room.join("room", "a", &[channel("chat")]);
    let small = room.join_announcing("room", "small", &[channel("chat")], Some(16 * 1024));
    let large = room.join("room", "large", &[channel("chat")]);
    let opened = room.run_until(SETUP_STEPS, |r| {
        r.members.iter().all(|m| m.opened.len() >= 3)
    });
    assert!(opened, "{:?}", room.members);
    let own = room.members[0].own[0];
    let big = vec![7; 32 * 1024];
    assert!(room.members[0].write(own, true, &big));
    assert!(room.members[0].write(own, false, b"after it"));
    let arrived = room.run_until(SETUP_STEPS, |r| r.members[large].messages.len() == 2);
    assert!(arrived, "{:?}", room.members[large]);
    room.run_until(100, |_| false);

    let at_large = relayed(&mut room, 0, large, "chat");
    let got: Vec<&[u8]> = room.members[large]
        .messages_on(at_large)
        .iter()
        .map(|(_, _, data)| data.as_slice())
        .collect();
    assert_eq!(got, [&big[..], b"after it"]);
    let at_small = relayed(&mut room, 0, small, "chat");
    assert_eq!(texts(&room, small, at_small), ["after it"]);
    let node = room.core.snapshot().node;
    assert_eq!(node.dropped(DropReason::DataTooLarge), 1);
    assert_eq!(node.dropped(DropReason::SendFailed), 0);
}

#[test]
fn a_channel_negotiated_out_of_band_is_not_relayed_but_counted() {
    let out_of_band = ChannelConfig {
        label: "oob".into(),
        negotiated: Some(6),
        ..Default::default()
    };
    let mut room = DataRoom::new(unlimited());
    room.join("room", "a", &[channel("chat"), out_of_band]);
    let b = room.join("room", "b", &[channel("chat")]);
    let opened = room.run_until(SETUP_STEPS, |r| r.members[b].opened.len() >= 2);
    assert!(opened, "{:?}", room.members);
    let oob = room.members[0].own[1];
    let writable = room.run_until(SETUP_STEPS, |r| r.members[0].write(oob, false, b"oob"));
    assert!(writable, "{:?}", room.members[0]);
    room.run_until(200, |_| false);
    assert!(room.members[b].messages.is_empty(), "{:?}", room.members[b]);
    let dropped = room.core.snapshot().node.dropped(DropReason::DataNoChannel);
    assert_eq!(dropped, 1);
    let view = room.core.room_view("room", room.now).unwrap();
    let a = view.participants.iter().find(|p| p.name == "a").unwrap();
    let listed: Vec<&str> = a.channels.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(listed, ["chat"]);
}
