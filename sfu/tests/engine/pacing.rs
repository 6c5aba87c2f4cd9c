//! Pacing toward a viewer with an estimate, on ideal links: a keyframe that arrives in one
//! burst leaves at the pacing rate, in order; audio and retransmissions that come in while
//! video waits go first; nothing waits longer than the hold limit.

use std::time::{Duration, Instant};

use bytes::Bytes;
use rtp_ext::codec::Codec;
use selector::scalability::{GeneratorConfig, ScalabilityMode, StreamGenerator};
use selector::LayerLimits;
use sfu::engine::rtcp::{Nack, NackPairs, Remb, RembSsrcs, RtcpFeedback};
use sfu::engine::{
    DownTrackConfig, DownTrackId, RouterConfig, TrackConfig, TransportId, MAX_HOLD, PACING_BURST,
    PACING_PERCENT, SEND_HISTORY,
};
use sfu::sim::{LinkConfig, Network, ReceivedMedia};

const DD_EXT: u8 = 11;
const VIDEO_SSRC: u32 = 0x10;
const AUDIO_SSRC: u32 = 0x20;

struct Setup {
    network: Network,
    publisher: TransportId,
    viewer: TransportId,
    video: DownTrackId,
    audio: DownTrackId,
    generator: StreamGenerator,
    audio_seq: u16,
    start: Instant,
}

/// A publisher of AV1 (one layer, `packets` packets of about 1,200 bytes a frame) and Opus,
/// and a viewer of both whose REMB says `estimate_bps`.
fn setup(estimate_bps: u64, packets: u8) -> Setup {
    let start = Instant::now();
    let mut network = Network::new(RouterConfig::default(), start, 0);
    let publisher = network.add_transport(LinkConfig::default(), LinkConfig::default());
    let viewer = network.add_transport(LinkConfig::default(), LinkConfig::default());
    let (video, audio) = network
        .with_router(|router| {
            let mut video = TrackConfig::single(Codec::Av1, 0x5151);
            video.dd_ext_id = Some(DD_EXT);
            let video_track = router.publish(publisher, video)?;
            let audio_track =
                router.publish(publisher, TrackConfig::single(Codec::Opus, 0x6161))?;
            let mut config = DownTrackConfig::new(VIDEO_SSRC, 45);
            config.dd_ext_id = Some(DD_EXT);
            config.rtx = Some((VIDEO_SSRC + 1, 46));
            let limits = LayerLimits::default();
            let video = router.subscribe(viewer, video_track, config, limits)?;
            let audio = DownTrackConfig::new(AUDIO_SSRC, 111);
            let audio = router.subscribe(viewer, audio_track, audio, limits)?;
            Ok::<_, sfu::engine::RouterError>((video, audio))
        })
        .expect("new transports");
    let generator = StreamGenerator::new(
        ScalabilityMode::L1T1,
        GeneratorConfig {
            ssrc: 0x5151,
            packets_per_frame: packets..=packets,
            ..GeneratorConfig::default()
        },
    );
    network
        .send_feedback(viewer, &remb(estimate_bps))
        .expect("on the network");
    network.run_until(start);
    Setup {
        network,
        publisher,
        viewer,
        video,
        audio,
        generator,
        audio_seq: 0,
        start,
    }
}

impl Setup {
    /// One video frame, all its packets sent at `at`.
    fn frame(&mut self, at: Instant) {
        let structure = self.generator.structure().clone();
        loop {
            let packet = self.generator.next().expect("endless");
            let mut bytes = packet.rtp_bytes(DD_EXT, &structure);
            bytes.resize(1_200, 0xAB);
            self.network
                .send_rtp_at(at, self.publisher, Bytes::from(bytes))
                .expect("on the network");
            if packet.marker {
                return;
            }
        }
    }

    /// One Opus packet, sent at `at`.
    fn audio_packet(&mut self, at: Instant) {
        self.audio_seq += 1;
        let mut packet = vec![0x80, 111];
        packet.extend_from_slice(&self.audio_seq.to_be_bytes());
        packet.extend_from_slice(&(u32::from(self.audio_seq) * 960).to_be_bytes());
        packet.extend_from_slice(&0x6161u32.to_be_bytes());
        packet.extend_from_slice(&[0xfc; 80]);
        self.network
            .send_rtp_at(at, self.publisher, Bytes::from(packet))
            .expect("on the network");
    }

    /// Runs the network until `until`: what reached the viewer by then, in order, each with
    /// the time it left (the links are ideal). Nothing the router refused.
    fn run_until(&mut self, until: Instant) -> Vec<ReceivedMedia> {
        self.network.run_until(until);
        assert_eq!(self.network.take_refused(), [], "all taken");
        self.network.take_media(self.viewer)
    }

    /// The viewer NACKs `lost` of its video, in one datagram.
    fn nack(&mut self, lost: impl IntoIterator<Item = u16>) {
        let mut pairs = NackPairs::default();
        for seq in lost {
            pairs.push(seq).expect("room");
        }
        let nack = RtcpFeedback::Nack(Nack {
            sender_ssrc: 9,
            media_ssrc: VIDEO_SSRC,
            pairs,
        });
        self.network
            .send_feedback(self.viewer, &nack)
            .expect("on the network");
    }

    fn paced_jobs(&self) -> usize {
        self.network.router().paced_jobs(self.viewer)
    }
}

fn remb(bitrate_bps: u64) -> RtcpFeedback<'static> {
    let mut ssrcs = RembSsrcs::default();
    ssrcs.push(VIDEO_SSRC).expect("room");
    RtcpFeedback::Remb(Remb {
        sender_ssrc: 9,
        bitrate_bps,
        ssrcs,
    })
}

/// Bits of the packets.
fn bits(sent: &[ReceivedMedia]) -> u64 {
    sent.iter().map(|o| o.len as u64 * 8).sum()
}

#[test]
fn a_keyframe_burst_leaves_at_the_pacing_rate_in_order() {
    let mut s = setup(1_000_000, 40);
    let at = s.start + Duration::from_millis(10);
    s.frame(at);
    let first = s.run_until(at);
    // A packet goes at once while what went before it is within the burst allowance.
    let rate = 1_000_000 * PACING_PERCENT / 100;
    let allowance = rate * PACING_BURST.as_micros() as u64 / 1_000_000;
    assert!(
        first.len() < 40
            && bits(&first[..first.len() - 1]) <= allowance
            && bits(&first) > allowance,
        "only the burst allowance at once: {} packets, {} bits",
        first.len(),
        bits(&first)
    );
    let waiting = 40 - first.len();
    assert!(s.paced_jobs() >= waiting, "the rest wait");
    let rest = s.run_until(at + Duration::from_secs(2));
    assert_eq!(first.len() + rest.len(), 40, "all of it leaves");
    let seqs: Vec<u16> = first
        .iter()
        .chain(&rest)
        .map(|o| o.sequence_number)
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0].wrapping_add(1)),
        "{seqs:?}"
    );
    // The pace: no 100 ms carries more than the rate allows, plus one packet's burst.
    let window = Duration::from_millis(100);
    for o in &rest {
        let from = o.at;
        let bits: u64 = rest
            .iter()
            .filter(|o| o.at >= from && o.at < from + window)
            .map(|o| o.len as u64 * 8)
            .sum();
        assert!(
            bits <= rate / 10 + 2 * 1_200 * 8,
            "{bits} bits from {from:?}"
        );
    }
    let span = rest.last().expect("sent").at - at;
    let expected = Duration::from_micros(waiting as u64 * 1_200 * 8 * 1_000_000 / rate);
    assert!(
        span.abs_diff(expected) < Duration::from_millis(20),
        "{span:?}, at the rate {expected:?}"
    );
}

#[test]
fn audio_and_retransmissions_go_ahead_of_waiting_video() {
    let mut s = setup(1_000_000, 40);
    let at = s.start + Duration::from_millis(10);
    s.frame(at);
    let sent = s.run_until(at);
    let nacked = sent[0].sequence_number;
    // While most of the frame waits, an audio packet comes in and the viewer NACKs the
    // frame's first packet.
    let later = at + Duration::from_millis(20);
    let before = s.run_until(later);
    let waiting = s.paced_jobs();
    assert!(waiting > 20, "video waits: {waiting}");
    s.audio_packet(later);
    s.nack([nacked]);
    let rest = s.run_until(at + Duration::from_secs(2));
    let video = |o: &&ReceivedMedia| o.down_track == s.video && !o.retransmission;
    let frame = sent
        .iter()
        .chain(&before)
        .chain(&rest)
        .filter(video)
        .count();
    assert_eq!(frame, 40, "the frame leaves");
    let first_two: Vec<_> = rest[..2]
        .iter()
        .map(|o| (o.down_track, o.ssrc == VIDEO_SSRC + 1))
        .collect();
    assert!(
        first_two.contains(&(s.audio, false)) && first_two.contains(&(s.video, true)),
        "audio and the retransmission first: {first_two:?} of {waiting} waiting"
    );
    assert!(
        rest[2..]
            .iter()
            .all(|o| o.down_track == s.video && o.ssrc == VIDEO_SSRC),
        "then video"
    );
}

#[test]
fn nothing_waits_longer_than_the_hold_limit() {
    // 100 kbit/s for 40 packets: they would take four seconds at the rate.
    let mut s = setup(100_000, 40);
    let at = s.start + Duration::from_millis(10);
    s.frame(at);
    let first = s.run_until(at);
    let rest = s.run_until(at + Duration::from_secs(5));
    assert_eq!(first.len() + rest.len(), 40);
    let last = rest.last().expect("sent").at;
    assert!(last <= at + MAX_HOLD, "last at {:?}", last - at);
    assert!(s.network.router().counters().paced_overdue > 0, "counted");
}

#[test]
fn without_an_estimate_nothing_is_paced() {
    let mut s = setup(1_000_000, 40);
    // A new viewer transport of the same tracks, with no REMB.
    let other = s
        .network
        .add_transport(LinkConfig::default(), LinkConfig::default());
    let video = s.video;
    let id = s
        .network
        .with_router(|router| {
            let track = router.down_track_info(video).expect("known").track;
            let mut config = DownTrackConfig::new(0x30, 45);
            config.dd_ext_id = Some(DD_EXT);
            router.subscribe(other, track, config, LayerLimits::default())
        })
        .expect("new");
    let at = s.start + Duration::from_millis(10);
    s.frame(at);
    s.run_until(at);
    let sent = s.network.take_media(other);
    assert_eq!(
        sent.iter().filter(|o| o.down_track == id).count(),
        40,
        "all at once"
    );
    assert_eq!(s.network.router().paced_jobs(other), 0);
}

/// A viewer whose pacer is closed and whose NACKs keep coming has at most two send histories'
/// worth of retransmissions wait (the rest refused, counted), not every one for the hold limit.
#[test]
fn retransmissions_waiting_on_a_closed_pacer_are_bounded() {
    let mut s = setup(100_000, 40);
    let at = s.start + Duration::from_millis(10);
    s.frame(at);
    let sent = s.run_until(at);
    let first = sent[0].sequence_number;
    // Three datagrams, each naming 600 packets: 512 of each taken, the rest over the history.
    for _ in 0..3 {
        s.nack((0..600u16).map(|seq| first.wrapping_add(seq)));
    }
    s.run_until(at + Duration::from_millis(1));
    let counters = s.network.router().counters();
    assert_eq!(counters.nacks_over_history, 3 * 88);
    assert_eq!(counters.retransmissions_queue_full, 3 * 512 - 2 * 512);
    let waiting = s.paced_jobs();
    assert!(waiting <= 2 * SEND_HISTORY + 40, "{waiting} wait");
    s.run_until(at + Duration::from_secs(2));
    assert_eq!(s.paced_jobs(), 0, "what waited left within the hold limit");
}
