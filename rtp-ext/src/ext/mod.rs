//! Typed RTP header extensions: each parses from an element's borrowed bytes and writes into a
//! caller's buffer, without allocating. [`HeaderExtension::URI`] is the name SDP negotiates in
//! `a=extmap`; [`URIS`] lists them all.

mod abs_capture_time;
mod abs_send_time;
mod audio_level;
mod error;
mod extension;
mod playout_delay;
mod sdes;
mod transport_cc;
mod video_orientation;
mod vla;

pub use abs_capture_time::AbsCaptureTime;
pub use abs_send_time::AbsSendTime;
pub use audio_level::AudioLevel;
pub use error::{ParseError, WriteError};
pub use extension::HeaderExtension;
pub use playout_delay::PlayoutDelay;
pub use sdes::{Mid, RepairedRtpStreamId, RtpStreamId};
pub use transport_cc::TransportSequenceNumber;
pub use video_orientation::{Rotation, VideoOrientation};
pub use vla::{
    Resolution, RtpStreamLayers, SpatialLayer, VideoLayersAllocation, MAX_RTP_STREAMS,
    MAX_SPATIAL_LAYERS, MAX_TEMPORAL_LAYERS,
};

/// The extmap URI of every extension this crate reads, the Dependency Descriptor included.
pub const URIS: [&str; 11] = [
    AbsSendTime::URI,
    TransportSequenceNumber::URI,
    AudioLevel::URI,
    Mid::URI,
    RtpStreamId::URI,
    RepairedRtpStreamId::URI,
    PlayoutDelay::URI,
    AbsCaptureTime::URI,
    VideoOrientation::URI,
    VideoLayersAllocation::URI,
    crate::dd::URI,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_distinct() {
        for (i, a) in URIS.iter().enumerate() {
            assert!(!URIS[i + 1..].contains(a), "{a} listed twice");
        }
    }
}
