//! A simulcast publisher that pauses one of its streams (its encoder ran short of bandwidth,
//! or the page set `active: false` on the encoding), over the seeded in-memory network: the
//! stream's viewer moves to the stream below at once and asks for its keyframe, never
//! waiting on a picture that stopped; when the stream resumes the viewer goes back to it.

use std::time::{Duration, Instant};

use bytes::Bytes;
use rtp_ext::codec::Codec;
use selector::scalability::{GeneratorConfig, ScalabilityMode, StreamGenerator};
use selector::{Layer, LayerLimits};
use sfu::engine::rtcp::{parse_compound, RtcpFeedback};
use sfu::engine::{
    DownTrackConfig, Event, RouterConfig, StreamConfig, TrackConfig, TransportId, PAUSE_AFTER,
};
use sfu::sim::{Delivery, LinkConfig, Network};

const DD_EXT: u8 = 11;
const FRAME: Duration = Duration::from_millis(33);
const SSRCS: [u32; 3] = [0xA0, 0xA1, 0xA2];
const LINK: LinkConfig = LinkConfig {
    delay: Duration::from_millis(20),
    jitter: Duration::ZERO,
    reorder: false,
    loss: 0.0,
    duplicate: 0.0,
    bottleneck: None,
};

/// Three L1T3 streams, each with its own descriptor, answering keyframe requests.
struct Publisher {
    streams: Vec<StreamGenerator>,
    /// Whether each stream is sent.
    sending: [bool; 3],
}

impl Publisher {
    fn new() -> Self {
        let streams = SSRCS
            .iter()
            .map(|&ssrc| {
                StreamGenerator::new(
                    ScalabilityMode::L1T3,
                    GeneratorConfig {
                        ssrc,
                        keyframe_interval_tus: 0,
                        packets_per_frame: 1..=2,
                        ..GeneratorConfig::default()
                    },
                )
            })
            .collect();
        Self {
            streams,
            sending: [true; 3],
        }
    }

    /// One frame of every stream sent.
    fn frame(&mut self) -> Vec<Bytes> {
        let mut out = Vec::new();
        for (generator, _) in self
            .streams
            .iter_mut()
            .zip(self.sending)
            .filter(|(_, s)| *s)
        {
            let structure = generator.structure().clone();
            loop {
                let packet = generator.next().expect("endless");
                out.push(Bytes::from(packet.rtp_bytes(DD_EXT, &structure)));
                if packet.marker {
                    break;
                }
            }
        }
        out
    }

    fn on_rtcp(&mut self, datagram: &[u8]) {
        parse_compound(datagram, |item| {
            let media = match item {
                RtcpFeedback::Pli(pli) => pli.media_ssrc,
                RtcpFeedback::Fir(fir) => fir.entries.iter().next().map_or(0, |e| e.ssrc),
                _ => return,
            };
            if let Some(stream) = SSRCS.iter().position(|&s| s == media) {
                self.streams[stream].request_keyframe();
            }
        })
        .expect("the router's RTCP parses");
    }
}

struct Room {
    net: Network,
    publisher: Publisher,
    up: TransportId,
    viewer: TransportId,
    /// When the viewer received each media packet.
    received: Vec<Instant>,
    /// When its layer changed, and to what.
    layers: Vec<(Instant, Option<Layer>)>,
}

impl Room {
    fn new() -> Self {
        let start = Instant::now();
        let mut net = Network::new(RouterConfig::default(), start, 7);
        let up = net.add_transport(LINK, LINK);
        let viewer = net.add_transport(LINK, LINK);
        let mut config = TrackConfig::single(Codec::Vp8, SSRCS[0]);
        config.dd_ext_id = Some(DD_EXT);
        config
            .streams
            .extend(SSRCS[1..].iter().map(|&ssrc| StreamConfig {
                ssrc,
                rtx_ssrc: None,
            }));
        let mut down = DownTrackConfig::new(0x10, 96);
        down.dd_ext_id = Some(DD_EXT);
        let limits = LayerLimits {
            target: Layer::new(1, 2),
            max: Layer::MAX,
        };
        net.with_router(|router| {
            let track = router.publish(up, config).expect("a new transport");
            router
                .subscribe(viewer, track, down, limits)
                .expect("a new transport");
        });
        Self {
            net,
            publisher: Publisher::new(),
            up,
            viewer,
            received: Vec::new(),
            layers: Vec::new(),
        }
    }

    /// Sends a frame of every stream sent every 33 ms until `until`.
    fn run(&mut self, until: Duration) {
        let end = self.net.start() + until;
        while self.net.now() < end {
            for packet in self.publisher.frame() {
                self.net.send_rtp(self.up, packet).expect("on the network");
            }
            let next = self.net.now() + FRAME;
            self.net.run_until(next);
            for arrival in self.net.take_arrivals(self.up) {
                if let Delivery::Rtcp { datagram, .. } = arrival.delivery {
                    self.publisher.on_rtcp(&datagram);
                }
            }
            for arrival in self.net.take_arrivals(self.viewer) {
                if let Delivery::Media { .. } = arrival.delivery {
                    self.received.push(arrival.at);
                }
            }
            for (at, event) in self.net.take_events() {
                if let Event::LayerChanged { layer, .. } = event {
                    self.layers.push((at, layer));
                }
            }
        }
    }

    /// The layer the viewer was given first after `since` (between two streams it has none
    /// until the new one's keyframe), and when.
    fn first_change_after(&self, since: Instant) -> Option<(Duration, Layer)> {
        self.layers
            .iter()
            .find_map(|&(at, layer)| Some((at.checked_duration_since(since)?, layer?)))
            .filter(|(after, _)| !after.is_zero())
    }

    /// The longest the viewer went without a packet between `from` and `to`.
    fn longest_gap(&self, from: Instant, to: Instant) -> Duration {
        let within: Vec<Instant> = self
            .received
            .iter()
            .copied()
            .filter(|&at| at >= from && at <= to)
            .collect();
        within
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or(to - from)
    }
}

#[test]
fn a_paused_streams_viewer_moves_down_at_once_and_back_when_it_resumes() {
    let mut room = Room::new();
    room.run(Duration::from_secs(3));
    let start = room.net.start();
    assert_eq!(
        room.layers.last().map(|&(_, l)| l),
        Some(Some(Layer::new(1, 2))),
        "the viewer gets the stream it asked for: {:?}",
        room.layers
    );
    room.publisher.sending[1] = false;
    let paused = room.net.now();
    room.run(Duration::from_secs(6));
    let (after, layer) = room.first_change_after(paused).expect("the viewer moved");
    assert_eq!(layer.spatial, 0, "to the stream below");
    // The pause is seen within its bound, and the keyframe asked for comes a round trip later.
    assert!(
        after <= PAUSE_AFTER + Duration::from_millis(250),
        "moved {after:?} after the pause"
    );
    let gap = room.longest_gap(paused, start + Duration::from_secs(6));
    assert!(
        gap <= PAUSE_AFTER + Duration::from_millis(250),
        "the viewer went {gap:?} without a packet"
    );
    room.publisher.sending[1] = true;
    let resumed = room.net.now();
    room.run(Duration::from_secs(8));
    let (after, layer) = room.first_change_after(resumed).expect("back up");
    assert_eq!(layer.spatial, 1, "back to its stream");
    assert!(
        after <= Duration::from_millis(500),
        "back {after:?} after it resumed"
    );
}
