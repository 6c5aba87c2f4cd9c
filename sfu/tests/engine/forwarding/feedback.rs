//! RTCP both ways: feedback taken only for its own SSRC, reports and round-trip time,
//! transport-wide CC toward the publisher, a subscriber's REMB as an event.

use super::*;

/// A subscriber's compound RTCP covers its audio and its video: the host hands it to each of
/// its DownTracks, and each takes only the feedback about its own SSRC.
#[test]
fn feedback_about_another_ssrc_is_ignored() {
    let (_, bytes) = generated(ScalabilityMode::L1T3, 10);
    let mut session = Session::new(dd_track(0x1000));
    let id = session.subscribe(Layer::MAX);
    session.feed(bytes, &|_, _| false);
    let sent = |s: &Session| {
        s.router()
            .down_track_counters(id)
            .expect("known")
            .retransmitted
    };
    let first = session.received[&id].headers()[0].sequence_number;
    session.nack(id, 0x7777, &[first]);
    assert_eq!(sent(&session), 0, "a NACK about another stream");
    session.nack(id, 0x5000, &[first]);
    assert_eq!(sent(&session), 1, "a NACK about this stream");
}

#[test]
fn reports_both_ways_and_round_trip_time() {
    let (_, bytes) = generated(ScalabilityMode::L1T3, 30);
    let mut session = Session::new(dd_track(0x1000));
    // With transport-wide CC, so that its bandwidth estimator takes the round trip too.
    let mut config = DownTrackConfig::new(0x5000, 45);
    config.dd_ext_id = Some(DD_EXT);
    config.transport_cc_ext_id = Some(5);
    let id = session.subscribe_with(config, limits(Layer::MAX));
    // The publisher's sender report first: the receiver report must echo it as LSR.
    let publisher_sr = RtcpFeedback::SenderReport(SenderReport {
        ssrc: 0x1000,
        ntp_time: 0xE000_0000_8000_0000,
        rtp_time: 0,
        packet_count: 0,
        octet_count: 0,
    });
    session.publisher_rtcp(&rtcp_bytes(&publisher_sr));
    session.feed(bytes, &|_, _| false);
    session.rtcp_to_publisher.clear();
    session.rtcp_to_subscribers.clear();
    session.advance(Duration::from_secs(1));
    let to_publisher = rtcp_items(&session.rtcp_to_publisher);
    let rr = to_publisher.iter().find_map(|i| match i {
        RtcpFeedback::ReceiverReport(r) => Some(r),
        _ => None,
    });
    let block = rr.expect("a receiver report").blocks[0];
    assert_eq!(block.ssrc, 0x1000);
    assert_eq!(block.fraction_lost, 0);
    assert_eq!(block.last_sr, compact_ntp(0xE000_0000_8000_0000));
    assert!(
        block.delay_since_last_sr >= 65_536,
        "a second since the SR: {}",
        block.delay_since_last_sr
    );
    let datagrams: Vec<Vec<u8>> = session
        .rtcp_to_subscribers
        .iter()
        .filter(|(d, _)| *d == id)
        .map(|(_, b)| b.clone())
        .collect();
    let to_subscriber = rtcp_items(&datagrams);
    let sr = to_subscriber.iter().find_map(|i| match i {
        RtcpFeedback::SenderReport(r) => Some(*r),
        _ => None,
    });
    let sr = sr.expect("a sender report");
    let received = &session.received[&id];
    let last = received.headers().last().copied().expect("packets");
    assert_eq!(sr.ssrc, 0x5000);
    assert_eq!(sr.packet_count as usize, received.packets.len());
    let ahead = sr.rtp_time.wrapping_sub(last.timestamp);
    assert!(
        (89_000..=91_000).contains(&ahead),
        "RTP clock extrapolated by about 1 s: {ahead}"
    );
    // The subscriber answers 40 ms later with no delay of its own: RTT 40 ms.
    session.advance(Duration::from_millis(40));
    let mut blocks = ReportBlocks::default();
    blocks
        .push(ReportBlock {
            ssrc: 0x5000,
            fraction_lost: 12,
            total_lost: 3,
            highest_sequence: 0,
            jitter: 40,
            last_sr: compact_ntp(sr.ntp_time),
            delay_since_last_sr: 0,
        })
        .expect("room");
    let rr = RtcpFeedback::ReceiverReport(ReceiverReport {
        sender_ssrc: 9,
        blocks,
    });
    session.subscriber_rtcp(id, &rtcp_bytes(&rr));
    let reception = session.router().down_track_reception(id).expect("reported");
    let rtt = reception.rtt.expect("measured");
    assert_eq!(
        (
            reception.fraction_lost,
            reception.total_lost,
            reception.jitter
        ),
        (12, 3, 40)
    );
    assert!(
        rtt >= Duration::from_millis(39) && rtt <= Duration::from_millis(41),
        "{rtt:?}"
    );
    let transport = session.transports[&id];
    assert_eq!(session.router().viewer_round_trip(transport), Some(rtt));
}

/// An Opus track (SSRC 0x3000) whose publisher sends the transport-wide sequence number as
/// extension 5.
fn opus_track_with_transport_cc() -> TrackConfig {
    let mut config = TrackConfig::single(Codec::Opus, 0x3000);
    config.transport_cc = Some(TransportCc { ext_id: 5 });
    config
}

/// A publisher's transport-wide sequence numbers come back as transport-wide CC feedback about
/// ten times a second, naming lost packets as not received.
#[test]
fn transport_wide_cc_feedback_to_the_publisher() {
    let mut session = Session::new(opus_track_with_transport_cc());
    session.subscribe(Layer::MAX);
    for i in 0..30u16 {
        if i == 7 {
            continue; // lost
        }
        let packet = opus_packet(i, 5, &(1000 + i).to_be_bytes());
        session.feed([packet], &|_, _| false);
        session.advance(Duration::from_millis(20));
    }
    session.advance(Duration::from_millis(100));
    let feedback: Vec<(u16, u16)> = rtcp_items(&session.rtcp_to_publisher)
        .iter()
        .filter_map(|i| match i {
            RtcpFeedback::TransportCc(t) => Some((t.base_sequence, t.packet_status_count)),
            _ => None,
        })
        .collect();
    assert!(
        feedback.len() >= 4,
        "about every 100 ms over 600 ms: {feedback:?}"
    );
    assert_eq!(
        feedback[0].0, 1000,
        "starts at the first transport-wide number"
    );
    // Consecutive feedback covers consecutive ranges, the lost one included.
    for pair in feedback.windows(2) {
        assert_eq!(pair[1].0, pair[0].0 + pair[0].1);
    }
    let covered: u16 = feedback.iter().map(|f| f.1).sum();
    assert_eq!(covered, 30, "every number, the lost one too");
}

/// Found with a real browser: packets the receiver drops (duplicates here; padding probes and
/// late retransmissions in practice) still arrived, and feedback reporting them lost held the
/// publisher's bandwidth estimate, and with it the upper spatial layers, down.
#[test]
fn transport_wide_cc_reports_packets_the_receiver_drops_as_received() {
    use rtcp::transport_feedbacks::transport_layer_cc::TransportLayerCc;
    use webrtc_util::Unmarshal;

    let mut session = Session::new(opus_track_with_transport_cc());
    session.subscribe(Layer::MAX);
    for i in 0..10u16 {
        for copy in 0..2 {
            let twcc = 1000 + 2 * i + copy;
            let packet = opus_packet(i, 5, &twcc.to_be_bytes());
            let refused = session.feed_refusable([packet], &|_, _| false);
            let expected: &[ReceiveError] = match copy {
                0 => &[],
                _ => &[ReceiveError::Duplicate],
            };
            assert_eq!(refused, expected, "packet {i}, copy {copy}");
        }
        session.advance(Duration::from_millis(20));
    }
    session.advance(Duration::from_millis(100));
    assert!(
        session.router().counters().dropped_in >= 10,
        "the copies dropped"
    );
    let received: usize = session
        .rtcp_to_publisher
        .iter()
        .filter_map(|d| TransportLayerCc::unmarshal(&mut d.as_slice()).ok())
        .map(|t| t.recv_deltas.len())
        .sum();
    assert_eq!(received, 20, "every arrival reported received");
}

#[test]
fn a_subscriber_remb_becomes_a_bandwidth_event() {
    let mut session = Session::new(dd_track(0x1000));
    let id = session.subscribe(Layer::MAX);
    let mut ssrcs = RembSsrcs::default();
    ssrcs.push(0x5000).expect("room");
    let remb = RtcpFeedback::Remb(Remb {
        sender_ssrc: 9,
        bitrate_bps: 1_500_000,
        ssrcs,
    });
    session.subscriber_rtcp(id, &rtcp_bytes(&remb));
    let event = session.events().first().copied();
    assert_eq!(
        event,
        Some(Event::BandwidthEstimate {
            transport: session.transports[&id],
            bitrate_bps: 1_500_000
        })
    );
}
