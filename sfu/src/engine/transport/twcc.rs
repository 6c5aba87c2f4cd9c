//! Transport-wide congestion control feedback toward a publisher
//! (draft-holmer-rmcat-transport-wide-cc-extensions-01): when each of its packets arrived, by
//! transport-wide sequence number, so that its sender-side bandwidth estimation ramps up.
//!
//! Feedback goes out about ten times a second per publisher transport, not per packet: it is
//! built into scratch buffers the recorder sizes once for a full window of arrivals, then
//! written into the caller's buffer, so that building one allocates nothing.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use selector::Unwrapper;

use crate::engine::rtcp::{
    write_chunks_and_deltas, write_transport_cc, TransportCc, DELTA_UNIT, REFERENCE_TIME_UNIT,
};
use crate::engine::track::TrackId;

/// How often feedback goes out.
pub const TWCC_INTERVAL: Duration = Duration::from_millis(100);
/// Arrivals remembered before feedback; older ones are reported as lost when this fills.
const MAX_PENDING: usize = 1000;
/// Packets one feedback usually covers at most: a gap of lost ones since the last feedback
/// (reported up to `MAX_PENDING`), then the pending arrivals and the losses between them.
const MAX_REPORTED: usize = 2 * MAX_PENDING;
/// The feedback format's units, in microseconds.
const REFERENCE_UNIT_US: i64 = REFERENCE_TIME_UNIT.as_micros() as i64;
const DELTA_UNIT_US: i64 = DELTA_UNIT.as_micros() as i64;

/// Transport-wide CC feedback state of a transport that publishes with the extension.
#[derive(Debug)]
pub(in crate::engine) struct Twcc {
    pub recorder: TwccRecorder,
    /// A track of the transport: where the feedback goes, and whose SSRC it names.
    pub track: TrackId,
    /// Whether the router has queued the transport for feedback not yet written.
    pub queued: bool,
}

/// Arrivals of one publisher transport's packets, by transport-wide sequence number.
#[derive(Debug)]
pub struct TwccRecorder {
    /// Arrival times are measured from here.
    epoch: Instant,
    sequence: Unwrapper,
    /// (extended sequence number, arrival), in arrival order.
    pending: VecDeque<(i64, Instant)>,
    /// The first sequence number the next feedback covers.
    next_base: Option<i64>,
    feedback_count: u8,
    /// Per packet of the feedback being built, its delta (`None`: lost); kept between
    /// feedbacks for its capacity.
    deltas: Vec<Option<i16>>,
    /// The chunks and deltas of the feedback being built; kept for its capacity.
    body: Vec<u8>,
}

impl TwccRecorder {
    pub fn new(epoch: Instant) -> Self {
        Self {
            epoch,
            sequence: Unwrapper::default(),
            // Sized for a full window up front (some 30 kB a publisher transport), so that a
            // burst of packets (a keyframe) does not grow them mid-call.
            pending: VecDeque::with_capacity(MAX_PENDING),
            next_base: None,
            feedback_count: 0,
            deltas: Vec::with_capacity(MAX_REPORTED),
            // Two octets per arrival at most, and two per seven packets of chunks at most.
            body: Vec::with_capacity(2 * MAX_PENDING + 2 * MAX_REPORTED.div_ceil(7)),
        }
    }

    pub fn record(&mut self, seq: u16, arrival: Instant) {
        let ext = self.sequence.unwrap(seq);
        if self.next_base.is_some_and(|base| ext < base) {
            // Already reported (as lost, or a duplicate): too late to say otherwise.
            return;
        }
        if self.pending.len() == MAX_PENDING {
            self.pending.pop_front();
        }
        self.pending.push_back((ext, arrival));
    }

    /// Whether anything arrived since the last feedback.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Writes the feedback for everything recorded since the last one at the start of `out`,
    /// returning its length; `None` when nothing arrived, or when `out` is too short (the
    /// arrivals are then dropped, as a lost feedback would lose them).
    pub fn write_feedback(
        &mut self,
        sender_ssrc: u32,
        media_ssrc: u32,
        out: &mut [u8],
    ) -> Option<usize> {
        let (base, reference) = self.collect_deltas()?;
        let count = write_chunks_and_deltas(&self.deltas, &mut self.body).ok()?;
        let feedback = TransportCc {
            sender_ssrc,
            media_ssrc,
            // Truncation intended: the wire carries the low 16 bits.
            base_sequence: base as u16,
            packet_status_count: count,
            // 24 bits on the wire.
            reference_time: (reference & 0xFF_FFFF) as u32,
            fb_count: self.feedback_count,
            chunks_and_deltas: &self.body,
        };
        self.feedback_count = self.feedback_count.wrapping_add(1);
        write_transport_cc(&feedback, out).ok()
    }

    /// Takes the pending arrivals into `deltas`, one per sequence number from the base (lost
    /// ones included); returns the base and the reference time, or `None` when nothing arrived.
    fn collect_deltas(&mut self) -> Option<(i64, i64)> {
        let arrivals = self.pending.make_contiguous();
        // By arrival too, so that of duplicates the first arrival is reported.
        arrivals.sort_unstable();
        let first_seq = arrivals.first()?.0;
        // Packets between the last feedback and the first arrival were lost: report them, unless
        // the gap is beyond anything a sender still tracks.
        let base = self
            .next_base
            .filter(|&b| first_seq - b <= MAX_PENDING as i64)
            .unwrap_or(first_seq);
        let earliest = arrivals.iter().map(|&(_, at)| at).min()?;
        let reference = micros(earliest.saturating_duration_since(self.epoch)) / REFERENCE_UNIT_US;
        let mut previous_us = reference * REFERENCE_UNIT_US;
        self.deltas.clear();
        let mut next_seq = base;
        // The packet status count has 16 bits.
        let end = base + i64::from(u16::MAX);
        for &(seq, at) in arrivals.iter().take_while(|&&(seq, _)| seq < end) {
            if seq < next_seq {
                // A duplicate: the first arrival is the one reported.
                continue;
            }
            let lost = usize::try_from(seq - next_seq).unwrap_or(0);
            self.deltas.extend(std::iter::repeat_n(None, lost));
            let units = delta_units(micros(at.saturating_duration_since(self.epoch)) - previous_us);
            previous_us += i64::from(units) * DELTA_UNIT_US;
            self.deltas.push(Some(units));
            next_seq = seq + 1;
        }
        self.next_base = Some(base + self.deltas.len() as i64);
        self.pending.clear();
        Some((base, reference))
    }
}

/// A delta in 250 us units, clamped to what a large delta can carry (16 bits signed).
fn delta_units(delta_us: i64) -> i16 {
    // Clamped into range first.
    (delta_us / DELTA_UNIT_US).clamp(i64::from(i16::MIN), i64::from(i16::MAX)) as i16
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use rtcp::transport_feedbacks::transport_layer_cc::{
        PacketStatusChunk, SymbolTypeTcc, TransportLayerCc,
    };
    use webrtc_util::Unmarshal;

    use super::*;

    fn parse(bytes: &[u8]) -> TransportLayerCc {
        TransportLayerCc::unmarshal(&mut &bytes[..]).expect("valid feedback")
    }

    /// The feedback, marshalled.
    fn feedback(r: &mut TwccRecorder) -> Option<Vec<u8>> {
        let mut out = [0; 1500];
        let len = r.write_feedback(1, 2, &mut out)?;
        Some(out[..len].to_vec())
    }

    #[test]
    fn reports_arrivals_losses_and_deltas() {
        let t0 = Instant::now();
        let mut r = TwccRecorder::new(t0);
        let ms = |n: u64| t0 + Duration::from_millis(n);
        r.record(65534, ms(100));
        r.record(65535, ms(110));
        // 0 lost; 1 arrives 20 ms after 65535.
        r.record(1, ms(130));
        let fb = parse(&feedback(&mut r).expect("feedback"));
        assert_eq!(fb.base_sequence_number, 65534);
        assert_eq!(fb.packet_status_count, 4);
        assert_eq!(fb.fb_pkt_count, 0);
        assert_eq!(fb.reference_time, 1, "100 ms is one 64 ms unit");
        let deltas: Vec<i64> = fb.recv_deltas.iter().map(|d| d.delta).collect();
        assert_eq!(
            deltas,
            [36_000, 10_000, 20_000],
            "from the reference time (64 ms), then apart"
        );
        let PacketStatusChunk::StatusVectorChunk(chunk) = &fb.packet_chunks[0] else {
            panic!("status vector");
        };
        assert_eq!(chunk.symbol_list[2], SymbolTypeTcc::PacketNotReceived);
        // The next feedback continues after the last one, across the wrap; 2 was lost.
        r.record(3, ms(140));
        let fb = parse(&feedback(&mut r).expect("feedback"));
        assert_eq!(fb.base_sequence_number, 2);
        assert_eq!(fb.packet_status_count, 2);
        assert_eq!(fb.fb_pkt_count, 1);
        assert!(feedback(&mut r).is_none(), "nothing new");
    }

    #[test]
    fn late_and_out_of_order_arrivals() {
        let t0 = Instant::now();
        let mut r = TwccRecorder::new(t0);
        r.record(10, t0 + Duration::from_millis(5));
        r.record(9, t0 + Duration::from_millis(7));
        let fb = parse(&feedback(&mut r).expect("feedback"));
        assert_eq!(fb.base_sequence_number, 9);
        assert_eq!(fb.packet_status_count, 2);
        let deltas: Vec<i64> = fb.recv_deltas.iter().map(|d| d.delta).collect();
        assert_eq!(deltas, [7_000, -2_000], "a negative delta is a large one");
        assert_eq!(
            fb.recv_deltas[1].type_tcc_packet,
            SymbolTypeTcc::PacketReceivedLargeDelta
        );
        // Already reported: ignored.
        r.record(9, t0 + Duration::from_millis(9));
        assert!(feedback(&mut r).is_none());
    }
}
