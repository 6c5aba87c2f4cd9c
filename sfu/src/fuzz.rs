//! Fuzz target bodies: `fuzz/` wraps each in three lines, and the tests run them over the real
//! captures.

use std::time::{Duration, Instant};

use bytes::Bytes;
use rtp_ext::codec::{parse_payload, Codec};
use rtp_ext::rtp::RtpPacket;
use selector::{Layer, LayerLimits};

use crate::capture::{classify, udp_datagram, Capture, PayloadKind};
use crate::engine::rtcp::{parse_compound, RtcpCrateWriter, RtcpFeedback, RtcpWriter};
use crate::engine::{
    DownTrackConfig, DownTrackId, Router, RouterConfig, TrackConfig, TrackId, TransportCc,
};

/// `capture`: the bytes as a capture file; every record down to its UDP payload, and every
/// RTP payload through each video codec's descriptor parser.
pub fn capture(data: &[u8]) {
    let Ok(capture) = Capture::open(data) else {
        return;
    };
    for record in capture.flatten() {
        assert!(
            record.data.len() <= data.len(),
            "a record lies inside the file"
        );
        let Ok(datagram) = udp_datagram(record.link_type, record.data) else {
            continue;
        };
        if classify(datagram.payload) != PayloadKind::Rtp {
            continue;
        }
        if let Ok(packet) = RtpPacket::parse(datagram.payload) {
            for codec in [Codec::Av1, Codec::Vp9, Codec::Vp8, Codec::H264] {
                if let Ok(descriptor) = parse_payload(codec, packet.payload()) {
                    let _ = descriptor.summary();
                }
            }
        }
    }
}

/// `rtcp`: the bytes as an RTCP datagram; every item parsed from it, written back and parsed
/// again, gives itself.
pub fn rtcp(data: &[u8]) {
    let mut writer = RtcpCrateWriter::new(b"fuzz").expect("a 4-octet cname fits");
    // An item's bytes never outgrow the datagram by more than the padding writing adds.
    let mut out = vec![0; data.len() + 64];
    let _ = parse_compound(data, |item| {
        if matches!(item, RtcpFeedback::Other(_)) {
            return;
        }
        let len = writer
            .write(&item, &mut out)
            .expect("a parsed item can be written");
        let mut again = Vec::new();
        let summary = parse_compound(&out[..len], |item| again.push(item));
        assert_eq!(summary.map(|s| s.items), Ok(1), "{item:?}");
        assert_eq!(again, [item]);
    });
}

/// The SSRCs the `engine` body publishes: the real AV1 packets' in the shared vectors (DD as
/// extension 11, transport-wide CC as 5), with RTX, then a VP8 and an Opus stream.
pub const ENGINE_SSRCS: [u32; 5] = [0x114e_d316, 0x2ab2_873c, 0x481d_4dca, 0x2000, 0x3000];

/// `engine`: the bytes as a session: records of `op, len, bytes`. `op % 4` is 0 for an RTP
/// packet from a publisher, 1 for RTCP from subscriber `op / 4`, 2 for RTCP from publisher `op / 4`,
/// 3 to let `len` milliseconds pass. After every record all output is drained: every packet
/// out parses as RTP with its subscriber's SSRC, every RTCP datagram out parses, and each RTP
/// packet in is counted once.
pub fn engine(data: &[u8]) {
    let (mut router, tracks, subscribers) = engine_router();
    let mut now = Instant::now();
    let mut rtp_in = 0;
    let mut rest = data;
    while let [op, len, tail @ ..] = rest {
        let (bytes, after) = tail.split_at(usize::from(*len).min(tail.len()));
        rest = after;
        match op % 4 {
            0 => {
                rtp_in += 1;
                let _ = router.handle_rtp(now, Bytes::copy_from_slice(bytes));
            }
            1 => {
                let (id, _) = subscribers[usize::from(op / 4) % subscribers.len()];
                let _ = router.handle_subscriber_rtcp(now, id, bytes);
            }
            2 => {
                let track = tracks[usize::from(op / 4) % tracks.len()];
                let _ = router.handle_publisher_rtcp(now, track, bytes);
            }
            _ => {
                now += Duration::from_millis(u64::from(*len));
                router.handle_timeout(now);
            }
        }
        drain(&mut router, &subscribers);
        assert_eq!(
            router.counters().rtp_in,
            rtp_in,
            "every packet counted once"
        );
    }
}

/// A router with the `ENGINE_SSRCS` tracks and subscribers at several layers, some with RTX.
fn engine_router() -> (Router, Vec<TrackId>, Vec<(DownTrackId, u32)>) {
    let mut router = Router::new(RouterConfig::default());
    let mut tracks = Vec::new();
    let mut subscribers = Vec::new();
    for (i, &ssrc) in ENGINE_SSRCS.iter().enumerate() {
        let codec = [Codec::Av1, Codec::Av1, Codec::Av1, Codec::Vp8, Codec::Opus][i];
        let mut track = TrackConfig::single(codec, ssrc);
        if codec == Codec::Av1 {
            track.dd_ext_id = Some(11);
            track.streams[0].rtx_ssrc = Some(ssrc ^ 1);
            track.transport_cc = Some(TransportCc {
                ext_id: 5,
                transport: 1,
            });
        }
        track.audio_level_ext_id = (codec == Codec::Opus).then_some(1);
        let track = router.publish(track).expect("distinct SSRCs");
        tracks.push(track);
        for (j, target) in [Layer::MAX, Layer::new(0, 0)].into_iter().enumerate() {
            let out_ssrc = 0x5000 + 16 * i as u32 + 2 * j as u32;
            let mut config = DownTrackConfig::new(out_ssrc, 96);
            config.dd_ext_id = Some(11);
            config.rtx = (j == 0).then_some((out_ssrc + 1, 97));
            let limits = LayerLimits {
                target,
                max: Layer::MAX,
            };
            let id = router.subscribe(track, config, limits).expect("published");
            subscribers.push((id, out_ssrc));
        }
    }
    (router, tracks, subscribers)
}

fn drain(router: &mut Router, subscribers: &[(DownTrackId, u32)]) {
    let mut buf = [0u8; 1500];
    while let Some(out) = router.poll_transmit(&mut buf) {
        let mut packet = buf[..out.transmit.len].to_vec();
        packet.extend_from_slice(&out.transmit.payload);
        let ssrc = RtpPacket::parse(&packet)
            .expect("what the router sends parses")
            .fields()
            .ssrc;
        let (_, out_ssrc) = subscribers
            .iter()
            .find(|(id, _)| *id == out.down_track)
            .expect("a known subscriber");
        assert!(
            ssrc == *out_ssrc || ssrc == out_ssrc + 1,
            "the subscriber's own SSRC"
        );
    }
    while let Some(rtcp) = router.poll_rtcp(&mut buf) {
        parse_compound(&buf[..rtcp.len], |_| {}).expect("what the router sends parses");
    }
    while router.poll_event().is_some() {}
}
