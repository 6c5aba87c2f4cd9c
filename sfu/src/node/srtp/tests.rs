use proptest::prelude::*;

use super::*;
use crate::node::replay::WINDOW;
use crate::node::testing;

pub(super) const PROFILES: [SrtpProfile; 3] = [
    SrtpProfile::AeadAes128Gcm,
    SrtpProfile::AeadAes256Gcm,
    SrtpProfile::Aes128CmHmacSha1_80,
];

/// Keys as a DTLS handshake would have exported them for `profile`.
pub(super) fn keys(profile: SrtpProfile) -> SrtpKeys {
    testing::keys(profile, 0)
}

/// Our side and the peer's, built from mirrored keys.
fn pair(profile: SrtpProfile) -> (SrtpSession, SrtpSession) {
    let keys = keys(profile);
    let ours = session(&keys).expect("valid keys");
    let theirs = session(&keys.mirrored()).expect("valid keys");
    (ours, theirs)
}

pub(super) fn rtp(seq: u16, ssrc: u32, payload_len: usize) -> Vec<u8> {
    let mut packet = vec![0x80, 96];
    packet.extend_from_slice(&seq.to_be_bytes());
    packet.extend_from_slice(&(u32::from(seq) * 3000).to_be_bytes());
    packet.extend_from_slice(&ssrc.to_be_bytes());
    packet.extend((0..payload_len).map(|i| i as u8));
    packet
}

/// An RTP header with two CSRCs and a one-byte-header extension, then the payload.
pub(super) fn rtp_with_csrcs_and_extension(seq: u16, ssrc: u32) -> Vec<u8> {
    let mut packet = rtp(seq, ssrc, 0);
    packet[0] = 0x80 | 0x10 | 2;
    packet.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2]);
    packet.extend_from_slice(&[0xBE, 0xDE, 0, 1, 0x10, 0xAA, 0, 0]);
    packet.extend_from_slice(&[7; 300]);
    packet
}

/// A sender report with no report blocks.
pub(super) fn rtcp(ssrc: u32) -> Vec<u8> {
    let mut packet = vec![0x80, 200, 0, 6];
    packet.extend_from_slice(&ssrc.to_be_bytes());
    packet.extend((0..20).map(|i| i as u8));
    packet
}

/// `packet` in a buffer with room for the most protection adds.
fn with_room(packet: &[u8]) -> Vec<u8> {
    let mut buf = packet.to_vec();
    buf.resize(packet.len() + MAX_OVERHEAD, 0);
    buf
}

pub(super) fn protect_rtp(session: &mut impl SrtpContext, packet: &[u8]) -> Vec<u8> {
    let mut buf = with_room(packet);
    let len = session
        .protect_rtp(&mut buf, packet.len())
        .expect("protects");
    buf.truncate(len);
    buf
}

pub(super) fn protect_rtcp(session: &mut impl SrtpContext, packet: &[u8]) -> Vec<u8> {
    let mut buf = with_room(packet);
    let len = session
        .protect_rtcp(&mut buf, packet.len())
        .expect("protects");
    buf.truncate(len);
    buf
}

pub(super) fn unprotect_rtp(
    session: &mut impl SrtpContext,
    packet: &[u8],
) -> Result<Vec<u8>, SrtpError> {
    let mut buf = packet.to_vec();
    let len = session.unprotect_rtp(&mut buf)?;
    buf.truncate(len);
    Ok(buf)
}

pub(super) fn unprotect_rtcp(
    session: &mut impl SrtpContext,
    packet: &[u8],
) -> Result<Vec<u8>, SrtpError> {
    let mut buf = packet.to_vec();
    let len = session.unprotect_rtcp(&mut buf)?;
    buf.truncate(len);
    Ok(buf)
}

#[test]
fn rtp_and_rtcp_round_trip_under_every_profile() {
    for profile in PROFILES {
        let (mut ours, mut theirs) = pair(profile);
        for packet in [
            rtp(1, 0x1234, 1200),
            rtp_with_csrcs_and_extension(2, 0x1234),
        ] {
            let protected = protect_rtp(&mut ours, &packet);
            assert_eq!(protected.len(), packet.len() + profile.rtp_overhead());
            let header = rtp_header_len(&packet).expect("a header");
            assert_eq!(
                protected[..header],
                packet[..header],
                "the header stays clear"
            );
            assert_ne!(
                protected[header..packet.len()],
                packet[header..],
                "{profile:?} encrypts"
            );
            let plain = unprotect_rtp(&mut theirs, &protected).expect("authentic");
            assert_eq!(plain, packet);
        }

        let report = rtcp(0x1234);
        let protected = protect_rtcp(&mut theirs, &report);
        assert_eq!(protected.len(), report.len() + profile.rtcp_overhead());
        assert_ne!(
            protected[8..report.len()],
            report[8..],
            "{profile:?} encrypts"
        );
        let plain = unprotect_rtcp(&mut ours, &protected).expect("authentic");
        assert_eq!(plain, report);
    }
}

#[test]
fn the_rollover_count_follows_the_sequence_numbers_on_both_sides() {
    for profile in PROFILES {
        let (mut ours, mut theirs) = pair(profile);
        for seq in (65_500..=u16::MAX).chain(0..100) {
            let packet = rtp(seq, 0xAAAA, 100);
            let protected = protect_rtp(&mut ours, &packet);
            let plain = unprotect_rtp(&mut theirs, &protected);
            assert_eq!(plain, Ok(packet), "{profile:?}, seq {seq}");
        }
        // A late packet from before the rollover authenticates under its own count.
        let (mut ours, mut theirs) = pair(profile);
        let sent: Vec<Vec<u8>> = [65_534, 65_535, 1]
            .map(|seq| protect_rtp(&mut ours, &rtp(seq, 1, 10)))
            .into();
        for i in [1, 2, 0] {
            assert!(
                unprotect_rtp(&mut theirs, &sent[i]).is_ok(),
                "{profile:?}, {i}"
            );
        }
    }
}

/// Each SSRC sent keeps its own rollover count, interleaved with others, past the handful a
/// session keeps inline: a viewer of a conference is sent many streams.
#[test]
fn each_ssrc_sent_rolls_over_on_its_own() {
    for profile in PROFILES {
        let (mut ours, mut theirs) = pair(profile);
        for step in 0..200u16 {
            for ssrc in 1..=9u32 {
                // Stream `ssrc` starts `ssrc * 20` packets before its rollover.
                let seq = (u16::MAX - ssrc as u16 * 20).wrapping_add(step);
                let packet = rtp(seq, ssrc, 20);
                let protected = protect_rtp(&mut ours, &packet);
                let plain = unprotect_rtp(&mut theirs, &protected);
                assert_eq!(plain, Ok(packet), "{profile:?}, SSRC {ssrc}, seq {seq}");
            }
        }
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
        assert_eq!(
            unprotect_rtp(&mut ours, &sent[2000]),
            Err(SrtpError::Replayed)
        );
        let oldest_inside = 2000 - WINDOW as usize + 1;
        unprotect_rtp(&mut ours, &sent[oldest_inside]).expect("inside the window");
        let outside = unprotect_rtp(&mut ours, &sent[oldest_inside - 1]);
        assert_eq!(outside, Err(SrtpError::Replayed), "{profile:?}");
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
            assert_eq!(unprotect_rtp(&mut ours, packet), Err(SrtpError::Replayed));
        }
    }
}

#[test]
fn tampered_packets_are_rejected_and_do_not_move_the_window() {
    for profile in PROFILES {
        let (mut ours, mut theirs) = pair(profile);
        let early = protect_rtp(&mut theirs, &rtp(100, 7, 50));
        let mut far_ahead = protect_rtp(&mut theirs, &rtp(100 + 3 * WINDOW as u16, 7, 50));
        for at in [1, 20, far_ahead.len() - 1] {
            far_ahead[at] ^= 1;
            let rejected = unprotect_rtp(&mut ours, &far_ahead);
            assert_eq!(rejected, Err(SrtpError::Rejected), "{profile:?}, byte {at}");
            far_ahead[at] ^= 1;
        }
        // Had the forged packet moved the window, this one would now be too old.
        unprotect_rtp(&mut ours, &early).expect("still inside the window");
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
        assert_eq!(unprotect_rtcp(&mut ours, &first), Err(SrtpError::Replayed));
        second[10] ^= 0x40;
        assert_eq!(unprotect_rtcp(&mut ours, &second), Err(SrtpError::Rejected));
        second[10] ^= 0x40;
        let trailer = match profile {
            SrtpProfile::AeadAes128Gcm | SrtpProfile::AeadAes256Gcm => second.len() - 4,
            SrtpProfile::Aes128CmHmacSha1_80 => second.len() - 14,
        };
        // The index is authenticated: another index is another packet.
        second[trailer + 3] ^= 0x10;
        assert_eq!(unprotect_rtcp(&mut ours, &second), Err(SrtpError::Rejected));
        second[trailer + 3] ^= 0x10;
        second[trailer] &= 0x7F;
        assert_eq!(
            unprotect_rtcp(&mut ours, &second),
            Err(SrtpError::Unencrypted)
        );
        second[trailer] |= 0x80;
        unprotect_rtcp(&mut ours, &second).expect("the genuine packet");
    }
}

#[test]
fn srtcp_indices_count_from_zero_per_ssrc() {
    for profile in PROFILES {
        let (mut ours, _) = pair(profile);
        for expected in [0u32, 1, 2] {
            for ssrc in [5, 6] {
                let protected = protect_rtcp(&mut ours, &rtcp(ssrc));
                let trailer = match profile {
                    SrtpProfile::Aes128CmHmacSha1_80 => protected.len() - 14,
                    _ => protected.len() - 4,
                };
                let word = read_u32(&protected, trailer);
                assert_eq!(word, E_FLAG | expected, "{profile:?}, SSRC {ssrc}");
            }
        }
    }
}

#[test]
fn short_packets_are_refused() {
    for profile in PROFILES {
        let (mut ours, _) = pair(profile);
        for len in 0..(12 + profile.tag_len()) {
            let packet = vec![0x80; len];
            assert_eq!(unprotect_rtp(&mut ours, &packet), Err(SrtpError::TooShort));
            assert_eq!(unprotect_rtcp(&mut ours, &packet), Err(SrtpError::TooShort));
        }
    }
}

#[test]
fn headers_longer_than_the_packet_leaves_for_them_are_refused() {
    for profile in PROFILES {
        let (mut ours, mut theirs) = pair(profile);
        let mut protected = protect_rtp(&mut theirs, &rtp(1, 2, 100));
        // Fifteen CSRCs, then an extension claiming more words than there are.
        protected[0] = 0x80 | 0x10 | 15;
        protected[74..76].copy_from_slice(&[0xFF, 0xFF]);
        assert_eq!(
            unprotect_rtp(&mut ours, &protected),
            Err(SrtpError::Malformed)
        );
        // Fifteen CSRCs alone fit, but not with the tag after them.
        let mut protected = protect_rtp(&mut theirs, &rtp(2, 2, 60 - profile.tag_len()));
        protected[0] = 0x80 | 15;
        assert_eq!(
            unprotect_rtp(&mut ours, &protected),
            Err(SrtpError::Malformed)
        );
    }
}

#[test]
fn protection_refuses_malformed_headers_and_buffers_without_room() {
    for profile in PROFILES {
        let (mut ours, _) = pair(profile);
        let mut truncated_extension = rtp_with_csrcs_and_extension(1, 2);
        truncated_extension.truncate(26);
        for packet in [&[0x80; 11][..], &[0x40; 20][..], &truncated_extension] {
            let mut buf = with_room(packet);
            let result = ours.protect_rtp(&mut buf, packet.len());
            assert_eq!(result, Err(SrtpError::Malformed), "{packet:?}");
        }
        let mut buf = with_room(&rtcp(1));
        assert_eq!(ours.protect_rtcp(&mut buf, 7), Err(SrtpError::Malformed));

        let packet = rtp(1, 2, 100);
        let mut tight = packet.clone();
        tight.resize(packet.len() + profile.rtp_overhead() - 1, 0);
        assert_eq!(
            ours.protect_rtp(&mut tight, packet.len()),
            Err(SrtpError::NoRoom)
        );
        let past_the_end = tight.len() + 1;
        assert_eq!(
            ours.protect_rtp(&mut tight, past_the_end),
            Err(SrtpError::NoRoom)
        );
        let report = rtcp(1);
        let mut tight = report.clone();
        tight.resize(report.len() + profile.rtcp_overhead() - 1, 0);
        assert_eq!(
            ours.protect_rtcp(&mut tight, report.len()),
            Err(SrtpError::NoRoom)
        );
        // Each profile's own overhead is room enough.
        tight.push(0);
        assert_eq!(ours.protect_rtcp(&mut tight, report.len()), Ok(tight.len()));
    }
}

#[test]
fn keys_that_do_not_fit_the_profile_are_refused() {
    for profile in PROFILES {
        let good = keys(profile);
        let mut short_key = good.clone();
        short_key.local_key.pop();
        let mut long_salt = good.clone();
        long_salt.remote_salt.push(0);
        for keys in [short_key, long_salt] {
            assert_eq!(session(&keys).err(), Some(SrtpError::Keys), "{profile:?}");
        }
    }
    // A 128-bit key under the 256-bit profile, the other way round too.
    let mut keys = keys(SrtpProfile::AeadAes128Gcm);
    keys.profile = SrtpProfile::AeadAes256Gcm;
    assert_eq!(session(&keys).err(), Some(SrtpError::Keys));
}

#[test]
fn unprotected_passes_packets_unchanged() {
    let packet = rtp(1, 2, 50);
    assert_eq!(protect_rtp(&mut Unprotected, &packet), packet);
    assert_eq!(protect_rtcp(&mut Unprotected, &packet), packet);
    assert_eq!(unprotect_rtp(&mut Unprotected, &packet), Ok(packet.clone()));
    assert_eq!(
        unprotect_rtcp(&mut Unprotected, &packet),
        Ok(packet.clone())
    );
    let mut buf = packet.clone();
    assert_eq!(
        Unprotected.protect_rtp(&mut buf, packet.len() + 1),
        Err(SrtpError::NoRoom)
    );
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

/// Padding-only probes: the padding bit with an extension block. On the encrypted packet the
/// last byte is the tag's, so nothing may read a padding count from it.
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
            assert_eq!(plain, Ok(packet), "{profile:?}");
        }
    }
}

/// Extension elements are never walked: lengths that would run past the datagram (id 0 with
/// a length, an element past the end, a two-byte element cut short) are only bytes, which
/// authenticate when the peer sent them and are rejected when forged.
#[test]
fn extension_elements_are_never_walked() {
    let header = |element: u8| {
        let mut packet = rtp(7, 0x1234, 0);
        packet[0] |= 0x10;
        packet.extend_from_slice(&[0xBE, 0xDE, 0, 3]);
        packet.extend_from_slice(&[0; 11]);
        packet.push(element);
        packet
    };
    let mut two_byte = rtp(7, 0x1234, 0);
    two_byte[0] |= 0x10;
    two_byte.extend_from_slice(&[0x10, 0x00, 0, 1, 0, 0, 0, 9]);
    for profile in PROFILES {
        for packet in [header(0x0F), header(0x1F), two_byte.clone()] {
            let (mut ours, mut theirs) = pair(profile);
            let mut forged = with_room(&packet);
            forged.truncate(packet.len() + profile.tag_len());
            assert_eq!(unprotect_rtp(&mut ours, &forged), Err(SrtpError::Rejected));
            let protected = protect_rtp(&mut theirs, &packet);
            assert_eq!(unprotect_rtp(&mut ours, &protected), Ok(packet));
        }
    }
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
            // Forging a tag by chance takes 2^80 tries at least.
            prop_assert!(unprotect_rtp(&mut ours, &bytes).is_err(), "{:?}", profile);
            prop_assert!(unprotect_rtcp(&mut ours, &bytes).is_err(), "{:?}", profile);
            // Protecting takes any bytes that parse; it must only not panic.
            let mut buf = with_room(&bytes);
            let _ = ours.protect_rtp(&mut buf, bytes.len());
            let mut buf = with_room(&bytes);
            let _ = ours.protect_rtcp(&mut buf, bytes.len());
        }
    }

    #[test]
    fn arbitrary_rtp_looking_bytes_fail_authentication(
        mut packet in arbitrary_rtp(),
        cut in any::<usize>(),
    ) {
        for profile in PROFILES {
            let (mut ours, _) = pair(profile);
            packet.truncate(cut % (packet.len() + 1));
            prop_assert!(unprotect_rtp(&mut ours, &packet).is_err(), "{:?}", profile);
            prop_assert!(unprotect_rtcp(&mut ours, &packet).is_err(), "{:?}", profile);
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
