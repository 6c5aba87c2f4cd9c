//! The published video: a generated AV1 L3T3 stream with its Dependency Descriptor. No real
//! L3T3 capture with a DD exists beside the checkout (the AV1 captures there carry none, or
//! only a few truncated packets), so the frame pattern, DDs and template structure come from
//! the workspace's own generator (`selector::scalability`, the one the engine's tests and
//! benches run on), whose structures equal those of real browser keyframes. What it lacks is
//! sizes: each frame here gets a size from its layer's share of a browser-like 2.5 Mbit/s
//! (360p and 720p layers above a 180p base), more for the lower temporal layers that later
//! frames reference, and a keyframe several times a delta frame, with a seeded jitter.
//!
//! Payloads are AV1 RTP as the node parses them (AV1 RTP spec section 4.4): an aggregation
//! header with one OBU element (W=1), the first packet of a frame opening an OBU_FRAME with
//! its extension header (temporal and spatial id), later packets continuing it (Z=1), N set on
//! the first packet of a keyframe. The OBU body is filler ending in a [`Tag`](super::tag::Tag).

use std::sync::Arc;

use bytes::Bytes;
use rtp_ext::dd::{DependencyDescriptor, DependencyDescriptorWriter, FrameDependencyStructure};
use selector::scalability::{
    GeneratedPacket, GeneratorConfig, ScalabilityMode, SeededRng, StreamGenerator,
};

use super::tag::TAG_LEN;

/// Bits per second of each spatial layer's own frames (180p, 360p, 720p): 2.5 Mbit/s in all.
pub const LAYER_BPS: [u64; 3] = [200_000, 550_000, 1_750_000];
/// Temporal units per second.
pub const FRAME_RATE: u64 = 30;
/// RTP payload bytes per packet at most, leaving room under a 1200-byte datagram budget
/// for the header, a keyframe's DD and SRTP.
pub const MAX_PAYLOAD: usize = 1000;
/// Packets one frame is split into at most (the viewer tracks a frame's packets in 64 bits).
pub const MAX_FRAME_PACKETS: usize = 64;
/// A keyframe's frames against the same layer's T0 delta frame.
const KEYFRAME_FACTOR: u64 = 4;
/// Relative frame sizes by temporal id in tenths: T0 frames are referenced by every later
/// frame of the cycle and carry the most; the cycle of four is T0, T2, T1, T2.
const TEMPORAL_WEIGHT: [u64; 3] = [20, 14, 10];
const CYCLE_WEIGHT: u64 = 20 + 10 + 14 + 10;
/// Sizes vary by up to this many percent either way.
const JITTER_PERCENT: u64 = 15;

/// AV1 aggregation header bits (AV1 RTP spec section 4.4).
const AGG_Z: u8 = 0x80;
const AGG_Y: u8 = 0x40;
const AGG_W1: u8 = 0x10;
const AGG_N: u8 = 0x08;
/// `obu_header`: OBU_FRAME (6) with the extension flag set.
const OBU_FRAME_WITH_EXTENSION: u8 = (6 << 3) | 0x04;
/// Filler of the OBU bodies.
const FILLER: u8 = 0x5A;

/// One packet of the stream, ready to send but for its tag's send time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcePacket {
    pub seq: u64,
    pub timestamp: u32,
    pub marker: bool,
    pub dd: Bytes,
    /// Aggregation header, OBU header or continuation, filler, and room for the tag.
    pub payload: Vec<u8>,
    pub frame: u64,
    pub index: u8,
    pub count: u8,
}

/// One temporal unit: every packet of its frames, lowest spatial layer first.
#[derive(Debug, Clone, Default)]
pub struct TemporalUnit {
    pub packets: Vec<SourcePacket>,
    pub keyframe: bool,
}

impl TemporalUnit {
    pub fn bytes(&self) -> usize {
        self.packets.iter().map(|p| p.payload.len()).sum()
    }
}

/// An endless L3T3 stream of sized frames.
#[derive(Debug)]
pub struct Source {
    generator: StreamGenerator,
    structure: Arc<FrameDependencyStructure>,
    writer: DependencyDescriptorWriter,
    rng: SeededRng,
    next_seq: u64,
}

impl Source {
    /// A stream whose first temporal unit is a keyframe and whose next ones are only on
    /// request, as a browser's encoder does.
    pub fn new(seed: u64) -> Self {
        let config = GeneratorConfig {
            keyframe_interval_tus: 0,
            // The generator's packets are frames here; this source splits them by size.
            packets_per_frame: 1..=1,
            seed,
            ..GeneratorConfig::default()
        };
        let generator = StreamGenerator::new(ScalabilityMode::L3T3, config);
        Self {
            structure: Arc::clone(generator.structure()),
            generator,
            writer: DependencyDescriptorWriter::new(),
            rng: SeededRng(seed),
            next_seq: 1,
        }
    }

    /// Makes the next temporal unit a keyframe.
    pub fn request_keyframe(&mut self) {
        self.generator.request_keyframe();
    }

    /// The next temporal unit's packets.
    pub fn next_temporal_unit(&mut self) -> TemporalUnit {
        let mut unit = TemporalUnit::default();
        loop {
            let Some(frame) = self.generator.next() else {
                // The generator is endless; an empty unit sends nothing.
                return unit;
            };
            unit.keyframe |= frame.keyframe;
            let last_of_unit = frame.marker;
            self.packetize(&frame, &mut unit.packets);
            if last_of_unit {
                if let Some(last) = unit.packets.last_mut() {
                    last.marker = true;
                }
                return unit;
            }
        }
    }

    /// Splits one frame into packets of at most [`MAX_PAYLOAD`] bytes.
    fn packetize(&mut self, frame: &GeneratedPacket, out: &mut Vec<SourcePacket>) {
        let size = self.frame_bytes(frame);
        let count = size.div_ceil(MAX_PAYLOAD).clamp(1, MAX_FRAME_PACKETS);
        let chunk = size.div_ceil(count);
        for index in 0..count {
            let descriptor = DependencyDescriptor {
                start_of_frame: index == 0,
                end_of_frame: index + 1 == count,
                attached_structure: frame
                    .descriptor
                    .attached_structure
                    .clone()
                    .filter(|_| index == 0),
                ..frame.descriptor.clone()
            };
            // Every chain: the publisher sends every layer.
            let dd = self
                .writer
                .write_bytes(&descriptor, Some(&self.structure), u32::MAX)
                .expect("generated descriptors fit their own structure");
            let payload = av1_payload(frame, index, count, chunk);
            out.push(SourcePacket {
                seq: self.next_seq,
                timestamp: frame.timestamp,
                marker: false,
                dd,
                payload,
                frame: frame.frame_number,
                // Both below MAX_FRAME_PACKETS, which fits a byte.
                index: index as u8,
                count: count as u8,
            });
            self.next_seq += 1;
        }
    }

    /// The frame's size in bytes: its spatial layer's bytes per temporal-unit cycle, shared
    /// by temporal weight, a keyframe several times more, with jitter.
    fn frame_bytes(&mut self, frame: &GeneratedPacket) -> usize {
        let spatial = usize::from(frame.spatial_id()).min(LAYER_BPS.len() - 1);
        let temporal = usize::from(frame.temporal_id()).min(TEMPORAL_WEIGHT.len() - 1);
        // Bytes one four-unit cycle of this layer carries.
        let cycle_bytes = LAYER_BPS[spatial] / 8 * 4 / FRAME_RATE;
        let mut bytes = cycle_bytes * TEMPORAL_WEIGHT[temporal] / CYCLE_WEIGHT;
        if frame.keyframe {
            bytes = cycle_bytes * TEMPORAL_WEIGHT[0] / CYCLE_WEIGHT * KEYFRAME_FACTOR;
        }
        let jitter = 100 - JITTER_PERCENT + self.rng.below(2 * JITTER_PERCENT + 1);
        let bytes = (bytes * jitter / 100) as usize;
        bytes.max(TAG_LEN + 3)
    }
}

/// One packet's payload: the aggregation header, the OBU header on the first packet, filler
/// up to `chunk` bytes (the tag's room included).
fn av1_payload(frame: &GeneratedPacket, index: usize, count: usize, chunk: usize) -> Vec<u8> {
    let first = index == 0;
    let mut header = AGG_W1;
    if !first {
        header |= AGG_Z;
    }
    if index + 1 < count {
        header |= AGG_Y;
    }
    if first && frame.keyframe && frame.spatial_id() == 0 {
        header |= AGG_N;
    }
    let mut payload = Vec::with_capacity(chunk.max(TAG_LEN + 3));
    payload.push(header);
    if first {
        let extension = (frame.temporal_id() << 5) | (frame.spatial_id() << 3);
        payload.extend_from_slice(&[OBU_FRAME_WITH_EXTENSION, extension]);
    }
    let len = chunk.max(payload.len() + TAG_LEN);
    payload.resize(len, FILLER);
    payload
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtp_ext::codec::{parse_payload, Codec, PayloadDescriptor};

    #[test]
    fn the_stream_runs_near_its_rate_with_a_keyframe_first() {
        let mut source = Source::new(7);
        let first = source.next_temporal_unit();
        assert!(first.keyframe);
        let units: Vec<_> = (0..FRAME_RATE * 4)
            .map(|_| source.next_temporal_unit())
            .collect();
        assert!(
            units.iter().all(|u| !u.keyframe),
            "keyframes on request only"
        );
        let bits: usize = units.iter().map(TemporalUnit::bytes).sum::<usize>() * 8 / 4;
        let target: u64 = LAYER_BPS.iter().sum();
        let ratio = bits as f64 / target as f64;
        assert!((0.9..1.1).contains(&ratio), "{bits} bit/s for {target}");
        source.request_keyframe();
        assert!(source.next_temporal_unit().keyframe);
    }

    #[test]
    fn packets_number_on_and_mark_each_temporal_unit_end() {
        let mut source = Source::new(1);
        let mut seq = 0;
        for _ in 0..20 {
            let unit = source.next_temporal_unit();
            for (i, p) in unit.packets.iter().enumerate() {
                assert_eq!(p.seq, seq + 1);
                seq = p.seq;
                assert_eq!(p.marker, i + 1 == unit.packets.len());
                assert!(p.payload.len() <= MAX_PAYLOAD + TAG_LEN);
            }
        }
    }

    #[test]
    fn payloads_parse_as_av1_with_their_layer_and_dds_as_the_frame() {
        let mut source = Source::new(3);
        let unit = source.next_temporal_unit();
        let mut structure = None;
        for p in &unit.packets {
            let dd = DependencyDescriptor::parse(&p.dd, structure.as_ref()).expect("a DD");
            if let Some(s) = &dd.attached_structure {
                structure = Some(Arc::clone(s));
            }
            assert_eq!(dd.start_of_frame, p.index == 0);
            assert_eq!(dd.end_of_frame, p.index + 1 == p.count);
            let Ok(PayloadDescriptor::Av1(av1)) = parse_payload(Codec::Av1, &p.payload) else {
                panic!("AV1 payload");
            };
            assert_eq!(av1.first_is_continuation, p.index > 0);
            assert_eq!(av1.last_continues, p.index + 1 < p.count);
            if p.index == 0 {
                let ext = av1.first_obu.and_then(|o| o.extension).expect("extension");
                assert_eq!(ext.spatial_id.0, dd.spatial_id());
                assert_eq!(ext.temporal_id.0, dd.temporal_id());
            }
        }
        assert!(structure.is_some(), "the keyframe attaches its structure");
    }
}
