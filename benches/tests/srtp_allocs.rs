//! What SRTP decryption allocates per packet: the SRTP library with and without its replay
//! protection, and the node's session, which keeps its own replay windows instead.

use benches::alloc_counter::{AllocCount, CountingAllocator};
use benches::node::{av1_packet_1200, gcm_keys};
use sfu::node::srtp::{session, Egress, SrtpContext, SrtpKeys, SrtpProfile, SrtpSession};
use webrtc_srtp::context::Context;
use webrtc_srtp::option::srtp_replay_protection;
use webrtc_srtp::protection_profile::ProtectionProfile;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const PACKETS: usize = 200;

fn cm_keys() -> SrtpKeys {
    SrtpKeys {
        profile: SrtpProfile::Aes128CmHmacSha1_80,
        local_key: (1..=16).collect(),
        local_salt: (17..31).collect(),
        remote_key: (31..47).collect(),
        remote_salt: (47..61).collect(),
    }
}

fn library_profile(profile: SrtpProfile) -> ProtectionProfile {
    match profile {
        SrtpProfile::AeadAes128Gcm => ProtectionProfile::AeadAes128Gcm,
        SrtpProfile::Aes128CmHmacSha1_80 => ProtectionProfile::Aes128CmHmacSha1_80,
    }
}

/// `PACKETS` consecutive packets protected with the peer's (remote) keys.
fn inbound_packets(keys: &SrtpKeys) -> Vec<Vec<u8>> {
    let mut peer = SrtpSession::new(&keys.mirrored(), Egress::Library).expect("valid keys");
    let mut packet = av1_packet_1200();
    (0..PACKETS as u16)
        .map(|seq| {
            packet[2..4].copy_from_slice(&seq.to_be_bytes());
            let mut out = Vec::new();
            peer.protect_rtp(&packet, &mut out).expect("protects");
            out
        })
        .collect()
}

/// Allocations per packet of `decrypt` over all but the first packet (which creates the
/// stream's state).
fn per_packet(packets: &[Vec<u8>], mut decrypt: impl FnMut(&[u8])) -> u64 {
    decrypt(&packets[0]);
    let counted = AllocCount::during(|| packets[1..].iter().for_each(|p| decrypt(p)));
    counted.allocs / (packets.len() as u64 - 1)
}

fn library_allocs(keys: &SrtpKeys, replay_protection: bool) -> u64 {
    let option = replay_protection.then(|| srtp_replay_protection(1024));
    let profile = library_profile(keys.profile);
    let mut context = Context::new(&keys.remote_key, &keys.remote_salt, profile, option, None)
        .expect("valid keys");
    per_packet(&inbound_packets(keys), |p| {
        context.decrypt_rtp(p).expect("authentic");
    })
}

fn session_allocs(keys: &SrtpKeys) -> u64 {
    let mut ours = session(keys).expect("valid keys");
    let mut out = Vec::with_capacity(2048);
    per_packet(&inbound_packets(keys), |p| {
        ours.unprotect_rtp(p, &mut out).expect("authentic");
    })
}

#[test]
fn the_library_replay_protection_costs_four_allocations_per_packet_and_ours_none() {
    // Without replay protection, for this packet with three header extensions: the parsed
    // header's extension list and extension payloads (4), then for AES-GCM the IV, the AEAD's
    // plaintext and the output buffer (3), for AES-CM the output buffer (1).
    for (keys, without_replay) in [(gcm_keys(), 7), (cm_keys(), 5)] {
        let without = library_allocs(&keys, false);
        assert_eq!(without, without_replay, "{:?}", keys.profile);
        let with = library_allocs(&keys, true);
        // A detector box and its bit vector, built on each of the two state lookups.
        assert_eq!(with, without + 4, "{:?}", keys.profile);
        assert_eq!(session_allocs(&keys), without, "{:?}", keys.profile);
    }
}

#[test]
fn in_place_gcm_egress_allocates_nothing() {
    let mut ours = session(&gcm_keys()).expect("valid keys");
    let mut packet = av1_packet_1200();
    let mut out = Vec::with_capacity(2048);
    let mut send = |seq: u16| {
        packet[2..4].copy_from_slice(&seq.to_be_bytes());
        ours.protect_rtp(&packet, &mut out).expect("protects");
    };
    send(65_000);
    // Across a rollover too: the count of a stream lives in its existing state.
    let counted = AllocCount::during(|| (65_001..=u16::MAX).chain(0..100).for_each(&mut send));
    assert_eq!(counted.allocs, 0);
}
