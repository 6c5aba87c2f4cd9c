//! What the node accepts from an offer: per media section a codec, the header extensions and
//! the RTCP feedback the engine uses. A section the node cannot serve is refused on its own,
//! with a reason the client is told; the offer fails only when no section is left.

use rtp_ext::codec::{Codec, MediaKind};
use rtp_ext::dd;
use rtp_ext::ext::{
    AbsSendTime, AudioLevel, HeaderExtension, Mid, RepairedRtpStreamId, RtpStreamId,
    TransportSequenceNumber,
};

use super::format::{decodes, describe, supported};
use super::{Extmap, Offer, OfferedCodec, OfferedMedia, SctpOffer, SdpError, SsrcInfo};

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

/// An answer for one media section: accepted with a plan, or refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Section<T> {
    /// The section is served as planned.
    Accepted(T),
    /// The section is not served: answered `a=inactive` inside the BUNDLE group when
    /// `inactive` names a codec, with port 0 otherwise.
    Rejected {
        /// The section's `a=mid`.
        mid: String,
        /// The media of the offered `m=` line, echoed in the answer.
        media_type: String,
        /// The transport of the offered `m=` line, echoed in the answer.
        proto: String,
        /// The formats of the offered `m=` line, echoed in the answer.
        formats: Vec<String>,
        /// The codec an inactive answer names; `None` for a section answered with port 0:
        /// one the offerer refused, one outside the BUNDLE group, or one without RTP media
        /// the node knows.
        inactive: Option<InactiveMedia>,
        /// Why the section is not served, starting with its mid: logged, given to the client,
        /// and the error when no section is left.
        reason: String,
    },
}

/// A bundled audio or video section the node does not serve. It is answered `a=inactive`
/// rather than with port 0, so that a client which cannot move its BUNDLE transport to
/// another section keeps it (RFC 8843 section 7.3.3; JSEP allows either answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InactiveMedia {
    /// Audio or video.
    pub kind: MediaKind,
    /// The first offered codec the node knows, without feedback or RTX: an answer names at
    /// least one of the offered formats (RFC 3264 section 6).
    pub codec: OfferedCodec,
}

/// How the node tells a publisher's stream apart from the others of its bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Demux {
    /// By the SSRC of its `a=ssrc` lines.
    Ssrc,
    /// Simulcast: by the rid of each stream (RFC 8852), bound to an SSRC on its first packet,
    /// with the RTX SSRC the offer pairs it with, if any.
    Rid,
    /// No `a=ssrc` or `a=rid` lines (RFC 8843 section 9.2): the SSRC is bound from the first
    /// packet that carries the section's mid, or failing that its payload type.
    Unsignaled {
        /// The mid header extension is negotiated.
        by_mid: bool,
        /// No other section of the bundle offers the codec's payload type (or its RTX's).
        by_payload_type: bool,
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

    /// Why the section is not served; `None` when it is.
    pub fn refusal(&self) -> Option<&str> {
        match self {
            Self::Accepted(_) => None,
            Self::Rejected { reason, .. } => Some(reason),
        }
    }
}

/// The reasons of every section not served, in the offer's order.
pub fn refusals<T>(sections: &[Section<T>]) -> Vec<String> {
    sections
        .iter()
        .filter_map(Section::refusal)
        .map(str::to_owned)
        .collect()
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
    /// The publisher's announced sources: none under simulcast from some browsers, one per
    /// stream in no known order of rids from others.
    pub ssrcs: Vec<SsrcInfo>,
    /// The simulcast RIDs in the publisher's order; empty for a single stream.
    pub rids: Vec<String>,
    /// How the section's streams are told apart.
    pub demux: Demux,
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
    // A section whose packets cannot be told apart fails the whole offer: serving the other
    // sections would hide that this one's media goes nowhere.
    let mut unidentifiable = None;
    let sections = plan_sections(offer, |media, kind| {
        if !media.direction.sends() {
            return Err(format!("{}, nothing to receive", media.direction.as_str()));
        }
        plan_published(offer, media, kind, &mut unidentifiable)
    });
    if let Some(error) = unidentifiable {
        return Err(error);
    }
    let sections = sections?;
    Ok(PublisherPlan {
        extmap_allow_mixed: offer.extmap_allow_mixed,
        sections,
    })
}

/// What the node receives in a section the offerer sends in: Opus or the first supported
/// video codec in the offer's order. A section whose packets could not be told from another's
/// leaves its error in `unidentifiable`, for the caller to fail the offer with.
pub(super) fn plan_published(
    offer: &Offer,
    media: &OfferedMedia,
    kind: MediaKind,
    unidentifiable: &mut Option<SdpError>,
) -> Result<PublishedMedia, String> {
    let codec = media
        .codecs
        .iter()
        .find(|c| supported(c, kind))
        .ok_or("no supported codec")?;
    let extensions = keep_extensions(&media.extensions, &PUBLISHER_EXTENSIONS);
    let demux = demux_of(offer, media, codec, &extensions).map_err(|e| {
        let reason = e.to_string();
        unidentifiable.get_or_insert(e);
        reason
    })?;
    Ok(PublishedMedia {
        mid: media.mid.clone(),
        kind,
        codec: codec.clone(),
        extensions,
        ssrcs: media.ssrcs.clone(),
        rids: media.send_rids.clone(),
        demux,
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

pub(super) fn plan_viewed(
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
        .filter(|c| published.is_empty() || published.iter().any(|r| r.decoded_by(c)))
        .cloned()
        .collect();
    if codecs.is_empty() {
        let room: Vec<String> = published
            .iter()
            .map(|r| describe(r.codec, &r.fmtp))
            .collect();
        return Err(format!(
            "no offered codec decodes the room's {}",
            room.join(", ")
        ));
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

/// Plans every section with `plan`, after refusing those no plan can serve: refused by the
/// offerer, outside the BUNDLE group, or neither audio nor video. Fails when nothing is
/// accepted, with each section's reason.
pub(super) fn plan_sections<T>(
    offer: &Offer,
    plan: impl FnMut(&OfferedMedia, MediaKind) -> Result<T, String>,
) -> Result<Vec<Section<T>>, SdpError> {
    plan_sections_with(offer, plan, |_, _| None)
}

/// [`plan_sections`], with `data` planning each bundled data channel section (RFC 8841):
/// `None` refuses it as media the node does not forward.
pub(super) fn plan_sections_with<T>(
    offer: &Offer,
    mut plan: impl FnMut(&OfferedMedia, MediaKind) -> Result<T, String>,
    mut data: impl FnMut(&OfferedMedia, SctpOffer) -> Option<Result<T, String>>,
) -> Result<Vec<Section<T>>, SdpError> {
    let sections: Vec<Section<T>> = offer
        .media
        .iter()
        .map(|media| match usable_kind(offer, media) {
            Err(reason) => {
                let bundled = !media.rejected && offer.bundle_mids.contains(&media.mid);
                match media.sctp.filter(|_| bundled).and_then(|s| data(media, s)) {
                    Some(Ok(accepted)) => Section::Accepted(accepted),
                    Some(Err(refusal)) => refuse(media, &refusal, None),
                    None => refuse(media, &reason, None),
                }
            }
            Ok(kind) => match plan(media, kind) {
                Ok(accepted) => Section::Accepted(accepted),
                Err(reason) => refuse(media, &reason, inactive_media(media, kind)),
            },
        })
        .collect();
    if sections.iter().any(|s| s.accepted().is_some()) {
        return Ok(sections);
    }
    Err(SdpError::NoUsableMedia(refusals(&sections).join("; ")))
}

fn refuse<T>(media: &OfferedMedia, reason: &str, inactive: Option<InactiveMedia>) -> Section<T> {
    Section::Rejected {
        mid: media.mid.clone(),
        media_type: media.media_type.clone(),
        proto: media.proto.clone(),
        formats: media.formats.clone(),
        inactive,
        reason: format!("mid {}: {reason}", media.mid),
    }
}

fn inactive_media(media: &OfferedMedia, kind: MediaKind) -> Option<InactiveMedia> {
    let codec = media.codecs.first()?;
    Some(InactiveMedia {
        kind,
        codec: OfferedCodec {
            rtx_payload_type: None,
            feedback: Vec::new(),
            ..codec.clone()
        },
    })
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

/// How the packets of a publisher's section will be told apart, or why they cannot be.
fn demux_of(
    offer: &Offer,
    media: &OfferedMedia,
    codec: &OfferedCodec,
    extensions: &[Extmap],
) -> Result<Demux, SdpError> {
    // Rids first: a simulcast offer may announce its SSRCs too (one `a=ssrc-group:FID` per
    // stream), without saying which rid each is; the packets' rids say it.
    if !media.send_rids.is_empty() {
        if extension_id(extensions, RtpStreamId::URI).is_none() {
            return Err(SdpError::RidWithoutExtension {
                mid: media.mid.clone(),
            });
        }
        return Ok(Demux::Rid);
    }
    if !media.ssrcs.is_empty() {
        return Ok(Demux::Ssrc);
    }
    let by_mid = extension_id(extensions, Mid::URI).is_some();
    let by_payload_type = std::iter::once(codec.payload_type)
        .chain(codec.rtx_payload_type)
        .all(|pt| !payload_type_elsewhere(offer, &media.mid, pt));
    if !by_mid && !by_payload_type {
        return Err(SdpError::Unidentifiable {
            mid: media.mid.clone(),
            payload_type: codec.payload_type,
        });
    }
    Ok(Demux::Unsignaled {
        by_mid,
        by_payload_type,
    })
}

/// Whether another bundled section offers `payload_type`, so that the payload type alone
/// does not say which section a packet belongs to (RFC 8843 section 9.2).
fn payload_type_elsewhere(offer: &Offer, mid: &str, payload_type: u8) -> bool {
    let pt = payload_type.to_string();
    offer
        .media
        .iter()
        .filter(|m| m.mid != mid && !m.rejected && offer.bundle_mids.contains(&m.mid))
        .any(|m| m.formats.contains(&pt))
}

impl RoomCodec {
    /// Whether a viewer offering `offered` decodes what the publisher sends.
    pub fn decoded_by(&self, offered: &OfferedCodec) -> bool {
        offered.codec == self.codec && decodes(self.codec, &self.fmtp, &offered.fmtp)
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
