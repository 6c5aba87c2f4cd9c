//! What each layer of a published track costs a subscriber, measured by the engine from the
//! packets as they arrive, against the generator's own account of which frames each decode
//! target needs.

use crate::common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use rtp_ext::codec::Codec;
use selector::scalability::{GeneratorConfig, ScalabilityMode, StreamGenerator};
use selector::Layer;
use sfu::engine::{Router, RouterConfig, TrackConfig, TrackId, TransportId};

const DD_EXT: u8 = 11;
const FRAME: Duration = Duration::from_millis(33);
const SSRC: u32 = 0xC0;
/// Payload bytes per packet at most, as a browser's packetizer leaves room for headers.
const MTU: usize = 1_200;

/// Streams `mode` for `seconds` at 30 temporal units a second; returns, per decode target,
/// the bitrate its frames came to over the last two seconds, and the engine's figures then.
fn measured(mode: ScalabilityMode, seconds: u64) -> Vec<(Layer, u64, u64)> {
    let mut router = Router::new(RouterConfig::default());
    let publisher = router.add_transport();
    let mut config = TrackConfig::single(Codec::Av1, 0x5151);
    config.dd_ext_id = Some(DD_EXT);
    let track = router.publish(publisher, config).expect("a new transport");
    let mut generator = StreamGenerator::new(
        mode,
        GeneratorConfig {
            ssrc: 0x5151,
            keyframe_interval_tus: 0,
            ..GeneratorConfig::default()
        },
    );
    let structure = generator.structure().clone();
    let start = Instant::now();
    let units = seconds * 30;
    let tail_from = units - 60;
    let targets = usize::from(mode.spatial_layers()) * usize::from(mode.temporal_layers());
    let mut truth = vec![0u64; targets];
    let mut now = start;
    loop {
        let packet = generator.next().expect("endless");
        if packet.temporal_unit == units {
            break;
        }
        now = start + FRAME * packet.temporal_unit as u32;
        let bytes = packet.rtp_bytes(DD_EXT, &structure);
        if packet.temporal_unit >= tail_from {
            for (dt, sum) in truth.iter_mut().enumerate() {
                if packet.belongs_to(dt) {
                    *sum += bytes.len() as u64;
                }
            }
        }
        router
            .handle_rtp(now, publisher, Bytes::from(bytes))
            .expect("a valid packet");
    }
    let rates = router.layer_bitrates(track, now).expect("published");
    let window = FRAME * 60;
    (0..mode.spatial_layers())
        .flat_map(|s| (0..mode.temporal_layers()).map(move |t| Layer::new(s, t)))
        .map(|layer| {
            let dt = mode.decode_target(layer.spatial, layer.temporal);
            let expected = truth[dt] * 8 * 1000 / window.as_millis() as u64;
            (layer, expected, rates.bps(layer))
        })
        .collect()
}

fn assert_close(rates: &[(Layer, u64, u64)]) {
    for &(layer, expected, measured) in rates {
        let off = expected.abs_diff(measured) as f64 / expected as f64;
        assert!(
            off < 0.1,
            "{layer:?}: measured {measured} bit/s, its frames came to {expected}"
        );
    }
}

#[test]
fn each_decode_target_costs_what_its_frames_do() {
    let rates = measured(ScalabilityMode::L3T3, 5);
    assert_close(&rates);
    let order: Vec<u64> = [(0, 0), (0, 1), (0, 2), (1, 2), (2, 2)]
        .iter()
        .map(|&(s, t)| bps(&rates, s, t))
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    let unknown = Router::new(RouterConfig::default());
    assert_eq!(unknown.layer_bitrates(TrackId(9), Instant::now()), None);
}

fn bps(rates: &[(Layer, u64, u64)], s: u8, t: u8) -> u64 {
    rates
        .iter()
        .find(|r| r.0 == Layer::new(s, t))
        .expect("a target")
        .2
}

/// The generator's frames are all about the same size. In full SVC the top target needs the
/// frames of all three spatial layers; in K-SVC an upper layer's delta frames reference only
/// its own layer, so its target costs about what the base layer's does, not three times it.
#[test]
fn a_k_svc_upper_layer_does_not_pay_for_the_lower_layers() {
    let full = measured(ScalabilityMode::L3T3, 5);
    assert!(bps(&full, 2, 2) > bps(&full, 0, 2) * 5 / 2);
    let key = measured(ScalabilityMode::L3T3Key, 5);
    assert_close(&key);
    assert!(bps(&key, 2, 2) < bps(&key, 0, 2) * 3 / 2);
    assert!(bps(&key, 2, 2) > bps(&key, 0, 2) / 2);
}

/// Simulcast: a stream's packets count toward its own layer only, at their temporal layer and
/// above; a temporal layer's target includes the lower temporal layers.
#[test]
fn a_simulcast_stream_pays_only_for_itself() {
    let mut router = Router::new(RouterConfig::default());
    let publisher = router.add_transport();
    let mut config = TrackConfig::single(Codec::Vp8, 0xA0);
    config.streams.push(sfu::engine::StreamConfig {
        ssrc: 0xA1,
        rtx_ssrc: None,
    });
    let track = router.publish(publisher, config).expect("a new transport");
    let start = Instant::now();
    let mut now = start;
    for i in 0..120u16 {
        now = start + FRAME * u32::from(i);
        let tid = if i % 2 == 0 { 0 } else { 1 };
        for (ssrc, size) in [(0xA0, 200), (0xA1, 1000)] {
            router
                .handle_rtp(now, publisher, common::vp8_packet(ssrc, i, tid, size))
                .expect("a valid packet");
        }
    }
    let rates = router.layer_bitrates(track, now).expect("published");
    let per_second = |bytes: u64| bytes * 8 * 30;
    let near = |measured: u64, expected: u64| measured.abs_diff(expected) < expected / 10;
    // Half the frames are T0; a packet is its payload plus 15 bytes of header and descriptor.
    assert!(near(rates.bps(Layer::new(0, 0)), per_second(215) / 2));
    assert!(near(rates.bps(Layer::new(0, 1)), per_second(215)));
    assert!(near(rates.bps(Layer::new(1, 0)), per_second(1015) / 2));
    assert!(near(rates.bps(Layer::new(1, 1)), per_second(1015)));
    assert_eq!(rates.bps(Layer::new(2, 0)), 0, "no third stream");
}

/// Simulcast with a Dependency Descriptor on each stream (as browsers send it): each stream's
/// descriptor describes that stream alone, all of spatial layer 0, and its decode targets
/// count toward the stream's own layer.
#[test]
fn a_simulcast_streams_descriptor_counts_toward_its_own_stream() {
    let mut router = Router::new(RouterConfig::default());
    let publisher = router.add_transport();
    let mut config = TrackConfig::single(Codec::Vp8, 0xA0);
    config.dd_ext_id = Some(DD_EXT);
    config.streams.push(sfu::engine::StreamConfig {
        ssrc: 0xA1,
        rtx_ssrc: None,
    });
    let track = router.publish(publisher, config).expect("a new transport");
    let stream = |ssrc| {
        StreamGenerator::new(
            ScalabilityMode::L1T3,
            GeneratorConfig {
                ssrc,
                keyframe_interval_tus: 0,
                packets_per_frame: 1..=1,
                ..GeneratorConfig::default()
            },
        )
    };
    let mut streams = [(stream(0xA0), 300), (stream(0xA1), 1_200)];
    let start = Instant::now();
    let mut now = start;
    for unit in 0..90u32 {
        now = start + FRAME * unit;
        for (generator, size) in &mut streams {
            let structure = generator.structure().clone();
            let packet = generator.next().expect("endless");
            let mut bytes = packet.rtp_bytes(DD_EXT, &structure);
            bytes.resize(*size, 0);
            router
                .handle_rtp(now, publisher, Bytes::from(bytes))
                .expect("a valid packet");
        }
    }
    let rates = router.layer_bitrates(track, now).expect("published");
    let near = |measured: u64, expected: u64| measured.abs_diff(expected) < expected / 10;
    // Every frame is in the top temporal target: the stream's whole rate.
    let full = |size: u64| size * 8 * 30;
    assert!(near(rates.bps(Layer::new(0, 2)), full(300)), "{rates:?}");
    assert!(near(rates.bps(Layer::new(1, 2)), full(1_200)), "{rates:?}");
    // L1T3: a quarter of the frames are T0.
    assert!(
        near(rates.bps(Layer::new(1, 0)), full(1_200) / 4),
        "{rates:?}"
    );
    assert_eq!(rates.bps(Layer::new(2, 2)), 0, "no third stream");
}

/// An audio track (and any stream that names no temporal layer) has one layer: its whole rate
/// is spatial 0, temporal 0, and no other layer shows a rate.
#[test]
fn an_audio_track_has_one_layer() {
    let mut router = Router::new(RouterConfig::default());
    let publisher = router.add_transport();
    let track = router
        .publish(publisher, TrackConfig::single(Codec::Opus, 0xB0))
        .expect("a new transport");
    let start = Instant::now();
    let mut now = start;
    for i in 0..100u16 {
        now = start + Duration::from_millis(20) * u32::from(i);
        let mut packet = vec![0x80, 111];
        packet.extend_from_slice(&i.to_be_bytes());
        packet.extend_from_slice(&(u32::from(i) * 960).to_be_bytes());
        packet.extend_from_slice(&0xB0u32.to_be_bytes());
        packet.resize(12 + 80, 0xAB);
        router
            .handle_rtp(now, publisher, Bytes::from(packet))
            .expect("a valid packet");
    }
    let rates = router.layer_bitrates(track, now).expect("published");
    // 92 bytes every 20 ms.
    let base = rates.bps(Layer::new(0, 0));
    assert!(base.abs_diff(92 * 8 * 50) < 92 * 8 * 5, "{rates:?}");
    let others = (0..4u8)
        .flat_map(|s| (0..4u8).map(move |t| Layer::new(s, t)))
        .filter(|&l| l != Layer::new(0, 0) && rates.bps(l) > 0)
        .count();
    assert_eq!(others, 0, "one layer: {rates:?}");
}

/// A VP8 publisher of one stream at `fps` frames a second, sending whole frames.
struct Vp8Publisher {
    router: Router,
    transport: TransportId,
    track: TrackId,
    fps: u32,
    seq: u16,
    start: Instant,
}

impl Vp8Publisher {
    fn new(fps: u32) -> Self {
        let mut router = Router::new(RouterConfig::default());
        let transport = router.add_transport();
        let track = router
            .publish(transport, TrackConfig::single(Codec::Vp8, SSRC))
            .expect("a new transport");
        Self {
            router,
            transport,
            track,
            fps,
            seq: 0,
            start: Instant::now(),
        }
    }

    /// When frame `n` is sent.
    fn at(&self, n: u32) -> Instant {
        self.start + Duration::from_secs(u64::from(n)) / self.fps
    }

    /// Sends frame `n`, of temporal layer `tid`: `size` bytes of payload in packets of at most
    /// [`MTU`] that share its timestamp, the first with the descriptor's S bit and, for a
    /// keyframe, a payload header with the P bit clear. Returns the bytes sent.
    fn frame(&mut self, n: u32, tid: u8, size: usize, key: bool) -> u64 {
        let now = self.at(n);
        let timestamp = n * (90_000 / self.fps);
        let mut sent = 0;
        for offset in (0..size).step_by(MTU) {
            let first = offset == 0;
            let mut packet = vec![0x80, 96];
            packet.extend_from_slice(&self.seq.to_be_bytes());
            packet.extend_from_slice(&timestamp.to_be_bytes());
            packet.extend_from_slice(&SSRC.to_be_bytes());
            // X, and S on the frame's first packet; T; then TID.
            packet.extend_from_slice(&[if first { 0x90 } else { 0x80 }, 0x20, tid << 6]);
            packet.push(u8::from(!(first && key)));
            packet.resize(packet.len() + (size - offset).min(MTU) - 1, 0xAB);
            self.seq = self.seq.wrapping_add(1);
            sent += packet.len() as u64;
            self.router
                .handle_rtp(now, self.transport, Bytes::from(packet))
                .expect("a valid packet");
        }
        sent
    }

    fn bps(&self, now: Instant, layer: Layer) -> u64 {
        let rates = self.router.layer_bitrates(self.track, now);
        rates.expect("published").bps(layer)
    }
}

/// How far `measured` is from `expected`, as a share of it.
fn off(measured: u64, expected: u64) -> f64 {
    measured.abs_diff(expected) as f64 / expected as f64
}

/// 1 Mbit/s at 30 frames a second, with a keyframe ten times a delta frame's size every
/// second (the first too) and one more, 4.67 s in, when a viewer's layer switch asks for it.
/// What the layer goes on costing a viewer is its delta frames' rate, and from the third
/// bucket on (600 ms) it reads within 15% of that: the bursts do not raise it. A mean over
/// the window reads the two or three keyframes in it at 20-60% over.
#[test]
fn keyframe_bursts_do_not_raise_a_steady_rate() {
    const DELTA: usize = 1_000_000 / 8 / 30;
    const SWITCH: u32 = 140;
    let mut publisher = Vp8Publisher::new(30);
    let mut steady = 0;
    let mut readings = Vec::new();
    for n in 0..180 {
        let key = n % 30 == 0 || n == SWITCH;
        let sent = publisher.frame(n, 0, if key { DELTA * 10 } else { DELTA }, key);
        if !key {
            steady = sent * 8 * 30;
        }
        readings.push(publisher.bps(publisher.at(n), Layer::new(0, 0)));
    }
    let worst = readings[18..]
        .iter()
        .map(|&r| off(r, steady))
        .fold(0.0, f64::max);
    assert!(worst < 0.15, "{worst:.3} off {steady} bit/s: {readings:?}");
}

/// A stream starting, with a keyframe as every stream does: allocation needs a figure from
/// its first frame on, and gets the mean over the time seen (at least a bucket's), the
/// keyframe in it, until three buckets are complete; then the steady rate.
#[test]
fn a_starting_stream_has_a_figure_from_its_first_frame() {
    let mut publisher = Vp8Publisher::new(30);
    let mut readings = Vec::new();
    let mut steady = 0;
    for n in 0..30 {
        let sent = publisher.frame(n, 0, if n == 0 { 40_000 } else { 4_000 }, n == 0);
        steady = sent * 8 * 30;
        readings.push(publisher.bps(publisher.at(n), Layer::new(0, 0)));
    }
    // The first frame alone, over a bucket's 200 ms.
    let first = 40_000 * 8 * 5;
    assert!(readings[0].abs_diff(first) < first / 20, "{readings:?}");
    assert!(
        readings[..18].iter().all(|&r| r > steady / 2),
        "{readings:?}"
    );
    assert!(
        readings[18..].iter().all(|&r| off(r, steady) < 0.15),
        "{steady}: {readings:?}"
    );
}

/// L1T3, a temporal layer 0 frame twice the size of a layer 2 one, at 30 frames a second
/// and at 10: temporal layer 0 sends 7.5 and 2.5 frames a second, 1 or 2 in a bucket of
/// 200 ms, or one every other bucket. Each target layer reads its frames' rate, as closely as
/// a window of whole frames allows, where a median of the buckets' rates would read 1 or 2
/// frames a bucket for 1.5, or 0 or 1 for 0.5.
#[test]
fn a_low_frame_rate_temporal_layer_reads_its_whole_rate() {
    const PATTERN: [u8; 4] = [0, 2, 1, 2];
    const SIZES: [usize; 3] = [4_000, 2_500, 2_000];
    for (fps, tolerance) in [(30, 0.1), (10, 0.25)] {
        let mut publisher = Vp8Publisher::new(fps);
        let mut frame_bytes = [0u64; 3];
        let mut worst = [0f64; 3];
        for n in 0..fps * 5 {
            let tid = PATTERN[n as usize % 4];
            let t = usize::from(tid);
            frame_bytes[t] = publisher.frame(n, tid, SIZES[t], false);
            // From a second on: every temporal layer has sent.
            if n < fps {
                continue;
            }
            for (t, worst) in worst.iter_mut().enumerate() {
                // Layer t has the frames of temporal layers t and below.
                let per_four: u64 = PATTERN
                    .iter()
                    .filter(|&&p| usize::from(p) <= t)
                    .map(|&p| frame_bytes[usize::from(p)])
                    .sum();
                let expected = per_four * 8 * u64::from(fps) / 4;
                let layer = Layer::new(0, t as u8);
                *worst = worst.max(off(publisher.bps(publisher.at(n), layer), expected));
            }
        }
        assert!(
            worst.iter().all(|&w| w < tolerance),
            "{fps} frames a second: {worst:?}"
        );
    }
}

/// A stream that stops: its rate falls as its frames leave the window, to 0 for every layer
/// two seconds after its last frame.
#[test]
fn a_paused_stream_falls_to_zero_within_the_window() {
    let mut publisher = Vp8Publisher::new(30);
    let mut steady = 0;
    for n in 0..90 {
        steady = publisher.frame(n, 0, 4_000, false) * 8 * 30;
    }
    let last = publisher.at(89);
    let at = |ms, layer| publisher.bps(last + Duration::from_millis(ms), layer);
    assert!(off(at(0, Layer::new(0, 0)), steady) < 0.1);
    let later = at(1_000, Layer::new(0, 0));
    assert!(later > steady / 4 && later < steady * 3 / 4, "{later}");
    for layer in (0..4u8).flat_map(|s| (0..4u8).map(move |t| Layer::new(s, t))) {
        assert_eq!(at(2_000, layer), 0, "{layer:?}");
    }
}
