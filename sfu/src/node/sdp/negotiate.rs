//! What the node accepts from an offer: per media section a codec, the header extensions and
//! the RTCP feedback the engine uses. A section the node cannot serve is rejected on its own;
//! the offer fails only when no section is left.

use rtp_ext::codec::{Codec, MediaKind};
use rtp_ext::dd;
use rtp_ext::ext::{
    AbsSendTime, AudioLevel, HeaderExtension, Mid, RepairedRtpStreamId, RtpStreamId,
    TransportSequenceNumber,
};

use super::offer::fmtp_param;
use super::{Extmap, Offer, OfferedCodec, OfferedMedia, SdpError, SsrcInfo};

/// The header extensions taken from a publisher: the engine reads each of them.
const PUBLISHER_EXTENSIONS: [&str; 7] = [
    dd::URI,
    AbsSendTime::URI,
    TransportSequenceNumber::URI,
    Mid::URI,
    RtpStreamId::URI,
    RepairedRtpStreamId::URI,
    AudioLevel::URI,
];

/// The header extensions sent to a viewer. RIDs are left out: a viewer gets one stream per
/// section, named by its SSRC.
const VIEWER_EXTENSIONS: [&str; 5] = [
    dd::URI,
    AbsSendTime::URI,
    TransportSequenceNumber::URI,
    Mid::URI,
    AudioLevel::URI,
];

/// The RTCP feedback the engine answers (RFC 4585, RFC 5104) or sends.
const FEEDBACK: [&str; 5] = ["nack", "nack pli", "ccm fir", "transport-cc", "goog-remb"];

/// An answer for one media section: accepted with a plan, or rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Section<T> {
    /// The section is served as planned.
    Accepted(T),
    /// The section is answered with port 0.
    Rejected {
        /// The section's `a=mid`.
        mid: String,
        /// The media of the offered `m=` line, echoed in the answer.
        media_type: String,
        /// The transport of the offered `m=` line, echoed in the answer.
        proto: String,
        /// The formats of the offered `m=` line, echoed in the answer.
        formats: Vec<String>,
        /// Why the section was rejected, for the error when no section is left.
        reason: String,
    },
}

impl<T> Section<T> {
    /// The plan of an accepted section.
    pub fn accepted(&self) -> Option<&T> {
        match self {
            Self::Accepted(plan) => Some(plan),
            Self::Rejected { .. } => None,
        }
    }
}

/// What the node receives in one of a publisher's media sections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedMedia {
    /// The section's `a=mid`.
    pub mid: String,
    /// Audio or video.
    pub kind: MediaKind,
    /// The codec received, with its RTX and the feedback kept.
    pub codec: OfferedCodec,
    /// The header extensions kept, with the publisher's ids.
    pub extensions: Vec<Extmap>,
    /// The publisher's announced sources; empty under simulcast.
    pub ssrcs: Vec<SsrcInfo>,
    /// The simulcast RIDs in the publisher's order; empty for a single stream.
    pub rids: Vec<String>,
}

impl PublishedMedia {
    /// The publisher's id for the header extension `uri`, when kept.
    pub fn extension_id(&self, uri: &str) -> Option<u8> {
        extension_id(&self.extensions, uri)
    }
}

/// The answer to a publisher, section by section in the offer's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublisherPlan {
    /// The publisher allows one- and two-byte header extensions to mix.
    pub extmap_allow_mixed: bool,
    /// One entry per offered media section.
    pub sections: Vec<Section<PublishedMedia>>,
}

/// A codec already published in a room, which a viewer must be able to receive as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomCodec {
    /// The codec; its kind picks the sections it applies to.
    pub codec: Codec,
    /// The publisher's format parameters.
    pub fmtp: String,
}

/// What the node sends in one of a viewer's media sections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewedMedia {
    /// The section's `a=mid`.
    pub mid: String,
    /// Audio or video.
    pub kind: MediaKind,
    /// With the viewer's payload types: the codec matching the room's, or while the room has
    /// nothing of this kind every supported codec offered, so that a later publisher can be
    /// matched. The first is the preferred one.
    pub codecs: Vec<OfferedCodec>,
    /// The header extensions kept, with the viewer's ids.
    pub extensions: Vec<Extmap>,
    /// The viewer's id for the Dependency Descriptor, when offered.
    pub dependency_descriptor_id: Option<u8>,
    /// The viewer's id for transport-wide sequence numbers, when offered.
    pub transport_cc_id: Option<u8>,
    /// The viewer asks for transport-wide congestion control feedback.
    pub transport_cc_feedback: bool,
    /// The viewer asks for receiver estimated maximum bitrate (REMB) feedback.
    pub remb_feedback: bool,
}

impl ViewedMedia {
    /// The preferred codec: the one matching the room's when there is one.
    pub fn codec(&self) -> Option<&OfferedCodec> {
        self.codecs.first()
    }
}

/// The answer to a viewer, section by section in the offer's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewerPlan {
    /// The viewer allows one- and two-byte header extensions to mix.
    pub extmap_allow_mixed: bool,
    /// One entry per offered media section.
    pub sections: Vec<Section<ViewedMedia>>,
}

/// Plans the answer to a publisher: each section the publisher sends in gets Opus or the first
/// supported video codec in the offer's order, which is the page's codec preference.
pub fn negotiate_publisher(offer: &Offer) -> Result<PublisherPlan, SdpError> {
    let sections = plan_sections(offer, |media, kind| {
        if !media.direction.sends() {
            return Err(format!("{}, nothing to receive", media.direction.as_str()));
        }
        let codec = media
            .codecs
            .iter()
            .find(|c| supported(c, kind))
            .ok_or("no supported codec")?;
        Ok(PublishedMedia {
            mid: media.mid.clone(),
            kind,
            codec: keep_feedback(codec),
            extensions: keep_extensions(&media.extensions, &PUBLISHER_EXTENSIONS),
            ssrcs: media.ssrcs.clone(),
            rids: media.send_rids.clone(),
        })
    })?;
    Ok(PublisherPlan {
        extmap_allow_mixed: offer.extmap_allow_mixed,
        sections,
    })
}

/// Plans the answer to a viewer: each section the viewer receives in gets the codec the room
/// publishes for its kind, or every supported one while the room publishes none.
pub fn negotiate_viewer(offer: &Offer, room: &[RoomCodec]) -> Result<ViewerPlan, SdpError> {
    let sections = plan_sections(offer, |media, kind| plan_viewed(media, kind, room))?;
    Ok(ViewerPlan {
        extmap_allow_mixed: offer.extmap_allow_mixed,
        sections,
    })
}

fn plan_viewed(
    media: &OfferedMedia,
    kind: MediaKind,
    room: &[RoomCodec],
) -> Result<ViewedMedia, String> {
    if !media.direction.receives() {
        return Err(format!("{}, nothing to send", media.direction.as_str()));
    }
    let published: Vec<&RoomCodec> = room.iter().filter(|r| r.codec.kind() == kind).collect();
    let codecs: Vec<OfferedCodec> = media
        .codecs
        .iter()
        .filter(|c| supported(c, kind))
        .filter(|c| published.is_empty() || published.iter().any(|r| same_format(c, r)))
        .map(keep_feedback)
        .collect();
    if codecs.is_empty() {
        return Err("no codec matching the room's".to_owned());
    }
    let extensions = keep_extensions(&media.extensions, &VIEWER_EXTENSIONS);
    let offers_feedback = |name: &str| codecs.iter().any(|c| c.feedback.iter().any(|f| f == name));
    Ok(ViewedMedia {
        mid: media.mid.clone(),
        kind,
        dependency_descriptor_id: extension_id(&extensions, dd::URI),
        transport_cc_id: extension_id(&extensions, TransportSequenceNumber::URI),
        transport_cc_feedback: offers_feedback("transport-cc"),
        remb_feedback: offers_feedback("goog-remb"),
        codecs,
        extensions,
    })
}

/// Plans every section with `plan`, after rejecting those no plan can serve: refused by the
/// offerer, outside the BUNDLE group, or neither audio nor video. Fails when nothing is
/// accepted, with each section's reason.
fn plan_sections<T>(
    offer: &Offer,
    plan: impl Fn(&OfferedMedia, MediaKind) -> Result<T, String>,
) -> Result<Vec<Section<T>>, SdpError> {
    let sections: Vec<Section<T>> = offer
        .media
        .iter()
        .map(|media| {
            let planned = usable_kind(offer, media).and_then(|kind| plan(media, kind));
            match planned {
                Ok(accepted) => Section::Accepted(accepted),
                Err(reason) => Section::Rejected {
                    mid: media.mid.clone(),
                    media_type: media.media_type.clone(),
                    proto: media.proto.clone(),
                    formats: media.formats.clone(),
                    reason: format!("mid {}: {reason}", media.mid),
                },
            }
        })
        .collect();
    if sections.iter().any(|s| s.accepted().is_some()) {
        return Ok(sections);
    }
    let reasons: Vec<&str> = sections
        .iter()
        .filter_map(|s| match s {
            Section::Rejected { reason, .. } => Some(reason.as_str()),
            Section::Accepted(_) => None,
        })
        .collect();
    Err(SdpError::NoUsableMedia(reasons.join("; ")))
}

fn usable_kind(offer: &Offer, media: &OfferedMedia) -> Result<MediaKind, String> {
    if media.rejected {
        return Err("port 0".to_owned());
    }
    if !offer.bundle_mids.contains(&media.mid) {
        return Err("not in the BUNDLE group".to_owned());
    }
    media
        .kind
        .ok_or_else(|| format!("{} is not forwarded", media.media_type))
}

/// Whether the node forwards `codec` in a section of `kind`. VP9 and AV1 only in profile 0,
/// which every decoder of those codecs has (RFC 9628 `profile-id`, AV1 RTP `profile`); H.264
/// only non-interleaved (RFC 6184 `packetization-mode=1`), which is what the engine reads.
fn supported(codec: &OfferedCodec, kind: MediaKind) -> bool {
    let profile_zero = |name| codec.fmtp_param(name).unwrap_or("0") == "0";
    codec.codec.kind() == kind
        && match codec.codec {
            Codec::Opus | Codec::Vp8 => true,
            Codec::Vp9 => profile_zero("profile-id"),
            Codec::Av1 => profile_zero("profile"),
            Codec::H264 => codec.fmtp_param("packetization-mode") == Some("1"),
            Codec::Pcmu | Codec::Pcma | Codec::G722 => false,
        }
}

/// Whether a viewer decoding `offered` can decode what a publisher sends as `room`. For H.264
/// the profile (`profile_idc` and `profile-iop`, the first 4 hex digits of `profile-level-id`,
/// RFC 6184 section 8.1) and the packetization mode must match; the level may differ.
fn same_format(offered: &OfferedCodec, room: &RoomCodec) -> bool {
    if offered.codec != room.codec {
        return false;
    }
    if room.codec != Codec::H264 {
        return true;
    }
    let profile = |fmtp: &str| {
        fmtp_param(fmtp, "profile-level-id")
            .and_then(|id| id.get(..4))
            .map(str::to_ascii_lowercase)
    };
    let mode = |fmtp: &str| {
        fmtp_param(fmtp, "packetization-mode")
            .unwrap_or("0")
            .to_owned()
    };
    profile(&offered.fmtp) == profile(&room.fmtp) && mode(&offered.fmtp) == mode(&room.fmtp)
}

fn keep_feedback(codec: &OfferedCodec) -> OfferedCodec {
    OfferedCodec {
        feedback: codec
            .feedback
            .iter()
            .filter(|f| FEEDBACK.contains(&f.as_str()))
            .cloned()
            .collect(),
        ..codec.clone()
    }
}

fn keep_extensions(offered: &[Extmap], kept: &[&str]) -> Vec<Extmap> {
    offered
        .iter()
        .filter(|e| kept.contains(&e.uri.as_str()))
        .cloned()
        .collect()
}

fn extension_id(extensions: &[Extmap], uri: &str) -> Option<u8> {
    extensions.iter().find(|e| e.uri == uri).map(|e| e.id)
}
