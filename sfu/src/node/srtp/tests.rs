use proptest::prelude::*;

use super::*;
use crate::node::replay::WINDOW;

const PROFILES: [SrtpProfile; 2] = [SrtpProfile::AeadAes128Gcm, SrtpProfile::Aes128CmHmacSha1_80];

fn keys(profile: SrtpProfile) -> SrtpKeys {
    SrtpKeys {
        profile,
        local_key: (1..=16).collect(),
        local_salt: (20..20 + profile.salt_len() as u8).collect(),
        remote_key: (40..56).collect(),
        remote_salt: (60..60 + profile.salt_len() as u8).collect(),
    }
}

/// Our side and the peer's, built from mirrored keys.
fn pair(profile: SrtpProfile) -> (SrtpSession, SrtpSession) {
    let keys = keys(profile);
    let ours = session(&keys).expect("valid keys");
    let theirs = session(&keys.mirrored()).expect("valid keys");
    (ours, theirs)
}

fn rtp(seq: u16, ssrc: u32, payload_len: usize) -> Vec<u8> {
    let mut packet = vec![0x80, 96];
    packet.extend_from_slice(&seq.to_be_bytes());
    packet.extend_from_slice(&(u32::from(seq) * 3000).to_be_bytes());
    packet.extend_from_slice(&ssrc.to_be_bytes());
    packet.extend((0..payload_len).map(|i| i as u8));
    packet
}

/// An RTP header with two CSRCs and a one-byte-header extension, then the payload.
fn rtp_with_csrcs_and_extension(seq: u16, ssrc: u32) -> Vec<u8> {
    let mut packet = rtp(seq, ssrc, 0);
    packet[0] = 0x80 | 0x10 | 2;
    packet.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2]);
    packet.extend_from_slice(&[0xBE, 0xDE, 0, 1, 0x10, 0xAA, 0, 0]);
    packet.extend_from_slice(&[7; 300]);
    packet
}

/// A sender report with no report blocks.
fn rtcp(ssrc: u32) -> Vec<u8> {
    let mut packet = vec![0x80, 200, 0, 6];
    packet.extend_from_slice(&ssrc.to_be_bytes());
    packet.extend((0..20).map(|i| i as u8));
    packet
}

fn protect_rtp(session: &mut SrtpSession, packet: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    session.protect_rtp(packet, &mut out).expect("protects");
    out
}

fn unprotect_rtp(session: &mut SrtpSession, packet: &[u8]) -> Result<Vec<u8>, SrtpError> {
    let mut out = Vec::new();
    session.unprotect_rtp(packet, &mut out).map(|()| out)
}

fn protect_rtcp(session: &mut SrtpSession, packet: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    session.protect_rtcp(packet, &mut out).expect("protects");
    out
}

fn unprotect_rtcp(session: &mut SrtpSession, packet: &[u8]) -> Result<Vec<u8>, SrtpError> {
    let mut out = Vec::new();
    session.unprotect_rtcp(packet, &mut out).map(|()| out)
}

#[test]
fn rtp_and_rtcp_round_trip_under_both_profiles() {
    for profile in PROFILES {
        let (mut ours, mut theirs) = pair(profile);
        let packet = rtp(1, 0x1234, 1200);
        let protected = protect_rtp(&mut ours, &packet);
        assert_eq!(protected.len(), packet.len() + profile.tag_len());
        assert_ne!(
            protected[12..packet.len()],
            packet[12..],
            "{profile:?} encrypts"
        );
        assert_eq!(
            unprotect_rtp(&mut theirs, &protected).expect("authentic"),
            packet
        );

        let report = rtcp(0x1234);
        let protected = protect_rtcp(&mut theirs, &report);
        assert_eq!(
            unprotect_rtcp(&mut ours, &protected).expect("authentic"),
            report
        );
    }
}

#[test]
fn replays_and_packets_older_than_the_window_are_rejected() {
    for profile in PROFILES {
        let (mut ours, mut theirs) = pair(profile);
        let sent: Vec<Vec<u8>> = (0..=2000)
            .map(|seq| protect_rtp(&mut theirs, &rtp(seq, 7, 100)))
            .collect();
        unprotect_rtp(&mut ours, &sent[2000]).expect("first packet");
        assert!(matches!(
            unprotect_rtp(&mut ours, &sent[2000]),
            Err(SrtpError::Replayed)
        ));
        let oldest_inside = 2000 - WINDOW as usize + 1;
        unprotect_rtp(&mut ours, &sent[oldest_inside]).expect("inside the window");
        let outside = unprotect_rtp(&mut ours, &sent[oldest_inside - 1]);
        assert!(matches!(outside, Err(SrtpError::Replayed)), "{profile:?}");
    }
}

#[test]
fn reordered_packets_inside_the_window_are_accepted_once() {
    for profile in PROFILES {
        let (mut ours, mut theirs) = pair(profile);
        let sent: Vec<Vec<u8>> = (10..20)
            .map(|seq| protect_rtp(&mut theirs, &rtp(seq, 7, 50)))
            .collect();
        for i in [0, 3, 1, 2, 9, 5, 4, 8, 6, 7] {
            unprotect_rtp(&mut ours, &sent[i]).expect("first arrival");
        }
        for packet in &sent {
            assert!(matches!(
                unprotect_rtp(&mut ours, packet),
                Err(SrtpError::Replayed)
            ));
        }
    }
}

#[test]
fn tampered_packets_are_rejected_and_do_not_move_the_window() {
    for profile in PROFILES {
        let (mut ours, mut theirs) = pair(profile);
        let early = protect_rtp(&mut theirs, &rtp(100, 7, 50));
        let mut far_ahead = protect_rtp(&mut theirs, &rtp(100 + 3 * WINDOW as u16, 7, 50));
        let last = far_ahead.len() - 1;
        far_ahead[last] ^= 1;
        let rejected = unprotect_rtp(&mut ours, &far_ahead);
        assert!(
            matches!(rejected, Err(SrtpError::Rejected(_))),
            "{profile:?}: {rejected:?}"
        );
        // Had the forged packet moved the window, this one would now be too old.
        unprotect_rtp(&mut ours, &early).expect("still inside the window");
        far_ahead[last] ^= 1;
        unprotect_rtp(&mut ours, &far_ahead).expect("the genuine packet");
    }
}

#[test]
fn srtcp_replays_tampering_and_the_unencrypted_flag_are_rejected() {
    for profile in PROFILES {
        let (mut ours, mut theirs) = pair(profile);
        let first = protect_rtcp(&mut theirs, &rtcp(9));
        let mut second = protect_rtcp(&mut theirs, &rtcp(9));
        unprotect_rtcp(&mut ours, &first).expect("authentic");
        assert!(matches!(
            unprotect_rtcp(&mut ours, &first),
            Err(SrtpError::Replayed)
        ));
        second[10] ^= 0x40;
        assert!(matches!(
            unprotect_rtcp(&mut ours, &second),
            Err(SrtpError::Rejected(_))
        ));
        second[10] ^= 0x40;
        let flag = match profile {
            SrtpProfile::AeadAes128Gcm => second.len() - 4,
            SrtpProfile::Aes128CmHmacSha1_80 => second.len() - 14,
        };
        second[flag] &= 0x7F;
        assert!(matches!(
            unprotect_rtcp(&mut ours, &second),
            Err(SrtpError::Unencrypted)
        ));
        second[flag] |= 0x80;
        unprotect_rtcp(&mut ours, &second).expect("the genuine packet");
    }
}

#[test]
fn short_packets_are_refused_before_the_library_sees_them() {
    for profile in PROFILES {
        let (mut ours, _) = pair(profile);
        for len in 0..(12 + profile.tag_len()) {
            let packet = vec![0x80; len];
            assert!(matches!(
                unprotect_rtp(&mut ours, &packet),
                Err(SrtpError::TooShort)
            ));
            assert!(matches!(
                unprotect_rtcp(&mut ours, &packet),
                Err(SrtpError::TooShort)
            ));
        }
    }
}

#[test]
fn in_place_gcm_egress_matches_the_library_byte_for_byte_across_a_rollover() {
    let keys = keys(SrtpProfile::AeadAes128Gcm);
    let mut fast = SrtpSession::new(&keys, Egress::Fastest).expect("valid keys");
    let mut library = SrtpSession::new(&keys, Egress::Library).expect("valid keys");
    let mut theirs = session(&keys.mirrored()).expect("valid keys");
    let seqs = (65_530..=u16::MAX).chain(0..6);
    for (i, seq) in seqs.enumerate() {
        for packet in [
            rtp(seq, 0xAAAA, 1200),
            rtp_with_csrcs_and_extension(seq, 0xBBBB),
        ] {
            let ours = protect_rtp(&mut fast, &packet);
            assert_eq!(
                ours,
                protect_rtp(&mut library, &packet),
                "packet {i}, seq {seq}"
            );
            assert_eq!(
                unprotect_rtp(&mut theirs, &ours).expect("authentic"),
                packet
            );
        }
    }
}

#[test]
fn in_place_gcm_egress_rejects_malformed_headers() {
    let mut fast = session(&keys(SrtpProfile::AeadAes128Gcm)).expect("valid keys");
    let mut out = Vec::new();
    let mut truncated_extension = rtp_with_csrcs_and_extension(1, 2);
    truncated_extension.truncate(26);
    for packet in [&[0x80; 11][..], &[0x40; 20][..], &truncated_extension] {
        let result = fast.protect_rtp(packet, &mut out);
        assert!(matches!(result, Err(SrtpError::Malformed)), "{packet:?}");
    }
}

#[test]
fn header_lengths_count_csrcs_and_the_extension() {
    assert_eq!(rtp_header_len(&rtp(1, 2, 10)), Some(12));
    assert_eq!(
        rtp_header_len(&rtp_with_csrcs_and_extension(1, 2)),
        Some(12 + 8 + 8)
    );
    assert_eq!(rtp_header_len(&rtp(1, 2, 0)[..11]), None);
}

fn arbitrary_rtp() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<u16>(),
        any::<u32>(),
        any::<u8>(),
        prop::collection::vec(any::<u8>(), 0..1400),
    )
        .prop_map(|(seq, ssrc, pt, payload)| {
            let mut packet = rtp(seq, ssrc, 0);
            packet[1] = pt;
            packet.extend_from_slice(&payload);
            packet
        })
}

proptest! {
    #[test]
    fn arbitrary_bytes_fail_authentication(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        for profile in PROFILES {
            let (mut ours, _) = pair(profile);
            let mut out = Vec::new();
            // Forging a tag by chance takes 2^80 tries at least.
            prop_assert!(ours.unprotect_rtp(&bytes, &mut out).is_err(), "{:?}", profile);
            prop_assert!(ours.unprotect_rtcp(&bytes, &mut out).is_err(), "{:?}", profile);
            // Protecting takes any bytes that parse; it must only not panic.
            let _ = ours.protect_rtp(&bytes, &mut out);
            let _ = ours.protect_rtcp(&bytes, &mut out);
        }
    }

    #[test]
    fn arbitrary_rtp_looking_bytes_fail_authentication(mut packet in arbitrary_rtp(), cut in any::<usize>()) {
        for profile in PROFILES {
            let (mut ours, _) = pair(profile);
            packet.truncate(cut % (packet.len() + 1));
            let mut out = Vec::new();
            prop_assert!(ours.unprotect_rtp(&packet, &mut out).is_err(), "{:?}", profile);
            prop_assert!(ours.unprotect_rtcp(&packet, &mut out).is_err(), "{:?}", profile);
        }
    }

    #[test]
    fn random_rtp_packets_round_trip(packets in prop::collection::vec(arbitrary_rtp(), 1..20)) {
        for profile in PROFILES {
            let (mut ours, mut theirs) = pair(profile);
            for packet in &packets {
                let protected = protect_rtp(&mut ours, packet);
                match unprotect_rtp(&mut theirs, &protected) {
                    Ok(plain) => prop_assert_eq!(&plain, packet),
                    // Random sequence numbers may repeat or fall behind the window.
                    Err(SrtpError::Replayed) => {}
                    Err(err) => prop_assert!(false, "{:?}: {}", profile, err),
                }
            }
        }
    }
}

/// Padding-only probes: the padding bit with an extension block. On the encrypted packet the
/// last byte is the tag's, so the header check must not read a padding count from it.
#[test]
fn padded_packets_with_extensions_authenticate() {
    for profile in PROFILES {
        let (mut ours, mut theirs) = pair(profile);
        for seq in 0..200u16 {
            let mut packet = rtp_with_csrcs_and_extension(seq, 0x1234);
            packet[0] |= 0x20;
            packet.extend_from_slice(&[0, 0, 0, 4]);
            let protected = protect_rtp(&mut theirs, &packet);
            let plain = unprotect_rtp(&mut ours, &protected);
            assert_eq!(plain.ok(), Some(packet), "{profile:?}");
        }
    }
}

/// Headers the SRTP library would walk past the datagram (fuzzing found both) are refused
/// before it sees them; the same bytes as proper padding pass.
#[test]
fn extension_elements_the_library_cannot_walk_are_refused() {
    let header = |element: u8| {
        let mut packet = rtp(7, 0x1234, 0);
        packet[0] |= 0x10;
        packet.extend_from_slice(&[0xBE, 0xDE, 0, 3]);
        packet.extend_from_slice(&[0; 11]);
        packet.push(element);
        packet
    };
    assert!(
        !library_walk_stays_inside(&header(0x0F)),
        "id 0 with a length"
    );
    assert!(
        !library_walk_stays_inside(&header(0x1F)),
        "an element past the end"
    );
    assert!(library_walk_stays_inside(&header(0x00)), "padding");
    assert!(
        library_walk_stays_inside(&header(0xF0)),
        "id 15 ends the walk"
    );
    let mut two_byte = rtp(7, 0x1234, 0);
    two_byte[0] |= 0x10;
    two_byte.extend_from_slice(&[0x10, 0x00, 0, 1, 0, 0, 0, 9]);
    assert!(
        !library_walk_stays_inside(&two_byte),
        "a two-byte element without its length"
    );
    for profile in PROFILES {
        let (mut ours, _) = pair(profile);
        let refused = unprotect_rtp(&mut ours, &header(0x0F));
        assert!(matches!(refused, Err(SrtpError::Malformed)), "{profile:?}");
    }
}
