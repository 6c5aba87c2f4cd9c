//! Writes a Dependency Descriptor. One [`DependencyDescriptorWriter`] is kept per subscriber and
//! reused for every packet: it validates each new structure once and caches its encoded size, so
//! a delta-frame write is a template match plus a few bit writes, with no allocation.

use std::sync::Arc;

use bytes::Bytes;

use super::descriptor::{DependencyDescriptor, MANDATORY_SIZE};
use super::error::WriteError;
use super::structure::{
    mask_of, next_layer_idc, FrameDependencyStructure, FrameDependencyTemplate, MAX_CHAIN_DIFF,
    MAX_FRAME_DIFF, MAX_SPATIAL_LAYERS, MAX_TEMPLATES, MAX_TEMPORAL_LAYERS,
};
use crate::bits::{ns_size, BitWriter, BufferFull};

/// Bits of the mandatory fields, and of the five flags that open the extended fields.
const MANDATORY_BITS: usize = MANDATORY_SIZE * 8;
const EXTENDED_FLAG_BITS: usize = 5;

impl From<BufferFull> for WriteError {
    fn from(_: BufferFull) -> Self {
        WriteError::BufferTooSmall
    }
}

/// Reusable DD writer. Call [`prepare`](Self::prepare) once per packet, read the length, then
/// write into a buffer (no allocation) or into a new `Bytes` (one allocation).
#[derive(Debug, Default)]
pub struct DependencyDescriptorWriter {
    /// The structure last checked with `validate()`, kept so that delta frames skip the check.
    validated: Option<Arc<FrameDependencyStructure>>,
    /// Encoded size of `validated`, in bits.
    structure_bits: usize,
    /// Per spatial and temporal id, the range of `validated`'s templates of that layer. A valid
    /// structure lists each layer's templates together, so a delta frame looks at only these.
    layer_templates: [[(u8, u8); MAX_TEMPORAL_LAYERS]; MAX_SPATIAL_LAYERS],
}

/// A descriptor matched to its best template, ready to write. Its length is known before any
/// byte is written.
#[derive(Debug, Clone, Copy)]
pub struct PreparedDescriptor<'a> {
    descriptor: &'a DependencyDescriptor,
    structure: &'a FrameDependencyStructure,
    matched: TemplateMatch,
    active_chains: u32,
    /// Encoded structure size in bits, when the descriptor attaches it.
    structure_bits: Option<usize>,
    /// The active decode targets bitmask to write, if any.
    active_decode_targets: Option<u32>,
    size_bits: usize,
}

/// How well one template describes the frame, and what the frame must add as custom fields.
#[derive(Debug, Clone, Copy, Default)]
struct TemplateMatch {
    index: usize,
    custom_dtis: bool,
    custom_fdiffs: bool,
    custom_chains: bool,
    extra_bits: usize,
}

impl DependencyDescriptorWriter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Matches `descriptor` against `structure` (or the structure it attaches, which wins) and
    /// sizes the output. `active_chains` has bit `i` set when chain `i` protects a decode target
    /// the receiver gets (see [`FrameDependencyStructure::active_chains`]): chain diffs of other
    /// chains are not worth custom bits and are written as 0 when custom chains are needed.
    pub fn prepare<'a>(
        &mut self,
        descriptor: &'a DependencyDescriptor,
        structure: Option<&'a Arc<FrameDependencyStructure>>,
        active_chains: u32,
    ) -> Result<PreparedDescriptor<'a>, WriteError> {
        let mask = descriptor.active_decode_targets;
        self.prepare_with_mask(descriptor, structure, active_chains, mask)
    }

    /// As [`prepare`](Self::prepare), with `active_decode_targets` in place of the
    /// descriptor's own bitmask: a forwarder tells each subscriber its own active targets
    /// without copying the descriptor per packet.
    pub fn prepare_with_mask<'a>(
        &mut self,
        descriptor: &'a DependencyDescriptor,
        structure: Option<&'a Arc<FrameDependencyStructure>>,
        active_chains: u32,
        active_decode_targets: Option<u32>,
    ) -> Result<PreparedDescriptor<'a>, WriteError> {
        let structure = descriptor
            .attached_structure
            .as_ref()
            .or(structure)
            .ok_or(WriteError::MissingStructure)?;
        let structure_bits = self.validated_structure_bits(structure)?;
        let active_chains = active_chains & mask_of(structure.chain_count);
        check_frame(descriptor, structure, active_chains, active_decode_targets)?;
        let frame = &descriptor.frame_dependencies;
        let layer = self
            .layer_templates
            .get(usize::from(frame.spatial_id))
            .and_then(|temporal| temporal.get(usize::from(frame.temporal_id)));
        let &(first, end) = layer.ok_or(WriteError::NoTemplateForLayer)?;
        let candidates = usize::from(first)..usize::from(end);
        let matched = best_template(structure, candidates, frame, active_chains)?;
        let attaches = descriptor.attached_structure.is_some();
        let active_decode_targets = active_decode_targets
            .filter(|&mask| !(attaches && mask == structure.all_decode_targets()));
        let write_active_decode_targets = active_decode_targets.is_some();
        let extended = matched.extra_bits > 0 || attaches || write_active_decode_targets;
        let mut size_bits = MANDATORY_BITS + matched.extra_bits;
        if extended {
            size_bits += EXTENDED_FLAG_BITS;
        }
        if attaches {
            size_bits += structure_bits;
        }
        if write_active_decode_targets {
            size_bits += usize::from(structure.decode_target_count);
        }
        Ok(PreparedDescriptor {
            descriptor,
            structure,
            matched,
            active_chains,
            structure_bits: attaches.then_some(structure_bits),
            active_decode_targets,
            size_bits,
        })
    }

    /// Prepares and writes into `buf`, returning the bytes written. Never allocates.
    pub fn write_into(
        &mut self,
        descriptor: &DependencyDescriptor,
        structure: Option<&Arc<FrameDependencyStructure>>,
        active_chains: u32,
        buf: &mut [u8],
    ) -> Result<usize, WriteError> {
        self.prepare(descriptor, structure, active_chains)?
            .write_into(buf)
    }

    /// Prepares and writes into a new `Bytes`: exactly one allocation.
    pub fn write_bytes(
        &mut self,
        descriptor: &DependencyDescriptor,
        structure: Option<&Arc<FrameDependencyStructure>>,
        active_chains: u32,
    ) -> Result<Bytes, WriteError> {
        Ok(self
            .prepare(descriptor, structure, active_chains)?
            .to_bytes())
    }

    fn validated_structure_bits(
        &mut self,
        structure: &Arc<FrameDependencyStructure>,
    ) -> Result<usize, WriteError> {
        let known = self
            .validated
            .as_ref()
            .is_some_and(|v| Arc::ptr_eq(v, structure));
        if !known {
            structure.validate().map_err(WriteError::InvalidStructure)?;
            self.structure_bits = structure_size_bits(structure);
            self.layer_templates = layer_template_ranges(structure);
            self.validated = Some(Arc::clone(structure));
        }
        Ok(self.structure_bits)
    }
}

impl PreparedDescriptor<'_> {
    /// Encoded length in bytes, zero padding included.
    pub fn len(&self) -> usize {
        self.size_bits.div_ceil(8)
    }

    /// Never true: the mandatory fields take three bytes.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The template the frame is written against.
    pub fn template_id(&self) -> u8 {
        let id =
            (self.matched.index + usize::from(self.structure.template_id_offset)) % MAX_TEMPLATES;
        // Below 64.
        id as u8
    }

    /// Writes into the front of `buf` and returns the length; the rest of `buf` is untouched.
    pub fn write_into(&self, buf: &mut [u8]) -> Result<usize, WriteError> {
        let out = buf
            .get_mut(..self.len())
            .ok_or(WriteError::BufferTooSmall)?;
        let mut w = BitWriter::new(out);
        self.write_mandatory(&mut w)?;
        if self.size_bits > MANDATORY_BITS {
            self.write_extended(&mut w)?;
            self.write_custom_fields(&mut w)?;
        }
        debug_assert_eq!(w.position(), self.size_bits, "size computed by prepare()");
        Ok(w.finish()?)
    }

    /// Writes into a new `Bytes` of exactly [`len`](Self::len) bytes: one allocation.
    pub fn to_bytes(&self) -> Bytes {
        let mut out = vec![0; self.len()];
        // Cannot fail: `out` has exactly the length `write_into` needs.
        let written = self.write_into(&mut out).expect("buffer sized by len()");
        debug_assert_eq!(written, out.len());
        Bytes::from(out)
    }

    /// All 24 mandatory bits in one write.
    fn write_mandatory(&self, w: &mut BitWriter<'_>) -> Result<(), BufferFull> {
        let d = self.descriptor;
        let bits = u32::from(d.start_of_frame) << 23
            | u32::from(d.end_of_frame) << 22
            | u32::from(self.template_id()) << 16
            | u32::from(d.frame_number);
        w.write(bits, 24)
    }

    fn write_extended(&self, w: &mut BitWriter<'_>) -> Result<(), BufferFull> {
        let flags = [
            self.structure_bits.is_some(),
            self.active_decode_targets.is_some(),
            self.matched.custom_dtis,
            self.matched.custom_fdiffs,
            self.matched.custom_chains,
        ];
        let flags = flags.iter().fold(0, |acc, &f| acc << 1 | u32::from(f));
        w.write(flags, EXTENDED_FLAG_BITS as u32)?;
        if self.structure_bits.is_some() {
            write_structure(w, self.structure)?;
        }
        if let Some(mask) = self.active_decode_targets {
            w.write(mask, u32::from(self.structure.decode_target_count))?;
        }
        Ok(())
    }

    fn write_custom_fields(&self, w: &mut BitWriter<'_>) -> Result<(), BufferFull> {
        let frame = &self.descriptor.frame_dependencies;
        if self.matched.custom_dtis {
            for dti in frame.dtis.iter() {
                w.write(dti as u32, 2)?;
            }
        }
        if self.matched.custom_fdiffs {
            for &diff in frame.frame_diffs.iter() {
                let code = frame_diff_size_code(diff);
                w.write(code, 2)?;
                w.write(u32::from(diff - 1), 4 * code)?;
            }
            w.write(0, 2)?;
        }
        if self.matched.custom_chains {
            for (chain, &diff) in frame.chain_diffs.iter().enumerate() {
                let active = self.active_chains & (1 << chain) != 0;
                w.write(if active { u32::from(diff) } else { 0 }, 8)?;
            }
        }
        Ok(())
    }
}

/// Rejects frames the structure cannot describe, before any template is matched.
fn check_frame(
    descriptor: &DependencyDescriptor,
    structure: &FrameDependencyStructure,
    active_chains: u32,
    active_decode_targets: Option<u32>,
) -> Result<(), WriteError> {
    let frame = &descriptor.frame_dependencies;
    if frame.dtis.len() != usize::from(structure.decode_target_count) {
        return Err(WriteError::DtiCount);
    }
    if frame.chain_diffs.len() != usize::from(structure.chain_count) {
        return Err(WriteError::ChainDiffCount);
    }
    if frame
        .frame_diffs
        .iter()
        .any(|&d| d == 0 || d > MAX_FRAME_DIFF)
    {
        return Err(WriteError::InvalidFrameDiff);
    }
    let bad_chain =
        |(chain, &diff): (usize, &u16)| active_chains & (1 << chain) != 0 && diff > MAX_CHAIN_DIFF;
    if frame.chain_diffs.iter().enumerate().any(bad_chain) {
        return Err(WriteError::InvalidChainDiff);
    }
    if active_decode_targets.is_some_and(|m| m & !structure.all_decode_targets() != 0) {
        return Err(WriteError::ActiveDecodeTargets);
    }
    Ok(())
}

/// Where each layer's templates sit in a validated structure: `(first, end)` indexes, empty for
/// a layer without templates.
fn layer_template_ranges(
    structure: &FrameDependencyStructure,
) -> [[(u8, u8); MAX_TEMPORAL_LAYERS]; MAX_SPATIAL_LAYERS] {
    let mut ranges = [[(0, 0); MAX_TEMPORAL_LAYERS]; MAX_SPATIAL_LAYERS];
    for (index, t) in structure.templates.iter().enumerate() {
        // Validated: layer ids are in range and at most 64 templates.
        let range = &mut ranges[usize::from(t.spatial_id)][usize::from(t.temporal_id)];
        if range.0 == range.1 {
            range.0 = index as u8;
        }
        range.1 = index as u8 + 1;
    }
    ranges
}

/// The template among `candidates` (the frame's own layer) that needs the fewest custom bits;
/// the first such on a tie, as the structure lists them.
fn best_template(
    structure: &FrameDependencyStructure,
    candidates: std::ops::Range<usize>,
    frame: &FrameDependencyTemplate,
    active_chains: u32,
) -> Result<TemplateMatch, WriteError> {
    let mut best: Option<TemplateMatch> = None;
    for index in candidates {
        // In range: the candidates come from this validated structure's layer ranges.
        let template = &structure.templates[index];
        let candidate = match_template(structure, index, template, frame, active_chains);
        if best.is_none_or(|b| candidate.extra_bits < b.extra_bits) {
            best = Some(candidate);
            if candidate.extra_bits == 0 {
                break;
            }
        }
    }
    best.ok_or(WriteError::NoTemplateForLayer)
}

fn match_template(
    structure: &FrameDependencyStructure,
    index: usize,
    template: &FrameDependencyTemplate,
    frame: &FrameDependencyTemplate,
    active_chains: u32,
) -> TemplateMatch {
    let custom_dtis = template.dtis != frame.dtis;
    let custom_fdiffs = template.frame_diffs != frame.frame_diffs;
    // Whole-list equality first: the common case, and cheaper than the per-chain walk.
    let custom_chains = template.chain_diffs != frame.chain_diffs
        && template
            .chain_diffs
            .iter()
            .zip(frame.chain_diffs.iter())
            .enumerate()
            .any(|(chain, (t, f))| active_chains & (1 << chain) != 0 && t != f);
    let mut extra_bits = 0;
    if custom_dtis {
        extra_bits += 2 * usize::from(structure.decode_target_count);
    }
    if custom_fdiffs {
        let values: usize = frame
            .frame_diffs
            .iter()
            .map(|&d| 2 + 4 * frame_diff_size_code(d) as usize)
            .sum();
        extra_bits += values + 2;
    }
    if custom_chains {
        extra_bits += 8 * usize::from(structure.chain_count);
    }
    TemplateMatch {
        index,
        custom_dtis,
        custom_fdiffs,
        custom_chains,
        extra_bits,
    }
}

/// 1, 2 or 3: the number of nibbles a custom frame diff (minus one) needs.
fn frame_diff_size_code(diff: u16) -> u32 {
    match diff - 1 {
        0..=0xF => 1,
        0x10..=0xFF => 2,
        _ => 3,
    }
}

/// Encoded size of `template_dependency_structure()` in bits.
fn structure_size_bits(s: &FrameDependencyStructure) -> usize {
    let templates = s.templates.len();
    let dt_count = usize::from(s.decode_target_count);
    let chain_count = u32::from(s.chain_count);
    let mut bits = 6 + 5;
    bits += 2 * templates; // next_layer_idc
    bits += 2 * dt_count * templates; // DTIs
    bits += s
        .templates
        .iter()
        .map(|t| 5 * t.frame_diffs.len() + 1)
        .sum::<usize>();
    bits += ns_size(chain_count, dt_count as u32 + 1) as usize;
    if chain_count > 0 {
        bits += s
            .decode_target_protected_by
            .iter()
            .map(|&c| ns_size(u32::from(c), chain_count) as usize)
            .sum::<usize>();
        bits += 4 * templates * chain_count as usize;
    }
    bits + 1 + 32 * s.resolutions.len()
}

/// `template_dependency_structure()`; the structure was validated by the writer.
fn write_structure(w: &mut BitWriter<'_>, s: &FrameDependencyStructure) -> Result<(), BufferFull> {
    w.write(u32::from(s.template_id_offset), 6)?;
    w.write(u32::from(s.decode_target_count) - 1, 5)?;
    for (i, template) in s.templates.iter().enumerate() {
        // Validated: every consecutive pair has a next_layer_idc; 3 ends the list.
        let idc = s
            .templates
            .get(i + 1)
            .and_then(|next| next_layer_idc(template, next));
        w.write(idc.unwrap_or(3), 2)?;
    }
    for template in &s.templates {
        for dti in template.dtis.iter() {
            w.write(dti as u32, 2)?;
        }
    }
    for template in &s.templates {
        for &diff in template.frame_diffs.iter() {
            w.write_bit(true)?;
            w.write(u32::from(diff) - 1, 4)?;
        }
        w.write_bit(false)?;
    }
    write_chains(w, s)?;
    w.write_bit(!s.resolutions.is_empty())?;
    for r in s.resolutions.iter() {
        w.write(r.width - 1, 16)?;
        w.write(r.height - 1, 16)?;
    }
    Ok(())
}

fn write_chains(w: &mut BitWriter<'_>, s: &FrameDependencyStructure) -> Result<(), BufferFull> {
    let chain_count = u32::from(s.chain_count);
    w.write_ns(chain_count, u32::from(s.decode_target_count) + 1)?;
    if chain_count == 0 {
        return Ok(());
    }
    for &chain in s.decode_target_protected_by.iter() {
        w.write_ns(u32::from(chain), chain_count)?;
    }
    for template in &s.templates {
        for &diff in template.chain_diffs.iter() {
            w.write(u32::from(diff), 4)?;
        }
    }
    Ok(())
}
