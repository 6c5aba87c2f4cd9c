//! Loss on either side: a subscriber's NACK repaired with the same bytes, the publisher's loss
//! NACKed upstream, packets ahead of their structure recovered, RTX both ways.

use super::*;

#[test]
fn subscriber_loss_is_repaired_with_the_same_bytes() {
    let (packets, bytes) = generated(ScalabilityMode::L3T3, 60);
    let truth = by_frame(&packets);
    let mut session = Session::new(dd_track(0x1000));
    let id = session.subscribe(Layer::new(1, 2));
    // What a lossless subscriber gets, for comparison.
    let mut clean = Session::new(dd_track(0x1000));
    let clean_id = clean.subscribe(Layer::new(1, 2));
    clean.feed(bytes.clone(), &|_, _| false);
    // The keyframe's first packet is lost too: its DD carries the structure, too large to be
    // remembered inline.
    let first = &clean.received[&clean_id].packets[0];
    let first = RtpPacket::parse(first).expect("RTP");
    let dd_len = first.extension(DD_EXT).expect("a DD").len();
    assert!(dd_len > 24, "a structure DD of {dd_len} bytes");
    let keyframe_seq = first.fields().sequence_number;
    let lost = |seq: u16| seq % 7 == 3 || seq == keyframe_seq;
    session.feed(bytes, &|_, seq| lost(seq));
    let received_seqs: HashSet<u16> = session.received[&id]
        .headers()
        .iter()
        .map(|h| h.sequence_number)
        .collect();
    let missing: Vec<u16> = clean.received[&clean_id]
        .headers()
        .iter()
        .map(|h| h.sequence_number)
        .filter(|s| !received_seqs.contains(s))
        .collect();
    assert!(missing.len() > 10, "the subscriber lost packets");
    session.nack(id, 0x5000, &missing);
    let mut all = session.received.remove(&id).expect("received");
    // Retransmissions are byte-identical to what the lossless subscriber got.
    let clean_by_seq: HashMap<u16, &Vec<u8>> = clean.received[&clean_id]
        .packets
        .iter()
        .map(|p| {
            (
                RtpPacket::parse(p).expect("RTP").fields().sequence_number,
                p,
            )
        })
        .collect();
    for p in &all.packets {
        let seq = RtpPacket::parse(p).expect("RTP").fields().sequence_number;
        assert_eq!(
            p, clean_by_seq[&seq],
            "packet {seq} differs from the lossless run"
        );
    }
    all.packets.sort_by_key(|p| {
        RtpPacket::parse(p)
            .expect("RTP")
            .fields()
            .sequence_number
            .wrapping_sub(65_000)
    });
    assert_eq!(all.packets.len(), clean_by_seq.len(), "every loss repaired");
    check_subscriber(&all, &truth, 1);
}

#[test]
fn publisher_loss_is_nacked_and_nothing_deliberately_dropped_is() {
    let (packets, bytes) = generated(ScalabilityMode::L3T3, 60);
    let mut session = Session::new(rtx_track());
    let low = session.subscribe(Layer::new(0, 0));
    let lost: Vec<u16> = packets
        .iter()
        .map(|p| p.sequence_number)
        .filter(|s| s % 11 == 5)
        .collect();
    let (kept, dropped): (Vec<_>, Vec<_>) = bytes
        .into_iter()
        .zip(&packets)
        .partition(|(_, p)| !lost.contains(&p.sequence_number));
    session.feed(kept.into_iter().map(|(b, _)| b), &|_, _| false);
    session.advance(Duration::from_millis(20));
    let nacked: HashSet<u16> = session
        .rtcp_to_publisher
        .iter()
        .flat_map(|datagram| {
            let mut seqs = Vec::new();
            parse_compound(datagram, |item| {
                if let RtcpFeedback::Nack(n) = item {
                    seqs.extend(n.pairs.lost());
                }
            })
            .expect("our RTCP parses");
            seqs
        })
        .collect();
    assert_eq!(
        nacked,
        lost.iter().copied().collect::<HashSet<u16>>(),
        "exactly the lost packets are NACKed"
    );
    assert_eq!(session.router().publisher_rtt(session.track), None);
    // The retransmissions arrive on RTX 30 ms after the NACKs (sent once the reorder delay was
    // over, all at one instant); the low subscriber's stream has no gap it would NACK, and the
    // round trip to the publisher is measured from them.
    let nack_times: Vec<Instant> = session
        .rtcp_to_publisher
        .iter()
        .zip(&session.rtcp_to_publisher_at)
        .filter(|(datagram, _)| {
            let mut nack = false;
            parse_compound(datagram, |item| {
                nack |= matches!(item, RtcpFeedback::Nack(_));
            })
            .expect("our RTCP parses");
            nack
        })
        .map(|(_, &at)| at)
        .collect();
    let nacked_at = nack_times[0];
    assert!(
        nack_times.iter().all(|&at| at == nacked_at),
        "{nack_times:?}"
    );
    // The packets were fed at the start: the gaps are NACKed once the NACK module's 5 ms
    // reorder delay is over, at the instant the router's timeout said, not at a later poll.
    assert_eq!(
        nacked_at - session.network.start(),
        Duration::from_millis(5)
    );
    let wait = nacked_at + Duration::from_millis(30) - session.network.now();
    session.advance(wait);
    let retransmissions = dropped
        .iter()
        .enumerate()
        .map(|(i, (b, _))| common::as_rtx(b, 0x1001, i as u16));
    session.feed(retransmissions, &|_, _| false);
    assert_eq!(
        session.router().publisher_rtt(session.track),
        Some(Duration::from_millis(30))
    );
    let headers = session.received[&low].headers();
    let mut seqs: Vec<u16> = headers
        .iter()
        .map(|h| h.sequence_number.wrapping_sub(headers[0].sequence_number))
        .collect();
    seqs.sort_unstable();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "no gap: deliberate drops are not NACKable"
    );
}

/// Found by the network property test: packets that overtake the keyframe packet carrying the
/// structure cannot have their DD read. They are not taken as received (counted, a keyframe
/// asked for), so they are NACKed, and their retransmissions are read with the structure: the
/// subscriber gets every frame whole.
#[test]
fn packets_ahead_of_their_structure_are_recovered_not_forwarded_blind() {
    let (packets, bytes) = generated(ScalabilityMode::L3T3, 40);
    let truth = by_frame(&packets);
    let mut session = Session::new(dd_track(0x1000));
    let id = session.subscribe(Layer::MAX);
    // The keyframe's first packet (with the structure) arrives after the next three.
    let mut reordered = bytes.clone();
    reordered[..4].rotate_left(1);
    let refused = session.feed_refusable(reordered, &|_, _| false);
    assert_eq!(refused, [ReceiveError::UnreadableDd { stream: 0 }; 3]);
    let counters = session
        .router()
        .receiver_counters(session.track)
        .expect("track");
    assert_eq!(counters.bad_dd, 3, "{counters:?}");
    assert_eq!(
        session.router().counters().keyframe_requests_sent,
        1,
        "one request for the three"
    );
    session.advance(Duration::from_millis(20));
    let nacked: Vec<u16> = rtcp_items(&session.rtcp_to_publisher)
        .into_iter()
        .filter_map(|item| match item {
            RtcpFeedback::Nack(nack) => Some(nack.pairs.lost().collect::<Vec<_>>()),
            _ => None,
        })
        .flatten()
        .collect();
    let overtaking: Vec<u16> = packets[1..4].iter().map(|p| p.sequence_number).collect();
    assert_eq!(nacked, overtaking);
    session.feed(bytes[1..4].to_vec(), &|_, _| false);
    let received = session.received.get_mut(&id).expect("received");
    received.packets.sort_by_key(|p| {
        RtpPacket::parse(p)
            .expect("RTP")
            .fields()
            .sequence_number
            .wrapping_sub(65_000)
    });
    assert_eq!(received.packets.len(), packets.len(), "every packet");
    check_subscriber(received, &truth, 2);
}

/// Publisher side: a lost packet recovered through RTX (RFC 4588) is forwarded in its place,
/// and padding-only packets are absorbed without a gap. Subscriber side: retransmissions go
/// out on the negotiated RTX stream with the original sequence number first.
#[test]
fn rtx_both_ways_and_padding() {
    let (packets, bytes) = generated(ScalabilityMode::L1T3, 40);
    let mut session = Session::new(rtx_track());
    let mut sub = DownTrackConfig::new(0x5000, 45);
    sub.dd_ext_id = Some(DD_EXT);
    sub.rtx = Some((0x5001, 46));
    let id = session.subscribe_with(sub, limits(Layer::MAX));
    let lost = packets[20].sequence_number;
    // After packet 25 the publisher sends a padding-only probe: later packets are numbered
    // one higher.
    let renumbered = |i: usize, b: &Bytes| -> Bytes {
        let mut v = b.to_vec();
        let seq = u16::from_be_bytes([v[2], v[3]]).wrapping_add(u16::from(i > 25));
        v[2..4].copy_from_slice(&seq.to_be_bytes());
        Bytes::from(v)
    };
    let mut incoming: Vec<Bytes> = Vec::new();
    for (i, (b, p)) in bytes.iter().zip(&packets).enumerate() {
        if p.sequence_number != lost {
            incoming.push(renumbered(i, b));
        }
        if i == 25 {
            let mut probe = b[..12].to_vec();
            // Version 2, padding, no extension.
            probe[0] = 0xA0;
            probe[2..4].copy_from_slice(&p.sequence_number.wrapping_add(1).to_be_bytes());
            probe.extend_from_slice(&[0, 0, 0, 4]);
            incoming.push(Bytes::from(probe));
        }
    }
    // The lost packet arrives later as RTX.
    incoming.push(common::as_rtx(&bytes[20], 0x1001, 7));
    session.feed(incoming, &|_, _| false);
    let received = &session.received[&id];
    assert_eq!(
        received.packets.len(),
        packets.len(),
        "every media packet, the recovered one too"
    );
    let mut seqs: Vec<u16> = received
        .headers()
        .iter()
        .map(|h| {
            h.sequence_number
                .wrapping_sub(received.headers()[0].sequence_number)
        })
        .collect();
    seqs.sort_unstable();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "no gap for the probe"
    );
    assert_eq!(
        session
            .router()
            .receiver_counters(session.track)
            .expect("track")
            .padding_only,
        1
    );
    // The subscriber NACKs one packet: it comes back on RTX.
    let wanted = received.headers()[5].sequence_number;
    let original_bytes = received.packets[5].clone();
    let resent = retransmission(&mut session, id, wanted);
    let resent = RtpPacket::parse(&resent).expect("RTP");
    assert_eq!(resent.fields().ssrc, 0x5001);
    assert_eq!(resent.fields().payload_type, 46);
    assert_eq!(
        &resent.payload()[..2],
        &wanted.to_be_bytes(),
        "original sequence number first"
    );
    let original = RtpPacket::parse(&original_bytes).expect("RTP");
    assert_eq!(&resent.payload()[2..], original.payload(), "same payload");
    assert_eq!(
        resent.extension(DD_EXT),
        original.extension(DD_EXT),
        "same DD"
    );
    // Asked again, it goes again under the RTX stream's next sequence number: the RTX stream
    // numbers its own packets, or the subscriber's SRTP would take the copy for a replay.
    let again = retransmission(&mut session, id, wanted);
    let again = RtpPacket::parse(&again).expect("RTP");
    assert_eq!(again.fields().ssrc, 0x5001);
    assert_eq!(
        again.fields().sequence_number,
        resent.fields().sequence_number.wrapping_add(1)
    );
    assert_eq!(&again.payload()[..2], &wanted.to_be_bytes());
}

/// A subscriber that NACKs the same packet again and again has it at most `MAX_RESENDS`
/// times more; one datagram of NACKs for more packets than the subscription remembers queues
/// no more than it remembers. Both counted.
#[test]
fn repeated_and_flooding_nacks_are_answered_within_bounds() {
    let (_, bytes) = generated(ScalabilityMode::L3T3, 20);
    let mut session = Session::new(dd_track(0x1000));
    let id = session.subscribe(Layer::new(2, 2));
    session.feed(bytes, &|_, _| false);
    let received = session.received[&id].headers();
    let (first, sent) = (received[0].sequence_number, received.len());
    for _ in 0..usize::from(MAX_RESENDS) + 3 {
        session.nack(id, 0x5000, &[first]);
    }
    let resent = session.received[&id].packets.len() - sent;
    assert_eq!(resent, usize::from(MAX_RESENDS));
    let counters = |session: &mut Session| {
        let down_track = session.network.with_router(|r| r.down_track_counters(id));
        down_track.expect("a known subscription")
    };
    assert_eq!(counters(&mut session).resends_refused, 3);

    // 40 NACK items of 17 packets each, in one datagram: 680 sequence numbers.
    let mut compound = Vec::new();
    for item in 0..40u16 {
        let mut pairs = NackPairs::default();
        for seq in 0..17 {
            pairs
                .push(first.wrapping_add(1 + item * 17 + seq))
                .expect("fits");
        }
        let nack = RtcpFeedback::Nack(Nack {
            sender_ssrc: 9,
            media_ssrc: 0x5000,
            pairs,
        });
        compound.extend_from_slice(&rtcp_bytes(&nack));
    }
    let before = counters(&mut session);
    session.subscriber_rtcp(id, &compound);
    let over = session
        .network
        .with_router(|r| r.counters().nacks_over_history);
    assert_eq!(over, 680 - SEND_HISTORY as u64);
    let after = counters(&mut session);
    let answered =
        (after.retransmitted - before.retransmitted) + (after.nack_misses - before.nack_misses);
    assert_eq!(
        answered, SEND_HISTORY as u64,
        "each job queued was looked up"
    );
}

/// What subscriber `id` receives last after it NACKs `seq` of its stream (SSRC 0x5000).
fn retransmission(session: &mut Session, id: DownTrackId, seq: u16) -> Vec<u8> {
    session.nack(id, 0x5000, &[seq]);
    let received = &session.received[&id].packets;
    received.last().expect("a retransmission").clone()
}

/// [`dd_track`]`(0x1000)` with its RTX stream on 0x1001.
fn rtx_track() -> TrackConfig {
    let mut config = dd_track(0x1000);
    config.streams[0].rtx_ssrc = Some(0x1001);
    config
}
