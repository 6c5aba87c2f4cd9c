//! The real browser captures through the capture reader, the RTP view and the codec and DD
//! parsers, checked against PROVENANCE.md, the captures' text summaries and the vectors file.

use crate::common;

use std::collections::HashSet;

use serde_json::Value;

use common::{capture_path, inspect_json, provenance, text_summary, vectors, Inspection};

#[test]
fn every_capture_is_rtp_with_the_documented_count_ssrc_and_pt() {
    let rows = provenance();
    assert_eq!(rows.len(), 5, "the five browser captures");
    for row in rows {
        let run = inspect_json(&capture_path(&row.file), &[]);
        assert_eq!(run.packets.len(), row.packets, "{}", row.file);
        assert_eq!(run.capture["records"], row.packets, "{}", row.file);
        assert_eq!(run.capture["rtp"], row.packets);
        assert_eq!(run.capture["skipped"], serde_json::json!({}));
        assert_eq!(run.capture["malformed"], serde_json::json!({}));
        assert!(run
            .packets
            .iter()
            .all(|p| p["ssrc"] == row.ssrc && p["pt"] == row.pt));
        assert_eq!(run.streams.len(), 1);
        assert_eq!(run.streams[0]["packets"], row.packets);
    }
}

/// Packet by packet the header fields equal the text summary's, and the summary's frame and
/// loss counts follow from it: frames are distinct timestamps, losses are sequence gaps.
#[test]
fn headers_frames_and_losses_agree_with_the_text_summaries() {
    for name in ["av1", "vp8", "vp9", "h264"] {
        let lines = text_summary(&format!("{name}.txt"));
        let run = inspect_json(&capture_path(&format!("{name}.pcap")), &[]);
        assert_eq!(run.packets.len(), lines.len(), "{name}");
        for (packet, line) in run.packets.iter().zip(&lines) {
            assert_eq!(packet["seq"], line.seq, "{name}");
            assert_eq!(
                packet["timestamp"], line.timestamp,
                "{name} seq {}",
                line.seq
            );
            assert_eq!(packet["marker"], line.marker, "{name} seq {}", line.seq);
        }
        let frames: HashSet<u32> = lines.iter().map(|l| l.timestamp).collect();
        let gaps: usize = lines
            .windows(2)
            .map(|w| usize::from(w[1].seq.wrapping_sub(w[0].seq)) - 1)
            .sum();
        let stream = &run.streams[0];
        assert_eq!(stream["frames"], frames.len(), "{name}");
        assert_eq!(stream["lost"], gaps, "{name}");
        assert_eq!(stream["reordered"], 0);
        assert_eq!(stream["duplicates"], 0);
    }
}

#[test]
fn vp9_capture_with_loss_reports_its_gaps() {
    let lines = text_summary("vp9.txt");
    let gaps = lines
        .windows(2)
        .filter(|w| w[1].seq != w[0].seq.wrapping_add(1))
        .count();
    assert!(gaps > 0, "the capture has real loss");
    let run = inspect_json(&capture_path("vp9.pcap"), &[]);
    assert!(run.streams[0]["lost"].as_u64().unwrap() >= gaps as u64);
}

fn codec(packet: &Value) -> &Value {
    &packet["codec"]
}

/// Keyframe packets the payload headers show, against the text summary's keyframe marks.
#[test]
fn keyframes_agree_with_the_text_summaries() {
    let vp8 = inspect_json(&capture_path("vp8.pcap"), &[]);
    let marked = text_summary("vp8.txt")
        .iter()
        .filter(|l| l.text.contains("Keyframe"))
        .count();
    let found = vp8
        .packets
        .iter()
        .filter(|p| codec(p)["keyframe"] == true)
        .count();
    assert_eq!(found, marked);
    assert_eq!(
        vp8.streams[0]["keyframes"], marked,
        "one packet per keyframe"
    );

    let h264 = inspect_json(&capture_path("h264.pcap"), &[]);
    let lines = text_summary("h264.txt");
    let is_idr = |text: &str| text.replace("non-IDR", "").contains("IDR-Slice");
    // Parameter sets travel only with keyframes, sometimes in a packet of their own; the
    // text summary marks a broken one, which no parser can vouch for.
    let keyframe_packets: Vec<u16> = lines
        .iter()
        .filter(|l| (is_idr(&l.text) || l.text.contains("SPS")) && !l.text.contains("Bad NAL"))
        .map(|l| l.seq)
        .collect();
    let found: Vec<u16> = h264
        .packets
        .iter()
        .filter(|p| codec(p)["keyframe"] == true)
        .map(|p| p["seq"].as_u64().unwrap() as u16)
        .collect();
    assert_eq!(found, keyframe_packets);
    let idr_frames: HashSet<u32> = lines
        .iter()
        .filter(|l| is_idr(&l.text))
        .map(|l| l.timestamp)
        .collect();
    assert_eq!(h264.streams[0]["keyframes"], idr_frames.len());
    let bad = lines
        .iter()
        .filter(|l| l.text.contains("Bad NAL Length"))
        .count();
    assert_eq!(
        h264.streams[0]["codec_errors"], bad,
        "both see the same broken packet"
    );
}

/// In a capture without loss, VP9 picture ids count up by one per frame and change exactly
/// when the RTP timestamp does.
#[test]
fn contiguous_vp9_picture_ids_are_consecutive() {
    let run = inspect_json(&capture_path("contiguous_vp9.pcap"), &[]);
    assert_eq!(run.streams[0]["lost"], 0);
    for pair in run.packets.windows(2) {
        let ids = [&pair[0], &pair[1]].map(|p| codec(p)["picture_id"].as_u64().unwrap());
        let new_frame = pair[0]["timestamp"] != pair[1]["timestamp"];
        let expected = if new_frame {
            (ids[0] + 1) % (1 << 15)
        } else {
            ids[0]
        };
        assert_eq!(ids[1], expected, "seq {}", pair[1]["seq"]);
    }
}

/// The same holds across the lossy capture once the lost pictures are accounted for: picture
/// ids never go back and never skip more than the sequence numbers do.
#[test]
fn vp9_picture_ids_advance_no_faster_than_sequence_numbers() {
    let run = inspect_json(&capture_path("vp9.pcap"), &[]);
    for pair in run.packets.windows(2) {
        let ids = [&pair[0], &pair[1]].map(|p| codec(p)["picture_id"].as_u64().unwrap());
        let seqs = [&pair[0], &pair[1]].map(|p| p["seq"].as_u64().unwrap() as u16);
        let id_step = (ids[1] + (1 << 15) - ids[0]) % (1 << 15);
        let seq_step = u64::from(seqs[1].wrapping_sub(seqs[0]));
        assert!(id_step <= seq_step, "seq {} -> {}", seqs[0], seqs[1]);
    }
}

fn by_seq<'a>(run: &'a Inspection, seq: &Value) -> &'a Value {
    run.packets
        .iter()
        .find(|p| &p["seq"] == seq)
        .expect("packet in the capture")
}

#[test]
fn vp9_packets_match_their_vector_fields() {
    let vectors = vectors();
    let expected = vectors["vp9_rtp_packets"]["packets"].as_array().unwrap();
    let run = inspect_json(
        &capture_path("jitsi_vp9_packets.pcap"),
        &["--dd-ext-id", "11"],
    );
    assert_eq!(run.packets.len(), expected.len());
    for vector in expected {
        let packet = by_seq(&run, &vector["seq"]);
        let ssrc = u32::from_str_radix(&vector["ssrc"].as_str().unwrap()[2..], 16).unwrap();
        assert_eq!(packet["ssrc"], ssrc);
        let (e, c) = (&vector["expected"], codec(packet));
        let context = vector["description"].as_str().unwrap();
        assert_eq!(c["keyframe"], e["isKeyframe"], "{context}");
        assert_eq!(c["start_of_frame"], e["isStartOfFrame"], "{context}");
        assert_eq!(c["end_of_frame"], e["isEndOfFrame"], "{context}");
        assert_eq!(c["picture_id"], e["pictureId"], "{context}");
        assert_eq!(c["spatial_id"], e["sid"], "{context}");
        assert_eq!(c["temporal_id"], e["tid"], "{context}");
        match vector.get("dd_summary") {
            Some(summary) => check_dd(&packet["dd"], summary.as_str().unwrap()),
            None => assert_eq!(packet["dd"], Value::Null),
        }
    }
}

#[test]
fn av1_dd_packets_decode_to_their_vector_summaries() {
    let vectors = vectors();
    let set = &vectors["av1_rtp_packets_with_dd"];
    let id = set["dd_ext_id"].to_string();
    // Two of these AV1 streams use payload types browsers also give VP9.
    let args = [
        "--dd-ext-id",
        &id,
        "--codec",
        "100=AV1",
        "--codec",
        "101=AV1",
    ];
    let run = inspect_json(&capture_path("jitsi_av1dd_packets.pcap"), &args);
    let expected = set["packets"].as_array().unwrap();
    assert_eq!(run.packets.len(), expected.len());
    for vector in expected {
        let packet = by_seq(&run, &vector["seq"]);
        assert_eq!(codec(packet)["name"], "AV1");
        let ext: Vec<(u64, usize)> = vector["ext"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e[0].as_u64().unwrap(), e[1].as_str().unwrap().len() / 2))
            .collect();
        let seen: Vec<(u64, usize)> = packet["extensions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["id"].as_u64().unwrap(),
                    e["len"].as_u64().unwrap() as usize,
                )
            })
            .collect();
        assert_eq!(seen, ext);
        check_dd(&packet["dd"], vector["dd_summary"].as_str().unwrap());
    }
    for stream in &run.streams {
        assert_eq!(stream["dd_errors"], 0, "structures carried over per SSRC");
    }
}

/// Compares a decoded DD with a vector's one-line summary, e.g. `sof=1 eof=0 tid=0 fn=1
/// STRUCT[off=0 dt=1 tmpl=2 S1T1 chains=1 prot=[0] res=[[480, 270]]] adt=0x1 -> S0 T0 dti=S
/// fdiff=[] chains=[0]`; `tid` is the template id.
fn check_dd(dd: &Value, summary: &str) {
    let word = |key: &str| {
        summary
            .split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .unwrap_or_else(|| panic!("{key} in {summary}"))
            .to_owned()
    };
    let number = |key: &str| {
        word(key)
            .parse::<u64>()
            .expect("as the vector summary reads")
    };
    assert_eq!(dd["start_of_frame"], number("sof=") == 1, "{summary}");
    assert_eq!(dd["end_of_frame"], number("eof=") == 1, "{summary}");
    assert_eq!(dd["template_id"], number("tid="), "{summary}");
    assert_eq!(dd["frame_number"], number("fn="), "{summary}");
    let (_, frame) = summary
        .split_once("-> ")
        .expect("as the vector summary reads");
    let layer: Vec<&str> = frame.split_whitespace().take(2).collect();
    assert_eq!(format!("S{}", dd["spatial_id"]), layer[0], "{summary}");
    assert_eq!(format!("T{}", dd["temporal_id"]), layer[1], "{summary}");
    assert_eq!(dd["dtis"], word("dti="), "{summary}");
    let list = |key: &str| {
        let start = frame.find(key).expect("as the vector summary reads") + key.len();
        let end = start
            + frame[start..]
                .find(']')
                .expect("as the vector summary reads")
            + 1;
        serde_json::from_str::<Value>(&frame[start..end]).expect("as the vector summary reads")
    };
    assert_eq!(dd["frame_diffs"], list("fdiff="), "{summary}");
    assert_eq!(dd["chain_diffs"], list("chains="), "{summary}");
    if summary.contains("adt=") {
        let mask =
            u64::from_str_radix(word("adt=0x").as_str(), 16).expect("as the vector summary reads");
        assert_eq!(dd["active_decode_targets"], mask, "{summary}");
    }
    match summary.split_once("STRUCT[") {
        Some((_, structure)) => check_structure(&dd["structure"], structure),
        None => assert_eq!(dd["structure"], Value::Null, "{summary}"),
    }
}

fn check_structure(s: &Value, summary: &str) {
    let number = |key: &str| -> u64 {
        let start = summary.find(key).expect("as the vector summary reads") + key.len();
        let digits: String = summary[start..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().expect("as the vector summary reads")
    };
    assert_eq!(s["template_id_offset"], number("off="));
    assert_eq!(s["decode_targets"], number("dt="));
    assert_eq!(
        s["templates"]
            .as_array()
            .expect("as the vector summary reads")
            .len() as u64,
        number("tmpl=")
    );
    assert_eq!(s["chains"], number("chains="));
    let start = summary.find("res=").expect("as the vector summary reads") + 4;
    let end = start
        + summary[start..]
            .find("]]")
            .expect("as the vector summary reads")
        + 2;
    let resolutions: Value =
        serde_json::from_str(&summary[start..end]).expect("as the vector summary reads");
    assert_eq!(s["resolutions"], resolutions);
}
