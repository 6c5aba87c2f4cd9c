//! The per-packet Dependency Descriptor (AV1 RTP spec A.8.1): mandatory fields plus the frame's
//! resolved dependency information. Everything but the attached structure lives inline.

use std::sync::Arc;

use super::structure::{FrameDependencyStructure, FrameDependencyTemplate};

/// Size of the mandatory part; a DD of exactly this size has no extended fields.
pub const MANDATORY_SIZE: usize = 3;

/// The three bytes every DD starts with; readable without a template structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MandatoryFields {
    pub start_of_frame: bool,
    pub end_of_frame: bool,
    pub template_id: u8,
    pub frame_number: u16,
}

/// One packet's Dependency Descriptor, resolved against its template structure.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DependencyDescriptor {
    pub start_of_frame: bool,
    pub end_of_frame: bool,
    /// The template id as read from the wire. A writer picks its own best template and ignores
    /// this.
    pub template_id: u8,
    pub frame_number: u16,
    /// The frame's layer, DTIs, frame diffs and chain diffs: the template's, with custom fields
    /// applied.
    pub frame_dependencies: FrameDependencyTemplate,
    /// Bit `i` set when decode target `i` is active. `None` when the packet neither carries a
    /// bitmask nor a structure (which implies all targets are active).
    pub active_decode_targets: Option<u32>,
    /// The structure carried by this packet (keyframes), shared with the caller's state.
    pub attached_structure: Option<Arc<FrameDependencyStructure>>,
}

impl DependencyDescriptor {
    pub fn spatial_id(&self) -> u8 {
        self.frame_dependencies.spatial_id
    }

    pub fn temporal_id(&self) -> u8 {
        self.frame_dependencies.temporal_id
    }

    pub fn mandatory_fields(&self) -> MandatoryFields {
        MandatoryFields {
            start_of_frame: self.start_of_frame,
            end_of_frame: self.end_of_frame,
            template_id: self.template_id,
            frame_number: self.frame_number,
        }
    }
}
