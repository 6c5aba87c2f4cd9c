//! SRTP and SRTCP protection of a peer's packets (RFC 3711, RFC 7714), in place in the caller's
//! buffer, behind the node's own trait.
//!
//! The ciphers run at hardware speed and work on the caller's bytes (AES-GCM is ring's, whose
//! stitched VAES/AVX2 code seals twice as fast as aws-lc-rs's where the CPU has it; AES-CTR and
//! HMAC-SHA1 are aws-lc-rs's): a packet is encrypted where the core wrote it and decrypted
//! where the socket read it. Nothing is allocated per packet once a stream (an SSRC in one
//! direction) has its rollover, index or replay entry. The node keeps its own replay windows
//! ([`super::replay`]) and only moves them for packets that authenticated.
//!
//! Headers are read only as far as their fixed part, CSRC count and extension length: the
//! extension elements are never walked, so hostile element lengths cannot lead anywhere.

mod cm;
mod gcm;
mod kdf;
mod session;
mod streams;

pub use session::{session, SrtpSession, DEFAULT_STREAMS};

/// The SRTP protection profiles the node knows (RFC 5764 §4.1.2, RFC 7714 §14.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SrtpProfile {
    /// SRTP_AEAD_AES_128_GCM (RFC 7714).
    AeadAes128Gcm,
    /// SRTP_AEAD_AES_256_GCM (RFC 7714): what the browsers offer first among the AEAD ones.
    AeadAes256Gcm,
    /// SRTP_AES128_CM_HMAC_SHA1_80 (RFC 3711, RFC 5764).
    Aes128CmHmacSha1_80,
}

impl SrtpProfile {
    /// Master key length in bytes.
    pub fn key_len(self) -> usize {
        match self {
            Self::AeadAes128Gcm | Self::Aes128CmHmacSha1_80 => 16,
            Self::AeadAes256Gcm => 32,
        }
    }

    /// Master salt length in bytes.
    pub fn salt_len(self) -> usize {
        match self {
            Self::AeadAes128Gcm | Self::AeadAes256Gcm => 12,
            Self::Aes128CmHmacSha1_80 => 14,
        }
    }

    /// Bytes the authentication tag adds to an SRTP or SRTCP packet (the same for both in
    /// these profiles).
    pub fn tag_len(self) -> usize {
        match self {
            Self::AeadAes128Gcm | Self::AeadAes256Gcm => gcm::TAG_LEN,
            Self::Aes128CmHmacSha1_80 => cm::TAG_LEN,
        }
    }

    /// Bytes protection adds to an RTP packet.
    pub fn rtp_overhead(self) -> usize {
        self.tag_len()
    }

    /// Bytes protection adds to an RTCP packet: the tag and the SRTCP index.
    pub fn rtcp_overhead(self) -> usize {
        self.tag_len() + SRTCP_INDEX_LEN
    }
}

/// The most bytes protection adds to any packet (an AES-GCM SRTCP packet's tag and index):
/// the room a buffer needs after the packet it protects in place.
pub const MAX_OVERHEAD: usize = gcm::TAG_LEN + SRTCP_INDEX_LEN;

/// The SRTP master keys of one DTLS association, from our side's point of view: `local_*`
/// protects what we send, `remote_*` what the peer sends.
#[derive(Clone, PartialEq, Eq)]
pub struct SrtpKeys {
    /// The protection profile the handshake agreed (`use_srtp`, RFC 5764 §4.1.2).
    pub profile: SrtpProfile,
    /// The master key protecting what we send.
    pub local_key: Vec<u8>,
    /// The master salt protecting what we send.
    pub local_salt: Vec<u8>,
    /// The master key of what the peer sends.
    pub remote_key: Vec<u8>,
    /// The master salt of what the peer sends.
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

/// What was wrong with keys, a packet or the buffer it came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SrtpError {
    /// A master key or salt of the wrong length for the profile, or keys the cipher library
    /// refused.
    #[error("the SRTP master key or salt does not fit the profile")]
    Keys,
    /// Shorter than its header and tag: cannot be authenticated.
    #[error("the packet is too short for its header and authentication tag")]
    TooShort,
    /// Not RTP or RTCP version 2, or a header longer than the packet.
    #[error("the packet's header is malformed")]
    Malformed,
    /// An SRTCP packet with the E flag clear: peers always encrypt, so it is refused outright.
    #[error("the SRTCP packet is marked unencrypted")]
    Unencrypted,
    /// A packet the replay window saw already or that is older than the window (RFC 3711 §3.3.2).
    #[error("the packet was already received or is older than the replay window")]
    Replayed,
    /// The tag is not the packet's: forged, corrupted or under other keys.
    #[error("the packet failed authentication")]
    Rejected,
    /// Longer than the cipher can encrypt in one call.
    #[error("the packet is too long to encrypt")]
    TooLong,
    /// The buffer has no room after the packet for the tag (and SRTCP index).
    #[error("the buffer has no room after the packet for what protection adds")]
    NoRoom,
    /// A stream sent all 2^31 SRTCP indices: its keys may not protect another packet (RFC 3711
    /// §9.2).
    #[error("the stream has sent all 2^31 SRTCP indices its keys allow")]
    Exhausted,
    /// A packet under an SSRC the session has no state for, when it keeps state for as many
    /// SSRCs (in that packet's kind, RTP or RTCP) as it may.
    #[error("the session keeps state for as many SSRCs as it may")]
    TooManyStreams,
}

/// Protection of one peer's packets in both directions, in place in the caller's buffer so an
/// implementation can run without allocating or copying.
pub trait SrtpContext: Send {
    /// Encrypts the RTP packet in `buf[..len]` and appends its tag: the protected length.
    /// `buf` needs [`MAX_OVERHEAD`] bytes after the packet (its profile's RTP overhead at
    /// least).
    fn protect_rtp(&mut self, buf: &mut [u8], len: usize) -> Result<usize, SrtpError>;
    /// Encrypts the RTCP compound packet in `buf[..len]` and appends its SRTCP index and tag:
    /// the protected length. Room as for [`Self::protect_rtp`].
    fn protect_rtcp(&mut self, buf: &mut [u8], len: usize) -> Result<usize, SrtpError>;
    /// Authenticates, replay-checks and decrypts the SRTP packet that is all of `buf`: the
    /// plain packet's length, in `buf[..n]`. On an error `buf` may hold anything.
    fn unprotect_rtp(&mut self, buf: &mut [u8]) -> Result<usize, SrtpError>;
    /// The same for an SRTCP packet.
    fn unprotect_rtcp(&mut self, buf: &mut [u8]) -> Result<usize, SrtpError>;
    /// Asks for the state the next [`Self::protect_rtp`] reads (keys, rollover counts)
    /// without waiting for it: called for the next viewer while the current one's packet is
    /// written, so its state is in cache by its turn. A hint: none by default.
    fn prefetch(&self) {}
}

/// No protection: packets pass unchanged. For driving the node's core without a DTLS
/// handshake, in its tests and its fuzz target (which could not forge authentication tags);
/// signaling never gives a session one.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unprotected;

impl SrtpContext for Unprotected {
    fn protect_rtp(&mut self, buf: &mut [u8], len: usize) -> Result<usize, SrtpError> {
        if len > buf.len() {
            return Err(SrtpError::NoRoom);
        }
        Ok(len)
    }

    fn protect_rtcp(&mut self, buf: &mut [u8], len: usize) -> Result<usize, SrtpError> {
        self.protect_rtp(buf, len)
    }

    fn unprotect_rtp(&mut self, buf: &mut [u8]) -> Result<usize, SrtpError> {
        Ok(buf.len())
    }

    fn unprotect_rtcp(&mut self, buf: &mut [u8]) -> Result<usize, SrtpError> {
        Ok(buf.len())
    }
}

const RTP_HEADER_LEN: usize = 12;
const RTCP_HEADER_LEN: usize = 8;
/// The E flag and SRTCP index trailer (RFC 3711 §3.4).
const SRTCP_INDEX_LEN: usize = 4;
/// The E flag in the trailer's first bit: the payload is encrypted.
const E_FLAG: u32 = 1 << 31;

/// An SRTP packet as a transform sees it: where its header (the part only authenticated)
/// ends, and what its IV is made of besides the session salt (RFC 3711 §4.1.1, RFC 7714
/// §8.1): its SSRC and its index, the rollover count and sequence number.
#[derive(Debug, Clone, Copy)]
struct Rtp {
    header_len: usize,
    ssrc: u32,
    index: u64,
}

/// An SRTCP packet as a transform sees it: its SSRC and its 31-bit SRTCP index (RFC 3711
/// §3.4), which the trailer carries. Its header is always the first 8 octets.
#[derive(Debug, Clone, Copy)]
struct Rtcp {
    ssrc: u32,
    index: u32,
}

/// A cryptographic transform of one packet kind in one direction (RFC 3711 §3.2: the
/// session keys and salt are the transform's own), in place in the caller's buffer. The
/// session checked lengths and room before calling; each profile places its tag and the
/// SRTCP trailer its own way.
trait Transform {
    /// Encrypts `buf[packet.header_len..len]` and appends the tag: the protected length.
    fn seal_rtp(&self, buf: &mut [u8], len: usize, packet: Rtp) -> Result<usize, SrtpError>;
    /// Authenticates all of `buf` (header, ciphertext, tag), then decrypts it in place: the
    /// plain length.
    fn open_rtp(&self, buf: &mut [u8], packet: Rtp) -> Result<usize, SrtpError>;
    /// Encrypts `buf[..len]` after its first 8 octets and appends the tag and the E flag
    /// with the index: the protected length.
    fn seal_rtcp(&self, buf: &mut [u8], len: usize, packet: Rtcp) -> Result<usize, SrtpError>;
    /// Authenticates all of `buf` (header, ciphertext, tag, trailer), then decrypts it in
    /// place: the plain length.
    fn open_rtcp(&self, buf: &mut [u8], packet: Rtcp) -> Result<usize, SrtpError>;
}

/// The RTP header's length with CSRCs and extension, or `None` when the packet is too short
/// for it or not version 2. Two fields read (the CSRC count and the extension's length), not a
/// walk of the extensions: the engine's parse of the decrypted packet is the header's one walk.
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

/// The big-endian word at `at`; callers checked the length.
fn read_u32(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_be_bytes(word)
}

fn read_u16(bytes: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([bytes[at], bytes[at + 1]])
}

#[cfg(test)]
mod interop_tests;
#[cfg(test)]
mod tests;
