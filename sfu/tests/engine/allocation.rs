//! A viewer transport's layers fitted to its bandwidth estimate (here its REMB): down at once
//! when what it is sent no longer fits, up only after the hold-down, never above the layer
//! the viewer asked for, and the audio it receives never cut.

use crate::common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use rtp_ext::codec::Codec;
use selector::scalability::{GeneratorConfig, ScalabilityMode, StreamGenerator};
use selector::{Layer, LayerLimits};
use sfu::engine::rtcp::{
    parse_compound, Nack, NackPairs, Remb, RembSsrcs, RtcpFeedback, RtcpWireWriter, RtcpWriter,
};
use sfu::engine::{
    DownTrackConfig, DownTrackId, Event, Router, RouterConfig, StreamConfig, TrackConfig, TrackId,
    TransportId,
};

const DD_EXT: u8 = 11;
const FRAME: Duration = Duration::from_millis(33);

struct Room {
    router: Router,
    publisher: TransportId,
    track: TrackId,
    viewer: TransportId,
    down: DownTrackId,
    generator: StreamGenerator,
    start: Instant,
    unit: u32,
    /// An Opus track the viewer receives too, if any.
    audio: Option<TrackId>,
    /// Sequence numbers of the video sent to the viewer, and retransmissions counted.
    sent: Vec<u16>,
    retransmitted: usize,
}

impl Room {
    fn new(limits: LayerLimits) -> Self {
        let mut router = Router::new(RouterConfig::default());
        let publisher = router.add_transport();
        let mut config = TrackConfig::single(Codec::Av1, 0x5151);
        config.dd_ext_id = Some(DD_EXT);
        let track = router.publish(publisher, config).expect("a new transport");
        let viewer = router.add_transport();
        let mut down = DownTrackConfig::new(0x10, 45);
        down.dd_ext_id = Some(DD_EXT);
        let down = router
            .subscribe(viewer, track, down, limits)
            .expect("a new transport");
        let generator = StreamGenerator::new(
            ScalabilityMode::L3T3,
            GeneratorConfig {
                ssrc: 0x5151,
                keyframe_interval_tus: 60,
                ..GeneratorConfig::default()
            },
        );
        Self {
            router,
            publisher,
            track,
            viewer,
            down,
            generator,
            start: Instant::now(),
            unit: 0,
            audio: None,
            sent: Vec::new(),
            retransmitted: 0,
        }
    }

    /// The same publisher sends Opus too, and the viewer receives it.
    fn with_audio(mut self) -> Self {
        let track = self
            .router
            .publish(self.publisher, TrackConfig::single(Codec::Opus, 0x0A0A))
            .expect("a free SSRC");
        self.router
            .subscribe(
                self.viewer,
                track,
                DownTrackConfig::new(0x20, 111),
                LayerLimits::default(),
            )
            .expect("a free SSRC");
        self.audio = Some(track);
        self
    }

    /// An Opus packet of 160 payload bytes (about 43 kbit/s at one per temporal unit).
    fn opus(&self) -> Bytes {
        let seq = self.unit as u16;
        let mut packet = vec![0x80, 111];
        packet.extend_from_slice(&seq.to_be_bytes());
        packet.extend_from_slice(&(self.unit * 960).to_be_bytes());
        packet.extend_from_slice(&0x0A0Au32.to_be_bytes());
        packet.resize(12 + 160, 0xfc);
        Bytes::from(packet)
    }

    fn now(&self) -> Instant {
        self.start + FRAME * self.unit
    }

    /// Streams for `seconds`, serving timers and draining outputs; returns the events.
    fn run(&mut self, seconds: u32) -> Vec<Event> {
        let structure = self.generator.structure().clone();
        let until = self.unit + seconds * 30;
        let mut events = Vec::new();
        let mut buf = [0u8; 1500];
        while self.unit < until {
            let packet = self.generator.next().expect("endless");
            let now = self.now();
            let bytes = Bytes::from(packet.rtp_bytes(DD_EXT, &structure));
            self.router
                .handle_rtp(now, self.publisher, bytes)
                .expect("a valid packet");
            if self.audio.is_some() && packet.marker {
                let opus = self.opus();
                self.router
                    .handle_rtp(now, self.publisher, opus)
                    .expect("a valid packet");
            }
            self.router.handle_timeout(now);
            self.drain(&mut buf);
            events.extend(std::iter::from_fn(|| self.router.poll_event()));
            self.unit += u32::from(packet.marker);
        }
        events
    }

    fn drain(&mut self, buf: &mut [u8]) {
        while let Some(out) = self.router.poll_transmit(buf) {
            if out.down_track != self.down {
                continue;
            }
            if out.transmit.retransmission {
                self.retransmitted += 1;
            } else {
                self.sent.push(u16::from_be_bytes([buf[2], buf[3]]));
            }
        }
        while self.router.poll_rtcp(buf).is_some() {}
    }

    /// The viewer NACKs the last `count` packets it was sent.
    fn nack_last(&mut self, count: usize) {
        let mut pairs = NackPairs::default();
        for &seq in &self.sent[self.sent.len() - count..] {
            pairs.push(seq).expect("room");
        }
        let nack = RtcpFeedback::Nack(Nack {
            sender_ssrc: 9,
            media_ssrc: 0x10,
            pairs,
        });
        self.rtcp(&nack);
        let mut buf = [0u8; 1500];
        self.drain(&mut buf);
    }

    fn rtcp(&mut self, item: &RtcpFeedback<'_>) {
        let mut buf = [0u8; 1500];
        let len = RtcpWireWriter::new(b"viewer")
            .expect("a short CNAME")
            .write(item, &mut buf)
            .expect("fits");
        self.router
            .handle_rtcp(self.now(), self.viewer, &buf[..len])
            .expect("a known transport");
    }

    fn remb(&mut self, bitrate_bps: u64) -> Vec<Event> {
        let mut ssrcs = RembSsrcs::default();
        ssrcs.push(0x10).expect("room");
        self.rtcp(&RtcpFeedback::Remb(Remb {
            sender_ssrc: 9,
            bitrate_bps,
            ssrcs,
        }));
        std::iter::from_fn(|| self.router.poll_event()).collect()
    }

    fn bps(&self, layer: Layer) -> u64 {
        self.rate_of(self.track, layer)
    }

    fn rate_of(&self, track: TrackId, layer: Layer) -> u64 {
        self.router
            .layer_bitrates(track, self.now())
            .expect("published")
            .bps(layer)
    }

    fn forwarded(&self) -> Option<Layer> {
        self.router.down_track_info(self.down).and_then(|d| d.layer)
    }
}

fn allocated(events: &[Event]) -> Vec<Layer> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::LayerAllocated { layer, .. } => Some(*layer),
            _ => None,
        })
        .collect()
}

#[test]
fn layers_follow_the_estimate_down_at_once_and_up_after_the_hold_down() {
    let mut room = Room::new(LayerLimits::default());
    room.run(3);
    assert_eq!(room.forwarded(), Some(Layer::new(2, 2)), "no estimate: all");
    let between = (room.bps(Layer::new(1, 2)) + room.bps(Layer::new(2, 2))) / 2;
    let events = room.remb(between);
    assert!(events.contains(&Event::BandwidthEstimate {
        transport: room.viewer,
        bitrate_bps: between
    }));
    assert_eq!(allocated(&events), [Layer::new(1, 2)], "down at once");
    room.run(2);
    assert_eq!(room.forwarded(), Some(Layer::new(1, 2)));
    // Plenty of room two seconds after the downgrade: held down.
    assert!(allocated(&room.remb(50_000_000)).is_empty(), "held down");
    let later = room.run(4);
    assert_eq!(
        allocated(&later),
        [Layer::new(2, 2)],
        "up once the hold-down is over"
    );
    room.run(3);
    assert_eq!(room.forwarded(), Some(Layer::new(2, 2)));
    // Far too little: the lowest step, not nothing.
    assert_eq!(allocated(&room.remb(1_000)), [Layer::new(0, 0)]);
}

#[test]
fn the_viewers_choice_stays_a_ceiling() {
    let mut room = Room::new(LayerLimits {
        target: Layer::new(1, 1),
        max: Layer::MAX,
    });
    room.run(3);
    assert_eq!(allocated(&room.remb(50_000_000)), [Layer::new(1, 1)]);
    room.run(2);
    assert_eq!(room.forwarded(), Some(Layer::new(1, 1)));
    // Under the ceiling the steps are S0T0, S0T1 and S1T1: a fifth too little for S1T1 is
    // S0T1 (a layer within a tenth over the budget may stay).
    let events = room.remb(room.bps(Layer::new(1, 1)) * 4 / 5);
    assert_eq!(allocated(&events), [Layer::new(0, 1)]);
}

/// Audio comes off the estimate first: an estimate that would carry 360p alone carries only
/// 180p beside the viewer's audio.
#[test]
fn audio_is_paid_for_before_video() {
    let mut room = Room::new(LayerLimits::default()).with_audio();
    room.run(3);
    let audio = room.rate_of(room.audio.expect("audio"), Layer::new(0, 0));
    assert!(audio > 30_000, "{audio} bit/s of audio measured");
    let s1 = room.bps(Layer::new(1, 2));
    assert_eq!(allocated(&room.remb(s1 + audio)), [Layer::new(1, 2)]);
    assert_eq!(allocated(&room.remb(s1 + audio / 2)), [Layer::new(0, 2)]);
}

/// Without an estimate every NACK is answered; with one, retransmissions stay within what the
/// estimate leaves over after the media (and a small floor), and the rest are counted.
#[test]
fn retransmissions_stay_within_the_estimate() {
    let mut room = Room::new(LayerLimits::default());
    room.run(3);
    room.nack_last(34);
    assert_eq!(room.retransmitted, 34, "no estimate: all answered");
    let s1 = room.bps(Layer::new(1, 2));
    room.remb(s1);
    room.run(1);
    room.nack_last(34);
    // The NACKed packets come to about 5 kB; what the estimate leaves over (its 5 % floor,
    // and what rate drift leaves) over the 250 ms the budget holds is well under half that.
    let answered = room.retransmitted - 34;
    assert!(answered < 34 / 2, "{answered} answered");
    assert!(room.retransmitted > 34, "the floor repairs some");
    let refused = room.router.counters().retransmissions_over_budget;
    assert_eq!(refused as usize, 2 * 34 - room.retransmitted);
}

/// A viewer that chooses a low layer and then the top again is not held down: the down was
/// its own choice, not its link's.
#[test]
fn the_viewers_own_switch_down_and_up_is_not_held_down() {
    let mut room = Room::new(LayerLimits::default());
    room.run(3);
    room.remb(50_000_000);
    room.run(1);
    let set = |room: &mut Room, target: Layer| {
        let limits = LayerLimits {
            target,
            max: Layer::MAX,
        };
        room.router
            .set_limits(room.down, limits)
            .expect("a subscription");
        allocated(&std::iter::from_fn(|| room.router.poll_event()).collect::<Vec<_>>())
    };
    assert_eq!(set(&mut room, Layer::new(0, 2)), [Layer::new(0, 2)]);
    room.run(1);
    assert_eq!(set(&mut room, Layer::MAX), [Layer::new(2, 2)], "at once");
}

/// A VP8 publisher of three simulcast streams with SSRCs `first`, `first + 1` and `first + 2`.
fn publish_simulcast(router: &mut Router, first: u32) -> (TransportId, TrackId) {
    let publisher = router.add_transport();
    let mut config = TrackConfig::single(Codec::Vp8, first);
    config
        .streams
        .extend([first + 1, first + 2].map(|ssrc| StreamConfig {
            ssrc,
            rtx_ssrc: None,
        }));
    let track = router.publish(publisher, config).expect("a new transport");
    (publisher, track)
}

/// Three seconds of the streams of [`publish_simulcast`] at 30 fps: about 150, 450 and
/// 1,050 kbit/s. Returns when the last frame was sent.
fn send_simulcast(
    router: &mut Router,
    publisher: TransportId,
    first: u32,
    begin: Instant,
) -> Instant {
    // Packets per frame, of 15 header bytes and this many payload bytes.
    let streams = [(first, 1, 605), (first + 1, 2, 915), (first + 2, 4, 1_070)];
    let mut now = begin;
    let mut seq = 0u16;
    for frame in 0..90u32 {
        now = begin + FRAME * frame;
        for (ssrc, packets, size) in streams {
            for _ in 0..packets {
                let packet = common::vp8_packet(ssrc, seq, (frame % 2) as u8, size);
                router
                    .handle_rtp(now, publisher, packet)
                    .expect("a valid packet");
                seq = seq.wrapping_add(1);
            }
        }
    }
    now
}

/// A viewer's subscription with transport-wide CC.
fn subscribe_estimating(
    router: &mut Router,
    viewer: TransportId,
    track: TrackId,
    ssrc: u32,
) -> DownTrackId {
    let mut down = DownTrackConfig::new(ssrc, 96);
    down.transport_cc_ext_id = Some(3);
    router
        .subscribe(viewer, track, down, LayerLimits::default())
        .expect("new SSRCs")
}

/// A viewer with transport-wide CC is allocated at subscribe, before its first feedback,
/// from the transport's initial estimate: a guess, so the start takes a sixth off it. The
/// top simulcast stream here costs a twentieth more than a 1 Mbit/s guess, which a layer
/// already sent may exceed and keep, but a start must not take it.
#[test]
fn a_viewer_starts_a_sixth_within_its_initial_estimate() {
    for (initial_estimate_bps, spatial) in [(1_000_000, 1), (2_000_000, 2)] {
        let mut router = Router::new(RouterConfig {
            initial_estimate_bps,
            ..RouterConfig::default()
        });
        let (publisher, track) = publish_simulcast(&mut router, 0xA0);
        let now = send_simulcast(&mut router, publisher, 0xA0, Instant::now());
        let rates = router.layer_bitrates(track, now).expect("published");
        let top = rates.bps(Layer::new(2, 1));
        assert!(
            (1_000_000..1_100_000).contains(&top),
            "the top stream within a tenth over 1 Mbit/s: {rates:?}"
        );
        let viewer = router.add_transport();
        subscribe_estimating(&mut router, viewer, track, 0x10);
        let events: Vec<Event> = std::iter::from_fn(|| router.poll_event()).collect();
        let started: Vec<u8> = allocated(&events).iter().map(|l| l.spatial).collect();
        assert_eq!(started, [spatial], "from {initial_estimate_bps} bit/s");
    }
}

/// A viewer that already has an estimate and subscribes to one more track (a participant
/// joining a room with several publishers) has the new subscription allocated at once, not
/// at its next feedback: until then it would aim at the top simulcast stream and wait for
/// that stream's keyframe, then for the one of the stream allocation picks.
#[test]
fn a_later_subscription_on_a_viewer_with_an_estimate_is_allocated_at_subscribe() {
    let mut router = Router::new(RouterConfig::default());
    let (first_publisher, first) = publish_simulcast(&mut router, 0xA0);
    let (second_publisher, second) = publish_simulcast(&mut router, 0xB0);
    let begin = Instant::now();
    send_simulcast(&mut router, first_publisher, 0xA0, begin);
    send_simulcast(&mut router, second_publisher, 0xB0, begin);
    let viewer = router.add_transport();
    subscribe_estimating(&mut router, viewer, first, 0x10);
    let later = subscribe_estimating(&mut router, viewer, second, 0x20);
    let events: Vec<Event> = std::iter::from_fn(|| router.poll_event()).collect();
    let for_later: Vec<Layer> = events
        .iter()
        .filter_map(|e| match e {
            Event::LayerAllocated {
                down_track, layer, ..
            } if *down_track == later => Some(*layer),
            _ => None,
        })
        .collect();
    // Two tracks share the 1 Mbit/s guess less a sixth: neither top stream fits beside the
    // other's base.
    assert_eq!(for_later.len(), 1, "allocated at subscribe: {events:?}");
    assert!(
        for_later[0].spatial < 2,
        "within the estimate: {for_later:?}"
    );
    // Its first packets ask for a keyframe of the allocated stream, and of no other.
    let at = begin + FRAME * 90;
    for (seq, ssrc) in (1_000..).zip([0xB0, 0xB1, 0xB2]) {
        let packet = common::vp8_packet(ssrc, seq, 1, 600);
        router
            .handle_rtp(at, second_publisher, packet)
            .expect("a valid packet");
    }
    while router.poll_transmit(&mut [0; 1500]).is_some() {}
    router.handle_timeout(at);
    let mut asked = Vec::new();
    let mut buf = [0u8; 1500];
    while let Some(transmit) = router.poll_rtcp(&mut buf) {
        parse_compound(&buf[..transmit.len], |item| {
            if let RtcpFeedback::Pli(pli) = item {
                asked.push(pli.media_ssrc);
            }
        })
        .expect("our RTCP parses");
    }
    assert_eq!(
        asked,
        [0xB0 + u32::from(for_later[0].spatial)],
        "a keyframe of the allocated stream"
    );
}
