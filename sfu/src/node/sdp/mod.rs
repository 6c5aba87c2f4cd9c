//! SDP offer/answer (RFC 3264, RFC 8829) for WHIP publishers, WHEP viewers and conference
//! participants.
//!
//! - [`offer`]: a session description read into the fields the node uses.
//! - [`negotiate`]: what to accept from a publisher's or a viewer's offer.
//! - [`participant`]: a participant's offer, and what a renegotiation's must keep.
//! - [`answer`]: the answer written from a plan.
//! - [`fragment`]: a trickle ICE fragment's credentials.
//! - [`mod@format`] and [`h264_profile`]: which codec formats are forwarded and which a viewer
//!   decodes.

pub mod answer;
pub mod format;
pub mod fragment;
pub mod h264_profile;
pub mod negotiate;
pub mod offer;
pub mod participant;

#[cfg(test)]
mod tests;

pub use answer::{build_answer, AnswerMedia, AnswerParams, SendSource};
pub use fragment::{read_fragment, restart_answer, FragmentIce};
pub use negotiate::{
    negotiate_publisher, negotiate_viewer, refusals, Demux, InactiveMedia, PublishedMedia,
    PublisherPlan, RoomCodec, Section, ViewedMedia, ViewerPlan,
};
pub use offer::{
    parse_description, parse_offer, parse_offer_within, Direction, Extmap, Fingerprint, Offer,
    OfferedCodec, OfferedMedia, SctpOffer, SsrcInfo, DEFAULT_MAX_MESSAGE_SIZE, DEFAULT_SCTP_PORT,
};
pub use participant::{
    negotiate_participant, DataMedia, OfferShape, ParticipantMedia, ParticipantPlan,
};

use rand::Rng;

/// The largest SDP body accepted. A browser offer with every codec is about 10 KiB; anything
/// much larger is not a browser offer and is refused before parsing.
pub const MAX_SDP_LEN: usize = 64 * 1024;
/// The largest conference participant's offer: a browser's receiving sections are some 6 KiB
/// for each other participant's audio and video, so a room of 50 needs about 300 KiB.
pub const MAX_PARTICIPANT_SDP_LEN: usize = 512 * 1024;

/// Why an SDP body was refused. The Display text is the body of the HTTP 400 answer, so it
/// says what is wrong in the offer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SdpError {
    /// The body is above the limit ([`MAX_SDP_LEN`], or [`MAX_PARTICIPANT_SDP_LEN`] for a
    /// participant's offer).
    #[error("SDP of {len} bytes is above the limit of {limit} bytes")]
    TooLarge {
        /// The body's length.
        len: usize,
        /// The limit it is above.
        limit: usize,
    },
    /// A line is not of the `<letter>=<value>` form (RFC 8866 section 5); the line number
    /// counts from 1.
    #[error("not SDP: line {0}")]
    NotSdp(usize),
    /// The lines are of the right form but not in the order or with the values RFC 8866
    /// requires.
    #[error("not SDP: {0}")]
    Syntax(String),
    /// No `a=ice-ufrag`, at session or media level.
    #[error("no ice-ufrag")]
    NoIceUfrag,
    /// No `a=ice-pwd`, at session or media level.
    #[error("no ice-pwd")]
    NoIcePwd,
    /// No `a=fingerprint`, at session or media level.
    #[error("no fingerprint")]
    NoFingerprint,
    /// No `m=` section.
    #[error("no media")]
    NoMedia,
    /// No `a=group:BUNDLE`: the node serves every media section on one transport.
    #[error("no BUNDLE")]
    NoBundle,
    /// A media section without `a=mid`; the number counts sections from 0.
    #[error("no mid in media section {0}")]
    NoMid(usize),
    /// An attribute the node reads has a value it cannot read.
    #[error("bad a={attribute}:{value}")]
    BadAttribute {
        /// The attribute's name.
        attribute: &'static str,
        /// The value as written in the SDP.
        value: String,
    },
    /// A sending section without `a=ssrc` or `a=rid` lines whose packets could not be told
    /// from another section's: no mid header extension, and a payload type another section of
    /// the bundle offers too (RFC 8843 section 9.2).
    #[error(
        "mid {mid}: no a=ssrc or a=rid lines, no mid header extension, and payload type \
         {payload_type} is offered by another section of the BUNDLE group, so its packets \
         cannot be told apart"
    )]
    Unidentifiable {
        /// The section's `a=mid`.
        mid: String,
        /// The payload type shared with another section.
        payload_type: u8,
    },
    /// A simulcast section whose packets cannot name their rid: the rtp-stream-id header
    /// extension (RFC 8852) is not negotiated.
    #[error("mid {mid}: a=rid lines without the rtp-stream-id header extension")]
    RidWithoutExtension {
        /// The section's `a=mid`.
        mid: String,
    },
    /// No media section can be accepted; the text says why for each section.
    #[error("no usable media: {0}")]
    NoUsableMedia(String),
    /// A media section lists more of something than any offer needs; the number counts
    /// sections from 0.
    #[error("media section {section}: more than {limit} {what}")]
    TooMany {
        /// The section.
        section: usize,
        /// What it lists too many of.
        what: &'static str,
        /// How many the node reads at most.
        limit: usize,
    },
    /// Two media sections carry the same `a=mid` (RFC 8843 section 7.2.1 needs each unique).
    #[error("a=mid:{0} names two media sections")]
    DuplicateMid(String),
    /// `a=group:BUNDLE` names more mids than there are media sections.
    #[error("a=group:BUNDLE names {mids} mids for {sections} media sections")]
    BundleTooLong {
        /// The mids the group names.
        mids: usize,
        /// The media sections.
        sections: usize,
    },
}

/// Payload types an `m=` line lists at most: RTP's are 7 bits (RFC 3550 section 5.1), so
/// more are repeats.
pub const MAX_FORMATS: usize = 128;
/// Distinct `a=ssrc` sources a media section declares at most: a browser's simulcast section
/// declares six (three streams and their RTX).
pub const MAX_SSRCS: usize = 32;
/// `a=rid` lines a media section declares at most in each direction: a browser's simulcast
/// declares three.
pub const MAX_RIDS: usize = 16;

/// The characters of `ice-char` (RFC 8839 section 5.4).
const ICE_CHARS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// A fresh ICE username fragment of 8 characters and password of 24 characters. RFC 8839
/// asks for at least 24 bits of randomness in the fragment and 128 bits in the password;
/// 8 and 24 characters of 6 bits each give 48 and 144.
pub fn random_ice_credentials() -> (String, String) {
    (random_ice_string(8), random_ice_string(24))
}

fn random_ice_string(len: usize) -> String {
    let mut rng = rand::rng();
    (0..len)
        .map(|_| char::from(ICE_CHARS[rng.random_range(0..ICE_CHARS.len())]))
        .collect()
}
