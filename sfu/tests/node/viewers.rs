//! Viewers through the node's core: the layers each gets (an AV1 viewer without the DD gets
//! the base spatial layer only), the publisher it follows, simulcast streams bound by rid, its
//! estimate, stats and `/metrics` series, and the transport-wide sequence it is sent.

use rtp_ext::codec::{Codec, MediaKind};
use rtp_ext::rtp::RtpPacket;
use selector::Layer;
use sfu::engine::{StreamConfig, StreamIds, TrackConfig};
use sfu::node::core::CoreError;
use sfu::node::metrics::DropReason;
use sfu::node::stats::Ceiling;
use sfu::node::testing::{av1_track, av1_viewer, publisher, Harness, AV1_PT};

use crate::common;
use crate::fixtures::{addr, core, harness, l3t3, spatial_ids, DD_IN, DD_OUT};

#[test]
fn viewers_get_their_layers_and_av1_without_dd_only_the_base_layer() {
    let mut h = harness();
    let with_dd = h.viewer(
        "room",
        av1_viewer(0x10, Some(DD_OUT), Layer::MAX),
        addr(5001),
    );
    h.viewer("room", av1_viewer(0x20, None, Layer::MAX), addr(5002));
    h.publisher("room", publisher([av1_track(0xA1, DD_IN)]), addr(5000));
    assert_eq!(h.core.snapshot().subscriptions, 2);
    for packet in l3t3(0xA1, 30) {
        h.send(addr(5000), &packet);
    }
    let full = h.media_to(addr(5001));
    let spatial = spatial_ids(&full, DD_OUT);
    assert_eq!(spatial.len(), full.len(), "every packet carries our DD");
    assert!((0..3).all(|s| spatial.contains(&s)), "all three layers");

    let base = h.media_to(addr(5002));
    assert!(!base.is_empty());
    for p in &base {
        let packet = RtpPacket::parse(p).expect("RTP");
        assert_eq!(packet.extension_count(), 0, "no DD toward this viewer");
        assert_eq!(packet.fields().payload_type, AV1_PT);
    }
    assert!(
        base.len() * 2 < full.len(),
        "the base layer alone: {} of {} packets",
        base.len(),
        full.len()
    );

    h.core
        .set_target(with_dd, Layer::new(0, 0))
        .expect("a viewer");
    let before = h.media_to(addr(5001)).len();
    for packet in l3t3(0xA1, 60).split_off(l3t3(0xA1, 30).len()) {
        h.send(addr(5000), &packet);
    }
    let after = &h.media_to(addr(5001))[before..];
    assert!(!after.is_empty());
    assert!(spatial_ids(after, DD_OUT).iter().all(|&s| s == 0));
}

#[test]
fn a_viewer_moves_to_the_next_publisher_when_the_first_leaves() {
    let mut h = harness();
    let first = h.publisher("room", publisher([av1_track(0xA1, DD_IN)]), addr(6000));
    h.viewer(
        "room",
        av1_viewer(0x10, Some(DD_OUT), Layer::MAX),
        addr(6001),
    );
    h.publisher("room", publisher([av1_track(0xB1, DD_IN)]), addr(6002));
    h.publisher("other", publisher([av1_track(0xC1, DD_IN)]), addr(6003));
    assert_eq!(h.core.snapshot().subscriptions, 1);
    h.core.remove_peer(first).expect("known");
    assert_eq!(h.core.poll_removed(), Some(first));
    let snapshot = h.core.snapshot();
    assert_eq!((snapshot.publishers, snapshot.subscriptions), (2, 1));
    for packet in l3t3(0xB1, 10) {
        h.send(addr(6002), &packet);
    }
    let from_the_room = h.media_to(addr(6001)).len();
    assert!(from_the_room > 0, "the second publisher's media");
    for packet in l3t3(0xC1, 10) {
        h.send(addr(6003), &packet);
    }
    assert_eq!(
        h.media_to(addr(6001)).len(),
        from_the_room,
        "nothing from another room"
    );
}

#[test]
fn simulcast_streams_are_bound_by_rid() {
    let mut h = harness();
    let mut config = av1_track(0xF0, DD_IN);
    config.streams = (0..2)
        .map(|i| StreamConfig {
            ssrc: 0xF0 + i,
            rtx_ssrc: None,
        })
        .collect();
    config.stream_ids = StreamIds::Rids {
        rids: ["q", "f"].map(String::from).into_iter().collect(),
        rid_ext: 12,
        repaired_rid_ext: Some(13),
        announced: Default::default(),
    };
    h.publisher("room", publisher([config]), addr(7000));
    h.viewer(
        "room",
        av1_viewer(0x10, Some(DD_OUT), Layer::MAX),
        addr(7001),
    );
    for packet in l3t3(0x5151, 20) {
        h.send(addr(7000), &common::with_rid(&packet, 12, b"f"));
    }
    assert!(
        !h.media_to(addr(7001)).is_empty(),
        "stream f is bound and forwarded"
    );
    let stats = h.core.snapshot();
    assert_eq!(stats.node.dropped(DropReason::UnknownSsrc), 0);
}

#[test]
fn a_viewer_negotiates_against_the_live_publisher_not_a_reaped_one() {
    let mut h = harness();
    let codec = |codec| sfu::node::sdp::RoomCodec {
        codec,
        fmtp: String::new(),
    };
    let mut vp8 = publisher([TrackConfig::single(Codec::Vp8, 0xE1)]);
    vp8.codecs = vec![codec(Codec::Vp8)];
    let first = h.publisher("room", vp8, addr(9300));
    let mut av1 = publisher([av1_track(0xE2, DD_IN)]);
    av1.codecs = vec![codec(Codec::Av1)];
    h.publisher("room", av1, addr(9301));
    assert_eq!(
        h.core.room_codecs("room", None),
        Ok(vec![codec(Codec::Vp8)])
    );
    h.core.remove_peer(first).expect("live");
    assert_eq!(
        h.core.room_codecs("room", None),
        Ok(vec![codec(Codec::Av1)])
    );
    assert_eq!(h.core.room_codecs("elsewhere", None), Ok(Vec::new()));
    assert_eq!(
        h.core.room_codecs("room", Some("nobody")),
        Err(CoreError::NoSuchParticipant)
    );
}

/// A viewer's REMB for its media SSRC.
fn remb(media_ssrc: u32, bitrate_bps: u64) -> Vec<u8> {
    use sfu::engine::rtcp::{Remb, RembSsrcs, RtcpFeedback, RtcpWireWriter, RtcpWriter};
    let mut ssrcs = RembSsrcs::default();
    ssrcs.push(media_ssrc).expect("room");
    let remb = RtcpFeedback::Remb(Remb {
        sender_ssrc: 9,
        bitrate_bps,
        ssrcs,
    });
    let mut buf = [0u8; 100];
    let len = RtcpWireWriter::new(b"viewer")
        .expect("a short CNAME")
        .write(&remb, &mut buf)
        .expect("fits");
    buf[..len].to_vec()
}

#[test]
fn the_engines_events_are_consumed_a_viewers_estimate_kept() {
    let mut h = harness();
    h.publisher("room", publisher([av1_track(0xA1, DD_IN)]), addr(9400));
    let viewer = h.viewer(
        "room",
        av1_viewer(0x10, Some(DD_OUT), Layer::MAX),
        addr(9401),
    );
    for packet in l3t3(0xA1, 10) {
        h.send(addr(9400), &packet);
    }
    assert!(
        h.core.counters().layer_changes >= 1,
        "the viewer started on a layer"
    );
    h.send(addr(9401), &remb(0x10, 800_000));
    assert_eq!(h.core.counters().bandwidth_estimates, 1);
    assert_eq!(
        h.core.peer(viewer).and_then(|p| p.estimate_bps),
        Some(800_000)
    );
}

/// The value of one sample of the text format, by its name and labels.
fn sample(text: &str, series: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// A viewer's stats and its `/metrics` series follow what it asked for, its estimate and the
/// allocation that estimate made; an AV1 viewer without the DD has the base spatial layer as
/// its ceiling; a viewer's series go with it.
#[test]
fn a_viewers_estimate_and_layers_show_in_its_stats_and_metrics() {
    let mut h = harness();
    h.publisher("room", publisher([av1_track(0xA1, DD_IN)]), addr(9600));
    let asked = Layer::new(u8::MAX, 1);
    let viewer = h.viewer("room", av1_viewer(0x10, Some(DD_OUT), asked), addr(9601));
    let no_dd = h.viewer("room", av1_viewer(0x20, None, asked), addr(9602));
    for packet in l3t3(0xA1, 10) {
        h.send(addr(9600), &packet);
    }
    let stats = h.core.viewer_stats(viewer).expect("a viewer");
    assert_eq!(stats.estimate_bps, None);
    let [video] = stats.tracks.as_slice() else {
        panic!("one subscription: {stats:?}");
    };
    assert_eq!(video.kind, MediaKind::Video);
    assert_eq!(video.codec, Codec::Av1);
    assert_eq!(
        video.layer,
        Some(Layer::new(2, 1).into()),
        "the top, as asked"
    );
    assert_eq!(video.allocated, None, "no estimate, no allocation");
    let open_spatial = Ceiling {
        spatial: None,
        temporal: Some(1),
    };
    assert_eq!(video.ceiling, Some(open_spatial));
    assert!(video.bytes_sent > 0 && video.packets_sent > 0);
    let base_only = h.core.viewer_stats(no_dd).expect("a viewer").tracks;
    assert_eq!(
        base_only.first().and_then(|t| t.ceiling),
        Some(Ceiling {
            spatial: Some(0),
            temporal: Some(1)
        })
    );

    // Far too little for anything above the base layer.
    h.send(addr(9601), &remb(0x10, 1_000));
    let stats = h.core.viewer_stats(viewer).expect("a viewer");
    assert_eq!(stats.estimate_bps, Some(1_000));
    let video = stats.tracks.first().expect("subscribed");
    assert_eq!(video.allocated, Some(Layer::BASE.into()));

    let text = h.core.snapshot().render();
    let labels = format!("{{session=\"{viewer}\",room=\"room\"");
    let series = |name: &str, more: &str| sample(&text, &format!("strata_{name}{labels}{more}}}"));
    assert_eq!(series("viewer_estimate_bps", ""), Some(1_000), "{text}");
    let axis = |a| format!(",axis=\"{a}\"");
    assert_eq!(series("viewer_allocated_layer", &axis("spatial")), Some(0));
    assert_eq!(series("viewer_allocated_layer", &axis("temporal")), Some(0));
    assert_eq!(series("viewer_ceiling_layer", &axis("temporal")), Some(1));
    assert_eq!(
        series("viewer_ceiling_layer", &axis("spatial")),
        None,
        "an open axis has no sample"
    );
    let video_kind = ",kind=\"video\"";
    assert_eq!(
        series("viewer_sent_bytes_total", video_kind),
        Some(video.bytes_sent)
    );
    assert_eq!(
        series("viewer_sent_packets_total", video_kind),
        Some(video.packets_sent)
    );
    let other = format!("{{session=\"{no_dd}\",room=\"room\"}}");
    assert_eq!(
        sample(&text, &format!("strata_viewer_estimate_bps{other}")),
        None,
        "no estimate from the other viewer"
    );
    assert!(text.contains(&format!("strata_viewer_ceiling_layer{{session=\"{no_dd}\"")));

    h.core.remove_peer(viewer).expect("live");
    let text = h.core.snapshot().render();
    assert!(
        !text.contains(&viewer.to_string()),
        "its series went with it"
    );
    assert!(h.core.viewer_stats(viewer).is_none());
}

/// With viewer estimation on, a viewer that negotiated transport-wide CC gets the sequence on
/// every packet, counting up in send order; with it off (the default), none.
#[test]
fn viewer_estimation_stamps_the_transport_wide_sequence() {
    const TWCC: u8 = 3;
    for on in [false, true] {
        let mut h = Harness::new(core().with_viewer_estimation(on));
        h.publisher("room", publisher([av1_track(0xA1, DD_IN)]), addr(9500));
        let mut viewer = av1_viewer(0x10, Some(DD_OUT), Layer::MAX);
        if let Some(video) = viewer.video.as_mut() {
            video.transport_cc_ext_id = Some(TWCC);
        }
        h.viewer("room", viewer, addr(9501));
        for packet in l3t3(0xA1, 10) {
            h.send(addr(9500), &packet);
        }
        let media = h.media_to(addr(9501));
        assert!(!media.is_empty(), "forwarded");
        let sequences: Vec<u16> = media
            .iter()
            .filter_map(|p| {
                RtpPacket::parse(p)
                    .ok()?
                    .extension(TWCC)
                    .map(|v| u16::from_be_bytes([v[0], v[1]]))
            })
            .collect();
        if on {
            let expected: Vec<u16> = (0..media.len() as u16).collect();
            assert_eq!(sequences, expected, "one sequence, in send order");
        } else {
            assert!(sequences.is_empty(), "off by default");
        }
    }
}
