//! Transport-wide CC toward viewers, end to end in the engine over the simulated network:
//! every packet to a viewer that negotiated it carries the transport's sequence number, the
//! viewer's feedback (written here from what arrived, as a browser does every 100 ms) is
//! matched to what was sent, and the estimate moves the viewer's layers to fit its link.
//! A viewer behind a narrow link settles at the layer that fits; a viewer beside it on a wide
//! link of the same publisher keeps the top layer.

use crate::twcc_viewer;

use std::time::{Duration, Instant};

use bytes::Bytes;
use selector::scalability::{GeneratorConfig, StreamGenerator};
use selector::Layer;
use sfu::engine::{Event, RouterConfig, TransportId};
use sfu::sim::{Bottleneck, Direction, LinkConfig, Network, QueueLimit};
use twcc_viewer::{publish_l3t3, subscribe, Viewer, DD_EXT, FEEDBACK_INTERVAL};

const FRAME: Duration = Duration::from_millis(33);
/// Filler appended to each generated packet, for a stream of about a megabit and a half.
const FILLER: usize = 900;

/// Starting below the narrow link, the narrow viewer climbs to what it carries.
#[test]
fn each_viewer_settles_at_the_layers_its_own_link_carries() {
    settle(1_000_000);
}

/// Starting above it, the narrow viewer's link overflows at first, the estimate falls below
/// what the link carries, and a probe cluster finds the room again.
#[test]
fn from_above_the_link_a_probe_finds_the_layers_it_carries() {
    let probes = settle(3_000_000);
    assert!(probes > 0, "probe clusters sent");
}

/// Streams to a wide and a narrow viewer from `initial_bps`; returns the probe clusters sent.
fn settle(initial_bps: u64) -> u64 {
    let start = Instant::now();
    let config = RouterConfig {
        initial_estimate_bps: initial_bps,
        ..RouterConfig::default()
    };
    let mut net = Network::new(config, start, 7);
    let (publisher, track, mut generator) = publish_l3t3(
        &mut net,
        GeneratorConfig {
            keyframe_interval_tus: 90,
            ..GeneratorConfig::default()
        },
    );
    let wide = LinkConfig::delayed(Duration::from_millis(25));
    let mut viewers = vec![subscribe(&mut net, track, uplink(), wide, 0x10)];
    // Three seconds to measure the layers, then a second viewer behind a link that carries
    // the middle layer but not the top one.
    let mut narrow_rate;
    let mut unit = 0u32;
    let mut next_feedback = start + FEEDBACK_INTERVAL;
    let mut estimates = Vec::new();
    let mut dropped_at_20s = 0;
    while unit < 30 * 30 {
        let at = start + FRAME * unit;
        if unit == 90 {
            let rates = net.router().layer_bitrates(track, at).expect("published");
            let (mid, top) = (rates.bps(Layer::new(1, 2)), rates.bps(Layer::new(2, 2)));
            assert!(mid * 5 / 4 < top, "the layers are apart: {mid} and {top}");
            narrow_rate = (mid + top) / 2;
            let narrow = LinkConfig {
                bottleneck: Some(Bottleneck::new(
                    narrow_rate,
                    QueueLimit::Delay(Duration::from_millis(300)),
                )),
                ..LinkConfig::delayed(Duration::from_millis(25))
            };
            viewers.push(subscribe(&mut net, track, uplink(), narrow, 0x20));
        }
        send_temporal_unit(&mut net, publisher, &mut generator, at);
        unit += 1;
        let until = start + FRAME * unit;
        while next_feedback <= until {
            net.run_until(next_feedback);
            for viewer in &mut viewers {
                viewer.report(&mut net, start);
            }
            next_feedback += FEEDBACK_INTERVAL;
        }
        net.run_until(until);
        if unit == 20 * 30 {
            let counters = net.link_counters(viewers[1].transport, Direction::Down);
            dropped_at_20s = counters.expect("a transport of the network").queue_dropped;
        }
        for (at, event) in net.take_events() {
            if let Event::BandwidthEstimate {
                transport,
                bitrate_bps,
            } = event
            {
                estimates.push((at, transport, bitrate_bps));
            }
        }
    }
    let (wide, narrow) = (viewers[0].transport, viewers[1].transport);
    let last = |t: TransportId| {
        estimates
            .iter()
            .rev()
            .find(|e| e.1 == t)
            .map(|e| e.2)
            .expect("an estimate")
    };
    let from_feedback = estimates.iter().filter(|e| e.1 == narrow).count();
    assert!(
        from_feedback >= 10,
        "{from_feedback} estimates from its feedback"
    );
    // Settled: after 20 s the narrow link's queue drops nothing more (the top layer, which
    // allocation keeps from it, would overflow it).
    let dropped = net
        .link_counters(narrow, Direction::Down)
        .expect("a transport of the network")
        .queue_dropped;
    assert_eq!(dropped, dropped_at_20s, "nothing dropped once settled");
    let layer = |t: TransportId| {
        let router = net.router();
        let id = router
            .subscribers(track)
            .iter()
            .copied()
            .find(|&d| router.down_track_info(d).map(|i| i.transport) == Some(t))
            .expect("subscribed");
        router.down_track_info(id).and_then(|i| i.layer)
    };
    assert_eq!(
        layer(narrow),
        Some(Layer::new(1, 2)),
        "the layer its link carries"
    );
    assert_eq!(
        layer(wide),
        Some(Layer::new(2, 2)),
        "the wide viewer keeps the top"
    );
    assert!(
        last(wide) > last(narrow),
        "each viewer's estimate is its own"
    );
    net.router().counters().probe_clusters
}

/// Until a viewer's first feedback nothing would measure a probe cluster, so none is sent;
/// after it, a viewer held below what it asked for is probed.
#[test]
fn no_probe_before_the_first_feedback() {
    let start = Instant::now();
    let mut net = Network::new(RouterConfig::default(), start, 11);
    let (publisher, track, mut generator) = publish_l3t3(
        &mut net,
        GeneratorConfig {
            keyframe_interval_tus: 30,
            ..GeneratorConfig::default()
        },
    );
    // The publisher is live when the viewer joins.
    send_temporal_unit(&mut net, publisher, &mut generator, start);
    net.run_until(start + FRAME / 2);
    let down = LinkConfig::delayed(Duration::from_millis(25));
    let mut viewer = subscribe(&mut net, track, uplink(), down, 0x10);
    let clusters = |net: &Network| net.router().counters().probe_clusters;
    let mut unit = 1;
    let mut stream_until = |net: &mut Network, viewer: &mut Option<&mut Viewer>, secs: u32| {
        for _ in 0..secs * 30 {
            let at = start + FRAME * unit;
            send_temporal_unit(net, publisher, &mut generator, at);
            net.run_until(at + FRAME);
            if let Some(viewer) = viewer.as_deref_mut() {
                viewer.report(net, start);
            }
            unit += 1;
        }
    };
    stream_until(&mut net, &mut None, 2);
    assert_eq!(clusters(&net), 0, "no probe without feedback");
    stream_until(&mut net, &mut Some(&mut viewer), 2);
    assert!(clusters(&net) > 0, "probed once the viewer reports");
}

/// One temporal unit of the publisher's stream, with filler, all its packets sent at `at`.
fn send_temporal_unit(
    net: &mut Network,
    publisher: TransportId,
    generator: &mut StreamGenerator,
    at: Instant,
) {
    let structure = generator.structure().clone();
    loop {
        let packet = generator.next().expect("endless");
        let mut bytes = packet.rtp_bytes(DD_EXT, &structure);
        bytes.resize(bytes.len() + FILLER, 0xAB);
        net.send_rtp_at(at, publisher, Bytes::from(bytes))
            .expect("a transport of the network");
        if packet.marker {
            return;
        }
    }
}

fn uplink() -> LinkConfig {
    LinkConfig::delayed(Duration::from_millis(25))
}
