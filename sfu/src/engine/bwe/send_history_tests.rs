use proptest::prelude::*;

use super::*;
use crate::engine::rtcp::write_chunks_and_deltas;

const REFERENCE: u32 = 100;

/// A history that has sent `count` packets of 1000 + i % 50,000 bytes (a size each packet
/// nearby tells apart), 1 ms apart from `t0`; the last
/// one probing for cluster 7.
fn sent(t0: Instant, count: usize) -> SendHistory {
    let mut history = SendHistory::new();
    for i in 0..count {
        let probe = (i + 1 == count).then_some(7);
        let at = t0 + Duration::from_millis(i as u64);
        history.on_send(at, 1000 + i % 50_000, probe);
    }
    history
}

/// Matches a feedback from `base` reporting `deltas` (`None`: lost) at [`REFERENCE`].
fn feed(
    history: &mut SendHistory,
    base: u16,
    deltas: &[Option<i16>],
    results: &mut Vec<PacketResult>,
) -> FeedbackSummary {
    let mut body = Vec::new();
    let count = write_chunks_and_deltas(deltas, &mut body).unwrap();
    let feedback = TransportCc {
        sender_ssrc: 1,
        media_ssrc: 2,
        base_sequence: base,
        packet_status_count: count,
        reference_time: REFERENCE,
        fb_count: 0,
        chunks_and_deltas: &body,
    };
    history.on_feedback(&feedback, results).unwrap()
}

/// The first feedback's reference time on the history's clock.
fn reference_us(reference: u32) -> i64 {
    (REFERENCE_WRAP + i64::from(reference)) * REFERENCE_UNIT_US
}

fn sequences(results: &[PacketResult]) -> Vec<i64> {
    results.iter().map(|r| r.sequence).collect()
}

#[test]
fn stamps_in_order_and_matches_arrivals_and_losses() {
    let t0 = Instant::now();
    let mut history = sent(t0, 3);
    assert_eq!(history.on_send(t0, 50, None), 3);
    let mut results = Vec::new();
    let summary = feed(&mut history, 1, &[Some(4), None, Some(-2)], &mut results);
    assert_eq!(
        summary,
        FeedbackSummary {
            matched: 3,
            unknown: 0,
            duplicates: 0
        }
    );
    let base = reference_us(REFERENCE);
    assert_eq!(
        results,
        [
            PacketResult {
                sequence: 1,
                send_time: t0 + Duration::from_millis(1),
                size: 1001,
                probe_cluster: None,
                arrival: Some(micros(base + 1000)),
            },
            PacketResult {
                sequence: 2,
                send_time: t0 + Duration::from_millis(2),
                size: 1002,
                probe_cluster: Some(7),
                arrival: None,
            },
            PacketResult {
                sequence: 3,
                send_time: t0,
                size: 50,
                probe_cluster: None,
                arrival: Some(micros(base + 500)),
            },
        ]
    );
    assert_eq!(history.counters().sent, 4);
    assert_eq!(history.counters().matched, 3);
}

#[test]
fn sequence_numbers_wrap() {
    let t0 = Instant::now();
    let mut history = sent(t0, 65_538);
    let mut results = Vec::new();
    feed(&mut history, 65_534, &[Some(1); 4], &mut results);
    assert_eq!(sequences(&results), [65_534, 65_535, 65_536, 65_537]);
    assert_eq!(results[2].size, 1000 + 65_536 % 50_000);
}

#[test]
fn a_packet_reported_twice_is_given_once() {
    let t0 = Instant::now();
    let mut history = sent(t0, 10);
    let mut results = Vec::new();
    feed(&mut history, 2, &[Some(1), None, Some(1)], &mut results);
    // Overlapping, reordered feedback: 2..=4 again (4 received late), then 5.
    let summary = feed(
        &mut history,
        2,
        &[Some(1), Some(2), Some(3), Some(4)],
        &mut results,
    );
    assert_eq!(summary.duplicates, 3);
    assert_eq!(sequences(&results), [5]);
    assert_eq!(
        results[0].arrival,
        Some(micros(reference_us(REFERENCE) + 2500))
    );
    assert_eq!(history.counters().duplicates, 3);
}

#[test]
fn unsent_and_forgotten_packets_are_unknown() {
    let t0 = Instant::now();
    let mut history = sent(t0, SEND_HISTORY_CAPACITY + 10);
    let mut results = Vec::new();
    // 0..10 were overwritten by the packets a capacity later.
    let summary = feed(&mut history, 5, &[Some(1); 10], &mut results);
    assert_eq!(summary.unknown, 5);
    assert_eq!(sequences(&results), (10..15).collect::<Vec<_>>());
    assert_eq!(
        results[0].arrival,
        Some(micros(reference_us(REFERENCE) + 6 * 250))
    );
    // Beyond the last packet sent.
    let last = (SEND_HISTORY_CAPACITY + 9) as u16;
    let summary = feed(&mut history, last, &[Some(1); 3], &mut results);
    assert_eq!((summary.matched, summary.unknown), (1, 2));
    // Nothing sent at all.
    let summary = feed(&mut SendHistory::new(), 0, &[Some(1)], &mut results);
    assert_eq!((summary.matched, summary.unknown), (0, 1));
    assert!(results.is_empty());
}

#[test]
fn the_reference_time_wraps_and_reorders() {
    let t0 = Instant::now();
    let mut history = sent(t0, 4);
    assert_eq!(
        history.extend_reference(0xFF_FFFF),
        REFERENCE_WRAP + 0xFF_FFFF
    );
    // Past the wrap, then an older one reordered behind it.
    assert_eq!(history.extend_reference(1), 2 * REFERENCE_WRAP + 1);
    assert_eq!(
        history.extend_reference(0xFF_FFFE),
        REFERENCE_WRAP + 0xFF_FFFE
    );
    assert_eq!(history.extend_reference(2), 2 * REFERENCE_WRAP + 2);
}

#[test]
fn a_malformed_feedback_gives_nothing() {
    let mut history = sent(Instant::now(), 4);
    let feedback = TransportCc {
        sender_ssrc: 1,
        media_ssrc: 2,
        base_sequence: 0,
        packet_status_count: 2,
        reference_time: 0,
        fb_count: 0,
        chunks_and_deltas: &[0x20, 0x02, 1],
    };
    let mut results = vec![];
    assert_eq!(
        history.on_feedback(&feedback, &mut results),
        Err(TransportCcError::TruncatedDeltas)
    );
    assert_eq!(history.counters().malformed, 1);
    // Run-length chunks of packets not received, 8,191 each, a few bytes for all 65,535.
    let all = TransportCc {
        packet_status_count: u16::MAX,
        chunks_and_deltas: &[[0x1F, 0xFF]; 8].concat(),
        ..feedback
    };
    assert_eq!(
        history.on_feedback(&all, &mut results),
        Err(TransportCcError::TooManyPackets)
    );
    assert_eq!(history.counters().malformed, 2);
    let most = TransportCc {
        packet_status_count: SEND_HISTORY_CAPACITY as u16,
        ..all
    };
    let summary = history.on_feedback(&most, &mut results).expect("read");
    assert_eq!(
        (summary.matched, summary.unknown),
        (4, SEND_HISTORY_CAPACITY - 4)
    );
}

#[test]
fn acknowledged_bitrate_over_the_arrival_span() {
    let t0 = Instant::now();
    let result = |arrival_ms: Option<u64>, size| PacketResult {
        sequence: 0,
        send_time: t0,
        size,
        probe_cluster: None,
        arrival: arrival_ms.map(Duration::from_millis),
    };
    // 2000 bytes after the first arrival, over 10 ms: 1.6 Mbit/s; the lost one is not counted.
    let results = [
        result(Some(15), 1000),
        result(Some(5), 300),
        result(None, 5000),
        result(Some(10), 1000),
    ];
    assert_eq!(acknowledged_bitrate(&results), Some(1_600_000));
    assert_eq!(acknowledged_bitrate(&results[..2]), Some(800_000));
    assert_eq!(acknowledged_bitrate(&results[1..3]), None);
    assert_eq!(
        acknowledged_bitrate(&[result(Some(1), 1), result(Some(1), 1)]),
        None
    );
}

/// A packet of a random send sequence: its size, probe cluster, the gap before it in
/// microseconds, and its fate (`None`: lost, else the receive delta).
type Packet = (usize, Option<u32>, u64, Option<i16>);

fn packet() -> impl Strategy<Value = Packet> {
    let fate = prop_oneof![
        1 => Just(None),
        6 => (0i16..=255).prop_map(Some),
        1 => any::<i16>().prop_map(Some),
    ];
    (
        50usize..1500,
        proptest::option::of(0u32..4),
        0u64..20_000,
        fate,
    )
}

/// A feedback's base sequence, reference time and deltas.
type Feedback = (u16, i64, Vec<Option<i16>>);

/// The feedbacks a receiver writes for `fates` (`None`: lost, else the gap in delta units
/// from the previous arrival) from extended sequence `base`, cut into `sizes`, each with the
/// reference time of its first arrival; the clock starts at `start` units. Gives each
/// feedback's base, reference time (in its units, not cut to 24 bits) and deltas, and the
/// arrival of every packet in delta units.
fn feedbacks(
    fates: &[Option<i16>],
    base: usize,
    sizes: &[usize],
    start: i64,
) -> (Vec<Feedback>, Vec<Option<i64>>) {
    let units_per_reference = REFERENCE_UNIT_US / DELTA_UNIT_US;
    let mut clock = start;
    let arrivals: Vec<Option<i64>> = fates
        .iter()
        .map(|fate| {
            fate.map(|gap| {
                clock += i64::from(gap);
                clock
            })
        })
        .collect();
    let (mut out, mut at, mut last_arrival) = (Vec::new(), 0, start);
    for &size in sizes.iter().cycle() {
        if at == arrivals.len() {
            break;
        }
        let part = &arrivals[at..(at + size).min(arrivals.len())];
        let first = part
            .iter()
            .flatten()
            .next()
            .copied()
            .unwrap_or(last_arrival);
        let reference = first.div_euclid(units_per_reference);
        let mut previous = reference * units_per_reference;
        let deltas = part
            .iter()
            .map(|arrival| {
                arrival.map(|a| {
                    // Within i16: the first is below a reference unit, the rest are the gaps.
                    let delta = (a - previous) as i16;
                    previous = a;
                    delta
                })
            })
            .collect();
        last_arrival = previous;
        out.push(((base + at) as u16, reference, deltas));
        at += part.len();
    }
    (out, arrivals)
}

proptest! {
    #[test]
    fn matched_results_are_the_truth(
        // Sent before, unreported: the sequence numbers then cross the 16-bit wrap or not.
        already in prop_oneof![Just(0usize), Just(65_400usize)],
        packets in proptest::collection::vec(packet(), 1..600),
        sizes in proptest::collection::vec(1usize..120, 1..30),
        // Up to the 24-bit wrap of the reference time, and past it.
        start in 0i64..(1 << 32),
    ) {
        let t0 = Instant::now();
        let mut history = sent(t0, already);
        let mut send_time = t0;
        let mut truth = Vec::new();
        for (i, &(size, probe_cluster, gap_us, _)) in packets.iter().enumerate() {
            send_time += Duration::from_micros(gap_us);
            let sequence = history.on_send(send_time, size, probe_cluster);
            prop_assert_eq!(sequence, (already + i) as u16);
            truth.push(PacketResult {
                sequence: (already + i) as i64,
                send_time,
                size,
                probe_cluster,
                arrival: None,
            });
        }
        let fates: Vec<Option<i16>> = packets.iter().map(|p| p.3).collect();
        let (feedbacks, arrivals) = feedbacks(&fates, already, &sizes, start);
        // The history's clock: the first feedback's reference time, offset by one wrap.
        let units_per_reference = REFERENCE_UNIT_US / DELTA_UNIT_US;
        let first = feedbacks[0].1;
        let offset = (REFERENCE_WRAP + wire(first) as i64 - first) * units_per_reference;
        for (result, arrival) in truth.iter_mut().zip(&arrivals) {
            result.arrival = arrival.map(|a| micros((a + offset) * DELTA_UNIT_US));
        }
        let mut matched = Vec::new();
        let mut results = Vec::new();
        for (base, reference_time, deltas) in &feedbacks {
            let mut body = Vec::new();
            let count = write_chunks_and_deltas(deltas, &mut body).unwrap();
            let feedback = TransportCc {
                sender_ssrc: 1,
                media_ssrc: 2,
                base_sequence: *base,
                packet_status_count: count,
                reference_time: wire(*reference_time),
                fb_count: 0,
                chunks_and_deltas: &body,
            };
            history.on_feedback(&feedback, &mut results).unwrap();
            matched.extend_from_slice(&results);
        }
        prop_assert_eq!(matched, truth);
        prop_assert_eq!(history.counters().unknown, 0);
        prop_assert_eq!(history.counters().duplicates, 0);
    }
}

/// A reference time as the wire carries it: 24 bits.
fn wire(reference: i64) -> u32 {
    reference.rem_euclid(REFERENCE_WRAP) as u32
}

#[test]
fn a_remembered_packet_takes_16_bytes() {
    // 8,192 of them per viewer with transport-wide CC: 128 KiB.
    assert_eq!(size_of::<Option<Sent>>(), 16);
}

#[test]
fn a_remembered_packet_keeps_what_it_was_given() {
    let mut sent = Sent::new(123_456_789, 1_188, 77, 3);
    assert_eq!(
        (sent.send_us(), sent.size(), sent.reported()),
        (123_456_789, 1_188, false)
    );
    assert_eq!((sent.sequence, sent.probe), (77, 3));
    sent.mark_reported();
    assert_eq!(
        (sent.send_us(), sent.size(), sent.reported()),
        (123_456_789, 1_188, true)
    );
    // Past what their bits hold, the time and the size saturate, each in its own bits.
    let big = Sent::new(u64::MAX, 70_000, 0, 0);
    assert_eq!(
        (big.send_us(), big.size(), big.reported()),
        (u64::MAX >> 18, u16::MAX, false)
    );
    // Nothing at all is still a packet, not an empty slot.
    assert_eq!(Sent::new(0, 0, 0, 0).stamp.get(), 1);
}

/// A viewer that steps its reference time half a wrap ahead in each feedback (millions of
/// them) moves the extended reference past what its microseconds hold: its arrivals then
/// saturate, and its feedback still matches.
#[test]
fn a_reference_time_moved_past_what_microseconds_hold_saturates() {
    let t0 = Instant::now();
    let mut history = sent(t0, 4);
    // The feedback's reference time extends to past the most whose microseconds fit: the
    // highest so far is one unit behind it.
    let most = i64::MAX / REFERENCE_UNIT_US;
    let extended = most - most.rem_euclid(REFERENCE_WRAP) + REFERENCE_WRAP + i64::from(REFERENCE);
    history.reference = Some(extended - 1);
    let mut results = Vec::new();
    let summary = feed(&mut history, 0, &[Some(4), None, Some(4)], &mut results);
    assert_eq!(summary.matched, 3, "{summary:?}");
    assert_eq!(sequences(&results), [0, 1, 2]);
    let saturated = micros(i64::MAX);
    assert_eq!(results[0].arrival, Some(saturated));
    assert_eq!(results[2].arrival, Some(saturated));
}
