//! The node's send path per packet: write the RTP header, SRTP-protect (AES-128-GCM) and send
//! the datagram over loopback UDP, once through the SRTP library and once through the node's
//! in-place AES-GCM. And its receive path: a publisher's packets decrypted by the session.

use std::hint::black_box;
use std::net::{SocketAddr, UdpSocket};

use rtp_ext::rtp::RtpPacket;
use sfu::node::batch::{send_all, Batch};
use sfu::node::srtp::{session, Egress, SrtpContext, SrtpKeys, SrtpProfile, SrtpSession};

use crate::fixtures::av1_packet_with_dd;
use crate::{Case, Stream};

/// A full-size video packet, as a browser sends it under a 1200-byte MTU budget.
pub const PACKET_LEN: usize = 1200;

pub fn cases() -> Vec<Case> {
    vec![
        egress("node/egress_srtp/library", Egress::Library, Then::Send),
        egress("node/egress_srtp/in_place", Egress::Fastest, Then::Send),
        egress_batched("node/egress_srtp/batched", 1),
        egress_batched("node/egress_srtp/batched_fanout", FANOUT_PEERS),
        egress("node/protect_srtp/library", Egress::Library, Then::Stop),
        egress("node/protect_srtp/in_place", Egress::Fastest, Then::Stop),
        ingress("node/unprotect_srtp/gcm", gcm_keys()),
        ingress("node/unprotect_srtp/aes_cm", cm_keys()),
    ]
}

/// Inbound packets decrypted per pass; a fresh session starts each pass (its replay windows
/// would refuse the repeated sequence numbers).
const INGRESS_PASS: usize = 2_000;

/// Whether an operation ends with the socket send, or stops after protection so the crypto's
/// own cost shows.
#[derive(Debug, Clone, Copy)]
enum Then {
    Send,
    Stop,
}

/// The real AV1 packet (abs-send-time, transport-wide-cc and DD extensions) with its payload
/// grown to [`PACKET_LEN`] bytes.
pub fn av1_packet_1200() -> Vec<u8> {
    let mut packet = av1_packet_with_dd();
    assert!(packet.len() < PACKET_LEN, "the real packet is a short one");
    // The cipher sees payload bytes only as bytes: a filler is as good as real AV1 OBUs.
    packet.resize(PACKET_LEN, 0x5A);
    assert!(
        RtpPacket::parse(&packet).is_ok(),
        "still a valid RTP packet"
    );
    packet
}

/// Keys as a DTLS handshake would have exported them for AES-128-GCM.
pub fn gcm_keys() -> SrtpKeys {
    SrtpKeys {
        profile: SrtpProfile::AeadAes128Gcm,
        local_key: (1..=16).collect(),
        local_salt: (17..29).collect(),
        remote_key: (31..47).collect(),
        remote_salt: (47..59).collect(),
    }
}

/// Keys as a DTLS handshake would have exported them for AES-128-CM with HMAC-SHA1-80.
pub fn cm_keys() -> SrtpKeys {
    SrtpKeys {
        profile: SrtpProfile::Aes128CmHmacSha1_80,
        local_key: (1..=16).collect(),
        local_salt: (17..31).collect(),
        remote_key: (31..47).collect(),
        remote_salt: (47..61).collect(),
    }
}

/// `count` consecutive packets protected with the peer's (remote) keys, from sequence 0.
pub fn inbound_packets(keys: &SrtpKeys, count: usize) -> Vec<Vec<u8>> {
    let mut peer = SrtpSession::new(&keys.mirrored(), Egress::Library).expect("valid keys");
    let mut packet = av1_packet_1200();
    (0..count)
        .map(|i| {
            packet[2..4].copy_from_slice(&(i as u16).to_be_bytes());
            let mut out = Vec::new();
            peer.protect_rtp(&packet, &mut out).expect("protects");
            out
        })
        .collect()
}

/// A publisher's packets through the node's session: authenticated and decrypted.
fn ingress(name: &'static str, keys: SrtpKeys) -> Case {
    let packets = inbound_packets(&keys, INGRESS_PASS);
    let fresh = move || session(&keys).expect("valid keys");
    let mut ours = fresh();
    let mut out = Vec::with_capacity(PACKET_LEN);
    let mut next = 0;
    let stream = Stream {
        pass: packets.len(),
        structures: Vec::new(),
    };
    Case::new(name, move || {
        if next == packets.len() {
            next = 0;
            ours = fresh();
        }
        ours.unprotect_rtp(black_box(&packets[next]), &mut out)
            .expect("authentic");
        assert_eq!(out.len(), PACKET_LEN, "{name}: the whole packet");
        next += 1;
    })
    .over(stream)
}

/// A socket pair on loopback: the node's sending socket and the peer address it sends to.
/// The peer socket is returned to keep the port bound; nothing reads it, so the kernel drops
/// what overflows its buffer, which the sender does not notice.
pub fn loopback() -> (UdpSocket, UdpSocket, SocketAddr) {
    let peer = UdpSocket::bind("127.0.0.1:0").expect("bind loopback");
    let target = peer.local_addr().expect("bound address");
    let node = UdpSocket::bind("127.0.0.1:0").expect("bind loopback");
    (node, peer, target)
}

fn egress(name: &'static str, egress: Egress, then: Then) -> Case {
    let mut session = SrtpSession::new(&gcm_keys(), egress).expect("valid keys");
    let mut packet = av1_packet_1200();
    let mut out = Vec::with_capacity(PACKET_LEN + 64);
    let (node, peer, target) = loopback();
    let mut seq = 0u16;
    Case::new(name, move || {
        // The header the forwarding path writes: a new sequence number per packet.
        seq = seq.wrapping_add(1);
        packet[2..4].copy_from_slice(&seq.to_be_bytes());
        session
            .protect_rtp(black_box(&packet), &mut out)
            .expect("protects");
        if let Then::Send = then {
            // A full receive buffer drops silently; a send error would only mean a broken host.
            let _ = black_box(node.send_to(&out, target));
        }
        black_box((&out, &peer));
    })
}

/// Peers the fan-out variant sends to in turn: no two consecutive datagrams go to one.
const FANOUT_PEERS: usize = 8;

/// The in-place send path with the node's batching: each packet protected into the next
/// buffer of a batch, and a full batch sent in one call (`sendmmsg` on Linux). To one peer,
/// as a keyframe or a probe cluster goes to one viewer, the batch leaves as one segmented
/// send; to `peers` in turn, as one packet fans out to many viewers, one datagram each.
fn egress_batched(name: &'static str, peers: usize) -> Case {
    let mut session = SrtpSession::new(&gcm_keys(), Egress::Fastest).expect("valid keys");
    let mut packet = av1_packet_1200();
    let mut batch = Batch::new(PACKET_LEN + 64);
    let node = UdpSocket::bind("127.0.0.1:0").expect("bind loopback");
    let receivers: Vec<(UdpSocket, SocketAddr)> = (0..peers)
        .map(|_| {
            let (_, peer, target) = loopback();
            (peer, target)
        })
        .collect();
    let mut seq = 0u16;
    Case::new(name, move || {
        seq = seq.wrapping_add(1);
        packet[2..4].copy_from_slice(&seq.to_be_bytes());
        let buffer = batch.next_buffer().expect("a full batch is sent at once");
        session
            .protect_rtp(black_box(&packet), buffer)
            .expect("protects");
        batch.commit(receivers[usize::from(seq) % receivers.len()].1);
        if batch.is_full() {
            // As unsent: a full receive buffer drops silently.
            black_box(send_all(&node, &batch));
            batch.clear();
        }
        black_box(&receivers);
    })
}
