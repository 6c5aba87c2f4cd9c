//! The node's answer (RFC 3264, RFC 8829 section 5.3), written from a plan: ICE lite with host
//! candidates, DTLS passive, one BUNDLE group, and per section the codec, RTX, feedback and
//! header extensions accepted.
//!
//! Some clients (GStreamer's webrtcbin among them) read the DTLS fingerprint, the ICE
//! credentials and `a=setup` from every section, a refused one too, and refuse the whole
//! answer when a section lacks them; browsers take them from any. So they are written in
//! every section. The fingerprint is not also written at session level: Debian's GStreamer
//! 1.22 (1.22.0-4+deb12u7) refuses an answer with a fingerprint at both levels.

use std::net::SocketAddr;

use rand::Rng;
use rtp_ext::codec::MediaKind;
use sdp::description::common::{Address, Attribute, ConnectionInformation};
use sdp::description::media::{MediaDescription, MediaName, RangedPort};
use sdp::description::session::{Origin, TimeDescription, Timing};
use sdp::SessionDescription;

use super::{Direction, OfferedCodec, PublishedMedia, PublisherPlan, Section, ViewedMedia};
use super::{Extmap, InactiveMedia, ParticipantMedia, ParticipantPlan, ViewerPlan};

/// The transport of every accepted section (RFC 8829 section 5.1.2).
const PROTO: [&str; 4] = ["UDP", "TLS", "RTP", "SAVPF"];

/// The priority of the first host candidate: type preference 126, local preference 65535,
/// component 1 (RFC 8445 section 5.1.2.1).
const HOST_PRIORITY: u32 = 2_130_706_431;

/// The priority of the passive TCP host candidate: type preference 126, local preference
/// 2^13 times the passive host's direction preference (4) plus the most of the rest (8191),
/// component 1 (RFC 6544 section 4.2). Below every UDP candidate, so a client that reaches
/// the node over both takes UDP.
const TCP_PASSIVE_PRIORITY: u32 = (126 << 24) + (((1 << 13) * 4 + 8191) << 8) + 255;

/// What the node sends in a viewer's section: one media stream and its RTX stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendSource {
    /// The SSRC of the media stream.
    pub ssrc: u32,
    /// The SSRC of the RTX stream; left out of the answer when the viewer's codec has no RTX.
    pub rtx_ssrc: Option<u32>,
    /// The RTCP CNAME (RFC 7022).
    pub cname: String,
    /// The MediaStream id of `a=msid` (RFC 8830).
    pub stream_id: String,
    /// The track id of `a=msid`.
    pub track_id: String,
}

/// One section of the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerMedia {
    /// A section answered with port 0, outside the BUNDLE group.
    Rejected {
        /// The offered `a=mid`.
        mid: String,
        /// The offered media.
        media_type: String,
        /// The offered transport.
        proto: String,
        /// The offered formats.
        formats: Vec<String>,
    },
    /// A section the node does not serve, answered `a=inactive` inside the BUNDLE group.
    Inactive {
        /// The offered `a=mid`.
        mid: String,
        /// The section's kind and the codec named.
        media: InactiveMedia,
    },
    /// A publisher's section: the node receives.
    Receive(PublishedMedia),
    /// A viewer's section: the node sends, from `source` once it is known.
    Send {
        /// What was negotiated.
        media: ViewedMedia,
        /// The stream sent; `None` while the room publishes nothing for this section, when
        /// the viewer finds the stream by its mid (RFC 8843 section 9.2).
        source: Option<SendSource>,
    },
    /// A participant's data channel section: the node's SCTP port and the largest message it
    /// takes (RFC 8841), nothing else of SCTP (an attribute the node does not implement, such
    /// as an offer's `a=sctp-init`, is never echoed).
    Data {
        /// The offered `a=mid`.
        mid: String,
        /// The node's `a=max-message-size`.
        max_message_size: u64,
    },
}

/// The node's SCTP port, in every answer's `a=sctp-port` (RFC 8841 section 5).
pub const SCTP_PORT: u16 = 5000;

impl AnswerMedia {
    /// The answer's sections for a publisher's plan.
    pub fn for_publisher(plan: &PublisherPlan) -> Vec<Self> {
        plan.sections
            .iter()
            .map(|section| Self::from_section(section, |media| Self::Receive(media.clone())))
            .collect()
    }

    /// The answer's sections for a viewer's plan, with the stream `source_of` gives for each
    /// accepted section.
    pub fn for_viewer(
        plan: &ViewerPlan,
        source_of: impl Fn(&ViewedMedia) -> Option<SendSource>,
    ) -> Vec<Self> {
        plan.sections
            .iter()
            .map(|section| {
                Self::from_section(section, |media| Self::Send {
                    media: media.clone(),
                    source: source_of(media),
                })
            })
            .collect()
    }

    /// The answer's sections for a participant's plan: what it sends received, each of its
    /// receiving sections as `receiving` answers it, its data channels taking messages up to
    /// `max_message_size` bytes.
    pub fn for_participant(
        plan: &ParticipantPlan,
        max_message_size: u64,
        receiving: impl Fn(&ViewedMedia) -> Self,
    ) -> Vec<Self> {
        plan.sections
            .iter()
            .map(|section| {
                Self::from_section(section, |accepted| match accepted {
                    ParticipantMedia::Publish(media) => Self::Receive(media.clone()),
                    ParticipantMedia::Receive(media) => receiving(media),
                    ParticipantMedia::Data(media) => Self::Data {
                        mid: media.mid.clone(),
                        max_message_size,
                    },
                })
            })
            .collect()
    }

    /// The answer's section for a planned one: `accepted` for what is served, inactive or
    /// port 0 for what is not.
    fn from_section<T>(section: &Section<T>, accepted: impl Fn(&T) -> Self) -> Self {
        match section {
            Section::Accepted(media) => accepted(media),
            Section::Rejected {
                mid,
                inactive: Some(media),
                ..
            } => Self::Inactive {
                mid: mid.clone(),
                media: media.clone(),
            },
            Section::Rejected {
                mid,
                media_type,
                proto,
                formats,
                ..
            } => Self::Rejected {
                mid: mid.clone(),
                media_type: media_type.clone(),
                proto: proto.clone(),
                formats: formats.clone(),
            },
        }
    }

    /// The mid of a section inside the BUNDLE group: every one but those with port 0.
    fn bundled_mid(&self) -> Option<&str> {
        match self {
            Self::Rejected { .. } => None,
            Self::Inactive { mid, .. } => Some(mid),
            Self::Receive(media) => Some(&media.mid),
            Self::Send { media, .. } => Some(&media.mid),
            Self::Data { mid, .. } => Some(mid),
        }
    }
}

/// Everything the answer says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerParams {
    /// The node's ICE username fragment.
    pub ice_ufrag: String,
    /// The node's ICE password.
    pub ice_pwd: String,
    /// The SHA-256 fingerprint of the node's DTLS certificate, as colon-separated hex pairs.
    pub fingerprint: String,
    /// The node's host candidates.
    pub candidates: Vec<SocketAddr>,
    /// The node's passive ICE-TCP host candidate (RFC 6544), offered after the UDP ones.
    pub tcp_candidate: Option<SocketAddr>,
    /// The offer allowed one- and two-byte header extensions to mix.
    pub extmap_allow_mixed: bool,
    /// Appended to the format parameters of video codecs received from a publisher, such as
    /// `x-google-min-bitrate=2500;x-google-start-bitrate=2500`, to pin the sender's bitrate.
    pub video_fmtp_suffix: Option<String>,
    /// One entry per offered section, in the offer's order.
    pub media: Vec<AnswerMedia>,
    /// The `o=` line's session id and version: one session's answers keep the id and count
    /// up the version (RFC 3264 section 8); `None` for a session's only answer.
    pub origin: Option<(u64, u64)>,
}

/// Writes the answer.
pub fn build_answer(params: &AnswerParams) -> String {
    let mids: Vec<&str> = params
        .media
        .iter()
        .filter_map(AnswerMedia::bundled_mid)
        .collect();
    let mut attributes = Vec::new();
    if !mids.is_empty() {
        attributes.push(attribute("group", format!("BUNDLE {}", mids.join(" "))));
    }
    attributes.push(flag("ice-lite"));
    if params.extmap_allow_mixed {
        attributes.push(flag("extmap-allow-mixed"));
    }
    attributes.push(attribute("msid-semantic", " WMS *"));
    // JSEP (RFC 8829 section 5.2.1) wants a random id that fits a signed 64-bit int.
    let (session_id, session_version) = params
        .origin
        .unwrap_or_else(|| (rand::rng().random::<u64>() >> 1, 2));
    SessionDescription {
        version: 0,
        origin: Origin {
            username: "-".to_owned(),
            session_id,
            session_version,
            network_type: "IN".to_owned(),
            address_type: "IP4".to_owned(),
            unicast_address: "127.0.0.1".to_owned(),
        },
        session_name: "-".to_owned(),
        time_descriptions: vec![TimeDescription {
            timing: Timing {
                start_time: 0,
                stop_time: 0,
            },
            repeat_times: Vec::new(),
        }],
        attributes,
        media_descriptions: params.media.iter().map(|m| section(params, m)).collect(),
        ..SessionDescription::default()
    }
    .marshal()
}

fn section(params: &AnswerParams, media: &AnswerMedia) -> MediaDescription {
    match media {
        AnswerMedia::Rejected {
            mid,
            media_type,
            proto,
            formats,
        } => media_description(
            MediaName {
                media: media_type.clone(),
                port: RangedPort {
                    value: 0,
                    range: None,
                },
                protos: proto.split('/').map(str::to_owned).collect(),
                formats: formats.clone(),
            },
            {
                let mut attributes = transport_attributes(params, mid, &[]);
                attributes.push(flag(Direction::Inactive.as_str()));
                attributes
            },
        ),
        AnswerMedia::Inactive { mid, media } => inactive_section(params, mid, media),
        AnswerMedia::Receive(published) => receive_section(params, published),
        AnswerMedia::Send { media, source } => send_section(params, media, source.as_ref()),
        AnswerMedia::Data {
            mid,
            max_message_size,
        } => data_section(params, mid, *max_message_size),
    }
}

/// A data channel section (RFC 8841): the transport, the node's SCTP port and message limit.
fn data_section(params: &AnswerParams, mid: &str, max_message_size: u64) -> MediaDescription {
    let mut attributes = transport_attributes(params, mid, &[]);
    attributes.push(attribute("sctp-port", SCTP_PORT.to_string()));
    attributes.push(attribute("max-message-size", max_message_size.to_string()));
    attributes.extend(candidate_attributes(params));
    let name = MediaName {
        media: "application".to_owned(),
        port: RangedPort {
            value: 9,
            range: None,
        },
        protos: ["UDP", "DTLS", "SCTP"].map(str::to_owned).to_vec(),
        formats: vec!["webrtc-datachannel".to_owned()],
    };
    media_description(name, attributes)
}

/// A publisher's section: recvonly, the codec with the configured fmtp suffix for video, and
/// the RIDs received under simulcast (RFC 8853 section 5.3).
fn receive_section(params: &AnswerParams, media: &PublishedMedia) -> MediaDescription {
    let suffix = match media.kind {
        MediaKind::Video => params.video_fmtp_suffix.as_deref(),
        MediaKind::Audio => None,
    };
    let codecs = std::slice::from_ref(&media.codec);
    let mut attributes = transport_attributes(params, &media.mid, &media.extensions);
    attributes.push(flag(Direction::RecvOnly.as_str()));
    attributes.extend(rtcp_attributes());
    attributes.extend(codec_attributes(codecs, suffix));
    if !media.rids.is_empty() {
        attributes.extend(
            media
                .rids
                .iter()
                .map(|rid| attribute("rid", format!("{rid} recv"))),
        );
        attributes.push(attribute(
            "simulcast",
            format!("recv {}", media.rids.join(";")),
        ));
    }
    attributes.extend(candidate_attributes(params));
    media_description(accepted_name(media.kind, codecs), attributes)
}

/// A bundled section the node does not serve: inactive, with the transport and one offered
/// codec, so the section stays a valid part of the bundle.
fn inactive_section(params: &AnswerParams, mid: &str, media: &InactiveMedia) -> MediaDescription {
    let codecs = std::slice::from_ref(&media.codec);
    let mut attributes = transport_attributes(params, mid, &[]);
    attributes.push(flag(Direction::Inactive.as_str()));
    attributes.extend(rtcp_attributes());
    attributes.extend(codec_attributes(codecs, None));
    attributes.extend(candidate_attributes(params));
    media_description(accepted_name(media.kind, codecs), attributes)
}

/// A viewer's section: sendonly, the viewer's payload types, and the stream's `a=msid` and
/// `a=ssrc` lines (RFC 8830, RFC 5576) so the viewer knows it before the first packet.
fn send_section(
    params: &AnswerParams,
    media: &ViewedMedia,
    source: Option<&SendSource>,
) -> MediaDescription {
    // An RTX stream the viewer has no payload type for would not be understood.
    let has_rtx = media.codecs.iter().any(|c| c.rtx_payload_type.is_some());
    let source = source.map(|s| SendSource {
        rtx_ssrc: s.rtx_ssrc.filter(|_| has_rtx),
        ..s.clone()
    });
    let source = source.as_ref();
    let mut attributes = transport_attributes(params, &media.mid, &media.extensions);
    attributes.push(flag(Direction::SendOnly.as_str()));
    if let Some(source) = source {
        attributes.push(attribute("msid", msid(source)));
    }
    attributes.extend(rtcp_attributes());
    attributes.extend(codec_attributes(&media.codecs, None));
    attributes.extend(source.map(source_attributes).unwrap_or_default());
    attributes.extend(candidate_attributes(params));
    media_description(accepted_name(media.kind, &media.codecs), attributes)
}

fn media_description(media_name: MediaName, attributes: Vec<Attribute>) -> MediaDescription {
    MediaDescription {
        media_name,
        media_title: None,
        connection_information: Some(ConnectionInformation {
            network_type: "IN".to_owned(),
            address_type: "IP4".to_owned(),
            address: Some(Address {
                address: "0.0.0.0".to_owned(),
                ttl: None,
                range: None,
            }),
        }),
        bandwidth: Vec::new(),
        encryption_key: None,
        attributes,
    }
}

/// The `m=` line of an accepted section: port 9, the discard port, as ICE chooses the real
/// one (RFC 8839 section 4.2.1); every codec and RTX payload type.
fn accepted_name(kind: MediaKind, codecs: &[OfferedCodec]) -> MediaName {
    MediaName {
        media: match kind {
            MediaKind::Audio => "audio",
            MediaKind::Video => "video",
        }
        .to_owned(),
        port: RangedPort {
            value: 9,
            range: None,
        },
        protos: PROTO.iter().map(|p| (*p).to_owned()).collect(),
        formats: codecs
            .iter()
            .flat_map(|c| std::iter::once(c.payload_type).chain(c.rtx_payload_type))
            .map(|pt| pt.to_string())
            .collect(),
    }
}

/// ICE and DTLS attributes, the mid and the header extensions. The node is ICE lite and
/// always the DTLS server (`setup:passive`, RFC 8842 section 5.3).
fn transport_attributes(params: &AnswerParams, mid: &str, extensions: &[Extmap]) -> Vec<Attribute> {
    let mut attributes = vec![
        attribute("ice-ufrag", &params.ice_ufrag),
        attribute("ice-pwd", &params.ice_pwd),
        fingerprint(params),
        attribute("setup", "passive"),
        attribute("mid", mid),
    ];
    attributes.extend(
        extensions
            .iter()
            .map(|e| attribute("extmap", format!("{} {}", e.id, e.uri))),
    );
    attributes
}

fn fingerprint(params: &AnswerParams) -> Attribute {
    attribute("fingerprint", format!("sha-256 {}", params.fingerprint))
}

/// RTCP on the RTP port (RFC 5761) in reduced size (RFC 5506), as the offerer proposed.
fn rtcp_attributes() -> [Attribute; 2] {
    [flag("rtcp-mux"), flag("rtcp-rsize")]
}

fn codec_attributes(codecs: &[OfferedCodec], fmtp_suffix: Option<&str>) -> Vec<Attribute> {
    codecs
        .iter()
        .flat_map(|codec| {
            let pt = codec.payload_type;
            let mut lines = vec![attribute("rtpmap", rtpmap(codec))];
            lines.extend(
                codec
                    .feedback
                    .iter()
                    .map(|fb| attribute("rtcp-fb", format!("{pt} {fb}"))),
            );
            let fmtp = join_fmtp(&codec.fmtp, fmtp_suffix);
            if !fmtp.is_empty() {
                lines.push(attribute("fmtp", format!("{pt} {fmtp}")));
            }
            if let Some(rtx) = codec.rtx_payload_type {
                lines.push(attribute(
                    "rtpmap",
                    format!("{rtx} rtx/{}", codec.clock_rate),
                ));
                lines.push(attribute("fmtp", format!("{rtx} apt={pt}")));
            }
            lines
        })
        .collect()
}

fn rtpmap(codec: &OfferedCodec) -> String {
    let name = codec.codec.encoding_name();
    match codec.channels {
        Some(channels) => format!(
            "{} {name}/{}/{channels}",
            codec.payload_type, codec.clock_rate
        ),
        None => format!("{} {name}/{}", codec.payload_type, codec.clock_rate),
    }
}

fn join_fmtp(fmtp: &str, suffix: Option<&str>) -> String {
    match suffix.filter(|s| !s.is_empty()) {
        Some(suffix) if !fmtp.is_empty() => format!("{fmtp};{suffix}"),
        Some(suffix) => suffix.to_owned(),
        None => fmtp.to_owned(),
    }
}

fn msid(source: &SendSource) -> String {
    format!("{} {}", source.stream_id, source.track_id)
}

/// `a=ssrc-group:FID` then `cname` and `msid` for the media SSRC and its RTX SSRC.
fn source_attributes(source: &SendSource) -> Vec<Attribute> {
    let mut attributes = Vec::new();
    if let Some(rtx) = source.rtx_ssrc {
        attributes.push(attribute(
            "ssrc-group",
            format!("FID {} {rtx}", source.ssrc),
        ));
    }
    for ssrc in std::iter::once(source.ssrc).chain(source.rtx_ssrc) {
        attributes.push(attribute("ssrc", format!("{ssrc} cname:{}", source.cname)));
        attributes.push(attribute("ssrc", format!("{ssrc} msid:{}", msid(source))));
    }
    attributes
}

/// One host candidate per address (RFC 8839 section 5.1), priorities falling in the given
/// order so the first address is preferred, then the passive TCP one below them all, then
/// `a=end-of-candidates` as an ICE lite agent has no other.
fn candidate_attributes(params: &AnswerParams) -> Vec<Attribute> {
    let udp = params
        .candidates
        .iter()
        .zip(1u32..)
        .map(|(address, foundation)| {
            let priority = HOST_PRIORITY.saturating_sub(foundation - 1);
            let (ip, port) = (address.ip(), address.port());
            format!("{foundation} 1 udp {priority} {ip} {port} typ host")
        });
    let foundation = params.candidates.len() + 1;
    let tcp = params.tcp_candidate.map(|address| {
        let (ip, port) = (address.ip(), address.port());
        format!("{foundation} 1 tcp {TCP_PASSIVE_PRIORITY} {ip} {port} typ host tcptype passive")
    });
    udp.chain(tcp)
        .map(|value| attribute("candidate", value))
        .chain(std::iter::once(flag("end-of-candidates")))
        .collect()
}

fn attribute(key: &str, value: impl Into<String>) -> Attribute {
    Attribute::new(key.to_owned(), Some(value.into()))
}

fn flag(key: &str) -> Attribute {
    Attribute::new(key.to_owned(), None)
}
