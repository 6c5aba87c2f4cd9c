//! Transport-wide congestion control feedback toward a publisher
//! (draft-holmer-rmcat-transport-wide-cc-extensions-01): when each of its packets arrived, by
//! transport-wide sequence number, so that its sender-side bandwidth estimation ramps up.
//!
//! Feedback goes out about ten times a second per publisher transport, not per packet: its
//! status chunks and deltas are encoded into a `Vec`, then written as an RTCP packet into
//! another.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use selector::Unwrapper;

use super::rtcp::{write_transport_cc, TransportCc};

/// How often feedback goes out.
pub const TWCC_INTERVAL: Duration = Duration::from_millis(100);
/// Arrivals remembered before feedback; older ones are reported as lost when this fills.
const MAX_PENDING: usize = 1000;
/// Reference time unit (64 ms) and delta unit (250 us) of the feedback format.
const REFERENCE_UNIT_US: i64 = 64_000;
const DELTA_UNIT_US: i64 = 250;
/// Packets per two-bit status vector chunk.
const SYMBOLS_PER_CHUNK: usize = 7;
/// The two-bit packet status symbols.
const NOT_RECEIVED: u16 = 0;
const SMALL_DELTA: u16 = 1;
const LARGE_DELTA: u16 = 2;

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
}

impl TwccRecorder {
    pub fn new(epoch: Instant) -> Self {
        Self {
            epoch,
            sequence: Unwrapper::default(),
            pending: VecDeque::new(),
            next_base: None,
            feedback_count: 0,
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

    /// The feedback for everything recorded since the last one, marshalled; None when nothing
    /// arrived.
    pub fn feedback(&mut self, sender_ssrc: u32, media_ssrc: u32) -> Option<Vec<u8>> {
        let mut arrivals: Vec<(i64, Instant)> = self.pending.drain(..).collect();
        arrivals.sort_unstable_by_key(|&(seq, _)| seq);
        arrivals.dedup_by_key(|&mut (seq, _)| seq);
        let first_seq = arrivals.first()?.0;
        // Packets between the last feedback and the first arrival were lost: report them, unless
        // the gap is beyond anything a sender still tracks.
        let base = self
            .next_base
            .filter(|&b| first_seq - b <= MAX_PENDING as i64)
            .unwrap_or(first_seq);
        let last = arrivals.last()?.0;
        // At most MAX_PENDING packets past the base, far below u16.
        let count = (last - base + 1).min(i64::from(u16::MAX)) as u16;
        let earliest = arrivals.iter().map(|&(_, at)| at).min()?;
        let reference_us = micros(earliest.saturating_duration_since(self.epoch));
        let reference = reference_us / REFERENCE_UNIT_US;
        let mut previous_us = reference * REFERENCE_UNIT_US;
        let mut symbols = Vec::with_capacity(usize::from(count));
        // One octet per small delta, two per large one.
        let mut deltas = Vec::with_capacity(2 * arrivals.len());
        let mut received = arrivals.iter().peekable();
        for seq in base..base + i64::from(count) {
            let Some(&(_, at)) = received.next_if(|&&(s, _)| s == seq) else {
                symbols.push(NOT_RECEIVED);
                continue;
            };
            let at_us = micros(at.saturating_duration_since(self.epoch));
            let units = delta_units(at_us - previous_us);
            previous_us += units * DELTA_UNIT_US;
            // Clamped to 16 bits signed by `delta_units`; a small delta is 8 bits unsigned.
            if let Ok(small) = u8::try_from(units) {
                symbols.push(SMALL_DELTA);
                deltas.push(small);
            } else {
                symbols.push(LARGE_DELTA);
                deltas.extend_from_slice(&(units as i16).to_be_bytes());
            }
        }
        self.next_base = Some(base + i64::from(count));
        let mut body =
            Vec::with_capacity(2 * symbols.len().div_ceil(SYMBOLS_PER_CHUNK) + deltas.len());
        for chunk in symbols.chunks(SYMBOLS_PER_CHUNK) {
            body.extend_from_slice(&status_vector(chunk).to_be_bytes());
        }
        body.extend_from_slice(&deltas);
        let feedback = TransportCc {
            sender_ssrc,
            media_ssrc,
            // Truncation intended: the wire carries the low 16 bits.
            base_sequence: base as u16,
            packet_status_count: count,
            // 24 bits on the wire.
            reference_time: (reference & 0xFF_FFFF) as u32,
            fb_count: self.feedback_count,
            chunks_and_deltas: &body,
        };
        self.feedback_count = self.feedback_count.wrapping_add(1);
        // The fixed fields, the body and at most three octets of padding.
        let mut packet = vec![0; 20 + body.len() + 3];
        let len = write_transport_cc(&feedback, &mut packet).ok()?;
        packet.truncate(len);
        Some(packet)
    }
}

/// A two-bit status vector chunk of up to seven symbols: the chunk type bit (1), the symbol
/// size bit (1: two bits), then the symbols from the most significant end, zero (not received)
/// past the last.
fn status_vector(symbols: &[u16]) -> u16 {
    symbols
        .iter()
        .zip((0..SYMBOLS_PER_CHUNK as u16).rev())
        .fold(0xC000, |chunk, (&symbol, slot)| {
            chunk | symbol << (2 * slot)
        })
}

/// A delta in 250 us units, clamped to what a large delta can carry (16 bits signed).
fn delta_units(delta_us: i64) -> i64 {
    (delta_us / DELTA_UNIT_US).clamp(i64::from(i16::MIN), i64::from(i16::MAX))
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

    #[test]
    fn reports_arrivals_losses_and_deltas() {
        let t0 = Instant::now();
        let mut r = TwccRecorder::new(t0);
        let ms = |n: u64| t0 + Duration::from_millis(n);
        r.record(65534, ms(100));
        r.record(65535, ms(110));
        // 0 lost; 1 arrives 20 ms after 65535.
        r.record(1, ms(130));
        let fb = parse(&r.feedback(1, 2).expect("feedback"));
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
        let fb = parse(&r.feedback(1, 2).expect("feedback"));
        assert_eq!(fb.base_sequence_number, 2);
        assert_eq!(fb.packet_status_count, 2);
        assert_eq!(fb.fb_pkt_count, 1);
        assert!(r.feedback(1, 2).is_none(), "nothing new");
    }

    #[test]
    fn late_and_out_of_order_arrivals() {
        let t0 = Instant::now();
        let mut r = TwccRecorder::new(t0);
        r.record(10, t0 + Duration::from_millis(5));
        r.record(9, t0 + Duration::from_millis(7));
        let fb = parse(&r.feedback(1, 2).expect("feedback"));
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
        assert!(r.feedback(1, 2).is_none());
    }
}
