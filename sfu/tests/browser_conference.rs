//! A conference in real Chromium: participants that each publish and receive on one peer
//! connection, joining and leaving while the others keep watching. Four participants (two AV1
//! L3T3_KEY, one VP8 simulcast, one VP9) each decode the other three; a fifth joins late and
//! within 3 s sees all four and they see it; one leaves and within 2 s it is gone from every
//! other participant. Throughout, every peer connection keeps one DTLS transport and its ICE
//! credentials (no ICE restart), and no remaining participant's video freezes from the moment
//! the first four decode each other to the end. One participant
//! joins through the demo page's own controls, and its grid shows a tile per other participant.
//!
//! Ignored by default: needs Chromium in a private network namespace. `.ci/browser-test` runs
//! it; by hand:
//! `unshare -n sh -c 'ip link set lo up && cargo test -p sfu --release --test browser_conference -- --ignored --nocapture'`.

#[path = "browser/chromium.rs"]
#[allow(
    dead_code,
    reason = "the conference uses part of the browser tests' driver"
)]
mod chromium;
#[path = "browser/data_channels.rs"]
mod data_channels;
#[path = "browser/node.rs"]
#[allow(
    dead_code,
    reason = "the conference uses part of the browser tests' driver"
)]
mod node;
#[path = "browser/participants.rs"]
mod participants;
#[path = "browser/strata.rs"]
#[allow(
    dead_code,
    reason = "the conference uses part of the browser tests' driver"
)]
mod strata;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use chromium::{Chromium, Page};
use node::Node;
use participants::{
    decode_each_other, decoding, everyone_decodes_the_others, join, remote_of, sample, summary,
    until, Participant,
};
use strata::num;

const ROOM: &str = "call";
/// The first four may take this long to join, connect and decode each other.
const FIRST_FOUR: Duration = Duration::from_secs(30);
/// The figures: a late joiner and the others see each other within 3 s; a leaver is
/// gone from the others within 2 s.
const LATE_JOIN: Duration = Duration::from_secs(3);
const LEAVE: Duration = Duration::from_secs(2);
/// Watched for freezes after the last change.
const AFTER: Duration = Duration::from_secs(5);
/// A participant whose session ended under it joins again: the browser calls its connection
/// `disconnected` after some seconds of unanswered consent checks, and the page waits 3 s more.
const REJOIN: Duration = Duration::from_secs(30);

/// When each participant first decoded each other one (read after `start`), for the report.
fn note_first_frames(
    first: &mut BTreeMap<(&'static str, String), Duration>,
    now: &BTreeMap<&'static str, Value>,
    start: Instant,
) {
    for (viewer, stats) in now {
        for of in decoding(stats) {
            first
                .entry((*viewer, of))
                .or_insert_with(|| start.elapsed());
        }
    }
}

/// One DTLS transport and one set of ICE credentials since the start, on every connection.
fn check_one_transport(participants: &[Participant<'_>]) {
    for (name, stats) in sample(participants) {
        assert_eq!(stats["connectionState"], "connected", "{name}: {stats:#}");
        assert_eq!(
            stats["transports"], 1,
            "{name} has one transport: {stats:#}"
        );
        let ufrags = stats["ufrags"].as_array().map_or(0, Vec::len);
        assert_eq!(
            ufrags, 1,
            "{name} kept its ICE credentials (no restart): {stats:#}"
        );
    }
}

/// Each participant's freezes of each other participant's video, summed (a participant not yet
/// in `stats` counts none).
fn freezes(stats: &BTreeMap<&'static str, Value>, among: &[&str]) -> f64 {
    among
        .iter()
        .filter_map(|p| Some((p, stats.get(p)?)))
        .map(|(p, seen)| {
            among
                .iter()
                .filter(|o| *o != p)
                .filter_map(|o| remote_of(seen, o))
                .map(|r| num(&r["video"], "freezeCount"))
                .sum::<f64>()
        })
        .sum()
}

/// Joins through the page's own conference controls, as a person would.
fn join_by_hand(page: &Page, name: &str) -> String {
    let script = format!(
        "(async () => {{
            const set = (id, v) => {{ document.getElementById(id).value = v; }};
            set('conf-room', {ROOM:?}); set('conf-name', {name:?}); set('conf-codec', 'AV1');
            set('conf-mode', 'L3T3_KEY'); set('conf-size', '640x360');
            document.getElementById('conf-go').click();
            for (let i = 0; i < 200; i++) {{
                const all = await strata.stats();
                const id = Object.keys(all).find((k) => all[k].kind === 'conference');
                if (id && all[id].connectionState === 'connected') return id;
                await new Promise((r) => setTimeout(r, 100));
            }}
            throw new Error('the page did not join');
        }})()"
    );
    page.eval_json(&script)
        .as_str()
        .expect("a session id")
        .to_owned()
}

#[test]
#[ignore = "needs chromium in a private network namespace: run .ci/browser-test"]
fn participants_join_and_leave_a_conference_on_one_connection_each() {
    let node = Node::start(&[]);
    let url = node.url("/");
    let by_hand = Chromium::launch();
    let demo = by_hand.open(&url);
    let scripted = Chromium::launch();
    let page = scripted.open(&url);

    let mut participants = vec![Participant {
        name: "ada",
        page: &demo,
        id: join_by_hand(&demo, "ada"),
    }];
    participants.push(join(
        &page,
        ROOM,
        "bo",
        json!({ "codec": "AV1", "scalabilityMode": "L3T3_KEY" }),
    ));
    participants.push(join(
        &page,
        ROOM,
        "cy",
        json!({ "codec": "VP8", "scalabilityMode": "L1T3", "simulcast": true }),
    ));
    participants.push(join(
        &page,
        ROOM,
        "di",
        json!({ "codec": "VP9", "scalabilityMode": "L3T3_KEY" }),
    ));
    let (took, before) = decode_each_other(
        &participants,
        FIRST_FOUR,
        "four participants decode each other",
    );
    println!(
        "[conference] four participants decode each other after {:.1} s",
        took.as_secs_f64()
    );
    check_one_transport(&participants);

    // A fifth joins late.
    participants.push(join(
        &page,
        ROOM,
        "ed",
        json!({ "codec": "AV1", "scalabilityMode": "L3T3_KEY" }),
    ));
    let start = Instant::now();
    let mut first = BTreeMap::new();
    let mut last = BTreeMap::new();
    let took = until(
        &participants,
        LATE_JOIN,
        "the fifth and the four see each other",
        |now| {
            note_first_frames(&mut first, now, start);
            last.clone_from(now);
            everyone_decodes_the_others(&participants, now, None)
        },
    );
    println!(
        "[conference] the late fifth and the four decode each other after {:.1} s:\n{}",
        took.as_secs_f64(),
        summary(&last)
    );
    let seen: Vec<String> = first
        .iter()
        .map(|((viewer, of), at): (&(&str, String), &Duration)| {
            format!("{viewer} sees {of} at {:.1} s", at.as_secs_f64())
        })
        .collect();
    println!("[conference] {}", seen.join(", "));
    let tiles = strata::stats(&demo)[&participants[0].id]["tiles"].clone();
    assert_eq!(tiles, 4, "the demo page's grid shows the four others");
    screenshot(&demo);
    check_one_transport(&participants);

    // One leaves.
    let leaver = participants.remove(2);
    strata::stop_one(leaver.page, &leaver.id);
    let took = until(
        &participants,
        LEAVE,
        "the leaver is gone from every other participant",
        |now| {
            participants.iter().all(|p| {
                remote_of(&now[p.name], leaver.name).is_none() && decoding(&now[p.name]).len() == 3
            })
        },
    );
    println!(
        "[conference] {} gone from the others after {:.1} s",
        leaver.name,
        took.as_secs_f64()
    );
    let names: Vec<&str> = participants.iter().map(|p| p.name).collect();
    let settled = sample(&participants);
    std::thread::sleep(AFTER);
    until(
        &participants,
        Duration::from_secs(5),
        "the four left keep decoding each other",
        |now| everyone_decodes_the_others(&participants, now, Some(&settled)),
    );
    let end = sample(&participants);
    // From the moment the first four decoded each other, through the late join and the
    // leave, to the end: no remaining participant froze on another remaining one.
    let froze = freezes(&end, &names) - freezes(&before, &names);
    assert_eq!(
        froze,
        0.0,
        "no remaining participant's video froze from the first four decoding to the end: {:#}",
        json!(end)
    );
    check_one_transport(&participants);
    for p in &participants {
        let renegotiated = num(&end[p.name], "renegotiations");
        assert!(
            renegotiated >= 1.0,
            "{} renegotiated in place: {:#}",
            p.name,
            end[p.name]
        );
    }
    rejoins_on_its_own(&mut participants);
    println!("[conference] {}", node_summary(&node));
}

/// Two participants decode each other; one restarts ICE, as the demo page's
/// `strata.restartIce` does (its next offer with new credentials): it selects a pair under its
/// new username fragment, which only the node's answers under new credentials of its own make,
/// and both go on decoding each other on the same connection.
#[test]
#[ignore = "needs chromium in a private network namespace: run .ci/browser-test"]
fn a_participant_restarts_ice_and_the_call_goes_on() {
    let node = Node::start(&[]);
    let browser = Chromium::launch();
    let page = browser.open(&node.url("/"));
    let vp8 = json!({ "codec": "VP8", "scalabilityMode": "L1T1" });
    let participants = [
        join(&page, "restart", "ada", vp8.clone()),
        join(&page, "restart", "bob", vp8),
    ];
    decode_each_other(
        &participants,
        FIRST_FOUR,
        "two participants decode each other",
    );
    let id = &participants[0].id;
    let node_ufrag = |page: &Page| {
        let sdp = format!("sessions.get({id:?}).pc.remoteDescription.sdp");
        page.eval_json(&format!("iceCredentials({sdp}).ufrag"))
    };
    let before = node_ufrag(&page);
    let restarted = strata::restart_ice(&page, id);
    assert_eq!(restarted["node"], node_ufrag(&page));
    assert_ne!(
        restarted["node"], before,
        "the node answers with new credentials"
    );
    let before = sample(&participants);
    until(
        &participants,
        Duration::from_secs(10),
        "they decode on",
        |now| everyone_decodes_the_others(&participants, now, Some(&before)),
    );
    strata::assert_drops_only(&page, &["padding", "duplicate"]);
}

/// The last participant's session ends under it (the page deletes its resource behind its
/// own back: the node forgets it, as when its node is gone): its connection fails, its page
/// joins again under the same name on its own, and everyone decodes everyone again.
fn rejoins_on_its_own(participants: &mut [Participant<'_>]) {
    let last = participants.len() - 1;
    let (page, old) = (participants[last].page, participants[last].id.clone());
    let status = page.eval_json(&format!(
        "fetch(sessions.get({old:?}).location, {{ method: 'DELETE' }}).then((r) => r.status)"
    ));
    assert_eq!(status, 200, "the session's resource deleted");
    let start = Instant::now();
    let deadline = start + REJOIN;
    participants[last].id = loop {
        let found = page.eval_json(&format!(
            "([...sessions.values()].find((s) => s.rejoins === {old:?}) || {{}}).id || null"
        ));
        if let Some(id) = found.as_str() {
            break id.to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no session joined again for {old} within {REJOIN:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    let joined = start.elapsed();
    until(
        participants,
        REJOIN,
        "the participant that joined again and the others decode each other",
        |now| everyone_decodes_the_others(participants, now, None),
    );
    println!(
        "[conference] {} joined again on its own after {:.1} s, decoded both ways after {:.1} s",
        participants[last].name,
        joined.as_secs_f64(),
        start.elapsed().as_secs_f64()
    );
}

/// The demo page as a PNG at `$STRATA_SCREENSHOT`, when set: to look at the grid.
fn screenshot(page: &Page) {
    let Some(path) = std::env::var_os("STRATA_SCREENSHOT") else {
        return;
    };
    let size = json!({ "width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": false });
    page.call("Emulation.setDeviceMetricsOverride", size);
    std::thread::sleep(Duration::from_millis(1500));
    let shot = page.call("Page.captureScreenshot", json!({ "format": "png" }));
    page.call("Emulation.clearDeviceMetricsOverride", json!({}));
    let data = shot["data"].as_str().expect("base64 PNG");
    let bytes = base64_decode(data);
    std::fs::write(&path, bytes).expect("write the screenshot");
}

/// Standard base64, as the DevTools protocol sends binary data.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let digits: Vec<u8> = text.bytes().filter(|&c| c != b'=').map(value).collect();
    digits
        .chunks(4)
        .flat_map(|chunk| {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, &d)| n | u32::from(d) << (18 - 6 * i));
            let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
            bytes.into_iter().take(chunk.len().saturating_sub(1))
        })
        .collect()
}

/// What the node logged of the room: joins and leaves.
fn node_summary(node: &Node) -> String {
    let log = node.log_text();
    let count = |what: &str| log.lines().filter(|l| l.contains(what)).count();
    format!(
        "the node logged {} joins and {} leaves",
        count("participant joined"),
        count("left its room")
    )
}
