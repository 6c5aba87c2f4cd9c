//! ICE over TCP through the `sfu serve` binary: the answer's passive TCP candidate reached on
//! real loopback TCP, a framed binding request answered framed on the same connection, the
//! connection and its session in `/metrics`, and the session gone once the connection closes.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use stun::message::{Message, BINDING_SUCCESS};

use crate::http_node::{Node, SDP};

const VIEWER_OFFER: &str = include_str!("../../src/node/sdp/fixtures/viewer_recvonly.sdp");

/// The value of the answer's first `a=<name>:` line.
fn attribute<'a>(answer: &'a str, name: &str) -> &'a str {
    let prefix = format!("a={name}:");
    answer
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no a={name} in\n{answer}"))
}

/// The value of a `/metrics` sample, by its name and labels as written.
fn sample(node: &Node, series: &str) -> u64 {
    let metrics = node.request("GET", "/metrics", &[], "").body;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{metrics}"))
}

#[test]
fn a_session_binds_over_the_passive_tcp_candidate_and_ends_with_its_connection() {
    let node = Node::start(&[]);
    let watched = node.request("POST", "/whep/demo", &[SDP], VIEWER_OFFER);
    assert_eq!(watched.status, 201);
    let answer = &watched.body;
    let tcp = answer
        .lines()
        .find(|l| l.ends_with("typ host tcptype passive"))
        .unwrap_or_else(|| panic!("no passive TCP candidate in\n{answer}"));
    let fields: Vec<&str> = tcp.split(' ').collect();
    assert_eq!(fields[2], "tcp");
    let port = fields[5];
    let mut connection = TcpStream::connect(format!("127.0.0.1:{port}")).expect("connects");
    connection
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a timeout");
    let username = format!("{}:browser", attribute(answer, "ice-ufrag"));
    let request = sfu::node::ice::binding_request(&username, attribute(answer, "ice-pwd"), true)
        .expect("a request");
    let mut framed = (request.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&request);
    // Written in two pieces: the node reads a frame across reads.
    connection.write_all(&framed[..3]).expect("sent");
    connection.write_all(&framed[3..]).expect("sent");
    let mut length = [0; 2];
    connection.read_exact(&mut length).expect("a framed answer");
    let mut response = Message::new();
    response.raw = vec![0; usize::from(u16::from_be_bytes(length))];
    connection
        .read_exact(&mut response.raw)
        .expect("the answer");
    response.decode().expect("STUN");
    assert_eq!(response.typ, BINDING_SUCCESS);
    assert_eq!(sample(&node, "strata_tcp_connections"), 1);
    let tcp_sessions = "strata_sessions_by_transport{transport=\"tcp\"}";
    assert_eq!(sample(&node, tcp_sessions), 1);
    drop(connection);
    let started = Instant::now();
    while sample(&node, "strata_subscribers") > 0 {
        assert!(started.elapsed() < Duration::from_secs(5), "never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(sample(&node, "strata_tcp_connections"), 0);
    let closed = "strata_tcp_connections_closed_total{reason=\"peer\"}";
    assert_eq!(sample(&node, closed), 1);
}

#[test]
fn an_empty_tcp_setting_offers_no_tcp_candidate() {
    let node = Node::start(&["--tcp", ""]);
    let watched = node.request("POST", "/whep/demo", &[SDP], VIEWER_OFFER);
    assert_eq!(watched.status, 201);
    assert!(!watched.body.contains("tcptype"), "{}", watched.body);
    assert!(!node
        .request("GET", "/metrics", &[], "")
        .body
        .contains("strata_tcp_connections"));
}
