//! AV1 with the Dependency Descriptor header extension for the client: the independent WebRTC
//! client crate knows neither the DD nor the layers it describes, so the client registers the
//! extension with a serializer of its own that writes bytes the caller prepared (the DD the
//! workspace's own writer produced) and, on receipt, only notes that one was there.

use bytes::Bytes;
use str0m::rtp::{ExtensionSerializer, ExtensionValues};

/// The URI a browser offers the Dependency Descriptor under (AV1 RTP spec, appendix A).
pub const DD_URI: &str =
    "https://aomediacodec.github.io/av1-rtp-spec/#dependency-descriptor-rtp-header-extension";
/// The id the client offers the DD under: one the crate's standard extension map leaves free.
pub const DD_EXT_ID: u8 = 12;
/// The one-byte header form carries at most 16 bytes per element (RFC 8285 section 4.2).
const ONE_BYTE_FORM_MAX: usize = 16;

/// One AV1 RTP packet as the caller built it: the client writes the header around it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Av1Packet {
    /// The extended (never wrapping) sequence number; the wire carries its low 16 bits.
    pub seq: u64,
    pub timestamp: u32,
    pub marker: bool,
    /// The serialized Dependency Descriptor.
    pub dd: Bytes,
    /// The whole RTP payload: aggregation header, OBU element(s).
    pub payload: Vec<u8>,
}

/// The DD of one outgoing packet, carried to the serializer in the packet's extension values.
#[derive(Debug, Clone)]
pub(crate) struct DdBytes(pub Bytes);

/// Writes the prepared DD; reads nothing back (a viewer here checks what it got from the
/// payload, which passes through the node unchanged).
#[derive(Debug)]
pub(crate) struct DdSerializer;

impl ExtensionSerializer for DdSerializer {
    fn write_to(&self, buf: &mut [u8], ev: &ExtensionValues) -> usize {
        let Some(DdBytes(dd)) = ev.user_values.get::<DdBytes>() else {
            return 0;
        };
        match buf.get_mut(..dd.len()) {
            Some(out) => {
                out.copy_from_slice(dd);
                dd.len()
            }
            // Left out rather than cut: a truncated DD would not parse at the node.
            None => 0,
        }
    }

    fn parse_value(&self, _buf: &[u8], _ev: &mut ExtensionValues) -> bool {
        true
    }

    fn is_video(&self) -> bool {
        true
    }

    fn is_audio(&self) -> bool {
        false
    }

    /// A keyframe's DD carries the template structure (around 90 bytes for L3T3).
    fn requires_two_byte_form(&self, ev: &ExtensionValues) -> bool {
        ev.user_values
            .get::<DdBytes>()
            .is_some_and(|DdBytes(dd)| dd.len() > ONE_BYTE_FORM_MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(dd: &[u8]) -> ExtensionValues {
        let mut ev = ExtensionValues::default();
        ev.user_values.set(DdBytes(Bytes::copy_from_slice(dd)));
        ev
    }

    #[test]
    fn the_prepared_bytes_are_written_whole_or_not_at_all() {
        let mut buf = [0u8; 8];
        assert_eq!(DdSerializer.write_to(&mut buf, &values(&[1, 2, 3])), 3);
        assert_eq!(&buf[..3], &[1, 2, 3]);
        assert_eq!(DdSerializer.write_to(&mut buf[..2], &values(&[1, 2, 3])), 0);
        assert_eq!(
            DdSerializer.write_to(&mut buf, &ExtensionValues::default()),
            0
        );
    }

    #[test]
    fn a_structure_sized_descriptor_needs_the_two_byte_form() {
        assert!(!DdSerializer.requires_two_byte_form(&values(&[0; 16])));
        assert!(DdSerializer.requires_two_byte_form(&values(&[0; 17])));
    }
}
