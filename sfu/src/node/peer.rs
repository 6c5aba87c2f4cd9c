//! One WHIP or WHEP session: its ICE credentials, the address it was nominated at, its SRTP
//! context once DTLS is done, and what it publishes or watches.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::time::Instant;

use rtp_ext::codec::{Codec, MediaKind};
use rtp_ext::rtp::RtpPacket;
use selector::{Layer, LayerLimits};

use super::sdp::{format, Fingerprint, RoomCodec};
use super::srtp::SrtpContext;
use crate::engine::{DownTrackId, StreamConfig, TrackConfig, TrackId, TransportId};

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
    /// Its peer connection in the engine: what it publishes and receives.
    pub transport: TransportId,
    pub room: String,
    pub ice: IceCredentials,
    pub fingerprint: Option<Fingerprint>,
    pub owner: Option<Owner>,
    pub client: Option<IpAddr>,
    /// Where the browser nominated (or, before nomination, first proved it knows our
    /// password from): all our packets to it go there.
    pub addr: Option<SocketAddr>,
    pub srtp: Option<Box<dyn SrtpContext>>,
    /// The latest bandwidth estimate its receiver sent (REMB), if any.
    pub estimate_bps: Option<u64>,
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
    /// Extension id of the mid (RFC 8843 section 15), to bind streams the SDP gave no SSRC.
    pub mid_ext: Option<u8>,
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
    /// The codec's format parameters as the publisher wrote them: viewers get the track only
    /// in a format that decodes it (an H.264 profile, a VP9 or AV1 profile).
    pub fmtp: String,
    /// How the single stream of a section without `a=ssrc` or `a=rid` lines is recognised;
    /// `None` when the SDP named its SSRC or it is simulcast.
    pub unsignaled: Option<Unsignaled>,
}

/// What tells apart the packets of a stream whose SSRC the SDP did not give (RFC 8843
/// section 9.2): the mid they carry, or failing that a payload type unique in the bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsignaled {
    /// The section's mid, when the mid header extension is negotiated.
    pub mid: Option<String>,
    /// No other section of the bundle offers these payload types.
    pub by_payload_type: bool,
    pub payload_type: u8,
    pub rtx_payload_type: Option<u8>,
}

impl Unsignaled {
    /// Whether a packet with this mid (when it carries one) and payload type is this stream's
    /// or its RTX stream's.
    fn claims(&self, mid: Option<&str>, payload_type: u8) -> bool {
        let ours = payload_type == self.payload_type || Some(payload_type) == self.rtx_payload_type;
        match (mid, &self.mid) {
            (Some(mid), Some(own)) => ours && mid == own,
            _ => ours && self.by_payload_type,
        }
    }
}

/// A simulcast stream whose SSRC a packet has just revealed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding {
    pub track: TrackId,
    pub index: usize,
    pub ssrcs: StreamConfig,
}

impl Publisher {
    /// Whether some stream may still get an SSRC from its packets: a simulcast stream, or one
    /// the SDP gave no SSRC. Their SSRC (or RTX SSRC) may also change when the publisher
    /// restarts a stream, so this stays true.
    pub fn has_unbound(&self) -> bool {
        self.tracks
            .iter()
            .any(|t| !t.rids.is_empty() || t.unsignaled.is_some())
    }

    /// Names the stream a packet of unknown SSRC belongs to, with that SSRC filled in: by its
    /// rid (or repaired rid) under simulcast, else by its mid or payload type.
    pub fn bind(&mut self, packet: &RtpPacket<'_>) -> Option<Binding> {
        self.bind_rid(packet)
            .or_else(|| self.bind_unsignaled(packet))
    }

    /// The format parameters a published track was announced with.
    pub fn format_of(&self, track: TrackId) -> Option<&str> {
        self.tracks
            .iter()
            .find(|t| t.id == Some(track))
            .map(|t| t.fmtp.as_str())
    }

    fn bind_unsignaled(&mut self, packet: &RtpPacket<'_>) -> Option<Binding> {
        let fields = packet.fields();
        let mid = self
            .mid_ext
            .and_then(|id| packet.extension(id))
            .and_then(|value| std::str::from_utf8(value).ok());
        let track = self.tracks.iter_mut().find(|t| {
            t.unsignaled
                .as_ref()
                .is_some_and(|u| u.claims(mid, fields.payload_type))
        })?;
        let repair = track.unsignaled.as_ref()?.rtx_payload_type == Some(fields.payload_type);
        let stream = track.config.streams.first_mut()?;
        if repair {
            stream.rtx_ssrc = Some(fields.ssrc);
        } else {
            stream.ssrc = fields.ssrc;
        }
        Some(Binding {
            track: track.id?,
            index: 0,
            ssrcs: *stream,
        })
    }

    fn bind_rid(&mut self, packet: &RtpPacket<'_>) -> Option<Binding> {
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewerCodec {
    pub codec: Codec,
    pub payload_type: u8,
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
                fmtp: String::new(),
                unsignaled: None,
            }],
            rid_ext: Some(RID),
            repaired_rid_ext: Some(RRID),
            mid_ext: None,
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

    /// A publisher whose two sections had no `a=ssrc` lines: video on payload type 96 (RTX
    /// 97) and audio on 111, told apart by the mid "v" and "a" or, for video, by payload type.
    fn unsignaled_publisher() -> Publisher {
        let track = |mid: &str, pt, rtx, by_payload_type, id: u32| PublishedTrack {
            config: TrackConfig::single(Codec::Vp8, 0xF000 + id),
            rids: Vec::new(),
            id: Some(TrackId(id)),
            fmtp: String::new(),
            unsignaled: Some(Unsignaled {
                mid: Some(mid.to_owned()),
                by_payload_type,
                payload_type: pt,
                rtx_payload_type: rtx,
            }),
        };
        Publisher {
            tracks: vec![
                track("v", 96, Some(97), true, 1),
                track("a", 111, None, false, 2),
            ],
            rid_ext: None,
            repaired_rid_ext: None,
            mid_ext: Some(RID),
            codecs: Vec::new(),
        }
    }

    fn with_payload_type(mut packet: Vec<u8>, payload_type: u8) -> Vec<u8> {
        packet[1] = payload_type;
        packet
    }

    #[test]
    fn streams_without_ssrcs_bind_by_mid_or_unique_payload_type() {
        let mut publisher = unsignaled_publisher();
        assert!(publisher.has_unbound());
        // By the mid: the audio track, whose payload type alone would not do.
        let audio = with_payload_type(packet_with(0xA0, RID, "a"), 111);
        let bound = publisher
            .bind(&RtpPacket::parse(&audio).expect("rtp"))
            .expect("mid a");
        assert_eq!((bound.track, bound.ssrcs.ssrc), (TrackId(2), 0xA0));
        // A packet naming another section's mid is not taken by payload type.
        let wrong = with_payload_type(packet_with(0xB0, RID, "a"), 96);
        assert_eq!(
            publisher.bind(&RtpPacket::parse(&wrong).expect("rtp")),
            None
        );
        // Without a mid, by payload type: media then RTX.
        let mut video = with_payload_type(packet_with(0xC0, RID, "v"), 96);
        video[0] = 0x80;
        let bound = publisher
            .bind(&RtpPacket::parse(&video).expect("rtp"))
            .expect("payload type 96");
        assert_eq!((bound.track, bound.ssrcs.ssrc), (TrackId(1), 0xC0));
        let mut rtx = with_payload_type(packet_with(0xC1, RID, "v"), 97);
        rtx[0] = 0x80;
        let bound = publisher
            .bind(&RtpPacket::parse(&rtx).expect("rtp"))
            .expect("payload type 97");
        assert_eq!(
            bound.ssrcs,
            StreamConfig {
                ssrc: 0xC0,
                rtx_ssrc: Some(0xC1)
            }
        );
        // Audio has no unique payload type: without its mid it is not bound.
        let mut bare = with_payload_type(packet_with(0xD0, RID, "a"), 111);
        bare[0] = 0x80;
        assert_eq!(publisher.bind(&RtpPacket::parse(&bare).expect("rtp")), None);
    }

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
