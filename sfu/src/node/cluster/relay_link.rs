//! The control channel of the media relay: what an edge asks an origin for (`POST
//! /cluster/relay`), what the origin answers, how both are authenticated, and the SRTP keys
//! of the link they agree on.
//!
//! Both nodes hold the cluster's shared secret (`cluster.secret`). A request carries an
//! HMAC-SHA256 of its body under the secret (the `Strata-Relay-Auth` header), and its body a
//! time, so a copy replayed later than [`REQUEST_LIFETIME`] is refused; the answer is signed
//! the same way. The SRTP keys never travel: each side sends a random nonce, and both derive
//! the link's keys from the secret and the two nonces (HMAC-SHA256 as the pseudo-random
//! function, one output block per key and salt), so whoever reads the exchange learns
//! nothing of them.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use rtp_ext::codec::Codec;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use smallvec::SmallVec;

use crate::engine::{StreamConfig, StreamIds, TrackConfig};
use crate::node::core::{RelayOffer, LINKS_PER_NODE};
use crate::node::participant::ParticipantId;
use crate::node::peer::PublishedTrack;
use crate::node::sdp::RoomCodec;
use crate::node::srtp::{SrtpError, SrtpKeys, SrtpProfile, SrtpSession};

/// The header that carries a request's or an answer's HMAC, in hex.
pub const AUTH_HEADER: &str = "strata-relay-auth";
/// A request older (or further ahead) than this is refused.
pub const REQUEST_LIFETIME: Duration = Duration::from_secs(30);
/// The longest request or answer body read.
pub const MAX_BODY: usize = 16 * 1024;
/// The most tracks an answer may carry (a conference publisher's sections).
const MAX_TRACKS: usize = 16;
/// The most simulcast streams of one track.
const MAX_STREAMS: usize = 4;
/// The profile of every link.
const PROFILE: SrtpProfile = SrtpProfile::AeadAes128Gcm;
/// The SSRCs a link's SRTP keeps replay state for in each of RTP and RTCP: a link carries
/// every publisher its origin relays to the edge (each up to [`MAX_TRACKS`] tracks of
/// [`MAX_STREAMS`] streams, with their retransmissions), from a node the cluster's secret
/// vouches for; the bound holds its state to about 10 MB a kind.
const LINK_SRTP_STREAMS: usize = 65_536;

/// Why a request or an answer was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    /// No valid HMAC under the cluster's secret.
    #[error("not signed with the cluster's secret")]
    Unauthenticated,
    /// Older or later than [`REQUEST_LIFETIME`].
    #[error("the request's time is too far from ours")]
    Stale,
    /// Not the JSON expected, or too long.
    #[error("malformed relay request or answer")]
    Malformed,
    /// A track the edge could not publish: an unknown codec, too many streams or tracks.
    #[error("a relayed track is not one the node can publish")]
    BadTrack,
    /// A request for a room's data that names a publisher: it relays none.
    #[error("a relay of a room's data names no publisher")]
    DataWithSource,
    /// A node id that is empty, longer than 64 bytes or not printable ASCII.
    #[error("the edge's node id is not 1 to 64 printable ASCII characters")]
    BadNode,
    /// A room's name this node would not serve (see `limits.room_name_bytes`).
    #[error("the room's name is not one this node serves")]
    BadRoom,
}

impl LinkError {
    /// Each refusal's label for `/metrics`, in the variants' order.
    pub const LABELS: [&'static str; 7] = [
        "unauthenticated",
        "stale",
        "malformed",
        "bad_track",
        "data_with_source",
        "bad_node",
        "bad_room",
    ];
}

/// What an edge asks an origin to relay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RelayKind {
    /// A publisher's tracks (and, on the link, the data channels of its room).
    #[default]
    Publisher,
    /// The data channels of the room's participants alone.
    Data,
}

impl RelayKind {
    fn is_publisher(&self) -> bool {
        *self == Self::Publisher
    }
}

/// What an edge asks an origin: the publisher a viewer of `room` watches (`source`, or the
/// room's first), sent to `relay`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelayRequest {
    /// The room.
    pub room: String,
    /// The publisher's name, or `None` for the room's first.
    pub source: Option<String>,
    /// The relay socket of the edge's worker that serves the room: where the origin sends.
    pub relay: SocketAddr,
    /// The edge's nonce for the link's keys, in hex: a new link's, should the relay not go
    /// on one of `links`.
    pub nonce: String,
    /// The ids of the links the edge receives relays on: the origin's link to it among them
    /// carries this relay too.
    #[serde(default)]
    pub links: Vec<String>,
    /// When the edge asked, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// What is asked: a publisher (left out of the JSON, as before there were others), or the
    /// room's data alone.
    #[serde(default, skip_serializing_if = "RelayKind::is_publisher")]
    pub kind: RelayKind,
    /// The edge's node id, with a request for the room's data: the origin asks for the
    /// edge's in turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// The longest node id a request names (as a notice's, see `cluster.node`).
const MAX_NODE_BYTES: usize = 64;

/// What the origin answers: where its link end is, its nonce, and the publisher's tracks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelayAnswer {
    /// The relay socket of the origin's worker that serves the room: where the edge sends,
    /// and whence the media comes.
    pub relay: SocketAddr,
    /// The origin's nonce for the link's keys, in hex, which is also the link's id: the
    /// edge's link of that id carries the relay, or else a new one keyed from both nonces.
    pub nonce: String,
    /// The publisher's name in its room.
    pub name: Option<String>,
    /// Its public id in its room on the origin.
    #[serde(default)]
    pub participant: Option<ParticipantId>,
    /// Its tracks.
    pub tracks: Vec<WireTrack>,
    /// What its answer accepted, for the edge's viewers to negotiate against.
    pub codecs: Vec<WireCodec>,
    /// The relay's tag on its link, which the origin names it by when its track set
    /// changed.
    #[serde(default)]
    pub tag: u32,
}

/// A relayed track: what the edge publishes it with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireTrack {
    /// Its section's mid on the origin.
    pub mid: String,
    /// The codec's encoding name.
    pub codec: String,
    /// The RTP clock rate.
    pub clock_rate: u32,
    /// Each stream's media and RTX SSRC, lowest layer first.
    pub streams: Vec<(u32, Option<u32>)>,
    /// The Dependency Descriptor's extension id.
    pub dd_ext_id: Option<u8>,
    /// The audio level extension's id.
    pub audio_level_ext_id: Option<u8>,
    /// The codec's format parameters.
    pub fmtp: String,
    /// Its id on the origin, which the room's state names it by.
    #[serde(default)]
    pub id: Option<u32>,
}

/// A codec the publisher sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireCodec {
    /// The encoding name.
    pub codec: String,
    /// The format parameters.
    pub fmtp: String,
}

/// A fresh nonce, in hex.
pub fn nonce() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// Milliseconds since the Unix epoch now.
pub fn unix_ms() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

fn mac(secret: &str) -> Hmac<Sha256> {
    // HMAC takes a key of any length.
    Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length")
}

/// The HMAC of `body` under `secret`, in hex, for [`AUTH_HEADER`].
pub fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac = mac(secret);
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

/// Checks `tag` (from [`AUTH_HEADER`]) against `body`, in constant time.
pub fn verify(secret: &str, body: &[u8], tag: &str) -> Result<(), LinkError> {
    let tag = hex::decode(tag).map_err(|_| LinkError::Unauthenticated)?;
    let mut mac = mac(secret);
    mac.update(body);
    mac.verify_slice(&tag)
        .map_err(|_| LinkError::Unauthenticated)
}

/// A request's body, read once authenticated, and refused when out of its lifetime.
pub fn read_request(
    secret: &str,
    body: &[u8],
    tag: &str,
    now_ms: u64,
) -> Result<RelayRequest, LinkError> {
    verify(secret, body, tag)?;
    let request: RelayRequest = serde_json::from_slice(body).map_err(|_| LinkError::Malformed)?;
    if request.links.len() > LINKS_PER_NODE {
        return Err(LinkError::Malformed);
    }
    if request.kind == RelayKind::Data && request.source.is_some() {
        return Err(LinkError::DataWithSource);
    }
    let node_id = |n: &String| {
        (1..=MAX_NODE_BYTES).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_graphic())
    };
    if !request.node.as_ref().is_none_or(node_id) {
        return Err(LinkError::BadNode);
    }
    let lifetime = REQUEST_LIFETIME.as_millis() as u64;
    if request.at_ms.abs_diff(now_ms) > lifetime {
        return Err(LinkError::Stale);
    }
    Ok(request)
}

/// The link's keys from the origin's side (`origin`) or the edge's: derived from the secret
/// and both nonces, the same on both nodes, local and remote swapped.
pub fn link_keys(secret: &str, edge_nonce: &str, origin_nonce: &str, origin: bool) -> SrtpKeys {
    let block = |label: &[u8]| {
        let mut mac = mac(secret);
        mac.update(b"strata relay link ");
        mac.update(label);
        mac.update(edge_nonce.as_bytes());
        mac.update(b":");
        mac.update(origin_nonce.as_bytes());
        mac.finalize().into_bytes()
    };
    let (key, salt) = (PROFILE.key_len(), PROFILE.salt_len());
    let keys = SrtpKeys {
        profile: PROFILE,
        local_key: block(b"origin key")[..key].to_vec(),
        local_salt: block(b"origin salt")[..salt].to_vec(),
        remote_key: block(b"edge key")[..key].to_vec(),
        remote_salt: block(b"edge salt")[..salt].to_vec(),
    };
    if origin {
        keys
    } else {
        keys.mirrored()
    }
}

/// The SRTP session of a link with `keys` ([`link_keys`]).
pub fn link_session(keys: &SrtpKeys) -> Result<SrtpSession, SrtpError> {
    SrtpSession::with_streams(keys, LINK_SRTP_STREAMS)
}

impl RelayAnswer {
    /// The origin's answer for `offer`.
    pub fn new(relay: SocketAddr, nonce: String, offer: &RelayOffer) -> Self {
        let tracks = offer
            .tracks
            .iter()
            .map(|t| WireTrack {
                mid: t.mid.clone(),
                codec: t.config.codec.encoding_name().to_owned(),
                clock_rate: t.config.clock_rate,
                streams: t
                    .config
                    .streams
                    .iter()
                    .map(|s| (s.ssrc, s.rtx_ssrc))
                    .collect(),
                dd_ext_id: t.config.dd_ext_id,
                audio_level_ext_id: t.config.audio_level_ext_id,
                fmtp: t.fmtp.clone(),
                id: t.origin,
            })
            .collect();
        let codecs = offer
            .codecs
            .iter()
            .map(|c| WireCodec {
                codec: c.codec.encoding_name().to_owned(),
                fmtp: c.fmtp.clone(),
            })
            .collect();
        Self {
            relay,
            nonce,
            name: offer.name.clone(),
            participant: offer.participant,
            tracks,
            codecs,
            tag: offer.tag,
        }
    }

    /// What the edge publishes: every track checked, none trusted further than the secret.
    pub fn offer(&self) -> Result<RelayOffer, LinkError> {
        if self.tracks.len() > MAX_TRACKS || self.codecs.len() > MAX_TRACKS {
            return Err(LinkError::BadTrack);
        }
        let codec = |name: &str| Codec::from_encoding_name(name).ok_or(LinkError::BadTrack);
        let tracks = self
            .tracks
            .iter()
            .map(|t| {
                if t.streams.is_empty() || t.streams.len() > MAX_STREAMS {
                    return Err(LinkError::BadTrack);
                }
                let streams: SmallVec<[StreamConfig; 4]> = t
                    .streams
                    .iter()
                    .map(|&(ssrc, rtx_ssrc)| StreamConfig { ssrc, rtx_ssrc })
                    .collect();
                let config = TrackConfig {
                    clock_rate: t.clock_rate,
                    streams,
                    dd_ext_id: t.dd_ext_id,
                    audio_level_ext_id: t.audio_level_ext_id,
                    stream_ids: StreamIds::Signaled,
                    ..TrackConfig::single(codec(&t.codec)?, 0)
                };
                Ok(PublishedTrack {
                    mid: t.mid.clone(),
                    config,
                    id: None,
                    origin: t.id,
                    fmtp: t.fmtp.clone(),
                })
            })
            .collect::<Result<_, _>>()?;
        let codecs = self
            .codecs
            .iter()
            .map(|c| {
                Ok(RoomCodec {
                    codec: codec(&c.codec)?,
                    fmtp: c.fmtp.clone(),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(RelayOffer {
            name: self.name.clone(),
            participant: self.participant,
            tracks,
            codecs,
            tag: self.tag,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::srtp::{session, SrtpContext, MAX_OVERHEAD};

    fn request(at_ms: u64) -> RelayRequest {
        RelayRequest {
            room: "room".into(),
            source: None,
            relay: "10.0.0.2:50000".parse().expect("an address"),
            nonce: nonce(),
            links: Vec::new(),
            at_ms,
            kind: RelayKind::Publisher,
            node: None,
        }
    }

    #[test]
    fn a_request_is_read_only_signed_with_the_secret_and_in_its_lifetime() {
        let now = unix_ms();
        let body = serde_json::to_vec(&request(now)).expect("serializes");
        let tag = sign("secret", &body);
        assert_eq!(
            read_request("secret", &body, &tag, now),
            Ok(request_of(&body))
        );
        assert_eq!(
            read_request("other", &body, &tag, now),
            Err(LinkError::Unauthenticated)
        );
        assert_eq!(
            read_request("secret", &body, "zz", now),
            Err(LinkError::Unauthenticated)
        );
        let later = now + REQUEST_LIFETIME.as_millis() as u64 + 1;
        assert_eq!(
            read_request("secret", &body, &tag, later),
            Err(LinkError::Stale)
        );
        let junk = b"{}";
        let tag = sign("secret", junk);
        assert_eq!(
            read_request("secret", junk, &tag, now),
            Err(LinkError::Malformed)
        );
    }

    /// `request` signed and read at `now_ms`.
    fn signed(request: &RelayRequest, now_ms: u64) -> Result<RelayRequest, LinkError> {
        let body = serde_json::to_vec(request).expect("serializes");
        read_request("secret", &body, &sign("secret", &body), now_ms)
    }

    #[test]
    fn a_publishers_request_is_written_as_before_and_a_data_request_is_checked() {
        let now = unix_ms();
        let json = serde_json::to_string(&request(now)).expect("serializes");
        assert!(!json.contains("kind") && !json.contains("node"), "{json}");
        let data = RelayRequest {
            kind: RelayKind::Data,
            node: Some("edge-1:8080".into()),
            ..request(now)
        };
        assert_eq!(signed(&data, now), Ok(data.clone()));
        let json = serde_json::to_string(&data).expect("serializes");
        assert!(json.contains(r#""kind":"data""#), "{json}");
        let naming = RelayRequest {
            source: Some("alice".into()),
            ..data.clone()
        };
        assert_eq!(signed(&naming, now), Err(LinkError::DataWithSource));
        for node in [String::new(), "edge 1".into(), "n".repeat(65)] {
            let bad = RelayRequest {
                node: Some(node),
                ..data.clone()
            };
            assert_eq!(signed(&bad, now), Err(LinkError::BadNode));
        }
        let unknown = json.replace(r#""kind":"data""#, r#""kind":"video""#);
        let tag = sign("secret", unknown.as_bytes());
        assert_eq!(
            read_request("secret", unknown.as_bytes(), &tag, now),
            Err(LinkError::Malformed)
        );
    }

    fn request_of(body: &[u8]) -> RelayRequest {
        serde_json::from_slice(body).expect("parses")
    }

    #[test]
    fn both_ends_derive_one_link_and_another_secret_or_nonce_another() {
        let (edge, origin) = ("aa", "bb");
        let mut a = session(&link_keys("s", edge, origin, true)).expect("keys");
        let mut b = session(&link_keys("s", edge, origin, false)).expect("keys");
        let mut c = session(&link_keys("t", edge, origin, false)).expect("keys");
        let mut d = session(&link_keys("s", edge, "bc", false)).expect("keys");
        let mut packet = vec![0x80, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 9, 1, 2, 3];
        let len = packet.len();
        packet.resize(len + MAX_OVERHEAD, 0);
        let len = a.protect_rtp(&mut packet, len).expect("protects");
        for other in [&mut c, &mut d] {
            let mut copy = packet[..len].to_vec();
            assert!(other.unprotect_rtp(&mut copy).is_err());
        }
        let mut copy = packet[..len].to_vec();
        let plain = b.unprotect_rtp(&mut copy).expect("the edge reads it");
        assert_eq!(&copy[12..plain], &[1, 2, 3]);
    }

    #[test]
    fn an_offer_crosses_as_json_and_a_bad_track_is_refused() {
        let mut config = TrackConfig::single(Codec::Vp8, 7);
        config.streams[0].rtx_ssrc = Some(8);
        config.dd_ext_id = Some(11);
        let offer = RelayOffer {
            name: Some("alice".into()),
            participant: Some(ParticipantId(7)),
            tracks: vec![PublishedTrack {
                mid: "0".into(),
                config,
                id: None,
                origin: Some(3),
                fmtp: String::new(),
            }],
            codecs: vec![RoomCodec {
                codec: Codec::Vp8,
                fmtp: String::new(),
            }],
            tag: 3,
        };
        let answer = RelayAnswer::new("10.0.0.1:50000".parse().expect("addr"), nonce(), &offer);
        let json = serde_json::to_vec(&answer).expect("serializes");
        let read: RelayAnswer = serde_json::from_slice(&json).expect("parses");
        let back = read.offer().expect("valid");
        assert_eq!(back.name, offer.name);
        assert_eq!(back.codecs, offer.codecs);
        assert_eq!(back.tag, 3);
        assert_eq!(back.tracks[0].config, offer.tracks[0].config);
        assert_eq!(
            back.tracks[0].origin,
            Some(3),
            "the track keeps its origin's id"
        );
        let mut bad = read.clone();
        bad.tracks[0].codec = "XYZ".into();
        assert_eq!(bad.offer().err(), Some(LinkError::BadTrack));
        let mut bad = read;
        bad.tracks[0].streams = vec![(1, None); 5];
        assert_eq!(bad.offer().err(), Some(LinkError::BadTrack));
    }

    proptest::proptest! {
        /// Any request an edge writes reads back on the origin as written.
        #[test]
        fn requests_round_trip(
            room in "[a-z0-9._-]{1,32}",
            source in proptest::option::of("[a-z]{1,12}"),
            node in proptest::option::of("[!-~]{1,64}"),
            links in proptest::collection::vec("[0-9a-f]{32}", 0..4),
        ) {
            let now = unix_ms();
            let kind = match source {
                Some(_) => RelayKind::Publisher,
                None => RelayKind::Data,
            };
            let request = RelayRequest { room, source, links, kind, node, ..request(now) };
            proptest::prop_assert_eq!(signed(&request, now), Ok(request.clone()));
        }

        /// Any answer the origin writes reads back, on the edge, as the offer it was made of.
        #[test]
        fn answers_round_trip(
            ssrcs in proptest::collection::vec((1u32.., proptest::option::of(1u32..)), 1..=4),
            dd in proptest::option::of(1u8..=14),
            name in proptest::option::of("[a-z]{1,12}"),
            fmtp in "[a-z0-9=;-]{0,40}",
            origin in proptest::option::of(proptest::num::u32::ANY),
        ) {
            let mut config = TrackConfig::single(Codec::Av1, ssrcs[0].0);
            config.streams = ssrcs.iter().map(|&(ssrc, rtx_ssrc)| StreamConfig { ssrc, rtx_ssrc }).collect();
            config.dd_ext_id = dd;
            let offer = RelayOffer {
                name,
                participant: None,
                tracks: vec![PublishedTrack { mid: "0".into(), config, id: None, origin, fmtp: fmtp.clone() }],
                codecs: vec![RoomCodec { codec: Codec::Av1, fmtp }],
                tag: 1,
            };
            let answer = RelayAnswer::new("10.0.0.1:50000".parse().expect("addr"), nonce(), &offer);
            let json = serde_json::to_vec(&answer).expect("serializes");
            let read: RelayAnswer = serde_json::from_slice(&json).expect("parses");
            proptest::prop_assert_eq!(&read, &answer);
            let back = read.offer().expect("valid");
            proptest::prop_assert_eq!(&back.tracks[0].config, &offer.tracks[0].config);
            proptest::prop_assert_eq!(back.tracks[0].origin, origin);
            proptest::prop_assert_eq!(back.name, offer.name);
        }
    }
}
