//! SRTP and SRTCP protection of a peer's packets (RFC 3711, RFC 7714), behind the node's own
//! trait so the hot path can move off the SRTP library's allocating calls.
//!
//! What the SRTP library (`webrtc-srtp` 0.17.2) allocates per packet, read in its source and
//! counted (`benches/tests/srtp_allocs.rs`, `benches/tests/alloc_counts.rs`) on a 1200-byte
//! packet with three header extensions:
//! - every call parses the RTP header into an owned header: the extension list and one buffer
//!   per extension payload (4 here);
//! - AES-GCM adds the 12-byte IV as a `Vec`, the AEAD's output `Vec` and the result buffer (3):
//!   7 allocations, 2584 bytes, to encrypt and 7 to decrypt; AES-CM-HMAC-SHA1 adds the result
//!   buffer (1): 5 to decrypt;
//! - with its replay protection on, its per-SSRC state lookup builds a new detector (a box and
//!   its bit vector) on *every* call, even when the SSRC's state exists, and a decrypt looks the
//!   state up twice: 4 more allocations per inbound packet. With replay protection off the
//!   detector is a zero-sized box, which does not allocate, so the node turns it off and keeps
//!   its own windows ([`super::replay`]), which allocate only for a new SSRC.
//!
//! Results come back as `Bytes`, which the node copies into the caller's buffer. The egress RTP
//! path of AES-GCM sessions avoids all of it with [`GcmEgress`], which encrypts in place into
//! the caller's buffer: no allocation per packet.

use std::collections::HashMap;

use aes_gcm::aead::generic_array::GenericArray;
use aes_gcm::aes::cipher::{BlockEncrypt, KeyInit};
use aes_gcm::aes::Aes128;
use aes_gcm::{AeadInPlace, Aes128Gcm, Nonce};
use rtp_ext::rtp::{ONE_BYTE_PROFILE, TWO_BYTE_PROFILE};
use webrtc_srtp::context::Context;
use webrtc_srtp::protection_profile::ProtectionProfile;

use super::replay::{ReplayWindow, Rollover, RtpReplay};

/// The SRTP protection profiles the node negotiates, in its order of preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SrtpProfile {
    /// SRTP_AEAD_AES_128_GCM (RFC 7714).
    AeadAes128Gcm,
    /// SRTP_AES128_CM_HMAC_SHA1_80 (RFC 3711, RFC 5764).
    Aes128CmHmacSha1_80,
}

impl SrtpProfile {
    /// Master key length in bytes.
    pub fn key_len(self) -> usize {
        16
    }

    /// Master salt length in bytes.
    pub fn salt_len(self) -> usize {
        match self {
            Self::AeadAes128Gcm => 12,
            Self::Aes128CmHmacSha1_80 => 14,
        }
    }

    /// Bytes the authentication tag adds to an SRTP or SRTCP packet (the same for both in
    /// these profiles).
    pub fn tag_len(self) -> usize {
        match self {
            Self::AeadAes128Gcm => 16,
            Self::Aes128CmHmacSha1_80 => 10,
        }
    }

    fn library_profile(self) -> ProtectionProfile {
        match self {
            Self::AeadAes128Gcm => ProtectionProfile::AeadAes128Gcm,
            Self::Aes128CmHmacSha1_80 => ProtectionProfile::Aes128CmHmacSha1_80,
        }
    }
}

/// The SRTP master keys of one DTLS association, from our side's point of view: `local_*`
/// protects what we send, `remote_*` what the peer sends.
#[derive(Clone, PartialEq, Eq)]
pub struct SrtpKeys {
    pub profile: SrtpProfile,
    pub local_key: Vec<u8>,
    pub local_salt: Vec<u8>,
    pub remote_key: Vec<u8>,
    pub remote_salt: Vec<u8>,
}

// Keys stay out of logs.
impl std::fmt::Debug for SrtpKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SrtpKeys")
            .field("profile", &self.profile)
            .finish_non_exhaustive()
    }
}

impl SrtpKeys {
    /// The same association seen from the peer: local and remote swapped.
    pub fn mirrored(&self) -> Self {
        Self {
            profile: self.profile,
            local_key: self.remote_key.clone(),
            local_salt: self.remote_salt.clone(),
            remote_key: self.local_key.clone(),
            remote_salt: self.local_salt.clone(),
        }
    }
}

/// What was wrong with keys or a packet.
#[derive(Debug, thiserror::Error)]
pub enum SrtpError {
    #[error("the SRTP master keys do not fit the profile: {0}")]
    Keys(#[source] webrtc_srtp::Error),
    #[error("the packet is too short for its header and authentication tag")]
    TooShort,
    #[error("the packet's header is malformed")]
    Malformed,
    #[error("the SRTCP packet is marked unencrypted")]
    Unencrypted,
    #[error("the packet was already received or is older than the replay window")]
    Replayed,
    #[error("the packet failed authentication or decryption: {0}")]
    Rejected(#[source] webrtc_srtp::Error),
    #[error("the packet is too long to encrypt")]
    TooLong,
    #[error("the packet cannot be protected: {0}")]
    Protect(#[source] webrtc_srtp::Error),
}

/// Protection of one peer's packets in both directions. Results go into caller-owned buffers so
/// an implementation can run without allocating.
pub trait SrtpContext: Send {
    /// Encrypts an RTP packet (header+payload in `packet`) into `out` (cleared first).
    fn protect_rtp(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError>;
    /// Encrypts an RTCP compound packet into `out` (cleared first).
    fn protect_rtcp(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError>;
    /// Authenticates, replay-checks and decrypts an SRTP packet into `out` (cleared first).
    fn unprotect_rtp(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError>;
    /// Authenticates, replay-checks and decrypts an SRTCP packet into `out` (cleared first).
    fn unprotect_rtcp(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError>;
}

/// Whether the SRTP library's RTP header parser can walk `packet`'s extension elements
/// without reading past its end. It checks the fixed header, the CSRCs and the extension
/// block's length, but takes each element's length as written; and in the one-byte form it
/// reads any nonzero byte as an element header, where RFC 8285 (and our parser) take a zero id
/// as padding whatever its length nibble says. Fuzzing found both panicking it, so only
/// headers it can walk reach it. The padding bit is ignored: on an encrypted packet the last
/// byte is the tag's.
fn library_walk_stays_inside(packet: &[u8]) -> bool {
    let Some(&first) = packet.first() else {
        return false;
    };
    if first & 0x10 == 0 {
        return true;
    }
    let ext = RTP_HEADER_LEN + 4 * usize::from(first & 0x0F);
    let Some(&[p0, p1, l0, l1]) = packet.get(ext..ext + 4) else {
        // Short of the extension header: the library refuses it itself.
        return true;
    };
    let body = ext + 4;
    let end = body + 4 * usize::from(u16::from_be_bytes([l0, l1]));
    let element_len: fn(&[u8]) -> Option<Option<usize>> = match u16::from_be_bytes([p0, p1]) {
        ONE_BYTE_PROFILE => one_byte_element_len,
        TWO_BYTE_PROFILE => two_byte_element_len,
        _ => return true,
    };
    let mut at = body;
    while at < end {
        match packet.get(at..).and_then(element_len) {
            Some(Some(len)) => at += len,
            // The one-byte form's id 15 ends the walk.
            Some(None) => return true,
            None => return false,
        }
        if at > packet.len() {
            return false;
        }
    }
    true
}

/// Bytes the library advances over at the start of `rest` in a one-byte block: a zero byte,
/// or an element header and its data; None for an empty `rest`, Some(None) for id 15.
fn one_byte_element_len(rest: &[u8]) -> Option<Option<usize>> {
    let &b = rest.first()?;
    Some(match (b, b >> 4) {
        (0, _) => Some(1),
        (_, 15) => None,
        _ => Some(2 + usize::from(b & 0x0F)),
    })
}

/// The same for a two-byte block: a zero byte, or id, length and data.
fn two_byte_element_len(rest: &[u8]) -> Option<Option<usize>> {
    match rest {
        [0, ..] => Some(Some(1)),
        [_, len, ..] => Some(Some(2 + usize::from(*len))),
        _ => None,
    }
}

/// No protection: packets pass unchanged. For driving the node's core without a DTLS
/// handshake, in its tests and its fuzz target (which could not forge authentication tags);
/// signaling never gives a session one.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unprotected;

impl SrtpContext for Unprotected {
    fn protect_rtp(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError> {
        out.clear();
        out.extend_from_slice(packet);
        Ok(())
    }

    fn protect_rtcp(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError> {
        self.protect_rtp(packet, out)
    }

    fn unprotect_rtp(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError> {
        self.protect_rtp(packet, out)
    }

    fn unprotect_rtcp(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError> {
        self.protect_rtp(packet, out)
    }
}

/// Which egress RTP implementation a session uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Egress {
    /// The node's in-place AES-GCM where the profile allows it, the library otherwise.
    Fastest,
    /// Always the SRTP library (kept for comparison in tests and benchmarks).
    Library,
}

/// Both directions of one peer's SRTP, with the node's replay windows on the inbound side.
pub struct SrtpSession {
    profile: SrtpProfile,
    outbound: Context,
    inbound: Context,
    gcm_egress: Option<GcmEgress>,
    rtp_replay: HashMap<u32, RtpReplay>,
    rtcp_replay: HashMap<u32, ReplayWindow>,
}

impl std::fmt::Debug for SrtpSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SrtpSession")
            .field("profile", &self.profile)
            .finish_non_exhaustive()
    }
}

/// A session for `keys`, with the fastest egress available.
pub fn session(keys: &SrtpKeys) -> Result<SrtpSession, SrtpError> {
    SrtpSession::new(keys, Egress::Fastest)
}

const RTP_HEADER_LEN: usize = 12;
const RTCP_HEADER_LEN: usize = 8;
/// The E flag and SRTCP index trailer (RFC 3711 §3.4).
const SRTCP_INDEX_LEN: usize = 4;

impl SrtpSession {
    pub fn new(keys: &SrtpKeys, egress: Egress) -> Result<Self, SrtpError> {
        let context = |key: &[u8], salt: &[u8]| {
            // No library replay protection: see the module documentation.
            Context::new(key, salt, keys.profile.library_profile(), None, None)
                .map_err(SrtpError::Keys)
        };
        let gcm_egress = match (keys.profile, egress) {
            (SrtpProfile::AeadAes128Gcm, Egress::Fastest) => {
                Some(GcmEgress::new(&keys.local_key, &keys.local_salt)?)
            }
            _ => None,
        };
        Ok(Self {
            profile: keys.profile,
            outbound: context(&keys.local_key, &keys.local_salt)?,
            inbound: context(&keys.remote_key, &keys.remote_salt)?,
            gcm_egress,
            rtp_replay: HashMap::new(),
            rtcp_replay: HashMap::new(),
        })
    }

    pub fn profile(&self) -> SrtpProfile {
        self.profile
    }

    /// The SRTCP trailer of `packet`: (E flag, index). Its place depends on the profile: after
    /// the tag for AES-GCM (RFC 7714 §9.2), before it for AES-CM (RFC 3711 §3.4).
    fn srtcp_trailer(&self, packet: &[u8]) -> Result<(bool, u64), SrtpError> {
        let tag = self.profile.tag_len();
        if packet.len() < RTCP_HEADER_LEN + tag + SRTCP_INDEX_LEN {
            return Err(SrtpError::TooShort);
        }
        let end = match self.profile {
            SrtpProfile::AeadAes128Gcm => packet.len(),
            SrtpProfile::Aes128CmHmacSha1_80 => packet.len() - tag,
        };
        let word = read_u32(packet, end - SRTCP_INDEX_LEN);
        Ok((word >> 31 == 1, u64::from(word & 0x7FFF_FFFF)))
    }
}

fn read_u32(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_be_bytes(word)
}

fn read_u16(bytes: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([bytes[at], bytes[at + 1]])
}

fn copy_out(
    result: Result<bytes::Bytes, webrtc_srtp::Error>,
    out: &mut Vec<u8>,
) -> Result<(), webrtc_srtp::Error> {
    out.clear();
    out.extend_from_slice(&result?);
    Ok(())
}

impl SrtpContext for SrtpSession {
    fn protect_rtp(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError> {
        match &mut self.gcm_egress {
            Some(gcm) => gcm.protect_rtp(packet, out),
            None => copy_out(self.outbound.encrypt_rtp(packet), out).map_err(SrtpError::Protect),
        }
    }

    fn protect_rtcp(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError> {
        copy_out(self.outbound.encrypt_rtcp(packet), out).map_err(SrtpError::Protect)
    }

    fn unprotect_rtp(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError> {
        if packet.len() < RTP_HEADER_LEN + self.profile.tag_len() {
            return Err(SrtpError::TooShort);
        }
        if !library_walk_stays_inside(packet) {
            return Err(SrtpError::Malformed);
        }
        let (seq, ssrc) = (read_u16(packet, 2), read_u32(packet, 8));
        let replay = self.rtp_replay.get(&ssrc);
        // Checked before decrypting so replays cost no decryption and do not touch the
        // library's rollover state; the window only moves once the packet authenticated.
        let index = match replay {
            Some(replay) => replay.check(seq).ok_or(SrtpError::Replayed)?,
            None => u64::from(seq),
        };
        copy_out(self.inbound.decrypt_rtp(packet), out).map_err(SrtpError::Rejected)?;
        self.rtp_replay.entry(ssrc).or_default().accept(index);
        Ok(())
    }

    fn unprotect_rtcp(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError> {
        let (encrypted, index) = self.srtcp_trailer(packet)?;
        // The library returns AES-CM packets without the E flag unauthenticated; peers always
        // encrypt, so such a packet is refused outright.
        if !encrypted {
            return Err(SrtpError::Unencrypted);
        }
        let ssrc = read_u32(packet, 4);
        if self.rtcp_replay.get(&ssrc).is_some_and(|w| !w.check(index)) {
            return Err(SrtpError::Replayed);
        }
        copy_out(self.inbound.decrypt_rtcp(packet), out).map_err(SrtpError::Rejected)?;
        self.rtcp_replay.entry(ssrc).or_default().accept(index);
        Ok(())
    }
}

/// SRTP AES-128-GCM encryption of outbound RTP (RFC 7714) in place in the caller's buffer:
/// no allocation per packet once a stream's rollover state exists.
pub struct GcmEgress {
    cipher: Aes128Gcm,
    salt: [u8; 12],
    /// Per SSRC, the highest extended sequence number sent: the rollover counter's source.
    streams: HashMap<u32, Rollover>,
}

impl std::fmt::Debug for GcmEgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GcmEgress").finish_non_exhaustive()
    }
}

/// RFC 3711 §4.3 key derivation labels.
const LABEL_SRTP_ENCRYPTION: u8 = 0x00;
const LABEL_SRTP_SALT: u8 = 0x02;

/// One block of the AES-CM PRF (RFC 3711 §4.3.3) at key derivation rate 0: enough for a 128-bit
/// session key or a session salt.
fn derive_block(master_key: &[u8], master_salt: &[u8], label: u8) -> [u8; 16] {
    let mut block = [0u8; 16];
    block[..master_salt.len()].copy_from_slice(master_salt);
    block[7] ^= label;
    let aes = Aes128::new(GenericArray::from_slice(master_key));
    aes.encrypt_block(GenericArray::from_mut_slice(&mut block));
    block
}

impl GcmEgress {
    pub fn new(master_key: &[u8], master_salt: &[u8]) -> Result<Self, SrtpError> {
        let profile = SrtpProfile::AeadAes128Gcm;
        if master_key.len() != profile.key_len() {
            return Err(SrtpError::Keys(webrtc_srtp::Error::SrtpMasterKeyLength(
                profile.key_len(),
                master_key.len(),
            )));
        }
        if master_salt.len() != profile.salt_len() {
            return Err(SrtpError::Keys(webrtc_srtp::Error::SrtpSaltLength(
                profile.salt_len(),
                master_salt.len(),
            )));
        }
        let key = derive_block(master_key, master_salt, LABEL_SRTP_ENCRYPTION);
        let salt_block = derive_block(master_key, master_salt, LABEL_SRTP_SALT);
        let mut salt = [0u8; 12];
        salt.copy_from_slice(&salt_block[..12]);
        Ok(Self {
            cipher: Aes128Gcm::new(GenericArray::from_slice(&key)),
            salt,
            streams: HashMap::new(),
        })
    }

    /// Encrypts `packet` into `out`: header as is (it is the AAD), then ciphertext and tag.
    pub fn protect_rtp(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError> {
        let header_len = rtp_header_len(packet).ok_or(SrtpError::Malformed)?;
        let (seq, ssrc) = (read_u16(packet, 2), read_u32(packet, 8));
        let stream = self.streams.entry(ssrc).or_default();
        // A sequence number from before the first rollover is sent under rollover count 0.
        let index = stream.estimate(seq).unwrap_or(u64::from(seq));
        let nonce = nonce(&self.salt, ssrc, index);
        out.clear();
        out.extend_from_slice(packet);
        let (aad, payload) = out.split_at_mut(header_len);
        let tag = self
            .cipher
            .encrypt_in_place_detached(Nonce::from_slice(&nonce), aad, payload)
            .map_err(|_| SrtpError::TooLong)?;
        out.extend_from_slice(&tag);
        stream.advance(index);
        Ok(())
    }
}

/// The IV: 2 zero bytes, SSRC, rollover count, sequence number, XORed with the session salt
/// (RFC 7714 §8.1). The rollover count and sequence number are the low 48 bits of `index`.
fn nonce(salt: &[u8; 12], ssrc: u32, index: u64) -> [u8; 12] {
    let mut iv = [0u8; 12];
    iv[2..6].copy_from_slice(&ssrc.to_be_bytes());
    iv[6..12].copy_from_slice(&index.to_be_bytes()[2..8]);
    for (byte, salt) in iv.iter_mut().zip(salt) {
        *byte ^= salt;
    }
    iv
}

/// The RTP header's length with CSRCs and extension, or `None` when the packet is too short
/// for it or not version 2.
pub fn rtp_header_len(packet: &[u8]) -> Option<usize> {
    if packet.len() < RTP_HEADER_LEN || packet[0] >> 6 != 2 {
        return None;
    }
    let csrcs = usize::from(packet[0] & 0x0F);
    let mut len = RTP_HEADER_LEN + 4 * csrcs;
    if packet[0] & 0x10 != 0 {
        let words = usize::from(read_u16(packet.get(..len + 4)?, len + 2));
        len += 4 + 4 * words;
    }
    (len <= packet.len()).then_some(len)
}

#[cfg(test)]
mod tests;
