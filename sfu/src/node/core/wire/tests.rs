//! The core's datagrams with real SRTP on both sides: each written where it is sent from,
//! over whatever an earlier one left there, and what does not fit or does not authenticate
//! counted.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use rtp_ext::rtp::RtpPacket;
use selector::scalability::{GeneratorConfig, ScalabilityMode, StreamGenerator};

use super::MAX_DATAGRAM;
use crate::engine::RouterConfig;
use crate::node::core::NodeCore;
use crate::node::metrics::DropReason;
use crate::node::srtp::{session, SrtpContext, SrtpProfile, SrtpSession, MAX_OVERHEAD};
use crate::node::testing::{av1_room, keys, DD_EXT};

const SSRC: u32 = 0xA1;
const VIEWER_SSRC: u32 = 0x10;
/// Each publisher packet's length before protection.
const PACKET_LEN: usize = 1000;
const PUBLISHER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 5000);
const VIEWER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 5000);

/// A browser's side of session `n`'s SRTP in [`av1_room`].
fn browser(n: u8) -> SrtpSession {
    session(&keys(SrtpProfile::AeadAes128Gcm, n).mirrored()).expect("valid keys")
}

/// A core with an AV1 publisher and a viewer of every layer, and the viewer's browser side of
/// its SRTP.
fn core() -> (NodeCore, SrtpSession) {
    let mut core = NodeCore::new(RouterConfig::default(), Duration::from_secs(60));
    av1_room(
        &mut core,
        Instant::now(),
        SSRC,
        VIEWER_SSRC,
        &[PUBLISHER, VIEWER],
    );
    (core, browser(1))
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
    let mut publisher = browser(0);
    generator
        .take(count)
        .map(|p| {
            let mut plain = p.rtp_bytes(DD_EXT, &structure);
            plain.resize(PACKET_LEN, 0x5A);
            let mut protected = plain.clone();
            protected.resize(PACKET_LEN + MAX_OVERHEAD, 0);
            let len = publisher
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
