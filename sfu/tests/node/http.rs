//! The `sfu serve` binary over real HTTP and a real UDP socket, without a browser: WHIP and WHEP
//! sessions from SDP offers, layer changes, resources ending, CORS, tokens, bad input, metrics,
//! and a graceful stop on SIGTERM. (Media end to end is the browser test's part.)

use crate::http_node;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use http_node::{connect_from, node_with_config, open, request_over, Node, SDP};

const AV1_OFFER: &str = include_str!("../../src/node/sdp/fixtures/publisher_av1.sdp");
const VIEWER_OFFER: &str = include_str!("../../src/node/sdp/fixtures/viewer_recvonly.sdp");
const GSTREAMER_H264: &str = include_str!("../../src/node/sdp/fixtures/gstreamer_h264.sdp");
const GSTREAMER_BEFORE_CAPS: &str =
    include_str!("../../src/node/sdp/fixtures/gstreamer_before_caps.sdp");

#[test]
fn whip_and_whep_sessions_over_http() {
    let node = Node::start(&[]);
    let published = node.request("POST", "/whip/demo", &[SDP], AV1_OFFER);
    assert_eq!(published.status, 201, "{}", published.body);
    assert_eq!(published.header("content-type"), Some("application/sdp"));
    let whip = published.header("location").expect("a resource").to_owned();
    assert!(whip.starts_with("/whip/demo/"), "{whip}");
    for line in [
        "a=ice-lite",
        "a=setup:passive",
        "a=recvonly",
        "typ host",
        "x-google-min-bitrate=2500;x-google-start-bitrate=2500",
    ] {
        assert!(published.body.contains(line), "{line} in the answer");
    }
    assert!(published.body.contains("AV1/90000"));

    let watched = node.request(
        "POST",
        "/whep/demo?spatial=1&temporal=0",
        &[SDP],
        VIEWER_OFFER,
    );
    assert_eq!(watched.status, 201, "{}", watched.body);
    let whep = watched.header("location").expect("a resource").to_owned();
    assert!(watched.body.contains("a=sendonly") && watched.body.contains("a=ssrc:"));
    assert!(
        watched.body.contains("AV1/90000"),
        "the viewer gets the room's codec"
    );

    let json = ("Content-Type", "application/json");
    let layer = node.request("PATCH", &whep, &[json], r#"{"spatial":0,"temporal":2}"#);
    assert_eq!(layer.status, 204);
    let bad = node.request("PATCH", &whep, &[json], r#"{"spatial":"high"}"#);
    assert_eq!(bad.status, 400);
    let trickle = ("Content-Type", "application/trickle-ice-sdpfrag");
    assert_eq!(
        node.request("PATCH", &whip, &[trickle], "a=mid:0\r\n")
            .status,
        204
    );

    let metrics = node.request("GET", "/metrics", &[], "");
    assert!(
        metrics.body.contains("strata_publishers 1"),
        "{}",
        metrics.body
    );
    assert!(metrics.body.contains("strata_subscribers 1"));

    assert_eq!(node.request("DELETE", &whep, &[], "").status, 200);
    assert_eq!(node.request("DELETE", &whep, &[], "").status, 404);
    let wrong_kind = whip.replacen("/whip/", "/whep/", 1);
    assert_eq!(node.request("DELETE", &wrong_kind, &[], "").status, 404);
    assert_eq!(node.request("DELETE", &whip, &[], "").status, 200);
    let metrics = node.request("GET", "/metrics", &[], "");
    assert!(
        metrics.body.contains("strata_publishers 0"),
        "{}",
        metrics.body
    );
}

#[test]
fn non_browser_offers_are_served_and_refused_sections_say_why() {
    let node = Node::start(&[]);
    let x264 = node.request("POST", "/whip/x264", &[SDP], GSTREAMER_H264);
    assert_eq!(x264.status, 201, "{}", x264.body);
    assert!(
        x264.body.contains("profile-level-id=42c01e"),
        "{}",
        x264.body
    );
    // In both sections, and not at session level (which GStreamer's webrtcbin refuses
    // beside the sections' own).
    assert_eq!(
        x264.body.matches("a=fingerprint:").count(),
        2,
        "{}",
        x264.body
    );
    let browser = node.request("POST", "/whep/x264", &[SDP], VIEWER_OFFER);
    assert_eq!(browser.status, 201, "{}", browser.body);
    assert!(
        browser.body.contains("a=rtpmap:106 H264/90000"),
        "{}",
        browser.body
    );
    assert_eq!(browser.header("warning"), None);

    let before_caps = node.request("POST", "/whip/vp8", &[SDP], GSTREAMER_BEFORE_CAPS);
    assert_eq!(before_caps.status, 201, "{}", before_caps.body);
    let no_vp8 = VIEWER_OFFER.replace("a=rtpmap:96 VP8/90000\n", "");
    let watched = node.request("POST", "/whep/vp8", &[SDP], &no_vp8);
    assert_eq!(watched.status, 201, "{}", watched.body);
    assert_eq!(
        watched.header("warning"),
        Some("299 strata \"mid 1: no offered codec decodes the room's VP8\"")
    );
    assert!(watched.body.contains("a=inactive"), "{}", watched.body);
    assert!(
        watched.body.contains("a=group:BUNDLE 0 1"),
        "{}",
        watched.body
    );

    let shared = GSTREAMER_BEFORE_CAPS
        .replace("SAVPF 111", "SAVPF 96")
        .replace(":111 ", ":96 ");
    let refused = node.request("POST", "/whip/shared", &[SDP], &shared);
    assert_eq!(refused.status, 400);
    assert!(
        refused.body.contains("mid video0: no a=ssrc"),
        "{}",
        refused.body
    );
}

#[test]
fn bad_input_is_refused_with_its_reason_and_the_node_keeps_serving() {
    let node = Node::start(&[]);
    let garbage = node.request("POST", "/whip/demo", &[SDP], "this is not SDP");
    assert_eq!(garbage.status, 400);
    assert!(garbage.body.contains("not SDP"), "{}", garbage.body);
    let no_ice = AV1_OFFER.replace("a=ice-ufrag", "a=x-removed");
    let missing = node.request("POST", "/whip/demo", &[SDP], &no_ice);
    assert_eq!(
        (missing.status, missing.body.trim()),
        (400, "bad offer: no ice-ufrag")
    );
    // A fingerprint the handshake could not check: refused with the offer, not at the
    // first DTLS record.
    for (from, to) in [("sha-256 9C:5E", "sha-1 9C:5E"), (":C8:55", ":C8")] {
        let refused = node.request("POST", "/whip/demo", &[SDP], &AV1_OFFER.replace(from, to));
        assert_eq!(refused.status, 400, "{}", refused.body);
        assert!(refused.body.contains("a=fingerprint"), "{}", refused.body);
    }
    let text = ("Content-Type", "text/plain");
    assert_eq!(
        node.request("POST", "/whip/demo", &[text], AV1_OFFER)
            .status,
        415
    );
    let huge = "a".repeat(100 * 1024);
    assert_eq!(
        node.request("POST", "/whip/demo", &[SDP], &huge).status,
        413
    );
    let layer = node.request("POST", "/whep/demo?spatial=two", &[SDP], VIEWER_OFFER);
    assert_eq!(layer.status, 400);
    assert_eq!(
        node.request("POST", "/whip/demo", &[SDP], AV1_OFFER).status,
        201
    );
    let again = node.request("POST", "/whip/other", &[SDP], AV1_OFFER);
    assert_eq!(
        again.status, 201,
        "SSRCs are unique per session: another may publish the same ones"
    );
}

#[test]
fn cors_preflight_is_answered_and_location_exposed() {
    let node = Node::start(&[]);
    let preflight = node.request(
        "OPTIONS",
        "/whep/demo",
        &[
            ("Origin", "https://elsewhere.example"),
            ("Access-Control-Request-Method", "POST"),
            (
                "Access-Control-Request-Headers",
                "authorization, content-type",
            ),
        ],
        "",
    );
    assert_eq!(preflight.status, 204);
    assert_eq!(preflight.header("access-control-allow-origin"), Some("*"));
    let methods = preflight
        .header("access-control-allow-methods")
        .unwrap_or("");
    assert!(methods.contains("POST") && methods.contains("PATCH") && methods.contains("DELETE"));
    let allowed = preflight
        .header("access-control-allow-headers")
        .unwrap_or("");
    assert!(allowed.contains("Authorization") && allowed.contains("Content-Type"));
    let published = node.request("POST", "/whip/demo", &[SDP], AV1_OFFER);
    assert_eq!(published.header("access-control-allow-origin"), Some("*"));
    let exposed = published
        .header("access-control-expose-headers")
        .unwrap_or("");
    assert!(exposed.contains("Location"));
    assert!(
        exposed.contains("Retry-After"),
        "a page reads how long a 503 says to wait"
    );
}

#[test]
fn tokens_are_required_when_configured() {
    let node = Node::start(&["--token", "s3cret"]);
    let anonymous = node.request("POST", "/whep/demo", &[SDP], VIEWER_OFFER);
    assert_eq!(anonymous.status, 401);
    assert_eq!(anonymous.header("www-authenticate"), Some("Bearer"));
    let wrong = ("Authorization", "Bearer guess");
    assert_eq!(
        node.request("POST", "/whip/demo", &[SDP, wrong], AV1_OFFER)
            .status,
        401
    );
    let right = ("Authorization", "Bearer s3cret");
    let garbage = node.request("POST", "/whip/demo", &[SDP, right], "garbage");
    assert_eq!(garbage.status, 400, "authorized, then the offer is read");
    let published = node.request("POST", "/whip/demo", &[SDP, right], AV1_OFFER);
    assert_eq!(published.status, 201);
    let whip = published.header("location").expect("a resource");
    assert_eq!(node.request("DELETE", whip, &[], "").status, 401);
    assert_eq!(node.request("DELETE", whip, &[right], "").status, 200);
}

#[test]
fn jwt_grants_are_checked_per_room_and_role() {
    let secret = "jwt-secret";
    let node = Node::start(&["--jwt-secret", secret]);
    let claims = r#"{"room":"demo","publish":false,"subscribe":true}"#;
    let token = sfu::node::auth::sign_hs256(secret.as_bytes(), claims);
    let bearer = format!("Bearer {token}");
    let auth = ("Authorization", bearer.as_str());
    assert_eq!(
        node.request("POST", "/whip/demo", &[SDP, auth], AV1_OFFER)
            .status,
        401
    );
    assert_eq!(
        node.request("POST", "/whep/other", &[SDP, auth], VIEWER_OFFER)
            .status,
        401
    );
    assert_eq!(
        node.request("POST", "/whep/demo", &[SDP, auth], VIEWER_OFFER)
            .status,
        201
    );
}

#[test]
fn sigterm_stops_the_node_gracefully() {
    let mut node = Node::start(&[]);
    let pid = node.child.id().to_string();
    let sent = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = node.child.try_wait().expect("waitable") {
            break status;
        }
        assert!(Instant::now() < deadline, "the node stops within 10 s");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "a clean exit: {status:?}");
}

#[test]
fn a_session_answers_only_the_credential_that_created_it() {
    let node = Node::start(&["--token", "alice", "--token", "bob"]);
    let alice = ("Authorization", "Bearer alice");
    let bob = ("Authorization", "Bearer bob");
    let json = ("Content-Type", "application/json");
    let layer = r#"{"spatial":0,"temporal":0}"#;
    let published = node.request("POST", "/whip/demo", &[SDP, alice], AV1_OFFER);
    let whip = published.header("location").expect("a resource").to_owned();
    let watched = node.request("POST", "/whep/demo", &[SDP, alice], VIEWER_OFFER);
    let whep = watched.header("location").expect("a resource").to_owned();
    let id = whep.rsplit('/').next().expect("an id");
    assert_eq!(id.len(), 32, "128 random bits: {whep}");
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(
        node.request("PATCH", &whep, &[json, bob], layer).status,
        403
    );
    assert_eq!(node.request("DELETE", &whep, &[bob], "").status, 403);
    assert_eq!(node.request("DELETE", &whip, &[bob], "").status, 403);
    assert_eq!(node.request("DELETE", &whep, &[], "").status, 401);
    assert_eq!(
        node.request("PATCH", &whep, &[json, alice], layer).status,
        204
    );
    assert_eq!(node.request("DELETE", &whep, &[alice], "").status, 200);
    assert_eq!(node.request("DELETE", &whep, &[alice], "").status, 404);
    assert_eq!(
        node.request("PATCH", &whep, &[json, alice], layer).status,
        404
    );
    assert_eq!(node.request("DELETE", &whip, &[alice], "").status, 200);
}

/// `GET` on a viewer's resource: its estimate and subscriptions as JSON (none before it
/// connects), under the rules of PATCH and DELETE.
#[test]
fn a_viewers_stats_answer_the_credential_that_created_it() {
    let node = Node::start(&["--token", "alice", "--token", "bob"]);
    let alice = ("Authorization", "Bearer alice");
    let bob = ("Authorization", "Bearer bob");
    let published = node.request("POST", "/whip/demo", &[SDP, alice], AV1_OFFER);
    let whip = published.header("location").expect("a resource").to_owned();
    let watched = node.request("POST", "/whep/demo", &[SDP, alice], VIEWER_OFFER);
    let whep = watched.header("location").expect("a resource").to_owned();

    let stats = node.request("GET", &whep, &[alice], "");
    assert_eq!(stats.status, 200, "{}", stats.body);
    assert_eq!(stats.header("content-type"), Some("application/json"));
    assert_eq!(stats.header("cache-control"), Some("no-store"));
    let json: serde_json::Value = serde_json::from_str(&stats.body).expect("JSON");
    assert_eq!(
        json,
        serde_json::json!({"estimate_bps": null, "tracks": []}),
        "not connected: no estimate, no subscription"
    );
    let forbidden = node.request("GET", &whep, &[bob], "");
    assert_eq!(forbidden.status, 403);
    assert!(
        forbidden.body.contains("another credential"),
        "{}",
        forbidden.body
    );
    assert_eq!(node.request("GET", &whep, &[], "").status, 401);
    let as_viewer = whip.replacen("/whip/", "/whep/", 1);
    assert_eq!(
        node.request("GET", &as_viewer, &[alice], "").status,
        404,
        "a publisher has no viewer stats"
    );
    let other_room = whep.replacen("/whep/demo/", "/whep/elsewhere/", 1);
    assert_eq!(node.request("GET", &other_room, &[alice], "").status, 404);
    let bad_room = whep.replacen("/whep/demo/", "/whep/a%20b/", 1);
    let refused = node.request("GET", &bad_room, &[alice], "");
    assert_eq!(refused.status, 400);
    assert!(refused.body.contains("room name"), "{}", refused.body);
    assert_eq!(
        node.request("GET", "/whep/demo/not-an-id", &[alice], "")
            .status,
        404
    );

    assert_eq!(node.request("DELETE", &whep, &[alice], "").status, 200);
    let gone = node.request("GET", &whep, &[alice], "");
    assert_eq!(gone.status, 404);
    assert!(gone.body.contains("no such session"), "{}", gone.body);
}

#[test]
fn on_an_open_node_only_the_resource_url_ends_a_session() {
    let node = Node::start(&[]);
    let watched = node.request("POST", "/whep/demo", &[SDP], VIEWER_OFFER);
    let whep = watched.header("location").expect("a resource").to_owned();
    for guess in [
        "/whep/demo/1",
        "/whep/demo/7",
        "/whep/demo/00000000000000000000000000000001",
    ] {
        assert_eq!(
            node.request("DELETE", guess, &[], "").status,
            404,
            "{guess}"
        );
    }
    let metrics = node.request("GET", "/metrics", &[], "");
    assert!(
        metrics.body.contains("strata_subscribers 1"),
        "{}",
        metrics.body
    );
    let id = whep.rsplit('/').next().expect("an id");
    let sent = format!("strata_viewer_sent_bytes_total{{session=\"{id}\"");
    assert!(
        !metrics.body.contains(&sent),
        "not subscribed yet: no per-subscription series\n{}",
        metrics.body
    );
    assert_eq!(
        node.request(
            "GET",
            "/whep/demo/00000000000000000000000000000001",
            &[],
            ""
        )
        .status,
        404
    );
    assert_eq!(
        node.request("GET", &whep, &[], "").status,
        200,
        "the URL is the key"
    );
    assert_eq!(node.request("DELETE", &whep, &[], "").status, 200);
}

#[test]
fn metrics_take_a_token_of_their_own_once_tokens_are_configured() {
    let node = Node::start(&["--token", "alice", "--metrics-token", "scraper"]);
    assert_eq!(node.request("GET", "/metrics", &[], "").status, 401);
    let alice = ("Authorization", "Bearer alice");
    assert_eq!(node.request("GET", "/metrics", &[alice], "").status, 401);
    let scraper = ("Authorization", "Bearer scraper");
    let metrics = node.request("GET", "/metrics", &[scraper], "");
    assert_eq!(metrics.status, 200);
    assert!(metrics.body.contains("strata_rooms 0"));
    // The media socket as the kernel granted it, and what it dropped.
    for series in [
        "strata_udp_receive_buffer_bytes ",
        "strata_udp_send_buffer_bytes ",
        "strata_udp_receive_overflows_total 0",
    ] {
        assert!(
            metrics.body.contains(series),
            "{series} in {}",
            metrics.body
        );
    }
    let node = Node::start(&["--token", "alice"]);
    assert_eq!(
        node.request("GET", "/metrics", &[alice], "").status,
        401,
        "no metrics token configured: a room token does not read the node"
    );
}

#[test]
fn room_names_either_round_trip_or_are_refused() {
    let node = Node::start(&[]);
    for bad in ["a%2Fb", "a%20b", "%C3%A9"] {
        let refused = node.request("POST", &format!("/whip/{bad}"), &[SDP], AV1_OFFER);
        assert_eq!(refused.status, 400, "{bad}");
        assert!(refused.body.contains("room name"), "{}", refused.body);
    }
    let long = "r".repeat(65);
    let refused = node.request("POST", &format!("/whep/{long}"), &[SDP], VIEWER_OFFER);
    assert_eq!(refused.status, 400);
    let name = "Room-1_a.b";
    let watched = node.request("POST", &format!("/whep/{name}"), &[SDP], VIEWER_OFFER);
    let whep = watched.header("location").expect("a resource").to_owned();
    assert!(whep.starts_with(&format!("/whep/{name}/")), "{whep}");
    assert_eq!(
        node.request("DELETE", &whep, &[], "").status,
        200,
        "it reads back"
    );
}

#[test]
fn limits_refuse_with_their_status_retry_after_and_reason() {
    let node = node_with_config(
        "[limits]\nsessions_per_room = 1\nsections_per_offer = 2\n",
        &[],
    );
    assert_eq!(
        node.request("POST", "/whep/full", &[SDP], VIEWER_OFFER)
            .status,
        201
    );
    let full = node.request("POST", "/whep/full", &[SDP], VIEWER_OFFER);
    assert_eq!(full.status, 503);
    assert_eq!(full.header("retry-after"), Some("30"));
    assert!(
        full.body.contains("the room has its maximum of 1"),
        "{}",
        full.body
    );
    let metrics = node.request("GET", "/metrics", &[], "");
    assert!(
        metrics
            .body
            .contains("strata_sessions_refused_total{reason=\"room_full\"} 1"),
        "{}",
        metrics.body
    );
    assert!(
        metrics.body.contains("strata_subscribers 1"),
        "nothing else changed"
    );
    // A third section: the viewer offer's audio section under a new mid.
    let audio = VIEWER_OFFER[VIEWER_OFFER.find("m=audio").expect("audio")..]
        .split("m=video")
        .next()
        .expect("the audio section")
        .replace("a=mid:0", "a=mid:2");
    let third = AV1_OFFER.replace("a=group:BUNDLE 0 1", "a=group:BUNDLE 0 1 2") + &audio;
    let large = node.request("POST", "/whip/other", &[SDP], &third);
    assert_eq!(large.status, 400, "{}", large.body);
    assert!(
        large.body.contains("3 m-sections; at most 2"),
        "{}",
        large.body
    );
}

#[test]
fn a_session_that_never_connects_is_reaped_and_its_resource_gone() {
    // The ICE timeout governs a session that never connects, not the DTLS one.
    let node = node_with_config("peer_timeout_ms = 1500\ndtls_timeout_ms = 60000\n", &[]);
    let watched = node.request("POST", "/whep/demo", &[SDP], VIEWER_OFFER);
    let whep = watched.header("location").expect("a resource").to_owned();
    let trickle = ("Content-Type", "application/trickle-ice-sdpfrag");
    assert_eq!(
        node.request("PATCH", &whep, &[trickle], "a=mid:0\r\n")
            .status,
        204
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    // Requests every 100 ms keep the loop busy: the sweep still runs.
    while node
        .request("PATCH", &whep, &[trickle], "a=mid:0\r\n")
        .status
        == 204
    {
        assert!(Instant::now() < deadline, "the silent session is reaped");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(node.request("DELETE", &whep, &[], "").status, 404);
    let metrics = node.request("GET", "/metrics", &[], "");
    assert!(
        metrics.body.contains("strata_subscribers 0"),
        "{}",
        metrics.body
    );
    assert!(metrics.body.contains("strata_sessions_connecting 0"));
}

#[test]
fn a_slowloris_of_500_connections_does_not_hold_the_node() {
    // A head timeout that none of the stalled connections reaches within the test, so that
    // the count below is exact.
    let node = node_with_config("http_header_timeout_ms = 30000\n", &[]);
    // One client's: it holds its share (200 by default), the rest are closed as they come.
    let stalled: Vec<TcpStream> = (0..500)
        .map(|_| {
            let mut stream = TcpStream::connect(&node.http).expect("connects");
            // Closed already, past the share: the write may find it so.
            let _ = stream.write_all(b"GET /metrics HTTP/1.1\r\nHo");
            stream
        })
        .collect();
    // Another client is served meanwhile.
    let other = |method, path, headers: &[(&str, &str)], body| {
        let stream = connect_from(&node.http, [127, 0, 0, 2]);
        request_over(stream, &node.http, method, path, headers, body)
    };
    for _ in 0..5 {
        let metrics = other("GET", "/metrics", &[], "");
        assert_eq!(metrics.status, 200);
        assert!(
            metrics
                .body
                .contains("strata_http_connections_refused_total 300"),
            "the slowloris' connections past its share closed"
        );
    }
    assert_eq!(
        other("POST", "/whep/demo", &[SDP], VIEWER_OFFER).status,
        201
    );
    drop(stalled);
}

#[test]
fn slow_and_idle_connections_do_not_hold_the_node() {
    let node = node_with_config(
        "http_header_timeout_ms = 1000\nhttp_idle_timeout_ms = 1000\n[limits]\nhttp_connections = 8\n",
        &[],
    );
    // Twice as many connections as the node takes, each stalled inside its request head.
    let stalled: Vec<TcpStream> = (0..16)
        .map(|_| {
            let mut stream = TcpStream::connect(&node.http).expect("connects");
            stream
                .write_all(b"POST /whip/demo HTTP/1.1\r\nHost: x\r\n")
                .expect("sent");
            stream
        })
        .collect();
    let metrics = node.request("GET", "/metrics", &[], "");
    assert_eq!(
        metrics.status, 200,
        "served once the stalled heads time out"
    );
    for mut stream in stalled {
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("a timeout");
        let mut rest = Vec::new();
        let closed = stream.read_to_end(&mut rest);
        assert!(
            closed.is_ok()
                || closed.is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
            "the node closed the stalled connection"
        );
    }
}

#[test]
fn a_body_that_does_not_arrive_in_time_is_refused() {
    let node = node_with_config("http_body_timeout_ms = 1000\n", &[]);
    let mut stream = TcpStream::connect(&node.http).expect("connects");
    let head = "POST /whip/demo HTTP/1.1\r\nHost: x\r\nContent-Type: application/sdp\r\n\
                Content-Length: 1000\r\n\r\nv=0\r\n";
    stream.write_all(head.as_bytes()).expect("sent");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("a timeout");
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
}

#[test]
fn an_offer_with_more_tracks_than_allowed_is_refused() {
    let node = node_with_config("[limits]\ntracks_per_offer = 1\n", &[]);
    let refused = node.request("POST", "/whip/demo", &[SDP], AV1_OFFER);
    assert_eq!(refused.status, 400);
    assert!(
        refused.body.contains("2 sending m-sections; at most 1"),
        "{}",
        refused.body
    );
    let metrics = node.request("GET", "/metrics", &[], "");
    assert!(
        metrics.body.contains("strata_publishers 0"),
        "nothing published"
    );
}

/// A trickle fragment with the offer's ICE credentials (or none) is taken; one with others
/// restarts ICE on a WHIP or WHEP session (RFC 9725 section 4.3.2): 200 with the node's new
/// credentials, after which the new ones are the session's own. A participant restarts with an
/// offer: its fragment is 422, and the session goes on.
#[test]
fn an_ice_restart_is_answered_with_new_credentials() {
    let node = Node::start(&[]);
    let trickle = ("Content-Type", "application/trickle-ice-sdpfrag");
    let own = "a=ice-ufrag:Wz3v\r\na=ice-pwd:0Yb2ZC1nK7dEJtX6wqVwXbKh\r\nm=audio 9 RTP/AVP 0\r\n\
               a=mid:0\r\na=candidate:1 1 udp 2122260223 192.0.2.1 61764 typ host\r\n";
    let restart = own
        .replace("Wz3v", "N3wU")
        .replace("0Yb2ZC1nK7dEJtX6wqVwXbKh", "aNewPasswordOf24Chars0000");
    for (path, offer) in [("/whip/demo", AV1_OFFER), ("/whep/demo", VIEWER_OFFER)] {
        let created = node.request("POST", path, &[SDP], offer);
        let resource = created.header("location").expect("a resource").to_owned();
        let old_ufrag = attribute(&created.body, "ice-ufrag");
        assert_eq!(
            node.request("PATCH", &resource, &[trickle], own).status,
            204
        );
        let restarted = node.request("PATCH", &resource, &[trickle], &restart);
        assert_eq!(restarted.status, 200, "{resource}: {}", restarted.body);
        assert_eq!(restarted.header("content-type"), Some(trickle.1));
        assert!(
            restarted.body.starts_with("a=ice-lite\r\n"),
            "{}",
            restarted.body
        );
        let new_ufrag = attribute(&restarted.body, "ice-ufrag");
        assert_ne!(new_ufrag, old_ufrag);
        assert!(attribute(&restarted.body, "ice-pwd").len() >= 22);
        let again = node.request("PATCH", &resource, &[trickle], &restart);
        assert_eq!(again.status, 204, "the new credentials are its own now");
        let bad = node.request("PATCH", &resource, &[trickle], "a=ice-ufrag:\r\n");
        assert_eq!(bad.status, 400, "{}", bad.body);
        assert!(bad.body.contains("bad trickle fragment"), "{}", bad.body);
        assert_eq!(node.request("DELETE", &resource, &[], "").status, 200);
    }
    let participant = open(&node, "/rooms/call?name=ada", AV1_OFFER);
    assert_eq!(
        node.request("PATCH", &participant, &[trickle], own).status,
        204
    );
    let refused = node.request("PATCH", &participant, &[trickle], &restart);
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(
        refused.body.contains("with a new offer"),
        "{}",
        refused.body
    );
    let bare = "a=end-of-candidates\r\n";
    assert_eq!(
        node.request("PATCH", &participant, &[trickle], bare).status,
        204,
        "the session goes on"
    );
}

/// The value of `a=<name>:` in an SDP body.
fn attribute(sdp: &str, name: &str) -> String {
    let prefix = format!("a={name}:");
    sdp.lines()
        .find_map(|line| line.trim_end().strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("{prefix} in {sdp}"))
        .to_owned()
}

/// A request without a credential for its room is refused from its head: the node does not
/// wait for (and hold) a body of up to its limit first. Each route that takes a body; the
/// body here never comes, and the node would wait a minute for it.
#[test]
fn a_body_is_not_read_before_its_request_is_authorized() {
    let node = node_with_config(
        "tokens = [\"letmein\"]\nhttp_body_timeout_ms = 60000\n",
        &[],
    );
    for (method, path) in [
        ("POST", "/whip/demo"),
        ("POST", "/whep/demo"),
        ("POST", "/whep/demo/ada"),
        ("POST", "/rooms/call?name=ada"),
        ("PATCH", "/rooms/call/1"),
        ("PATCH", "/whip/demo/1"),
    ] {
        let mut stream = TcpStream::connect(&node.http).expect("connects");
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/sdp\r\n\
             Content-Length: 60000\r\nAuthorization: Bearer guess\r\n\r\nv=0\r\n"
        );
        stream.write_all(head.as_bytes()).expect("sent");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("a timeout");
        let mut reply = [0; 64];
        let read = stream.read(&mut reply).unwrap_or(0);
        let reply = String::from_utf8_lossy(&reply[..read]);
        assert!(
            reply.starts_with("HTTP/1.1 401"),
            "{method} {path}: {reply:?}"
        );
    }
}
