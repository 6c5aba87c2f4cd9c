//! RTP packets (RFC 3550) with RFC 8285 header extensions: a zero-copy view parsed in one pass,
//! a header writer for the forwarding path and RFC 4588 retransmission payloads. Nothing here
//! allocates.

mod error;
mod extensions;
mod id_set;
mod packet;
mod rtx;
mod writer;

pub use error::{ParseError, RtxError, WriteError};
pub use extensions::{ExtensionForm, MAX_EXTENSIONS, ONE_BYTE_PROFILE, TWO_BYTE_PROFILE};
pub use id_set::ExtensionIds;
pub use packet::{PacketLayout, RtpFields, RtpPacket, FIXED_HEADER_LEN};
pub use rtx::{unwrap_rtx, wrap_rtx, RtxPayload};
pub use writer::{write_header, ExtensionElement, ExtensionSelection};
