//! One WHIP or WHEP session: its ICE credentials, the address it was nominated at, its SRTP
//! context once DTLS is done, and what it publishes or watches.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::time::Instant;

use rtp_ext::codec::{Codec, MediaKind};
use rtp_ext::rtp::RtpPacket;
use selector::{Layer, LayerLimits};

use super::sdp::{Fingerprint, RoomCodec};
use super::srtp::SrtpContext;
use crate::engine::{DownTrackId, StreamConfig, TrackConfig, TrackId};

/// A session, as the node names it and its resource URL shows it: 128 random bits, so
/// knowing a resource URL is knowing the session (nobody can walk to another's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeerId(pub u128);

impl PeerId {
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
    Publisher,
    Viewer,
}

impl Kind {
    /// The first segment of the session's resource URL.
    pub fn path(self) -> &'static str {
        match self {
            Self::Publisher => "whip",
            Self::Viewer => "whep",
        }
    }
}

/// Who created a session: a digest of the credential (the `Authorization` header) it was
/// created with. Changing or ending the session takes the same credential.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Owner([u8; 32]);

impl Owner {
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
    pub room: String,
    pub ice: IceCredentials,
    /// The client's certificate fingerprint from its offer: its DTLS handshake starts with
    /// its first DTLS record and must show that certificate. None: keys come some other way.
    pub fingerprint: Option<Fingerprint>,
    /// Whose credential may change or end it; None on an open node (the URL is the key).
    pub owner: Option<Owner>,
    /// The HTTP client's address, counted against the per-client limit.
    pub client: Option<IpAddr>,
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
        }
    }
}

/// The ICE credentials of a session: ours from the answer, the browser's from its offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IceCredentials {
    pub local_ufrag: String,
    pub local_pwd: String,
}

pub struct Peer {
    pub room: String,
    pub ice: IceCredentials,
    pub fingerprint: Option<Fingerprint>,
    pub owner: Option<Owner>,
    pub client: Option<IpAddr>,
    /// Where the browser nominated (or, before nomination, first proved it knows our
    /// password from): all our packets to it go there.
    pub addr: Option<SocketAddr>,
    pub srtp: Option<Box<dyn SrtpContext>>,
    /// The last valid binding request: ICE consent (RFC 7675) keeps it fresh.
    pub last_seen: Instant,
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

#[derive(Debug)]
pub enum Role {
    Publisher(Publisher),
    Viewer(Viewer),
}

impl Role {
    pub fn kind(&self) -> Kind {
        match self {
            Self::Publisher(_) => Kind::Publisher,
            Self::Viewer(_) => Kind::Viewer,
        }
    }
}

/// What a WHIP session sends.
#[derive(Debug, Default)]
pub struct Publisher {
    pub tracks: Vec<PublishedTrack>,
    /// Extension ids of rid and repaired rid (RFC 8852), to bind simulcast streams.
    pub rid_ext: Option<u8>,
    pub repaired_rid_ext: Option<u8>,
    /// What its answer accepted: a viewer joining the room negotiates against it.
    pub codecs: Vec<RoomCodec>,
}

/// A track as the publisher's SDP described it.
#[derive(Debug, Clone)]
pub struct PublishedTrack {
    pub config: TrackConfig,
    /// Simulcast rids, lowest layer first; empty when the SDP gave the SSRCs.
    pub rids: Vec<String>,
    /// The router's id once published.
    pub id: Option<TrackId>,
}

/// A simulcast stream whose SSRC a packet has just revealed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding {
    pub track: TrackId,
    pub index: usize,
    pub ssrcs: StreamConfig,
}

impl Publisher {
    /// Whether `ssrc` is one this session announced or bound (media or RTX): RTP under any
    /// other SSRC is not its to send, whatever track of the node has it.
    pub fn owns(&self, ssrc: u32) -> bool {
        self.tracks
            .iter()
            .flat_map(|t| &t.config.streams)
            .any(|s| s.ssrc == ssrc || s.rtx_ssrc == Some(ssrc))
    }

    /// Whether some simulcast stream still waits for its SSRC (or its RTX SSRC).
    pub fn has_unbound(&self) -> bool {
        self.tracks.iter().any(|t| !t.rids.is_empty())
    }

    /// Reads the rid (or repaired rid) of a packet of unknown SSRC and names the simulcast
    /// stream it belongs to, with that SSRC filled in.
    pub fn bind(&mut self, packet: &RtpPacket<'_>) -> Option<Binding> {
        let ssrc = packet.fields().ssrc;
        let (rid, repair) = self.rid_of(packet)?;
        let track = self.tracks.iter_mut().find(|t| t.rids.contains(&rid))?;
        let index = track.rids.iter().position(|r| *r == rid)?;
        let stream = track.config.streams.get_mut(index)?;
        if repair {
            stream.rtx_ssrc = Some(ssrc);
        } else {
            stream.ssrc = ssrc;
        }
        Some(Binding {
            track: track.id?,
            index,
            ssrcs: *stream,
        })
    }

    fn rid_of(&self, packet: &RtpPacket<'_>) -> Option<(String, bool)> {
        let read = |id: Option<u8>| {
            let value = packet.extension(id?)?;
            std::str::from_utf8(value).ok().map(str::to_owned)
        };
        match read(self.rid_ext) {
            Some(rid) => Some((rid, false)),
            None => read(self.repaired_rid_ext).map(|rid| (rid, true)),
        }
    }
}

/// What a WHEP session receives.
#[derive(Debug)]
pub struct Viewer {
    pub video: Option<ViewerMedia>,
    pub audio: Option<ViewerMedia>,
    /// The layer asked for (query string or PATCH).
    pub target: Layer,
}

/// One receiving m-line of a viewer: the SSRCs we announced and the codecs it accepts.
#[derive(Debug, Clone)]
pub struct ViewerMedia {
    pub ssrc: u32,
    pub rtx_ssrc: u32,
    pub codecs: Vec<ViewerCodec>,
    pub dd_ext_id: Option<u8>,
    pub two_byte_allowed: bool,
    /// The subscription, while a matching track is published in the room.
    pub down_track: Option<DownTrackId>,
}

/// A codec the viewer accepts, with its payload types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViewerCodec {
    pub codec: Codec,
    pub payload_type: u8,
    pub rtx_payload_type: Option<u8>,
}

impl Viewer {
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
    use smallvec::SmallVec;

    use super::*;

    const RID: u8 = 10;
    const RRID: u8 = 11;

    fn publisher() -> Publisher {
        let mut config = TrackConfig::single(Codec::Vp8, 0xF000);
        config.streams = SmallVec::from_slice(&[
            StreamConfig {
                ssrc: 0xF000,
                rtx_ssrc: None,
            },
            StreamConfig {
                ssrc: 0xF001,
                rtx_ssrc: None,
            },
        ]);
        Publisher {
            tracks: vec![PublishedTrack {
                config,
                rids: vec!["q".into(), "f".into()],
                id: Some(TrackId(7)),
            }],
            rid_ext: Some(RID),
            repaired_rid_ext: Some(RRID),
            codecs: Vec::new(),
        }
    }

    /// An RTP header with one one-byte-form extension element (RFC 8285 section 4.2).
    fn packet_with(ssrc: u32, ext: u8, rid: &str) -> Vec<u8> {
        let mut element = vec![(ext << 4) | (rid.len() as u8 - 1)];
        element.extend_from_slice(rid.as_bytes());
        element.resize(element.len().div_ceil(4) * 4, 0);
        let words = (element.len() / 4) as u16;
        let mut packet = vec![0x90, 96, 0, 1, 0, 0, 0, 2];
        packet.extend_from_slice(&ssrc.to_be_bytes());
        packet.extend_from_slice(&[0xBE, 0xDE]);
        packet.extend_from_slice(&words.to_be_bytes());
        packet.extend_from_slice(&element);
        packet.push(0xAB);
        packet
    }

    #[test]
    fn rid_and_repaired_rid_bind_media_and_rtx_ssrcs() {
        let mut publisher = publisher();
        let media = packet_with(0xAAAA, RID, "f");
        let bound = publisher
            .bind(&RtpPacket::parse(&media).expect("rtp"))
            .expect("rid f is stream 1");
        assert_eq!((bound.track, bound.index), (TrackId(7), 1));
        assert_eq!(bound.ssrcs.ssrc, 0xAAAA);
        let rtx = packet_with(0xBBBB, RRID, "f");
        let bound = publisher
            .bind(&RtpPacket::parse(&rtx).expect("rtp"))
            .expect("repaired rid f");
        assert_eq!(
            bound.ssrcs,
            StreamConfig {
                ssrc: 0xAAAA,
                rtx_ssrc: Some(0xBBBB)
            }
        );
        let unknown = packet_with(0xCCCC, RID, "h");
        assert_eq!(
            publisher.bind(&RtpPacket::parse(&unknown).expect("rtp")),
            None
        );
    }

    #[test]
    fn av1_without_dd_is_capped_to_the_base_spatial_layer() {
        let viewer = Viewer {
            video: None,
            audio: None,
            target: Layer::new(2, 2),
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
