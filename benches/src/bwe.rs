//! Bandwidth estimation cases, send side: stamping each packet sent to a viewer with its
//! transport-wide sequence number into the send history, and matching the viewer's feedback
//! back to what was sent.

use std::time::{Duration, Instant};

use sfu::engine::bwe::SendHistory;
use sfu::engine::rtcp::{
    parse_compound, write_chunks_and_deltas, RtcpFeedback, RtcpWireWriter, RtcpWriter, TransportCc,
};

use crate::Case;

/// Packets one feedback reports: about what 100 ms of a 4 Mbit/s stream sends.
const FEEDBACK_PACKETS: u16 = 50;
/// Offset of the base sequence in a transport-wide CC packet: after the header and two SSRCs.
const BASE_SEQUENCE_AT: usize = 12;

pub fn cases() -> Vec<Case> {
    vec![send_record(), feedback()]
}

/// One packet sent: its sequence number stamped and its send time, size and probe cluster
/// recorded.
fn send_record() -> Case {
    let mut history = SendHistory::new();
    let mut now = Instant::now();
    let mut expected: u16 = 0;
    Case::new("bwe/send_record", move || {
        now += Duration::from_micros(250);
        let probe = expected.is_multiple_of(16).then_some(1);
        let sequence = history.on_send(now, 1200, probe);
        assert_eq!(std::hint::black_box(sequence), expected, "stamped in order");
        expected = expected.wrapping_add(1);
    })
}

/// One feedback of 50 packets, a few lost and one far behind, parsed from its datagram and
/// matched against the history: the 50 packets it reports are stamped first, and the
/// datagram's base sequence is moved on to them.
fn feedback() -> Case {
    let mut datagram = feedback_datagram();
    let mut history = SendHistory::new();
    let mut results = Vec::new();
    let mut now = Instant::now();
    Case::new("bwe/feedback", move || {
        now += Duration::from_millis(2);
        let base = history.on_send(now, 1200, None);
        for _ in 1..FEEDBACK_PACKETS {
            now += Duration::from_millis(2);
            history.on_send(now, 1200, None);
        }
        datagram[BASE_SEQUENCE_AT..BASE_SEQUENCE_AT + 2].copy_from_slice(&base.to_be_bytes());
        let mut matched = 0;
        parse_compound(&datagram, |item| {
            if let RtcpFeedback::TransportCc(feedback) = item {
                let summary = history.on_feedback(&feedback, &mut results);
                matched += summary.expect("a well-formed feedback").matched;
            }
        })
        .expect("a well-formed datagram");
        assert_eq!(
            matched,
            usize::from(FEEDBACK_PACKETS),
            "every packet matched"
        );
        std::hint::black_box(&results);
    })
}

fn feedback_datagram() -> Vec<u8> {
    let deltas: Vec<Option<i16>> = (0..FEEDBACK_PACKETS)
        .map(|i| match i {
            7 | 23 | 24 => None,
            // Far behind the previous: a large delta.
            40 => Some(-12),
            _ => Some(8),
        })
        .collect();
    let mut body = Vec::new();
    let count = write_chunks_and_deltas(&deltas, &mut body).expect("50 packets");
    let feedback = RtcpFeedback::TransportCc(TransportCc {
        sender_ssrc: 9,
        media_ssrc: 0x5000,
        base_sequence: 0,
        packet_status_count: count,
        reference_time: 1000,
        fb_count: 0,
        chunks_and_deltas: &body,
    });
    let mut writer = RtcpWireWriter::new(b"bench").expect("a short CNAME");
    let mut out = [0; 1500];
    let len = writer.write(&feedback, &mut out).expect("fits");
    out[..len].to_vec()
}
