//! Writing RTCP into caller buffers, by hand: every field is put through a bounds-checked
//! cursor over the caller's slice, so writing never allocates and never panics. Our own
//! encoder rather than a codec crate's because the crates at hand pull an async runtime into
//! whatever embeds the engine. `tests/rtcp/wire.rs` checks it against the `rtcp` crate.

use std::fmt;

use super::feedback::{format, packet_type, Fir, Remb, RtcpFeedback, TransportCc};
use super::generic_nack::Nack;
use super::report::{ReceiverReport, ReportBlock, SenderReport};

/// Writes RTCP packets into buffers the caller owns.
pub trait RtcpWriter {
    /// Writes one packet at the start of `out`, returning its length.
    fn write(&mut self, feedback: &RtcpFeedback<'_>, out: &mut [u8]) -> Result<usize, WriteError>;

    /// Writes an SDES packet with one chunk: `ssrc` and the writer's CNAME (RFC 3550 6.5.1).
    fn write_cname(&mut self, ssrc: u32, out: &mut [u8]) -> Result<usize, WriteError>;
}

/// Writes a compound packet as RFC 3550 section 6.1 orders it: `reports` (sender and receiver
/// reports, at least one), an SDES CNAME for the first report's sender, then `feedback`.
/// Returns the compound packet's length.
pub fn write_compound(
    writer: &mut impl RtcpWriter,
    reports: &[RtcpFeedback<'_>],
    feedback: &[RtcpFeedback<'_>],
    out: &mut [u8],
) -> Result<usize, WriteError> {
    let sender_ssrc = match reports.first() {
        Some(RtcpFeedback::SenderReport(report)) => report.ssrc,
        Some(RtcpFeedback::ReceiverReport(report)) => report.sender_ssrc,
        _ => return Err(WriteError::NotAReport),
    };
    let mut len = 0;
    for report in reports {
        if !matches!(
            report,
            RtcpFeedback::SenderReport(_) | RtcpFeedback::ReceiverReport(_)
        ) {
            return Err(WriteError::NotAReport);
        }
        len += writer.write(report, rest(out, len)?)?;
    }
    len += writer.write_cname(sender_ssrc, rest(out, len)?)?;
    for item in feedback {
        len += writer.write(item, rest(out, len)?)?;
    }
    Ok(len)
}

/// Why a packet could not be written: the caller's doing, or a value the wire cannot carry
/// (see `fault()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteError {
    /// The buffer is smaller than the packet.
    BufferTooShort,
    /// A value the wire cannot carry: a total lost outside 24 signed bits, a reference time
    /// over 24 bits, a CNAME over 255 octets.
    OutOfRange,
    /// [`RtcpFeedback::Other`] is only ever parsed, never written.
    Unwritable,
    /// A compound packet must start with, and list first, sender or receiver reports.
    NotAReport,
    /// More entries than the header's five-bit count holds.
    TooManyEntries,
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::BufferTooShort => "rtcp buffer too short",
            Self::OutOfRange => "rtcp value out of range for its field",
            Self::Unwritable => "rtcp packet kind cannot be written",
            Self::NotAReport => "rtcp compound packet must start with reports",
            Self::TooManyEntries => "rtcp packet has more entries than its count holds",
        })
    }
}

impl std::error::Error for WriteError {}

/// The [`RtcpWriter`] over our own encoder. It owns only its CNAME: writing allocates nothing.
#[derive(Debug)]
pub struct RtcpWireWriter {
    cname: Box<[u8]>,
}

impl RtcpWireWriter {
    /// A writer whose SDES packets carry `cname`, at most 255 octets.
    pub fn new(cname: &[u8]) -> Result<Self, WriteError> {
        if cname.len() > usize::from(u8::MAX) {
            return Err(WriteError::OutOfRange);
        }
        Ok(Self {
            cname: cname.into(),
        })
    }
}

impl RtcpWriter for RtcpWireWriter {
    fn write(&mut self, feedback: &RtcpFeedback<'_>, out: &mut [u8]) -> Result<usize, WriteError> {
        match feedback {
            RtcpFeedback::SenderReport(report) => sender_report(report, out),
            RtcpFeedback::ReceiverReport(report) => receiver_report(report, out),
            RtcpFeedback::Nack(nack) => generic_nack(nack, out),
            RtcpFeedback::Pli(pli) => {
                let mut packet =
                    Cursor::start(out, format::PLI, packet_type::PAYLOAD_FEEDBACK, 12)?;
                packet.u32(pli.sender_ssrc)?;
                packet.u32(pli.media_ssrc)?;
                Ok(packet.finish())
            }
            RtcpFeedback::Fir(fir) => full_intra_request(fir, out),
            RtcpFeedback::Remb(remb) => remb_packet(remb, out),
            RtcpFeedback::TransportCc(feedback) => transport_cc(feedback, out),
            RtcpFeedback::Other(_) => Err(WriteError::Unwritable),
        }
    }

    fn write_cname(&mut self, ssrc: u32, out: &mut [u8]) -> Result<usize, WriteError> {
        // One chunk: SSRC, the CNAME item (type 1, length, text), then at least one null
        // octet ending the item list, more to reach a 32-bit boundary (RFC 3550 6.5).
        let chunk = 4 + 2 + self.cname.len() + 1;
        let len = 4 + chunk.next_multiple_of(4);
        let mut packet = Cursor::start(out, 1, SOURCE_DESCRIPTION, len)?;
        packet.u32(ssrc)?;
        // At most 255 octets, checked in `new`.
        packet.put(&[SDES_CNAME, self.cname.len() as u8])?;
        packet.put(&self.cname)?;
        Ok(packet.finish())
    }
}

/// The part of `out` after the first `len` octets.
fn rest(out: &mut [u8], len: usize) -> Result<&mut [u8], WriteError> {
    out.get_mut(len..).ok_or(WriteError::BufferTooShort)
}

const SOURCE_DESCRIPTION: u8 = 202;
const SDES_CNAME: u8 = 1;
/// Largest value of the header's five-bit count or format field.
const MAX_COUNT: usize = 31;

/// A packet being written at the start of the caller's buffer. Every put is bounds-checked:
/// a short buffer is an error, never a panic.
struct Cursor<'a> {
    out: &'a mut [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    /// Starts a packet of `len` octets, a multiple of four, with the common header
    /// (RFC 3550 6.4.1): version 2, no padding, `count` (or format), `packet_type`, and the
    /// length in 32-bit words minus one.
    fn start(
        out: &'a mut [u8],
        count: u8,
        packet_type: u8,
        len: usize,
    ) -> Result<Self, WriteError> {
        let out = out.get_mut(..len).ok_or(WriteError::BufferTooShort)?;
        let words =
            u16::try_from((len / 4).saturating_sub(1)).map_err(|_| WriteError::OutOfRange)?;
        let mut cursor = Self { out, at: 0 };
        cursor.put(&[0x80 | count, packet_type])?;
        cursor.put(&words.to_be_bytes())?;
        Ok(cursor)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        let end = self.at + bytes.len();
        self.out
            .get_mut(self.at..end)
            .ok_or(WriteError::BufferTooShort)?
            .copy_from_slice(bytes);
        self.at = end;
        Ok(())
    }

    fn u32(&mut self, value: u32) -> Result<(), WriteError> {
        self.put(&value.to_be_bytes())
    }

    /// Zeros what was not written (SDES nulls, reserved fields); returns the packet's length.
    fn finish(self) -> usize {
        if let Some(rest) = self.out.get_mut(self.at..) {
            rest.fill(0);
        }
        self.out.len()
    }
}

/// The five-bit count of `entries`.
fn count(entries: usize) -> Result<u8, WriteError> {
    if entries > MAX_COUNT {
        return Err(WriteError::TooManyEntries);
    }
    // At most 31.
    Ok(entries as u8)
}

/// A sender report without report blocks: the engine reports reception to publishers in
/// receiver reports of its own SSRC.
fn sender_report(report: &SenderReport, out: &mut [u8]) -> Result<usize, WriteError> {
    let mut packet = Cursor::start(out, 0, packet_type::SENDER_REPORT, 28)?;
    packet.u32(report.ssrc)?;
    packet.put(&report.ntp_time.to_be_bytes())?;
    packet.u32(report.rtp_time)?;
    packet.u32(report.packet_count)?;
    packet.u32(report.octet_count)?;
    Ok(packet.finish())
}

fn receiver_report(report: &ReceiverReport, out: &mut [u8]) -> Result<usize, WriteError> {
    let blocks = report.blocks.iter();
    let len = 8 + 24 * blocks.len();
    let mut packet = Cursor::start(out, count(blocks.len())?, packet_type::RECEIVER_REPORT, len)?;
    packet.u32(report.sender_ssrc)?;
    for block in blocks {
        report_block(block, &mut packet)?;
    }
    Ok(packet.finish())
}

const TOTAL_LOST_RANGE: std::ops::RangeInclusive<i32> = -(1 << 23)..=(1 << 23) - 1;

fn report_block(block: &ReportBlock, packet: &mut Cursor<'_>) -> Result<(), WriteError> {
    if !TOTAL_LOST_RANGE.contains(&block.total_lost) {
        return Err(WriteError::OutOfRange);
    }
    packet.u32(block.ssrc)?;
    // The fraction, then the 24-bit two's complement of the total the wire carries.
    let total_lost = block.total_lost as u32 & 0xFF_FFFF;
    packet.u32(u32::from(block.fraction_lost) << 24 | total_lost)?;
    packet.u32(block.highest_sequence)?;
    packet.u32(block.jitter)?;
    packet.u32(block.last_sr)?;
    packet.u32(block.delay_since_last_sr)
}

fn generic_nack(nack: &Nack, out: &mut [u8]) -> Result<usize, WriteError> {
    let pairs = nack.pairs.pairs();
    let len = 12 + 4 * pairs.len();
    let mut packet = Cursor::start(
        out,
        format::GENERIC_NACK,
        packet_type::TRANSPORT_FEEDBACK,
        len,
    )?;
    packet.u32(nack.sender_ssrc)?;
    packet.u32(nack.media_ssrc)?;
    for pair in pairs {
        packet.put(&pair.pid.to_be_bytes())?;
        packet.put(&pair.blp.to_be_bytes())?;
    }
    Ok(packet.finish())
}

/// FIR (RFC 5104 4.3.1): the media source SSRC is unused and zero; each entry is an SSRC, its
/// command sequence number and three reserved zero octets.
fn full_intra_request(fir: &Fir, out: &mut [u8]) -> Result<usize, WriteError> {
    let len = 12 + 8 * fir.entries.len();
    let mut packet = Cursor::start(out, format::FIR, packet_type::PAYLOAD_FEEDBACK, len)?;
    packet.u32(fir.sender_ssrc)?;
    packet.u32(0)?;
    for entry in fir.entries.iter() {
        packet.u32(entry.ssrc)?;
        packet.put(&[entry.seq_nr, 0, 0, 0])?;
    }
    Ok(packet.finish())
}

/// REMB (draft-alvestrand-rmcat-remb-03): the bitrate as an 18-bit mantissa and a 6-bit
/// exponent, cut down to the mantissa's bits so the estimate sent never rounds above ours.
fn remb_packet(remb: &Remb, out: &mut [u8]) -> Result<usize, WriteError> {
    let ssrcs: &[u32] = &remb.ssrcs;
    let len = 20 + 4 * ssrcs.len();
    let mut packet = Cursor::start(out, format::APPLICATION, packet_type::PAYLOAD_FEEDBACK, len)?;
    packet.u32(remb.sender_ssrc)?;
    packet.u32(0)?;
    packet.put(b"REMB")?;
    let exponent = (u64::BITS - remb.bitrate_bps.leading_zeros()).saturating_sub(18);
    // Below 2^18 after the shift; the exponent is at most 46.
    let mantissa = (remb.bitrate_bps >> exponent) as u32;
    let ssrc_count = u8::try_from(ssrcs.len()).map_err(|_| WriteError::TooManyEntries)?;
    packet.u32(u32::from(ssrc_count) << 24 | exponent << 18 | mantissa)?;
    for &ssrc in ssrcs {
        packet.u32(ssrc)?;
    }
    Ok(packet.finish())
}

/// Transport-wide CC feedback is kept as its chunk and delta bytes: copied after the fixed
/// fields, padded to a 32-bit boundary with RTCP padding (zeros, then the padding's length).
pub(crate) fn transport_cc(
    feedback: &TransportCc<'_>,
    out: &mut [u8],
) -> Result<usize, WriteError> {
    if feedback.reference_time > 0xFF_FFFF {
        return Err(WriteError::OutOfRange);
    }
    let chunks = feedback.chunks_and_deltas;
    let padding = (4 - chunks.len() % 4) % 4;
    let len = 20 + chunks.len() + padding;
    let mut packet = Cursor::start(
        out,
        format::TRANSPORT_CC,
        packet_type::TRANSPORT_FEEDBACK,
        len,
    )?;
    if let Some(first) = packet.out.first_mut().filter(|_| padding != 0) {
        // The padding bit of the header just written.
        *first |= 0x20;
    }
    packet.u32(feedback.sender_ssrc)?;
    packet.u32(feedback.media_ssrc)?;
    packet.put(&feedback.base_sequence.to_be_bytes())?;
    packet.put(&feedback.packet_status_count.to_be_bytes())?;
    packet.u32(feedback.reference_time << 8 | u32::from(feedback.fb_count))?;
    packet.put(chunks)?;
    if padding != 0 {
        packet.put(&[0; 3][..padding - 1])?;
        // Below 4: fits.
        packet.put(&[padding as u8])?;
    }
    Ok(packet.finish())
}
