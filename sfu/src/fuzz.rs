//! Fuzz target bodies: `fuzz/` wraps each in three lines, and the tests run them over the real
//! captures.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use rtp_ext::codec::{parse_payload, Codec};
use rtp_ext::rtp::RtpPacket;
use selector::{Layer, LayerLimits};

use crate::capture::{classify, udp_datagram, Capture, PayloadKind};
use crate::engine::bwe::{SendHistory, SEND_HISTORY_CAPACITY};
use crate::engine::rtcp::{
    parse_compound, write_chunks_and_deltas, PacketReports, RtcpFeedback, RtcpWireWriter,
    RtcpWriter, TransportCc as TransportCcFeedback, TransportCcError,
};
use crate::engine::{
    DownTrackConfig, DownTrackId, RouterConfig, TrackConfig, TransportCc, TransportId,
};
use crate::node::auth::{Auth, Grant};
use crate::node::core::{NodeCore, MAX_DATAGRAM};
use crate::node::dtls::MTU;
use crate::node::ice::BindingRequest;
use crate::node::limits::Limits;
use crate::node::peer::{IceCredentials, Join, PeerId};
use crate::node::sdp::{
    build_answer, negotiate_participant, negotiate_publisher, negotiate_viewer, parse_description,
    parse_offer, AnswerMedia, AnswerParams, OfferShape, RoomCodec, SendSource,
};
use crate::node::srtp::{
    self, SrtpContext, SrtpError, SrtpKeys, SrtpProfile, SrtpSession, Unprotected,
};
use crate::node::tcp::framing::{self, FrameError};
use crate::node::testing;
use crate::sim::{Delivery, LinkConfig, Network};

mod directory_entry;
mod dtls;
mod relay_link;
mod room_notice;
mod room_part;
mod trickle_fragment;
pub use directory_entry::directory_entry;
pub use dtls::{dtls_association, dtls_association_sent, dtls_client_flights, dtls_fixture};
pub use relay_link::{relay_link, RELAY_NOW_MS, RELAY_SECRET};
pub use room_notice::room_notice;
pub use room_part::room_part;
pub use trickle_fragment::trickle_fragment;

/// `capture`: the bytes as a capture file; every record down to its UDP payload, and every
/// RTP payload through each video codec's descriptor parser.
pub fn capture(data: &[u8]) {
    let Ok(capture) = Capture::open(data) else {
        return;
    };
    for record in capture.flatten() {
        assert!(
            record.data.len() <= data.len(),
            "a record lies inside the file"
        );
        let Ok(datagram) = udp_datagram(record.link_type, record.data) else {
            continue;
        };
        if classify(datagram.payload) != PayloadKind::Rtp {
            continue;
        }
        if let Ok(packet) = RtpPacket::parse(datagram.payload) {
            for codec in [Codec::Av1, Codec::Vp9, Codec::Vp8, Codec::H264] {
                if let Ok(descriptor) = parse_payload(codec, packet.payload()) {
                    let _ = descriptor.summary();
                }
            }
        }
    }
}

/// `rtcp`: the bytes as an RTCP datagram; every item parsed from it, written back and parsed
/// again, gives itself.
pub fn rtcp(data: &[u8]) {
    let mut writer = RtcpWireWriter::new(b"fuzz").expect("a 4-octet cname fits");
    // An item's bytes never outgrow the datagram by more than the padding writing adds.
    let mut out = vec![0; data.len() + 64];
    let _ = parse_compound(data, |item| {
        if matches!(item, RtcpFeedback::Other(_)) {
            return;
        }
        let len = writer
            .write(&item, &mut out)
            .expect("a parsed item can be written");
        let mut again = Vec::new();
        let summary = parse_compound(&out[..len], |item| again.push(item));
        assert_eq!(summary.map(|s| s.items), Ok(1), "{item:?}");
        assert_eq!(again, [item]);
    });
}

/// `twcc_feedback`: the bytes as the base sequence (2 octets), the packet status count (2)
/// and the reference time (3) of a transport-wide CC feedback, then its chunks and deltas.
/// Read, each packet is reported once in order; written back, they read the same; matched
/// against a history of the packets up to the base and a little past, each is counted once.
pub fn twcc_feedback(data: &[u8]) {
    let [b0, b1, c0, c1, r0, r1, r2, body @ ..] = data else {
        return;
    };
    let feedback = TransportCcFeedback {
        sender_ssrc: 1,
        media_ssrc: 2,
        base_sequence: u16::from_be_bytes([*b0, *b1]),
        packet_status_count: u16::from_be_bytes([*c0, *c1]),
        reference_time: u32::from_be_bytes([0, *r0, *r1, *r2]),
        fb_count: 0,
        chunks_and_deltas: body,
    };
    let Ok(reports) = PacketReports::new(&feedback) else {
        return;
    };
    let deltas: Vec<Option<i16>> = reports.map(|r| r.status.delta()).collect();
    assert_eq!(deltas.len(), usize::from(feedback.packet_status_count));
    let mut written = Vec::new();
    let count = write_chunks_and_deltas(&deltas, &mut written).expect("a u16 count of packets");
    let again = TransportCcFeedback {
        chunks_and_deltas: &written,
        packet_status_count: count,
        ..feedback
    };
    let reread: Vec<Option<i16>> = PacketReports::new(&again)
        .expect("written feedback reads")
        .map(|r| r.status.delta())
        .collect();
    assert_eq!(reread, deltas);
    let mut history = SendHistory::new();
    let now = Instant::now();
    let sent = usize::from(feedback.base_sequence) + usize::from(*r2);
    for _ in 0..sent {
        history.on_send(now, 100, None);
    }
    let mut results = Vec::new();
    let read = history.on_feedback(&feedback, &mut results);
    if deltas.len() > SEND_HISTORY_CAPACITY {
        assert_eq!(read, Err(TransportCcError::TooManyPackets));
        return;
    }
    let summary = read.expect("read above");
    assert_eq!(summary.matched, results.len());
    assert_eq!(
        summary.matched + summary.unknown + summary.duplicates,
        deltas.len()
    );
}

/// The SSRCs the `engine` body publishes: the real AV1 packets' in the shared vectors (DD as
/// extension 11, transport-wide CC as 5), with RTX, then a VP8 and an Opus stream.
pub const ENGINE_SSRCS: [u32; 5] = [0x114e_d316, 0x2ab2_873c, 0x481d_4dca, 0x2000, 0x3000];

/// `engine`: the bytes as a session on the in-memory network (ideal links: what is sent
/// arrives at once): records of `op, len, bytes`. `op % 4` is 0 for an RTP packet from a
/// publisher, 1 for RTCP from subscriber `op / 4`, 2 for RTCP from publisher `op / 4`, 3 to let
/// `len` milliseconds pass, the router's timeouts run when it reports them due. After every
/// record: every packet that reached a subscriber parses as RTP with its subscriber's SSRC,
/// every RTCP datagram out parses, and each RTP packet in is counted once.
pub fn engine(data: &[u8]) {
    let (mut network, publisher, subscribers) = engine_network();
    let mut rtp_in = 0;
    let mut rest = data;
    while let [op, len, tail @ ..] = rest {
        let (bytes, after) = tail.split_at(usize::from(*len).min(tail.len()));
        rest = after;
        let bytes = Bytes::copy_from_slice(bytes);
        let mut until = network.now();
        let sent = match op % 4 {
            0 => {
                rtp_in += 1;
                network.send_rtp(publisher, bytes)
            }
            1 => {
                let (transport, ..) = subscribers[usize::from(op / 4) % subscribers.len()];
                network.send_rtcp(transport, bytes)
            }
            2 => network.send_rtcp(publisher, bytes),
            _ => {
                until += Duration::from_millis(u64::from(*len));
                Ok(())
            }
        };
        sent.expect("a transport of the network");
        network.run_until(until);
        check_arrivals(&mut network, publisher, &subscribers);
        // Refusals and events are not checked here: taken so that they do not pile up.
        network.take_refused();
        network.take_events();
        assert_eq!(
            network.router().counters().rtp_in,
            rtp_in,
            "every packet counted once"
        );
    }
}

/// A subscriber of the `engine` body: its transport, its subscription and the SSRC it gets.
type EngineSubscriber = (TransportId, DownTrackId, u32);

/// A network whose router has the `ENGINE_SSRCS` tracks on one publisher transport and
/// subscribers at several layers, some with RTX, each on a transport of its own.
fn engine_network() -> (Network, TransportId, Vec<EngineSubscriber>) {
    let ideal = LinkConfig::default();
    let mut network = Network::new(RouterConfig::default(), Instant::now(), 0);
    let publisher = network.add_transport(ideal, ideal);
    let mut subscribers = Vec::new();
    for (i, &ssrc) in ENGINE_SSRCS.iter().enumerate() {
        let codec = [Codec::Av1, Codec::Av1, Codec::Av1, Codec::Vp8, Codec::Opus][i];
        let mut track = TrackConfig::single(codec, ssrc);
        if codec == Codec::Av1 {
            track.dd_ext_id = Some(11);
            track.streams[0].rtx_ssrc = Some(ssrc ^ 1);
            track.transport_cc = Some(TransportCc { ext_id: 5 });
        }
        track.audio_level_ext_id = (codec == Codec::Opus).then_some(1);
        let track = network
            .with_router(|router| router.publish(publisher, track))
            .expect("distinct SSRCs");
        for (j, target) in [Layer::MAX, Layer::new(0, 0)].into_iter().enumerate() {
            let out_ssrc = 0x5000 + 16 * i as u32 + 2 * j as u32;
            let mut config = DownTrackConfig::new(out_ssrc, 96);
            config.dd_ext_id = Some(11);
            config.rtx = (j == 0).then_some((out_ssrc + 1, 97));
            let limits = LayerLimits {
                target,
                max: Layer::MAX,
            };
            let transport = network.add_transport(ideal, ideal);
            let id = network
                .with_router(|router| router.subscribe(transport, track, config, limits))
                .expect("published");
            subscribers.push((transport, id, out_ssrc));
        }
    }
    (network, publisher, subscribers)
}

/// What reached the peers: media only to the subscription's own transport under its SSRCs,
/// RTCP that parses; nothing for a transport off the network.
fn check_arrivals(network: &mut Network, publisher: TransportId, subscribers: &[EngineSubscriber]) {
    for arrival in network.take_arrivals(publisher) {
        let Delivery::Rtcp { datagram, .. } = arrival.delivery else {
            panic!("media to the publisher");
        };
        parse_compound(&datagram, |_| {}).expect("what the router sends parses");
    }
    for &(transport, down_track, out_ssrc) in subscribers {
        for arrival in network.take_arrivals(transport) {
            match arrival.delivery {
                Delivery::Media {
                    down_track: to,
                    packet,
                    ..
                } => {
                    assert_eq!(to, down_track, "on the subscriber's transport");
                    let ssrc = RtpPacket::parse(&packet)
                        .expect("what the router sends parses")
                        .fields()
                        .ssrc;
                    assert!(
                        ssrc == out_ssrc || ssrc == out_ssrc + 1,
                        "the subscriber's own SSRC"
                    );
                }
                Delivery::Rtcp { datagram, .. } => {
                    parse_compound(&datagram, |_| {}).expect("what the router sends parses");
                }
            }
        }
    }
    assert_eq!(
        network.counters().unrouted,
        0,
        "every output has its transport"
    );
}

/// `sdp_offer`: the bytes (lossy UTF-8) as an offer. When it parses, it is negotiated as a
/// publisher's and as a viewer's, in an empty room and in one publishing `SDP_ROOM_CODEC`, and
/// as a conference participant's (a track in every receiving section, and the offer must
/// follow itself as a renegotiation); every plan accepted is answered, and the answer must
/// read back with one section per offered section.
pub fn sdp_offer(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(offer) = parse_offer(&text) else {
        return;
    };
    if let Ok(plan) = negotiate_publisher(&offer) {
        answer_reads_back(AnswerMedia::for_publisher(&plan), plan.extmap_allow_mixed);
    }
    if let Ok(plan) = negotiate_viewer(&offer, &[]) {
        // Nothing published yet: the viewer finds its streams by mid later.
        answer_reads_back(
            AnswerMedia::for_viewer(&plan, |_| None),
            plan.extmap_allow_mixed,
        );
    }
    let room = [sdp_room_codec()];
    if let Ok(plan) = negotiate_viewer(&offer, &room) {
        let media = AnswerMedia::for_viewer(&plan, |_| Some(send_source()));
        answer_reads_back(media, plan.extmap_allow_mixed);
    }
    if let Ok(plan) = negotiate_participant(&offer) {
        let shape = OfferShape::of(&offer);
        assert_eq!(
            shape.check_follows(&shape),
            Ok(()),
            "an offer follows itself"
        );
        // Its tracks and sections as the core would take them (or a clear error).
        let _ = crate::node::signaling::participant_offer(&plan, &offer);
        let max_message_size =
            crate::node::datachannel::DataChannelConfig::default().max_message_size;
        let media =
            AnswerMedia::for_participant(&plan, max_message_size, |media| AnswerMedia::Send {
                media: media.clone(),
                source: Some(send_source()),
            });
        answer_reads_back(media, plan.extmap_allow_mixed);
    }
}

/// The codec of the non-empty room: H.264 as x264 announces it, whose formats must match by
/// profile (read from `profile-level-id`), level and packetization mode, so that matching of
/// every offered format runs too.
fn sdp_room_codec() -> RoomCodec {
    RoomCodec {
        codec: Codec::H264,
        fmtp: "packetization-mode=1;profile-level-id=42c01e;level-asymmetry-allowed=1".to_owned(),
    }
}

fn send_source() -> SendSource {
    SendSource {
        ssrc: 0x1111,
        rtx_ssrc: Some(0x2222),
        cname: "fuzz".to_owned(),
        stream_id: "room".to_owned(),
        track_id: "track".to_owned(),
    }
}

fn answer_reads_back(media: Vec<AnswerMedia>, extmap_allow_mixed: bool) {
    let sections = media.len();
    let params = AnswerParams {
        ice_ufrag: "fuzzufrg".to_owned(),
        ice_pwd: "answer-password-24-chars".to_owned(),
        fingerprint: ["AB"; 32].join(":"),
        candidates: vec![
            SocketAddr::from(([127, 0, 0, 1], 40000)),
            SocketAddr::from(([0, 0, 0, 0, 0, 0, 0, 1], 40001)),
        ],
        tcp_candidate: Some(SocketAddr::from(([127, 0, 0, 1], 40000))),
        extmap_allow_mixed,
        video_fmtp_suffix: Some("x-min-bitrate=2500".to_owned()),
        media,
        origin: None,
    };
    let answer = build_answer(&params);
    let read = parse_description(&answer)
        .unwrap_or_else(|e| panic!("our answer does not read back ({e}):\n{answer}"));
    assert_eq!(read.media.len(), sections, "one section per offered one");
}

/// The password `stun_binding` answers with; seeds are signed with it.
pub const STUN_PASSWORD: &str = "fuzz-password-of-24chars";

/// `stun_binding`: the bytes as a binding request, answered when it parses; an answer must
/// read as a binding success. Both address families are answered, by the input's parity, so
/// both forms of XOR-MAPPED-ADDRESS are written.
pub fn stun_binding(data: &[u8]) {
    let Ok(request) = BindingRequest::parse(data) else {
        return;
    };
    let from = if data.len().is_multiple_of(2) {
        SocketAddr::from(([192, 0, 2, 1], 40000))
    } else {
        SocketAddr::from(([0x2001, 0xdb8, 0, 0, 0, 0, 0, 1], 40000))
    };
    if let Ok(response) = request.answer(STUN_PASSWORD, from) {
        assert_binding_success(&response);
    }
}

fn assert_binding_success(datagram: &[u8]) {
    let mut message = stun::message::Message::new();
    message.raw = datagram.to_vec();
    message.decode().expect("our STUN answer decodes");
    assert_eq!(message.typ, stun::message::BINDING_SUCCESS);
}

/// The static token `auth_header` accepts.
pub const AUTH_TOKEN: &str = "fuzz-static-token";
/// The secret `auth_header`'s JWTs are signed with.
pub const AUTH_SECRET: &[u8] = b"fuzz-jwt-secret";
/// The room `auth_header` asks for.
pub const AUTH_ROOM: &str = "room";
/// The Unix time `auth_header` checks `exp` and `nbf` against.
pub const AUTH_NOW: u64 = 1_800_000_000;

/// The bytes as the `X-Forwarded-For` of a request from a trusted proxy: its client is the
/// proxy itself or an address the header lists.
fn forwarded_for(data: &[u8]) {
    use axum::http::{HeaderMap, HeaderValue};
    let Ok(value) = HeaderValue::from_bytes(data) else {
        return;
    };
    let proxy = SocketAddr::from(([10, 0, 0, 2], 40000));
    let mut headers = HeaderMap::new();
    headers.insert("x-forwarded-for", value);
    let client = crate::node::forwarded::client(proxy, &headers, &[proxy.ip()]);
    let text = String::from_utf8_lossy(data);
    let listed = text
        .split(',')
        .any(|e| e.trim().parse::<IpAddr>() == Ok(client.ip()));
    assert!(client == proxy || listed, "{client} from {text:?}");
}

/// `auth_header`: the bytes (lossy UTF-8) as what a request names itself by: an
/// `Authorization` header, a trusted proxy's `X-Forwarded-For`, asked for both grants against a static token and a JWT secret (a
/// grant needs the static token or a signed JWT) and for `/metrics` (it needs the metrics
/// token); and a resource URL's session id and room name.
pub fn auth_header(data: &[u8]) {
    let header = String::from_utf8_lossy(data);
    let auth = Auth::new(vec![AUTH_TOKEN.to_owned()], Some(AUTH_SECRET.to_vec()));
    for grant in [Grant::Publish, Grant::Subscribe] {
        if auth
            .authorize(Some(&header), AUTH_ROOM, grant, AUTH_NOW)
            .is_ok()
        {
            // A JWT is three dot-separated parts.
            assert!(header.contains(AUTH_TOKEN) || header.matches('.').count() == 2);
        }
    }
    let metrics = auth.with_metrics_token(Some(AUTH_TOKEN.to_owned()));
    if metrics.authorize_metrics(Some(&header)).is_ok() {
        assert!(header.contains(AUTH_TOKEN));
    }
    // The same bytes as a resource URL's id and room: an id reads back as itself, and a room
    // name the node takes needs no escaping in a URL.
    if let Ok(id) = header.parse::<PeerId>() {
        assert_eq!(id.to_string(), header);
    }
    if Limits::default().check_room_name(&header).is_ok() {
        assert!(header
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)));
    }
    forwarded_for(data);
}

/// The keys of `srtp_unprotect`'s session under `profile`; its seeds are protected with the
/// mirrored keys.
pub fn srtp_keys(profile: SrtpProfile) -> SrtpKeys {
    testing::keys(profile, 0)
}

/// The profile of `srtp_unprotect`'s session, chosen by the input's first byte.
pub fn srtp_profile(selector: u8) -> SrtpProfile {
    match selector % 3 {
        0 => SrtpProfile::AeadAes128Gcm,
        1 => SrtpProfile::Aes128CmHmacSha1_80,
        _ => SrtpProfile::AeadAes256Gcm,
    }
}

/// `srtp_unprotect`: a first byte choosing the profile, then `records` each unprotected in
/// place by one session as SRTP (even `op`) or SRTCP (odd). A packet accepted has lost exactly
/// its tag (and SRTCP index) and kept its header, and the same packet again is refused as a
/// replay.
pub fn srtp_unprotect(data: &[u8]) {
    let Some((&selector, data)) = data.split_first() else {
        return;
    };
    let profile = srtp_profile(selector);
    let mut session = srtp::session(&srtp_keys(profile)).expect("the fixed keys fit");
    let mut buf = Vec::new();
    for (op, packet) in records(data) {
        let rtcp = op % 2 == 1;
        let Ok(plain) = unprotect(&mut session, rtcp, packet, &mut buf) else {
            continue;
        };
        let overhead = if rtcp {
            profile.rtcp_overhead()
        } else {
            profile.rtp_overhead()
        };
        assert_eq!(plain + overhead, packet.len());
        let header = if rtcp { 8 } else { 12 };
        assert_eq!(buf[..header], packet[..header]);
        assert_eq!(
            unprotect(&mut session, rtcp, packet, &mut buf),
            Err(SrtpError::Replayed)
        );
    }
}

/// Unprotects a copy of `packet` in `buf`.
fn unprotect(
    session: &mut SrtpSession,
    rtcp: bool,
    packet: &[u8],
    buf: &mut Vec<u8>,
) -> Result<usize, SrtpError> {
    buf.clear();
    buf.extend_from_slice(packet);
    if rtcp {
        session.unprotect_rtcp(buf)
    } else {
        session.unprotect_rtp(buf)
    }
}

/// Splits a fuzz input into records of `op`, a big-endian 16-bit length and that many bytes
/// (fewer at the end): datagrams need more than 255 bytes.
pub fn records(mut data: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    std::iter::from_fn(move || {
        let [op, hi, lo, tail @ ..] = data else {
            return None;
        };
        let len = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        let (bytes, rest) = tail.split_at(len);
        data = rest;
        Some((*op, bytes))
    })
}

/// A record of `records`.
pub fn record(op: u8, bytes: &[u8]) -> Vec<u8> {
    let len = u16::try_from(bytes.len()).expect("a datagram fits 16 bits");
    let mut out = vec![op];
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(bytes);
    out
}

/// Where `node_core`'s datagrams come from, by `op % 4`: the publisher, the viewer, a stranger.
pub const NODE_ADDRS: [SocketAddr; 3] = [
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)), 5000),
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)), 5001),
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 3)), 5002),
];
/// The publisher's and the viewer's ICE credentials in `node_core`.
pub const NODE_ICE: [(&str, &str); 2] = [
    ("pubufrag", "publisher-password-24chr"),
    ("viewufrg", "viewer-password-24-chars"),
];
/// The viewer's video SSRC in `node_core` (its RTX SSRC is the next one).
pub const NODE_VIEWER_SSRC: u32 = 0x5000;
/// A silent session is dropped after this long, which a few time records reach.
const NODE_PEER_TIMEOUT: Duration = Duration::from_secs(5);

/// `node_core`: a node with one AV1 publisher (the `ENGINE_SSRCS` AV1 tracks, DD as extension
/// 11) and one viewer of it, both connected, fed `records`: `op % 4` 0 to 2 for a datagram from
/// `NODE_ADDRS[op % 4]`, 3 to let `op / 4 * 50` ms pass. The publisher's offer named a
/// certificate fingerprint, so its DTLS records reach a handshake in the core. After each
/// record, every datagram the node sends must be a STUN answer (or a check of the publisher's
/// signed with its browser's password), DTLS to the publisher, or RTP or RTCP that parses, and
/// RTP goes to the viewer under its own SSRCs at its address.
pub fn node_core(data: &[u8]) {
    node_core_sent(data);
}

/// What `node_core` sent, by kind (for the tests that check the seeds get that far).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeSent {
    /// RTP packets to the viewer.
    pub rtp: usize,
    /// DTLS records to the publisher.
    pub dtls: usize,
}

/// The `node_core` body, returning what the node sent.
pub fn node_core_sent(data: &[u8]) -> NodeSent {
    let mut now = Instant::now();
    let (mut core, viewer) = node_with_peers(now);
    let mut sent = NodeSent::default();
    for (op, bytes) in records(data) {
        match NODE_ADDRS.get(usize::from(op % 4)) {
            Some(&from) => core.handle_datagram(now, from, bytes),
            None => {
                now += Duration::from_millis(u64::from(op / 4) * 50);
                core.handle_timeout(now);
            }
        }
        drain_node(&mut core, viewer, &mut sent);
    }
    sent
}

/// A binding request of `node_core`'s session `index`, as its browser sends one.
pub fn node_binding_request(index: usize, nominate: bool) -> Vec<u8> {
    testing::binding_request(&node_ice(index), nominate)
}

fn node_with_peers(now: Instant) -> (NodeCore, PeerId) {
    let (dtls, fingerprint) = dtls_fixture();
    let mut core =
        NodeCore::new(RouterConfig::default(), NODE_PEER_TIMEOUT).with_dtls(dtls.clone());
    let tracks = ENGINE_SSRCS[..3].iter().map(|&ssrc| {
        let mut config = testing::av1_track(ssrc, 11);
        config.streams[0].rtx_ssrc = Some(ssrc ^ 1);
        config
    });
    let join = testing::join_with_fingerprint("room", node_ice(0), fingerprint);
    let publisher = core
        .add_publisher(now, join, testing::publisher(tracks))
        .expect("free SSRCs");
    let viewer = testing::av1_viewer(NODE_VIEWER_SSRC, Some(5), Layer::MAX);
    let viewer = core
        .add_viewer(now, Join::new("room", node_ice(1)), viewer)
        .expect("an empty node has room");
    for (index, id) in [publisher, viewer].into_iter().enumerate() {
        let (ice, at) = (node_ice(index), NODE_ADDRS[index]);
        testing::connect(&mut core, now, id, &ice, at, Box::new(Unprotected));
    }
    drain_node(&mut core, viewer, &mut NodeSent::default());
    (core, viewer)
}

fn node_ice(index: usize) -> IceCredentials {
    let (ufrag, pwd) = NODE_ICE[index];
    IceCredentials {
        local_ufrag: ufrag.to_owned(),
        local_pwd: pwd.to_owned(),
    }
}

/// Checks every datagram the node sends, and counts them into `sent`.
fn drain_node(core: &mut NodeCore, viewer: PeerId, sent: &mut NodeSent) {
    let mut buf = vec![0; MAX_DATAGRAM];
    while let Some((to, len)) = core.poll_datagram(&mut buf) {
        assert!(NODE_ADDRS.iter().any(|&a| to == a), "sent to {to}");
        let out = &buf[..len];
        match classify(out) {
            PayloadKind::Stun => assert_answer_or_check(out),
            PayloadKind::Dtls => {
                assert_eq!(to, NODE_ADDRS[0], "DTLS goes to the publisher");
                assert!(out.len() <= MTU);
                sent.dtls += 1;
            }
            PayloadKind::Rtcp => {
                parse_compound(out, |_| {}).expect("the node's RTCP parses");
            }
            PayloadKind::Rtp => {
                let ssrc = RtpPacket::parse(out)
                    .expect("the node's RTP parses")
                    .fields()
                    .ssrc;
                assert!(ssrc == NODE_VIEWER_SSRC || ssrc == NODE_VIEWER_SSRC + 1);
                assert_eq!(Some(to), core.peer(viewer).and_then(|p| p.addr));
                sent.rtp += 1;
            }
            other => panic!("the node sent {other:?}"),
        }
    }
}

/// A STUN message the node sends in `node_core`: a binding success, or its check of an
/// address the publisher was nominated at, signed with the publisher's browser's password
/// (the viewer came without an offer, so it is never checked).
fn assert_answer_or_check(datagram: &[u8]) {
    let mut message = stun::message::Message::new();
    message.raw = datagram.to_vec();
    message.decode().expect("our STUN decodes");
    if message.typ == stun::message::BINDING_SUCCESS {
        return;
    }
    assert_eq!(message.typ, stun::message::BINDING_REQUEST);
    let password = testing::browser_ice(&node_ice(0)).pwd;
    stun::integrity::MessageIntegrity::new_short_term_integrity(password)
        .check(&mut message)
        .expect("a check signed with the publisher's browser's password");
}

/// `dcep`: the bytes as a DCEP message; one that reads must write back to the same message.
pub fn dcep(data: &[u8]) {
    use crate::node::datachannel::dcep::Dcep;
    let Ok(message) = Dcep::parse(data) else {
        return;
    };
    let mut written = Vec::new();
    message.write(&mut written).expect("a read message writes");
    assert_eq!(Dcep::parse(&written), Ok(message), "written back the same");
}

/// `sctp_input`: the bytes as SCTP packets from a participant (each after a two-byte
/// length, its checksum written in), into a fresh association of the node, and again into a
/// relay link edge's (the client end): whatever each makes of them, it answers with packets a
/// DTLS record carries, and its timer moves forward.
pub fn sctp_input(data: &[u8]) {
    use crate::node::datachannel::sctp::SctpAssociation;
    let start = Instant::now();
    sctp_packets(
        data,
        SctpAssociation::new(start, 256 * 1024, Some(64 * 1024)),
        start,
    );
    sctp_packets(data, SctpAssociation::client(start, 256 * 1024), start);
}

fn sctp_packets(
    data: &[u8],
    mut association: crate::node::datachannel::sctp::SctpAssociation,
    start: Instant,
) {
    let mut rest = data;
    let mut now = start;
    while let [high, low, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*high, *low])).min(tail.len());
        let (packet, next) = tail.split_at(len);
        rest = next;
        // Refused or not, the association goes on.
        let _ = association.handle_packet(now, &checksummed(packet));
        while let Some(out) = association.poll_transmit() {
            assert!(out.len() <= MTU, "an SCTP packet fits a DTLS record");
        }
        while association.poll_event().is_some() {}
        if let Some(at) = association.poll_timeout() {
            assert!(at >= start);
            now = now.max(at.min(now + Duration::from_secs(1)));
            association.handle_timeout(now);
        }
    }
}

/// `packet` with the SCTP checksum it would have, so that the stack reads what follows.
fn checksummed(packet: &[u8]) -> Vec<u8> {
    const CRC32C: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);
    let mut packet = packet.to_vec();
    if let Some(checksum) = packet.get_mut(8..12) {
        checksum.fill(0);
        let crc = CRC32C.checksum(&packet);
        packet[8..12].copy_from_slice(&crc.to_le_bytes());
    }
    packet
}

/// `tcp_framing`: a peer's ICE-TCP stream (RFC 4571), the first byte picking how it is cut
/// into reads: the frames come out the same however it is cut, never longer than the node
/// takes, and framed again they are the stream up to where it ended or went bad.
pub fn tcp_framing(data: &[u8]) {
    let Some((&cut, stream)) = data.split_first() else {
        return;
    };
    let (frames, outcome) = deframe(stream, stream.len().max(1));
    assert_eq!(
        (frames.clone(), outcome),
        deframe(stream, usize::from(cut).max(1))
    );
    let mut again = BytesMut::new();
    for frame in &frames {
        assert!(frame.len() <= framing::MAX_FRAME);
        framing::encode(frame, &mut again).expect("a frame the node took fits its length");
    }
    assert_eq!(&again[..], &stream[..again.len()]);
}

/// Every frame of `stream` read `cut` bytes at a time, and the error that ended it, if any.
fn deframe(stream: &[u8], cut: usize) -> (Vec<Bytes>, Option<FrameError>) {
    let mut buffer = BytesMut::new();
    let mut frames = Vec::new();
    for read in stream.chunks(cut) {
        buffer.extend_from_slice(read);
        loop {
            match framing::decode(&mut buffer) {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => break,
                Err(e) => return (frames, Some(e)),
            }
        }
    }
    (frames, None)
}
