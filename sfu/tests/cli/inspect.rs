//! `sfu inspect` as a user runs it: text and JSON, non-RTP traffic, broken files.

use crate::common;

use std::path::PathBuf;

use common::{capture_path, sfu, split, text_summary};

/// A scratch file for one test.
fn scratch(name: &str, bytes: &[u8]) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, bytes).expect("scratch file written");
    path
}

#[test]
fn text_prints_a_line_per_packet_then_the_summaries() {
    let out = sfu(&["inspect", &capture_path("vp8.pcap")]);
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let expected = text_summary("vp8.txt");
    let packet_lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("ssrc=")).collect();
    assert_eq!(packet_lines.len(), expected.len());
    for (line, summary) in packet_lines.iter().zip(&expected) {
        assert!(line.contains(&format!(" seq={} ", summary.seq)), "{line}");
        assert!(line.contains(" | VP8 key="), "{line}");
    }
    assert!(stdout.contains("ssrc 0xeedf3944: 104 packets"));
    assert!(stdout.ends_with("malformed: none\n"));
}

#[test]
fn help_says_how_to_name_a_codec() {
    let out = sfu(&["inspect", "--help"]);
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("--codec <PT=NAME>"));
    assert!(help.contains("\"summary\""));
}

#[test]
fn garbage_is_refused_with_a_clear_error() {
    let path = scratch("garbage.pcap", b"this is not a capture file at all");
    let out = sfu(&["inspect", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("not a pcap or pcapng file"), "{stderr}");
    let out = sfu(&["inspect", "/nonexistent/file.pcap"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn bad_codec_mapping_is_a_usage_error() {
    let out = sfu(&["inspect", "--codec", "96=H265", &capture_path("vp8.pcap")]);
    assert_eq!(out.status.code(), Some(2));
}

/// Records before the cut are printed and summarised, then the error, and the exit fails.
#[test]
fn truncated_capture_reports_what_precedes_the_cut() {
    let file = std::fs::read(capture_path("vp8.pcap")).unwrap();
    // Walk the classic pcap records (24-byte file header, 16-byte record headers with the
    // captured length at offset 8) to cut in the middle of the eleventh.
    let mut offset = 24;
    for _ in 0..10 {
        let len = u32::from_le_bytes(file[offset + 8..offset + 12].try_into().unwrap());
        offset += 16 + len as usize;
    }
    let path = scratch("truncated.pcap", &file[..offset + 20]);
    let out = sfu(&["inspect", "--json", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let run = split(&out);
    assert_eq!(run.packets.len(), 10);
    assert_eq!(run.capture["rtp"], 10);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("past the end of the file"), "{stderr}");
}

/// A raw-IPv4 pcap holding a STUN binding request, an RTCP receiver report, a TCP segment and
/// an RTP packet with a bad version: counted by reason, none printed as a packet.
#[test]
fn non_rtp_and_malformed_packets_are_counted() {
    let udp = |payload: &[u8]| {
        let udp_len = (8 + payload.len()) as u16;
        let total = 20 + udp_len;
        let mut p = vec![0x45, 0];
        p.extend(total.to_be_bytes());
        p.extend([
            0, 0, 0, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1, 0x13, 0x88, 0x17, 0x70,
        ]);
        p.extend(udp_len.to_be_bytes());
        p.extend([0, 0]);
        p.extend(payload);
        p
    };
    let mut tcp = udp(&[0; 20]);
    tcp[9] = 6;
    let frames = [
        udp(&[0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xA4, 0x42]),
        udp(&[0x80, 201, 0x00, 0x01, 0, 0, 0, 1]),
        tcp,
        udp(&[0x80, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0]),
    ];
    // Classic pcap, little endian, microseconds, LINKTYPE_RAW.
    let mut file = vec![0xD4, 0xC3, 0xB2, 0xA1, 2, 0, 4, 0];
    file.extend([0; 8]);
    file.extend(65535u32.to_le_bytes());
    file.extend(101u32.to_le_bytes());
    for frame in &frames {
        let len = (frame.len() as u32).to_le_bytes();
        file.extend([[0; 4], [0; 4], len, len].concat());
        file.extend(frame);
    }
    let path = scratch("mixed.pcap", &file);
    let out = sfu(&["inspect", "--json", path.to_str().unwrap()]);
    assert!(out.status.success());
    let run = split(&out);
    assert!(run.packets.is_empty());
    assert!(run.streams.is_empty());
    assert_eq!(run.capture["records"], frames.len());
    assert_eq!(run.capture["rtp"], 0);
    assert_eq!(
        run.capture["skipped"],
        serde_json::json!({ "stun": 1, "rtcp": 1, "not udp": 1 })
    );
    assert_eq!(
        run.capture["malformed"],
        serde_json::json!({ "rtp packet shorter than the fixed header": 1 })
    );
}
