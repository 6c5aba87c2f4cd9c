//! Conference rooms over real HTTP: joining with an offer, offering again, the event stream,
//! the room's state, choices per track, and every bad request refused with its status and
//! reason while nothing else changes.

use crate::http_node;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use http_node::{node_with_config, Node, Reply, SDP};
use serde_json::Value;

const AV1_OFFER: &str = include_str!("../../src/node/sdp/fixtures/publisher_av1.sdp");
const VIEWER_OFFER: &str = include_str!("../../src/node/sdp/fixtures/viewer_recvonly.sdp");
const CHROMIUM_VIEWER: &str =
    include_str!("../../src/node/sdp/fixtures/chromium156_viewer_recvonly.sdp");
const JSON: (&str, &str) = ("Content-Type", "application/json");

/// Chromium's receive-only offer with its audio section and `videos` receiving video sections
/// (each some 5 KiB, with every codec it decodes), as a page in a large room offers; with
/// `audio` true, the audio section (under 1 KiB) is the one repeated instead.
fn large_offer(videos: usize, audio: bool) -> String {
    let text = crlf(CHROMIUM_VIEWER);
    let audio_at = text.find("m=audio").expect("an audio section");
    let video_at = text.find("m=video").expect("a video section");
    let head = &text[..audio_at];
    let (first, repeated) = if audio {
        (&text[video_at..], &text[audio_at..video_at])
    } else {
        (&text[audio_at..video_at], &text[video_at..])
    };
    let first_mid = if audio { "1" } else { "0" };
    let repeated_mid = if audio { "0" } else { "1" };
    let mut offer = head.to_owned() + first;
    let mut mids = vec![first_mid.to_owned()];
    for n in 0..videos {
        let mid = format!("x{n}");
        offer += &repeated.replace(
            &format!("a=mid:{repeated_mid}\r\n"),
            &format!("a=mid:{mid}\r\n"),
        );
        mids.push(mid);
    }
    offer.replace(
        "a=group:BUNDLE 0 1",
        &format!("a=group:BUNDLE {}", mids.join(" ")),
    )
}

fn crlf(sdp: &str) -> String {
    sdp.replace("\r\n", "\n").replace('\n', "\r\n")
}

/// The first event of a participant's stream (the room as it is), read off the raw response.
fn first_event(node: &Node, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut stream = TcpStream::connect(&node.http).expect("connects");
    let mut head = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n", node.http);
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("sent");
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("a timeout");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        if let Ok(n) = stream.read(&mut buf) {
            raw.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&raw);
            let status: u16 = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
            if status != 200 && text.contains("\r\n\r\n") {
                return (status, text.into_owned());
            }
            if let Some(at) = text.find("event: ") {
                if text[at..].contains("\n\n") {
                    return (status, text[at..].to_owned());
                }
            }
            if n == 0 {
                break;
            }
        }
    }
    panic!("no event: {}", String::from_utf8_lossy(&raw));
}

/// The JSON of an event's `data:` line.
fn event_data(event: &str) -> Value {
    let data = event
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .expect("a data line");
    serde_json::from_str(data).expect("JSON")
}

fn etag(reply: &Reply) -> String {
    reply.header("etag").expect("an ETag").to_owned()
}

#[test]
fn participants_join_offer_again_and_follow_their_room() {
    let node = Node::start(&[]);
    let alice = node.request("POST", "/rooms/call?name=alice", &[SDP], AV1_OFFER);
    assert_eq!(alice.status, 201, "{}", alice.body);
    let alice_at = alice.header("location").expect("a resource").to_owned();
    assert!(alice_at.starts_with("/rooms/call/"), "{alice_at}");
    assert_eq!(etag(&alice), "\"1\"");
    assert!(
        alice.body.contains("a=recvonly"),
        "the node receives what alice sends"
    );
    // Her video starts at the node's publisher bitrate, as a WHIP publisher's does.
    let video = alice.body.split("m=video").nth(1).expect("a video section");
    let fmtp = video
        .lines()
        .find(|l| l.starts_with("a=fmtp:"))
        .expect("an fmtp");
    assert!(
        fmtp.contains("x-google-min-bitrate=2500;x-google-start-bitrate=2500"),
        "{fmtp}"
    );

    let bob = node.request("POST", "/rooms/call?name=bob", &[SDP], VIEWER_OFFER);
    assert_eq!(bob.status, 201, "{}", bob.body);
    let bob_at = bob.header("location").expect("a resource").to_owned();
    // Bob's two receiving sections carry alice's audio and video, named after her.
    assert_eq!(bob.body.matches("a=sendonly").count(), 2, "{}", bob.body);
    assert_eq!(bob.body.matches("a=msid:p").count(), 2, "{}", bob.body);
    assert!(
        !bob.body.contains("x-google"),
        "what the node sends is not pinned: {}",
        bob.body
    );

    let state = node.request("GET", "/rooms/call", &[], "");
    assert_eq!(state.status, 200);
    let room: Value = serde_json::from_str(&state.body).expect("JSON");
    let names: Vec<&str> = room["participants"]
        .as_array()
        .expect("participants")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["alice", "bob"]);
    let alices = room["participants"][0]["tracks"]
        .as_array()
        .expect("tracks");
    assert_eq!(alices.len(), 2);
    assert_eq!(room["participants"][1]["receiving"], 2);

    let (status, event) = first_event(&node, &format!("{bob_at}/events"), &[]);
    assert_eq!(status, 200, "{event}");
    assert!(event.starts_with("event: state"), "{event}");
    let data = event_data(&event);
    assert_eq!(
        data["room"]["participants"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(
        data["renegotiate"],
        Value::Null,
        "bob's answer is the room's"
    );

    // Offering again with the last answer's version: answered, version 2.
    let again = node.request(
        "PATCH",
        &bob_at,
        &[SDP, ("If-Match", &etag(&bob))],
        VIEWER_OFFER,
    );
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(etag(&again), "\"2\"");
    assert_eq!(again.body.matches("a=sendonly").count(), 2);

    // A choice for one of alice's tracks; its own or an unknown one is not found.
    let track = alices[1]["id"].as_u64().expect("an id");
    let choice = format!(r#"{{"track":{track},"spatial":0,"paused":false}}"#);
    assert_eq!(node.request("PATCH", &bob_at, &[JSON], &choice).status, 204);
    let unknown = node.request("PATCH", &bob_at, &[JSON], r#"{"track":9999}"#);
    assert_eq!(unknown.status, 404, "{}", unknown.body);
    assert!(unknown.body.contains("no such track"), "{}", unknown.body);
    let own = format!(r#"{{"track":{track}}}"#);
    assert_eq!(node.request("PATCH", &alice_at, &[JSON], &own).status, 404);

    // A WHEP viewer of alice by name, and of a name nobody has.
    let whep = node.request("POST", "/whep/call/alice", &[SDP], VIEWER_OFFER);
    assert_eq!(whep.status, 201, "{}", whep.body);
    assert!(whep.body.contains("AV1/90000"), "alice's codec");
    let nobody = node.request("POST", "/whep/call/carol", &[SDP], VIEWER_OFFER);
    assert_eq!(nobody.status, 404, "{}", nobody.body);
    // A WHIP publisher is a participant of the room that only publishes, named as it asks.
    let cam = node.request("POST", "/whip/call?name=cam", &[SDP], AV1_OFFER);
    assert_eq!(cam.status, 201, "{}", cam.body);
    let named = node.request("POST", "/whep/call/cam", &[SDP], VIEWER_OFFER);
    assert_eq!(named.status, 201, "{}", named.body);
    let room: Value =
        serde_json::from_str(&node.request("GET", "/rooms/call", &[], "").body).expect("JSON");
    let cam_view = room["participants"]
        .as_array()
        .and_then(|all| all.iter().find(|p| p["name"] == "cam"))
        .expect("the WHIP publisher is in the room");
    assert_eq!(cam_view["kind"], "whip");
    assert_eq!(
        node.request("POST", "/whip/call?name=cam", &[SDP], AV1_OFFER)
            .status,
        409,
        "names are unique across participants and publishers"
    );

    assert_eq!(node.request("DELETE", &alice_at, &[], "").status, 200);
    let state = node.request("GET", "/rooms/call", &[], "");
    let room: Value = serde_json::from_str(&state.body).expect("JSON");
    assert_eq!(
        room["participants"].as_array().map(Vec::len),
        Some(2),
        "bob and cam: {room}"
    );
    let metrics = node.request("GET", "/metrics", &[], "");
    assert!(
        metrics.body.contains("strata_participants 1"),
        "{}",
        metrics.body
    );
}

#[test]
fn bad_conference_requests_are_refused_and_change_nothing() {
    let node = node_with_config("[limits]\nparticipants_per_room = 2\n", &[]);
    let alice = node.request("POST", "/rooms/call?name=alice", &[SDP], AV1_OFFER);
    assert_eq!(alice.status, 201, "{}", alice.body);
    let alice_at = alice.header("location").expect("a resource").to_owned();
    let refused = |reply: &Reply, status: u16, reason: &str| {
        assert_eq!(reply.status, status, "{}", reply.body);
        assert!(reply.body.contains(reason), "{reason} in {}", reply.body);
    };
    refused(
        &node.request("POST", "/rooms/call?name=alice", &[SDP], VIEWER_OFFER),
        409,
        "name is taken",
    );
    refused(
        &node.request("POST", "/rooms/call", &[SDP], VIEWER_OFFER),
        400,
        "needs a name",
    );
    // An offer that is not the session's: another mid where the session has mid 1.
    let other = crlf(AV1_OFFER)
        .replace("a=group:BUNDLE 0 1", "a=group:BUNDLE 0 7")
        .replace("a=mid:1", "a=mid:7");
    refused(
        &node.request("PATCH", &alice_at, &[SDP], &other),
        422,
        "m-section 1 is mid 7",
    );
    // An If-Match that names no answer of the session's.
    refused(
        &node.request("PATCH", &alice_at, &[SDP, ("If-Match", "\"7\"")], AV1_OFFER),
        412,
        "If-Match names answer 7",
    );
    refused(
        &node.request("PATCH", &alice_at, &[JSON], r#"{"track":"video"}"#),
        400,
        "expected",
    );
    let bob = node.request("POST", "/rooms/call?name=bob", &[SDP], VIEWER_OFFER);
    assert_eq!(bob.status, 201);
    let full = node.request("POST", "/rooms/call?name=carol", &[SDP], VIEWER_OFFER);
    refused(&full, 503, "maximum of 2 participants");
    assert!(full.header("retry-after").is_some());
    // A WHIP publisher is received by every participant as one is: it takes a place too.
    let whip = node.request("POST", "/whip/call?name=dan", &[SDP], AV1_OFFER);
    refused(&whip, 503, "maximum of 2 participants");
    assert!(whip.header("retry-after").is_some());
    // A WHEP viewer is not a participant: it counts under the room's sessions only.
    let viewer = node.request("POST", "/whep/call", &[SDP], VIEWER_OFFER);
    assert_eq!(viewer.status, 201, "{}", viewer.body);
    assert_eq!(
        node.request(
            "DELETE",
            viewer.header("location").expect("a resource"),
            &[],
            ""
        )
        .status,
        200
    );
    // Nothing changed: alice still answers with her first version's successor.
    let again = node.request("PATCH", &alice_at, &[SDP, ("If-Match", "\"1\"")], AV1_OFFER);
    assert_eq!(again.status, 200, "{}", again.body);
    // New ICE credentials restart ICE: answered with new ones of the node's.
    let restart = crlf(AV1_OFFER).replace("a=ice-ufrag:", "a=ice-ufrag:x");
    let restarted = node.request("PATCH", &alice_at, &[SDP], &restart);
    assert_eq!(restarted.status, 200, "{}", restarted.body);
    let ufrag = |sdp: &str| {
        let line = sdp.lines().find(|l| l.starts_with("a=ice-ufrag:"));
        line.map(str::to_owned)
    };
    assert!(ufrag(&restarted.body).is_some());
    assert_ne!(ufrag(&restarted.body), ufrag(&again.body));
    let state: Value =
        serde_json::from_str(&node.request("GET", "/rooms/call", &[], "").body).expect("JSON");
    assert_eq!(state["participants"].as_array().map(Vec::len), Some(2));
    refused(&node.request("GET", "/rooms/empty", &[], ""), 404, "nobody");
}

#[test]
fn a_large_rooms_offer_is_taken_within_a_participants_limits() {
    let node = Node::start(&[]);
    // 40 receiving sections: some 200 KiB, above a WHEP offer's 64 KiB.
    let offer = large_offer(40, false);
    assert!(offer.len() > 150 * 1024, "{}", offer.len());
    let joined = node.request("POST", "/rooms/big?name=eve", &[SDP], &offer);
    assert_eq!(joined.status, 201, "{}", joined.body);
    assert_eq!(joined.body.matches("a=mid:").count(), 41);
    let too_many = node.request(
        "POST",
        "/rooms/big?name=mallory",
        &[SDP],
        &large_offer(130, true),
    );
    assert_eq!(too_many.status, 400, "{}", too_many.body);
    assert!(too_many.body.contains("at most 128"), "{}", too_many.body);
    // The same offer to WHEP: above its limit.
    let whep = node.request("POST", "/whep/big", &[SDP], &offer);
    assert_eq!(whep.status, 413, "{}", whep.body);
}

#[test]
fn a_participants_resource_and_events_answer_only_its_credential() {
    let node = Node::start(&["--token", "alice", "--token", "bob"]);
    let as_alice = ("Authorization", "Bearer alice");
    let as_bob = ("Authorization", "Bearer bob");
    let alice = node.request(
        "POST",
        "/rooms/call?name=alice",
        &[SDP, as_alice],
        AV1_OFFER,
    );
    assert_eq!(alice.status, 201, "{}", alice.body);
    let alice_at = alice.header("location").expect("a resource").to_owned();
    let events = format!("{alice_at}/events");
    let (status, reply) = first_event(&node, &events, &[as_bob]);
    assert_eq!(status, 403, "{reply}");
    let (status, reply) = first_event(&node, &events, &[]);
    assert_eq!(status, 401, "{reply}");
    let (status, event) = first_event(&node, &events, &[as_alice]);
    assert_eq!(status, 200, "{event}");
    assert!(event.starts_with("event: state"));
    assert_eq!(node.request("DELETE", &alice_at, &[as_bob], "").status, 403);
    assert_eq!(node.request("GET", "/rooms/call", &[], "").status, 401);
    assert_eq!(
        node.request("GET", "/rooms/call", &[as_bob], "").status,
        200
    );
    assert_eq!(
        node.request("DELETE", &alice_at, &[as_alice], "").status,
        200
    );
}

/// A participant whose client never reads its event stream (a 4 KiB receive buffer, nothing
/// read) while the room changes hundreds of times: the node closes the stream at its bound
/// (counted), having handed the connection no more than the node's share (64 KiB), the
/// connection's small send buffer and the client's receive buffer.
#[test]
fn an_event_stream_nobody_reads_is_closed_at_its_bound() {
    // Bob joins and leaves hundreds of times a second, from the one test client.
    let node = node_with_config("[limits]\njoins_per_client_per_second = 0\n", &[]);
    let alice = node.request("POST", "/rooms/churn?name=alice", &[SDP], AV1_OFFER);
    assert_eq!(alice.status, 201, "{}", alice.body);
    let alice_at = alice.header("location").expect("a resource").to_owned();
    let socket =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
    socket.set_recv_buffer_size(4096).expect("a small buffer");
    let address: std::net::SocketAddr = node.http.parse().expect("an address");
    socket.connect(&address.into()).expect("connects");
    let mut stream: TcpStream = socket.into();
    let head = format!(
        "GET {alice_at}/events HTTP/1.1\r\nHost: {}\r\n\r\n",
        node.http
    );
    stream.write_all(head.as_bytes()).expect("sent");
    let behind = |node: &Node| {
        let metrics = node.request("GET", "/metrics", &[], "").body;
        metrics.contains("strata_dropped_total{reason=\"event_stream_behind\"} 1")
    };
    let mut cycles = 0;
    while !behind(&node) {
        assert!(cycles < 500, "the stream was never closed");
        let bob = node.request("POST", "/rooms/churn?name=bob", &[SDP], AV1_OFFER);
        assert_eq!(bob.status, 201, "{}", bob.body);
        let bob_at = bob.header("location").expect("a resource");
        assert_eq!(node.request("DELETE", bob_at, &[], "").status, 200);
        cycles += 1;
    }
    // Everything the connection was handed, read now: it ends, since the stream is closed.
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a timeout");
    let mut received = Vec::new();
    let _ = stream.read_to_end(&mut received);
    let text = String::from_utf8_lossy(&received);
    let events = text.matches("event: ").count();
    assert!(events > 10, "{events} events in {cycles} cycles");
    // The node's share, the connection's kernel buffer (twice the 16 KiB asked), the client's
    // buffer (twice its 4 KiB) and the HTTP server's write queue (16 events at most).
    let bound = (64 + 32 + 8 + 16) << 10;
    assert!(
        received.len() <= bound,
        "{} bytes, {events} events handed to a client that read nothing",
        received.len()
    );
}

/// A participant that offers again and again: past its share of offers a second it gets 429
/// with `Retry-After` (counted), and a little later its next offer is taken.
#[test]
fn offers_past_a_participants_rate_are_refused_until_it_refills() {
    let node = node_with_config("[limits]\noffers_per_second = 3\n", &[]);
    let alice = node.request("POST", "/rooms/rate?name=alice", &[SDP], AV1_OFFER);
    assert_eq!(alice.status, 201, "{}", alice.body);
    let alice_at = alice.header("location").expect("a resource").to_owned();
    let offer = || node.request("PATCH", &alice_at, &[SDP], AV1_OFFER);
    let statuses: Vec<u16> = (0..6).map(|_| offer().status).collect();
    assert_eq!(&statuses[..3], [200, 200, 200], "its burst");
    assert!(statuses[3..].iter().all(|&s| s == 429), "{statuses:?}");
    let refused = offer();
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert!(
        refused.body.contains("more than 3 times a second"),
        "{}",
        refused.body
    );
    let metrics = node.request("GET", "/metrics", &[], "").body;
    assert!(
        metrics.contains("strata_offers_refused_total 4"),
        "{}",
        metrics
    );
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(offer().status, 200, "refilled");
    // Another participant's offers are its own.
    let bob = node.request("POST", "/rooms/rate?name=bob", &[SDP], VIEWER_OFFER);
    let bob_at = bob.header("location").expect("a resource").to_owned();
    assert_eq!(
        node.request("PATCH", &bob_at, &[SDP], VIEWER_OFFER).status,
        200
    );
    // Offers that are not SDP are read too, and count.
    let carol = node.request("POST", "/rooms/rate?name=carol", &[SDP], VIEWER_OFFER);
    let carol_at = carol.header("location").expect("a resource").to_owned();
    for _ in 0..3 {
        let bad = node.request("PATCH", &carol_at, &[SDP], "v=0\r\nnot sdp\r\n");
        assert_eq!(bad.status, 400, "{}", bad.body);
    }
    let next = node.request("PATCH", &carol_at, &[SDP], VIEWER_OFFER);
    assert_eq!(next.status, 429, "{}", next.body);
}

/// Under an idle timeout shorter than the event stream's usual keep-alive, the stream writes
/// its comment line often enough that its connection, quiet otherwise, is not closed.
#[test]
fn an_event_stream_outlives_a_short_idle_timeout() {
    let node = node_with_config("http_idle_timeout_ms = 400\n", &[]);
    let alice = node.request("POST", "/rooms/quiet?name=alice", &[SDP], AV1_OFFER);
    assert_eq!(alice.status, 201, "{}", alice.body);
    let alice_at = alice.header("location").expect("a resource");
    let mut stream = TcpStream::connect(&node.http).expect("connects");
    let head = format!(
        "GET {alice_at}/events HTTP/1.1\r\nHost: {}\r\n\r\n",
        node.http
    );
    stream.write_all(head.as_bytes()).expect("sent");
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("a timeout");
    let start = Instant::now();
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    while start.elapsed() < Duration::from_secs(2) {
        match stream.read(&mut buf) {
            Ok(0) => panic!(
                "closed after {:?}: {}",
                start.elapsed(),
                String::from_utf8_lossy(&raw)
            ),
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    let kept_alive = String::from_utf8_lossy(&raw)
        .matches(": keep-alive")
        .count();
    assert!(kept_alive >= 5, "{kept_alive} comment lines in 2 s");
}
