//! One WHIP or WHEP session: its ICE credentials, the address it was nominated at, its SRTP
//! context once DTLS is done, and what it publishes or watches.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use std::time::Instant;

use rtp_ext::codec::{Codec, MediaKind};
use selector::{Layer, LayerLimits};

use super::dtls::DtlsAssociation;
use super::ice::TransactionBytes;
use super::participant::{Identity, Participant, ParticipantId};
use super::remote::Remote;
use super::sdp::{format, Fingerprint, RoomCodec};
use super::srtp::SrtpContext;
use crate::engine::{DownTrackId, TrackConfig, TrackId, TransportId};

/// A session, as the node names it and its resource URL shows it: 128 random bits, so
/// knowing a resource URL is knowing the session (nobody can walk to another's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeerId(pub u128);

impl PeerId {
    /// A fresh id from the thread's cryptographic generator.
    pub fn random() -> Self {
        Self(rand::random())
    }
}

impl fmt::Display for PeerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// A resource URL's last segment that is not a session id of ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAPeerId;

impl FromStr for PeerId {
    type Err = NotAPeerId;

    /// Exactly the 32 lower-case hex digits [`Display`](fmt::Display) writes.
    fn from_str(s: &str) -> Result<Self, NotAPeerId> {
        let hex = s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        hex.then(|| u128::from_str_radix(s, 16).ok())
            .flatten()
            .map(Self)
            .ok_or(NotAPeerId)
    }
}

/// Which side of a room a session is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// WHIP: publishes only.
    Publisher,
    /// WHEP: watches only.
    Viewer,
    /// A conference participant: publishes and receives on one peer connection.
    Participant,
}

impl Kind {
    /// The first segment of the session's resource URL.
    pub fn path(self) -> &'static str {
        match self {
            Self::Publisher => "whip",
            Self::Viewer => "whep",
            Self::Participant => "rooms",
        }
    }
}

/// Who created a session: a digest of the credential (the `Authorization` header) it was
/// created with. Changing or ending the session takes the same credential.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Owner([u8; 32]);

impl Owner {
    /// The owner the `Authorization` header `credential` makes: its SHA-256 digest, so the core
    /// keeps no secret.
    pub fn of(credential: &str) -> Self {
        use sha2::{Digest, Sha256};
        Self(Sha256::digest(credential.as_bytes()).into())
    }
}

impl fmt::Debug for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The digest of a secret is not for logs.
        f.write_str("Owner(..)")
    }
}

/// Everything about a new session besides its media.
#[derive(Debug, Clone)]
pub struct Join {
    /// The room, checked against the node's room name rules.
    pub room: String,
    /// The node's ICE credentials for the session, as its answer gives them.
    pub ice: IceCredentials,
    /// The client's certificate fingerprint from its offer: its DTLS handshake starts with
    /// its first DTLS record and must show that certificate. None: keys come some other way.
    pub fingerprint: Option<Fingerprint>,
    /// Whose credential may change or end it; None on an open node (the URL is the key).
    pub owner: Option<Owner>,
    /// The HTTP client's address, counted against the per-client limit.
    pub client: Option<IpAddr>,
    /// The client's ICE credentials from its offer: a trickle fragment naming others asks
    /// for an ICE restart. None: the session came without an offer (a relay, tests).
    pub remote_ice: Option<RemoteIce>,
    /// The name a publishing or conference session goes by in its room.
    pub name: Option<String>,
    /// The public id it goes by, unless another session on this node has it: a relay-in's
    /// is its publisher's on the origin, so the room names the relayed tracks' owner alike on
    /// every node.
    pub public: Option<ParticipantId>,
}

impl Join {
    /// A session in `room` with nothing but its ICE credentials.
    pub fn new(room: &str, ice: IceCredentials) -> Self {
        Self {
            room: room.to_owned(),
            ice,
            fingerprint: None,
            owner: None,
            client: None,
            remote_ice: None,
            name: None,
            public: None,
        }
    }
}

/// A move a connected session waits for: the address it was nominated at, and the
/// transaction of the node's check there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    /// The address nominated.
    pub to: Remote,
    /// The check's transaction id: only the address it was sent to learns it.
    pub transaction: TransactionBytes,
}

/// The client's own ICE credentials (`a=ice-ufrag`, `a=ice-pwd` of its offer). An ICE-lite
/// agent sends no checks, so it needs them only to tell an ICE restart from a trickled
/// candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteIce {
    /// The client's username fragment.
    pub ufrag: String,
    /// The client's password.
    pub pwd: String,
}

/// The node's ICE credentials for a session, as its answer gives them: the browser's binding
/// requests name the ufrag and prove the password (RFC 8445 §7.2.2). The browser's own are
/// not needed by an ICE-lite agent, which sends no requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IceCredentials {
    /// The node's username fragment (`a=ice-ufrag`): a binding request's USERNAME starts with it,
    /// and the core finds the session by it.
    pub local_ufrag: String,
    /// The node's password (`a=ice-pwd`): the key of every binding request's MESSAGE-INTEGRITY.
    pub local_pwd: String,
}

/// One session as the core keeps it: its transport in the engine, its room, what it proves
/// itself with (ICE, DTLS), where it is and how it is protected, and its role.
pub struct Peer {
    /// Its peer connection in the engine: what it publishes and receives.
    pub transport: TransportId,
    /// Its room: every session is in exactly one.
    pub room: String,
    /// The node's ICE credentials for it, which its binding requests must prove.
    pub ice: IceCredentials,
    /// The node's credentials before its last ICE restart, answered too until a binding
    /// request proves the new ones (the client checks its old pair until its new one works).
    pub previous_ice: Option<IceCredentials>,
    /// The certificate its DTLS handshake must show (from its offer); `None`: keys come some
    /// other way (tests, the fuzz target).
    pub fingerprint: Option<Fingerprint>,
    /// Whose credential may change or end it; `None` on an open node.
    pub owner: Option<Owner>,
    /// The HTTP client's address that created it, whose count it is part of.
    pub client: Option<IpAddr>,
    /// The client's ICE credentials from its offer, if it made one.
    pub remote_ice: Option<RemoteIce>,
    /// Where the browser nominated (or, before nomination, first proved it knows our
    /// password from): all our packets to it go there.
    pub addr: Option<Remote>,
    /// The address it was nominated at since it connected, and the node's check there: it
    /// moves there once its client answers.
    pub moving: Option<Move>,
    /// Its SRTP context, once its handshake yielded keys: `None` until then, and no media passes.
    pub srtp: Option<Box<dyn SrtpContext>>,
    /// Its DTLS association, from its first DTLS record (boxed: a handshake holds buffers).
    pub dtls: Option<Box<DtlsAssociation>>,
    /// When its association's timer is due, as the core's timers hold it.
    pub dtls_timer: Option<Instant>,
    /// The latest bandwidth estimate the engine holds for it (its REMB, or its transport-wide
    /// CC feedback), if any.
    pub estimate_bps: Option<u64>,
    /// The layer allocation last capped its video subscription at, with that subscription:
    /// a subscription that replaced it (the room's next publisher) has none until allocation
    /// runs for it.
    pub allocated: Option<(DownTrackId, Layer)>,
    /// The last valid binding request from its address: ICE consent (RFC 7675) keeps it
    /// fresh on the pair in use, not on others.
    pub last_seen: Instant,
    /// Until when it may take to have its keys, `None` once it has them (or needs none): a
    /// session that answers ICE but never finishes its handshake holds a handshake's place
    /// only this long.
    pub connect_by: Option<Instant>,
    /// How a publishing or conference session is known in its room.
    pub identity: Option<Identity>,
    /// Whether it publishes, watches or takes part in a conference, with what that needs.
    pub role: Role,
}

impl fmt::Debug for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Peer")
            .field("room", &self.room)
            .field("addr", &self.addr)
            .field("srtp", &self.srtp.is_some())
            .field("role", &self.role)
            .finish()
    }
}

/// What a session does in its room, with the state that takes.
#[derive(Debug)]
pub enum Role {
    /// A WHIP session: publishes its tracks.
    Publisher(Publisher),
    /// A WHEP session: watches one publisher's tracks.
    Viewer(Viewer),
    /// Boxed: its sections and choices are larger than the other roles.
    Participant(Box<Participant>),
}

impl Role {
    /// The kind of resource URL the session has.
    pub fn kind(&self) -> Kind {
        match self {
            Self::Publisher(_) => Kind::Publisher,
            Self::Viewer(_) => Kind::Viewer,
            Self::Participant(_) => Kind::Participant,
        }
    }

    /// What it publishes, if it publishes.
    pub fn publisher(&self) -> Option<&Publisher> {
        match self {
            Self::Publisher(publisher) => Some(publisher),
            Self::Participant(participant) => Some(&participant.publisher),
            Self::Viewer(_) => None,
        }
    }

    /// What it publishes, to change.
    pub fn publisher_mut(&mut self) -> Option<&mut Publisher> {
        match self {
            Self::Publisher(publisher) => Some(publisher),
            Self::Participant(participant) => Some(&mut participant.publisher),
            Self::Viewer(_) => None,
        }
    }
}

/// What a WHIP session sends.
#[derive(Debug, Default)]
pub struct Publisher {
    /// Its tracks, in the order of its offer's sections.
    pub tracks: Vec<PublishedTrack>,
    /// What its answer accepted: a viewer joining the room negotiates against it.
    pub codecs: Vec<RoomCodec>,
}

/// A track as the publisher's SDP described it.
#[derive(Debug, Clone)]
pub struct PublishedTrack {
    /// The mid of the section it is sent in.
    pub mid: String,
    /// What the engine publishes it with, stream naming (rid, mid) included.
    pub config: TrackConfig,
    /// The router's id once published.
    pub id: Option<TrackId>,
    /// A relayed track's id on its origin, which the room's state and events name it by
    /// (the edge's router gives it another).
    pub origin: Option<u32>,
    /// The codec's format parameters as the publisher wrote them: viewers get the track only
    /// in a format that decodes it (an H.264 profile, a VP9 or AV1 profile).
    pub fmtp: String,
}

impl Publisher {
    /// The format parameters a published track was announced with.
    pub fn format_of(&self, track: TrackId) -> Option<&str> {
        self.tracks
            .iter()
            .find(|t| t.id == Some(track))
            .map(|t| t.fmtp.as_str())
    }
}

/// What a WHEP session receives.
#[derive(Debug)]
pub struct Viewer {
    /// Its video section, when its offer had one the node could serve.
    pub video: Option<ViewerMedia>,
    /// Its audio section, likewise.
    pub audio: Option<ViewerMedia>,
    /// The layer asked for (query string or PATCH).
    pub target: Layer,
    /// The participant it watches, by name; `None`: the room's first publisher.
    pub source: Option<String>,
}

/// One receiving m-line of a viewer: the SSRCs we announced and the codecs it accepts.
#[derive(Debug, Clone)]
pub struct ViewerMedia {
    /// The SSRC the node sends the section's track under, as the answer announces it.
    pub ssrc: u32,
    /// The SSRC of retransmissions (RFC 4588) in the section.
    pub rtx_ssrc: u32,
    /// The codecs the viewer accepts in the section, in its order of preference.
    pub codecs: Vec<ViewerCodec>,
    /// The Dependency Descriptor extension's id, when negotiated: the engine selects AV1 and
    /// other SVC layers by it and rewrites it per viewer.
    pub dd_ext_id: Option<u8>,
    /// Whether the section negotiated `a=extmap-allow-mixed` (RFC 8285 §6): the header may use
    /// the two-byte extension form a large descriptor needs.
    pub two_byte_allowed: bool,
    /// The transport-wide sequence number extension, when the viewer negotiated
    /// transport-wide CC: its packets carry the sequence and it sends feedback.
    pub transport_cc_ext_id: Option<u8>,
    /// The subscription, while a matching track is published in the room.
    pub down_track: Option<DownTrackId>,
}

/// A codec the viewer accepts, with its payload types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewerCodec {
    /// Which codec: a track is sent in a section only in one the viewer decodes.
    pub codec: Codec,
    /// The viewer's payload type for it, which the node writes into each packet.
    pub payload_type: u8,
    /// The viewer's payload type for its retransmissions (RFC 4588), when it has one.
    pub rtx_payload_type: Option<u8>,
    /// The viewer's format parameters for it.
    pub fmtp: String,
}

impl ViewerMedia {
    /// The first of the viewer's codecs that decodes a track of `codec` announced with
    /// `fmtp`.
    pub fn codec_for(&self, codec: Codec, fmtp: &str) -> Option<&ViewerCodec> {
        self.codecs
            .iter()
            .find(|c| c.codec == codec && format::decodes(codec, fmtp, &c.fmtp))
    }
}

impl Viewer {
    /// Its section of `kind`, if it has one.
    pub fn media_mut(&mut self, kind: MediaKind) -> Option<&mut ViewerMedia> {
        match kind {
            MediaKind::Audio => self.audio.as_mut(),
            MediaKind::Video => self.video.as_mut(),
        }
    }

    /// Whether every section it receives has its subscription.
    pub fn is_served(&self) -> bool {
        [&self.video, &self.audio]
            .into_iter()
            .flatten()
            .all(|m| m.down_track.is_some())
    }

    /// The limits of the video subscription. AV1 carries its layers only in the DD, so a
    /// viewer without it gets the base spatial layer alone: its frames depend on nothing
    /// else, and a decoder fed several spatial layers without their DD cannot sort them.
    pub fn limits(&self, codec: Codec, dd_ext_id: Option<u8>) -> LayerLimits {
        let max = if codec == Codec::Av1 && dd_ext_id.is_none() {
            Layer::new(0, u8::MAX)
        } else {
            Layer::MAX
        };
        LayerLimits {
            target: self.target,
            max,
        }
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn an_h264_track_goes_out_in_the_viewers_format_that_decodes_its_profile() {
        let h264 = |payload_type, fmtp: &str| ViewerCodec {
            codec: Codec::H264,
            payload_type,
            rtx_payload_type: None,
            fmtp: fmtp.to_owned(),
        };
        let media = ViewerMedia {
            ssrc: 1,
            rtx_ssrc: 2,
            codecs: vec![
                h264(102, "packetization-mode=1;profile-level-id=42001f"),
                h264(104, "packetization-mode=0;profile-level-id=42e01f"),
                h264(106, "packetization-mode=1;profile-level-id=42e01f"),
            ],
            dd_ext_id: None,
            two_byte_allowed: false,
            transport_cc_ext_id: None,
            down_track: None,
        };
        let x264 = "packetization-mode=1;profile-level-id=42c01e";
        let chosen = media.codec_for(Codec::H264, x264).map(|c| c.payload_type);
        assert_eq!(chosen, Some(106));
        let single_nal = "packetization-mode=0;profile-level-id=42c01e";
        let chosen = media
            .codec_for(Codec::H264, single_nal)
            .map(|c| c.payload_type);
        assert_eq!(chosen, Some(104));
        assert_eq!(
            media.codec_for(Codec::H264, "profile-level-id=64001f"),
            None
        );
        assert_eq!(media.codec_for(Codec::Vp8, ""), None);
    }

    proptest::proptest! {
        /// An id reads back from the text it writes; any other text is refused, never taken
        /// for a different id.
        #[test]
        fn peer_ids_round_trip(n: u128, text in "\\PC{0,40}") {
            let id = PeerId(n);
            proptest::prop_assert_eq!(id.to_string().parse(), Ok(id));
            if let Ok(parsed) = text.parse::<PeerId>() {
                proptest::prop_assert_eq!(parsed.to_string(), text);
            }
        }
    }

    #[test]
    fn av1_without_dd_is_capped_to_the_base_spatial_layer() {
        let viewer = Viewer {
            video: None,
            audio: None,
            target: Layer::new(2, 2),
            source: None,
        };
        assert_eq!(
            viewer.limits(Codec::Av1, None).effective(),
            Layer::new(0, 2)
        );
        assert_eq!(
            viewer.limits(Codec::Av1, Some(3)).effective(),
            Layer::new(2, 2)
        );
        assert_eq!(
            viewer.limits(Codec::Vp9, None).effective(),
            Layer::new(2, 2)
        );
    }
}
