//! End to end in a real browser: the demo page publishes Chromium's fake camera to the node over
//! WHIP and watches it back over WHEP, and the assertions read the browser's own WebRTC stats.
//!
//! Ignored by default: they need Chromium and a private network namespace with only loopback
//! (the loss scenario changes its firewall). `.ci/browser-test` installs and runs them; by hand:
//! `unshare -n sh -c 'ip link set lo up && cargo test -p sfu --release --test browser -- --ignored --test-threads=1'`.

#[path = "browser/chromium.rs"]
mod chromium;
#[path = "common/coturn.rs"]
#[allow(dead_code, reason = "coturn over TLS is for the HTTPS browser tests")]
mod coturn;
#[path = "browser/netns.rs"]
#[allow(dead_code, reason = "the loss scenario needs only the namespace check")]
mod netns;
#[path = "browser/node.rs"]
#[allow(
    dead_code,
    reason = "the HTTPS part of the driver is for browser_tls.rs"
)]
mod node;
#[path = "browser/page_server.rs"]
mod page_server;
#[path = "browser/strata.rs"]
#[allow(
    dead_code,
    reason = "the conference's part of the driver is not used here"
)]
mod strata;
#[path = "browser/viewing.rs"]
mod viewing;

use std::process::Command;
use std::time::Duration;

use serde_json::json;

use chromium::{Chromium, Page};
use node::Node;
use strata::{num, poll_until, size, stats, EVERY_SECOND};
use viewing::{
    assert_audio, assert_decoding, decode_rate, switch_round_trip, wait_sizes, SWITCH, SWITCH_UP,
};

const IGNORED: &str = "needs chromium in a private network namespace: run .ci/browser-test";

/// Frame sizes of the spatial layers of a 1280x720 camera: L3 modes and simulcast q, h, f.
const SIZES: [(f64, f64); 3] = [(320.0, 180.0), (640.0, 360.0), (1280.0, 720.0)];
/// The publisher's bitrate ramps up from 640x360 or below, which can take more than ten seconds.
const RAMP_UP: Duration = Duration::from_secs(40);

/// One node and one browser with the demo page open, for one scenario: each starts in under a
/// second, and a failing scenario then leaves the others' results standing. An ordinary session
/// makes the node drop nothing but the browser's probes (padding) and retransmissions that
/// arrive after their original (duplicates); `allowed` names what else the scenario may cause.
fn scenario(allowed: &[&str], run: impl FnOnce(&Page)) {
    let node = Node::start(&[]);
    let browser = Chromium::launch();
    let page = browser.open(&node.url("/"));
    run(&page);
    strata::assert_drops_only(&page, &[&["padding", "duplicate"], allowed].concat());
}

#[test]
#[ignore = "needs chromium in a private network namespace: run .ci/browser-test"]
fn av1_svc_layers_and_switches() {
    scenario(&[], av1_svc);
}

#[test]
#[ignore = "needs chromium in a private network namespace: run .ci/browser-test"]
fn vp9_svc_layers_and_switches() {
    scenario(&[], vp9_svc);
}

#[test]
#[ignore = "needs chromium in a private network namespace: run .ci/browser-test"]
fn vp8_simulcast_layers_and_switches() {
    scenario(&[], vp8_simulcast);
}

#[test]
#[ignore = "needs chromium in a private network namespace: run .ci/browser-test"]
fn vp9_simulcast_layers_and_switches() {
    scenario(&[], |page| {
        let (publisher, high) = simulcast(page, "VP9");
        paused_encoding(page, &publisher, &high);
    });
}

#[test]
#[ignore = "needs chromium in a private network namespace: run .ci/browser-test"]
fn av1_simulcast_layers_and_switches() {
    scenario(&[], |page| {
        let (publisher, high) = simulcast(page, "AV1");
        paused_encoding(page, &publisher, &high);
    });
}

#[test]
#[ignore = "needs chromium in a private network namespace: run .ci/browser-test"]
fn loss_is_repaired() {
    // The loss scenario rewrites the firewall: only ever inside a namespace of its own.
    netns::require_private_network(IGNORED);
    // A lost keyframe packet leaves the frames after it unreadable until it is repaired; and
    // the loss rule drops the node's own sends at the socket, which it counts as refused.
    scenario(&["unreadable_dd", "out_of_window", "send_failed"], loss);
}

/// An ICE restart of a viewer and of a publisher, as the demo page makes one (a trickle `PATCH`
/// with new credentials, RFC 9725 section 4.3.2): each selects a pair under its new
/// credentials, which only the node's answers to checks under the node's new ones make, and
/// the viewer goes on decoding over the same DTLS association.
#[test]
#[ignore = "needs chromium in a private network namespace: run .ci/browser-test"]
fn an_ice_restart_keeps_the_session() {
    scenario(&[], |page| {
        let vp8 = json!({ "room": "restart", "codec": "VP8", "scalabilityMode": "L1T1" });
        let publisher = strata::publish(page, vp8);
        strata::wait_publishing(page, &publisher);
        let viewer = strata::watch(page, json!({ "room": "restart" }));
        assert_decoding(page, &viewer, "the viewer", RAMP_UP);
        for id in [&viewer, &publisher] {
            strata::restart_ice(page, id);
        }
        assert_decoding(page, &viewer, "the viewer after both restarts", RAMP_UP);
    });
}

/// AV1 L3T3_KEY: every spatial layer, the base temporal layer's rate, switching both ways, a
/// viewer that does not negotiate the Dependency Descriptor, and audio.
fn av1_svc(page: &Page) {
    layered_publisher(page, "av1", "AV1", "L3T3_KEY");
    let viewers = viewers_at_each_layer(page, "av1");
    let base_rate = strata::watch(page, json!({ "room": "av1", "spatial": 2, "temporal": 0 }));
    let no_dd = strata::watch(page, json!({ "room": "av1", "dd": false }));
    wait_sizes(page, &[(&base_rate, SIZES[2])], RAMP_UP);
    let fps = decode_rate(page, &base_rate, Duration::from_secs(5));
    assert!(
        (4.0..=12.0).contains(&fps),
        "temporal layer 0 of 30 fps decodes at {fps} fps"
    );
    // AV1 SVC without the DD cannot be selected by layer: such a viewer gets the base
    // spatial layer alone (docs/http-api.md), and decodes its size.
    assert_decoding(
        page,
        &no_dd,
        "a viewer without the Dependency Descriptor",
        RAMP_UP,
    );
    wait_sizes(page, &[(&no_dd, SIZES[0])], RAMP_UP);
    assert_audio(page, &viewers[0]);
    switch_round_trip(page, &viewers[2], SIZES);
}

/// VP9 L3T3_KEY: every spatial layer and a switch.
fn vp9_svc(page: &Page) {
    layered_publisher(page, "vp9", "VP9", "L3T3_KEY");
    let viewers = viewers_at_each_layer(page, "vp9");
    switch_round_trip(page, &viewers[2], SIZES);
}

/// VP8 simulcast: the lowest and highest encodings, a switch between them, and the top
/// encoding paused and resumed.
fn vp8_simulcast(page: &Page) {
    let (publisher, high) = simulcast(page, "VP8");
    paused_encoding(page, &publisher, &high);
}

/// `codec` as three simulcast encodings (rids q, h, f at 1/4, 1/2 and full size, L1T3 each):
/// a viewer of each decodes its size, and the highest switches down to the lowest and back.
/// Returns the publisher and the highest viewer.
fn simulcast(page: &Page, codec: &str) -> (String, String) {
    let room = codec.to_lowercase() + "-simulcast";
    let publisher = strata::publish(
        page,
        json!({ "room": room, "codec": codec, "scalabilityMode": "L1T3", "simulcast": true }),
    );
    let encodings = strata::wait_publishing(page, &publisher);
    let rids: Vec<&str> = encodings.iter().filter_map(|e| e["rid"].as_str()).collect();
    assert_eq!(rids.len(), 3, "three simulcast encodings: {encodings:?}");
    let viewers = viewers_at_each_layer(page, &room);
    switch_round_trip(page, &viewers[2], SIZES);
    (publisher, viewers[2].clone())
}

/// The publisher pauses its top encoding: its viewer moves to the one below at once, without
/// a freeze, and back when it resumes.
fn paused_encoding(page: &Page, publisher: &str, viewer: &str) {
    let before = stats(page)[viewer]["video"].clone();
    strata::set_encoding_active(page, publisher, "f", false);
    poll_until(
        page,
        SWITCH,
        Duration::from_millis(100),
        "the viewer of a paused encoding moves below",
        |s| (size(s, viewer) == SIZES[1]).then_some(()),
    );
    let decoded = num(&stats(page)[viewer]["video"], "framesDecoded");
    std::thread::sleep(EVERY_SECOND);
    assert!(
        num(&stats(page)[viewer]["video"], "framesDecoded") > decoded + 10.0,
        "decoding goes on below the paused encoding"
    );
    strata::set_encoding_active(page, publisher, "f", true);
    poll_until(
        page,
        SWITCH_UP,
        Duration::from_millis(200),
        "back to the resumed encoding",
        |s| (size(s, viewer) == SIZES[2]).then_some(()),
    );
    let after = stats(page)[viewer]["video"].clone();
    let delta = |key| num(&after, key) - num(&before, key);
    // The encoding stops without notice: the viewer waits out the pause's detection (300 ms)
    // and the keyframe of the stream below (before, until the paused stream's measured rate
    // faded: 2 s and more).
    assert!(
        delta("freezeCount") <= 1.0,
        "freezes around the pause: {after}"
    );
    assert!(
        delta("totalFreezesDuration") < 0.8,
        "frozen around the pause: {after}"
    );
}

/// 5% of UDP dropped both ways: a 720p viewer keeps decoding, retransmissions hide the loss.
fn loss(page: &Page) {
    layered_publisher(page, "loss", "AV1", "L3T3_KEY");
    let viewer = strata::watch(page, json!({ "room": "loss", "spatial": 2, "temporal": 2 }));
    wait_sizes(page, &[(&viewer, SIZES[2])], RAMP_UP);
    let _rule = LossRule::drop_one_in_twenty();
    let before = stats(page)[&viewer]["video"].clone();
    let mut last = num(&before, "framesDecoded");
    for second in 0..20 {
        std::thread::sleep(EVERY_SECOND);
        let decoded = num(&stats(page)[&viewer]["video"], "framesDecoded");
        // Every two seconds at least: a keyframe wait after a burst may take one.
        if second % 2 == 1 {
            assert!(
                decoded > last,
                "no frame decoded in 2 s of loss (second {second})"
            );
            last = decoded;
        }
    }
    let after = stats(page)[&viewer]["video"].clone();
    let delta = |key| num(&after, key) - num(&before, key);
    assert!(delta("freezeCount") <= 1.0, "freezes under loss: {after}");
    // packetsLost counts the original stream only (RFC 3550): a packet repaired by a
    // retransmission stays lost there and arrives in retransmittedPacketsReceived instead.
    let lost = delta("packetsLost");
    let repaired = delta("retransmittedPacketsReceived");
    assert!(
        lost - repaired < 0.01 * delta("packetsReceived"),
        "unrepaired loss: {lost} lost, {repaired} retransmitted, {} received; {after}\nthe node's counters:\n{}",
        delta("packetsReceived"),
        node_counters(page, &["nack", "retransmi", "rtx"])
    );
}

#[test]
#[ignore = "needs chromium in a private network namespace: run .ci/browser-test"]
fn tokens_and_malformed_offers() {
    let node = Node::start(&["--token", "secret"]);
    let browser = Chromium::launch();
    let page = browser.open(&node.url("/"));
    let offer = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n";
    let (status, _) = strata::post(&page, "/whep/auth", offer, "application/sdp", None);
    assert_eq!(status, 401, "a viewer without a token");
    let (status, _) = strata::post(&page, "/whip/auth", offer, "application/sdp", Some("wrong"));
    assert_eq!(status, 401, "a publisher with a wrong token");
    let (status, reason) = strata::post(
        &page,
        "/whep/auth",
        "not an offer",
        "application/sdp",
        Some("secret"),
    );
    assert_eq!(status, 400, "garbage SDP with a valid token");
    assert!(!reason.trim().is_empty(), "a 400 says why");
    let publisher = strata::publish(
        &page,
        json!({ "room": "auth", "codec": "VP8", "scalabilityMode": "L1T1", "token": "secret" }),
    );
    strata::wait_publishing(&page, &publisher);
}

/// A publisher and a viewer whose network allows only TURN: each page takes the ICE servers
/// the node hands out (a real coturn, credentials minted from its shared secret), connects
/// through a relay only, and the viewer decodes.
#[test]
#[ignore = "needs chromium and coturn in a private network namespace: run .ci/browser-test"]
fn publishing_and_watching_through_a_turn_relay() {
    let turn = coturn::coturn();
    let config = format!(
        "[[ice_servers]]\nurls = [\"turn:127.0.0.1:{}?transport=udp\"]\nsecret = \"{}\"\n",
        turn.port,
        coturn::SECRET
    );
    let node = Node::start_on("127.0.0.1", Some(&config), &[]);
    let browser = Chromium::launch();
    let page = browser.open(&node.url("/"));
    let relay =
        json!({ "room": "relayed", "codec": "VP8", "scalabilityMode": "L1T1", "relay": true });
    let publisher = strata::publish(&page, relay);
    strata::wait_publishing(&page, &publisher);
    let viewer = strata::watch(&page, json!({ "room": "relayed", "relay": true }));
    assert_decoding(&page, &viewer, "a viewer through a relay", RAMP_UP);
    for id in [&publisher, &viewer] {
        let kind = strata::selected_local(&page, id, "candidateType");
        assert_eq!(kind, "relay", "session {id} goes through the TURN relay");
    }
}

/// The page and the driver without a node: a second peer connection in the page answers the
/// WHIP and WHEP offers. Checks what the page offers and that its stats carry every field.
#[test]
#[ignore = "needs chromium in a private network namespace: run .ci/browser-test"]
fn demo_page_against_a_loopback_answerer() {
    let browser = Chromium::launch();
    let page = browser.open(&page_server::serve_demo());
    page.eval_json(include_str!("browser/loopback_answerer.js"));
    let publisher = strata::publish(
        &page,
        json!({ "room": "l", "codec": "AV1", "scalabilityMode": "L3T3_KEY" }),
    );
    let encodings = strata::wait_publishing(&page, &publisher);
    assert_eq!(encodings.len(), 1, "one SVC encoding: {encodings:?}");
    assert_eq!(encodings[0]["scalabilityMode"], "L3T3_KEY");
    assert!(encodings[0]["encoderImplementation"].is_string());
    let viewer = strata::watch(&page, json!({ "room": "l", "spatial": 1 }));
    let _no_dd = strata::watch(&page, json!({ "room": "l", "dd": false }));
    assert_decoding(&page, &viewer, "a viewer", RAMP_UP);
    assert_audio(&page, &viewer);
    assert_eq!(strata::set_layer(&page, &viewer, 0, 1), 204);
    assert_offers(&page);
    let all = stats(&page);
    let video = &all[&viewer]["video"];
    for key in [
        "frameWidth",
        "framesDecoded",
        "freezeCount",
        "pliCount",
        "nackCount",
        "packetsLost",
        "framesDropped",
    ] {
        assert!(video[key].is_number(), "{key} in {video}");
    }
    assert!(video["codec"]
        .as_str()
        .is_some_and(|c| c.starts_with("video/")));
    strata::stop_all(&page);
    assert_eq!(stats(&page), json!({}), "every session stopped");
}

/// The publisher's offer asks for AV1 alone (and its retransmissions) with the DD; a viewer
/// offers the DD only when asked to.
fn assert_offers(page: &Page) {
    let offers = page.eval_json("window.loopbackOffers");
    let sdp = |i: usize| offers[i]["sdp"].as_str().expect("an offer").to_owned();
    let dd = "dependency-descriptor-rtp-header-extension";
    let publish = sdp(0);
    assert!(
        publish.contains("AV1/90000") && !publish.contains("VP8/90000"),
        "{publish}"
    );
    assert!(
        publish.contains(dd),
        "the publisher offers the DD: {publish}"
    );
    assert!(sdp(1).contains(dd), "a viewer offers the DD");
    assert!(!sdp(2).contains(dd), "a viewer with dd:false does not");
}

/// The node's `/metrics` lines that mention any of `words`, to tell in a failure whether the
/// node saw and answered the loss.
fn node_counters(page: &Page, words: &[&str]) -> String {
    let text = page.eval_json("fetch('/metrics').then((r) => r.text())");
    let text = text.as_str().unwrap_or_default().to_lowercase();
    let wanted = |line: &&str| !line.starts_with('#') && words.iter().any(|w| line.contains(w));
    text.lines().filter(wanted).collect::<Vec<_>>().join("\n")
}

/// An nftables table dropping one UDP packet in twenty on output (every packet here is on
/// loopback, so both directions of every leg); removed on drop, even when the test fails.
struct LossRule;

impl LossRule {
    fn drop_one_in_twenty() -> LossRule {
        nft(&["add", "table", "inet", "strata_loss"]);
        nft(&["add chain inet strata_loss out { type filter hook output priority 0; }"]);
        nft(&[
            "add",
            "rule",
            "inet",
            "strata_loss",
            "out",
            "meta",
            "l4proto",
            "udp",
            "numgen",
            "random",
            "mod",
            "20",
            "0",
            "drop",
        ]);
        LossRule
    }
}

impl Drop for LossRule {
    fn drop(&mut self) {
        let _ = Command::new("nft")
            .args(["delete", "table", "inet", "strata_loss"])
            .status();
    }
}

fn nft(args: &[&str]) {
    let status = Command::new("nft").args(args).status().expect("run nft");
    assert!(status.success(), "nft {args:?}");
}

fn layered_publisher(page: &Page, room: &str, codec: &str, mode: &str) {
    let id = strata::publish(
        page,
        json!({ "room": room, "codec": codec, "scalabilityMode": mode }),
    );
    let encodings = strata::wait_publishing(page, &id);
    assert_eq!(encodings[0]["scalabilityMode"], mode, "{encodings:?}");
}

/// One viewer per spatial layer at the top temporal layer; each decodes that layer's size.
fn viewers_at_each_layer(page: &Page, room: &str) -> Vec<String> {
    let ids: Vec<String> = (0..3)
        .map(|s| strata::watch(page, json!({ "room": room, "spatial": s, "temporal": 2 })))
        .collect();
    let expected: Vec<(&str, (f64, f64))> = ids.iter().map(String::as_str).zip(SIZES).collect();
    wait_sizes(page, &expected, RAMP_UP);
    ids
}
