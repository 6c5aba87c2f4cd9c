//! What `sfu inspect` says after the packets: per SSRC the frames, keyframes, layers and
//! losses, and for the whole file what was not RTP or did not parse.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::{self, Display};

use serde_json::{json, Value};

use super::inspect_record::{Maybe, PacketRecord};

/// Counts over a whole capture file.
#[derive(Debug, Default)]
pub struct CaptureSummary {
    records: u64,
    rtp: u64,
    /// Well-formed records that are not RTP, by reason.
    skipped: BTreeMap<String, u64>,
    /// Records that are broken at some layer, by reason.
    malformed: BTreeMap<String, u64>,
    streams: BTreeMap<u32, StreamStats>,
}

/// One SSRC's packets. Frames are counted as distinct RTP timestamps, so reordering does not
/// count a frame twice.
#[derive(Debug, Default)]
struct StreamStats {
    packets: u64,
    payload_types: BTreeSet<u8>,
    timestamps: HashSet<u32>,
    keyframe_timestamps: HashSet<u32>,
    /// Distinct timestamps per (spatial, temporal) layer.
    layers: BTreeMap<(Option<u8>, Option<u8>), HashSet<u32>>,
    sequence: SequenceStats,
    first_ns: Option<u64>,
    last_ns: Option<u64>,
    codec_errors: u64,
    dd_errors: u64,
}

/// Sequence numbers unwrapped past 16 bits (RFC 3550 appendix A.1): each is placed nearest to
/// the highest seen so far.
#[derive(Debug, Default)]
struct SequenceStats {
    highest: Option<i64>,
    lowest: i64,
    seen: HashSet<i64>,
    reordered: u64,
    duplicates: u64,
}

impl CaptureSummary {
    /// A record that carried no RTP packet; `malformed` when it was broken rather than other.
    pub fn not_rtp(&mut self, reason: String, malformed: bool) {
        self.records += 1;
        let counts = match malformed {
            true => &mut self.malformed,
            false => &mut self.skipped,
        };
        *counts.entry(reason).or_default() += 1;
    }

    pub fn rtp(&mut self, timestamp_ns: Option<u64>, packet: &PacketRecord) {
        self.records += 1;
        self.rtp += 1;
        self.streams
            .entry(packet.fields.ssrc)
            .or_default()
            .add(timestamp_ns, packet);
    }

    /// One object per SSRC (`"summary": "ssrc"`), then one for the file (`"summary":
    /// "capture"`).
    pub fn json(&self) -> Vec<Value> {
        let streams = self.streams.iter().map(|(ssrc, s)| s.json(*ssrc));
        let capture = json!({
            "summary": "capture",
            "records": self.records,
            "rtp": self.rtp,
            "skipped": self.skipped,
            "malformed": self.malformed,
        });
        streams.chain([capture]).collect()
    }
}

impl StreamStats {
    fn add(&mut self, timestamp_ns: Option<u64>, packet: &PacketRecord) {
        self.packets += 1;
        let f = &packet.fields;
        self.payload_types.insert(f.payload_type);
        self.sequence.add(f.sequence_number);
        if let Some(ns) = timestamp_ns {
            self.first_ns = Some(self.first_ns.map_or(ns, |first| first.min(ns)));
            self.last_ns = Some(self.last_ns.map_or(ns, |last| last.max(ns)));
        }
        self.timestamps.insert(f.timestamp);
        if packet.summary().is_some_and(|s| s.keyframe) {
            self.keyframe_timestamps.insert(f.timestamp);
        }
        self.layers
            .entry(packet.layer())
            .or_default()
            .insert(f.timestamp);
        self.codec_errors += u64::from(matches!(packet.codec, Some((_, Err(_)))));
        self.dd_errors += u64::from(matches!(packet.dd, Some(Err(_))));
    }

    /// Seconds from the first packet to the last, by capture time.
    fn duration_s(&self) -> Option<f64> {
        let ns = self.last_ns? - self.first_ns?;
        Some(ns as f64 / 1e9)
    }

    /// Frames per second over the stream's duration; `None` for a single instant.
    fn fps(&self, frames: usize) -> Option<f64> {
        self.duration_s()
            .filter(|&d| d > 0.0)
            .map(|d| (frames as f64 / d * 100.0).round() / 100.0)
    }

    fn json(&self, ssrc: u32) -> Value {
        let layers: Vec<Value> = self
            .layers
            .iter()
            .map(|(&(spatial, temporal), ts)| {
                json!({
                    "spatial_id": spatial,
                    "temporal_id": temporal,
                    "frames": ts.len(),
                    "fps": self.fps(ts.len()),
                })
            })
            .collect();
        json!({
            "summary": "ssrc",
            "ssrc": ssrc,
            "payload_types": self.payload_types,
            "packets": self.packets,
            "frames": self.timestamps.len(),
            "keyframes": self.keyframe_timestamps.len(),
            "duration_s": self.duration_s(),
            "layers": layers,
            "lost": self.sequence.lost(),
            "reordered": self.sequence.reordered,
            "duplicates": self.sequence.duplicates,
            "codec_errors": self.codec_errors,
            "dd_errors": self.dd_errors,
        })
    }
}

impl SequenceStats {
    fn add(&mut self, seq: u16) {
        let extended = match self.highest {
            // The 16-bit difference, read as signed, is the shortest way around the circle.
            Some(highest) => highest + i64::from(seq.wrapping_sub(highest as u16) as i16),
            None => i64::from(seq),
        };
        if !self.seen.insert(extended) {
            self.duplicates += 1;
            return;
        }
        match self.highest {
            Some(highest) if extended < highest => {
                self.reordered += 1;
                self.lowest = self.lowest.min(extended);
            }
            Some(_) => self.highest = Some(extended),
            None => (self.highest, self.lowest) = (Some(extended), extended),
        }
    }

    /// Sequence numbers between the lowest and the highest that never arrived.
    fn lost(&self) -> i64 {
        self.highest
            .map_or(0, |h| h - self.lowest + 1 - self.seen.len() as i64)
    }
}

impl Display for CaptureSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (ssrc, s) in &self.streams {
            writeln!(f, "{}", StreamText(*ssrc, s))?;
        }
        write!(
            f,
            "capture: {} records, {} rtp; skipped: {}; malformed: {}",
            self.records,
            self.rtp,
            Reasons(&self.skipped),
            Reasons(&self.malformed)
        )
    }
}

struct StreamText<'a>(u32, &'a StreamStats);

impl Display for StreamText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (ssrc, s) = (self.0, self.1);
        let pts: Vec<String> = s.payload_types.iter().map(u8::to_string).collect();
        write!(
            f,
            "ssrc 0x{ssrc:08x}: {} packets, pt {}, {} frames, {} keyframes over {} s; \
             lost {}, reordered {}, duplicates {}; codec errors {}, dd errors {}",
            s.packets,
            pts.join(","),
            s.timestamps.len(),
            s.keyframe_timestamps.len(),
            Maybe(s.duration_s().map(|d| format!("{d:.3}"))),
            s.sequence.lost(),
            s.sequence.reordered,
            s.sequence.duplicates,
            s.codec_errors,
            s.dd_errors,
        )?;
        for (&(spatial, temporal), ts) in &s.layers {
            write!(
                f,
                "\n  layer S{} T{}: {} frames, {} fps",
                Maybe(spatial),
                Maybe(temporal),
                ts.len(),
                Maybe(s.fps(ts.len()))
            )?;
        }
        Ok(())
    }
}

struct Reasons<'a>(&'a BTreeMap<String, u64>);

impl Display for Reasons<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let parts: Vec<String> = self.0.iter().map(|(r, n)| format!("{n} {r}")).collect();
        f.write_str(&parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(seqs: &[u16]) -> SequenceStats {
        let mut s = SequenceStats::default();
        for &seq in seqs {
            s.add(seq);
        }
        s
    }

    #[test]
    fn gaps_across_the_wrap_are_losses() {
        let s = stats(&[65533, 65534, 1, 2]);
        assert_eq!((s.lost(), s.reordered, s.duplicates), (2, 0, 0));
    }

    #[test]
    fn late_and_repeated_packets_are_not_losses() {
        let s = stats(&[10, 12, 11, 12, 9, 14]);
        assert_eq!(s.lost(), 1, "13 only");
        assert_eq!((s.reordered, s.duplicates), (2, 1));
    }

    #[test]
    fn late_packet_before_the_wrap() {
        let s = stats(&[0, 1, 65535]);
        assert_eq!((s.lost(), s.reordered), (0, 1));
    }
}
