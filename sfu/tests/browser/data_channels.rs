//! Data channels in real Chromium: each participant's channels relayed to the others over their
//! one peer connection each. Four participants chat: every message arrives once, in order, at
//! the other three. A channel created before the first offer and written in its `onopen`
//! delivers that first message in 20 of 20 joins. A 256 KiB binary message arrives intact. While
//! one participant writes 2 MB/s, everyone keeps decoding everyone's video.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::chromium::Chromium;
use crate::node::Node;
use crate::participants::{decode_each_other, everyone_decodes_the_others, join, sample, until};
use crate::participants::{remote_of, Participant};
use crate::strata::{num, Eval};

const ROOM: &str = "talk";
/// Numbered chat messages each participant sends.
const CHAT: usize = 20;
/// Joins whose first message, written when the channel opens, must arrive.
const JOINS: usize = 20;
/// The figures: a 256 KiB message, and 2 MB/s of data beside the media.
const LARGE: u64 = 256 * 1024;
const FLOOD_RATE: u64 = 2_000_000;
const FLOOD_SECONDS: u64 = 8;

/// What participant `p` received: `(inbox entries, bytes per "sender/label")`.
fn inbox(p: &Participant<'_>) -> Value {
    p.page.eval_json(&format!("strata.inbox({:?})", p.id))
}

/// The participant ids the node gave each participant, by name.
fn ids(participants: &[Participant<'_>]) -> BTreeMap<&'static str, String> {
    let stats = sample(participants);
    participants
        .iter()
        .map(|p| {
            let you = stats[p.name]["you"].as_str().expect("the node named it");
            (p.name, you.to_owned())
        })
        .collect()
}

/// The chat texts `inbox` holds from participant `from`, in the order they came.
fn chat_from(inbox: &Value, from: &str) -> Vec<String> {
    inbox["inbox"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["from"] == from && m["label"] == "chat")
        .filter_map(|m| m["text"].as_str().map(str::to_owned))
        .collect()
}

/// Waits until `done` holds for every participant's inbox, or fails showing them.
fn until_inboxes(
    participants: &[Participant<'_>],
    within: Duration,
    what: &str,
    mut done: impl FnMut(&Participant<'_>, &Value) -> bool,
) {
    let start = std::time::Instant::now();
    loop {
        let inboxes: Vec<Value> = participants.iter().map(inbox).collect();
        if participants.iter().zip(&inboxes).all(|(p, i)| done(p, i)) {
            return;
        }
        assert!(
            start.elapsed() < within,
            "{what}: not within {within:?}; inboxes: {:#}",
            json!(inboxes)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
#[ignore = "needs chromium in a private network namespace: run .ci/browser-test"]
fn participants_relay_data_channels_to_each_other() {
    let node = Node::start(&[]);
    let browser = Chromium::launch();
    let page = browser.open(&node.url("/"));
    let names = ["ada", "bo", "cy", "di"];
    let participants: Vec<Participant<'_>> = names
        .iter()
        .map(|name| {
            let options = json!({ "codec": "VP8", "scalabilityMode": "L1T1",
                "greeting": format!("hello from {name}") });
            join(&page, ROOM, name, options)
        })
        .collect();
    decode_each_other(
        &participants,
        Duration::from_secs(30),
        "four participants decode each other",
    );
    let ids = ids(&participants);

    chat(&participants, &ids);
    large_message(&participants, &ids);
    first_message_on_join(&page, &participants[0], &ids);
    media_beside_a_flood(&node, &participants, &ids);
}

/// Each sends `CHAT` numbered messages; each other one gets all of them once, in order (after
/// the greetings of those who joined after it).
fn chat(participants: &[Participant<'_>], ids: &BTreeMap<&'static str, String>) {
    for i in 0..CHAT {
        for p in participants {
            let text = format!("{} {i}", p.name);
            p.page
                .eval_json(&format!("strata.send({:?}, 'chat', {text:?})", p.id));
        }
    }
    until_inboxes(
        participants,
        Duration::from_secs(10),
        "every chat message once, in order, at the other three",
        |receiver, inbox| {
            participants
                .iter()
                .filter(|s| s.name != receiver.name)
                .all(|sender| {
                    let numbered: Vec<String> =
                        (0..CHAT).map(|i| format!("{} {i}", sender.name)).collect();
                    let got: Vec<String> = chat_from(inbox, &ids[sender.name])
                        .into_iter()
                        .filter(|t| !t.starts_with("hello from"))
                        .collect();
                    got == numbered
                })
        },
    );
    // A greeting reaches those present when it was written: each later joiner's, once.
    for (r, receiver) in participants.iter().enumerate() {
        let inbox = inbox(receiver);
        for sender in &participants[r + 1..] {
            let greetings = chat_from(&inbox, &ids[sender.name])
                .into_iter()
                .filter(|t| t.starts_with("hello from"))
                .count();
            assert_eq!(
                greetings, 1,
                "{} got {}'s greeting once: {inbox:#}",
                receiver.name, sender.name
            );
        }
    }
    println!("[data] {CHAT} chat messages from each of four reached the other three in order");
}

/// A 256 KiB binary message arrives whole, byte for byte, at the other three.
fn large_message(participants: &[Participant<'_>], ids: &BTreeMap<&'static str, String>) {
    let sender = &participants[1];
    let sum = sender.page.eval_json(&format!(
        "strata.send({:?}, 'blob', {{ binary: {LARGE} }})",
        sender.id
    ));
    let from = &ids[sender.name];
    until_inboxes(
        participants,
        Duration::from_secs(10),
        "the 256 KiB message at the other three, intact",
        |receiver, inbox| {
            receiver.name == sender.name
                || inbox["inbox"].as_array().into_iter().flatten().any(|m| {
                    m["from"] == from.as_str()
                        && m["label"] == "blob"
                        && m["binary"] == LARGE
                        && m["sum"] == sum
                })
        },
    );
    println!("[data] a {LARGE}-byte message arrived intact at the other three");
}

/// A participant joins `JOINS` times; each time the greeting its chat channel writes when it
/// opens reaches `watcher`.
fn first_message_on_join(
    page: &dyn Eval,
    watcher: &Participant<'_>,
    ids: &BTreeMap<&'static str, String>,
) {
    let mut delivered = 0;
    for k in 0..JOINS {
        let greeting = format!("join {k}");
        let options = json!({ "codec": "VP8", "scalabilityMode": "L1T1", "greeting": greeting });
        let joiner = join(page, ROOM, "ed", options);
        let arrived = (0..100).any(|_| {
            let seen = inbox(watcher)["inbox"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|m| {
                    m["text"] == greeting.as_str()
                        && !ids.values().any(|id| m["from"] == id.as_str())
                });
            if !seen {
                std::thread::sleep(Duration::from_millis(100));
            }
            seen
        });
        delivered += usize::from(arrived);
        crate::strata::stop_one(page, &joiner.id);
    }
    println!("[data] the first message, written on open, arrived in {delivered} of {JOINS} joins");
    assert_eq!(delivered, JOINS, "every join's first message arrived");
}

/// One participant writes 2 MB/s for a while; everyone keeps decoding everyone else, and each
/// other one receives what it wrote, or (a receiver that fell a backlog behind, as a browser
/// starved of CPU here may) a whole first part of it, its channel then closed by the node and
/// the cut counted, never the sender slowed.
fn media_beside_a_flood(
    node: &Node,
    participants: &[Participant<'_>],
    ids: &BTreeMap<&'static str, String>,
) {
    let sender = &participants[3];
    let before = sample(participants);
    let sent = sender.page.eval_json(&format!(
        "strata.flood({:?}, 'flood', {FLOOD_RATE}, {FLOOD_SECONDS})",
        sender.id
    ));
    let sent = sent.as_f64().expect("bytes sent");
    until(
        participants,
        Duration::from_secs(5),
        "everyone kept decoding everyone during the flood",
        |now| everyone_decodes_the_others(participants, now, Some(&before)),
    );
    let key = format!("{}/flood", ids[sender.name]);
    let cut = |inbox: &Value| {
        inbox["closed"]
            .as_array()
            .is_some_and(|c| c.iter().any(|k| k == key.as_str()))
    };
    until_inboxes(
        participants,
        Duration::from_secs(10),
        "the flood's bytes, or its cut, at the other three",
        |receiver, inbox| {
            receiver.name == sender.name
                || num(&inbox["received"][&key], "bytes") == sent
                || cut(inbox)
        },
    );
    let receivers: Vec<Value> = participants[..3].iter().map(inbox).collect();
    let short: Vec<f64> = receivers
        .iter()
        .map(|i| num(&i["received"][&key], "bytes"))
        .filter(|&got| got < sent)
        .collect();
    let cuts = node
        .log_text()
        .matches("relayed channel closed: its backlog is full")
        .count();
    assert_eq!(
        cuts,
        short.len(),
        "each receiver short of the flood was cut off, counted: {receivers:#?}"
    );
    for got in &short {
        assert_eq!(got % 16_384.0, 0.0, "whole messages before the cut: {got}");
    }
    let after = sample(participants);
    let froze: f64 = participants
        .iter()
        .flat_map(|p| participants.iter().map(move |o| (p, o)))
        .filter(|(p, o)| p.name != o.name)
        .map(|(p, o)| {
            let f = |s: &BTreeMap<&'static str, Value>| {
                remote_of(&s[p.name], o.name).map_or(0.0, |r| num(&r["video"], "freezeCount"))
            };
            f(&after) - f(&before)
        })
        .sum();
    println!(
        "[data] {:.1} MB written at {} MB/s reached {} of the other three whole (the rest cut \
         off at their backlog); freezes meanwhile: {froze}",
        sent / 1e6,
        FLOOD_RATE / 1_000_000,
        3 - short.len()
    );
}
