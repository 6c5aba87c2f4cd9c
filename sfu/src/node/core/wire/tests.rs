//! The core's datagrams with real SRTP on both sides: each written where it is sent from,
//! over whatever an earlier one left there, and what does not fit or does not authenticate
//! counted.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use rtp_ext::codec::Codec;
use rtp_ext::rtp::RtpPacket;
use selector::scalability::{GeneratorConfig, ScalabilityMode, StreamGenerator};
use selector::Layer;

use super::MAX_DATAGRAM;
use crate::engine::{RouterConfig, TrackConfig};
use crate::node::core::NodeCore;
use crate::node::ice::binding_request;
use crate::node::metrics::DropReason;
use crate::node::peer::{
    IceCredentials, Join, PeerId, PublishedTrack, Publisher, Viewer, ViewerCodec, ViewerMedia,
};
use crate::node::srtp::{session, SrtpContext, SrtpKeys, SrtpProfile, SrtpSession, MAX_OVERHEAD};

const DD_EXT: u8 = 11;
const SSRC: u32 = 0xA1;
const VIEWER_SSRC: u32 = 0x10;
/// Each publisher packet's length before protection.
const PACKET_LEN: usize = 1000;
const PUBLISHER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 5000);
const VIEWER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 5000);

fn keys(first: u8) -> SrtpKeys {
    let profile = SrtpProfile::AeadAes128Gcm;
    let bytes = |from: u8, len: usize| (from..).take(len).collect();
    SrtpKeys {
        profile,
        local_key: bytes(first, profile.key_len()),
        local_salt: bytes(first + 40, profile.salt_len()),
        remote_key: bytes(first + 80, profile.key_len()),
        remote_salt: bytes(first + 120, profile.salt_len()),
    }
}

fn ice(n: u8) -> IceCredentials {
    IceCredentials {
        local_ufrag: format!("ufrag{n}"),
        local_pwd: format!("password-of-session-{n:04}"),
    }
}

/// ICE nominated at `at` and the session's keys set, as its handshake would.
fn connect(core: &mut NodeCore, now: Instant, id: PeerId, n: u8, at: SocketAddr) {
    let credentials = ice(n);
    let username = format!("{}:browser", credentials.local_ufrag);
    let request = binding_request(&username, &credentials.local_pwd, true).expect("a request");
    core.handle_datagram(now, at, &request);
    core.set_srtp(id, Box::new(session(&keys(n)).expect("valid keys")));
}

/// A core with an AV1 publisher (session 1) and a viewer of every layer (session 2), and
/// the viewer's browser side of its SRTP; what connecting sent is drained.
fn core() -> (NodeCore, SrtpSession) {
    let now = Instant::now();
    let mut core = NodeCore::new(RouterConfig::default(), Duration::from_secs(60));
    let mut track = TrackConfig::single(Codec::Av1, SSRC);
    track.dd_ext_id = Some(DD_EXT);
    let publisher = Publisher {
        tracks: vec![PublishedTrack {
            mid: String::new(),
            config: track,
            id: None,
            fmtp: String::new(),
        }],
        codecs: Vec::new(),
    };
    let id = core
        .add_publisher(now, Join::new("room", ice(1)), publisher)
        .expect("an empty node");
    connect(&mut core, now, id, 1, PUBLISHER);
    let viewer = Viewer {
        video: Some(ViewerMedia {
            ssrc: VIEWER_SSRC,
            rtx_ssrc: VIEWER_SSRC + 1,
            codecs: vec![ViewerCodec {
                codec: Codec::Av1,
                payload_type: 45,
                rtx_payload_type: Some(46),
                fmtp: String::new(),
            }],
            dd_ext_id: Some(DD_EXT),
            two_byte_allowed: true,
            transport_cc_ext_id: None,
            down_track: None,
        }),
        audio: None,
        target: Layer::MAX,
        source: None,
    };
    let id = core
        .add_viewer(now, Join::new("room", ice(2)), viewer)
        .expect("room for a viewer");
    connect(&mut core, now, id, 2, VIEWER);
    let mut out = vec![0; MAX_DATAGRAM];
    while core.poll_datagram(&mut out).is_some() {}
    (core, session(&keys(2).mirrored()).expect("valid keys"))
}

/// `count` packets of an L3T3 stream from its keyframe, each `PACKET_LEN` long: in the
/// clear, and as the publisher's browser protects them.
fn stream(count: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let config = GeneratorConfig {
        ssrc: SSRC,
        ..Default::default()
    };
    let generator = StreamGenerator::new(ScalabilityMode::L3T3, config);
    let structure = generator.structure().clone();
    let mut browser = session(&keys(1).mirrored()).expect("valid keys");
    generator
        .take(count)
        .map(|p| {
            let mut plain = p.rtp_bytes(DD_EXT, &structure);
            plain.resize(PACKET_LEN, 0x5A);
            let mut protected = plain.clone();
            protected.resize(PACKET_LEN + MAX_OVERHEAD, 0);
            let len = browser
                .protect_rtp(&mut protected, PACKET_LEN)
                .expect("protects");
            protected.truncate(len);
            (plain, protected)
        })
        .collect()
}

/// The RTP packets the viewer's browser decrypts from everything the core sends now, polled
/// into `out` as it is.
fn poll_media(core: &mut NodeCore, browser: &mut SrtpSession, out: &mut [u8]) -> Vec<Vec<u8>> {
    let mut media = Vec::new();
    while let Some((to, len)) = core.poll_datagram(out) {
        let mut datagram = out[..len].to_vec();
        // Media only: RTCP's packet types are 192-223.
        if to == VIEWER && !(192..=223).contains(&datagram[1]) {
            let plain = browser.unprotect_rtp(&mut datagram).expect("authentic");
            datagram.truncate(plain);
            media.push(datagram);
        }
    }
    media
}

fn payload(packet: &[u8]) -> Vec<u8> {
    RtpPacket::parse(packet).expect("RTP").payload().to_vec()
}

#[test]
fn each_packet_is_written_whole_over_what_the_buffer_held() {
    let (mut core, mut browser) = core();
    let now = Instant::now();
    // Bytes no packet has, where each datagram is written.
    let mut out = vec![0xEE; MAX_DATAGRAM];
    for (plain, protected) in stream(20) {
        core.handle_datagram(now, PUBLISHER, &protected);
        let sent = poll_media(&mut core, &mut browser, &mut out);
        assert_eq!(sent.len(), 1, "every packet to the viewer of every layer");
        let packet = RtpPacket::parse(&sent[0]).expect("our header");
        assert_eq!(packet.fields().ssrc, VIEWER_SSRC);
        assert_eq!(packet.payload(), payload(&plain), "the payload, whole");
        out.fill(0xEE);
    }
    assert_eq!(core.counters().rtp_out, 20);
}

#[test]
fn a_packet_longer_than_the_buffer_is_dropped_and_counted() {
    let (mut core, mut browser) = core();
    let now = Instant::now();
    let packets = stream(2);
    core.handle_datagram(now, PUBLISHER, &packets[0].1);
    // Room for the header, not for the payload after it.
    let mut short = vec![0; PACKET_LEN / 2];
    assert!(poll_media(&mut core, &mut browser, &mut short).is_empty());
    assert_eq!(core.counters().dropped(DropReason::TooLong), 1);
    let mut tiny = vec![0; MAX_OVERHEAD - 1];
    assert_eq!(core.poll_datagram(&mut tiny), None, "no room at all");
    core.handle_datagram(now, PUBLISHER, &packets[1].1);
    let mut out = vec![0; MAX_DATAGRAM];
    let sent = poll_media(&mut core, &mut browser, &mut out);
    assert_eq!(sent.len(), 1, "the next packet goes");
    assert_eq!(payload(&sent[0]), payload(&packets[1].0));
    assert_eq!(core.counters().dropped(DropReason::TooLong), 1);
}

#[test]
fn a_tampered_packet_is_counted_and_the_genuine_one_still_goes() {
    let (mut core, mut browser) = core();
    let now = Instant::now();
    let (plain, protected) = stream(1).remove(0);
    let mut tampered = protected.clone();
    tampered[PACKET_LEN / 2] ^= 1;
    core.handle_datagram(now, PUBLISHER, &tampered);
    assert_eq!(core.counters().dropped(DropReason::SrtpRejected), 1);
    let mut out = vec![0; MAX_DATAGRAM];
    assert!(poll_media(&mut core, &mut browser, &mut out).is_empty());
    core.handle_datagram(now, PUBLISHER, &protected);
    let sent = poll_media(&mut core, &mut browser, &mut out);
    assert_eq!(sent.len(), 1);
    assert_eq!(payload(&sent[0]), payload(&plain));
    // A viewer's own RTP is refused before it is decrypted.
    core.handle_datagram(now, VIEWER, &protected);
    assert_eq!(core.counters().dropped(DropReason::NotAPublisher), 1);
    assert_eq!(core.counters().dropped(DropReason::SrtpRejected), 1);
}
