//! A viewer transport's layers fitted to its bandwidth estimate (here its REMB), on ideal
//! links: down at once when what it is sent no longer fits, up only after the hold-down,
//! never above the layer the viewer asked for, and the audio it receives never cut.

use crate::common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use rtp_ext::codec::Codec;
use selector::scalability::{GeneratorConfig, ScalabilityMode, StreamGenerator};
use selector::{Layer, LayerLimits};
use sfu::engine::bwe::EstimatorConfig;
use sfu::engine::rtcp::{parse_compound, Nack, NackPairs, Remb, RembSsrcs, RtcpFeedback};
use sfu::engine::{
    DownTrackConfig, DownTrackId, Event, RouterConfig, RouterError, StreamConfig, TrackConfig,
    TrackId, TransportId,
};
use sfu::sim::{Delivery, LinkConfig, Network};

const DD_EXT: u8 = 11;
const FRAME: Duration = Duration::from_millis(33);

struct Room {
    network: Network,
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
        let start = Instant::now();
        let mut network = Network::new(RouterConfig::default(), start, 0);
        let publisher = transport(&mut network);
        let viewer = transport(&mut network);
        let (track, down) = network
            .with_router(|router| {
                let mut config = TrackConfig::single(Codec::Av1, 0x5151);
                config.dd_ext_id = Some(DD_EXT);
                let track = router.publish(publisher, config)?;
                let mut down = DownTrackConfig::new(0x10, 45);
                down.dd_ext_id = Some(DD_EXT);
                let down = router.subscribe(viewer, track, down, limits)?;
                Ok::<_, RouterError>((track, down))
            })
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
            network,
            publisher,
            track,
            viewer,
            down,
            generator,
            start,
            unit: 0,
            audio: None,
            sent: Vec::new(),
            retransmitted: 0,
        }
    }

    /// The same publisher sends Opus too, and the viewer receives it.
    fn with_audio(mut self) -> Self {
        let (publisher, viewer) = (self.publisher, self.viewer);
        let track = self
            .network
            .with_router(|router| {
                let track = router.publish(publisher, TrackConfig::single(Codec::Opus, 0x0A0A))?;
                let config = DownTrackConfig::new(0x20, 111);
                router.subscribe(viewer, track, config, LayerLimits::default())?;
                Ok::<_, RouterError>(track)
            })
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

    /// The time of the last temporal unit sent, where the viewer's feedback comes in.
    fn now(&self) -> Instant {
        self.network.now()
    }

    /// Streams for `seconds`, a temporal unit at a time; returns the events.
    fn run(&mut self, seconds: u32) -> Vec<Event> {
        let structure = self.generator.structure().clone();
        let until = self.unit + seconds * 30;
        while self.unit < until {
            let at = self.start + FRAME * self.unit;
            loop {
                let packet = self.generator.next().expect("endless");
                let bytes = Bytes::from(packet.rtp_bytes(DD_EXT, &structure));
                self.send(at, bytes);
                if packet.marker {
                    break;
                }
            }
            if self.audio.is_some() {
                let opus = self.opus();
                self.send(at, opus);
            }
            self.network.run_until(at);
            assert_eq!(self.network.take_refused(), [], "valid packets");
            self.receive();
            self.unit += 1;
        }
        self.events()
    }

    fn send(&mut self, at: Instant, packet: Bytes) {
        self.network
            .send_rtp_at(at, self.publisher, packet)
            .expect("on the network");
    }

    /// Notes the video that reached the viewer.
    fn receive(&mut self) {
        for media in self.network.take_media(self.viewer) {
            if media.down_track != self.down {
                continue;
            }
            if media.retransmission {
                self.retransmitted += 1;
            } else {
                self.sent.push(media.sequence_number);
            }
        }
    }

    fn events(&mut self) -> Vec<Event> {
        let events = self.network.take_events().into_iter();
        events.map(|(_, event)| event).collect()
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
        self.receive();
    }

    /// The viewer's RTCP, handled now.
    fn rtcp(&mut self, item: &RtcpFeedback<'_>) {
        self.network
            .send_feedback(self.viewer, item)
            .expect("on the network");
        self.network.run_until(self.now());
        assert_eq!(self.network.take_refused(), [], "a known transport");
    }

    fn remb(&mut self, bitrate_bps: u64) -> Vec<Event> {
        let mut ssrcs = RembSsrcs::default();
        ssrcs.push(0x10).expect("room");
        self.rtcp(&RtcpFeedback::Remb(Remb {
            sender_ssrc: 9,
            bitrate_bps,
            ssrcs,
        }));
        self.events()
    }

    fn bps(&self, layer: Layer) -> u64 {
        self.rate_of(self.track, layer)
    }

    fn rate_of(&self, track: TrackId, layer: Layer) -> u64 {
        self.network
            .router()
            .layer_bitrates(track, self.now())
            .expect("published")
            .bps(layer)
    }

    fn forwarded(&self) -> Option<Layer> {
        let info = self.network.router().down_track_info(self.down);
        info.and_then(|d| d.layer)
    }

    /// Sets the layers the viewer asks for; returns the allocations that made.
    fn set_target(&mut self, target: Layer) -> Vec<Layer> {
        let (down, limits) = (self.down, limits(target));
        self.network
            .with_router(|router| router.set_limits(down, limits))
            .expect("a subscription");
        allocated(&self.events())
    }
}

fn transport(network: &mut Network) -> TransportId {
    network.add_transport(LinkConfig::default(), LinkConfig::default())
}

fn limits(target: Layer) -> LayerLimits {
    LayerLimits {
        target,
        max: Layer::MAX,
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
    let mut room = Room::new(limits(Layer::new(1, 1)));
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
    let refused = room.network.router().counters().retransmissions_over_budget;
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
    assert_eq!(room.set_target(Layer::new(0, 2)), [Layer::new(0, 2)]);
    room.run(1);
    assert_eq!(room.set_target(Layer::MAX), [Layer::new(2, 2)], "at once");
}

/// A VP8 publisher of three simulcast streams with SSRCs `first`, `first + 1` and `first + 2`.
fn publish_simulcast(network: &mut Network, first: u32) -> (TransportId, TrackId) {
    let publisher = transport(network);
    let mut config = TrackConfig::single(Codec::Vp8, first);
    config
        .streams
        .extend([first + 1, first + 2].map(|ssrc| StreamConfig {
            ssrc,
            rtx_ssrc: None,
        }));
    let track = network
        .with_router(|router| router.publish(publisher, config))
        .expect("a new transport");
    (publisher, track)
}

/// Three seconds of the streams of [`publish_simulcast`] at 30 fps from `begin`: about 150,
/// 450 and 1,050 kbit/s. Returns when the last frame is sent.
fn send_simulcast(
    network: &mut Network,
    publisher: TransportId,
    first: u32,
    begin: Instant,
) -> Instant {
    // Packets per frame, of 15 header bytes and this many payload bytes.
    let streams = [(first, 1, 605), (first + 1, 2, 915), (first + 2, 4, 1_070)];
    let mut at = begin;
    let mut seq = 0u16;
    for frame in 0..90u32 {
        at = begin + FRAME * frame;
        for (ssrc, packets, size) in streams {
            for _ in 0..packets {
                let packet = common::vp8_packet(ssrc, seq, (frame % 2) as u8, size);
                network
                    .send_rtp_at(at, publisher, packet)
                    .expect("on the network");
                seq = seq.wrapping_add(1);
            }
        }
    }
    at
}

/// A viewer's subscription with transport-wide CC.
fn subscribe_estimating(
    network: &mut Network,
    viewer: TransportId,
    track: TrackId,
    ssrc: u32,
) -> DownTrackId {
    let mut down = DownTrackConfig::new(ssrc, 96);
    down.transport_cc_ext_id = Some(3);
    network
        .with_router(|router| router.subscribe(viewer, track, down, LayerLimits::default()))
        .expect("new SSRCs")
}

/// A viewer with transport-wide CC is allocated at subscribe, before its first feedback,
/// from the transport's initial estimate: a guess, so the start takes a sixth off it. The
/// top simulcast stream here costs a twentieth more than a 1 Mbit/s guess, which a layer
/// already sent may exceed and keep, but a start must not take it.
#[test]
fn a_viewer_starts_a_sixth_within_its_initial_estimate() {
    for (initial_estimate_bps, spatial) in [(1_000_000, 1), (2_000_000, 2)] {
        let config = RouterConfig {
            initial_estimate_bps,
            ..RouterConfig::default()
        };
        let begin = Instant::now();
        let mut network = Network::new(config, begin, 0);
        let (publisher, track) = publish_simulcast(&mut network, 0xA0);
        let last = send_simulcast(&mut network, publisher, 0xA0, begin);
        network.run_until(last);
        assert_eq!(network.take_refused(), [], "valid packets");
        let rates = network.router().layer_bitrates(track, last);
        let rates = rates.expect("published");
        let top = rates.bps(Layer::new(2, 1));
        assert!(
            (1_000_000..1_100_000).contains(&top),
            "the top stream within a tenth over 1 Mbit/s: {rates:?}"
        );
        network.take_events();
        let viewer = transport(&mut network);
        subscribe_estimating(&mut network, viewer, track, 0x10);
        let events: Vec<Event> = network.take_events().into_iter().map(|e| e.1).collect();
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
    let begin = Instant::now();
    let mut network = Network::new(RouterConfig::default(), begin, 0);
    let (first_publisher, first) = publish_simulcast(&mut network, 0xA0);
    let (second_publisher, second) = publish_simulcast(&mut network, 0xB0);
    send_simulcast(&mut network, first_publisher, 0xA0, begin);
    let last = send_simulcast(&mut network, second_publisher, 0xB0, begin);
    network.run_until(last);
    assert_eq!(network.take_refused(), [], "valid packets");
    network.take_events();
    network.take_arrivals(second_publisher);
    let viewer = transport(&mut network);
    subscribe_estimating(&mut network, viewer, first, 0x10);
    let later = subscribe_estimating(&mut network, viewer, second, 0x20);
    let events: Vec<Event> = network.take_events().into_iter().map(|e| e.1).collect();
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
        network
            .send_rtp_at(at, second_publisher, packet)
            .expect("on the network");
    }
    network.run_until(at);
    assert_eq!(network.take_refused(), [], "valid packets");
    let mut asked = Vec::new();
    for arrival in network.take_arrivals(second_publisher) {
        let Delivery::Rtcp { datagram, .. } = arrival.delivery else {
            continue;
        };
        parse_compound(&datagram, |item| {
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

/// A REMB says up to 2^64 bits per second: a viewer without transport-wide feedback, whose
/// REMB is its estimate, is granted what the server grants one viewer, and what is derived
/// from the estimate (its pacing, its retransmission budget) holds.
#[test]
fn a_remb_past_any_rate_is_taken_as_the_most_one_viewer_is_granted() {
    let mut room = Room::new(LayerLimits::default());
    room.run(2);
    let events = room.remb(u64::MAX);
    let granted = EstimatorConfig::default().max_bps;
    assert!(
        events.contains(&Event::BandwidthEstimate {
            transport: room.viewer,
            bitrate_bps: granted
        }),
        "{events:?}"
    );
    room.run(2);
    let retransmitted = room.retransmitted;
    room.nack_last(4);
    assert_eq!(room.retransmitted, retransmitted + 4);
    assert_eq!(room.forwarded(), Some(Layer::new(2, 2)));
}
