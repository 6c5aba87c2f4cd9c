//! What SRTP protection allocates per packet: nothing, under every profile, both ways, for RTP
//! and RTCP, once a stream (an SSRC in one direction) has its entry.

use benches::alloc_counter::{AllocCount, CountingAllocator};
use benches::node::{av1_packet_1200, cm_keys, gcm256_keys, gcm_keys, inbound_packets, with_room};
use sfu::node::srtp::{session, SrtpContext, SrtpKeys};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const PACKETS: usize = 200;

fn every_profile() -> [SrtpKeys; 3] {
    [gcm_keys(), gcm256_keys(), cm_keys()]
}

/// A sender report with no report blocks.
fn sender_report(ssrc: u32) -> Vec<u8> {
    let mut packet = vec![0x80, 200, 0, 6];
    packet.extend_from_slice(&ssrc.to_be_bytes());
    packet.extend_from_slice(&[7; 20]);
    packet
}

#[test]
fn decrypting_allocates_nothing_after_a_streams_first_packet() {
    for keys in every_profile() {
        let packets = inbound_packets(&keys, PACKETS);
        let mut ours = session(&keys).expect("valid keys");
        let mut buf = Vec::with_capacity(2048);
        let mut decrypt = |packet: &Vec<u8>| {
            buf.clear();
            buf.extend_from_slice(packet);
            ours.unprotect_rtp(&mut buf).expect("authentic");
        };
        decrypt(&packets[0]);
        let counted = AllocCount::during(|| packets[1..].iter().for_each(&mut decrypt));
        assert_eq!(counted.allocs, 0, "{:?}", keys.profile);
    }
}

#[test]
fn encrypting_allocates_nothing_across_a_rollover() {
    for keys in every_profile() {
        let mut ours = session(&keys).expect("valid keys");
        let packet = av1_packet_1200();
        let mut buf = with_room(&packet);
        let mut send = |seq: u16| {
            buf[2..4].copy_from_slice(&seq.to_be_bytes());
            ours.protect_rtp(&mut buf, packet.len()).expect("protects");
        };
        send(65_000);
        // Across a rollover too: the count of a stream lives in its existing state.
        let counted = AllocCount::during(|| (65_001..=u16::MAX).chain(0..100).for_each(&mut send));
        assert_eq!(counted.allocs, 0, "{:?}", keys.profile);
    }
}

#[test]
fn rtcp_allocates_nothing_either_way() {
    for keys in every_profile() {
        let mut ours = session(&keys).expect("valid keys");
        let mut peer = session(&keys.mirrored()).expect("valid keys");
        let report = sender_report(0x1234);
        let mut buf = with_room(&report);
        let mut round_trip = || {
            buf.clear();
            buf.extend_from_slice(&report);
            buf.resize(report.len() + 64, 0);
            let len = peer.protect_rtcp(&mut buf, report.len()).expect("protects");
            buf.truncate(len);
            ours.unprotect_rtcp(&mut buf).expect("authentic");
        };
        round_trip();
        let counted = AllocCount::during(|| (0..PACKETS).for_each(|_| round_trip()));
        assert_eq!(counted.allocs, 0, "{:?}", keys.profile);
    }
}
