//! What one client may hold of the node's shared places, through the node's HTTP side: its
//! sessions and handshakes, the sessions it opens a second, its HTTP connections; an IPv6
//! host counted as its /64 in each.

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::http_node::{metric, metric_from, node_with_config, Node, SDP};

const VIEWER_OFFER: &str = include_str!("../../src/node/sdp/fixtures/viewer_recvonly.sdp");

/// A node behind a trusted proxy at 127.0.0.1 (so a test names its clients) with these limits.
fn behind_proxy(limits: &str) -> Node {
    node_with_config(
        &format!("trusted_proxies = [\"127.0.0.1\"]\n[limits]\n{limits}"),
        &[],
    )
}

/// A viewer's offer from `client` (forwarded by the proxy): the reply's status and body.
fn watch(node: &Node, client: &str, offer: &str) -> (u16, String, Option<String>) {
    let headers = [SDP, ("X-Forwarded-For", client)];
    let reply = node.request("POST", "/whep/demo", &headers, offer);
    let retry = reply.header("retry-after").map(str::to_owned);
    (reply.status, reply.body, retry)
}

fn refused(node: &Node, reason: &str) -> Option<u64> {
    let series = format!("strata_sessions_refused_total{{reason=\"{reason}\"}}");
    metric(&node.http, &series)
}

#[test]
fn an_ipv6_host_is_one_client_whichever_of_its_addresses_it_uses() {
    let node = behind_proxy("sessions_per_client = 1\n");
    assert_eq!(watch(&node, "2001:db8:1:2::1", VIEWER_OFFER).0, 201);
    let (status, body, _) = watch(&node, "2001:db8:1:2:aaaa:bbbb:cccc:dddd", VIEWER_OFFER);
    assert_eq!(
        (status, body.trim()),
        (429, "this client has its maximum of 1 sessions")
    );
    assert_eq!(
        watch(&node, "2001:db8:1:3::1", VIEWER_OFFER).0,
        201,
        "the next /64 is another client"
    );
    assert_eq!(watch(&node, "::ffff:192.0.2.1", VIEWER_OFFER).0, 201);
    assert_eq!(
        watch(&node, "192.0.2.1", VIEWER_OFFER).0,
        429,
        "the same IPv4 client"
    );
    assert_eq!(refused(&node, "client_full"), Some(2));
}

#[test]
fn a_client_holds_at_most_its_share_of_the_handshakes() {
    let node = behind_proxy("handshakes = 10\nhandshakes_per_client = 2\n");
    // Sessions whose ICE never starts: each holds a handshake place until its timeout.
    for _ in 0..2 {
        assert_eq!(watch(&node, "198.51.100.1", VIEWER_OFFER).0, 201);
    }
    let (status, body, retry) = watch(&node, "198.51.100.1", VIEWER_OFFER);
    assert_eq!(status, 429, "{body}");
    assert_eq!(
        body.trim(),
        "this client has 2 sessions connecting already; try again shortly"
    );
    assert_eq!(retry.as_deref(), Some("2"));
    assert_eq!(
        watch(&node, "198.51.100.2", VIEWER_OFFER).0,
        201,
        "another client's place"
    );
    assert_eq!(refused(&node, "client_handshakes"), Some(1));
}

#[test]
fn a_client_opening_sessions_past_its_rate_is_refused_before_its_offer_is_read() {
    let node = behind_proxy("joins_per_client_per_second = 2\n");
    for _ in 0..2 {
        assert_eq!(watch(&node, "198.51.100.1", VIEWER_OFFER).0, 201);
    }
    // Not an offer at all: refused for the rate, as its offer is never read.
    let (status, body, retry) = watch(&node, "198.51.100.1", "not an offer");
    assert_eq!(status, 429, "{body}");
    assert_eq!(
        body.trim(),
        "this client opens more than 2 sessions a second; try again shortly"
    );
    assert_eq!(retry.as_deref(), Some("1"));
    assert_eq!(
        watch(&node, "198.51.100.2", VIEWER_OFFER).0,
        201,
        "another client's rate"
    );
    assert_eq!(refused(&node, "client_rate"), Some(1));
    // A token comes back every half second.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(watch(&node, "198.51.100.1", VIEWER_OFFER).0, 201);
}

/// Whether the node closes a connection it just accepted without a request: what it does to
/// a connection past its client's share. A served one stays open (and times out its head
/// later than this waits).
fn closed_at_once(stream: &mut TcpStream) -> bool {
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .expect("a timeout");
    matches!(stream.read(&mut [0; 16]), Ok(0))
}

#[test]
fn a_client_holds_at_most_its_share_of_http_connections_and_a_proxy_any() {
    let node = node_with_config("[limits]\nhttp_connections_per_client = 2\n", &[]);
    let mut held: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(&node.http).expect("connects"))
        .collect();
    let mut third = TcpStream::connect(&node.http).expect("the kernel accepts");
    assert!(closed_at_once(&mut third), "the client holds its two");
    assert!(!closed_at_once(&mut held[0]), "those held are served");
    // The refusal counted, as another client reads it: this one's every connection counts.
    let series = "strata_http_connections_refused_total";
    let deadline = Instant::now() + Duration::from_secs(5);
    while metric_from(&node.http, [127, 0, 0, 2], series) != Some(1) {
        assert!(Instant::now() < deadline, "{series} never became 1");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Given back: served again once the node has seen the connection close (a connection
    // made before that is still one too many, and closed at once).
    held.pop();
    let deadline = Instant::now() + Duration::from_secs(5);
    while closed_at_once(&mut TcpStream::connect(&node.http).expect("connects")) {
        assert!(
            Instant::now() < deadline,
            "the connection given back stays counted"
        );
    }

    let proxied = node_with_config(
        "trusted_proxies = [\"127.0.0.1\"]\n[limits]\nhttp_connections_per_client = 1\n",
        &[],
    );
    let mut through: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(&proxied.http).expect("connects"))
        .collect();
    assert!(
        through.iter_mut().all(|s| !closed_at_once(s)),
        "a trusted proxy's connections carry many clients'"
    );
}
