//! Both directions of one peer's SRTP: the session keys of each, the rollover counts and SRTCP
//! indices of what we send, the replay windows of what we receive.

use std::collections::HashMap;

use smallvec::SmallVec;

use super::cm::AesCm;
use super::gcm::Gcm;
use super::kdf::{self, Labels};
use super::streams::Streams;
use super::{
    read_u16, read_u32, rtp_header_len, Rtcp, Rtp, SrtpContext, SrtpError, SrtpKeys, SrtpProfile,
    Transform, E_FLAG, RTCP_HEADER_LEN, RTP_HEADER_LEN, SRTCP_INDEX_LEN,
};
use crate::engine::id_map::IdMap;
use crate::engine::prefetch::{prefetch, prefetch_lines};
use crate::node::replay::{ReplayWindow, Rollover, RtpReplay};

/// The largest SRTCP index (RFC 3711 §3.4: 31 bits). Re-keying is due before it is passed.
const MAX_SRTCP_INDEX: u32 = 0x7FFF_FFFF;

/// The SSRCs a session keeps replay state for, in each of RTP and RTCP, unless told
/// otherwise ([`SrtpSession::with_streams`]): a browser sends under a handful, and a
/// conference participant's receiver reports come under one SSRC per receiving m-section at
/// most. 512 windows of RTCP and of RTP come to about 150 KB.
pub const DEFAULT_STREAMS: usize = 512;

/// A session for `keys`, keeping state for at most [`DEFAULT_STREAMS`] SSRCs of each kind.
pub fn session(keys: &SrtpKeys) -> Result<SrtpSession, SrtpError> {
    SrtpSession::with_streams(keys, DEFAULT_STREAMS)
}

/// Both directions of one peer's SRTP, with the node's replay windows on the inbound side.
/// No allocation per packet once a stream (an SSRC in one direction) has its entry.
pub struct SrtpSession {
    profile: SrtpProfile,
    outbound: Direction,
    inbound: Direction,
    /// Per SSRC sent, the highest extended sequence number: the rollover count's source.
    /// Looked up for every packet to every viewer: held in the session itself for the few
    /// streams a viewer has, so the lookup reads lines [`SrtpContext::prefetch`] asked for.
    sent_rtp: SentStreams,
    /// Per SSRC sent, the next SRTCP index.
    sent_rtcp: IdMap<u32, u32>,
    /// Per SSRC the peer's authenticated packets carried, up to a bound: a packet under one
    /// more is refused before it is decrypted. Boxed: only what the peer sends reads it, and
    /// the session's lines asked for ahead of every packet sent stay few.
    received: Box<Received>,
}

impl std::fmt::Debug for SrtpSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SrtpSession")
            .field("profile", &self.profile)
            .finish_non_exhaustive()
    }
}

impl SrtpSession {
    /// Both directions' session keys, derived from `keys` (RFC 3711 §4.3); no stream has state
    /// yet, and at most `max_streams` SSRCs of what the peer sends in each of RTP and RTCP will.
    pub fn with_streams(keys: &SrtpKeys, max_streams: usize) -> Result<Self, SrtpError> {
        let profile = keys.profile;
        if keys.local_key.len() != profile.key_len() || keys.remote_key.len() != profile.key_len() {
            return Err(SrtpError::Keys);
        }
        Ok(Self {
            profile,
            outbound: Direction::new(profile, &keys.local_key, &keys.local_salt)?,
            inbound: Direction::new(profile, &keys.remote_key, &keys.remote_salt)?,
            sent_rtp: SentStreams::default(),
            sent_rtcp: IdMap::default(),
            received: Box::new(Received {
                rtp: Streams::new(max_streams),
                rtcp: Streams::new(max_streams),
            }),
        })
    }

    /// The protection profile the session's keys are for.
    pub fn profile(&self) -> SrtpProfile {
        self.profile
    }

    /// The SRTCP trailer of `packet`: (E flag, index). Its place depends on the profile: after
    /// the tag for AES-GCM (RFC 7714 §9.2), before it for AES-CM (RFC 3711 §3.4).
    fn srtcp_trailer(&self, packet: &[u8]) -> Result<(bool, u32), SrtpError> {
        let tag = self.profile.tag_len();
        if packet.len() < RTCP_HEADER_LEN + tag + SRTCP_INDEX_LEN {
            return Err(SrtpError::TooShort);
        }
        let end = match self.profile {
            SrtpProfile::AeadAes128Gcm | SrtpProfile::AeadAes256Gcm => packet.len(),
            SrtpProfile::Aes128CmHmacSha1_80 => packet.len() - tag,
        };
        let word = read_u32(packet, end - SRTCP_INDEX_LEN);
        Ok((word & E_FLAG != 0, word & MAX_SRTCP_INDEX))
    }
}

impl SrtpContext for SrtpSession {
    /// Asks for what sealing an RTP packet reads: the session's own fields and the outbound
    /// RTP cipher's keys, which an AES-GCM session holds inline (no pointer to wait for).
    fn prefetch(&self) {
        prefetch(&self.profile);
        prefetch_lines(&self.sent_rtp, size_of::<SentStreams>());
        self.outbound.rtp.prefetch();
    }

    fn protect_rtp(&mut self, buf: &mut [u8], len: usize) -> Result<usize, SrtpError> {
        let packet = buf.get(..len).ok_or(SrtpError::NoRoom)?;
        let header_len = rtp_header_len(packet).ok_or(SrtpError::Malformed)?;
        if buf.len() < len + self.profile.tag_len() {
            return Err(SrtpError::NoRoom);
        }
        let (seq, ssrc) = (read_u16(buf, 2), read_u32(buf, 8));
        let stream = self.sent_rtp.entry(ssrc);
        // A sequence number from before the first rollover count is sent under count 0.
        let index = stream.estimate(seq).unwrap_or(u64::from(seq));
        let packet = Rtp {
            header_len,
            ssrc,
            index,
        };
        let protected = self.outbound.rtp.transform().seal_rtp(buf, len, packet)?;
        stream.advance(index);
        Ok(protected)
    }

    fn protect_rtcp(&mut self, buf: &mut [u8], len: usize) -> Result<usize, SrtpError> {
        let packet = buf.get(..len).ok_or(SrtpError::NoRoom)?;
        if packet.len() < RTCP_HEADER_LEN || packet[0] >> 6 != 2 {
            return Err(SrtpError::Malformed);
        }
        if buf.len() < len + self.profile.tag_len() + SRTCP_INDEX_LEN {
            return Err(SrtpError::NoRoom);
        }
        let ssrc = read_u32(buf, 4);
        let next = self.sent_rtcp.entry(ssrc).or_insert(0);
        let index = *next;
        if index > MAX_SRTCP_INDEX {
            return Err(SrtpError::Exhausted);
        }
        let packet = Rtcp { ssrc, index };
        let protected = self.outbound.rtcp.transform().seal_rtcp(buf, len, packet)?;
        *next += 1;
        Ok(protected)
    }

    fn unprotect_rtp(&mut self, buf: &mut [u8]) -> Result<usize, SrtpError> {
        let tag = self.profile.tag_len();
        if buf.len() < RTP_HEADER_LEN + tag {
            return Err(SrtpError::TooShort);
        }
        let header_len = rtp_header_len(buf)
            .filter(|&header| header + tag <= buf.len())
            .ok_or(SrtpError::Malformed)?;
        let (seq, ssrc) = (read_u16(buf, 2), read_u32(buf, 8));
        // Checked before decrypting so replays cost no decryption; the window only moves once
        // the packet authenticated.
        let index = match self.received.rtp.get(ssrc) {
            Some(replay) => replay.check(seq).ok_or(SrtpError::Replayed)?,
            None if !self.received.rtp.has_room() => return Err(SrtpError::TooManyStreams),
            None => u64::from(seq),
        };
        let packet = Rtp {
            header_len,
            ssrc,
            index,
        };
        let plain = self.inbound.rtp.transform().open_rtp(buf, packet)?;
        self.received.rtp.entry(ssrc)?.accept(index);
        Ok(plain)
    }

    fn unprotect_rtcp(&mut self, buf: &mut [u8]) -> Result<usize, SrtpError> {
        let (encrypted, index) = self.srtcp_trailer(buf)?;
        // Peers always encrypt; an unencrypted packet is refused outright.
        if !encrypted {
            return Err(SrtpError::Unencrypted);
        }
        let ssrc = read_u32(buf, 4);
        match self.received.rtcp.get(ssrc) {
            Some(window) if !window.check(u64::from(index)) => return Err(SrtpError::Replayed),
            None if !self.received.rtcp.has_room() => return Err(SrtpError::TooManyStreams),
            _ => {}
        }
        let packet = Rtcp { ssrc, index };
        let plain = self.inbound.rtcp.transform().open_rtcp(buf, packet)?;
        self.received.rtcp.entry(ssrc)?.accept(u64::from(index));
        Ok(plain)
    }
}

/// The replay state of what the peer sends, per SSRC: RTP's windows with their rollover
/// counts, SRTCP's windows over its indices.
struct Received {
    rtp: Streams<RtpReplay>,
    rtcp: Streams<ReplayWindow>,
}

/// The SSRCs a session sends under, each with its rollover state: the first [`SEARCHED_SENT`]
/// searched in order, the first four of them inline (a viewer has a handful: its video, its
/// retransmissions, its audio). A relay link sends under every relayed publisher's, SSRCs
/// the publishers picked: past those, a keyed hash, so the search never grows with them.
#[derive(Debug, Default)]
struct SentStreams {
    first: SmallVec<[(u32, Rollover); 4]>,
    rest: HashMap<u32, Rollover>,
}

/// SSRCs sent under that are searched in order before the keyed hash.
const SEARCHED_SENT: usize = 8;

impl SentStreams {
    fn entry(&mut self, ssrc: u32) -> &mut Rollover {
        let at = match self.first.iter().position(|&(s, _)| s == ssrc) {
            Some(at) => at,
            None if self.first.len() < SEARCHED_SENT => {
                self.first.push((ssrc, Rollover::default()));
                self.first.len() - 1
            }
            None => return self.rest.entry(ssrc).or_default(),
        };
        &mut self.first[at].1
    }
}

/// One direction's session keys (RFC 3711 §4.3): SRTP's and SRTCP's.
struct Direction {
    rtp: Cipher,
    rtcp: Cipher,
}

impl Direction {
    fn new(profile: SrtpProfile, master_key: &[u8], master_salt: &[u8]) -> Result<Self, SrtpError> {
        let cipher = |labels| Cipher::new(profile, master_key, master_salt, labels);
        Ok(Self {
            rtp: cipher(kdf::SRTP)?,
            rtcp: cipher(kdf::SRTCP)?,
        })
    }
}

/// The transform of one packet kind in one direction. AES-GCM's key (its schedule and GHASH
/// table, about 550 bytes) is inline, so its lines are asked for ahead of a packet without
/// waiting for a pointer; AES-CM's expanded AES and HMAC keys (1.7 KB) are boxed, one
/// allocation per session, not a session sized by the larger profile.
// Inline on purpose: boxing the larger variant would put a pointer between the prefetch and
// the key it is for.
#[allow(clippy::large_enum_variant)]
enum Cipher {
    Gcm(Gcm),
    Cm(Box<AesCm>),
}

impl Cipher {
    fn new(
        profile: SrtpProfile,
        master_key: &[u8],
        master_salt: &[u8],
        labels: Labels,
    ) -> Result<Self, SrtpError> {
        Ok(match profile {
            SrtpProfile::AeadAes128Gcm | SrtpProfile::AeadAes256Gcm => {
                Self::Gcm(Gcm::new(master_key, master_salt, labels)?)
            }
            SrtpProfile::Aes128CmHmacSha1_80 => {
                Self::Cm(Box::new(AesCm::new(master_key, master_salt, labels)?))
            }
        })
    }

    /// Asks for the keys `transform` will read.
    fn prefetch(&self) {
        match self {
            Self::Gcm(gcm) => prefetch_lines(gcm, size_of::<Gcm>()),
            Self::Cm(cm) => prefetch_lines(&**cm, size_of::<AesCm>()),
        }
    }

    /// The profile's transform: one dispatch a packet.
    fn transform(&self) -> &dyn Transform {
        match self {
            Self::Gcm(gcm) => gcm,
            Self::Cm(cm) => &**cm,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::srtp::tests::{
        keys, protect_rtcp, protect_rtp, rtcp, rtp, unprotect_rtcp, unprotect_rtp, PROFILES,
    };
    use crate::node::srtp::MAX_OVERHEAD;

    /// A link sends under as many SSRCs as the publishers it relays have: each keeps its own
    /// rollover count, those past the searched ones too.
    #[test]
    fn each_of_many_ssrcs_sent_keeps_its_rollover_count() {
        let mut sent = SentStreams::default();
        for ssrc in 0..100u32 {
            sent.entry(ssrc).advance(u64::from(ssrc) << 16 | 7);
        }
        assert_eq!(
            (sent.first.len(), sent.rest.len()),
            (SEARCHED_SENT, 100 - SEARCHED_SENT)
        );
        for ssrc in 0..100u32 {
            let estimate = sent.entry(ssrc).estimate(8);
            assert_eq!(estimate, Some(u64::from(ssrc) << 16 | 8), "{ssrc}");
        }
    }

    /// A peer that sends under more SSRCs than its session keeps state for: the packets under
    /// the extra ones are refused (before decryption), in RTP and RTCP each, and the kept
    /// streams go on, their replay windows intact.
    #[test]
    fn ssrcs_past_the_bound_are_refused_and_the_kept_ones_go_on() {
        for profile in PROFILES {
            let mut ours = SrtpSession::with_streams(&keys(profile), 2).expect("valid keys");
            let mut theirs = session(&keys(profile).mirrored()).expect("valid keys");
            for ssrc in [1, 2] {
                let packet = protect_rtp(&mut theirs, &rtp(1, ssrc, 100));
                assert!(unprotect_rtp(&mut ours, &packet).is_ok(), "{profile:?}");
                let report = protect_rtcp(&mut theirs, &rtcp(ssrc));
                assert!(unprotect_rtcp(&mut ours, &report).is_ok(), "{profile:?}");
            }
            let packet = protect_rtp(&mut theirs, &rtp(1, 3, 100));
            let refused = Err(SrtpError::TooManyStreams);
            assert_eq!(unprotect_rtp(&mut ours, &packet), refused, "{profile:?}");
            let report = protect_rtcp(&mut theirs, &rtcp(3));
            assert_eq!(unprotect_rtcp(&mut ours, &report), refused, "{profile:?}");
            let next = protect_rtp(&mut theirs, &rtp(2, 1, 100));
            assert!(unprotect_rtp(&mut ours, &next).is_ok(), "{profile:?}");
            let replayed = Err(SrtpError::Replayed);
            assert_eq!(unprotect_rtp(&mut ours, &next), replayed, "{profile:?}");
        }
    }

    /// Past 2^31 packets an SSRC's SRTCP index would repeat under the same keys: refused.
    #[test]
    fn the_last_srtcp_index_is_the_last() {
        for profile in PROFILES {
            let mut ours = session(&keys(profile)).expect("valid keys");
            ours.sent_rtcp.insert(7, MAX_SRTCP_INDEX);
            let report = rtcp(7);
            let mut buf = report.clone();
            buf.resize(report.len() + MAX_OVERHEAD, 0);
            assert!(ours.protect_rtcp(&mut buf, report.len()).is_ok());
            let mut buf = report.clone();
            buf.resize(report.len() + MAX_OVERHEAD, 0);
            let exhausted = ours.protect_rtcp(&mut buf, report.len());
            assert_eq!(exhausted, Err(SrtpError::Exhausted), "{profile:?}");
        }
    }
}
