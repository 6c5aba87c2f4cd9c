//! Reads a Dependency Descriptor (AV1 RTP spec A.8). Bounds checked throughout: hostile input
//! gives a [`ReadError`], never a panic. Delta descriptors parse without allocating; a keyframe's
//! structure costs two allocations (its template list and the `Arc`).

use std::sync::Arc;

use super::descriptor::{DependencyDescriptor, MandatoryFields, MANDATORY_SIZE};
use super::error::ReadError;
use super::indication::{DecodeTargetIndication, DecodeTargetIndications};
use super::structure::{
    FrameDependencyStructure, FrameDependencyTemplate, FrameDiffs, RenderResolution,
    MAX_SPATIAL_LAYERS, MAX_TEMPLATES, MAX_TEMPORAL_LAYERS,
};
use crate::bits::{BitReader, BitsExhausted};

impl From<BitsExhausted> for ReadError {
    fn from(_: BitsExhausted) -> Self {
        ReadError::Truncated
    }
}

impl MandatoryFields {
    /// Reads the first three bytes; needs no structure.
    pub fn parse(data: &[u8]) -> Result<Self, ReadError> {
        Self::read(&mut BitReader::new(data))
    }

    fn read(r: &mut BitReader<'_>) -> Result<Self, ReadError> {
        Ok(Self {
            start_of_frame: r.read_bit()?,
            end_of_frame: r.read_bit()?,
            template_id: r.read(6)? as u8,
            frame_number: r.read(16)? as u16,
        })
    }
}

/// The five flags that open the extended part.
#[derive(Debug, Default)]
struct ExtendedFlags {
    structure_present: bool,
    active_decode_targets_present: bool,
    custom_dtis: bool,
    custom_fdiffs: bool,
    custom_chains: bool,
}

impl ExtendedFlags {
    fn read(r: &mut BitReader<'_>) -> Result<Self, ReadError> {
        Ok(Self {
            structure_present: r.read_bit()?,
            active_decode_targets_present: r.read_bit()?,
            custom_dtis: r.read_bit()?,
            custom_fdiffs: r.read_bit()?,
            custom_chains: r.read_bit()?,
        })
    }
}

impl DependencyDescriptor {
    /// Parses a whole descriptor. `known` is the structure from an earlier keyframe; a structure
    /// the descriptor attaches takes precedence. Without either, only [`MandatoryFields::parse`]
    /// can succeed and this returns [`ReadError::MissingStructure`]. Trailing zero padding is
    /// ignored, whatever its value.
    pub fn parse(
        data: &[u8],
        known: Option<&Arc<FrameDependencyStructure>>,
    ) -> Result<Self, ReadError> {
        let mut r = BitReader::new(data);
        let mandatory = MandatoryFields::read(&mut r)?;
        let flags = if data.len() > MANDATORY_SIZE {
            ExtendedFlags::read(&mut r)?
        } else {
            ExtendedFlags::default()
        };
        let attached = match flags.structure_present {
            true => Some(Arc::new(read_structure(&mut r)?)),
            false => None,
        };
        let structure = attached
            .as_ref()
            .or(known)
            .ok_or(ReadError::MissingStructure)?;
        let active_decode_targets = if flags.active_decode_targets_present {
            Some(r.read(u32::from(structure.decode_target_count))?)
        } else {
            attached.as_ref().map(|s| s.all_decode_targets())
        };
        let index = structure
            .template_index(mandatory.template_id)
            .ok_or(ReadError::UnknownTemplate)?;
        let frame_dependencies = read_frame_dependencies(&mut r, &flags, structure, index)?;
        Ok(Self {
            start_of_frame: mandatory.start_of_frame,
            end_of_frame: mandatory.end_of_frame,
            template_id: mandatory.template_id,
            frame_number: mandatory.frame_number,
            frame_dependencies,
            active_decode_targets,
            attached_structure: attached,
        })
    }
}

/// `frame_dependency_definition()`: the template's values, overridden by custom fields.
fn read_frame_dependencies(
    r: &mut BitReader<'_>,
    flags: &ExtendedFlags,
    structure: &FrameDependencyStructure,
    index: usize,
) -> Result<FrameDependencyTemplate, ReadError> {
    // `index` comes from `template_index`, which checked it against the template count.
    let mut frame = structure.templates[index];
    if flags.custom_dtis {
        frame.dtis = read_dtis(r, structure.decode_target_count)?;
    }
    if flags.custom_fdiffs {
        frame.frame_diffs = read_custom_frame_diffs(r)?;
    }
    if flags.custom_chains {
        for diff in frame.chain_diffs.as_mut_slice() {
            *diff = r.read(8)? as u16;
        }
    }
    Ok(frame)
}

fn read_dtis(r: &mut BitReader<'_>, count: u8) -> Result<DecodeTargetIndications, ReadError> {
    let mut dtis = DecodeTargetIndications::new(usize::from(count));
    for dt in 0..usize::from(count) {
        dtis.set(dt, DecodeTargetIndication::from_bits(r.read(2)? as u8));
    }
    Ok(dtis)
}

/// `frame_fdiffs()`: a 2-bit size code (0 ends the list) then a 4, 8 or 12-bit value minus one.
fn read_custom_frame_diffs(r: &mut BitReader<'_>) -> Result<FrameDiffs, ReadError> {
    let mut diffs = FrameDiffs::new();
    loop {
        let size = r.read(2)?;
        if size == 0 {
            return Ok(diffs);
        }
        let diff = r.read(4 * size)? + 1;
        // At most 4096: fits in u16.
        diffs
            .push(diff as u16)
            .map_err(|_| ReadError::TooManyFrameDiffs)?;
    }
}

/// `template_dependency_structure()`.
fn read_structure(r: &mut BitReader<'_>) -> Result<FrameDependencyStructure, ReadError> {
    let template_id_offset = r.read(6)? as u8;
    let decode_target_count = r.read(5)? as u8 + 1;
    let mut templates = read_template_layers(r)?;
    for template in &mut templates {
        template.dtis = read_dtis(r, decode_target_count)?;
    }
    for template in &mut templates {
        template.frame_diffs = read_template_frame_diffs(r)?;
    }
    let chain_count = r.read_ns(u32::from(decode_target_count) + 1)? as u8;
    let mut structure = FrameDependencyStructure {
        template_id_offset,
        decode_target_count,
        chain_count,
        templates,
        ..Default::default()
    };
    if chain_count > 0 {
        read_chains(r, &mut structure)?;
    }
    if r.read_bit()? {
        read_resolutions(r, &mut structure)?;
    }
    Ok(structure)
}

/// `template_layers()`: walks `next_layer_idc` to give each template its layer.
fn read_template_layers(r: &mut BitReader<'_>) -> Result<Vec<FrameDependencyTemplate>, ReadError> {
    let mut layers = [(0u8, 0u8); MAX_TEMPLATES];
    let mut count = 0;
    let (mut spatial_id, mut temporal_id) = (0u8, 0u8);
    loop {
        let slot = layers.get_mut(count).ok_or(ReadError::TooManyTemplates)?;
        *slot = (spatial_id, temporal_id);
        count += 1;
        match r.read(2)? {
            0 => {}
            1 => temporal_id += 1,
            2 => (spatial_id, temporal_id) = (spatial_id + 1, 0),
            _ => break,
        }
        if usize::from(spatial_id) >= MAX_SPATIAL_LAYERS
            || usize::from(temporal_id) >= MAX_TEMPORAL_LAYERS
        {
            return Err(ReadError::InvalidNextLayerIdc);
        }
    }
    let templates = layers[..count]
        .iter()
        .map(|&(spatial_id, temporal_id)| FrameDependencyTemplate {
            spatial_id,
            temporal_id,
            ..Default::default()
        })
        .collect();
    Ok(templates)
}

/// `template_fdiffs()` for one template: a follow flag before each 4-bit diff minus one.
fn read_template_frame_diffs(r: &mut BitReader<'_>) -> Result<FrameDiffs, ReadError> {
    let mut diffs = FrameDiffs::new();
    while r.read_bit()? {
        let diff = r.read(4)? as u16 + 1;
        diffs.push(diff).map_err(|_| ReadError::TooManyFrameDiffs)?;
    }
    Ok(diffs)
}

/// `template_chains()` past `chain_cnt`: which chain protects each decode target, then each
/// template's 4-bit chain diffs.
fn read_chains(
    r: &mut BitReader<'_>,
    structure: &mut FrameDependencyStructure,
) -> Result<(), ReadError> {
    let chain_count = u32::from(structure.chain_count);
    for _ in 0..structure.decode_target_count {
        let chain = r.read_ns(chain_count)? as u8;
        // At most 32 decode targets, the capacity of the list.
        let _ = structure.decode_target_protected_by.push(chain);
    }
    for template in &mut structure.templates {
        for _ in 0..chain_count {
            // chain_count <= decode_target_count <= 32, the capacity of the list.
            let _ = template.chain_diffs.push(r.read(4)? as u16);
        }
    }
    Ok(())
}

/// `render_resolutions()`: one width and height (minus one) per spatial layer.
fn read_resolutions(
    r: &mut BitReader<'_>,
    structure: &mut FrameDependencyStructure,
) -> Result<(), ReadError> {
    for _ in 0..=structure.max_spatial_id() {
        let width = r.read(16)? + 1;
        let height = r.read(16)? + 1;
        // The spatial id is at most 3 (checked by the layer walk): four entries fit.
        let _ = structure
            .resolutions
            .push(RenderResolution { width, height });
    }
    Ok(())
}
