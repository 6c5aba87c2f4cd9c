//! Which formats the node forwards, and which a viewer can decode: a codec's name is not
//! enough where its format parameters name a profile (H.264 `profile-level-id` and
//! `packetization-mode`, RFC 6184; VP9 `profile-id`, RFC 9628; AV1 `profile`, the AV1 RTP
//! specification section 7.2).

use rtp_ext::codec::{Codec, MediaKind};

use super::h264_profile::ProfileLevelId;
use super::offer::fmtp_param;
use super::OfferedCodec;

/// The VP9 profiles (0 to 3) and AV1 profiles (Main, High, Professional): the engine reads
/// their payloads alike.
const VP9_PROFILES: u8 = 3;
const AV1_PROFILES: u8 = 2;

/// Whether the node forwards `codec` in a section of `kind`. H.264 in packetization modes 0
/// and 1, which the engine reads (mode 2 interleaves NAL units across packets), and only in a
/// profile Table 5 of RFC 6184 names, since viewers are matched by profile.
pub fn supported(codec: &OfferedCodec, kind: MediaKind) -> bool {
    let fmtp = codec.fmtp.as_str();
    codec.codec.kind() == kind
        && match codec.codec {
            Codec::Opus | Codec::Vp8 => true,
            Codec::Vp9 => profile(fmtp, "profile-id").is_some_and(|p| p <= VP9_PROFILES),
            Codec::Av1 => profile(fmtp, "profile").is_some_and(|p| p <= AV1_PROFILES),
            Codec::H264 => {
                packetization_mode(fmtp).is_some_and(|m| m <= 1)
                    && ProfileLevelId::from_fmtp(fmtp).is_ok()
            }
            Codec::Pcmu | Codec::Pcma | Codec::G722 => false,
        }
}

/// Whether a viewer that announced `viewer_fmtp` for `codec` decodes a stream a publisher
/// announced as `stream_fmtp`. H.264: the same profile (read through RFC 6184 Table 5, so
/// `42c01e` and `42e01f` are both Constrained Baseline), a level the viewer takes (see
/// [`ProfileLevelId::decodes`]), and a packetization mode the viewer reads: a mode 0 stream is
/// single NAL unit packets, which mode 1 includes, but not the other way round. VP9 and AV1:
/// the same profile.
pub fn decodes(codec: Codec, stream_fmtp: &str, viewer_fmtp: &str) -> bool {
    match codec {
        Codec::H264 => h264_decodes(stream_fmtp, viewer_fmtp),
        Codec::Vp9 => profile(stream_fmtp, "profile-id") == profile(viewer_fmtp, "profile-id"),
        Codec::Av1 => profile(stream_fmtp, "profile") == profile(viewer_fmtp, "profile"),
        Codec::Opus | Codec::Vp8 | Codec::Pcmu | Codec::Pcma | Codec::G722 => true,
    }
}

/// Why no viewer codec decodes the stream, for the reason given to the viewer: the format
/// parameters that decide it.
pub fn describe(codec: Codec, fmtp: &str) -> String {
    let names: &[&str] = match codec {
        Codec::H264 => &["profile-level-id", "packetization-mode"],
        Codec::Vp9 => &["profile-id"],
        Codec::Av1 => &["profile"],
        Codec::Opus | Codec::Vp8 | Codec::Pcmu | Codec::Pcma | Codec::G722 => &[],
    };
    let params: Vec<String> = names
        .iter()
        .filter_map(|name| Some(format!("{name}={}", fmtp_param(fmtp, name)?)))
        .collect();
    if params.is_empty() {
        codec.encoding_name().to_owned()
    } else {
        format!("{} {}", codec.encoding_name(), params.join(";"))
    }
}

fn h264_decodes(stream_fmtp: &str, viewer_fmtp: &str) -> bool {
    let (Ok(stream), Ok(viewer)) = (
        ProfileLevelId::from_fmtp(stream_fmtp),
        ProfileLevelId::from_fmtp(viewer_fmtp),
    ) else {
        return false;
    };
    let asymmetry = fmtp_param(viewer_fmtp, "level-asymmetry-allowed") == Some("1");
    let modes = packetization_mode(stream_fmtp).zip(packetization_mode(viewer_fmtp));
    viewer.decodes(stream, asymmetry) && modes.is_some_and(|(stream, viewer)| stream <= viewer)
}

/// `packetization-mode`, 0 when left out (RFC 6184 section 8.1); `None` when unreadable.
fn packetization_mode(fmtp: &str) -> Option<u8> {
    fmtp_param(fmtp, "packetization-mode").map_or(Some(0), |m| m.parse().ok())
}

/// A numeric profile parameter, 0 when left out; `None` when unreadable.
fn profile(fmtp: &str, name: &str) -> Option<u8> {
    fmtp_param(fmtp, name).map_or(Some(0), |p| p.parse().ok())
}
