//! The packet status chunks and receive deltas of transport-wide CC feedback
//! (draft-holmer-rmcat-transport-wide-cc-extensions-01 section 3.1), both ways: walked in
//! place over the borrowed body of a [`TransportCc`], and written from a list of arrivals into
//! a buffer the caller reuses. Neither allocates once that buffer has grown.
//!
//! The body is every status chunk, then every receive delta: where the deltas start is known
//! only once the chunks covering `packet_status_count` packets are counted, so
//! [`PacketReports::new`] walks the chunks once, checking everything, and the walk that
//! follows cannot fail.

use std::fmt;
use std::time::Duration;

use super::feedback::TransportCc;
use super::writer::WriteError;

/// The unit of the reference time.
pub const REFERENCE_TIME_UNIT: Duration = Duration::from_millis(64);
/// The unit of a receive delta.
pub const DELTA_UNIT: Duration = Duration::from_micros(250);
/// The longest run a run length chunk carries (13 bits).
const MAX_RUN: usize = 0x1FFF;
/// Packets per two-bit and per one-bit status vector chunk.
const TWO_BIT_SYMBOLS: usize = 7;
const ONE_BIT_SYMBOLS: usize = 14;
/// A run of at least this many equal symbols is written as a run length chunk: a status
/// vector chunk covers at most this many.
const MIN_RUN: usize = ONE_BIT_SYMBOLS;
/// The chunk type bit (set: status vector) and the symbol size bit (set: two bits).
const VECTOR_CHUNK: u16 = 0x8000;
const TWO_BIT_VECTOR: u16 = 0x4000;

/// What the feedback says of one packet, and its receive delta in [`DELTA_UNIT`]s from the
/// previous received packet (from the reference time, for the first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketStatus {
    /// Not received (yet): no delta.
    NotReceived,
    /// Received, with a delta of one octet: 0 to 63.75 ms after the previous.
    SmallDelta(u8),
    /// Received, with a delta of two octets, signed: out of order, or far apart.
    LargeDelta(i16),
}

impl PacketStatus {
    /// The receive delta in [`DELTA_UNIT`]s, `None` when not received.
    pub fn delta(self) -> Option<i16> {
        match self {
            Self::NotReceived => None,
            Self::SmallDelta(delta) => Some(i16::from(delta)),
            Self::LargeDelta(delta) => Some(delta),
        }
    }

    /// The status a receiver writes for `delta` (`None`: not received): a small delta when it
    /// fits one unsigned octet.
    pub fn from_delta(delta: Option<i16>) -> Self {
        match delta {
            None => Self::NotReceived,
            Some(delta) => u8::try_from(delta).map_or(Self::LargeDelta(delta), Self::SmallDelta),
        }
    }

    /// The two-bit symbol, which is also the count of delta octets.
    fn symbol(self) -> u16 {
        match self {
            Self::NotReceived => 0,
            Self::SmallDelta(_) => 1,
            Self::LargeDelta(_) => 2,
        }
    }
}

/// One packet the feedback reports on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketReport {
    /// Its transport-wide sequence number.
    pub sequence: u16,
    /// Whether it arrived, and its receive delta.
    pub status: PacketStatus,
}

/// Why the chunks and deltas of a feedback cannot be read; nothing of it is then trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportCcError {
    /// The chunks end before covering `packet_status_count` packets.
    MissingChunks,
    /// The body ends before the deltas the chunks announce.
    TruncatedDeltas,
    /// A status symbol of 3, which the draft reserves.
    ReservedSymbol,
    /// More packets than a sender remembers (`SEND_HISTORY_CAPACITY`): no viewer's feedback
    /// honestly covers them, and walking each would cost the sender a lookup. Refused by the
    /// send history, not the parser.
    TooManyPackets,
}

impl fmt::Display for TransportCcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::MissingChunks => "transport-cc chunks cover fewer packets than counted",
            Self::TruncatedDeltas => "transport-cc receive deltas truncated",
            Self::ReservedSymbol => "transport-cc status symbol is reserved",
            Self::TooManyPackets => "transport-cc reports more packets than were remembered",
        })
    }
}

impl std::error::Error for TransportCcError {}

/// A status symbol as read: the two-bit value, the reserved 3 included.
type Symbol = u16;
const RESERVED: Symbol = 3;

/// One packet status chunk, decoded from its 16 bits.
#[derive(Debug, Clone, Copy)]
enum Chunk {
    /// `length` packets of the same `symbol`.
    Run { symbol: Symbol, length: usize },
    /// Up to 14 one-bit or 7 two-bit symbols, from the most significant end.
    Vector { bits: u16, two_bit: bool },
}

impl Chunk {
    fn new(word: u16) -> Self {
        if word & VECTOR_CHUNK == 0 {
            return Self::Run {
                symbol: word >> 13 & 0b11,
                length: usize::from(word) & MAX_RUN,
            };
        }
        Self::Vector {
            bits: word,
            two_bit: word & TWO_BIT_VECTOR != 0,
        }
    }

    /// How many packets it covers.
    fn len(self) -> usize {
        match self {
            Self::Run { length, .. } => length,
            Self::Vector { two_bit: true, .. } => TWO_BIT_SYMBOLS,
            Self::Vector { two_bit: false, .. } => ONE_BIT_SYMBOLS,
        }
    }

    /// The symbol of its `index`th packet, below [`len`](Self::len).
    fn symbol(self, index: usize) -> Symbol {
        match self {
            Self::Run { symbol, .. } => symbol,
            Self::Vector {
                bits,
                two_bit: true,
            } => bits >> (2 * (TWO_BIT_SYMBOLS - 1 - index)) & 0b11,
            Self::Vector {
                bits,
                two_bit: false,
            } => bits >> (ONE_BIT_SYMBOLS - 1 - index) & 0b1,
        }
    }
}

/// The packets a feedback reports on, in sequence order from its base sequence: checked
/// whole when made, so iterating cannot fail.
#[derive(Debug, Clone)]
pub struct PacketReports<'a> {
    /// The chunks after `chunk`.
    chunks: &'a [u8],
    chunk: Chunk,
    /// Packets of `chunk` already given.
    taken: usize,
    deltas: &'a [u8],
    next_sequence: u16,
    remaining: usize,
}

impl<'a> PacketReports<'a> {
    /// The packets `feedback` reports on, after checking that its chunks cover them all, that
    /// no symbol is reserved and that every delta is there. Octets past the last delta
    /// (padding) are ignored.
    pub fn new(feedback: &TransportCc<'a>) -> Result<Self, TransportCcError> {
        let body = feedback.chunks_and_deltas;
        let count = usize::from(feedback.packet_status_count);
        let (chunk_octets, delta_octets) = measure(body, count)?;
        let (chunks, deltas) = body.split_at(chunk_octets);
        if deltas.len() < delta_octets {
            return Err(TransportCcError::TruncatedDeltas);
        }
        Ok(Self {
            chunks,
            // An empty chunk: the first `next` moves on to the first real one.
            chunk: Chunk::Run {
                symbol: 0,
                length: 0,
            },
            taken: 0,
            deltas,
            next_sequence: feedback.base_sequence,
            remaining: count,
        })
    }

    /// The next chunk's first packet's symbol, moving on to it; `None` past the last chunk,
    /// which `new` ruled out while packets remain.
    fn next_symbol(&mut self) -> Option<Symbol> {
        while self.taken == self.chunk.len() {
            let (word, rest) = self.chunks.split_first_chunk::<2>()?;
            self.chunks = rest;
            self.chunk = Chunk::new(u16::from_be_bytes(*word));
            self.taken = 0;
        }
        self.taken += 1;
        Some(self.chunk.symbol(self.taken - 1))
    }

    /// The delta a symbol announces, taken off the front of the deltas.
    fn take_delta(&mut self, symbol: Symbol) -> Option<PacketStatus> {
        Some(match symbol {
            0 => PacketStatus::NotReceived,
            1 => {
                let (&delta, rest) = self.deltas.split_first()?;
                self.deltas = rest;
                PacketStatus::SmallDelta(delta)
            }
            2 => {
                let (delta, rest) = self.deltas.split_first_chunk::<2>()?;
                self.deltas = rest;
                PacketStatus::LargeDelta(i16::from_be_bytes(*delta))
            }
            _ => return None,
        })
    }
}

impl Iterator for PacketReports<'_> {
    type Item = PacketReport;

    fn next(&mut self) -> Option<PacketReport> {
        if self.remaining == 0 {
            return None;
        }
        let symbol = self.next_symbol()?;
        let status = self.take_delta(symbol)?;
        let report = PacketReport {
            sequence: self.next_sequence,
            status,
        };
        self.next_sequence = self.next_sequence.wrapping_add(1);
        self.remaining -= 1;
        Some(report)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

/// The octets of the chunks covering `count` packets, and of the deltas they announce.
fn measure(body: &[u8], count: usize) -> Result<(usize, usize), TransportCcError> {
    let (mut covered, mut chunk_octets, mut delta_octets) = (0, 0, 0);
    let mut words = body.chunks_exact(2);
    while covered < count {
        let word = words.next().ok_or(TransportCcError::MissingChunks)?;
        let chunk = Chunk::new(u16::from_be_bytes([word[0], word[1]]));
        chunk_octets += 2;
        // A last chunk may cover more than the count: its extra symbols mean nothing.
        let used = chunk.len().min(count - covered);
        delta_octets += match chunk {
            Chunk::Run { symbol, .. } if used > 0 => delta_octets_of(symbol)? * used,
            Chunk::Run { .. } => 0,
            Chunk::Vector { .. } => (0..used)
                .map(|i| delta_octets_of(chunk.symbol(i)))
                .sum::<Result<usize, _>>()?,
        };
        covered += used;
    }
    Ok((chunk_octets, delta_octets))
}

/// The octets of delta a symbol announces: its own value.
fn delta_octets_of(symbol: Symbol) -> Result<usize, TransportCcError> {
    match symbol {
        RESERVED => Err(TransportCcError::ReservedSymbol),
        _ => Ok(usize::from(symbol)),
    }
}

/// Writes the chunks and deltas reporting on `packets`, in sequence order from the base
/// (`None`: not received; else the delta in [`DELTA_UNIT`]s), into `body`, cleared first;
/// returns the packet status count. Runs of at least 14 equal symbols become run length
/// chunks, stretches without large deltas one-bit vectors, the rest two-bit vectors.
pub fn write_chunks_and_deltas(
    packets: &[Option<i16>],
    body: &mut Vec<u8>,
) -> Result<u16, WriteError> {
    let count = u16::try_from(packets.len()).map_err(|_| WriteError::TooManyEntries)?;
    body.clear();
    let mut rest = packets;
    while !rest.is_empty() {
        let (word, covered) = next_chunk(rest);
        body.extend_from_slice(&word.to_be_bytes());
        rest = &rest[covered..];
    }
    for status in packets.iter().map(|&delta| PacketStatus::from_delta(delta)) {
        match status {
            PacketStatus::NotReceived => {}
            PacketStatus::SmallDelta(delta) => body.push(delta),
            PacketStatus::LargeDelta(delta) => body.extend_from_slice(&delta.to_be_bytes()),
        }
    }
    Ok(count)
}

/// The chunk that best starts `packets` (not empty), and how many packets it covers.
fn next_chunk(packets: &[Option<i16>]) -> (u16, usize) {
    let symbol = |delta: &Option<i16>| PacketStatus::from_delta(*delta).symbol();
    let first = symbol(&packets[0]);
    let run = packets
        .iter()
        .take(MAX_RUN)
        .take_while(|delta| symbol(delta) == first)
        .count();
    if run >= MIN_RUN {
        // At most 13 bits.
        return (first << 13 | run as u16, run);
    }
    let one_bit = packets.iter().take(ONE_BIT_SYMBOLS);
    if one_bit.clone().all(|delta| symbol(delta) < 2) {
        let covered = one_bit.len();
        return (
            vector(VECTOR_CHUNK, 1, ONE_BIT_SYMBOLS, one_bit.map(symbol)),
            covered,
        );
    }
    let two_bit = packets.iter().take(TWO_BIT_SYMBOLS);
    let covered = two_bit.len();
    let word = vector(
        VECTOR_CHUNK | TWO_BIT_VECTOR,
        2,
        TWO_BIT_SYMBOLS,
        two_bit.map(symbol),
    );
    (word, covered)
}

/// A status vector chunk: `header` bits, then `symbols` of `width` bits from the most
/// significant end of the `slots`, zero (not received) past the last.
fn vector(header: u16, width: usize, slots: usize, symbols: impl Iterator<Item = u16>) -> u16 {
    symbols
        .zip((0..slots).rev())
        .fold(header, |word, (symbol, slot)| {
            word | symbol << (width * slot)
        })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::{parse_compound, write_transport_cc, RtcpFeedback};
    use super::*;

    fn feedback(base_sequence: u16, packet_status_count: u16, body: &[u8]) -> TransportCc<'_> {
        TransportCc {
            sender_ssrc: 1,
            media_ssrc: 2,
            base_sequence,
            packet_status_count,
            reference_time: 0,
            fb_count: 0,
            chunks_and_deltas: body,
        }
    }

    fn deltas(fb: &TransportCc<'_>) -> Result<Vec<Option<i16>>, TransportCcError> {
        Ok(PacketReports::new(fb)?.map(|r| r.status.delta()).collect())
    }

    #[test]
    fn the_drafts_run_length_example() {
        // Section 3.1.3: a run of 221 packets received with small deltas.
        let mut body = vec![0b0010_0000, 0xDD];
        body.extend((0..221).map(|i| i as u8));
        let fb = feedback(100, 221, &body);
        let reports: Vec<_> = PacketReports::new(&fb).unwrap().collect();
        assert_eq!(reports.len(), 221);
        assert_eq!(reports[0].sequence, 100);
        assert_eq!(reports[220].status, PacketStatus::SmallDelta(220));
    }

    #[test]
    fn status_vectors_of_one_and_two_bits() {
        // Section 3.1.4's one-bit example: 1 not received, 5 received, 3 not, 3 received,
        // 2 not.
        let mut one_bit = vec![0x9F, 0x1C];
        one_bit.extend(1..=8);
        let (n, r) = (None, Some);
        let expected = [
            n,
            r(1),
            r(2),
            r(3),
            r(4),
            r(5),
            n,
            n,
            n,
            r(6),
            r(7),
            r(8),
            n,
            n,
        ];
        assert_eq!(deltas(&feedback(0, 14, &one_bit)), Ok(expected.to_vec()));
        // Hand-built two-bit: not received, large, three small, two not received.
        let two_bit = [0b1100_1001, 0b0101_0000, 0xFF, 0xFE, 1, 2, 3];
        assert_eq!(
            deltas(&feedback(0, 7, &two_bit)),
            Ok([n, r(-2), r(1), r(2), r(3), n, n].to_vec())
        );
    }

    #[test]
    fn the_count_stops_inside_a_chunk_and_sequences_wrap() {
        // Two-bit vector with seven small deltas, only two counted: two deltas, then padding.
        let body = [0b1101_0101, 0b0101_0101, 9, 10, 0, 0];
        let reports: Vec<_> = PacketReports::new(&feedback(65535, 2, &body))
            .unwrap()
            .collect();
        let sequences: Vec<u16> = reports.iter().map(|r| r.sequence).collect();
        assert_eq!(sequences, [65535, 0]);
        assert_eq!(deltas(&feedback(65535, 0, &[])), Ok(Vec::new()));
    }

    #[test]
    fn bad_bodies_are_errors() {
        let cases: [(&[u8], u16, TransportCcError); 6] = [
            (&[], 1, TransportCcError::MissingChunks),
            // A run of 3 covering a count of 4.
            (&[0x00, 0x03], 4, TransportCcError::MissingChunks),
            // Half a chunk.
            (&[0x20, 0x01, 0x80], 2, TransportCcError::MissingChunks),
            // A run of 2 small deltas, one delta octet.
            (&[0x20, 0x02, 7], 2, TransportCcError::TruncatedDeltas),
            // A large delta of one octet.
            (&[0x40, 0x01, 7], 1, TransportCcError::TruncatedDeltas),
            // A two-bit vector whose second symbol is 3.
            (&[0xF0, 0x00, 7], 2, TransportCcError::ReservedSymbol),
        ];
        for (body, count, error) in cases {
            assert_eq!(deltas(&feedback(0, count, body)), Err(error), "{body:?}");
        }
        // A reserved run, and a reserved symbol past the count, which means nothing.
        assert_eq!(
            deltas(&feedback(0, 1, &[0x60, 0x01])),
            Err(TransportCcError::ReservedSymbol)
        );
        assert_eq!(deltas(&feedback(0, 1, &[0xC0, 0x03])), Ok(vec![None]));
    }

    #[test]
    fn the_writer_picks_each_kind_of_chunk() {
        let mut body = Vec::new();
        let packets: Vec<Option<i16>> =
            [vec![Some(4); 20], vec![None, Some(1)], vec![Some(-1)]].concat();
        assert_eq!(write_chunks_and_deltas(&packets, &mut body), Ok(23));
        // A run of 20 small deltas; the large delta rules out a one-bit vector, so a two-bit
        // vector of the last three (not received, small, large).
        assert_eq!(&body[..4], [0x20, 20, 0xC6, 0x00]);
        assert_eq!(deltas(&feedback(0, 23, &body)), Ok(packets));
    }

    fn written(packets: &[Option<i16>]) -> Vec<Option<i16>> {
        let mut body = Vec::new();
        let count = write_chunks_and_deltas(packets, &mut body).unwrap();
        let fb = TransportCc {
            chunks_and_deltas: &body,
            ..feedback(40_000, count, &[])
        };
        let mut packet = vec![0; 20 + body.len() + 3];
        let len = write_transport_cc(&fb, &mut packet).unwrap();
        let mut parsed = None;
        parse_compound(&packet[..len], |item| {
            if let RtcpFeedback::TransportCc(fb) = item {
                parsed = Some(PacketReports::new(&fb).map(|r| r.collect::<Vec<_>>()));
            }
        })
        .unwrap();
        let reports = parsed.expect("a transport-cc item").unwrap();
        for (report, sequence) in reports.iter().zip(40_000u16..) {
            assert_eq!(report.sequence, sequence);
        }
        reports.iter().map(|r| r.status.delta()).collect()
    }

    fn arrival() -> impl Strategy<Value = Option<i16>> {
        prop_oneof![
            3 => Just(None),
            6 => (0i16..=255).prop_map(Some),
            1 => any::<i16>().prop_map(Some),
        ]
    }

    /// Long runs too: what run length chunks are for.
    fn arrivals() -> impl Strategy<Value = Vec<Option<i16>>> {
        proptest::collection::vec((arrival(), 1usize..40), 0..60).prop_map(|runs| {
            runs.into_iter()
                .flat_map(|(delta, n)| std::iter::repeat_n(delta, n))
                .collect()
        })
    }

    proptest! {
        #[test]
        fn written_arrivals_parse_back(packets in arrivals()) {
            prop_assert_eq!(written(&packets), packets);
        }
    }
}
