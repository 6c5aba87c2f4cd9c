//! The `sfu serve` binary over real HTTP and a real UDP socket, without a browser: WHIP and WHEP
//! sessions from SDP offers, layer changes, resources ending, CORS, tokens, bad input, metrics,
//! and a graceful stop on SIGTERM. (Media end to end is the browser test's part.)

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const AV1_OFFER: &str = include_str!("../src/node/sdp/fixtures/publisher_av1.sdp");
const VIEWER_OFFER: &str = include_str!("../src/node/sdp/fixtures/viewer_recvonly.sdp");
const GSTREAMER_H264: &str = include_str!("../src/node/sdp/fixtures/gstreamer_h264.sdp");
const GSTREAMER_BEFORE_CAPS: &str =
    include_str!("../src/node/sdp/fixtures/gstreamer_before_caps.sdp");

struct Node {
    child: Child,
    http: String,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("bound").port()
}

fn free_udp_port() -> u16 {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("a free port");
    socket.local_addr().expect("bound").port()
}

impl Node {
    fn start(extra: &[&str]) -> Self {
        let http = format!("127.0.0.1:{}", free_port());
        let udp = format!("127.0.0.1:{}", free_udp_port());
        let child = Command::new(env!("CARGO_BIN_EXE_sfu"))
            .args(["serve", "--http", &http, "--udp", &udp, "--log", "warn"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the sfu binary starts");
        let node = Self { child, http };
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(&node.http).is_err() {
            assert!(Instant::now() < deadline, "the node listens");
            std::thread::sleep(Duration::from_millis(20));
        }
        node
    }

    /// One HTTP/1.1 request; the status, the lowercased headers and the body.
    fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut stream = TcpStream::connect(&self.http).expect("connects");
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.http,
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).expect("sent");
        stream.write_all(body.as_bytes()).expect("sent");
        let mut raw = String::new();
        stream.read_to_string(&mut raw).expect("a reply");
        Reply::parse(&raw)
    }
}

#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn parse(raw: &str) -> Self {
        let (head, body) = raw.split_once("\r\n\r\n").expect("a head");
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .expect("a status line");
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_lowercase(), v.trim().to_owned()))
            .collect();
        Self {
            status,
            headers,
            body: body.to_owned(),
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

const SDP: (&str, &str) = ("Content-Type", "application/sdp");

#[test]
fn whip_and_whep_sessions_over_http() {
    let node = Node::start(&[]);
    let published = node.request("POST", "/whip/demo", &[SDP], AV1_OFFER);
    assert_eq!(published.status, 201, "{}", published.body);
    assert_eq!(published.header("content-type"), Some("application/sdp"));
    let whip = published.header("location").expect("a resource").to_owned();
    assert!(whip.starts_with("/whip/demo/"), "{whip}");
    for line in ["a=ice-lite", "a=setup:passive", "a=recvonly", "typ host"] {
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
    // At session level and in both sections.
    assert_eq!(
        x264.body.matches("a=fingerprint:").count(),
        3,
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
    assert_eq!(again.status, 409, "the same SSRCs published twice");
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
