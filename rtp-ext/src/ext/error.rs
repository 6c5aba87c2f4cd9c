//! Errors of the typed extensions.

use std::fmt;

/// Why an element's bytes are not the extension they were negotiated as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// The element's length is not one the extension defines.
    BadLength,
    /// The element ends before a field it announces.
    Truncated,
    /// A field holds a value the extension does not allow.
    BadValue,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::BadLength => "extension element has the wrong length",
            Self::Truncated => "extension element truncated",
            Self::BadValue => "extension element holds an invalid value",
        })
    }
}

impl std::error::Error for ParseError {}

/// Why a value cannot be written. These are caller errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteError {
    /// The output buffer is smaller than the element.
    BufferTooSmall,
    /// A field does not fit its bits on the wire.
    ValueOutOfRange,
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::BufferTooSmall => "buffer too small for the extension element",
            Self::ValueOutOfRange => "value does not fit the extension's field",
        })
    }
}

impl std::error::Error for WriteError {}
