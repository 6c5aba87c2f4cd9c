//! Writing RTCP into caller buffers, through the `rtcp` crate's `marshal_to`.
//!
//! The crate's packet types own `Vec`s, so building one per packet would allocate. The writer
//! therefore keeps one crate value per kind with its lists reserved to our inline capacities
//! and refills it for every write: after [`RtcpCrateWriter::new`], writing allocates nothing.
//! The crate stays behind [`RtcpWriter`], so a hand-written encoder can replace it.

use std::fmt;

use bytes::Bytes;
use rtcp::header::{Header, PacketType, FORMAT_TCC};
use rtcp::payload_feedbacks::full_intra_request::{FirEntry as CrateFirEntry, FullIntraRequest};
use rtcp::payload_feedbacks::picture_loss_indication::PictureLossIndication;
use rtcp::payload_feedbacks::receiver_estimated_maximum_bitrate::ReceiverEstimatedMaximumBitrate;
use rtcp::receiver_report::ReceiverReport as CrateReceiverReport;
use rtcp::reception_report::ReceptionReport;
use rtcp::sender_report::SenderReport as CrateSenderReport;
use rtcp::source_description::{
    SdesType, SourceDescription, SourceDescriptionChunk, SourceDescriptionItem,
};
use rtcp::transport_feedbacks::transport_layer_nack::{
    NackPair as CrateNackPair, TransportLayerNack,
};
use webrtc_util::Marshal;

use super::feedback::{Fir, Remb, RtcpFeedback, TransportCc, MAX_FIR_ENTRIES, MAX_REMB_SSRCS};
use super::generic_nack::{Nack, MAX_NACK_PAIRS};
use super::report::{ReceiverReport, ReportBlock, SenderReport, MAX_REPORT_BLOCKS};

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

/// Why a packet could not be written. All are the caller's doing.
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
    /// The codec refused the packet: a bug in our checks.
    Rejected,
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::BufferTooShort => "rtcp buffer too short",
            Self::OutOfRange => "rtcp value out of range for its field",
            Self::Unwritable => "rtcp packet kind cannot be written",
            Self::NotAReport => "rtcp compound packet must start with reports",
            Self::Rejected => "rtcp codec rejected the packet",
        })
    }
}

impl std::error::Error for WriteError {}

/// The [`RtcpWriter`] over the `rtcp` crate, allocation-free once built.
#[derive(Debug)]
pub struct RtcpCrateWriter {
    receiver_report: CrateReceiverReport,
    nack: TransportLayerNack,
    fir: FullIntraRequest,
    remb: ReceiverEstimatedMaximumBitrate,
    cname: SourceDescription,
}

impl RtcpCrateWriter {
    /// A writer whose SDES packets carry `cname`, at most 255 octets.
    pub fn new(cname: &[u8]) -> Result<Self, WriteError> {
        if cname.len() > usize::from(u8::MAX) {
            return Err(WriteError::OutOfRange);
        }
        let chunk = SourceDescriptionChunk {
            source: 0,
            items: vec![SourceDescriptionItem {
                sdes_type: SdesType::SdesCname,
                // The crate's `marshal_to` clones the text. A `Bytes` over an owner is reference
                // counted from the start, so those clones never allocate; one copied from a
                // slice would allocate its shared form on the first clone.
                text: Bytes::from_owner(cname.to_vec()),
            }],
        };
        Ok(Self {
            receiver_report: CrateReceiverReport {
                reports: Vec::with_capacity(MAX_REPORT_BLOCKS),
                ..Default::default()
            },
            nack: TransportLayerNack {
                nacks: Vec::with_capacity(MAX_NACK_PAIRS),
                ..Default::default()
            },
            fir: FullIntraRequest {
                fir: Vec::with_capacity(MAX_FIR_ENTRIES),
                ..Default::default()
            },
            remb: ReceiverEstimatedMaximumBitrate {
                ssrcs: Vec::with_capacity(MAX_REMB_SSRCS),
                ..Default::default()
            },
            cname: SourceDescription {
                chunks: vec![chunk],
            },
        })
    }

    fn receiver_report(
        &mut self,
        report: &ReceiverReport,
        out: &mut [u8],
    ) -> Result<usize, WriteError> {
        let packet = &mut self.receiver_report;
        packet.ssrc = report.sender_ssrc;
        packet.reports.clear();
        for block in report.blocks.iter() {
            packet.reports.push(reception_report(block)?);
        }
        marshal(packet, out)
    }

    fn nack(&mut self, nack: &Nack, out: &mut [u8]) -> Result<usize, WriteError> {
        let packet = &mut self.nack;
        packet.sender_ssrc = nack.sender_ssrc;
        packet.media_ssrc = nack.media_ssrc;
        packet.nacks.clear();
        packet
            .nacks
            .extend(nack.pairs.pairs().iter().map(|pair| CrateNackPair {
                packet_id: pair.pid,
                lost_packets: pair.blp,
            }));
        marshal(packet, out)
    }

    fn fir(&mut self, fir: &Fir, out: &mut [u8]) -> Result<usize, WriteError> {
        let packet = &mut self.fir;
        packet.sender_ssrc = fir.sender_ssrc;
        packet.fir.clear();
        packet
            .fir
            .extend(fir.entries.iter().map(|entry| CrateFirEntry {
                ssrc: entry.ssrc,
                sequence_number: entry.seq_nr,
            }));
        marshal(packet, out)
    }

    fn remb(&mut self, remb: &Remb, out: &mut [u8]) -> Result<usize, WriteError> {
        let packet = &mut self.remb;
        packet.sender_ssrc = remb.sender_ssrc;
        packet.bitrate = remb_bitrate(remb.bitrate_bps);
        packet.ssrcs.clear();
        packet.ssrcs.extend_from_slice(&remb.ssrcs);
        marshal(packet, out)
    }
}

impl RtcpWriter for RtcpCrateWriter {
    fn write(&mut self, feedback: &RtcpFeedback<'_>, out: &mut [u8]) -> Result<usize, WriteError> {
        match feedback {
            RtcpFeedback::SenderReport(report) => marshal(&sender_report(report), out),
            RtcpFeedback::ReceiverReport(report) => self.receiver_report(report, out),
            RtcpFeedback::Nack(nack) => self.nack(nack, out),
            RtcpFeedback::Pli(pli) => marshal(
                &PictureLossIndication {
                    sender_ssrc: pli.sender_ssrc,
                    media_ssrc: pli.media_ssrc,
                },
                out,
            ),
            RtcpFeedback::Fir(fir) => self.fir(fir, out),
            RtcpFeedback::Remb(remb) => self.remb(remb, out),
            RtcpFeedback::TransportCc(feedback) => transport_cc(feedback, out),
            RtcpFeedback::Other(_) => Err(WriteError::Unwritable),
        }
    }

    fn write_cname(&mut self, ssrc: u32, out: &mut [u8]) -> Result<usize, WriteError> {
        if let Some(chunk) = self.cname.chunks.first_mut() {
            chunk.source = ssrc;
        }
        marshal(&self.cname, out)
    }
}

/// The part of `out` after the first `len` octets.
fn rest(out: &mut [u8], len: usize) -> Result<&mut [u8], WriteError> {
    out.get_mut(len..).ok_or(WriteError::BufferTooShort)
}

/// Marshals into exactly the packet's size, checked first: the crate's errors box themselves,
/// so the common failure must not reach it.
fn marshal(packet: &impl Marshal, out: &mut [u8]) -> Result<usize, WriteError> {
    let out = out
        .get_mut(..packet.marshal_size())
        .ok_or(WriteError::BufferTooShort)?;
    packet.marshal_to(out).map_err(|_| WriteError::Rejected)
}

fn sender_report(report: &SenderReport) -> CrateSenderReport {
    // Empty `Vec` and `Bytes` do not allocate.
    CrateSenderReport {
        ssrc: report.ssrc,
        ntp_time: report.ntp_time,
        rtp_time: report.rtp_time,
        packet_count: report.packet_count,
        octet_count: report.octet_count,
        reports: Vec::new(),
        profile_extensions: Bytes::new(),
    }
}

const TOTAL_LOST_RANGE: std::ops::RangeInclusive<i32> = -(1 << 23)..=(1 << 23) - 1;

fn reception_report(block: &ReportBlock) -> Result<ReceptionReport, WriteError> {
    if !TOTAL_LOST_RANGE.contains(&block.total_lost) {
        return Err(WriteError::OutOfRange);
    }
    Ok(ReceptionReport {
        ssrc: block.ssrc,
        fraction_lost: block.fraction_lost,
        // The 24-bit two's complement the wire carries.
        total_lost: block.total_lost as u32 & 0xFF_FFFF,
        last_sequence_number: block.highest_sequence,
        jitter: block.jitter,
        last_sender_report: block.last_sr,
        delay: block.delay_since_last_sr,
    })
}

/// The bitrate as the crate takes it. Cut to the 18 significant bits the wire keeps first, so
/// the `f32` holds it exactly and the estimate sent never rounds above ours.
fn remb_bitrate(bitrate_bps: u64) -> f32 {
    let shift = (u64::BITS - bitrate_bps.leading_zeros()).saturating_sub(18);
    ((bitrate_bps >> shift) << shift) as f32
}

/// Transport-wide CC feedback is kept as bytes, which the crate cannot write without parsing
/// them into its own lists: so the fixed fields go through its header and the bytes are copied,
/// padded to a 32-bit boundary with RTCP padding.
fn transport_cc(feedback: &TransportCc<'_>, out: &mut [u8]) -> Result<usize, WriteError> {
    if feedback.reference_time > 0xFF_FFFF {
        return Err(WriteError::OutOfRange);
    }
    let chunks = feedback.chunks_and_deltas;
    let padding = (4 - chunks.len() % 4) % 4;
    let len = 20 + chunks.len() + padding;
    let header = Header {
        padding: padding != 0,
        count: FORMAT_TCC,
        packet_type: PacketType::TransportSpecificFeedback,
        length: u16::try_from(len / 4 - 1).map_err(|_| WriteError::OutOfRange)?,
    };
    let out = out.get_mut(..len).ok_or(WriteError::BufferTooShort)?;
    let (fixed, variable) = out.split_at_mut(20);
    header.marshal_to(fixed).map_err(|_| WriteError::Rejected)?;
    fixed[4..8].copy_from_slice(&feedback.sender_ssrc.to_be_bytes());
    fixed[8..12].copy_from_slice(&feedback.media_ssrc.to_be_bytes());
    fixed[12..14].copy_from_slice(&feedback.base_sequence.to_be_bytes());
    fixed[14..16].copy_from_slice(&feedback.packet_status_count.to_be_bytes());
    let time_and_count = feedback.reference_time << 8 | u32::from(feedback.fb_count);
    fixed[16..20].copy_from_slice(&time_and_count.to_be_bytes());
    let (copied, pad) = variable.split_at_mut(chunks.len());
    copied.copy_from_slice(chunks);
    if let Some((count, zeros)) = pad.split_last_mut() {
        zeros.fill(0);
        // Below 4: fits.
        *count = padding as u8;
    }
    Ok(len)
}
