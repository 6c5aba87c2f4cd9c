//! A viewer over ICE-TCP (RFC 6544, RFC 4571 framing) end to end: the independent WebRTC
//! client connects to the passive candidate of the node's answer and gets the media a UDP
//! publisher sends, as a UDP viewer beside it does; the node counts the session and its bytes
//! on TCP, and ends the session when the connection closes.
//!
//! The node runs two media workers and the room is on the second: a connection's frames
//! reach the worker whose session its first ICE check named.

mod node;

use std::time::{Duration, Instant};

use benches::client::{
    self, drive_for, drive_until, Client, PublishOptions, Transport, VideoCodec,
};
use node::Node;
use sfu::node::limits::Limits;
use sfu::node::shard::worker_for_room;

const WORKERS: usize = 2;
/// ICE, DTLS and signaling on loopback take well under a second; this is for a loaded machine.
const CONNECT: Duration = Duration::from_secs(20);
/// Packets of the publisher each viewer must see.
const FLOWING: usize = 30;
const KEY_EVERY: u16 = 10;
const FRAME: Duration = Duration::from_millis(10);
const BODY: &[u8] = b"#tcp";
const OPTIONS: PublishOptions = PublishOptions {
    video_ssrc: 0x7c70_0000,
    rtx_ssrc: 0x7c70_0001,
    audio_ssrc: Some(0x7c70_0002),
};

fn tcp_sessions(node: &Node) -> Option<u64> {
    client::metric(node.http, "strata_sessions_by_transport{transport=\"tcp\"}").expect("metrics")
}

fn series(node: &Node, series: &str) -> u64 {
    let value = client::metric(node.http, series).expect("metrics");
    value.unwrap_or_else(|| panic!("no {series}:\n{}", node.metrics()))
}

/// Packets `viewer` got of the publisher's stream: its body at the payload's end.
fn got(viewer: &Client) -> usize {
    let ours = |p: &&client::Received| p.payload.ends_with(BODY);
    viewer.received().iter().filter(ours).count()
}

/// A room the second worker holds.
fn room_on_second_worker() -> String {
    let rooms = (0..).map(|i| format!("tcp{i}"));
    let mut on_second = rooms.filter(|r| worker_for_room(r, WORKERS) == 1);
    on_second.next().expect("some room hashes there")
}

#[test]
fn a_viewer_over_tcp_gets_the_media_and_the_node_counts_it_on_tcp() {
    let node = Node::start(WORKERS, Limits::default());
    let room = room_on_second_worker();
    let mut publisher = Client::publish(node.http, &room, OPTIONS).expect("WHIP: 201");
    let over_tcp = Client::watch_over(node.http, &room, "", VideoCodec::Vp8, Transport::Tcp);
    let mut over_tcp = over_tcp.expect("WHEP over TCP: 201");
    let mut over_udp = Client::watch(node.http, &room, "").expect("WHEP over UDP: 201");
    let mut all = [&mut publisher, &mut over_tcp, &mut over_udp];
    let connected = drive_until(&mut all, CONNECT, |c| c.iter().all(|c| c.is_connected()));
    assert!(
        connected.expect("the clients run"),
        "ICE and DTLS complete: {all:?}"
    );

    let deadline = Instant::now() + CONNECT;
    let mut seq = 0u16;
    while got(&over_tcp) < FLOWING || got(&over_udp) < FLOWING {
        assert!(
            Instant::now() < deadline,
            "the stream reaches both viewers: {} over TCP, {} over UDP\n{}",
            got(&over_tcp),
            got(&over_udp),
            node.metrics()
        );
        publisher.send_vp8(OPTIONS.video_ssrc, seq, seq.is_multiple_of(KEY_EVERY), BODY);
        if let Some(audio) = OPTIONS.audio_ssrc {
            publisher.send_opus(audio, seq, BODY);
        }
        seq = seq.wrapping_add(1);
        let mut all = [&mut publisher, &mut over_tcp, &mut over_udp];
        drive_for(&mut all, FRAME).expect("the clients run");
    }
    let mut ssrcs: Vec<u32> = over_tcp.received().iter().map(|p| p.ssrc).collect();
    ssrcs.sort_unstable();
    ssrcs.dedup();
    assert_eq!(ssrcs.len(), 2, "video and audio over TCP: {ssrcs:?}");

    assert_eq!(tcp_sessions(&node), Some(1), "{}", node.metrics());
    let udp = "strata_sessions_by_transport{transport=\"udp\"}";
    assert_eq!(series(&node, udp), 2, "the publisher and the UDP viewer");
    assert_eq!(series(&node, "strata_tcp_connections"), 1);
    // At least the packets the viewer got, whole, went out on TCP.
    let sent = "strata_transport_bytes_total{transport=\"tcp\",direction=\"out\"}";
    let least = over_tcp
        .received()
        .iter()
        .map(|p| p.payload.len() as u64)
        .sum::<u64>();
    assert!(series(&node, sent) >= least, "{}", node.metrics());
    let received = "strata_transport_bytes_total{transport=\"tcp\",direction=\"in\"}";
    assert!(series(&node, received) > 0, "the viewer's checks and RTCP");

    // The connection closing (no DELETE) ends the session at once.
    drop(over_tcp);
    let deadline = Instant::now() + CONNECT;
    while tcp_sessions(&node) != Some(0) || series(&node, "strata_tcp_connections") != 0 {
        assert!(
            Instant::now() < deadline,
            "the session ends\n{}",
            node.metrics()
        );
        drive_for(&mut [&mut publisher, &mut over_udp], FRAME).expect("the clients run");
    }
    assert_eq!(series(&node, udp), 2, "the others stay");
}
