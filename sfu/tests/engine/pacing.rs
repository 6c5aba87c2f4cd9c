//! Pacing toward a viewer with an estimate, driven by hand: a keyframe that arrives in one
//! burst leaves at the pacing rate, in order; audio and retransmissions that come in while
//! video waits go first; nothing waits longer than the hold limit.

use std::time::{Duration, Instant};

use bytes::Bytes;
use rtp_ext::codec::Codec;
use rtp_ext::rtp::RtpPacket;
use selector::scalability::{GeneratorConfig, ScalabilityMode, StreamGenerator};
use selector::LayerLimits;
use sfu::engine::rtcp::{
    Nack, NackPairs, Remb, RembSsrcs, RtcpFeedback, RtcpWireWriter, RtcpWriter,
};
use sfu::engine::{
    DownTrackConfig, DownTrackId, Output, Router, RouterConfig, TrackConfig, TransportId, MAX_HOLD,
    PACING_BURST, PACING_PERCENT,
};

const DD_EXT: u8 = 11;
const VIDEO_SSRC: u32 = 0x10;
const AUDIO_SSRC: u32 = 0x20;

struct Setup {
    router: Router,
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
    let mut router = Router::new(RouterConfig::default());
    let (publisher, viewer) = (router.add_transport(), router.add_transport());
    let mut video = TrackConfig::single(Codec::Av1, 0x5151);
    video.dd_ext_id = Some(DD_EXT);
    let video_track = router.publish(publisher, video).expect("new");
    let audio_track = router
        .publish(publisher, TrackConfig::single(Codec::Opus, 0x6161))
        .expect("new");
    let mut config = DownTrackConfig::new(VIDEO_SSRC, 45);
    config.dd_ext_id = Some(DD_EXT);
    config.rtx = Some((VIDEO_SSRC + 1, 46));
    let limits = LayerLimits::default();
    let video = router
        .subscribe(viewer, video_track, config, limits)
        .expect("new");
    let audio = router
        .subscribe(
            viewer,
            audio_track,
            DownTrackConfig::new(AUDIO_SSRC, 111),
            limits,
        )
        .expect("new");
    let generator = StreamGenerator::new(
        ScalabilityMode::L1T1,
        GeneratorConfig {
            ssrc: 0x5151,
            packets_per_frame: packets..=packets,
            ..GeneratorConfig::default()
        },
    );
    let mut setup = Setup {
        router,
        publisher,
        viewer,
        video,
        audio,
        generator,
        audio_seq: 0,
        start,
    };
    setup.rtcp(start, &remb(estimate_bps));
    setup
}

impl Setup {
    /// One video frame, all its packets at `now`.
    fn frame(&mut self, now: Instant) {
        let structure = self.generator.structure().clone();
        loop {
            let packet = self.generator.next().expect("endless");
            let mut bytes = packet.rtp_bytes(DD_EXT, &structure);
            bytes.resize(1_200, 0xAB);
            self.router
                .handle_rtp(now, self.publisher, Bytes::from(bytes))
                .expect("valid");
            if packet.marker {
                return;
            }
        }
    }

    fn audio_packet(&mut self, now: Instant) {
        self.audio_seq += 1;
        let mut packet = vec![0x80, 111];
        packet.extend_from_slice(&self.audio_seq.to_be_bytes());
        packet.extend_from_slice(&(u32::from(self.audio_seq) * 960).to_be_bytes());
        packet.extend_from_slice(&0x6161u32.to_be_bytes());
        packet.extend_from_slice(&[0xfc; 80]);
        self.router
            .handle_rtp(now, self.publisher, Bytes::from(packet))
            .expect("valid");
    }

    fn rtcp(&mut self, now: Instant, feedback: &RtcpFeedback<'_>) {
        let mut buf = [0u8; 200];
        let len = RtcpWireWriter::new(b"viewer")
            .expect("a short CNAME")
            .write(feedback, &mut buf)
            .expect("fits");
        self.router
            .handle_rtcp(now, self.viewer, &buf[..len])
            .expect("valid");
        self.drain_rtcp();
    }

    fn drain_rtcp(&mut self) {
        let mut buf = [0u8; 1500];
        while self.router.poll_rtcp(&mut buf).is_some() {}
        while self.router.poll_event().is_some() {}
    }

    /// What leaves now: (subscription, RTP sequence number, bytes, retransmission).
    fn poll(&mut self) -> Vec<(DownTrackId, u16, usize, bool)> {
        let mut buf = [0u8; 1500];
        let mut out = Vec::new();
        while let Some(Output {
            down_track,
            transmit,
            ..
        }) = self.router.poll_transmit(&mut buf)
        {
            let header = RtpPacket::parse(&buf[..transmit.len]).expect("valid header");
            let seq = header.fields().sequence_number;
            let rtx = header.fields().ssrc == VIDEO_SSRC + 1;
            out.push((down_track, seq, transmit.len + transmit.payload.len(), rtx));
        }
        self.drain_rtcp();
        out
    }

    /// Runs the router's timers until `until`, collecting what leaves and when.
    fn run_until(&mut self, until: Instant) -> Vec<(Instant, DownTrackId, u16, usize, bool)> {
        let mut sent = Vec::new();
        while let Some(at) = self.router.poll_timeout().filter(|&at| at <= until) {
            self.router.handle_timeout(at);
            let out = self.poll();
            sent.extend(out.into_iter().map(|(d, s, b, r)| (at, d, s, b, r)));
        }
        sent
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

#[test]
fn a_keyframe_burst_leaves_at_the_pacing_rate_in_order() {
    let mut s = setup(1_000_000, 40);
    let at = s.start + Duration::from_millis(10);
    s.frame(at);
    let first = s.poll();
    // A packet goes at once while what went before it is within the burst allowance.
    let rate = 1_000_000 * PACING_PERCENT / 100;
    let allowance = rate * PACING_BURST.as_micros() as u64 / 1_000_000;
    let bits = |sent: &[(DownTrackId, u16, usize, bool)]| -> u64 {
        sent.iter().map(|o| o.2 as u64 * 8).sum()
    };
    assert!(
        first.len() < 40
            && bits(&first[..first.len() - 1]) <= allowance
            && bits(&first) > allowance,
        "only the burst allowance at once: {} packets, {} bits",
        first.len(),
        bits(&first)
    );
    let waiting = 40 - first.len();
    assert!(s.router.paced_jobs(s.viewer) >= waiting, "the rest wait");
    let rest = s.run_until(at + Duration::from_secs(2));
    assert_eq!(first.len() + rest.len(), 40, "all of it leaves");
    let seqs: Vec<u16> = first
        .iter()
        .map(|o| o.1)
        .chain(rest.iter().map(|o| o.2))
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0].wrapping_add(1)),
        "{seqs:?}"
    );
    // The pace: no 100 ms carries more than the rate allows, plus one packet's burst.
    let window = Duration::from_millis(100);
    for &(from, ..) in &rest {
        let bits: u64 = rest
            .iter()
            .filter(|o| o.0 >= from && o.0 < from + window)
            .map(|o| o.3 as u64 * 8)
            .sum();
        assert!(
            bits <= rate / 10 + 2 * 1_200 * 8,
            "{bits} bits from {from:?}"
        );
    }
    let span = rest.last().expect("sent").0 - at;
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
    let sent = s.poll();
    let nacked = sent[0].1;
    let later = at + Duration::from_millis(20);
    s.audio_packet(later);
    let mut pairs = NackPairs::default();
    pairs.push(nacked).expect("room");
    let nack = RtcpFeedback::Nack(Nack {
        sender_ssrc: 9,
        media_ssrc: VIDEO_SSRC,
        pairs,
    });
    s.rtcp(later, &nack);
    let waiting = s.router.paced_jobs(s.viewer);
    let rest = s.run_until(at + Duration::from_secs(2));
    assert!(rest.len() > 30, "the frame leaves: {}", rest.len());
    let first_two: Vec<_> = rest[..2].iter().map(|o| (o.1, o.4)).collect();
    assert!(
        first_two.contains(&(s.audio, false)) && first_two.contains(&(s.video, true)),
        "audio and the retransmission first: {first_two:?} of {waiting} waiting"
    );
    assert!(
        rest[2..].iter().all(|o| o.1 == s.video && !o.4),
        "then video"
    );
}

#[test]
fn nothing_waits_longer_than_the_hold_limit() {
    // 100 kbit/s for 40 packets: they would take four seconds at the rate.
    let mut s = setup(100_000, 40);
    let at = s.start + Duration::from_millis(10);
    s.frame(at);
    let first = s.poll();
    let rest = s.run_until(at + Duration::from_secs(5));
    assert_eq!(first.len() + rest.len(), 40);
    let last = rest.last().expect("sent").0;
    assert!(last <= at + MAX_HOLD, "last at {:?}", last - at);
    assert!(s.router.counters().paced_overdue > 0, "counted");
}

#[test]
fn without_an_estimate_nothing_is_paced() {
    let mut s = setup(1_000_000, 40);
    // A new viewer transport of the same tracks, with no REMB.
    let other = s.router.add_transport();
    let track = s.router.down_track_info(s.video).expect("known").track;
    let mut config = DownTrackConfig::new(0x30, 45);
    config.dd_ext_id = Some(DD_EXT);
    let id = s
        .router
        .subscribe(other, track, config, LayerLimits::default())
        .expect("new");
    s.frame(s.start + Duration::from_millis(10));
    let sent = s.poll();
    assert_eq!(sent.iter().filter(|o| o.0 == id).count(), 40, "all at once");
    assert_eq!(s.router.paced_jobs(other), 0);
}
