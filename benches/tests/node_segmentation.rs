//! The node's UDP segmentation (`udp_gso`) end to end over loopback, its peers the independent
//! WebRTC client: a publisher sends bursts of equal packets, as a frame is, and two viewers
//! must get every packet whole and in order whether the node sends a viewer's run as one
//! segmented message or one datagram a message. The node runs in this process (`node/mod.rs`).

// The harness shared with the other node tests; this one starts its node from a whole
// configuration, not from workers and limits.
#[allow(dead_code)]
mod node;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use benches::client::{self, drive_for, drive_until, Client, PublishOptions};
use node::Node;
use sfu::node::config::NodeConfig;

/// ICE, DTLS and signaling on loopback take well under a second; this is for a loaded machine.
const CONNECT: Duration = Duration::from_secs(20);
/// Packets of one burst, sent back to back, all of one size.
const BURST: u16 = 16;
/// Bursts each viewer must have whole before the counters are read.
const BURSTS: u16 = 20;
/// Bytes of each packet's body after its VP8 descriptor.
const BODY: usize = 900;
const VIDEO_SSRC: u32 = 0x5e9_0001;

/// The body of packet `seq`: its number, then its low byte repeated, so a cut or a mix-up of
/// two packets shows.
fn body(seq: u16) -> Vec<u8> {
    let [hi, lo] = seq.to_be_bytes();
    let mut body = vec![lo; BODY];
    body[..2].copy_from_slice(&[hi, lo]);
    body
}

/// The packet number a viewer's packet carries, when its body is whole.
fn whole(payload: &[u8]) -> Option<u16> {
    let tail = payload.get(payload.len().checked_sub(BODY)?..)?;
    let seq = u16::from_be_bytes([tail[0], tail[1]]);
    (tail == body(seq)).then_some(seq)
}

/// The node's send counters: datagrams, messages, datagrams in segmented messages.
fn counters(node: &Node) -> (u64, u64, u64) {
    let value = |series| {
        client::metric(node.http, series)
            .expect("metrics")
            .unwrap_or_else(|| panic!("{series}"))
    };
    (
        value("strata_datagrams_out_total"),
        value("strata_udp_send_messages_total"),
        value("strata_udp_gso_datagrams_total"),
    )
}

/// A publisher and two viewers on a node with `udp_gso`: bursts go out until each viewer has
/// [`BURSTS`] of them (and, when `until_segmented`, until the node sent a run segmented);
/// each viewer must have every packet from its first on, whole and in order. The node's
/// counters then.
fn bursts_through(udp_gso: bool, until_segmented: bool) -> (u64, u64, u64) {
    let node = Node::start_with(NodeConfig {
        workers: 1,
        udp_gso,
        ..NodeConfig::default()
    });
    let options = PublishOptions {
        video_ssrc: VIDEO_SSRC,
        rtx_ssrc: VIDEO_SSRC + 1,
        audio_ssrc: None,
    };
    let publisher = Client::publish(node.http, "gso", options).expect("WHIP: 201");
    let first = Client::watch(node.http, "gso", "").expect("WHEP: 201");
    let second = Client::watch(node.http, "gso", "").expect("WHEP: 201");
    let mut clients = [publisher, first, second];
    let mut all: Vec<&mut Client> = clients.iter_mut().collect();
    let connected = drive_until(&mut all, CONNECT, |c| c.iter().all(|c| c.is_connected()))
        .expect("the clients run");
    assert!(connected, "ICE and DTLS complete: {all:?}");
    let [publisher, first, second] = &mut clients;
    let mut seq = 0u16;
    let deadline = Instant::now() + CONNECT;
    let got = |viewer: &Client| {
        viewer
            .received()
            .iter()
            .filter_map(|p| whole(&p.payload))
            .count()
    };
    loop {
        let enough = [&*first, &*second]
            .into_iter()
            .all(|v| got(v) >= usize::from(BURSTS * BURST));
        if enough && (!until_segmented || counters(&node).2 > 0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "bursts reach the viewers:\n{}",
            node.metrics()
        );
        for _ in 0..BURST {
            publisher.send_vp8(VIDEO_SSRC, seq, seq == 0, &body(seq));
            seq = seq.wrapping_add(1);
        }
        drive_for(
            &mut [&mut *publisher, &mut *first, &mut *second],
            Duration::from_millis(20),
        )
        .expect("the clients run");
    }
    drive_for(
        &mut [&mut *publisher, &mut *first, &mut *second],
        Duration::from_millis(100),
    )
    .expect("the clients run");
    for viewer in [&*first, &*second] {
        let seqs: Vec<u16> = viewer
            .received()
            .iter()
            .filter_map(|p| whole(&p.payload))
            .collect();
        let from = *seqs.first().expect("packets");
        let expected: Vec<u16> = (from..seq).collect();
        assert_eq!(
            seqs, expected,
            "every packet from the first, whole, in order"
        );
        let bodies = viewer.received().iter().filter(|p| p.payload.len() >= BODY);
        let distinct: BTreeSet<u16> = bodies.filter_map(|p| whole(&p.payload)).collect();
        assert_eq!(distinct.len(), seqs.len(), "none twice");
    }
    counters(&node)
}

#[test]
fn with_segmentation_off_each_datagram_is_a_message_and_every_packet_arrives() {
    let (datagrams, messages, segmented) = bursts_through(false, false);
    assert!(
        datagrams >= u64::from(2 * BURSTS * BURST),
        "{datagrams} sent"
    );
    assert_eq!(segmented, 0);
    assert_eq!(messages, datagrams, "one a message");
}

#[test]
fn with_segmentation_on_a_viewers_burst_leaves_in_fewer_messages_and_arrives_whole() {
    let (datagrams, messages, segmented) = bursts_through(true, true);
    assert!(segmented > 0, "some runs left segmented");
    // Each segmented message holds at least two of the segmented datagrams.
    assert!(
        messages < datagrams,
        "{messages} messages for {datagrams} datagrams"
    );
    assert!(
        messages > datagrams - segmented,
        "{messages} {datagrams} {segmented}"
    );
    assert!(
        messages <= datagrams - segmented / 2,
        "{messages} {datagrams} {segmented}"
    );
}
