//! The node's send path per packet: write the packet into the datagram's buffer, SRTP-protect
//! it there (AES-128-GCM) and send it over loopback UDP, alone and batched. And the cipher
//! alone, per profile and direction: a packet protected where it lies, a publisher's packet
//! authenticated and decrypted where it arrived.

use std::hint::black_box;
use std::net::{SocketAddr, UdpSocket};

use rtp_ext::rtp::RtpPacket;
use sfu::node::batch::{kernel_segments, send_all, Batch, Segmentation};
use sfu::node::srtp::{session, SrtpContext, SrtpKeys, SrtpProfile, MAX_OVERHEAD};
use sfu::node::testing::keys;

use crate::fixtures::av1_packet_with_dd;
use crate::{Case, Stream};

/// A full-size video packet, as a browser sends it under a 1200-byte MTU budget.
pub const PACKET_LEN: usize = 1200;

pub fn cases() -> Vec<Case> {
    vec![
        egress("node/egress_srtp/in_place"),
        egress_batched("node/egress_srtp/batched", 1),
        egress_batched("node/egress_srtp/batched_fanout", FANOUT_PEERS),
        protect("node/protect_srtp/gcm", gcm_keys()),
        protect("node/protect_srtp/gcm256", gcm256_keys()),
        protect("node/protect_srtp/aes_cm", cm_keys()),
        ingress("node/unprotect_srtp/gcm", gcm_keys()),
        ingress("node/unprotect_srtp/gcm256", gcm256_keys()),
        ingress("node/unprotect_srtp/aes_cm", cm_keys()),
    ]
}

/// Inbound packets decrypted per pass; a fresh session starts each pass (its replay windows
/// would refuse the repeated sequence numbers).
const INGRESS_PASS: usize = 2_000;

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

/// AES-128-GCM keys.
pub fn gcm_keys() -> SrtpKeys {
    keys(SrtpProfile::AeadAes128Gcm, 0)
}

/// AES-256-GCM keys: the profile the node's DTLS server picks when a browser offers it.
pub fn gcm256_keys() -> SrtpKeys {
    keys(SrtpProfile::AeadAes256Gcm, 0)
}

/// AES-128-CM with HMAC-SHA1-80 keys.
pub fn cm_keys() -> SrtpKeys {
    keys(SrtpProfile::Aes128CmHmacSha1_80, 0)
}

/// `packet` in a buffer with room after it for what protection adds.
pub fn with_room(packet: &[u8]) -> Vec<u8> {
    let mut buf = packet.to_vec();
    buf.resize(packet.len() + MAX_OVERHEAD, 0);
    buf
}

/// `count` consecutive packets protected with the peer's (remote) keys, from sequence 0.
pub fn inbound_packets(keys: &SrtpKeys, count: usize) -> Vec<Vec<u8>> {
    let mut peer = session(&keys.mirrored()).expect("valid keys");
    let mut packet = av1_packet_1200();
    (0..count)
        .map(|i| {
            packet[2..4].copy_from_slice(&(i as u16).to_be_bytes());
            let mut buf = with_room(&packet);
            let len = peer.protect_rtp(&mut buf, packet.len()).expect("protects");
            buf.truncate(len);
            buf
        })
        .collect()
}

/// A publisher's packets through the node's session: each copied into the receive buffer (as
/// the socket would have written it), then authenticated and decrypted there.
fn ingress(name: &'static str, keys: SrtpKeys) -> Case {
    let packets = inbound_packets(&keys, INGRESS_PASS);
    let fresh = move || session(&keys).expect("valid keys");
    let mut ours = fresh();
    let mut buf = Vec::with_capacity(PACKET_LEN + MAX_OVERHEAD);
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
        buf.clear();
        buf.extend_from_slice(black_box(&packets[next]));
        let len = ours.unprotect_rtp(&mut buf).expect("authentic");
        assert_eq!(len, PACKET_LEN, "{name}: the whole packet");
        next += 1;
    })
    .over(stream)
}

/// The cipher alone: the packet's header rewritten (a new sequence number, as the forwarding
/// path writes one) and the packet protected where it lies. The payload it encrypts is the
/// last operation's ciphertext: to the cipher, bytes are bytes.
fn protect(name: &'static str, keys: SrtpKeys) -> Case {
    let mut ours = session(&keys).expect("valid keys");
    let mut buf = with_room(&av1_packet_1200());
    let mut seq = 0u16;
    Case::new(name, move || {
        seq = seq.wrapping_add(1);
        buf[2..4].copy_from_slice(&seq.to_be_bytes());
        let len = ours
            .protect_rtp(black_box(&mut buf), PACKET_LEN)
            .expect("protects");
        black_box(len);
    })
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

/// Writes `packet` with sequence number `seq` at the start of `out`, a buffer with room
/// after it, and protects it there: its protected length.
fn write_protected(
    session: &mut impl SrtpContext,
    packet: &[u8],
    seq: u16,
    out: &mut [u8],
) -> usize {
    out[..packet.len()].copy_from_slice(packet);
    // The header the forwarding path writes: a new sequence number per packet.
    out[2..4].copy_from_slice(&seq.to_be_bytes());
    session
        .protect_rtp(black_box(out), packet.len())
        .expect("protects")
}

fn egress(name: &'static str) -> Case {
    let mut ours = session(&gcm_keys()).expect("valid keys");
    let packet = av1_packet_1200();
    let mut out = vec![0; PACKET_LEN + MAX_OVERHEAD];
    let (node, peer, target) = loopback();
    let mut seq = 0u16;
    Case::new(name, move || {
        seq = seq.wrapping_add(1);
        let len = write_protected(&mut ours, &packet, seq, &mut out);
        // A full receive buffer drops silently; a send error would only mean a broken host.
        let _ = black_box(node.send_to(&out[..len], target));
        black_box(&peer);
    })
}

/// Peers the fan-out variant sends to in turn: no two consecutive datagrams go to one.
const FANOUT_PEERS: usize = 8;

/// The in-place send path with the node's batching: each packet protected in the next buffer
/// of a batch, and a full batch sent in one call (`sendmmsg` on Linux). To one peer, as a
/// keyframe or a probe cluster goes to one viewer, the batch leaves as one segmented send; to
/// `peers` in turn, as one packet fans out to many viewers, one datagram each.
fn egress_batched(name: &'static str, peers: usize) -> Case {
    let mut ours = session(&gcm_keys()).expect("valid keys");
    let packet = av1_packet_1200();
    let mut batch = Batch::new(PACKET_LEN + MAX_OVERHEAD);
    let node = UdpSocket::bind("127.0.0.1:0").expect("bind loopback");
    let segmentation = Segmentation::new(kernel_segments(&node));
    let receivers: Vec<(UdpSocket, SocketAddr)> = (0..peers)
        .map(|_| {
            let (_, peer, target) = loopback();
            (peer, target)
        })
        .collect();
    let mut seq = 0u16;
    Case::new(name, move || {
        seq = seq.wrapping_add(1);
        let buffer = batch.next_buffer().expect("a full batch is sent at once");
        let len = write_protected(&mut ours, &packet, seq, buffer);
        batch.commit(receivers[usize::from(seq) % receivers.len()].1, len);
        if batch.is_full() {
            // As unsent: a full receive buffer drops silently.
            black_box(send_all(&node, &batch, &segmentation));
            batch.clear();
        }
        black_box(&receivers);
    })
}
