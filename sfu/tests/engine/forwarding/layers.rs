//! Layers: each subscriber gets the layers it asked for, whole and in order; switching up asks
//! the publisher for a keyframe once per interval however many subscribers wait for it.

use super::*;

#[test]
fn l3t3_to_subscribers_at_three_layers() {
    let (packets, bytes) = generated(ScalabilityMode::L3T3, 200);
    let truth = by_frame(&packets);
    let mut session = Session::new(dd_track(0x1000));
    let targets = [Layer::new(0, 0), Layer::new(1, 1), Layer::new(2, 2)];
    let subscribers: Vec<_> = targets.iter().map(|&t| session.subscribe(t)).collect();
    session.feed(bytes, &|_, _| false);
    let mut counts = Vec::new();
    for (id, target) in subscribers.iter().zip(targets) {
        let received = &session.received[id];
        check_subscriber(received, &truth, target.spatial);
        let structure = packets[0]
            .descriptor
            .attached_structure
            .clone()
            .expect("keyframe structure");
        for bytes in &received.packets {
            let packet = RtpPacket::parse(bytes).expect("RTP");
            let dd = DependencyDescriptor::parse(
                packet.extension(DD_EXT).expect("DD out"),
                Some(&structure),
            )
            .expect("DD");
            let layer = Layer::new(dd.spatial_id(), dd.temporal_id());
            assert!(target.covers(layer), "{layer:?} beyond {target:?}");
        }
        counts.push(received.packets.len());
    }
    assert!(counts[0] < counts[1] && counts[1] < counts[2] && counts[2] == bytes_len(&packets));
}

fn bytes_len(packets: &[GeneratedPacket]) -> usize {
    packets.len()
}

#[test]
fn a_hundred_subscribers_switching_up_send_one_pli_per_interval() {
    let (_, bytes) = generated(ScalabilityMode::L3T3Key, 90);
    let mut session = Session::new(dd_track(0x1000));
    for _ in 0..100 {
        session.subscribe(Layer::new(0, 2));
    }
    let (first, rest) = bytes.split_at(bytes.len() / 3);
    session.feed(first.to_vec(), &|_, _| false);
    let plis_before = session.router().counters().keyframe_requests_sent;
    for &id in &session.subscribers.clone() {
        session.set_target(id, Layer::new(2, 2));
    }
    // One temporal unit's packets per frame interval, for about two seconds.
    for chunk in rest.chunks(10) {
        session.feed(chunk.to_vec(), &|_, _| false);
        session.advance(FRAME);
    }
    let plis = session.router().counters().keyframe_requests_sent - plis_before;
    let elapsed_ms = (rest.len() / 10 + 1) as u64 * 33;
    assert!(plis >= 1, "the switch asked for a keyframe");
    assert!(
        plis <= elapsed_ms / 500 + 1,
        "{plis} PLIs in {elapsed_ms} ms"
    );
    let asked = session
        .router()
        .keyframe_counters(session.track)
        .expect("track")
        .asked;
    assert!(asked >= 100, "every subscriber asked ({asked})");
}

#[test]
fn subscriber_pli_becomes_one_throttled_request() {
    let (_, bytes) = generated(ScalabilityMode::L1T3, 10);
    let mut session = Session::new(dd_track(0x1000));
    let ids: Vec<_> = (0..5).map(|_| session.subscribe(Layer::MAX)).collect();
    session.feed(bytes, &|_, _| false);
    let pli = RtcpFeedback::Pli(Pli {
        sender_ssrc: 9,
        media_ssrc: 0x5000,
    });
    let rtcp = rtcp_bytes(&pli);
    // The first is asked of the publisher at once, the others fall in its interval.
    let before = session.router().counters().keyframe_requests_sent;
    for id in ids {
        session.subscriber_rtcp(id, &rtcp);
    }
    session.advance(Duration::from_millis(1));
    assert_eq!(
        session.router().counters().keyframe_requests_sent - before,
        1
    );
}

#[test]
fn layer_changes_are_events_and_fir_can_replace_pli() {
    let (_, bytes) = generated(ScalabilityMode::L3T3, 20);
    let config = RouterConfig {
        keyframe_request: KeyframeRequest::Fir,
        ..Default::default()
    };
    let mut session = Session::with_router(config, dd_track(0x1000));
    let id = session.subscribe(Layer::new(0, 2));
    let (first, rest) = bytes.split_at(bytes.len() / 2);
    session.feed(first.to_vec(), &|_, _| false);
    session.set_target(id, Layer::new(2, 2));
    session.feed(rest.to_vec(), &|_, _| false);
    let events = session.events();
    let layers: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::LayerChanged {
                down_track, layer, ..
            } if *down_track == id => Some(*layer),
            _ => None,
        })
        .collect();
    assert_eq!(
        layers.first(),
        Some(&Some(Layer::new(0, 2))),
        "the first layer is announced"
    );
    assert!(
        events.contains(&Event::KeyframeRequested {
            transport: session.publisher,
            track: session.track
        }),
        "L3T3 up-switch asks"
    );
    let firs: Vec<u8> = rtcp_items(&session.rtcp_to_publisher)
        .iter()
        .filter_map(|i| match i {
            RtcpFeedback::Fir(f) => Some(f.entries[0].seq_nr),
            RtcpFeedback::Pli(_) => panic!("FIR configured"),
            _ => None,
        })
        .collect();
    assert_eq!(firs.first(), Some(&1), "FIR sequence numbers start at 1");
    assert!(firs.windows(2).all(|w| w[1] == w[0].wrapping_add(1)));
}

/// A subscription paused mid-stream and resumed: what it got last is as old as the pause, so
/// it resumes at a keyframe, asked of the publisher as it resumes, never with a frame whose
/// references it missed while paused.
#[test]
fn a_subscription_resumed_mid_stream_starts_again_at_a_keyframe_it_asks_for() {
    let (packets, bytes) = generated(ScalabilityMode::L1T3, 100);
    let truth = by_frame(&packets);
    let tu_end = |tu: usize| {
        let mut seen = 0;
        packets.iter().position(|p| {
            seen += usize::from(p.marker);
            seen == tu
        })
    };
    let (paused_at, resumed_at) = (
        tu_end(20).expect("20 units") + 1,
        tu_end(30).expect("30") + 1,
    );
    let mut session = Session::new(dd_track(0x1000));
    let id = session.subscribe(Layer::MAX);
    let mute = |session: &mut Session, muted| {
        session
            .network
            .with_router(|router| router.set_muted(id, muted))
            .expect("a subscription");
    };
    session.feed(bytes[..paused_at].iter().cloned(), &|_, _| false);
    let before = session.received[&id].packets.len();
    assert_eq!(before, paused_at, "everything before the pause");
    mute(&mut session, true);
    session.feed(bytes[paused_at..resumed_at].iter().cloned(), &|_, _| false);
    assert_eq!(
        session.received[&id].packets.len(),
        before,
        "nothing while paused"
    );
    let asked = session.router().counters().keyframe_requests_sent;
    mute(&mut session, false);
    session.feed(bytes[resumed_at..].iter().cloned(), &|_, _| false);
    let after = session.router().counters().keyframe_requests_sent;
    assert!(after > asked, "a keyframe asked for as it resumed");
    let received = &session.received[&id];
    check_subscriber(received, &truth, 0);
    let resumed = Received::source_frame(&received.packets[before]);
    assert!(
        truth[&resumed].descriptor.attached_structure.is_some(),
        "resumed at a keyframe"
    );
}
