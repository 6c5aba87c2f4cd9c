//! Running `sfu inspect --json`, reading the shared captures and their text summaries, and
//! the RTX form of a packet.

#![allow(dead_code)] // Each test binary uses its own part of these helpers.

#[cfg(feature = "node")]
use std::process::Command;
use std::process::Output;

use serde_json::Value;

pub const CAPTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/captures/");
pub const VECTORS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/vectors/dd-vectors.json"
);

/// The `sfu` command, built only with the node.
#[cfg(feature = "node")]
pub fn sfu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sfu"))
        .args(args)
        .output()
        .expect("runs")
}

/// `sfu inspect --json` output split into packets, SSRC summaries and the capture summary.
#[derive(Debug)]
pub struct Inspection {
    pub packets: Vec<Value>,
    pub streams: Vec<Value>,
    pub capture: Value,
}

#[cfg(feature = "node")]
pub fn inspect_json(path: &str, extra: &[&str]) -> Inspection {
    let out = sfu(&[&["inspect", "--json", path], extra].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    split(&out)
}

pub fn split(out: &Output) -> Inspection {
    let objects: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let (summaries, packets): (Vec<Value>, Vec<Value>) = objects
        .into_iter()
        .partition(|o| o.get("summary").is_some());
    let (mut captures, streams): (Vec<Value>, Vec<Value>) = summaries
        .into_iter()
        .partition(|o| o["summary"] == "capture");
    assert_eq!(captures.len(), 1, "one capture summary");
    Inspection {
        packets,
        streams,
        capture: captures.remove(0),
    }
}

pub fn capture_path(name: &str) -> String {
    format!("{CAPTURES}{name}")
}

/// One line of a capture's text summary.
#[derive(Debug)]
pub struct SummaryLine {
    pub seq: u16,
    pub timestamp: u32,
    pub marker: bool,
    pub text: String,
}

/// The `*.txt` beside a capture: `Seq=`, `Time=` and a trailing `Mark` per packet.
pub fn text_summary(name: &str) -> Vec<SummaryLine> {
    let text = std::fs::read_to_string(capture_path(name)).expect("text summary");
    text.lines()
        .map(|line| {
            let field = |key: &str| {
                let start = line.find(key).expect("field") + key.len();
                let digits: String = line[start..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                digits.parse::<u64>().expect("number")
            };
            SummaryLine {
                seq: field("Seq=") as u16,
                timestamp: field("Time=") as u32,
                marker: line.contains(", Mark"),
                text: line.to_owned(),
            }
        })
        .collect()
}

/// A row of PROVENANCE.md's capture table: packet count, SSRC and payload type.
#[derive(Debug)]
pub struct Provenance {
    pub file: String,
    pub packets: usize,
    pub ssrc: u32,
    pub pt: u8,
}

pub fn provenance() -> Vec<Provenance> {
    let text = std::fs::read_to_string(capture_path("PROVENANCE.md")).expect("provenance");
    text.lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let (file, content) = (cells.get(1)?, cells.get(2)?);
            let packets = content.split_whitespace().next()?.parse().ok()?;
            let ssrc = content.split("SSRC 0x").nth(1)?.get(..8)?;
            let pt = content.split("PT ").nth(1)?.split_whitespace().next()?;
            Some(Provenance {
                file: (*file).to_owned(),
                packets,
                ssrc: u32::from_str_radix(ssrc, 16).ok()?,
                pt: pt.parse().ok()?,
            })
        })
        .collect()
}

pub fn vectors() -> Value {
    serde_json::from_str(&std::fs::read_to_string(VECTORS).expect("vectors")).expect("json")
}

/// The RTP packets of a shared capture, in capture order, read with the library's reader.
pub fn rtp_packets(name: &str) -> Vec<Vec<u8>> {
    use sfu::capture::{classify, udp_datagram, Capture, PayloadKind};
    let file = std::fs::read(capture_path(name)).expect("capture readable");
    Capture::open(&file)
        .expect("a capture")
        .map(|record| record.expect("record"))
        .filter_map(|record| {
            let datagram = udp_datagram(record.link_type, record.data).ok()?;
            (classify(datagram.payload) == PayloadKind::Rtp).then(|| datagram.payload.to_vec())
        })
        .collect()
}

/// `units` temporal units of a generated L3T3 stream under `ssrc`, its Dependency Descriptor
/// as extension `dd_ext`.
pub fn l3t3_stream(ssrc: u32, units: usize, dd_ext: u8) -> Vec<Vec<u8>> {
    use selector::scalability::{GeneratorConfig, ScalabilityMode, StreamGenerator};
    let config = GeneratorConfig {
        ssrc,
        ..GeneratorConfig::default()
    };
    let mut g = StreamGenerator::new(ScalabilityMode::L3T3, config);
    let structure = g.structure().clone();
    let mut packets = Vec::new();
    let mut done = 0;
    while done < units {
        let p = g.next().expect("endless");
        done += usize::from(p.marker);
        packets.push(p.rtp_bytes(dd_ext, &structure));
    }
    packets
}

/// The packet with its extension block replaced by a two-byte-form one (RFC 8285 section
/// 4.3) holding the elements it had and a rid.
pub fn with_rid(packet: &[u8], rid_ext: u8, rid: &[u8]) -> Vec<u8> {
    let parsed = rtp_ext::rtp::RtpPacket::parse(packet).expect("generated RTP");
    let mut elements = Vec::new();
    for (id, value) in parsed.extensions().chain([(rid_ext, rid)]) {
        elements.extend_from_slice(&[id, value.len() as u8]);
        elements.extend_from_slice(value);
    }
    elements.resize(elements.len().div_ceil(4) * 4, 0);
    let mut out = packet[..12].to_vec();
    out[0] |= 0x10;
    out.extend_from_slice(&[0x10, 0x00]);
    out.extend_from_slice(&((elements.len() / 4) as u16).to_be_bytes());
    out.extend_from_slice(&elements);
    out.extend_from_slice(parsed.payload());
    out
}

/// `packet` retransmitted as RTX (RFC 4588): its own header on the RTX SSRC with the RTX
/// stream's sequence number `rtx_seq`, then the original sequence number and payload.
pub fn as_rtx(packet: &[u8], rtx_ssrc: u32, rtx_seq: u16) -> bytes::Bytes {
    let original = rtp_ext::rtp::RtpPacket::parse(packet).expect("RTP");
    let mut rtx = packet[..original.header_len()].to_vec();
    rtx[8..12].copy_from_slice(&rtx_ssrc.to_be_bytes());
    rtx[2..4].copy_from_slice(&rtx_seq.to_be_bytes());
    rtx.extend_from_slice(&original.fields().sequence_number.to_be_bytes());
    rtx.extend_from_slice(original.payload());
    bytes::Bytes::from(rtx)
}

/// A VP8 packet of temporal layer `tid`: payload descriptor with the T bit (RFC 7741
/// section 4.2), then `size` payload bytes.
pub fn vp8_packet(ssrc: u32, seq: u16, tid: u8, size: usize) -> bytes::Bytes {
    let mut packet = vec![0x80, 96];
    packet.extend_from_slice(&seq.to_be_bytes());
    packet.extend_from_slice(&(u32::from(seq) * 3000).to_be_bytes());
    packet.extend_from_slice(&ssrc.to_be_bytes());
    // X and S; then T; then TID, Y, KEYIDX.
    packet.extend_from_slice(&[0x90, 0x20, tid << 6]);
    packet.resize(packet.len() + size, 0x01);
    bytes::Bytes::from(packet)
}
