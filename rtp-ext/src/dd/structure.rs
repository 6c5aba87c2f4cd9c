//! The template dependency structure (AV1 RTP spec A.8.2): sent on keyframes, parsed once and
//! shared by `Arc` with every descriptor that refers to it.

use super::indication::{DecodeTargetIndication, DecodeTargetIndications, MAX_DECODE_TARGETS};
use super::inline_vec::InlineVec;

/// Most templates a structure can hold (`frame_dependency_template_id` is 6 bits).
pub const MAX_TEMPLATES: usize = 64;
/// Most chains: one per decode target.
pub const MAX_CHAINS: usize = MAX_DECODE_TARGETS;
/// Spatial ids are 0..=3 and temporal ids 0..=7, as in AV1's operating points.
pub const MAX_SPATIAL_LAYERS: usize = 4;
pub const MAX_TEMPORAL_LAYERS: usize = 8;
/// Most frame diffs kept per frame. The DD syntax has no bound, but no codec references more
/// than 16 frames (H.264's DPB is the largest); a longer list is rejected as malformed.
pub const MAX_FRAME_DIFFS: usize = 16;
/// Largest frame diff a custom field can carry (12 bits, minus one).
pub const MAX_FRAME_DIFF: u16 = 4096;
/// Largest chain diff a custom field can carry (8 bits).
pub const MAX_CHAIN_DIFF: u16 = 255;
/// Largest value a template's own frame diff (4 bits, minus one) or chain diff (4 bits) can take.
pub const MAX_TEMPLATE_FRAME_DIFF: u16 = 16;
pub const MAX_TEMPLATE_CHAIN_DIFF: u16 = 15;

/// Frame number differences to the frames this frame references.
pub type FrameDiffs = InlineVec<u16, MAX_FRAME_DIFFS>;
/// Per chain, the frame number difference to the previous frame of that chain (0: this frame
/// starts the chain).
pub type ChainDiffs = InlineVec<u16, MAX_CHAINS>;

/// The dependency information of one frame: a template in a structure, or the resolved
/// per-frame values of a descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameDependencyTemplate {
    pub spatial_id: u8,
    pub temporal_id: u8,
    pub dtis: DecodeTargetIndications,
    pub frame_diffs: FrameDiffs,
    pub chain_diffs: ChainDiffs,
}

/// Render resolution of one spatial layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RenderResolution {
    pub width: u32,
    pub height: u32,
}

/// The layer (spatial id, temporal id) a decode target decodes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DecodeTargetLayer {
    pub spatial_id: u8,
    pub temporal_id: u8,
}

/// Template dependency structure. Build it by hand or parse it from a DD; a writer checks it
/// with [`FrameDependencyStructure::validate`] before first use.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FrameDependencyStructure {
    pub template_id_offset: u8,
    pub decode_target_count: u8,
    pub chain_count: u8,
    /// For each decode target, the chain that protects it (meaningful when `chain_count > 0`).
    pub decode_target_protected_by: InlineVec<u8, MAX_DECODE_TARGETS>,
    /// Ordered by spatial id, then temporal id, as the wire format lists them.
    pub templates: Vec<FrameDependencyTemplate>,
    /// One per spatial layer, or empty when the structure carries no resolutions.
    pub resolutions: InlineVec<RenderResolution, MAX_SPATIAL_LAYERS>,
}

/// Why a template dependency structure cannot be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StructureError {
    /// Decode target count is 0 or above 32.
    DecodeTargetCount,
    /// More chains than decode targets.
    ChainCount,
    /// `template_id_offset` is not below 64.
    TemplateIdOffset,
    /// No templates, or more than 64.
    TemplateCount,
    /// Templates are not listed layer by layer starting at S0T0, or a layer id is out of range.
    TemplateOrder,
    /// A template's DTI or chain diff count differs from the structure's.
    TemplateShape,
    /// A template frame diff is outside 1..=16 or a template chain diff above 15.
    TemplateDiff,
    /// A decode target is protected by a chain that does not exist.
    ProtectedBy,
    /// Resolutions are present but not one per spatial layer, or a dimension is outside 1..=65536.
    Resolutions,
}

impl FrameDependencyStructure {
    /// The template a wire template id names.
    pub fn template_index(&self, template_id: u8) -> Option<usize> {
        let index = (usize::from(template_id) + MAX_TEMPLATES
            - usize::from(self.template_id_offset))
            % MAX_TEMPLATES;
        (index < self.templates.len()).then_some(index)
    }

    /// Every decode target active.
    pub fn all_decode_targets(&self) -> u32 {
        mask_of(self.decode_target_count)
    }

    pub fn max_spatial_id(&self) -> u8 {
        self.templates
            .iter()
            .map(|t| t.spatial_id)
            .max()
            .unwrap_or(0)
    }

    pub fn max_temporal_id(&self) -> u8 {
        self.templates
            .iter()
            .map(|t| t.temporal_id)
            .max()
            .unwrap_or(0)
    }

    /// The highest spatial and temporal id among the templates that are part of decode target
    /// `dt` (spec A.8.2, `decode_target_layers()`).
    pub fn decode_target_layer(&self, dt: usize) -> DecodeTargetLayer {
        self.templates
            .iter()
            .filter(|t| t.dtis.get(dt) != DecodeTargetIndication::NotPresent)
            .fold(DecodeTargetLayer::default(), |layer, t| DecodeTargetLayer {
                spatial_id: layer.spatial_id.max(t.spatial_id),
                temporal_id: layer.temporal_id.max(t.temporal_id),
            })
    }

    /// Chains that protect at least one decode target of `active_decode_targets`: the chains a
    /// receiver of those targets must keep intact. The writer takes this as its active-chains mask.
    pub fn active_chains(&self, active_decode_targets: u32) -> u32 {
        (0..usize::from(self.decode_target_count))
            .filter(|&dt| active_decode_targets & (1 << dt) != 0)
            .filter_map(|dt| self.decode_target_protected_by.get(dt))
            .filter(|&&chain| chain < self.chain_count)
            .fold(0, |mask, &chain| mask | 1 << chain)
    }

    /// Checks every constraint the wire format puts on a structure.
    pub fn validate(&self) -> Result<(), StructureError> {
        let dt_count = usize::from(self.decode_target_count);
        let chain_count = usize::from(self.chain_count);
        if dt_count == 0 || dt_count > MAX_DECODE_TARGETS {
            return Err(StructureError::DecodeTargetCount);
        }
        if chain_count > dt_count {
            return Err(StructureError::ChainCount);
        }
        if usize::from(self.template_id_offset) >= MAX_TEMPLATES {
            return Err(StructureError::TemplateIdOffset);
        }
        if self.templates.is_empty() || self.templates.len() > MAX_TEMPLATES {
            return Err(StructureError::TemplateCount);
        }
        self.validate_layer_order()?;
        for template in &self.templates {
            validate_template(template, dt_count, chain_count)?;
        }
        if chain_count > 0
            && (self.decode_target_protected_by.len() != dt_count
                || self
                    .decode_target_protected_by
                    .iter()
                    .any(|&c| usize::from(c) >= chain_count))
        {
            return Err(StructureError::ProtectedBy);
        }
        self.validate_resolutions()
    }

    fn validate_layer_order(&self) -> Result<(), StructureError> {
        let first = self
            .templates
            .first()
            .ok_or(StructureError::TemplateCount)?;
        if (first.spatial_id, first.temporal_id) != (0, 0) {
            return Err(StructureError::TemplateOrder);
        }
        for pair in self.templates.windows(2) {
            next_layer_idc(&pair[0], &pair[1]).ok_or(StructureError::TemplateOrder)?;
        }
        Ok(())
    }

    fn validate_resolutions(&self) -> Result<(), StructureError> {
        if self.resolutions.is_empty() {
            return Ok(());
        }
        let dimension_ok = |d: u32| (1..=1 << 16).contains(&d);
        if self.resolutions.len() != usize::from(self.max_spatial_id()) + 1
            || !self
                .resolutions
                .iter()
                .all(|r| dimension_ok(r.width) && dimension_ok(r.height))
        {
            return Err(StructureError::Resolutions);
        }
        Ok(())
    }
}

/// The `next_layer_idc` that leads from one template to the next: 0 same layer, 1 next temporal
/// layer, 2 next spatial layer. `None` when no value can express the step.
pub(crate) fn next_layer_idc(
    from: &FrameDependencyTemplate,
    to: &FrameDependencyTemplate,
) -> Option<u32> {
    let same_spatial = to.spatial_id == from.spatial_id;
    if same_spatial && to.temporal_id == from.temporal_id {
        Some(0)
    } else if same_spatial
        && to.temporal_id == from.temporal_id + 1
        && usize::from(to.temporal_id) < MAX_TEMPORAL_LAYERS
    {
        Some(1)
    } else if to.spatial_id == from.spatial_id + 1
        && to.temporal_id == 0
        && usize::from(to.spatial_id) < MAX_SPATIAL_LAYERS
    {
        Some(2)
    } else {
        None
    }
}

fn validate_template(
    template: &FrameDependencyTemplate,
    dt_count: usize,
    chain_count: usize,
) -> Result<(), StructureError> {
    if template.dtis.len() != dt_count || template.chain_diffs.len() != chain_count {
        return Err(StructureError::TemplateShape);
    }
    let fdiffs_ok = template
        .frame_diffs
        .iter()
        .all(|&d| (1..=MAX_TEMPLATE_FRAME_DIFF).contains(&d));
    let chains_ok = template
        .chain_diffs
        .iter()
        .all(|&d| d <= MAX_TEMPLATE_CHAIN_DIFF);
    if !fdiffs_ok || !chains_ok {
        return Err(StructureError::TemplateDiff);
    }
    Ok(())
}

/// The low `count` bits set.
pub(crate) fn mask_of(count: u8) -> u32 {
    if usize::from(count) >= MAX_DECODE_TARGETS {
        u32::MAX
    } else {
        (1u32 << count) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dd::indication::DecodeTargetIndication::{NotPresent, Switch};

    fn t(spatial_id: u8, temporal_id: u8) -> FrameDependencyTemplate {
        FrameDependencyTemplate {
            spatial_id,
            temporal_id,
            dtis: DecodeTargetIndications::from_slice(&[Switch, NotPresent]),
            frame_diffs: FrameDiffs::new(),
            chain_diffs: ChainDiffs::from_slice(&[0]).expect("one"),
        }
    }

    /// L2T1 with one chain protecting both decode targets.
    fn valid() -> FrameDependencyStructure {
        FrameDependencyStructure {
            template_id_offset: 63,
            decode_target_count: 2,
            chain_count: 1,
            decode_target_protected_by: InlineVec::from_slice(&[0, 0]).expect("two"),
            templates: vec![t(0, 0), t(1, 0)],
            resolutions: InlineVec::from_slice(
                &[RenderResolution {
                    width: 1,
                    height: 65536,
                }; 2],
            )
            .expect("two"),
        }
    }

    fn broken(change: impl FnOnce(&mut FrameDependencyStructure)) -> Result<(), StructureError> {
        let mut s = valid();
        change(&mut s);
        s.validate()
    }

    #[test]
    fn accepts_a_valid_structure() {
        assert_eq!(valid().validate(), Ok(()));
    }

    #[test]
    fn each_rule_has_its_error() {
        use StructureError::*;
        assert_eq!(
            broken(|s| s.decode_target_count = 0),
            Err(DecodeTargetCount)
        );
        assert_eq!(
            broken(|s| s.decode_target_count = 33),
            Err(DecodeTargetCount)
        );
        assert_eq!(broken(|s| s.chain_count = 3), Err(ChainCount));
        assert_eq!(broken(|s| s.template_id_offset = 64), Err(TemplateIdOffset));
        assert_eq!(broken(|s| s.templates.clear()), Err(TemplateCount));
        assert_eq!(
            broken(|s| s.templates = vec![t(0, 0); 65]),
            Err(TemplateCount)
        );
        assert_eq!(broken(|s| s.templates[0] = t(0, 1)), Err(TemplateOrder));
        assert_eq!(broken(|s| s.templates[1] = t(2, 0)), Err(TemplateOrder));
        assert_eq!(broken(|s| s.templates[1] = t(1, 1)), Err(TemplateOrder));
        let too_deep = (0..9).map(|tid| t(0, tid)).collect();
        assert_eq!(broken(|s| s.templates = too_deep), Err(TemplateOrder));
        assert_eq!(
            broken(|s| s.templates[1].dtis = DecodeTargetIndications::new(3)),
            Err(TemplateShape)
        );
        assert_eq!(
            broken(|s| s.templates[1].chain_diffs = ChainDiffs::new()),
            Err(TemplateShape)
        );
        assert_eq!(
            broken(|s| s.templates[1].frame_diffs = FrameDiffs::from_slice(&[17]).expect("one")),
            Err(TemplateDiff)
        );
        assert_eq!(
            broken(|s| s.templates[1].frame_diffs = FrameDiffs::from_slice(&[0]).expect("one")),
            Err(TemplateDiff)
        );
        assert_eq!(
            broken(|s| s.templates[1].chain_diffs.as_mut_slice()[0] = 16),
            Err(TemplateDiff)
        );
        assert_eq!(
            broken(|s| s.decode_target_protected_by.as_mut_slice()[1] = 1),
            Err(ProtectedBy)
        );
        assert_eq!(
            broken(|s| s.decode_target_protected_by = InlineVec::new()),
            Err(ProtectedBy)
        );
        assert_eq!(
            broken(|s| s.resolutions = InlineVec::from_slice(&s.resolutions[..1]).expect("one")),
            Err(Resolutions)
        );
        assert_eq!(
            broken(|s| s.resolutions.as_mut_slice()[0].width = 0),
            Err(Resolutions)
        );
        assert_eq!(
            broken(|s| s.resolutions.as_mut_slice()[0].height = 65537),
            Err(Resolutions)
        );
    }

    #[test]
    fn decode_target_layers_and_active_chains() {
        let mut s = valid();
        s.templates[1].dtis = DecodeTargetIndications::from_slice(&[NotPresent, Switch]);
        s.chain_count = 2;
        s.decode_target_protected_by = InlineVec::from_slice(&[0, 1]).expect("two");
        for t in &mut s.templates {
            t.chain_diffs = ChainDiffs::from_slice(&[0, 0]).expect("two");
        }
        assert_eq!(s.validate(), Ok(()));
        assert_eq!(
            s.decode_target_layer(1),
            DecodeTargetLayer {
                spatial_id: 1,
                temporal_id: 0
            }
        );
        assert_eq!(s.active_chains(0b01), 0b01);
        assert_eq!(s.active_chains(0b10), 0b10);
        assert_eq!(s.active_chains(0b11), 0b11);
        assert_eq!(s.active_chains(0), 0);
        assert_eq!(s.template_index(63), Some(0));
        assert_eq!(s.template_index(0), Some(1));
        assert_eq!(s.template_index(1), None);
    }

    /// Per-packet values stay small and inline: guard their size so a change that bloats the
    /// hot path is a deliberate one.
    #[test]
    fn per_packet_types_stay_small() {
        assert_eq!(size_of::<FrameDependencyTemplate>(), 120);
        assert_eq!(size_of::<crate::dd::DependencyDescriptor>(), 144);
    }
}
