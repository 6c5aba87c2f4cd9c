use std::time::Duration;

use rtp_ext::codec::Codec;
use selector::LayerLimits;

use super::*;
use crate::engine::{DownTrackConfig, TrackConfig};
use crate::sim::{Bottleneck, QueueLimit};

const PUBLISHED: u32 = 0x1111;
const SENT_AS: u32 = 0x2222;

/// Opus packet `seq` of the published SSRC: 20 ms frames, a payload of `size` bytes.
fn opus(seq: u16, size: usize) -> Bytes {
    let mut packet = vec![0x80, 111];
    packet.extend_from_slice(&seq.to_be_bytes());
    packet.extend_from_slice(&(u32::from(seq) * 960).to_be_bytes());
    packet.extend_from_slice(&PUBLISHED.to_be_bytes());
    packet.resize(12 + size, 0xF8);
    Bytes::from(packet)
}

/// A network with a publisher of one Opus track and a viewer subscribed to it.
fn call(up: LinkConfig, down: LinkConfig) -> (Network, TransportId, TransportId) {
    let mut network = Network::new(RouterConfig::default(), Instant::now(), 1);
    let publisher = network.add_transport(up, LinkConfig::default());
    let viewer = network.add_transport(LinkConfig::default(), down);
    network.with_router(|router| {
        let track = router
            .publish(publisher, TrackConfig::single(Codec::Opus, PUBLISHED))
            .expect("a fresh transport");
        router
            .subscribe(
                viewer,
                track,
                DownTrackConfig::new(SENT_AS, 111),
                LayerLimits::default(),
            )
            .expect("a fresh transport");
    });
    (network, publisher, viewer)
}

/// `count` packets of `size` bytes from the publisher, `every` apart from now on.
fn schedule(
    network: &mut Network,
    publisher: TransportId,
    count: u16,
    every: Duration,
    size: usize,
) {
    let start = network.now();
    for seq in 0..count {
        let at = start + every * u32::from(seq);
        network
            .send_rtp_at(at, publisher, opus(seq, size))
            .expect("on the network");
    }
}

fn media_times(arrivals: &[Arrival]) -> Vec<Instant> {
    arrivals
        .iter()
        .filter(|a| matches!(a.delivery, Delivery::Media { .. }))
        .map(|a| a.at)
        .collect()
}

#[test]
fn time_jumps_to_the_router_timeout() {
    let (mut network, publisher, _) = call(LinkConfig::default(), LinkConfig::default());
    let start = network.now();
    network
        .send_rtp(publisher, opus(1, 80))
        .expect("on the network");
    let end = start + Duration::from_secs(10);
    loop {
        let due = network.router().poll_timeout();
        let timeouts = network.counters().timeouts;
        if !network.step(end) {
            break;
        }
        // The first timeout is raised by the packet, at its arrival.
        if let Some(due) = due {
            assert!(network.now() <= due, "never past a timeout");
            if network.counters().timeouts > timeouts {
                assert_eq!(network.now(), due, "handled at the instant reported");
            }
        }
    }
    assert_eq!(network.now(), end);
    let counters = network.counters();
    // A report a second (and the first at the packet): a dozen steps, not 10,000 ticks.
    assert!(counters.steps <= 20, "{counters:?}");
    assert!(counters.timeouts >= 10, "{counters:?}");
    assert_eq!(counters.stale_timeouts, 0);
}

#[test]
fn outputs_arrive_after_their_link_and_refusals_are_kept() {
    let delay = Duration::from_millis(40);
    let (mut network, publisher, viewer) =
        call(LinkConfig::delayed(delay), LinkConfig::delayed(delay));
    let start = network.now();
    schedule(&mut network, publisher, 5, Duration::from_millis(20), 80);
    let mut stranger = opus(9, 80).to_vec();
    stranger[8..12].copy_from_slice(&0x7777u32.to_be_bytes());
    network
        .send_rtp(publisher, Bytes::from(stranger))
        .expect("on the network");
    network.run_until(start + Duration::from_millis(500));
    let arrivals = network.take_arrivals(viewer);
    let expected: Vec<Instant> = (0..5u32)
        .map(|i| start + Duration::from_millis(20) * i + 2 * delay)
        .collect();
    assert_eq!(media_times(&arrivals), expected);
    let Some(Delivery::Media { packet, .. }) = arrivals.first().map(|a| &a.delivery) else {
        panic!("media first: {arrivals:?}");
    };
    assert_eq!(
        &packet[8..12],
        &SENT_AS.to_be_bytes(),
        "the subscriber's SSRC"
    );
    assert_eq!(
        network.take_refused(),
        [Refusal::Rtp {
            at: start + delay,
            transport: publisher,
            error: ReceiveError::UnknownSsrc
        }]
    );
    let reports = network
        .take_arrivals(publisher)
        .into_iter()
        .filter(|a| matches!(a.delivery, Delivery::Rtcp { .. }))
        .count();
    assert!(reports >= 1, "receiver reports reach the publisher");
    assert!(
        network.take_arrivals(viewer).is_empty(),
        "taken once, in order"
    );
    assert_eq!(
        network.send_rtp(TransportId(999), opus(1, 80)),
        Err(SimError::UnknownTransport)
    );
}

#[test]
fn a_bottleneck_on_a_viewer_downlink_spaces_its_arrivals() {
    // 1000-byte packets (1012 with the header) at 1 Mbit/s: 8.096 ms each; sent every 5 ms,
    // they queue until the 4000-byte queue is full, then some are dropped.
    let down = LinkConfig {
        delay: Duration::from_millis(10),
        bottleneck: Some(Bottleneck::new(1_000_000, QueueLimit::Bytes(4_000))),
        ..LinkConfig::default()
    };
    let (mut network, publisher, viewer) = call(LinkConfig::default(), down);
    let start = network.now();
    schedule(&mut network, publisher, 40, Duration::from_millis(5), 1000);
    // Past the sender report at 1 s: nothing is in flight.
    network.run_until(start + Duration::from_millis(1500));
    let times = media_times(&network.take_arrivals(viewer));
    assert_eq!(times[0], start + Duration::from_micros(18_096));
    for pair in times.windows(2) {
        assert!(
            pair[1] - pair[0] >= Duration::from_micros(8_096),
            "{pair:?}"
        );
    }
    let counters = network
        .link_counters(viewer, Direction::Down)
        .expect("on the network");
    assert!(counters.queue_dropped > 5, "{counters:?}");
    assert_eq!(counters.sent, counters.delivered + counters.queue_dropped);
}

/// A viewer's PLI reaches the router written as a peer writes it; its media reads back by
/// header; once its transport is removed, nothing more is sent to it.
#[test]
fn a_peer_writes_feedback_reads_media_and_leaves() {
    use crate::engine::rtcp::{Pli, RtcpFeedback};

    let (mut network, publisher, viewer) = call(LinkConfig::default(), LinkConfig::default());
    network
        .send_rtp(publisher, opus(1, 80))
        .expect("on the network");
    let pli = RtcpFeedback::Pli(Pli {
        sender_ssrc: 9,
        media_ssrc: SENT_AS,
    });
    network.send_feedback(viewer, &pli).expect("on the network");
    network.run_until(network.now());
    assert_eq!(network.take_refused(), []);
    assert_eq!(network.router().counters().rtcp_in, 1);
    let media = network.take_media(viewer);
    assert_eq!(media.len(), 1);
    assert_eq!((media[0].ssrc, media[0].len), (SENT_AS, 12 + 80));
    assert!(!media[0].retransmission);

    network.remove_transport(viewer).expect("on the network");
    assert_eq!(network.take_arrivals(viewer), []);
    assert_eq!(
        network.send_rtcp(viewer, Bytes::new()),
        Err(SimError::UnknownTransport)
    );
    network
        .send_rtp(publisher, opus(2, 80))
        .expect("on the network");
    network.run_until(network.now() + Duration::from_secs(2));
    assert_eq!(
        network.counters().unrouted,
        0,
        "nothing for the removed viewer"
    );
    assert_eq!(
        network.remove_transport(viewer),
        Err(RouterError::UnknownTransport)
    );
}
