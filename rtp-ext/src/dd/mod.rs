//! The AV1 RTP Dependency Descriptor header extension (AV1 RTP spec, Appendix A): reader,
//! writer and template structure. Used for AV1 and for any codec Chrome sends with it.

mod descriptor;
mod error;
mod indication;
mod inline_vec;
mod reader;
mod structure;
mod writer;

pub use descriptor::{DependencyDescriptor, MandatoryFields, MANDATORY_SIZE};
pub use error::{ReadError, WriteError};
pub use indication::{DecodeTargetIndication, DecodeTargetIndications, MAX_DECODE_TARGETS};
pub use inline_vec::{CapacityExceeded, InlineVec};
pub use structure::{
    ChainDiffs, DecodeTargetLayer, FrameDependencyStructure, FrameDependencyTemplate, FrameDiffs,
    RenderResolution, StructureError, MAX_CHAINS, MAX_CHAIN_DIFF, MAX_FRAME_DIFF, MAX_FRAME_DIFFS,
    MAX_SPATIAL_LAYERS, MAX_TEMPLATES, MAX_TEMPORAL_LAYERS,
};
pub use writer::{DependencyDescriptorWriter, PreparedDescriptor};

/// The extmap URI negotiated in SDP for this extension.
pub const URI: &str =
    "https://aomediacodec.github.io/av1-rtp-spec/#dependency-descriptor-rtp-header-extension";
