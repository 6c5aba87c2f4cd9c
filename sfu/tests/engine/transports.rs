//! The engine's transports: each peer connection's SSRCs are its own. A packet or an RTCP
//! item under an SSRC that another transport has is dropped and counted, and reaches nobody;
//! two transports may publish the same SSRC, each forwarded to its own viewers; and however
//! transports come and go, nothing of them stays behind.

use crate::common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use proptest::prelude::*;
use rtp_ext::codec::Codec;
use rtp_ext::rtp::RtpPacket;
use selector::{Layer, LayerLimits};
use sfu::engine::rtcp::{Pli, RtcpFeedback, RtcpWireWriter, RtcpWriter};
use sfu::engine::{
    DownTrackConfig, Event, ReceiveError, Router, RouterConfig, RouterError, StreamConfig,
    StreamIds, TrackConfig, TrackId, TransportId,
};

const DD_EXT: u8 = 11;

/// `units` temporal units of an L3T3 stream under `ssrc`.
fn l3t3(ssrc: u32, units: usize) -> Vec<Bytes> {
    let packets = common::l3t3_stream(ssrc, units, DD_EXT);
    packets.into_iter().map(Bytes::from).collect()
}

fn av1(ssrc: u32) -> TrackConfig {
    let mut config = TrackConfig::single(Codec::Av1, ssrc);
    config.dd_ext_id = Some(DD_EXT);
    config
}

fn all_layers() -> LayerLimits {
    LayerLimits {
        target: Layer::MAX,
        max: Layer::MAX,
    }
}

/// A room: a publisher's transport and track, and a viewer's transport subscribed to it.
fn room(router: &mut Router, ssrc: u32, out_ssrc: u32) -> (TransportId, TrackId, TransportId) {
    let publisher = router.add_transport();
    let track = router
        .publish(publisher, av1(ssrc))
        .expect("a new transport");
    let viewer = router.add_transport();
    let mut config = DownTrackConfig::new(out_ssrc, 45);
    config.dd_ext_id = Some(DD_EXT);
    router
        .subscribe(viewer, track, config, all_layers())
        .expect("a new transport");
    (publisher, track, viewer)
}

/// Media sent since the last call, as (transport, SSRC) pairs.
fn sent(router: &mut Router) -> Vec<(TransportId, u32)> {
    let mut buf = [0u8; 1500];
    let mut out = Vec::new();
    while let Some(o) = router.poll_transmit(&mut buf) {
        let ssrc = RtpPacket::parse(&buf[..o.transmit.len])
            .expect("our header")
            .fields()
            .ssrc;
        out.push((o.transport, ssrc));
    }
    out
}

#[test]
fn a_packet_under_another_transports_ssrc_reaches_nobody() {
    let mut router = Router::new(RouterConfig::default());
    let now = Instant::now();
    let (a_pub, _, a_view) = room(&mut router, 0xA1, 0x10);
    let (b_pub, _, b_view) = room(&mut router, 0xB1, 0x20);
    let packets = l3t3(0xA1, 10);
    feed(&mut router, now, a_pub, &packets[..packets.len() / 2]);
    let before = sent(&mut router);
    assert!(before.iter().all(|&(t, s)| (t, s) == (a_view, 0x10)));
    assert!(!before.is_empty(), "room a's media flows");
    // Room b's publisher sends under room a's SSRC, sequence numbers following on.
    let injected = &packets[packets.len() / 2..];
    for packet in injected {
        assert_eq!(
            router.handle_rtp(now, b_pub, packet.clone()),
            Err(ReceiveError::UnknownSsrc)
        );
    }
    assert_eq!(sent(&mut router), [], "nothing reached a's viewer, nor b's");
    assert_eq!(router.counters().unknown_ssrc, injected.len() as u64);
    // And a's own packets still go on.
    feed(&mut router, now, a_pub, injected);
    assert!(sent(&mut router).iter().all(|&(t, _)| t == a_view));
    // RTCP from b's viewer about a's viewer's SSRC is not a's viewer's.
    let mut writer = RtcpWireWriter::new(b"b").expect("a short CNAME");
    let mut buf = [0u8; 1500];
    let pli = RtcpFeedback::Pli(Pli {
        sender_ssrc: 9,
        media_ssrc: 0x10,
    });
    let len = writer.write(&pli, &mut buf).expect("fits");
    router.handle_timeout(now);
    router.handle_timeout(now + Duration::from_secs(1));
    let asked = router.counters().keyframe_requests_sent;
    router
        .handle_rtcp(now + Duration::from_secs(1), b_view, &buf[..len])
        .expect("b's viewer");
    router.handle_timeout(now + Duration::from_secs(2));
    while router.poll_rtcp(&mut buf).is_some() {}
    assert_eq!(
        router.counters().keyframe_requests_sent,
        asked,
        "no keyframe asked of a for b's viewer"
    );
}

#[test]
fn the_same_ssrc_on_two_transports_goes_to_each_ones_viewers() {
    let mut router = Router::new(RouterConfig::default());
    let now = Instant::now();
    let (a_pub, _, a_view) = room(&mut router, 0x77, 0x10);
    let (b_pub, _, b_view) = room(&mut router, 0x77, 0x10);
    for packet in l3t3(0x77, 5) {
        router.handle_rtp(now, a_pub, packet).expect("a's");
    }
    let to_a = sent(&mut router);
    assert!(!to_a.is_empty() && to_a.iter().all(|&(t, _)| t == a_view));
    for packet in l3t3(0x77, 5) {
        router.handle_rtp(now, b_pub, packet).expect("b's");
    }
    let to_b = sent(&mut router);
    assert_eq!(
        to_b.len(),
        to_a.len(),
        "the same stream, forwarded the same"
    );
    assert!(to_b.iter().all(|&(t, _)| t == b_view));
    // Within one transport an SSRC is one track's, and one subscription's.
    assert_eq!(
        router.publish(a_pub, av1(0x77)),
        Err(RouterError::SsrcInUse)
    );
    let config = DownTrackConfig::new(0x10, 45);
    let track = router.ssrc_track(b_pub, 0x77).expect("b's track");
    assert_eq!(
        router.subscribe(a_view, track, config, all_layers()),
        Err(RouterError::SsrcInUse)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// 1,000 transports publish and subscribe, then leave in a random order: every table of
    /// the router is empty after.
    #[test]
    fn transports_that_come_and_go_leave_nothing(order in Just((0..1000u32).collect::<Vec<_>>()).prop_shuffle()) {
        let mut router = Router::new(RouterConfig::default());
        let now = Instant::now();
        let mut transports = Vec::new();
        let mut tracks = Vec::new();
        for i in 0..1000u32 {
            let transport = router.add_transport();
            if i % 4 == 0 || tracks.is_empty() {
                let mut config = av1(0x1000 + i);
                config.transport_cc = Some(sfu::engine::TransportCc { ext_id: 5 });
                tracks.push(router.publish(transport, config).expect("new"));
            } else {
                let track = tracks[i as usize % tracks.len()];
                let config = DownTrackConfig::new(0x10, 45);
                router.subscribe(transport, track, config, all_layers()).expect("published");
            }
            transports.push(transport);
        }
        for packet in l3t3(0x1000, 3) {
            router.handle_rtp(now, transports[0], packet).expect("its own");
        }
        router.handle_timeout(now + Duration::from_millis(200));
        prop_assert!(router.table_entries() > 0);
        for &i in &order {
            router.remove_transport(transports[i as usize]).expect("present");
        }
        prop_assert_eq!(router.table_entries(), 0);
        prop_assert_eq!(router.remove_transport(transports[0]), Err(RouterError::UnknownTransport));
        let mut buf = [0u8; 1500];
        prop_assert!(router.poll_transmit(&mut buf).is_none(), "nothing left to send");
    }
}

/// A paused subscription forwards nothing while its sibling on another transport goes on; it
/// resumes at a switch point; an ended one forwards nothing and leaves its transport's table.
#[test]
fn muted_and_ended_subscriptions_forward_nothing() {
    let mut router = Router::new(RouterConfig::default());
    let now = Instant::now();
    let (publisher, track, viewer) = room(&mut router, 0xA1, 0x10);
    let other = router.add_transport();
    let mut config = DownTrackConfig::new(0x30, 45);
    config.dd_ext_id = Some(DD_EXT);
    let second = router
        .subscribe(other, track, config, all_layers())
        .expect("a new transport");
    let first = router.subscribers(track)[0];
    // Past the generator's second keyframe (unit 90), where the unmuted one resumes.
    let packets = l3t3(0xA1, 100);
    let (before, after) = packets.split_at(packets.len() / 2);
    router.set_muted(first, true).expect("a subscription");
    // The other subscriber is served, nothing goes to the muted one.
    feed_to_only(&mut router, now, publisher, before, other);
    router.unsubscribe(second).expect("a subscription");
    assert_eq!(router.down_track_info(second), None);
    assert_eq!(router.subscribers(track), &[first]);
    router.set_muted(first, false).expect("a subscription");
    // The unmuted one is served again, nothing goes to the ended one.
    feed_to_only(&mut router, now, publisher, after, viewer);
    assert_eq!(
        router.unsubscribe(second),
        Err(RouterError::UnknownDownTrack)
    );
    assert!(router.set_muted(second, true).is_err());
}

/// Publisher packets the router must take.
fn feed(router: &mut Router, now: Instant, publisher: TransportId, packets: &[Bytes]) {
    for packet in packets {
        router
            .handle_rtp(now, publisher, packet.clone())
            .expect("valid");
    }
}

/// Feeds `packets` and checks that the router sends media for them, all of it to `to`.
fn feed_to_only(
    router: &mut Router,
    now: Instant,
    publisher: TransportId,
    packets: &[Bytes],
    to: TransportId,
) {
    feed(router, now, publisher, packets);
    let out = sent(router);
    assert!(!out.is_empty(), "media for {to:?}");
    assert!(out.iter().all(|&(t, _)| t == to), "only to {to:?}: {out:?}");
}

/// A simulcast track announced by rid on `transport`, its streams bound from their packets.
fn rid_track(router: &mut Router, transport: TransportId) -> TrackId {
    router
        .publish(transport, rid_config())
        .expect("a new transport")
}

/// An AV1 track of two simulcast streams announced by rid (q and f), without SSRCs.
fn rid_config() -> TrackConfig {
    let mut config = av1(0);
    config.streams = (0..2).map(|_| StreamConfig::default()).collect();
    config.stream_ids = StreamIds::Rids {
        rids: ["q", "f"].into_iter().map(String::from).collect(),
        rid_ext: RID_EXT,
        repaired_rid_ext: None,
        announced: Default::default(),
    };
    config
}

const RID_EXT: u8 = 12;

/// The engine binds a stream's SSRC from the rid its packets carry, within their transport
/// only: the same SSRC and rid on another transport bind that transport's own track, and
/// neither room's viewers see the other's packets.
#[test]
fn streams_bind_by_rid_within_their_transport() {
    let mut router = Router::new(RouterConfig::default());
    let now = Instant::now();
    let rooms: Vec<_> = (0..2)
        .map(|i| {
            let publisher = router.add_transport();
            let track = rid_track(&mut router, publisher);
            let viewer = router.add_transport();
            let mut config = DownTrackConfig::new(0x10 + i, 45);
            config.dd_ext_id = Some(DD_EXT);
            router
                .subscribe(viewer, track, config, all_layers())
                .expect("a new transport");
            (publisher, track, viewer)
        })
        .collect();
    let [(a_pub, a_track, a_view), (b_pub, b_track, b_view)] = rooms[..] else {
        unreachable!("two rooms")
    };
    let named = |rid: &[u8]| -> Vec<Bytes> {
        l3t3(0x5151, 10)
            .iter()
            .map(|p| Bytes::from(common::with_rid(p, RID_EXT, rid)))
            .collect()
    };
    let unknown_rid = &named(b"h")[0];
    assert_eq!(
        router.handle_rtp(now, a_pub, unknown_rid.clone()),
        Err(ReceiveError::UnknownSsrc),
        "a rid the track does not have"
    );
    for packet in named(b"f") {
        router.handle_rtp(now, b_pub, packet).expect("rid f binds");
    }
    assert_eq!(router.ssrc_track(b_pub, 0x5151), Some(b_track));
    assert_eq!(
        router.ssrc_track(a_pub, 0x5151),
        None,
        "A's table untouched"
    );
    let events: Vec<_> = std::iter::from_fn(|| router.poll_event()).collect();
    assert!(events.contains(&Event::StreamBound {
        transport: b_pub,
        track: b_track,
        stream: 1,
        ssrcs: StreamConfig {
            ssrc: 0x5151,
            rtx_ssrc: None
        },
    }));
    let to_b = sent(&mut router);
    assert!(!to_b.is_empty() && to_b.iter().all(|&(t, _)| t == b_view));
    for packet in named(b"f") {
        router.handle_rtp(now, a_pub, packet).expect("rid f binds");
    }
    assert_eq!(router.ssrc_track(a_pub, 0x5151), Some(a_track));
    let to_a = sent(&mut router);
    assert!(!to_a.is_empty() && to_a.iter().all(|&(t, _)| t == a_view));
    assert_eq!(router.counters().unknown_ssrc, 1);
}

/// A simulcast offer that announces its SSRCs beside the rids (one media and RTX pair per
/// stream, in no order of rids): every stream binds by the rid its packets carry, and each
/// pair whole, so the stream's retransmissions are taken before any of them names a rid.
#[test]
fn announced_ssrc_pairs_bind_whole_by_rid() {
    let mut router = Router::new(RouterConfig::default());
    let now = Instant::now();
    let publisher = router.add_transport();
    let pair = |ssrc: u32| StreamConfig {
        ssrc,
        rtx_ssrc: Some(ssrc + 1),
    };
    let mut config = av1(0);
    config.streams = (0..3).map(|_| StreamConfig::default()).collect();
    config.stream_ids = StreamIds::Rids {
        rids: ["q", "h", "f"].into_iter().map(String::from).collect(),
        rid_ext: RID_EXT,
        repaired_rid_ext: None,
        announced: [pair(0xA0), pair(0xB0), pair(0xC0)].into_iter().collect(),
    };
    let track = router.publish(publisher, config).expect("a new transport");
    // The first announced pair is the top stream, the last the lowest.
    for (ssrc, rid) in [(0xA0, b"f"), (0xB0, b"h"), (0xC0, b"q")] {
        let first = &l3t3(ssrc, 1)[0];
        let named = Bytes::from(common::with_rid(first, RID_EXT, rid));
        router
            .handle_rtp(now, publisher, named)
            .expect("its rid binds");
    }
    let bound: Vec<(u8, StreamConfig)> = std::iter::from_fn(|| router.poll_event())
        .filter_map(|e| match e {
            Event::StreamBound { stream, ssrcs, .. } => Some((stream, ssrcs)),
            _ => None,
        })
        .collect();
    assert_eq!(bound, [(2, pair(0xA0)), (1, pair(0xB0)), (0, pair(0xC0))]);
    for ssrc in [0xA0, 0xA1, 0xB0, 0xB1, 0xC0, 0xC1] {
        assert_eq!(router.ssrc_track(publisher, ssrc), Some(track), "{ssrc:#x}");
    }
    // A retransmission without a repaired rid, under an RTX SSRC only the offer named.
    let media = l3t3(0xB0, 2);
    let repair = common::as_rtx(&media[1], 0xB1, 1);
    router
        .handle_rtp(now, publisher, repair)
        .expect("an announced RTX stream");
    assert_eq!(router.counters().unknown_ssrc, 0);
}

/// Transport-wide CC feedback to a simulcast publisher names an SSRC it sends, even when the
/// first packet was an upper stream's and stream 0 had no SSRC yet: a sender drops feedback
/// about an SSRC it does not send (it named 0, and the publisher's estimate sank).
#[test]
fn transport_wide_feedback_names_a_bound_ssrc() {
    use rtcp::transport_feedbacks::transport_layer_cc::TransportLayerCc;
    use webrtc_util::Unmarshal;

    const TWCC_EXT: u8 = 5;
    let mut router = Router::new(RouterConfig::default());
    let start = Instant::now();
    let publisher = router.add_transport();
    let mut config = rid_config();
    config.transport_cc = Some(sfu::engine::TransportCc { ext_id: TWCC_EXT });
    router.publish(publisher, config).expect("a new transport");
    for (i, packet) in l3t3(0xF0F0, 3).iter().enumerate() {
        let named = common::with_rid(packet, RID_EXT, b"f");
        let seq = (100 + i as u16).to_be_bytes();
        let sequenced = common::with_rid(&named, TWCC_EXT, &seq);
        let now = start + Duration::from_millis(5 * i as u64);
        router
            .handle_rtp(now, publisher, Bytes::from(sequenced))
            .expect("rid f binds");
    }
    router.handle_timeout(start + Duration::from_millis(200));
    let mut buf = [0u8; 1500];
    let mut named = Vec::new();
    while let Some(out) = router.poll_rtcp(&mut buf) {
        if let Ok(feedback) = TransportLayerCc::unmarshal(&mut &buf[..out.len]) {
            named.push(feedback.media_ssrc);
        }
    }
    assert_eq!(
        named,
        [0xF0F0],
        "one feedback, about the stream that is bound"
    );
}
