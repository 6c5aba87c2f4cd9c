//! The kinds of media and input: bad input counted without touching other tracks, audio with
//! its level, a real VP8 capture and every real browser capture through the engine.

use super::*;

#[test]
fn bad_input_is_counted_and_dropped_without_touching_other_tracks() {
    let (packets, bytes) = generated(ScalabilityMode::L1T3, 30);
    let truth = by_frame(&packets);
    let mut session = Session::new(dd_track(0x1000));
    let id = session.subscribe(Layer::MAX);
    let other = session
        .publish(TrackConfig::single(Codec::Opus, 0x2000))
        .expect("new");
    let mut garbage: Vec<Bytes> = vec![
        Bytes::from_static(b""),
        Bytes::from_static(b"\x80"),
        Bytes::from_static(&[0x80, 45, 0, 1, 0, 0, 0, 1, 0, 0, 0x77, 0x77]),
        Bytes::from_static(&[0x40; 40]),
        Bytes::from_static(&[0x90, 45, 0, 1, 0, 0, 0, 1, 0, 0, 0x10, 0, 0xBE, 0xDE, 0, 9]),
    ];
    // The same track's SSRC with a huge sequence jump and a truncated extension.
    garbage.push(Bytes::from_static(&[
        0x80, 45, 0x80, 0, 0, 0, 0, 1, 0, 0, 0x10, 0, 1, 2,
    ]));
    for (i, b) in bytes.into_iter().enumerate() {
        session.feed([b], &|_, _| false);
        if let Some(g) = garbage.get(i % 40) {
            let refused = session.feed_refusable([g.clone()], &|_, _| false);
            // The jump is taken or refused depending on where the stream is; the rest never
            // parse, or name no track's SSRC.
            if i % 40 < 5 {
                assert_eq!(refused.len(), 1, "garbage {}: {refused:?}", i % 40);
            }
        }
    }
    let counters = session.router().counters();
    assert!(
        counters.unknown_ssrc + counters.dropped_in >= 4,
        "{counters:?}"
    );
    check_subscriber(&session.received[&id], &truth, 0);
    assert!(
        session
            .router()
            .receiver_counters(other)
            .expect("other track")
            .received
            == 0
    );
}

#[test]
fn audio_passes_through_and_its_level_is_surfaced() {
    let mut config = TrackConfig::single(Codec::Opus, 0x3000);
    config.audio_level_ext_id = Some(1);
    let mut session = Session::new(config);
    let id = session.subscribe(Layer::MAX);
    let packets: Vec<Bytes> = (0..50u16)
        .map(|i| opus_packet(i, 1, &[0x80 | (i as u8 % 100)]))
        .collect();
    session.feed(packets, &|_, _| false);
    assert_eq!(session.received[&id].packets.len(), 50);
    let level = session.router().audio_level(session.track).expect("level");
    assert!(level.voice_activity);
    assert_eq!(level.level, 49);
}

#[test]
fn real_vp8_capture_to_two_subscribers() {
    let packets = common::rtp_packets("vp8.pcap");
    let ssrc = RtpPacket::parse(&packets[0]).expect("RTP").fields().ssrc;
    let mut session = Session::new(TrackConfig::single(Codec::Vp8, ssrc));
    let base = session.subscribe(Layer::new(0, 0));
    let all = session.subscribe(Layer::MAX);
    session.feed(
        packets.iter().map(|p| Bytes::copy_from_slice(p)),
        &|_, _| false,
    );
    for id in [base, all] {
        let headers = session.received[&id].headers();
        assert!(headers
            .windows(2)
            .all(|w| w[1].sequence_number == w[0].sequence_number.wrapping_add(1)));
    }
    assert!(session.received[&base].packets.len() < session.received[&all].packets.len());
    assert_eq!(
        session.received[&all].packets.len(),
        packets.len(),
        "every packet from the first keyframe"
    );
}

/// Every real browser capture through the engine to subscribers at the lowest and the best
/// layer: sequence numbers contiguous, timestamps never going back, and the best-layer
/// subscriber getting every packet from its first keyframe on (the captures carry no DD; VP9
/// goes through its payload descriptor, AV1 and H264 pass through).
#[test]
fn real_captures_through_the_engine() {
    let captures = [
        ("av1.pcap", Codec::Av1),
        ("h264.pcap", Codec::H264),
        ("vp9.pcap", Codec::Vp9),
        ("contiguous_vp9.pcap", Codec::Vp9),
        ("vp8.pcap", Codec::Vp8),
    ];
    for (name, codec) in captures {
        let packets = common::rtp_packets(name);
        let ssrc = RtpPacket::parse(&packets[0]).expect("RTP").fields().ssrc;
        let mut session = Session::new(TrackConfig::single(codec, ssrc));
        let low = session.subscribe(Layer::BASE);
        let best = session.subscribe(Layer::MAX);
        session.feed(
            packets.iter().map(|p| Bytes::copy_from_slice(p)),
            &|_, _| false,
        );
        for id in [low, best] {
            let Some(received) = session.received.get(&id) else {
                // A capture without a keyframe (contiguous_vp9) forwards nothing: correct.
                continue;
            };
            let headers = received.headers();
            for pair in headers.windows(2) {
                // Gaps only where the publisher's stream has them (real loss in the capture).
                let step = pair[1]
                    .sequence_number
                    .wrapping_sub(pair[0].sequence_number);
                assert!((1..100).contains(&step), "{name}: step {step}");
                assert!(
                    pair[1].timestamp.wrapping_sub(pair[0].timestamp) < 1 << 31,
                    "{name}"
                );
            }
        }
        // The best-layer subscriber's numbering follows the source's exactly from its start.
        if let Some(received) = session.received.get(&best) {
            let source_seqs: Vec<u16> = packets
                .iter()
                .map(|p| RtpPacket::parse(p).expect("RTP").fields().sequence_number)
                .collect();
            let payload_of = |p: &[u8]| RtpPacket::parse(p).expect("RTP").payload().to_vec();
            let first = payload_of(&received.packets[0]);
            let start = packets
                .iter()
                .position(|p| payload_of(p) == first)
                .expect("from the capture");
            let out_first = received.headers()[0].sequence_number;
            for (h, p) in received.headers().iter().zip(&received.packets) {
                let source = packets
                    .iter()
                    .skip(start)
                    .position(|s| payload_of(s) == payload_of(p));
                let source_seq = source_seqs[start + source.expect("a source packet")];
                assert_eq!(
                    h.sequence_number.wrapping_sub(out_first),
                    source_seq.wrapping_sub(source_seqs[start]),
                    "{name}: output numbering follows the source's"
                );
            }
        }
        let counters = session
            .router()
            .receiver_counters(session.track)
            .expect("track");
        assert_eq!(
            counters.received + counters.duplicates + counters.malformed,
            packets.len() as u64,
            "{name}: every packet accounted for"
        );
        let best_count = session.received.get(&best).map_or(0, |r| r.packets.len());
        let low_count = session.received.get(&low).map_or(0, |r| r.packets.len());
        assert!(low_count <= best_count, "{name}");
        // Every capture but contiguous_vp9 (which starts without a keyframe) starts with one.
        if name != "contiguous_vp9.pcap" {
            assert!(
                best_count > packets.len() * 9 / 10,
                "{name}: {best_count} of {}",
                packets.len()
            );
        }
    }
}

/// A burst of publisher packets taken before the router is polled goes out subscriber by
/// subscriber (each subscriber's state loaded once for the burst), each subscriber's packets in
/// the order they came; a packet at a time goes out in subscription order.
#[test]
fn a_burst_goes_out_subscriber_by_subscriber_in_order() {
    let mut router = Router::new(RouterConfig::default());
    let publisher = router.add_transport();
    let track = router
        .publish(publisher, TrackConfig::single(Codec::Opus, 0x3000))
        .expect("published");
    let viewers: Vec<DownTrackId> = (0..3u32)
        .map(|i| {
            let transport = router.add_transport();
            let config = DownTrackConfig::new(0x2000 + i, 111);
            router
                .subscribe(transport, track, config, LayerLimits::default())
                .expect("subscribed")
        })
        .collect();
    let now = Instant::now();
    let sent = |router: &mut Router| {
        let mut buf = [0u8; 1500];
        let mut out = Vec::new();
        while let Some(o) = router.poll_transmit(&mut buf) {
            out.push((o.down_track, u16::from_be_bytes([buf[2], buf[3]])));
        }
        out
    };
    router
        .handle_rtp(now, publisher, opus_packet(1, 1, &[0x80]))
        .expect("taken");
    let one: Vec<DownTrackId> = sent(&mut router).iter().map(|&(d, _)| d).collect();
    assert_eq!(one, viewers, "one packet: subscription order");
    for seq in 2..=4 {
        router
            .handle_rtp(now, publisher, opus_packet(seq, 1, &[0x80]))
            .expect("taken");
    }
    let burst = sent(&mut router);
    let order: Vec<DownTrackId> = burst.iter().map(|&(d, _)| d).collect();
    let grouped: Vec<DownTrackId> = viewers.iter().flat_map(|&d| [d; 3]).collect();
    assert_eq!(order, grouped, "a burst: subscriber by subscriber");
    for pair in burst.windows(2).filter(|w| w[0].0 == w[1].0) {
        assert_eq!(pair[1].1, pair[0].1.wrapping_add(1), "in order: {burst:?}");
    }
}
