//! A session description read into the fields the node uses: ICE credentials, the DTLS
//! fingerprint, BUNDLE, and per media section its codecs, header extensions, SSRCs and RIDs.
//!
//! The same reader serves offers and answers, since both are SDP; [`parse_offer`] adds what
//! only an offer to the node must have.

use std::collections::HashMap;
use std::io::Cursor;

use rtp_ext::codec::{Codec, MediaKind};
use sdp::description::common::Attribute;
use sdp::description::media::MediaDescription;
use sdp::SessionDescription;

use super::{SdpError, MAX_FORMATS, MAX_RIDS, MAX_SDP_LEN, MAX_SSRCS};

/// A DTLS certificate fingerprint (`a=fingerprint`, RFC 8122 section 5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    /// The hash function, as written (`sha-256`).
    pub algorithm: String,
    /// The hash as colon-separated upper-case hex pairs.
    pub value: String,
}

/// A media section's direction attribute (RFC 3264 section 5.1), from the side that wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// `a=sendrecv`, also the default when no direction is written.
    SendRecv,
    /// `a=sendonly`.
    SendOnly,
    /// `a=recvonly`.
    RecvOnly,
    /// `a=inactive`.
    Inactive,
}

impl Direction {
    /// The attribute name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SendRecv => "sendrecv",
            Self::SendOnly => "sendonly",
            Self::RecvOnly => "recvonly",
            Self::Inactive => "inactive",
        }
    }

    /// Whether the writer sends media in this section.
    pub fn sends(self) -> bool {
        matches!(self, Self::SendRecv | Self::SendOnly)
    }

    /// Whether the writer receives media in this section.
    pub fn receives(self) -> bool {
        matches!(self, Self::SendRecv | Self::RecvOnly)
    }

    fn from_attribute(key: &str) -> Option<Self> {
        [
            Self::SendRecv,
            Self::SendOnly,
            Self::RecvOnly,
            Self::Inactive,
        ]
        .into_iter()
        .find(|direction| direction.as_str() == key)
    }
}

/// An RTP header extension mapping (`a=extmap`, RFC 8285 section 8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extmap {
    /// The local identifier carried in packets.
    pub id: u8,
    /// The extension's URI.
    pub uri: String,
}

/// One media source of a section (`a=ssrc`, RFC 5576) with its retransmission stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SsrcInfo {
    /// The SSRC of the media stream.
    pub ssrc: u32,
    /// The SSRC of its RTX stream, paired by `a=ssrc-group:FID` (RFC 5576 section 4.2).
    pub rtx_ssrc: Option<u32>,
    /// The `cname` source attribute.
    pub cname: Option<String>,
    /// The `msid` source attribute: stream id and track id.
    pub msid: Option<String>,
}

/// One codec of a media section: an `a=rtpmap` with its `a=fmtp`, `a=rtcp-fb` and RTX.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfferedCodec {
    /// The RTP payload type.
    pub payload_type: u8,
    /// The codec named by the encoding name.
    pub codec: Codec,
    /// The RTP clock rate.
    pub clock_rate: u32,
    /// The channel count for audio, when written.
    pub channels: Option<u16>,
    /// The format parameters, as written after the payload type; empty when none.
    pub fmtp: String,
    /// The payload type of the RTX stream whose `apt` names this codec (RFC 4588 section 8).
    pub rtx_payload_type: Option<u8>,
    /// The `a=rtcp-fb` values for this payload type and for `*`, such as `nack pli`.
    pub feedback: Vec<String>,
}

impl OfferedCodec {
    /// The value of one format parameter, matched case-insensitively by name.
    pub fn fmtp_param(&self, name: &str) -> Option<&str> {
        fmtp_param(&self.fmtp, name)
    }
}

/// One `m=` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfferedMedia {
    /// `a=mid` (RFC 8843).
    pub mid: String,
    /// The media of the `m=` line as written (`audio`, `video`, `application`).
    pub media_type: String,
    /// The transport of the `m=` line (`UDP/TLS/RTP/SAVPF`).
    pub proto: String,
    /// The formats of the `m=` line as written: payload types for RTP media.
    pub formats: Vec<String>,
    /// Audio or video; `None` for other media, such as a data channel.
    pub kind: Option<MediaKind>,
    /// The direction from the writer's side.
    pub direction: Direction,
    /// The codecs the node knows, in the `m=` line's order of preference. RTX, RED, FEC and
    /// unknown codecs are left out.
    pub codecs: Vec<OfferedCodec>,
    /// The header extensions, in written order.
    pub extensions: Vec<Extmap>,
    /// The media sources announced with `a=ssrc`, RTX streams folded into their media stream.
    pub ssrcs: Vec<SsrcInfo>,
    /// The RIDs sent (RFC 8851, RFC 8853), in `a=simulcast:send` order, paused ones left out.
    pub send_rids: Vec<String>,
    /// The RIDs received, in `a=simulcast:recv` order, paused ones left out.
    pub recv_rids: Vec<String>,
    /// The port is 0 and the section is not `bundle-only`: the section is refused.
    pub rejected: bool,
    /// A data channel section's SCTP parameters; `None` for any other section.
    pub sctp: Option<SctpOffer>,
}

/// What a data channel section (`m=application <port> UDP/DTLS/SCTP webrtc-datachannel`)
/// says of the offerer's SCTP end (RFC 8841).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SctpOffer {
    /// `a=sctp-port`: the offerer's SCTP port, 5000 when absent (RFC 8841 section 5).
    pub port: u16,
    /// `a=max-message-size`: the largest message the offerer takes; `None` for 0, no limit;
    /// 64 KiB when absent (RFC 8841 section 6).
    pub max_message_size: Option<u64>,
}

/// The SCTP port of a data channel section without `a=sctp-port` (RFC 8841 section 5).
pub const DEFAULT_SCTP_PORT: u16 = 5000;
/// The largest message of a peer whose section has no `a=max-message-size` (RFC 8841
/// section 6).
pub const DEFAULT_MAX_MESSAGE_SIZE: u64 = 64 * 1024;

/// A session description read into the fields the node uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    /// `a=ice-ufrag`, from the session or the first media section that has it.
    pub ice_ufrag: String,
    /// `a=ice-pwd`, from the session or the first media section that has it.
    pub ice_pwd: String,
    /// `a=fingerprint`, from the session or the first media section that has it.
    pub fingerprint: Fingerprint,
    /// `a=extmap-allow-mixed` (RFC 8285 section 6): one- and two-byte extensions may mix.
    pub extmap_allow_mixed: bool,
    /// The mids of `a=group:BUNDLE`, in written order; empty without the group.
    pub bundle_mids: Vec<String>,
    /// The media sections in order.
    pub media: Vec<OfferedMedia>,
}

/// Reads an offer to the node. On top of [`parse_description`], an offer must bundle its
/// media, since the node serves one transport per peer.
pub fn parse_offer(text: &str) -> Result<Offer, SdpError> {
    parse_offer_within(text, MAX_SDP_LEN)
}

/// [`parse_offer`] with another size limit (a conference participant's offer grows with its
/// room).
pub fn parse_offer_within(text: &str, max_len: usize) -> Result<Offer, SdpError> {
    let offer = read_description(text, max_len)?;
    if offer.bundle_mids.is_empty() {
        return Err(SdpError::NoBundle);
    }
    Ok(offer)
}

/// Reads any session description, an offer or an answer: ICE credentials, a fingerprint and at
/// least one media section are required.
pub fn parse_description(text: &str) -> Result<Offer, SdpError> {
    read_description(text, MAX_SDP_LEN)
}

fn read_description(text: &str, max_len: usize) -> Result<Offer, SdpError> {
    if text.len() > max_len {
        return Err(SdpError::TooLarge {
            len: text.len(),
            limit: max_len,
        });
    }
    check_lines(text)?;
    let description = SessionDescription::unmarshal(&mut Cursor::new(text.as_bytes()))
        .map_err(|e| SdpError::Syntax(e.to_string()))?;
    if description.media_descriptions.is_empty() {
        return Err(SdpError::NoMedia);
    }
    let session_direction = description
        .attributes
        .iter()
        .find_map(|a| Direction::from_attribute(&a.key));
    let media = description
        .media_descriptions
        .iter()
        .enumerate()
        .map(|(index, section)| read_media(index, section, session_direction))
        .collect::<Result<Vec<_>, _>>()?;
    check_mids(&media)?;
    let bundle_mids = read_bundle(&description.attributes);
    if bundle_mids.len() > media.len() {
        return Err(SdpError::BundleTooLong {
            mids: bundle_mids.len(),
            sections: media.len(),
        });
    }
    let fingerprint =
        session_or_media(&description, "fingerprint").ok_or(SdpError::NoFingerprint)?;
    Ok(Offer {
        ice_ufrag: session_or_media(&description, "ice-ufrag")
            .ok_or(SdpError::NoIceUfrag)?
            .to_owned(),
        ice_pwd: session_or_media(&description, "ice-pwd")
            .ok_or(SdpError::NoIcePwd)?
            .to_owned(),
        fingerprint: read_fingerprint(fingerprint)?,
        extmap_allow_mixed: has(&description.attributes, "extmap-allow-mixed")
            || description
                .media_descriptions
                .iter()
                .any(|m| has(&m.attributes, "extmap-allow-mixed")),
        bundle_mids,
        media,
    })
}

/// Each section's mid names it alone: answers, plans and the demultiplexing find sections by
/// their mid.
fn check_mids(media: &[OfferedMedia]) -> Result<(), SdpError> {
    let mut seen = std::collections::HashSet::with_capacity(media.len());
    match media.iter().find(|m| !seen.insert(m.mid.as_str())) {
        Some(twice) => Err(SdpError::DuplicateMid(twice.mid.clone())),
        None => Ok(()),
    }
}

/// Every line must be `<type>=<value>` with a lower-case letter as type (RFC 8866 section 5).
/// Checked here so that the error names the line, which the SDP parser does not.
fn check_lines(text: &str) -> Result<(), SdpError> {
    let body = text.trim_end_matches(['\r', '\n']);
    for (index, line) in body.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let mut bytes = line.bytes();
        let well_formed = matches!(bytes.next(), Some(b'a'..=b'z')) && bytes.next() == Some(b'=');
        if !well_formed || line.contains('\r') {
            return Err(SdpError::NotSdp(index + 1));
        }
    }
    Ok(())
}

/// The first value of `key`: session-level attributes apply to every media section (RFC 8839
/// section 5.4, RFC 8122 section 5), and under BUNDLE all media sections carry the same one.
fn session_or_media<'a>(description: &'a SessionDescription, key: &str) -> Option<&'a str> {
    value(&description.attributes, key).or_else(|| {
        description
            .media_descriptions
            .iter()
            .find_map(|m| value(&m.attributes, key))
    })
}

fn read_fingerprint(text: &str) -> Result<Fingerprint, SdpError> {
    let bad = || bad_attribute("fingerprint", text);
    let (algorithm, hash) = text.split_once(' ').ok_or_else(bad)?;
    let hash = hash.trim();
    if algorithm.is_empty() || hash.is_empty() {
        return Err(bad());
    }
    Ok(Fingerprint {
        algorithm: algorithm.to_owned(),
        value: hash.to_owned(),
    })
}

fn read_bundle(attributes: &[Attribute]) -> Vec<String> {
    values(attributes, "group")
        .find_map(|group| group.strip_prefix("BUNDLE"))
        .map(|mids| mids.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

fn read_media(
    index: usize,
    section: &MediaDescription,
    session_direction: Option<Direction>,
) -> Result<OfferedMedia, SdpError> {
    let attributes = &section.attributes;
    let too_many = |what, limit| SdpError::TooMany {
        section: index,
        what,
        limit,
    };
    if section.media_name.formats.len() > MAX_FORMATS {
        return Err(too_many("formats on its m= line", MAX_FORMATS));
    }
    let media_type = section.media_name.media.clone();
    let kind = match media_type.as_str() {
        "audio" => Some(MediaKind::Audio),
        "video" => Some(MediaKind::Video),
        _ => None,
    };
    let codecs = match kind {
        Some(_) => read_codecs(section)?,
        None => Vec::new(),
    };
    Ok(OfferedMedia {
        mid: value(attributes, "mid")
            .ok_or(SdpError::NoMid(index))?
            .to_owned(),
        media_type,
        proto: section.media_name.protos.join("/"),
        formats: section.media_name.formats.clone(),
        kind,
        direction: attributes
            .iter()
            .find_map(|a| Direction::from_attribute(&a.key))
            .or(session_direction)
            .unwrap_or(Direction::SendRecv),
        codecs,
        extensions: read_extmaps(attributes)?,
        ssrcs: read_ssrcs(attributes).map_err(|e| e.unwrap_or(too_many("sources", MAX_SSRCS)))?,
        send_rids: read_rids(attributes, "send").ok_or(too_many("send rids", MAX_RIDS))?,
        recv_rids: read_rids(attributes, "recv").ok_or(too_many("receive rids", MAX_RIDS))?,
        rejected: section.media_name.port.value == 0 && !has(attributes, "bundle-only"),
        sctp: read_sctp(section)?,
    })
}

/// The SCTP parameters of a WebRTC data channel section; `None` for any other section.
fn read_sctp(section: &MediaDescription) -> Result<Option<SctpOffer>, SdpError> {
    let name = &section.media_name;
    let data_channel = name.media == "application"
        && name.protos.join("/") == "UDP/DTLS/SCTP"
        && name.formats.iter().any(|f| f == "webrtc-datachannel");
    if !data_channel {
        return Ok(None);
    }
    let attributes = &section.attributes;
    let port = match value(attributes, "sctp-port") {
        None => DEFAULT_SCTP_PORT,
        Some(text) => text
            .trim()
            .parse()
            .map_err(|_| bad_attribute("sctp-port", text))?,
    };
    let max_message_size = match value(attributes, "max-message-size") {
        None => Some(DEFAULT_MAX_MESSAGE_SIZE),
        Some(text) => match text.trim().parse::<u64>() {
            Ok(0) => None,
            Ok(size) => Some(size),
            Err(_) => return Err(bad_attribute("max-message-size", text)),
        },
    };
    Ok(Some(SctpOffer {
        port,
        max_message_size,
    }))
}

/// One `a=rtpmap` (RFC 8866 section 6.6): `<pt> <name>/<clock>[/<channels>]`.
struct Rtpmap<'a> {
    payload_type: u8,
    name: &'a str,
    clock_rate: u32,
    channels: Option<u16>,
}

fn read_rtpmap(text: &str) -> Result<Rtpmap<'_>, SdpError> {
    let bad = || bad_attribute("rtpmap", text);
    let (payload_type, encoding) = split_payload_type(text).ok_or_else(bad)?;
    let mut parts = encoding.trim().split('/');
    let name = parts.next().filter(|n| !n.is_empty()).ok_or_else(bad)?;
    let clock_rate = parts.next().and_then(|c| c.parse().ok()).ok_or_else(bad)?;
    let channels = parts
        .next()
        .map(|c| c.parse().map_err(|_| bad()))
        .transpose()?;
    Ok(Rtpmap {
        payload_type,
        name,
        clock_rate,
        channels,
    })
}

/// Splits `<pt> <rest>`; the payload type is 7 bits (RFC 3550 section 5.1).
fn split_payload_type(text: &str) -> Option<(u8, &str)> {
    let (payload_type, rest) = text.split_once(' ').unwrap_or((text, ""));
    let payload_type = payload_type.parse::<u8>().ok().filter(|pt| *pt < 128)?;
    Some((payload_type, rest))
}

fn read_codecs(section: &MediaDescription) -> Result<Vec<OfferedCodec>, SdpError> {
    let attributes = &section.attributes;
    let rtpmaps = values(attributes, "rtpmap")
        .map(read_rtpmap)
        .collect::<Result<Vec<_>, _>>()?;
    let mut fmtps: HashMap<u8, &str> = HashMap::new();
    for (pt, fmtp) in values(attributes, "fmtp").filter_map(split_payload_type) {
        // The first line for a payload type is the one read.
        fmtps.entry(pt).or_insert(fmtp.trim());
    }
    let fmtp_of = |pt: u8| fmtps.get(&pt).copied().unwrap_or("");
    // Each RTX format by the payload type it repairs, and the feedback by payload type: read
    // once per section, not once per codec (a browser's video section has some 20 codecs and
    // a large room's offer a hundred sections).
    let mut rtx_of: HashMap<u8, u8> = HashMap::new();
    for rtx in rtpmaps
        .iter()
        .filter(|r| r.name.eq_ignore_ascii_case("rtx"))
    {
        if let Some(repaired) = apt(fmtp_of(rtx.payload_type)) {
            rtx_of.entry(repaired).or_insert(rtx.payload_type);
        }
    }
    let feedback = read_feedback(attributes);
    let rtpmap_of: HashMap<u8, &Rtpmap<'_>> =
        rtpmaps.iter().rev().map(|r| (r.payload_type, r)).collect();
    // The m= line lists the payload types in order of preference (RFC 3264 section 5.1); one
    // listed again is the same codec (and would be each line's copy again).
    let mut listed = 0u128;
    let order = section
        .media_name
        .formats
        .iter()
        .filter_map(|f| f.parse::<u8>().ok().filter(|pt| *pt < 128))
        .filter(|&pt| {
            let first = listed & (1 << pt) == 0;
            listed |= 1 << pt;
            first
        });
    Ok(order
        .filter_map(|pt| rtpmap_of.get(&pt))
        .filter_map(|rtpmap| {
            let codec = Codec::from_encoding_name(rtpmap.name)?;
            let pt = rtpmap.payload_type;
            Some(OfferedCodec {
                payload_type: pt,
                codec,
                clock_rate: rtpmap.clock_rate,
                channels: rtpmap.channels,
                fmtp: fmtp_of(pt).to_owned(),
                rtx_payload_type: rtx_of.get(&pt).copied(),
                feedback: feedback.of(pt),
            })
        })
        .collect())
}

/// The payload type an RTX format repairs (RFC 4588 section 8.6).
fn apt(fmtp: &str) -> Option<u8> {
    fmtp_param(fmtp, "apt")?.parse().ok()
}

/// The `a=rtcp-fb` values of a section (RFC 4585 section 4.2): for every payload type (`*`)
/// and for each one, in written order.
struct Feedback<'a> {
    lines: Vec<(Option<u8>, &'a str)>,
}

impl Feedback<'_> {
    /// The values for `payload_type`, those for every payload type included.
    fn of(&self, payload_type: u8) -> Vec<String> {
        let mut values: Vec<String> = Vec::new();
        let lines = self.lines.iter();
        for (_, feedback) in lines.filter(|(pt, _)| pt.is_none_or(|pt| pt == payload_type)) {
            // Both for every payload type and for this one: once.
            if !values.iter().any(|v| v == feedback) {
                values.push((*feedback).to_owned());
            }
        }
        values
    }
}

/// The feedback the node takes part in (RFC 4585, RFC 5104, transport-wide CC, REMB); the
/// rest is read past, since every line for every payload type would be copied to each codec.
pub(crate) const FEEDBACK: [&str; 5] = ["nack", "nack pli", "ccm fir", "transport-cc", "goog-remb"];

fn read_feedback(attributes: &[Attribute]) -> Feedback<'_> {
    let mut lines: Vec<(Option<u8>, &str)> = Vec::new();
    let read = values(attributes, "rtcp-fb")
        .filter_map(|fb| fb.split_once(' '))
        .filter_map(|(pt, feedback)| {
            let pt = match pt {
                "*" => None,
                pt => Some(pt.parse::<u8>().ok()?),
            };
            let feedback = feedback.trim();
            FEEDBACK.contains(&feedback).then_some((pt, feedback))
        });
    for line in read {
        // Written again, a line says nothing more (and at most 5 x 129 lines are kept).
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    Feedback { lines }
}

/// The value of one `name=value` format parameter of an `a=fmtp` line.
pub(crate) fn fmtp_param<'a>(fmtp: &'a str, name: &str) -> Option<&'a str> {
    fmtp.split(';')
        .filter_map(|param| param.split_once('='))
        .find(|(key, _)| key.trim().eq_ignore_ascii_case(name))
        .map(|(_, value)| value.trim())
}

/// `a=extmap:<id>[/<direction>] <uri> [<attributes>]` (RFC 8285 section 8). Identifiers are
/// 1 to 255: 0 is padding in both header forms.
fn read_extmaps(attributes: &[Attribute]) -> Result<Vec<Extmap>, SdpError> {
    values(attributes, "extmap")
        .map(|text| {
            let mut parts = text.split_whitespace();
            let id = parts
                .next()
                .and_then(|id| id.split('/').next())
                .and_then(|id| id.parse::<u8>().ok())
                .filter(|id| *id != 0);
            match (id, parts.next()) {
                (Some(id), Some(uri)) => Ok(Extmap {
                    id,
                    uri: uri.to_owned(),
                }),
                _ => Err(bad_attribute("extmap", text)),
            }
        })
        .collect()
}

/// `a=ssrc:<ssrc> <attribute>[:<value>]` lines (RFC 5576 section 4.1) gathered per SSRC, and
/// the second SSRC of each `a=ssrc-group:FID` folded into the first as its RTX stream.
/// `Err(None)`: more than [`MAX_SSRCS`] sources (each line looks through those before it).
fn read_ssrcs(attributes: &[Attribute]) -> Result<Vec<SsrcInfo>, Option<SdpError>> {
    let mut sources: Vec<SsrcInfo> = Vec::new();
    for text in values(attributes, "ssrc") {
        let (ssrc, source_attribute) = text.split_once(' ').unwrap_or((text, ""));
        let ssrc: u32 = ssrc.parse().map_err(|_| bad_attribute("ssrc", text))?;
        let source = source_mut(&mut sources, ssrc).ok_or(None)?;
        if let Some(cname) = source_attribute.strip_prefix("cname:") {
            source.cname = Some(cname.to_owned());
        } else if let Some(msid) = source_attribute.strip_prefix("msid:") {
            source.msid = Some(msid.to_owned());
        }
    }
    for text in values(attributes, "ssrc-group") {
        if let Some(pair) = text.strip_prefix("FID ") {
            let (media, rtx) = read_fid(pair).ok_or_else(|| bad_attribute("ssrc-group", text))?;
            sources.retain(|s| s.ssrc != rtx);
            source_mut(&mut sources, media).ok_or(None)?.rtx_ssrc = Some(rtx);
        }
    }
    Ok(sources)
}

/// The source `ssrc`, added at the end when not seen yet; `None` when that would make more
/// than [`MAX_SSRCS`].
fn source_mut(sources: &mut Vec<SsrcInfo>, ssrc: u32) -> Option<&mut SsrcInfo> {
    let at = match sources.iter().position(|s| s.ssrc == ssrc) {
        Some(at) => at,
        None if sources.len() == MAX_SSRCS => return None,
        None => {
            sources.push(SsrcInfo {
                ssrc,
                ..SsrcInfo::default()
            });
            sources.len() - 1
        }
    };
    sources.get_mut(at)
}

/// The media and RTX SSRCs of an FID group, exactly two (RFC 4588 section 8.1).
fn read_fid(pair: &str) -> Option<(u32, u32)> {
    let mut ssrcs = pair.split_whitespace().map(str::parse::<u32>);
    match (ssrcs.next(), ssrcs.next(), ssrcs.next()) {
        (Some(Ok(media)), Some(Ok(rtx)), None) => Some((media, rtx)),
        _ => None,
    }
}

fn bad_attribute(attribute: &'static str, text: &str) -> SdpError {
    SdpError::BadAttribute {
        attribute,
        value: text.to_owned(),
    }
}

/// The RIDs declared with `a=rid:<id> <direction>` (RFC 8851 section 4), in the order of the
/// `a=simulcast` stream list for that direction (RFC 8853 section 5.1) when there is one. Of
/// alternatives (`a,b`) the first is taken; paused streams (`~a`) are left out.
/// `None`: more than [`MAX_RIDS`] declared (each stream of the list looks through them).
fn read_rids(attributes: &[Attribute], direction: &str) -> Option<Vec<String>> {
    let declared: Vec<&str> = values(attributes, "rid")
        .filter_map(|rid| {
            let mut parts = rid.split_whitespace();
            let id = parts.next()?;
            (parts.next() == Some(direction)).then_some(id)
        })
        .collect();
    if declared.len() > MAX_RIDS {
        return None;
    }
    let Some(list) = values(attributes, "simulcast").find_map(|s| simulcast_list(s, direction))
    else {
        return Some(declared.into_iter().map(str::to_owned).collect());
    };
    let mut rids: Vec<String> = Vec::new();
    let streams = list
        .split(';')
        .filter_map(|stream| stream.split(',').next());
    for rid in streams.filter(|rid| !rid.starts_with('~') && declared.contains(rid)) {
        // A stream listed twice is one stream.
        if !rids.iter().any(|r| r == rid) {
            rids.push(rid.to_owned());
        }
    }
    Some(rids)
}

/// The stream list following `direction` in an `a=simulcast` value (`send q;h;f recv a`).
fn simulcast_list<'a>(simulcast: &'a str, direction: &str) -> Option<&'a str> {
    let words: Vec<&str> = simulcast.split_whitespace().collect();
    words.chunks(2).find_map(|pair| match pair {
        [dir, list] if *dir == direction => Some(*list),
        _ => None,
    })
}

fn values<'a, 'k>(
    attributes: &'a [Attribute],
    key: &'k str,
) -> impl Iterator<Item = &'a str> + use<'a, 'k> {
    attributes
        .iter()
        .filter(move |a| a.key == key)
        .filter_map(|a| a.value.as_deref())
}

fn value<'a>(attributes: &'a [Attribute], key: &str) -> Option<&'a str> {
    values(attributes, key).next()
}

fn has(attributes: &[Attribute], key: &str) -> bool {
    attributes.iter().any(|a| a.key == key)
}
