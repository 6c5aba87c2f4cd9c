//! Our SRTP against an independent implementation (the `webrtc-srtp` crate), both ways, under
//! every profile, for RTP and RTCP and across a rollover.

use webrtc_srtp::context::Context;
use webrtc_srtp::protection_profile::ProtectionProfile;

use super::tests::{
    keys, protect_rtcp, protect_rtp, rtcp, rtp, rtp_with_csrcs_and_extension, unprotect_rtcp,
    unprotect_rtp, PROFILES,
};
use super::*;

fn library_profile(profile: SrtpProfile) -> ProtectionProfile {
    match profile {
        SrtpProfile::AeadAes128Gcm => ProtectionProfile::AeadAes128Gcm,
        SrtpProfile::AeadAes256Gcm => ProtectionProfile::AeadAes256Gcm,
        SrtpProfile::Aes128CmHmacSha1_80 => ProtectionProfile::Aes128CmHmacSha1_80,
    }
}

/// The library's contexts for the peer of a session with `keys`: (what the peer sends with,
/// what it receives with). Its replay protection is off: the node's windows are under test.
fn library_peer(keys: &SrtpKeys) -> (Context, Context) {
    let profile = library_profile(keys.profile);
    let context = |key: &[u8], salt: &[u8]| {
        Context::new(key, salt, profile, None, None).expect("the library takes the keys")
    };
    (
        context(&keys.remote_key, &keys.remote_salt),
        context(&keys.local_key, &keys.local_salt),
    )
}

/// Sequence numbers across a rollover.
fn across_a_rollover() -> impl Iterator<Item = u16> {
    (65_520..=u16::MAX).chain(0..16)
}

#[test]
fn rtp_we_protect_is_what_the_library_would_send_and_it_reads_it() {
    for profile in PROFILES {
        let keys = keys(profile);
        let mut ours = session(&keys).expect("valid keys");
        // The library protecting with our keys, to compare bytes with.
        let mut reference = library_peer(&keys.mirrored()).0;
        let mut peer = library_peer(&keys).1;
        for seq in across_a_rollover() {
            for packet in [
                rtp(seq, 0xAAAA, 1200),
                rtp_with_csrcs_and_extension(seq, 0xBBBB),
            ] {
                let protected = protect_rtp(&mut ours, &packet);
                let expected = reference
                    .encrypt_rtp(&packet)
                    .expect("the library protects");
                assert_eq!(protected, expected, "{profile:?}, seq {seq}");
                let plain = peer
                    .decrypt_rtp(&protected)
                    .expect("the library authenticates");
                assert_eq!(plain, packet, "{profile:?}, seq {seq}");
            }
        }
    }
}

#[test]
fn rtp_the_library_protects_we_read() {
    for profile in PROFILES {
        let keys = keys(profile);
        let mut ours = session(&keys).expect("valid keys");
        let mut peer = library_peer(&keys).0;
        for seq in across_a_rollover() {
            for packet in [
                rtp(seq, 0xAAAA, 1200),
                rtp_with_csrcs_and_extension(seq, 0xBBBB),
            ] {
                let protected = peer.encrypt_rtp(&packet).expect("the library protects");
                let plain = unprotect_rtp(&mut ours, &protected);
                assert_eq!(plain, Ok(packet), "{profile:?}, seq {seq}");
            }
        }
    }
}

#[test]
fn rtcp_goes_both_ways() {
    for profile in PROFILES {
        let keys = keys(profile);
        let mut ours = session(&keys).expect("valid keys");
        let (mut peer_out, mut peer_in) = library_peer(&keys);
        for ssrc in [1, 2, 1, 1, 2] {
            let report = rtcp(ssrc);
            let protected = protect_rtcp(&mut ours, &report);
            let plain = peer_in
                .decrypt_rtcp(&protected)
                .expect("the library authenticates");
            assert_eq!(plain, report, "{profile:?}");

            let protected = peer_out
                .encrypt_rtcp(&report)
                .expect("the library protects");
            assert_eq!(
                unprotect_rtcp(&mut ours, &protected),
                Ok(report),
                "{profile:?}"
            );
        }
    }
}

#[test]
fn tampering_either_side_notices_the_other_does_too() {
    for profile in PROFILES {
        let keys = keys(profile);
        let mut ours = session(&keys).expect("valid keys");
        let mut peer = library_peer(&keys).0;
        let mut protected = peer
            .encrypt_rtp(&rtp(1, 5, 100))
            .expect("protects")
            .to_vec();
        protected[30] ^= 0x01;
        assert_eq!(
            unprotect_rtp(&mut ours, &protected),
            Err(SrtpError::Rejected)
        );
        let mut report = peer.encrypt_rtcp(&rtcp(5)).expect("protects").to_vec();
        report[12] ^= 0x01;
        assert_eq!(unprotect_rtcp(&mut ours, &report), Err(SrtpError::Rejected));
    }
}
