//! The node end to end over loopback UDP, its peers the independent WebRTC client
//! (`benches::client`): ICE, DTLS and SRTP on both sides, media through the node between
//! transports. What one transport sends must reach only its own room's viewers: RTP under an
//! SSRC its session did not announce is dropped and counted, even when another session
//! announced it; two sessions announcing the same SSRC are two streams.
//!
//! The node runs two media workers, and the two rooms of each test are on different ones:
//! each worker reads the shared UDP socket and hands the other's datagrams over.
//!
//! The node runs in this process (`node/mod.rs`).

mod node;

use std::time::{Duration, Instant};

use benches::client::{self, drive_for, drive_until, Client, PublishOptions, Received};
use node::Node;
use sfu::node::config::NodeConfig;
use sfu::node::limits::Limits;
use sfu::node::shard::worker_for_room;

/// Media workers of the node under test.
const WORKERS: usize = 2;
/// ICE, DTLS and signaling on loopback take well under a second; this is for a loaded machine.
const CONNECT: Duration = Duration::from_secs(20);
/// Packets a viewer must see before the stream counts as flowing.
const FLOWING: usize = 20;
/// Frames between key frames, so a viewer that joins late starts within a few frames.
const KEY_EVERY: u16 = 10;
/// Time between two frames of a publisher.
const FRAME: Duration = Duration::from_millis(10);
const UNKNOWN_SSRC: &str = "strata_dropped_total{reason=\"unknown_ssrc\"}";

/// The node under test, with this file's worker count and `limits`.
fn start_node(limits: Limits) -> Node {
    Node::start(WORKERS, limits)
}

fn unknown_ssrc_drops(node: &Node) -> u64 {
    client::metric(node.http, UNKNOWN_SSRC)
        .expect("metrics")
        .expect("the unknown_ssrc series")
}

/// What a packet's body says: which room's publisher wrote it and for what. The node rewrites
/// the VP8 descriptor per viewer, so the body is read from the payload's end.
const BODY_LEN: usize = 4;

fn body(marker: u8, seq: u16) -> [u8; BODY_LEN] {
    let [hi, lo] = seq.to_be_bytes();
    [b'#', marker, hi, lo]
}

fn marker(packet: &Received) -> Option<u8> {
    let tail = packet.payload.len().checked_sub(BODY_LEN)?;
    match packet.payload[tail..] {
        [b'#', marker, _, _] => Some(marker),
        _ => None,
    }
}

fn count(viewer: &Client, wanted: u8) -> usize {
    viewer
        .received()
        .iter()
        .filter(|p| marker(p) == Some(wanted))
        .count()
}

/// A publisher's own stream: the SSRC it announced and the next sequence number.
struct Stream {
    ssrc: u32,
    /// The Opus stream sent beside the video, one packet per frame, when there is one.
    audio_ssrc: Option<u32>,
    seq: u16,
    marker: u8,
}

impl Stream {
    /// A publisher's video and audio, as [`options`] announces them.
    fn new(ssrc: u32, seq: u16, marker: u8) -> Self {
        let audio_ssrc = options(ssrc).audio_ssrc;
        Self {
            ssrc,
            audio_ssrc,
            seq,
            marker,
        }
    }

    /// The next frame, written by `publisher` (not necessarily the one that announced it).
    fn send(&mut self, publisher: &mut Client, marker: u8) {
        let keyframe = self.seq.is_multiple_of(KEY_EVERY);
        let body = body(marker, self.seq);
        publisher.send_vp8(self.ssrc, self.seq, keyframe, &body);
        if let Some(audio) = self.audio_ssrc {
            publisher.send_opus(audio, self.seq, &body);
        }
        self.seq = self.seq.wrapping_add(1);
    }
}

fn options(video_ssrc: u32) -> PublishOptions {
    PublishOptions {
        video_ssrc,
        rtx_ssrc: video_ssrc + 1,
        audio_ssrc: Some(video_ssrc + 2),
    }
}

/// Two rooms, a publisher and a viewer in each, all connected.
fn two_rooms(node: &Node, ssrc_a: u32, ssrc_b: u32) -> [Client; 4] {
    assert_ne!(
        worker_for_room("a", WORKERS),
        worker_for_room("b", WORKERS),
        "the rooms are on different workers"
    );
    let pub_a = Client::publish(node.http, "a", options(ssrc_a)).expect("WHIP a: 201");
    let pub_b = Client::publish(node.http, "b", options(ssrc_b)).expect("WHIP b: 201");
    let view_a = Client::watch(node.http, "a", "").expect("WHEP a: 201");
    let view_b = Client::watch(node.http, "b", "").expect("WHEP b: 201");
    let mut clients = [pub_a, pub_b, view_a, view_b];
    let mut all: Vec<&mut Client> = clients.iter_mut().collect();
    let connected = drive_until(&mut all, CONNECT, |c| c.iter().all(|c| c.is_connected()))
        .expect("the clients run");
    assert!(connected, "ICE and DTLS complete: {all:?}");
    clients
}

/// Both publishers send frames until each viewer has `FLOWING` more of its room's packets.
fn flow(node: &Node, clients: &mut [Client; 4], a: &mut Stream, b: &mut Stream) {
    let [pub_a, pub_b, view_a, view_b] = clients;
    let want_a = count(view_a, a.marker) + FLOWING;
    let want_b = count(view_b, b.marker) + FLOWING;
    let deadline = Instant::now() + CONNECT;
    while count(view_a, a.marker) < want_a || count(view_b, b.marker) < want_b {
        assert!(
            Instant::now() < deadline,
            "each room's stream reaches its viewer: a {} of {want_a}, b {} of {want_b}\n{}",
            count(view_a, a.marker),
            count(view_b, b.marker),
            node.metrics()
        );
        a.send(pub_a, a.marker);
        b.send(pub_b, b.marker);
        drive_for(&mut [pub_a, pub_b, view_a, view_b], FRAME).expect("the clients run");
    }
}

/// Every packet a viewer got is its own room's, under SSRCs of the viewer's own (none its
/// publisher announced), and both its video and its audio came.
fn only_own_room(viewer: &Client, own: u8, publisher_ssrc: u32) {
    let foreign: Vec<_> = viewer
        .received()
        .iter()
        .filter(|p| marker(p) != Some(own))
        .collect();
    assert!(
        foreign.is_empty(),
        "only room {own} reaches it: {foreign:?}"
    );
    let announced = options(publisher_ssrc);
    let announced = [announced.video_ssrc, announced.rtx_ssrc]
        .into_iter()
        .chain(announced.audio_ssrc)
        .collect::<Vec<_>>();
    let rewritten = viewer
        .received()
        .iter()
        .all(|p| !announced.contains(&p.ssrc));
    assert!(rewritten, "the node rewrites the SSRC per viewer");
    let mut ssrcs: Vec<u32> = viewer.received().iter().map(|p| p.ssrc).collect();
    ssrcs.sort_unstable();
    ssrcs.dedup();
    assert!(ssrcs.len() >= 2, "video and audio arrive: {ssrcs:?}");
}

#[test]
fn each_room_gets_its_own_stream_and_a_foreign_ssrc_is_dropped_and_counted() {
    let node = start_node(Limits::default());
    let (ssrc_a, ssrc_b) = (0x0a0a_0000, 0x0b0b_0000);
    let mut clients = two_rooms(&node, ssrc_a, ssrc_b);
    let mut a = Stream::new(ssrc_a, 1000, b'A');
    let mut b = Stream::new(ssrc_b, 5000, b'B');
    flow(&node, &mut clients, &mut a, &mut b);

    // Room a's publisher writes under room b's SSRC, its sequence numbers continuing room b's.
    let dropped = unknown_ssrc_drops(&node);
    assert_eq!(
        dropped, 0,
        "every packet so far was under an announced SSRC"
    );
    const INJECTED: u16 = 25;
    let [pub_a, pub_b, view_a, view_b] = &mut clients;
    let mut forged = Stream {
        audio_ssrc: None,
        ..Stream::new(ssrc_b, b.seq, b'B')
    };
    for _ in 0..INJECTED {
        forged.send(pub_a, b'X');
        let all = &mut [&mut *pub_a, &mut *pub_b, &mut *view_a, &mut *view_b];
        drive_for(all, Duration::from_millis(2)).expect("the clients run");
    }
    let counted = drive_until(&mut [pub_a, pub_b, view_a, view_b], CONNECT, |_| {
        unknown_ssrc_drops(&node) >= dropped + u64::from(INJECTED)
    })
    .expect("the clients run");
    assert!(
        counted,
        "the node counts each forged packet as unknown_ssrc"
    );

    // Room b's own stream goes on from the same sequence numbers: had any forged packet been
    // taken as room b's, these would be duplicates.
    flow(&node, &mut clients, &mut a, &mut b);
    assert_eq!(
        unknown_ssrc_drops(&node),
        dropped + u64::from(INJECTED),
        "exactly the forged packets were dropped as unknown_ssrc"
    );
    let [_, _, view_a, view_b] = &clients;
    for viewer in [view_a, view_b] {
        assert_eq!(count(viewer, b'X'), 0, "no forged packet is forwarded");
    }
    only_own_room(view_a, b'A', ssrc_a);
    only_own_room(view_b, b'B', ssrc_b);
    assert!(count(view_a, b'A') >= 2 * FLOWING && count(view_b, b'B') >= 2 * FLOWING);
}

#[test]
fn one_ssrc_announced_in_two_rooms_is_two_streams() {
    let node = start_node(Limits::default());
    let ssrc = 0x5555_0000;
    let mut clients = two_rooms(&node, ssrc, ssrc);
    let mut a = Stream::new(ssrc, 100, b'A');
    let mut b = Stream::new(ssrc, 100, b'B');
    flow(&node, &mut clients, &mut a, &mut b);
    let [_, _, view_a, view_b] = &clients;
    only_own_room(view_a, b'A', ssrc);
    only_own_room(view_b, b'B', ssrc);
    assert_eq!(
        unknown_ssrc_drops(&node),
        0,
        "each session's packets are its own announced stream"
    );
    for client in clients {
        let role = client.role();
        assert_eq!(client.close().expect("DELETE"), 200, "{role:?} ends");
    }
    let deadline = Instant::now() + CONNECT;
    while client::metric(node.http, "strata_rooms").expect("metrics") != Some(0) {
        assert!(
            Instant::now() < deadline,
            "no room is left: {}",
            node.metrics()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Both publishers send frames for `period`.
fn frames_for(clients: &mut [Client; 4], a: &mut Stream, b: &mut Stream, period: Duration) {
    let [pub_a, pub_b, view_a, view_b] = clients;
    let end = Instant::now() + period;
    while Instant::now() < end {
        a.send(pub_a, a.marker);
        b.send(pub_b, b.marker);
        drive_for(&mut [pub_a, pub_b, view_a, view_b], FRAME).expect("the clients run");
    }
}

#[test]
fn a_keyframe_request_naming_another_transports_ssrc_reaches_no_one() {
    let node = start_node(Limits::default());
    let (ssrc_a, ssrc_b) = (0x0a0a_0000, 0x0b0b_0000);
    let mut clients = two_rooms(&node, ssrc_a, ssrc_b);
    let mut a = Stream::new(ssrc_a, 1000, b'A');
    let mut b = Stream::new(ssrc_b, 5000, b'B');
    flow(&node, &mut clients, &mut a, &mut b);
    // Past the node's least time between two keyframe requests to a stream, so a request it
    // took for room b's publisher would go out at once.
    let interval = Duration::from_millis(NodeConfig::default().keyframe_interval_ms);
    frames_for(&mut clients, &mut a, &mut b, interval + interval / 2);

    let [pub_a, pub_b, view_a, view_b] = &mut clients;
    let seen_by_a = view_a.received()[0].ssrc;
    let seen_by_b = view_b.received()[0].ssrc;
    let (asked_a, asked_b) = (pub_a.keyframe_requests(), pub_b.keyframe_requests());
    // Room a's viewer names room b's stream: as room b's viewer receives it, and as room b's
    // publisher sends it. Then its own, which must reach its own publisher: the request after
    // the others on the same transport, so once it has arrived they have been handled.
    const VIEWER_SSRC: u32 = 1;
    view_a.send_pli(VIEWER_SSRC, seen_by_b);
    view_a.send_pli(VIEWER_SSRC, ssrc_b);
    let all = &mut [&mut *pub_a, &mut *pub_b, &mut *view_a, &mut *view_b];
    drive_for(all, FRAME).expect("the clients run");
    view_a.send_pli(VIEWER_SSRC, seen_by_a);
    let all = &mut [&mut *pub_a, &mut *pub_b, &mut *view_a, &mut *view_b];
    let asked =
        drive_until(all, CONNECT, |c| c[0].keyframe_requests() > asked_a).expect("the clients run");
    assert!(
        asked,
        "a viewer's PLI for its own stream reaches its publisher"
    );
    // Anything the node sent room b's publisher at the same time has landed by now.
    drive_for(all, Duration::from_millis(100)).expect("the clients run");
    assert_eq!(
        pub_b.keyframe_requests(),
        asked_b,
        "a PLI naming another transport's SSRC asks room b's publisher for nothing"
    );
}

/// The node's session limit counts every worker's sessions: with room for three, a fourth
/// session is refused whichever worker its room is on, and one that leaves makes room.
#[test]
fn the_node_wide_session_limit_holds_across_workers() {
    let node = start_node(Limits {
        sessions: 3,
        ..Limits::default()
    });
    let mut clients = Vec::new();
    for (room, ssrc) in [("a", 0x100), ("b", 0x200), ("a", 0x300)] {
        clients.push(Client::publish(node.http, room, options(ssrc)).expect("room for three"));
    }
    for room in ["a", "b"] {
        match Client::publish(node.http, room, options(0x400)) {
            Err(client::ClientError::Refused { status, body }) => {
                assert_eq!(status, 503, "{body}");
                assert!(body.contains("3"), "the limit is named: {body}");
            }
            other => panic!("a fourth session in room {room}: {other:?}"),
        }
    }
    let refused = "strata_sessions_refused_total{reason=\"node_full\"}";
    assert_eq!(
        client::metric(node.http, refused).expect("metrics"),
        Some(2)
    );
    let first = clients.remove(0);
    assert_eq!(first.close().expect("DELETE"), 200);
    Client::publish(node.http, "b", options(0x500)).expect("room again after one left");
}
