//! Simulcast: streams switched at keyframes with smooth timestamps, a switch down forwarding the
//! current stream's base layer until the keyframe, streams bound by rid after publishing,
//! timestamps aligned by sender reports.

use super::*;

/// An AV1 track of three simulcast streams, SSRCs 0x100-0x102, with the DD.
fn simulcast_track() -> TrackConfig {
    let mut config = TrackConfig::single(Codec::Av1, 0x100);
    config.dd_ext_id = Some(DD_EXT);
    config.streams = (0..3)
        .map(|s| StreamConfig {
            ssrc: 0x100 + s,
            rtx_ssrc: None,
        })
        .collect();
    config
}

/// The generators of [`simulcast_track`]'s three L1T3 streams, by [`simulcast_stream`].
fn simulcast_streams() -> Vec<(StreamGenerator, Arc<FrameDependencyStructure>)> {
    (0..3u32)
        .map(|s| simulcast_stream(s, s * 1_000_000_007))
        .collect()
}

/// The generator of stream `s` of [`simulcast_track`] and its structure: L1T3, a keyframe
/// every 30 temporal units, sequence and frame numbers unrelated to the other streams', its
/// timestamps from `first_timestamp`.
fn simulcast_stream(
    s: u32,
    first_timestamp: u32,
) -> (StreamGenerator, Arc<FrameDependencyStructure>) {
    let g = StreamGenerator::new(
        ScalabilityMode::L1T3,
        GeneratorConfig {
            keyframe_interval_tus: 30,
            ssrc: 0x100 + s,
            first_seq: (s * 20_000) as u16,
            first_frame_number: (s * 20_000) as u16,
            first_timestamp,
            seed: u64::from(s),
            ..Default::default()
        },
    );
    let structure = g.structure().clone();
    (g, structure)
}

/// Feeds one temporal unit of every stream, in stream order; returns, per stream, the
/// temporal id of each packet fed.
fn feed_simulcast_unit(
    session: &mut Session,
    streams: &mut [(StreamGenerator, Arc<FrameDependencyStructure>)],
) -> Vec<Vec<u8>> {
    let mut fed = Vec::new();
    for (g, structure) in streams {
        let mut temporal_ids = Vec::new();
        loop {
            let p = g.next().expect("endless");
            temporal_ids.push(p.temporal_id());
            session.feed([rtp_bytes(&p, structure)], &|_, _| false);
            if p.marker {
                break;
            }
        }
        fed.push(temporal_ids);
    }
    fed
}

#[test]
fn simulcast_switch_keeps_timestamps_smooth() {
    let mut session = Session::new(simulcast_track());
    let id = session.subscribe(Layer::new(0, 2));
    let mut streams = simulcast_streams();
    for tu in 0..150 {
        if tu == 50 {
            session.set_target(id, Layer::new(2, 2));
        }
        if tu == 100 {
            session.set_target(id, Layer::new(1, 2));
        }
        feed_simulcast_unit(&mut session, &mut streams);
        session.advance(FRAME);
    }
    let headers = session.received[&id].headers();
    let mut ts_steps = Vec::new();
    for pair in headers.windows(2) {
        assert_eq!(
            pair[1].sequence_number,
            pair[0].sequence_number.wrapping_add(1)
        );
        let step = pair[1].timestamp.wrapping_sub(pair[0].timestamp);
        assert!(step < 1 << 31, "timestamps never go back");
        ts_steps.push(step);
    }
    assert!(
        ts_steps.iter().all(|&s| s <= 3000 * 4),
        "no timestamp jump across switches: {:?}",
        ts_steps.iter().max()
    );
    assert_eq!(
        session
            .router()
            .down_track_info(id)
            .and_then(|d| d.layer)
            .map(|l| l.spatial),
        Some(1)
    );
}

/// A switch down to a lower stream waits for that stream's keyframe, which a publisher may
/// be slow to send (one ignores a request that comes soon after another). Meanwhile the
/// current stream goes on at its base temporal layer alone, a fraction of its rate, so the
/// link the switch is for drains instead of freezing the subscriber.
#[test]
fn a_switch_down_forwards_only_the_current_streams_base_layer_until_the_keyframe() {
    let mut session = Session::new(simulcast_track());
    let id = session.subscribe(Layer::new(2, 2));
    let mut streams = simulcast_streams();
    let forwarded = |session: &Session| session.received.get(&id).map_or(0, |r| r.packets.len());
    let layer = |session: &Session| session.router().down_track_info(id).and_then(|d| d.layer);
    // Up to the keyframes of temporal unit 30, then down 15 units before the next ones.
    for _ in 0..45 {
        feed_simulcast_unit(&mut session, &mut streams);
        session.advance(FRAME);
    }
    assert_eq!(layer(&session), Some(Layer::new(2, 2)));
    session.set_target(id, Layer::new(1, 2));
    let before = forwarded(&session);
    let mut base_packets = 0;
    for _ in 45..60 {
        let fed = feed_simulcast_unit(&mut session, &mut streams);
        base_packets += fed[2].iter().filter(|&&t| t == 0).count();
        session.advance(FRAME);
    }
    assert_eq!(layer(&session), Some(Layer::new(2, 0)));
    assert!(base_packets > 0);
    assert_eq!(
        forwarded(&session) - before,
        base_packets,
        "the top stream's base layer, nothing else"
    );
    // The lower stream's keyframe: its full rate from there.
    feed_simulcast_unit(&mut session, &mut streams);
    assert_eq!(layer(&session), Some(Layer::new(1, 2)));
}

/// Simulcast streams are announced by rid: the host publishes before it knows their SSRCs
/// and binds each one when its first packet names its rid.
#[test]
fn simulcast_streams_bound_after_publishing_are_forwarded() {
    let mut placeholder = simulcast_track();
    for (i, stream) in placeholder.streams.iter_mut().enumerate() {
        stream.ssrc = 0xF000 + i as u32;
    }
    let mut session = Session::new(placeholder);
    let id = session.subscribe(Layer::new(2, 2));
    let mut g = StreamGenerator::new(
        ScalabilityMode::L1T3,
        GeneratorConfig {
            keyframe_interval_tus: 30,
            ssrc: 0x102,
            ..Default::default()
        },
    );
    let structure = g.structure().clone();
    let mut next = || rtp_bytes(&g.next().expect("endless"), &structure);
    let refused = session.feed_refusable([next()], &|_, _| false);
    assert_eq!(refused, [ReceiveError::UnknownSsrc], "not bound yet");
    assert_eq!(session.router().counters().unknown_ssrc, 1);
    let bound = StreamConfig {
        ssrc: 0x102,
        rtx_ssrc: Some(0x202),
    };
    session
        .bind_stream(session.track, 2, bound)
        .expect("free SSRCs");
    assert_eq!(
        session.bind_stream(session.track, 3, bound),
        Err(RouterError::UnknownStream)
    );
    let other = session.publish(dd_track(0x300)).expect("free SSRC");
    assert_eq!(
        session.bind_stream(other, 0, bound),
        Err(RouterError::SsrcInUse),
        "an SSRC bound to one track cannot move to another"
    );
    // The first packet, with the structure, went to no stream: the stream's packets wait for
    // the next keyframe's.
    let refused = session.feed_refusable((0..200).map(|_| next()), &|_, _| false);
    assert!(
        refused
            .iter()
            .all(|&e| e == ReceiveError::UnreadableDd { stream: 2 }),
        "{refused:?}"
    );
    assert_eq!(session.router().counters().unknown_ssrc, 1);
    let before = session.received[&id].packets.len();
    assert!(before >= 30);
    // Found with a real browser: the RTX SSRC shows up with the first retransmission, long
    // after the media; binding it must not restart the stream under its subscribers.
    let with_rtx = StreamConfig {
        rtx_ssrc: Some(0x302),
        ..bound
    };
    session
        .bind_stream(session.track, 2, with_rtx)
        .expect("free SSRCs");
    session.feed((0..100).map(|_| next()), &|_, _| false);
    let headers = session.received[&id].headers();
    assert_eq!(headers.len(), before + 100, "every packet still forwarded");
    for pair in headers.windows(2) {
        assert_eq!(
            pair[1].sequence_number,
            pair[0].sequence_number.wrapping_add(1)
        );
    }
}

/// Three simulcast streams with unrelated timestamp bases whose sender reports tie them to the
/// same wall clock: across a switch the subscriber's timestamps follow capture time exactly,
/// even when the last frame of the old stream was several frames back (a base-layer-only
/// subscriber).
#[test]
fn simulcast_switch_aligns_timestamps_by_sender_reports() {
    let mut session = Session::new(simulcast_track());
    let id = session.subscribe(Layer::new(0, 0));
    let mut unit_of_frame = HashMap::new();
    let mut streams: Vec<_> = (0..3u32)
        .map(|s| {
            let first_timestamp = s.wrapping_mul(1_234_567_891);
            let sr = RtcpFeedback::SenderReport(SenderReport {
                ssrc: 0x100 + s,
                ntp_time: 0xE000_0000_0000_0000,
                rtp_time: first_timestamp,
                packet_count: 0,
                octet_count: 0,
            });
            session.publisher_rtcp(&rtcp_bytes(&sr));
            simulcast_stream(s, first_timestamp)
        })
        .collect();
    for tu in 0..100 {
        if tu == 40 {
            session.set_target(id, Layer::new(2, 0));
        }
        for (g, structure) in &mut streams {
            loop {
                let p = g.next().expect("endless");
                unit_of_frame.insert(p.frame_number, p.temporal_unit);
                let end = p.marker;
                session.feed([rtp_bytes(&p, structure)], &|_, _| false);
                if end {
                    break;
                }
            }
        }
        session.advance(FRAME);
    }
    let received = &session.received[&id];
    let base = received.headers()[0].timestamp;
    for bytes in &received.packets {
        let unit = unit_of_frame[&Received::source_frame(bytes)];
        let ts = RtpPacket::parse(bytes).expect("RTP").fields().timestamp;
        // Within one tick: when the old stream already sent a frame of the switch's capture
        // instant, the new stream starts one tick later so timestamps keep increasing. Without
        // the sender reports the switch would be a whole frame interval (3000) off.
        let off = ts.wrapping_sub(base).abs_diff(unit as u32 * 3000);
        assert!(
            off <= 1,
            "temporal unit {unit}: {off} ticks from its capture time"
        );
    }
    let layer = session.router().down_track_info(id).and_then(|d| d.layer);
    assert_eq!(layer.map(|l| l.spatial), Some(2), "switched");
}
