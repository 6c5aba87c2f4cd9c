//! Parsing a compound RTCP packet from the network, which is hostile: every length is checked,
//! nothing allocates, nothing panics.

use std::fmt;

use super::feedback::{
    format, packet_type, Fir, FirEntries, FirEntry, Other, Pli, Remb, RembSsrcs, RtcpFeedback,
    TransportCc,
};
use super::generic_nack::{Nack, NackPair, NackPairs};
use super::report::{ReceiverReport, ReportBlock, ReportBlocks, SenderReport};

/// Why a compound packet could not be parsed. The packets before the bad one were delivered;
/// the rest of the datagram is dropped, as no length after a bad one can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// The datagram ends inside a header or before the length a header gives.
    Truncated,
    /// A version other than 2.
    BadVersion,
    /// A packet's length disagrees with what its content needs.
    BadLength,
    /// A padding count of zero or larger than the packet.
    BadPadding,
    /// More NACK pairs, FIR entries or REMB SSRCs than this view holds inline.
    TooManyEntries,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Truncated => "rtcp packet truncated",
            Self::BadVersion => "rtcp version is not 2",
            Self::BadLength => "rtcp length does not fit the content",
            Self::BadPadding => "rtcp padding count out of range",
            Self::TooManyEntries => "rtcp packet has more entries than supported",
        })
    }
}

impl std::error::Error for ParseError {}

/// What a compound packet held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ParseSummary {
    /// Items delivered, [`RtcpFeedback::Other`] included.
    pub items: usize,
    /// Of those, the packets the engine does not act on.
    pub other: usize,
}

/// Parses every RTCP packet of `datagram` (a compound packet, or a single reduced-size one per
/// RFC 5506) and hands each to `on_item` in order. A sender report with report blocks gives a
/// [`SenderReport`] followed by a [`ReceiverReport`] of the same sender.
pub fn parse_compound<'a>(
    mut datagram: &'a [u8],
    mut on_item: impl FnMut(RtcpFeedback<'a>),
) -> Result<ParseSummary, ParseError> {
    if datagram.is_empty() {
        return Err(ParseError::Truncated);
    }
    let mut summary = ParseSummary::default();
    while !datagram.is_empty() {
        let (header, body, rest) = split_packet(datagram)?;
        datagram = rest;
        parse_packet(header, body, &mut |item| {
            summary.items += 1;
            summary.other += usize::from(matches!(item, RtcpFeedback::Other(_)));
            on_item(item);
        })?;
    }
    Ok(summary)
}

const VERSION: u8 = 2;
const HEADER_LEN: usize = 4;
const REMB_IDENTIFIER: &[u8; 4] = b"REMB";
/// The largest bitrate an 18-bit mantissa and 6-bit exponent give that fits in 64 bits: larger
/// ones saturate here, so writing a parsed value and parsing it again gives it back.
pub(super) const REMB_BITRATE_MAX: u64 = 0x3FFFF << 46;

/// The first header word's fields the content depends on.
#[derive(Debug, Clone, Copy)]
struct Header {
    count_or_format: u8,
    packet_type: u8,
}

/// Splits off the first packet: its header, its body without padding, and what follows it.
fn split_packet(data: &[u8]) -> Result<(Header, &[u8], &[u8]), ParseError> {
    let [first, packet_type, len_hi, len_lo, ..] = *data else {
        return Err(ParseError::Truncated);
    };
    if first >> 6 != VERSION {
        return Err(ParseError::BadVersion);
    }
    let total = (usize::from(u16::from_be_bytes([len_hi, len_lo])) + 1) * 4;
    if data.len() < total {
        return Err(ParseError::Truncated);
    }
    let (packet, rest) = data.split_at(total);
    let mut body = &packet[HEADER_LEN..];
    if first & 0x20 != 0 {
        body = strip_padding(body)?;
    }
    let header = Header {
        count_or_format: first & 0x1F,
        packet_type,
    };
    Ok((header, body, rest))
}

/// The body without its padding, whose last octet counts the padding octets (RFC 3550 6.4.1).
fn strip_padding(body: &[u8]) -> Result<&[u8], ParseError> {
    let pad = usize::from(*body.last().ok_or(ParseError::BadPadding)?);
    if pad == 0 || pad > body.len() {
        return Err(ParseError::BadPadding);
    }
    Ok(&body[..body.len() - pad])
}

fn parse_packet<'a>(
    header: Header,
    body: &'a [u8],
    on_item: &mut impl FnMut(RtcpFeedback<'a>),
) -> Result<(), ParseError> {
    let mut reader = Reader(body);
    let count = header.count_or_format;
    let item = match (header.packet_type, count) {
        (packet_type::SENDER_REPORT, _) => return sender_report(count, reader, on_item),
        (packet_type::RECEIVER_REPORT, _) => {
            let sender_ssrc = reader.u32()?;
            let blocks = report_blocks(count, &mut reader)?;
            RtcpFeedback::ReceiverReport(ReceiverReport {
                sender_ssrc,
                blocks,
            })
        }
        (packet_type::TRANSPORT_FEEDBACK, format::GENERIC_NACK) => nack(reader)?,
        (packet_type::TRANSPORT_FEEDBACK, format::TRANSPORT_CC) => transport_cc(reader)?,
        (packet_type::PAYLOAD_FEEDBACK, format::PLI) => RtcpFeedback::Pli(Pli {
            sender_ssrc: reader.u32()?,
            media_ssrc: reader.u32()?,
        }),
        (packet_type::PAYLOAD_FEEDBACK, format::FIR) => fir(reader)?,
        (packet_type::PAYLOAD_FEEDBACK, format::APPLICATION) => {
            remb(reader)?.unwrap_or(other(header))
        }
        _ => other(header),
    };
    on_item(item);
    Ok(())
}

fn other(header: Header) -> RtcpFeedback<'static> {
    RtcpFeedback::Other(Other {
        packet_type: header.packet_type,
        count_or_format: header.count_or_format,
    })
}

fn sender_report<'a>(
    count: u8,
    mut reader: Reader<'a>,
    on_item: &mut impl FnMut(RtcpFeedback<'a>),
) -> Result<(), ParseError> {
    let report = SenderReport {
        ssrc: reader.u32()?,
        ntp_time: reader.u64()?,
        rtp_time: reader.u32()?,
        packet_count: reader.u32()?,
        octet_count: reader.u32()?,
    };
    let blocks = report_blocks(count, &mut reader)?;
    on_item(RtcpFeedback::SenderReport(report));
    if !blocks.is_empty() {
        on_item(RtcpFeedback::ReceiverReport(ReceiverReport {
            sender_ssrc: report.ssrc,
            blocks,
        }));
    }
    Ok(())
}

/// `count` report blocks; what follows them is a profile-specific extension, ignored.
fn report_blocks(count: u8, reader: &mut Reader<'_>) -> Result<ReportBlocks, ParseError> {
    let mut blocks = ReportBlocks::new();
    for _ in 0..count {
        let ssrc = reader.u32()?;
        let loss = reader.u32()?;
        let block = ReportBlock {
            ssrc,
            fraction_lost: (loss >> 24) as u8,
            // Shifting the 24-bit field to the top and back sign-extends it.
            total_lost: ((loss << 8) as i32) >> 8,
            highest_sequence: reader.u32()?,
            jitter: reader.u32()?,
            last_sr: reader.u32()?,
            delay_since_last_sr: reader.u32()?,
        };
        // The count field has five bits, the list holds 31.
        blocks.push(block).map_err(|_| ParseError::TooManyEntries)?;
    }
    Ok(blocks)
}

fn nack(mut reader: Reader<'_>) -> Result<RtcpFeedback<'static>, ParseError> {
    let sender_ssrc = reader.u32()?;
    let media_ssrc = reader.u32()?;
    let mut pairs = NackPairs::default();
    for [pid_hi, pid_lo, blp_hi, blp_lo] in reader.words()? {
        let pair = NackPair {
            pid: u16::from_be_bytes([pid_hi, pid_lo]),
            blp: u16::from_be_bytes([blp_hi, blp_lo]),
        };
        pairs
            .push_pair(pair)
            .map_err(|_| ParseError::TooManyEntries)?;
    }
    Ok(RtcpFeedback::Nack(Nack {
        sender_ssrc,
        media_ssrc,
        pairs,
    }))
}

fn transport_cc(mut reader: Reader<'_>) -> Result<RtcpFeedback<'_>, ParseError> {
    let sender_ssrc = reader.u32()?;
    let media_ssrc = reader.u32()?;
    let base_sequence = reader.u16()?;
    let packet_status_count = reader.u16()?;
    let time_and_count = reader.u32()?;
    Ok(RtcpFeedback::TransportCc(TransportCc {
        sender_ssrc,
        media_ssrc,
        base_sequence,
        packet_status_count,
        reference_time: time_and_count >> 8,
        fb_count: time_and_count as u8,
        chunks_and_deltas: reader.0,
    }))
}

fn fir(mut reader: Reader<'_>) -> Result<RtcpFeedback<'static>, ParseError> {
    let sender_ssrc = reader.u32()?;
    // RFC 5104 section 4.3.1.2: the media source field is unused; the entries name the senders.
    let _media_ssrc = reader.u32()?;
    if !reader.0.len().is_multiple_of(8) {
        return Err(ParseError::BadLength);
    }
    let mut entries = FirEntries::new();
    while !reader.0.is_empty() {
        let ssrc = reader.u32()?;
        let seq_and_reserved = reader.u32()?;
        let entry = FirEntry {
            ssrc,
            seq_nr: (seq_and_reserved >> 24) as u8,
        };
        entries
            .push(entry)
            .map_err(|_| ParseError::TooManyEntries)?;
    }
    Ok(RtcpFeedback::Fir(Fir {
        sender_ssrc,
        entries,
    }))
}

/// A REMB, or `None` for other application layer feedback.
fn remb(mut reader: Reader<'_>) -> Result<Option<RtcpFeedback<'static>>, ParseError> {
    let sender_ssrc = reader.u32()?;
    let _media_ssrc = reader.u32()?;
    if reader.0.get(..4) != Some(REMB_IDENTIFIER) {
        return Ok(None);
    }
    reader.u32()?;
    let fields = reader.u32()?;
    let exponent = (fields >> 18) & 0x3F;
    let mantissa = u64::from(fields & 0x3FFFF);
    let bitrate_bps = mantissa
        .checked_mul(1 << exponent)
        .map_or(REMB_BITRATE_MAX, |bitrate| bitrate.min(REMB_BITRATE_MAX));
    let mut ssrcs = RembSsrcs::new();
    for _ in 0..fields >> 24 {
        ssrcs
            .push(reader.u32()?)
            .map_err(|_| ParseError::TooManyEntries)?;
    }
    Ok(Some(RtcpFeedback::Remb(Remb {
        sender_ssrc,
        bitrate_bps,
        ssrcs,
    })))
}

/// Big-endian reads off the front of a packet body; running short means the packet's length
/// was too small for its content.
#[derive(Debug)]
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], ParseError> {
        let (head, rest) = self.0.split_first_chunk().ok_or(ParseError::BadLength)?;
        self.0 = rest;
        Ok(*head)
    }

    fn u16(&mut self) -> Result<u16, ParseError> {
        self.take().map(u16::from_be_bytes)
    }

    fn u32(&mut self) -> Result<u32, ParseError> {
        self.take().map(u32::from_be_bytes)
    }

    fn u64(&mut self) -> Result<u64, ParseError> {
        self.take().map(u64::from_be_bytes)
    }

    /// The rest as 32-bit words, when it is a whole number of them.
    fn words(self) -> Result<impl Iterator<Item = [u8; 4]> + 'a, ParseError> {
        let (words, rest) = self.0.as_chunks::<4>();
        if !rest.is_empty() {
            return Err(ParseError::BadLength);
        }
        Ok(words.iter().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLI: [u8; 12] = [0x81, 206, 0, 2, 0, 0, 0, 5, 0, 0, 0, 6];

    fn parse(data: &[u8]) -> (Vec<RtcpFeedback<'_>>, Result<ParseSummary, ParseError>) {
        let mut items = Vec::new();
        let result = parse_compound(data, |item| items.push(item));
        (items, result)
    }

    fn with_pli_first(bad: &[u8]) -> Vec<u8> {
        [&PLI[..], bad].concat()
    }

    #[test]
    fn a_pli() {
        let pli = RtcpFeedback::Pli(Pli {
            sender_ssrc: 5,
            media_ssrc: 6,
        });
        let (items, result) = parse(&PLI);
        assert_eq!(items, [pli]);
        assert_eq!(result, Ok(ParseSummary { items: 1, other: 0 }));
    }

    #[test]
    fn header_errors_keep_what_came_before() {
        let cases: [(&[u8], ParseError); 4] = [
            (&[0x81, 206, 0], ParseError::Truncated),
            (&[0x41, 206, 0, 0], ParseError::BadVersion),
            (&[0x81, 206, 0, 2, 0, 0, 0, 5], ParseError::Truncated),
            // Padding bit with a zero count.
            (&[0xA1, 206, 0, 0], ParseError::BadPadding),
        ];
        for (bad, error) in cases {
            let data = with_pli_first(bad);
            let (items, result) = parse(&data);
            assert_eq!(items.len(), 1, "{bad:?}");
            assert_eq!(result, Err(error), "{bad:?}");
        }
        assert_eq!(parse(&[]).1, Err(ParseError::Truncated));
    }

    #[test]
    fn content_shorter_than_it_claims() {
        let cases: [&[u8]; 4] = [
            // A PLI of one word.
            &[0x81, 206, 0, 1, 0, 0, 0, 5],
            // A receiver report counting one block it does not hold.
            &[0x81, 201, 0, 1, 0, 0, 0, 5],
            // A NACK whose padding leaves half a pair.
            &[0xA1, 205, 0, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 7, 0, 2],
            // A FIR entry of one word.
            &[0x84, 206, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9],
        ];
        for bad in cases {
            assert_eq!(parse(bad).1, Err(ParseError::BadLength), "{bad:?}");
        }
    }

    #[test]
    fn padding_is_stripped() {
        let nack = [
            0xA1, 205, 0, 4, 0, 0, 0, 1, 0, 0, 0, 2, 0, 7, 0, 0, 0, 0, 0, 4,
        ];
        let (items, result) = parse(&nack);
        assert_eq!(result.map(|s| s.items), Ok(1));
        let [RtcpFeedback::Nack(nack)] = items[..] else {
            panic!("one nack: {items:?}");
        };
        assert_eq!(nack.pairs.lost().collect::<Vec<_>>(), [7]);
    }

    #[test]
    fn more_fir_entries_than_held() {
        let entries = crate::engine::rtcp::MAX_FIR_ENTRIES + 1;
        let words = 2 + 2 * entries;
        let mut fir = vec![0x84, 206, 0, words as u8];
        fir.resize(4 + words * 4, 0);
        assert_eq!(parse(&fir).1, Err(ParseError::TooManyEntries));
    }

    #[test]
    fn unknown_feedback_and_other_application_feedback_are_other() {
        let app = [
            0x8F, 206, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0, b'X', b'Y', b'Z', b'W',
        ];
        let bye = [0x81, 203, 0, 1, 0, 0, 0, 1];
        let data = [&app[..], &bye[..]].concat();
        let (items, result) = parse(&data);
        assert_eq!(result, Ok(ParseSummary { items: 2, other: 2 }));
        let expected = [(206, 15), (203, 1)].map(|(packet_type, count_or_format)| {
            RtcpFeedback::Other(Other {
                packet_type,
                count_or_format,
            })
        });
        assert_eq!(items, expected);
    }

    #[test]
    fn remb_bitrate_saturates() {
        // Exponent 63, mantissa 0x3FFFF: far past 64 bits.
        let remb = [
            0x8F, 206, 0, 4, 0, 0, 0, 1, 0, 0, 0, 0, b'R', b'E', b'M', b'B', 0, 0xFF, 0xFF, 0xFF,
        ];
        let (items, _) = parse(&remb);
        let [RtcpFeedback::Remb(remb)] = items[..] else {
            panic!("one remb: {items:?}");
        };
        assert_eq!(remb.bitrate_bps, REMB_BITRATE_MAX);
    }
}
