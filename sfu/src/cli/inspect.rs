//! `sfu inspect`: every RTP packet of a capture file, one line each, then per-SSRC summaries.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use rtp_ext::codec::Codec;
use rtp_ext::rtp::RtpPacket;
use sfu::capture::{classify, udp_datagram, Capture, PayloadKind, Record};

use super::inspect_record::{Inspector, PacketRecord};
use super::inspect_summary::CaptureSummary;

/// Payload types browsers commonly offer, used unless `--codec` says otherwise.
const DEFAULT_CODECS: [(u8, Codec); 11] = [
    (35, Codec::Av1),
    (41, Codec::Av1),
    (45, Codec::Av1),
    (96, Codec::Vp8),
    (98, Codec::Vp9),
    (100, Codec::Vp9),
    (101, Codec::Vp9),
    (102, Codec::H264),
    (126, Codec::H264),
    (127, Codec::H264),
    (111, Codec::Opus),
];

/// Print every RTP packet of a pcap or pcapng file, then a summary per SSRC.
///
/// Each packet line shows SSRC, sequence number, RTP timestamp, marker, payload type, header
/// extensions as id:length, the payload descriptor (keyframe, start and end of frame, picture
/// id, spatial and temporal layer; `-` where the payload does not say) and, with
/// `--dd-ext-id`, the Dependency Descriptor. RTCP, STUN, DTLS and other non-RTP datagrams are
/// counted in the final summary, as are packets that do not parse.
#[derive(Debug, Args)]
#[command(after_long_help = AFTER_HELP, after_help = AFTER_HELP)]
pub struct InspectArgs {
    /// The capture file (pcap or pcapng; Ethernet, raw IP, Linux cooked or loopback frames).
    file: PathBuf,
    /// The RTP header extension id of the Dependency Descriptor. The latest template structure
    /// is kept per SSRC to decode the descriptors that follow it.
    #[arg(long, value_name = "ID", value_parser = clap::value_parser!(u8).range(1..=255))]
    dd_ext_id: Option<u8>,
    /// Decode payload type PT as codec NAME (AV1, VP9, VP8, H264, opus, PCMU, PCMA, G722).
    /// Repeatable; overrides the default for that payload type.
    #[arg(long = "codec", value_name = "PT=NAME", value_parser = codec_mapping)]
    codecs: Vec<(u8, Codec)>,
    /// One JSON object per line instead of text.
    #[arg(long)]
    json: bool,
}

const AFTER_HELP: &str = "\
Default payload types: 35, 41, 45 AV1; 96 VP8; 98, 100, 101 VP9; 102, 126, 127 H264;
111 opus. Other payload types are shown without a payload descriptor unless named with
--codec, e.g. `--codec 45=AV1 --codec 109=VP8`.

With --json every packet is an object with keys ssrc, seq, timestamp, marker, pt,
extensions ([{id, len}]), codec (the descriptor summary, {name, error} when the payload does
not parse, or null) and dd (the object `sfu dd decode` prints, {error} when it does not
decode, or null). Summary objects follow; they have a \"summary\" key, which packet objects
never have: \"ssrc\" (packets, frames, keyframes, layers with fps, lost, reordered,
duplicates) and, last, \"capture\" (records, rtp, skipped and malformed counts by reason).

Frames are distinct RTP timestamps; frame rates are frames over the time from an SSRC's first
to last packet in the capture. Exit status 1 if the file cannot be read to its end; what was
read before the error is still printed.";

impl InspectArgs {
    pub fn run(self) -> ExitCode {
        let path = self.file.display().to_string();
        let bytes = match std::fs::read(&self.file) {
            Ok(bytes) => bytes,
            Err(e) => return fail(&path, &e),
        };
        let capture = match Capture::open(&bytes) {
            Ok(capture) => capture,
            Err(e) => return fail(&path, &e),
        };
        let mut inspector = Inspector::new(self.codec_map(), self.dd_ext_id);
        let mut summary = CaptureSummary::default();
        let mut out = std::io::stdout().lock();
        let mut failure = None;
        for record in capture {
            let record = match record {
                Ok(record) => record,
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            };
            let Some(packet) = rtp_record(&mut inspector, &mut summary, record) else {
                continue;
            };
            if self.print(&mut out, &packet).is_err() {
                return ExitCode::FAILURE;
            }
        }
        if self.print_summary(&mut out, &summary).is_err() {
            return ExitCode::FAILURE;
        }
        match failure {
            Some(e) => fail(&path, &e),
            None => ExitCode::SUCCESS,
        }
    }

    fn codec_map(&self) -> HashMap<u8, Codec> {
        DEFAULT_CODECS.iter().chain(&self.codecs).copied().collect()
    }

    fn print(&self, out: &mut impl Write, packet: &PacketRecord) -> std::io::Result<()> {
        match self.json {
            true => writeln!(out, "{}", packet.json()),
            false => writeln!(out, "{packet}"),
        }
    }

    fn print_summary(&self, out: &mut impl Write, summary: &CaptureSummary) -> std::io::Result<()> {
        if !self.json {
            return writeln!(out, "{summary}");
        }
        summary
            .json()
            .iter()
            .try_for_each(|object| writeln!(out, "{object}"))
    }
}

/// The record's RTP packet, inspected and counted; anything else is counted only.
fn rtp_record(
    inspector: &mut Inspector,
    summary: &mut CaptureSummary,
    record: Record<'_>,
) -> Option<PacketRecord> {
    let datagram = match udp_datagram(record.link_type, record.data) {
        Ok(datagram) => datagram,
        Err(e) => {
            summary.not_rtp(e.to_string(), e.is_malformed());
            return None;
        }
    };
    match classify(datagram.payload) {
        PayloadKind::Rtp => {}
        other => {
            summary.not_rtp(other.name().to_owned(), false);
            return None;
        }
    }
    match RtpPacket::parse(datagram.payload) {
        Ok(packet) => {
            let packet = inspector.inspect(&packet);
            summary.rtp(record.timestamp_ns, &packet);
            Some(packet)
        }
        Err(e) => {
            summary.not_rtp(e.to_string(), true);
            None
        }
    }
}

fn codec_mapping(arg: &str) -> Result<(u8, Codec), String> {
    let (pt, name) = arg
        .split_once('=')
        .ok_or_else(|| format!("expected PT=NAME, got {arg:?}"))?;
    let pt = pt
        .trim()
        .parse::<u8>()
        .ok()
        .filter(|&pt| pt < 128)
        .ok_or_else(|| format!("payload type {pt:?} is not 0-127"))?;
    let codec =
        Codec::from_encoding_name(name.trim()).ok_or_else(|| format!("unknown codec {name:?}"))?;
    Ok((pt, codec))
}

fn fail(path: &str, error: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("sfu inspect: {path}: {error}");
    ExitCode::FAILURE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codec_mappings_parse_and_refuse() {
        assert_eq!(codec_mapping("45=av1"), Ok((45, Codec::Av1)));
        assert_eq!(codec_mapping(" 0 = PCMU"), Ok((0, Codec::Pcmu)));
        for bad in ["45", "128=VP8", "x=VP8", "96=H265"] {
            assert!(codec_mapping(bad).is_err(), "{bad}");
        }
    }
}
