//! Errors of the DD reader and writer: what was wrong with the input, in a few words.

use std::fmt;

use super::structure::StructureError;

/// Why bytes from the network are not a Dependency Descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadError {
    /// The descriptor ends before a field it announces.
    Truncated,
    /// Fields past the mandatory ones need a template structure, and none is known or attached.
    MissingStructure,
    /// The template id names no template of the structure.
    UnknownTemplate,
    /// The structure lists more than 64 templates.
    TooManyTemplates,
    /// A `next_layer_idc` leads past spatial id 3 or temporal id 7.
    InvalidNextLayerIdc,
    /// A template or frame lists more frame diffs than any codec references.
    TooManyFrameDiffs,
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Truncated => "dependency descriptor truncated",
            Self::MissingStructure => "no template structure known for this dependency descriptor",
            Self::UnknownTemplate => "template id not in the template structure",
            Self::TooManyTemplates => "more than 64 templates",
            Self::InvalidNextLayerIdc => "next_layer_idc past spatial id 3 or temporal id 7",
            Self::TooManyFrameDiffs => "more than 16 frame diffs",
        })
    }
}

impl std::error::Error for ReadError {}

/// Why a descriptor cannot be written. These are caller errors: the frame does not fit the
/// structure, or the buffer is too small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteError {
    /// No structure was given and the descriptor attaches none.
    MissingStructure,
    /// The structure breaks a rule of the wire format.
    InvalidStructure(StructureError),
    /// No template has the frame's spatial and temporal id.
    NoTemplateForLayer,
    /// The frame's DTI count differs from the structure's decode target count.
    DtiCount,
    /// The frame's chain diff count differs from the structure's chain count.
    ChainDiffCount,
    /// A frame diff is 0 or above 4096.
    InvalidFrameDiff,
    /// A chain diff of an active chain is above 255.
    InvalidChainDiff,
    /// The active decode targets bitmask names decode targets the structure does not have.
    ActiveDecodeTargets,
    /// The output buffer is smaller than the encoded descriptor.
    BufferTooSmall,
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingStructure => f.write_str("no template structure to write against"),
            Self::InvalidStructure(e) => write!(f, "invalid template structure: {e:?}"),
            Self::NoTemplateForLayer => f.write_str("no template for the frame's layer"),
            Self::DtiCount => f.write_str("DTI count differs from the structure"),
            Self::ChainDiffCount => f.write_str("chain diff count differs from the structure"),
            Self::InvalidFrameDiff => f.write_str("frame diff outside 1..=4096"),
            Self::InvalidChainDiff => f.write_str("active chain diff above 255"),
            Self::ActiveDecodeTargets => f.write_str("active decode targets outside the structure"),
            Self::BufferTooSmall => f.write_str("buffer too small for the descriptor"),
        }
    }
}

impl std::error::Error for WriteError {}
