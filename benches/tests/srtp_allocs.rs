//! What SRTP decryption allocates per packet: the SRTP library with and without its replay
//! protection, and the node's session, which keeps its own replay windows instead.

use benches::alloc_counter::{AllocCount, CountingAllocator};
use benches::node::{av1_packet_1200, cm_keys, gcm_keys, inbound_packets};
use sfu::node::srtp::{session, SrtpContext, SrtpKeys, SrtpProfile};
use webrtc_srtp::context::Context;
use webrtc_srtp::option::srtp_replay_protection;
use webrtc_srtp::protection_profile::ProtectionProfile;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const PACKETS: usize = 200;
/// All but the first packet, which creates the stream's state.
const COUNTED: u64 = PACKETS as u64 - 1;

fn library_profile(profile: SrtpProfile) -> ProtectionProfile {
    match profile {
        SrtpProfile::AeadAes128Gcm => ProtectionProfile::AeadAes128Gcm,
        SrtpProfile::Aes128CmHmacSha1_80 => ProtectionProfile::Aes128CmHmacSha1_80,
    }
}

/// Allocations of `decrypt` over the [`COUNTED`] packets after the first, in total: a total,
/// not a quotient, so one allocation more on any packet shows.
fn counted(keys: &SrtpKeys, mut decrypt: impl FnMut(&[u8])) -> u64 {
    let packets = inbound_packets(keys, PACKETS);
    decrypt(&packets[0]);
    let counted = AllocCount::during(|| packets[1..].iter().for_each(|p| decrypt(p)));
    counted.allocs
}

fn library_allocs(keys: &SrtpKeys, replay_protection: bool) -> u64 {
    let option = replay_protection.then(|| srtp_replay_protection(1024));
    let profile = library_profile(keys.profile);
    let mut context = Context::new(&keys.remote_key, &keys.remote_salt, profile, option, None)
        .expect("valid keys");
    counted(keys, |p| {
        context.decrypt_rtp(p).expect("authentic");
    })
}

fn session_allocs(keys: &SrtpKeys) -> u64 {
    let mut ours = session(keys).expect("valid keys");
    let mut out = Vec::with_capacity(2048);
    counted(keys, |p| {
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
        assert_eq!(without, without_replay * COUNTED, "{:?}", keys.profile);
        let with = library_allocs(&keys, true);
        // A detector box and its bit vector, built on each of the two state lookups.
        assert_eq!(with, (without_replay + 4) * COUNTED, "{:?}", keys.profile);
        assert_eq!(
            session_allocs(&keys),
            without_replay * COUNTED,
            "{:?}",
            keys.profile
        );
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
