//! A conference participant's offer: one peer connection that publishes in the sections it
//! sends in and receives in the sections it only receives in. A sending section is planned as
//! a publisher's; a receiving section keeps every supported codec the participant offered, so
//! that any of the room's tracks can be matched to it, now or at a later renegotiation.
//!
//! A renegotiation's offer must describe the same session (RFC 8829 section 5.2.2): the same
//! DTLS fingerprint, and the sections of the offer before it, in the same order with the same
//! media, new ones after them. New ICE credentials restart ICE (the node answers with new ones
//! of its own).

use rtp_ext::codec::MediaKind;

use super::negotiate::{plan_published, plan_sections_with, plan_viewed};
use super::{Offer, OfferedMedia, PublishedMedia, SctpOffer, SdpError, Section, ViewedMedia};

/// What the node does in one of a participant's sections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParticipantMedia {
    /// The participant sends: the node receives and publishes it to the room.
    Publish(PublishedMedia),
    /// The participant receives: the node may send one of the room's tracks in it.
    Receive(ViewedMedia),
    /// The participant's data channels (RFC 8841): SCTP over the bundle's DTLS association.
    Data(DataMedia),
}

/// A participant's data channel section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataMedia {
    /// The section's `a=mid`.
    pub mid: String,
    /// What the participant said of its SCTP end.
    pub sctp: SctpOffer,
}

impl ParticipantMedia {
    /// The section's mid, whichever way it goes.
    pub fn mid(&self) -> &str {
        match self {
            Self::Publish(media) => &media.mid,
            Self::Receive(media) => &media.mid,
            Self::Data(media) => &media.mid,
        }
    }
}

/// The plan of a participant's offer, section by section in the offer's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParticipantPlan {
    /// The participant allows one- and two-byte header extensions to mix.
    pub extmap_allow_mixed: bool,
    /// One entry per offered media section.
    pub sections: Vec<Section<ParticipantMedia>>,
}

impl ParticipantPlan {
    /// The participant's data channel section, when it offered one the node serves.
    pub fn data(&self) -> Option<&DataMedia> {
        self.sections.iter().find_map(|s| match s.accepted()? {
            ParticipantMedia::Data(media) => Some(media),
            _ => None,
        })
    }
}

/// Plans a participant's offer: sending sections (`sendonly`, `sendrecv`; the node only
/// receives in them) as a publisher's, `recvonly` ones as a viewer's with every supported
/// codec, and its one data channel section. Fails like a publisher's offer when a sending section's packets cannot be told
/// apart, and when no section is usable.
pub fn negotiate_participant(offer: &Offer) -> Result<ParticipantPlan, SdpError> {
    let mut unidentifiable = None;
    let mut data_sections = 0;
    let plan_data = |media: &OfferedMedia, sctp| {
        data_sections += 1;
        // One SCTP association per DTLS association: a second section could not be told apart.
        Some(match data_sections {
            1 => Ok(ParticipantMedia::Data(DataMedia {
                mid: media.mid.clone(),
                sctp,
            })),
            _ => Err("a second data channel section: one carries all channels".to_owned()),
        })
    };
    let sections = plan_sections_with(
        offer,
        |media, kind| {
            if media.direction.sends() {
                plan_published(offer, media, kind, &mut unidentifiable)
                    .map(ParticipantMedia::Publish)
            } else {
                plan_viewed(media, kind, &[]).map(ParticipantMedia::Receive)
            }
        },
        plan_data,
    );
    if let Some(error) = unidentifiable {
        return Err(error);
    }
    Ok(ParticipantPlan {
        extmap_allow_mixed: offer.extmap_allow_mixed,
        sections: sections?,
    })
}

/// What of an offer must stay the same across a session's renegotiations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfferShape {
    /// The browser's ICE username fragment.
    pub ice_ufrag: String,
    /// The browser's ICE password.
    pub ice_pwd: String,
    /// The DTLS fingerprint, `algorithm value`.
    pub fingerprint: String,
    /// Each m-section's mid and media (`None`: neither audio nor video), in order.
    pub sections: Vec<(String, Option<MediaKind>)>,
}

impl OfferShape {
    /// What of `offer` later offers of the session must keep.
    pub fn of(offer: &Offer) -> Self {
        Self {
            ice_ufrag: offer.ice_ufrag.clone(),
            ice_pwd: offer.ice_pwd.clone(),
            fingerprint: format!(
                "{} {}",
                offer.fingerprint.algorithm, offer.fingerprint.value
            ),
            sections: offer
                .media
                .iter()
                .map(|m| (m.mid.clone(), m.kind))
                .collect(),
        }
    }

    /// Whether `next` restarts ICE (RFC 8839 section 4.4.1.1.1: new credentials).
    pub fn restarts_ice(&self, next: &OfferShape) -> bool {
        next.ice_ufrag != self.ice_ufrag || next.ice_pwd != self.ice_pwd
    }

    /// Whether `next` may follow this offer in the same session (its ICE credentials may
    /// change: [`restarts_ice`](Self::restarts_ice)); why not, if not.
    pub fn check_follows(&self, next: &OfferShape) -> Result<(), String> {
        if next.fingerprint != self.fingerprint {
            return Err("the DTLS fingerprint changed".to_owned());
        }
        if next.sections.len() < self.sections.len() {
            return Err(format!(
                "{} m-sections where the session has {}: sections are never removed",
                next.sections.len(),
                self.sections.len()
            ));
        }
        for (index, (was, now)) in self.sections.iter().zip(&next.sections).enumerate() {
            if was != now {
                return Err(format!(
                    "m-section {index} is mid {} ({}) where the session has mid {} ({})",
                    now.0,
                    kind_name(now.1),
                    was.0,
                    kind_name(was.1)
                ));
            }
        }
        Ok(())
    }
}

fn kind_name(kind: Option<MediaKind>) -> &'static str {
    match kind {
        Some(MediaKind::Audio) => "audio",
        Some(MediaKind::Video) => "video",
        None => "other",
    }
}
