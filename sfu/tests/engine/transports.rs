//! The engine's transports: each peer connection's SSRCs are its own. A packet or an RTCP
//! item under an SSRC that another transport has is dropped and counted, and reaches nobody;
//! two transports may publish the same SSRC, each forwarded to its own viewers; and however
//! transports come and go, nothing of them stays behind.

use crate::common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use proptest::prelude::*;
use rtcp::transport_feedbacks::transport_layer_cc::TransportLayerCc;
use rtp_ext::codec::Codec;
use selector::{Layer, LayerLimits};
use sfu::engine::rtcp::{parse_compound, Pli, Remb, RembSsrcs, RtcpFeedback};
use sfu::engine::{
    DownTrackConfig, Event, ReceiveError, RouterConfig, RouterError, StreamConfig, StreamIds,
    TrackConfig, TrackId, TransportCc, TransportId, REBIND_HOLD,
};
use sfu::sim::{Delivery, LinkConfig, Network, Refusal};
use webrtc_util::Unmarshal;

const DD_EXT: u8 = 11;
const RID_EXT: u8 = 12;

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

/// A network with ideal links, its clock at `start`.
fn network(start: Instant) -> Network {
    Network::new(RouterConfig::default(), start, 0)
}

fn transport(network: &mut Network) -> TransportId {
    network.add_transport(LinkConfig::default(), LinkConfig::default())
}

/// A viewer's subscription to `track` under `out_ssrc`, with the DD.
fn subscribe(
    network: &mut Network,
    viewer: TransportId,
    track: TrackId,
    out_ssrc: u32,
) -> Result<sfu::engine::DownTrackId, RouterError> {
    let mut config = DownTrackConfig::new(out_ssrc, 45);
    config.dd_ext_id = Some(DD_EXT);
    network.with_router(|router| router.subscribe(viewer, track, config, all_layers()))
}

/// A room: a publisher's transport and track, and a viewer's transport subscribed to it.
fn room(network: &mut Network, ssrc: u32, out_ssrc: u32) -> (TransportId, TrackId, TransportId) {
    room_of(network, av1(ssrc), out_ssrc)
}

fn room_of(
    network: &mut Network,
    config: TrackConfig,
    out_ssrc: u32,
) -> (TransportId, TrackId, TransportId) {
    let publisher = transport(network);
    let track = network
        .with_router(|router| router.publish(publisher, config))
        .expect("a new transport");
    let viewer = transport(network);
    subscribe(network, viewer, track, out_ssrc).expect("a new transport");
    (publisher, track, viewer)
}

/// Sends `packets` up `publisher`'s uplink and runs what is due now: why the router refused
/// each it refused, in order.
fn send(network: &mut Network, publisher: TransportId, packets: &[Bytes]) -> Vec<ReceiveError> {
    for packet in packets {
        network
            .send_rtp(publisher, packet.clone())
            .expect("on the network");
    }
    network.run_until(network.now());
    let refused = network.take_refused().into_iter();
    refused
        .map(|r| match r {
            Refusal::Rtp { error, .. } => error,
            Refusal::Rtcp { error, .. } => panic!("RTCP refused: {error:?}"),
        })
        .collect()
}

/// Publisher packets the router must take.
fn feed(network: &mut Network, publisher: TransportId, packets: &[Bytes]) {
    assert_eq!(send(network, publisher, packets), [], "all taken");
}

/// Media that reached any of `transports` since the last call, as (transport, SSRC) pairs;
/// nothing went to a transport off the network.
fn sent(network: &mut Network, transports: &[TransportId]) -> Vec<(TransportId, u32)> {
    assert_eq!(network.counters().unrouted, 0);
    let mut out = Vec::new();
    for &t in transports {
        out.extend(network.take_media(t).iter().map(|m| (t, m.ssrc)));
    }
    out
}

#[test]
fn a_packet_under_another_transports_ssrc_reaches_nobody() {
    let now = Instant::now();
    let mut network = network(now);
    let (a_pub, _, a_view) = room(&mut network, 0xA1, 0x10);
    let (b_pub, _, b_view) = room(&mut network, 0xB1, 0x20);
    let all = [a_pub, a_view, b_pub, b_view];
    let packets = l3t3(0xA1, 10);
    feed(&mut network, a_pub, &packets[..packets.len() / 2]);
    let before = sent(&mut network, &all);
    assert!(before.iter().all(|&(t, s)| (t, s) == (a_view, 0x10)));
    assert!(!before.is_empty(), "room a's media flows");
    // Room b's publisher sends under room a's SSRC, sequence numbers following on.
    let injected = &packets[packets.len() / 2..];
    let refused = send(&mut network, b_pub, injected);
    assert_eq!(refused, vec![ReceiveError::UnknownSsrc; injected.len()]);
    assert_eq!(
        sent(&mut network, &all),
        [],
        "nothing reached a's viewer, nor b's"
    );
    let counters = network.router().counters();
    assert_eq!(counters.unknown_ssrc, injected.len() as u64);
    // And a's own packets still go on.
    feed(&mut network, a_pub, injected);
    assert!(sent(&mut network, &all).iter().all(|&(t, _)| t == a_view));
    // RTCP from b's viewer about a's viewer's SSRC is not a's viewer's.
    let pli = RtcpFeedback::Pli(Pli {
        sender_ssrc: 9,
        media_ssrc: 0x10,
    });
    network.run_until(now + Duration::from_secs(1));
    let asked = network.router().counters().keyframe_requests_sent;
    network.send_feedback(b_view, &pli).expect("on the network");
    network.run_until(now + Duration::from_secs(2));
    assert_eq!(network.take_refused(), [], "b's viewer");
    assert_eq!(
        network.router().counters().keyframe_requests_sent,
        asked,
        "no keyframe asked of a for b's viewer"
    );
}

#[test]
fn the_same_ssrc_on_two_transports_goes_to_each_ones_viewers() {
    let mut network = network(Instant::now());
    let (a_pub, _, a_view) = room(&mut network, 0x77, 0x10);
    let (b_pub, _, b_view) = room(&mut network, 0x77, 0x10);
    let all = [a_pub, a_view, b_pub, b_view];
    feed(&mut network, a_pub, &l3t3(0x77, 5));
    let to_a = sent(&mut network, &all);
    assert!(!to_a.is_empty() && to_a.iter().all(|&(t, _)| t == a_view));
    feed(&mut network, b_pub, &l3t3(0x77, 5));
    let to_b = sent(&mut network, &all);
    assert_eq!(
        to_b.len(),
        to_a.len(),
        "the same stream, forwarded the same"
    );
    assert!(to_b.iter().all(|&(t, _)| t == b_view));
    // Within one transport an SSRC is one track's, and one subscription's.
    assert_eq!(
        network.with_router(|router| router.publish(a_pub, av1(0x77))),
        Err(RouterError::SsrcInUse)
    );
    let track = network.router().ssrc_track(b_pub, 0x77).expect("b's track");
    let config = DownTrackConfig::new(0x10, 45);
    assert_eq!(
        network.with_router(|router| router.subscribe(a_view, track, config, all_layers())),
        Err(RouterError::SsrcInUse)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// 1,000 transports publish and subscribe, then leave in a random order, while the
    /// viewers' pacers still hold packets for them: every table of the router is empty
    /// after, and nothing more is sent.
    #[test]
    fn transports_that_come_and_go_leave_nothing(order in Just((0..1000u32).collect::<Vec<_>>()).prop_shuffle()) {
        let now = Instant::now();
        let mut network = network(now);
        let mut transports = Vec::new();
        let mut tracks = Vec::new();
        let mut viewers = Vec::new();
        for i in 0..1000u32 {
            let transport = transport(&mut network);
            if i % 4 == 0 || tracks.is_empty() {
                let mut config = av1(0x1000 + i);
                config.transport_cc = Some(TransportCc { ext_id: 5 });
                let track = network.with_router(|router| router.publish(transport, config));
                tracks.push(track.expect("new"));
            } else {
                let track = tracks[i as usize % tracks.len()];
                let config = DownTrackConfig::new(0x10, 45);
                network
                    .with_router(|router| router.subscribe(transport, track, config, all_layers()))
                    .expect("published");
                viewers.push(transport);
            }
            transports.push(transport);
        }
        // The viewers are paced to a trickle, so that packets still wait for those of the
        // first track when they leave.
        let mut ssrcs = RembSsrcs::default();
        ssrcs.push(0x10).expect("room");
        let remb = RtcpFeedback::Remb(Remb { sender_ssrc: 9, bitrate_bps: 1_000, ssrcs });
        for &viewer in &viewers {
            network.send_feedback(viewer, &remb).expect("on the network");
        }
        network.run_until(now);
        // Packets of 1,200 bytes: more than the pacers' burst allowance.
        let packets: Vec<Bytes> = l3t3(0x1000, 3)
            .into_iter()
            .map(|p| {
                let mut packet = p.to_vec();
                packet.resize(1_200, 0xAB);
                Bytes::from(packet)
            })
            .collect();
        feed(&mut network, transports[0], &packets);
        network.run_until(now + Duration::from_millis(200));
        prop_assert!(network.router().table_entries() > 0);
        let waiting: usize = viewers.iter().map(|&v| network.router().paced_jobs(v)).sum();
        prop_assert!(waiting > 0, "packets wait in the pacers");
        for &i in &order {
            network.remove_transport(transports[i as usize]).expect("present");
        }
        prop_assert_eq!(network.router().table_entries(), 0);
        prop_assert_eq!(
            network.remove_transport(transports[0]),
            Err(RouterError::UnknownTransport)
        );
        network.run_until(now + Duration::from_secs(2));
        prop_assert_eq!(network.counters().unrouted, 0, "nothing left to send");
    }
}

/// A paused subscription forwards nothing while its sibling on another transport goes on; it
/// resumes at a switch point; an ended one forwards nothing and leaves its transport's table.
#[test]
fn muted_and_ended_subscriptions_forward_nothing() {
    let mut network = network(Instant::now());
    let (publisher, track, viewer) = room(&mut network, 0xA1, 0x10);
    let other = transport(&mut network);
    let second = subscribe(&mut network, other, track, 0x30).expect("a new transport");
    let all = [publisher, viewer, other];
    let first = network.router().subscribers(track)[0];
    // Past the generator's second keyframe (unit 90), where the unmuted one resumes.
    let packets = l3t3(0xA1, 100);
    let (before, after) = packets.split_at(packets.len() / 2);
    let set_muted = |network: &mut Network, id, muted| {
        network.with_router(|router| router.set_muted(id, muted))
    };
    set_muted(&mut network, first, true).expect("a subscription");
    // The other subscriber is served, nothing goes to the muted one.
    feed_to_only(&mut network, publisher, before, &all, other);
    network
        .with_router(|router| router.unsubscribe(second))
        .expect("a subscription");
    assert_eq!(network.router().down_track_info(second), None);
    assert_eq!(network.router().subscribers(track), &[first]);
    set_muted(&mut network, first, false).expect("a subscription");
    // The unmuted one is served again, nothing goes to the ended one.
    feed_to_only(&mut network, publisher, after, &all, viewer);
    assert_eq!(
        network.with_router(|router| router.unsubscribe(second)),
        Err(RouterError::UnknownDownTrack)
    );
    assert!(set_muted(&mut network, second, true).is_err());
}

/// Feeds `packets` and checks that the router sends media for them, all of it to `to`.
fn feed_to_only(
    network: &mut Network,
    publisher: TransportId,
    packets: &[Bytes],
    all: &[TransportId],
    to: TransportId,
) {
    feed(network, publisher, packets);
    let out = sent(network, all);
    assert!(!out.is_empty(), "media for {to:?}");
    assert!(out.iter().all(|&(t, _)| t == to), "only to {to:?}: {out:?}");
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

/// The engine binds a stream's SSRC from the rid its packets carry, within their transport
/// only: the same SSRC and rid on another transport bind that transport's own track, and
/// neither room's viewers see the other's packets.
#[test]
fn streams_bind_by_rid_within_their_transport() {
    let mut network = network(Instant::now());
    let (a_pub, a_track, a_view) = room_of(&mut network, rid_config(), 0x10);
    let (b_pub, b_track, b_view) = room_of(&mut network, rid_config(), 0x11);
    let all = [a_pub, a_view, b_pub, b_view];
    let named = |rid: &[u8]| -> Vec<Bytes> {
        l3t3(0x5151, 10)
            .iter()
            .map(|p| Bytes::from(common::with_rid(p, RID_EXT, rid)))
            .collect()
    };
    let unknown_rid = &named(b"h")[..1];
    assert_eq!(
        send(&mut network, a_pub, unknown_rid),
        [ReceiveError::UnknownSsrc],
        "a rid the track does not have"
    );
    feed(&mut network, b_pub, &named(b"f"));
    assert_eq!(network.router().ssrc_track(b_pub, 0x5151), Some(b_track));
    assert_eq!(
        network.router().ssrc_track(a_pub, 0x5151),
        None,
        "A's table untouched"
    );
    let events = events(&mut network);
    assert!(events.contains(&Event::StreamBound {
        transport: b_pub,
        track: b_track,
        stream: 1,
        ssrcs: StreamConfig {
            ssrc: 0x5151,
            rtx_ssrc: None
        },
    }));
    let to_b = sent(&mut network, &all);
    assert!(!to_b.is_empty() && to_b.iter().all(|&(t, _)| t == b_view));
    feed(&mut network, a_pub, &named(b"f"));
    assert_eq!(network.router().ssrc_track(a_pub, 0x5151), Some(a_track));
    let to_a = sent(&mut network, &all);
    assert!(!to_a.is_empty() && to_a.iter().all(|&(t, _)| t == a_view));
    assert_eq!(network.router().counters().unknown_ssrc, 1);
}

/// A stream bound by rid is bound again to a new SSRC at most once per `REBIND_HOLD`: a
/// publisher that flips its SSRCs from packet to packet does not restart the stream's
/// reception with each.
#[test]
fn a_stream_is_bound_again_at_most_once_per_hold() {
    let mut network = network(Instant::now());
    let (publisher, track, _) = room_of(&mut network, rid_config(), 0x10);
    let named = |ssrc: u32| -> Vec<Bytes> {
        l3t3(ssrc, 5)
            .iter()
            .map(|p| Bytes::from(common::with_rid(p, RID_EXT, b"f")))
            .collect()
    };
    feed(&mut network, publisher, &named(0x5151));
    feed(&mut network, publisher, &named(0x6161));
    assert_eq!(network.router().ssrc_track(publisher, 0x6161), Some(track));
    let again = named(0x5151);
    let held = send(&mut network, publisher, &again);
    assert_eq!(
        held,
        vec![ReceiveError::UnknownSsrc; again.len()],
        "within the hold"
    );
    let counters = network.router().counters();
    assert_eq!(counters.rebinds_held, again.len() as u64);
    assert_eq!(network.router().ssrc_track(publisher, 0x6161), Some(track));
    network.run_until(network.now() + REBIND_HOLD);
    feed(&mut network, publisher, &named(0x5151));
    assert_eq!(network.router().ssrc_track(publisher, 0x5151), Some(track));
    assert_eq!(network.router().ssrc_track(publisher, 0x6161), None);
}

/// The router's events so far.
fn events(network: &mut Network) -> Vec<Event> {
    let events = network.take_events().into_iter();
    events.map(|(_, event)| event).collect()
}

/// A simulcast offer that announces its SSRCs beside the rids (one media and RTX pair per
/// stream, in no order of rids): every stream binds by the rid its packets carry, and each
/// pair whole, so the stream's retransmissions are taken before any of them names a rid.
#[test]
fn announced_ssrc_pairs_bind_whole_by_rid() {
    let mut network = network(Instant::now());
    let publisher = transport(&mut network);
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
    let track = network
        .with_router(|router| router.publish(publisher, config))
        .expect("a new transport");
    // The first announced pair is the top stream, the last the lowest.
    for (ssrc, rid) in [(0xA0, b"f"), (0xB0, b"h"), (0xC0, b"q")] {
        let first = &l3t3(ssrc, 1)[0];
        let named = Bytes::from(common::with_rid(first, RID_EXT, rid));
        feed(&mut network, publisher, &[named]);
    }
    let bound: Vec<(u8, StreamConfig)> = events(&mut network)
        .into_iter()
        .filter_map(|e| match e {
            Event::StreamBound { stream, ssrcs, .. } => Some((stream, ssrcs)),
            _ => None,
        })
        .collect();
    assert_eq!(bound, [(2, pair(0xA0)), (1, pair(0xB0)), (0, pair(0xC0))]);
    for ssrc in [0xA0, 0xA1, 0xB0, 0xB1, 0xC0, 0xC1] {
        let bound_to = network.router().ssrc_track(publisher, ssrc);
        assert_eq!(bound_to, Some(track), "{ssrc:#x}");
    }
    // A retransmission without a repaired rid, under an RTX SSRC only the offer named.
    let media = l3t3(0xB0, 2);
    let repair = common::as_rtx(&media[1], 0xB1, 1);
    feed(&mut network, publisher, &[repair]);
    assert_eq!(network.router().counters().unknown_ssrc, 0);
}

const TWCC_EXT: u8 = 5;

/// A simulcast publisher (rid `f` its top stream) that negotiated transport-wide CC.
fn twcc_publisher(start: Instant) -> (Network, TransportId) {
    let mut network = network(start);
    let publisher = transport(&mut network);
    let mut config = rid_config();
    config.transport_cc = Some(TransportCc { ext_id: TWCC_EXT });
    network
        .with_router(|router| router.publish(publisher, config))
        .expect("a new transport");
    (network, publisher)
}

/// Packet `i` of an `L3T3` stream under `ssrc`, rid `f`, transport-wide sequence `100 + i`.
fn sequenced(ssrc: u32) -> impl Iterator<Item = Bytes> {
    l3t3(ssrc, 3).into_iter().enumerate().map(|(i, packet)| {
        let named = common::with_rid(&packet, RID_EXT, b"f");
        let seq = (100 + i as u16).to_be_bytes();
        Bytes::from(common::with_rid(&named, TWCC_EXT, &seq))
    })
}

/// The transport-wide feedback the publisher got.
fn feedbacks(network: &mut Network, publisher: TransportId) -> Vec<TransportLayerCc> {
    network
        .take_arrivals(publisher)
        .into_iter()
        .filter_map(|arrival| match arrival.delivery {
            Delivery::Rtcp { datagram, .. } => TransportLayerCc::unmarshal(&mut &datagram[..]).ok(),
            _ => None,
        })
        .collect()
}

/// Transport-wide CC feedback to a simulcast publisher names an SSRC it sends, even when the
/// first packet was an upper stream's and stream 0 had no SSRC yet: a sender drops feedback
/// about an SSRC it does not send (it named 0, and the publisher's estimate sank).
#[test]
fn transport_wide_feedback_names_a_bound_ssrc() {
    let start = Instant::now();
    let (mut network, publisher) = twcc_publisher(start);
    for (i, packet) in sequenced(0xF0F0).enumerate() {
        let at = start + Duration::from_millis(5 * i as u64);
        network
            .send_rtp_at(at, publisher, packet)
            .expect("on the network");
    }
    network.run_until(start + Duration::from_millis(200));
    assert_eq!(network.take_refused(), [], "rid f binds");
    let named: Vec<u32> = feedbacks(&mut network, publisher)
        .iter()
        .map(|feedback| feedback.media_ssrc)
        .collect();
    assert!(!named.is_empty(), "feedback sent");
    assert!(
        named.iter().all(|&ssrc| ssrc == 0xF0F0),
        "every feedback about the stream that is bound: {named:x?}"
    );
}

/// A host that reads its socket some time after packets come hands the router when each
/// arrived: the transport-wide feedback to the publisher reports those arrivals (5 ms apart,
/// as sent), not the instant the host took them all (which would read as no time at all).
#[test]
fn transport_wide_feedback_reports_when_packets_arrived_not_when_taken() {
    let start = Instant::now();
    let (mut network, publisher) = twcc_publisher(start);
    let taken = start + Duration::from_millis(100);
    for (i, packet) in sequenced(0xF0F0).enumerate() {
        let arrived = start + Duration::from_millis(5 * i as u64);
        network
            .with_router(|router| router.handle_rtp_arrived(taken, arrived, publisher, packet))
            .expect("a valid packet");
    }
    network.run_until(start + Duration::from_millis(300));
    let deltas: Vec<i64> = feedbacks(&mut network, publisher)
        .into_iter()
        .flat_map(|feedback| feedback.recv_deltas.into_iter().skip(1).map(|d| d.delta))
        .collect();
    assert!(deltas.len() >= 10, "feedback on the packets: {deltas:?}");
    assert!(deltas.iter().all(|&d| d == 5_000), "{deltas:?}");
}

/// `next_transport` names the viewer the next `poll_transmit` writes for, so a host can
/// fetch that viewer's state while finishing the current packet.
#[test]
fn the_next_transport_is_the_one_the_next_packet_goes_to() {
    use sfu::engine::Router;
    let mut router = Router::new(RouterConfig::default());
    let publisher = router.add_transport();
    let track = router
        .publish(publisher, TrackConfig::single(Codec::Opus, 0x1111))
        .expect("a new transport");
    let viewers = [router.add_transport(), router.add_transport()];
    for (i, &viewer) in viewers.iter().enumerate() {
        let config = DownTrackConfig::new(0x2222 + i as u32, 111);
        router
            .subscribe(viewer, track, config, LayerLimits::default())
            .expect("a new subscription");
    }
    assert_eq!(router.next_transport(), None, "nothing queued");
    let mut packet = vec![0x80, 111, 0, 1, 0, 0, 0x03, 0xc0, 0, 0, 0x11, 0x11];
    packet.extend_from_slice(&[0xfc, 0xff, 0xfe]);
    router
        .handle_rtp(Instant::now(), publisher, Bytes::from(packet))
        .expect("a valid packet");
    let mut buf = [0u8; 1500];
    let mut written = Vec::new();
    while let Some(next) = router.next_transport() {
        let out = router.poll_transmit(&mut buf).expect("a packet for it");
        assert_eq!(out.transport, next, "the transport named before");
        written.push(out.transport);
    }
    written.sort_unstable();
    assert_eq!(written, viewers, "one packet to each viewer");
    assert!(router.poll_transmit(&mut buf).is_none());
}

/// The interarrival jitter (RFC 3550 A.8) in the receiver reports a publisher gets runs on
/// arrivals too: packets that arrived exactly as their timestamps say (whatever instant the
/// host took them at) report none, where taking them all at once would read as jitter.
#[test]
fn the_jitter_reported_to_a_publisher_runs_on_arrivals() {
    let start = Instant::now();
    let (mut network, publisher) = twcc_publisher(start);
    let taken = start + Duration::from_millis(200);
    let packets: Vec<Bytes> = sequenced(0xF0F0).collect();
    let first = timestamp(&packets[0]);
    for packet in packets {
        // At 90 kHz, rounded up to the nanosecond so that it reads back as the same units.
        let units = u64::from(timestamp(&packet).wrapping_sub(first));
        let arrived = start + Duration::from_nanos((units * 1_000_000_000).div_ceil(90_000));
        assert!(arrived < taken, "the stream is shorter than the wait");
        network
            .with_router(|router| router.handle_rtp_arrived(taken, arrived, publisher, packet))
            .expect("a valid packet");
    }
    network.run_until(start + Duration::from_secs(3));
    let mut jitters = Vec::new();
    for arrival in network.take_arrivals(publisher) {
        let Delivery::Rtcp { datagram, .. } = arrival.delivery else {
            continue;
        };
        let _ = parse_compound(&datagram, |item| {
            if let RtcpFeedback::ReceiverReport(report) = item {
                let blocks = report.blocks.iter().filter(|b| b.ssrc == 0xF0F0);
                jitters.extend(blocks.map(|block| block.jitter));
            }
        });
    }
    assert!(!jitters.is_empty(), "receiver reports on the stream");
    assert!(jitters.iter().all(|&j| j == 0), "{jitters:?}");
}

/// An RTP packet's timestamp.
fn timestamp(packet: &[u8]) -> u32 {
    u32::from_be_bytes([packet[4], packet[5], packet[6], packet[7]])
}
