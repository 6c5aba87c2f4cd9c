//! The stream generator: replays a mode's pattern temporal unit by temporal unit and splits each
//! frame into RTP packets carrying its Dependency Descriptor.

use std::collections::VecDeque;
use std::ops::RangeInclusive;
use std::sync::Arc;

use rtp_ext::dd::{
    DecodeTargetIndication, DependencyDescriptor, DependencyDescriptorWriter,
    FrameDependencyStructure, FrameDependencyTemplate,
};
use rtp_ext::rtp::{
    write_header, ExtensionElement, ExtensionIds, ExtensionSelection, RtpFields, RtpPacket,
};

use super::encoder::{EncodedFrame, EncoderState, References};
use super::mode::ScalabilityMode;
use super::pattern::Pattern;
use super::rng::SeededRng;
use crate::dd::DdPacket;

/// RTP video clock rate is 90 kHz; at 30 frames per second a temporal unit lasts 3000 ticks.
pub const TIMESTAMP_STEP: u32 = 3000;

/// What the generator produces and where its counters start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratorConfig {
    /// Temporal units from one keyframe to the next; 0: only the first temporal unit is one.
    pub keyframe_interval_tus: u32,
    /// Each frame is split into a number of packets drawn from this range (empty: one packet).
    pub packets_per_frame: RangeInclusive<u8>,
    /// Seeds the packet-count draws; the same seed gives the same stream.
    pub seed: u64,
    pub ssrc: u32,
    pub first_seq: u16,
    pub first_frame_number: u16,
    pub first_timestamp: u32,
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        Self {
            keyframe_interval_tus: 90,
            packets_per_frame: 1..=3,
            seed: 1,
            ssrc: 0x5354_5241,
            first_seq: 0,
            first_frame_number: 0,
            first_timestamp: 0,
        }
    }
}

/// One generated RTP packet: the header fields a forwarder reads, the Dependency Descriptor, and
/// the ground truth tests check a forwarder against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedPacket {
    pub ssrc: u32,
    pub sequence_number: u16,
    pub timestamp: u32,
    /// Set on the last packet of the temporal unit.
    pub marker: bool,
    /// Index of the temporal unit since the stream started.
    pub temporal_unit: u64,
    /// The frame number without wrap; the descriptor carries its low 16 bits.
    pub frame_number: u64,
    /// Part of a keyframe temporal unit. The first packet of one carries the structure.
    pub keyframe: bool,
    pub descriptor: DependencyDescriptor,
    /// Frame numbers (without wrap) of the frames this frame references.
    pub references: References,
}

impl GeneratedPacket {
    pub fn spatial_id(&self) -> u8 {
        self.descriptor.spatial_id()
    }

    pub fn temporal_id(&self) -> u8 {
        self.descriptor.temporal_id()
    }

    pub fn start_of_frame(&self) -> bool {
        self.descriptor.start_of_frame
    }

    pub fn end_of_frame(&self) -> bool {
        self.descriptor.end_of_frame
    }

    /// Whether the frame is part of decode target `dt` (its indication is not "not present").
    pub fn belongs_to(&self, dt: usize) -> bool {
        self.descriptor.frame_dependencies.dtis.get(dt) != DecodeTargetIndication::NotPresent
    }

    /// The packet on the wire: an RTP header (payload type 45) with the DD as extension
    /// `dd_ext_id`, then a payload of the frame number (8 bytes, big endian) and 100 filler
    /// bytes, so a receiver can tell which frame it got.
    pub fn rtp_bytes(&self, dd_ext_id: u8, structure: &Arc<FrameDependencyStructure>) -> Vec<u8> {
        let dd = DependencyDescriptorWriter::new()
            .write_bytes(&self.descriptor, Some(structure), u32::MAX)
            .expect("generated descriptors fit their structure");
        let bare = [0x80u8, 45, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let source = RtpPacket::parse(&bare).expect("a bare fixed header parses");
        let fields = RtpFields {
            marker: self.marker,
            payload_type: 45,
            sequence_number: self.sequence_number,
            timestamp: self.timestamp,
            ssrc: self.ssrc,
        };
        let added = [ExtensionElement {
            id: dd_ext_id,
            data: &dd,
        }];
        let selection = ExtensionSelection {
            keep: ExtensionIds::NONE,
            added: &added,
            two_byte_allowed: true,
        };
        let mut out = vec![0u8; 1500];
        let len = write_header(&source, &fields, &selection, &mut out)
            .expect("a header with one DD fits 1500 bytes");
        out.truncate(len);
        out.extend_from_slice(&self.frame_number.to_be_bytes());
        out.extend_from_slice(&[0xAB; 100]);
        out
    }

    /// The packet as DD selection sees it, with the structure its descriptor refers to.
    pub fn dd_packet<'a>(&'a self, structure: &'a Arc<FrameDependencyStructure>) -> DdPacket<'a> {
        DdPacket {
            sequence_number: self.sequence_number,
            marker: self.marker,
            descriptor: &self.descriptor,
            structure,
        }
    }
}

/// A deterministic, endless stream of packets of one scalability mode. Iterate it for packets;
/// layer and keyframe changes apply from the next temporal unit not yet started.
#[derive(Debug)]
pub struct StreamGenerator {
    mode: ScalabilityMode,
    pattern: &'static Pattern,
    config: GeneratorConfig,
    structure: Arc<FrameDependencyStructure>,
    rng: SeededRng,
    encoder: EncoderState,
    next_sequence_number: u16,
    next_temporal_unit: u64,
    /// Temporal units since the last keyframe started.
    since_keyframe: u64,
    active_spatial_layers: u8,
    keyframe_requested: bool,
    pending: VecDeque<GeneratedPacket>,
}

impl StreamGenerator {
    pub fn new(mode: ScalabilityMode, config: GeneratorConfig) -> Self {
        Self {
            mode,
            pattern: mode.pattern(),
            structure: Arc::new(mode.template_structure()),
            rng: SeededRng(config.seed),
            encoder: EncoderState::new(u64::from(config.first_frame_number)),
            next_sequence_number: config.first_seq,
            next_temporal_unit: 0,
            since_keyframe: 0,
            active_spatial_layers: mode.spatial_layers(),
            keyframe_requested: true,
            pending: VecDeque::new(),
            config,
        }
    }

    pub fn mode(&self) -> ScalabilityMode {
        self.mode
    }

    /// The structure every keyframe carries.
    pub fn structure(&self) -> &Arc<FrameDependencyStructure> {
        &self.structure
    }

    /// Produces only the lowest `layers` spatial layers (clamped to 1..=the mode's layers) and
    /// announces the shrunk active decode targets on every packet. Adding layers back starts with
    /// a keyframe: the returning layer's reference buffers are stale.
    pub fn set_active_spatial_layers(&mut self, layers: u8) {
        let layers = layers.clamp(1, self.mode.spatial_layers());
        self.keyframe_requested |= layers > self.active_spatial_layers;
        self.active_spatial_layers = layers;
    }

    /// Makes the next temporal unit a keyframe, as a keyframe request from a receiver would.
    pub fn request_keyframe(&mut self) {
        self.keyframe_requested = true;
    }

    /// Bit `d` set when decode target `d` is produced: those of the active spatial layers.
    pub fn active_decode_targets(&self) -> u32 {
        let active = self.active_spatial_layers * self.pattern.temporal_layers;
        (1u32 << active) - 1
    }

    fn generate_temporal_unit(&mut self) {
        let interval = u64::from(self.config.keyframe_interval_tus);
        let keyframe = self.keyframe_requested || (interval > 0 && self.since_keyframe >= interval);
        if keyframe {
            self.keyframe_requested = false;
            self.since_keyframe = 0;
            self.encoder.start_keyframe();
        }
        let active_decode_targets = self.active_decode_targets();
        let active_chains = self.structure.active_chains(active_decode_targets);
        let layers = self.active_spatial_layers;
        let specs = self.pattern.temporal_unit(self.since_keyframe);
        for spec in specs.iter().filter(|spec| spec.spatial_id < layers) {
            let frame = self.encoder.encode(spec, self.pattern, active_chains);
            let attach_structure = keyframe && self.pending.is_empty();
            self.packetize(&frame, keyframe, attach_structure, active_decode_targets);
        }
        if let Some(last) = self.pending.back_mut() {
            last.marker = true;
        }
        self.since_keyframe += 1;
        self.next_temporal_unit += 1;
    }

    fn packetize(
        &mut self,
        frame: &EncodedFrame,
        keyframe: bool,
        attach_structure: bool,
        active_decode_targets: u32,
    ) {
        let count = in_range(&mut self.rng, &self.config.packets_per_frame);
        // The mask is sent on every packet while some decode targets are off; a structure
        // implies all are active, so the packet carrying one states the mask whatever it is.
        let some_off = active_decode_targets != self.structure.all_decode_targets();
        let timestamp = self
            .config
            .first_timestamp
            .wrapping_add(TIMESTAMP_STEP.wrapping_mul(self.next_temporal_unit as u32));
        for index in 0..count {
            let carries_structure = attach_structure && index == 0;
            let descriptor = DependencyDescriptor {
                start_of_frame: index == 0,
                end_of_frame: index + 1 == count,
                template_id: self.template_id(&frame.dependencies),
                // The wire carries the low 16 bits.
                frame_number: frame.frame_number as u16,
                frame_dependencies: frame.dependencies,
                active_decode_targets: (carries_structure || some_off)
                    .then_some(active_decode_targets),
                attached_structure: carries_structure.then(|| Arc::clone(&self.structure)),
            };
            self.pending.push_back(GeneratedPacket {
                ssrc: self.config.ssrc,
                sequence_number: self.next_sequence_number,
                timestamp,
                marker: false,
                temporal_unit: self.next_temporal_unit,
                frame_number: frame.frame_number,
                keyframe,
                descriptor,
                references: frame.references,
            });
            self.next_sequence_number = self.next_sequence_number.wrapping_add(1);
        }
    }

    /// The wire id of the template the frame matches exactly, else of the first template of its
    /// layer (the frame then needs custom fields). Writers pick their own; this is what a parse
    /// of the written bytes gives back.
    fn template_id(&self, frame: &FrameDependencyTemplate) -> u8 {
        let templates = &self.structure.templates;
        let index = templates
            .iter()
            .position(|t| t == frame)
            .or_else(|| {
                templates.iter().position(|t| {
                    (t.spatial_id, t.temporal_id) == (frame.spatial_id, frame.temporal_id)
                })
            })
            .unwrap_or(0);
        // Below 64: the structure has at most 64 templates and an offset below 64.
        ((index + usize::from(self.structure.template_id_offset)) % 64) as u8
    }
}

impl Iterator for StreamGenerator {
    type Item = GeneratedPacket;

    /// Never `None`: the stream is endless.
    fn next(&mut self) -> Option<GeneratedPacket> {
        if self.pending.is_empty() {
            self.generate_temporal_unit();
        }
        self.pending.pop_front()
    }
}

/// A value of `range` drawn from `rng`, or its start (at least 1) when the range is empty.
fn in_range(rng: &mut SeededRng, range: &RangeInclusive<u8>) -> u8 {
    let low = (*range.start()).max(1);
    let high = (*range.end()).max(low);
    let span = u64::from(high - low) + 1;
    // Below `span`, which fits in u8 with `low` added: high <= u8::MAX.
    low + rng.below(span) as u8
}
