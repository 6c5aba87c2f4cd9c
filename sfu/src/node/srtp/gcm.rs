//! The AEAD transform of SRTP and SRTCP with AES-GCM (RFC 7714), in place: the header is the
//! associated data, the payload is encrypted where it lies, the tag follows it.

use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey, AES_128_GCM, AES_256_GCM};

use super::kdf::{self, Labels};
use super::{Rtcp, Rtp, SrtpError, Transform, RTCP_HEADER_LEN, SRTCP_INDEX_LEN};

/// The authentication tag (RFC 7714 §5: 16 octets, the only length WebRTC uses).
pub(super) const TAG_LEN: usize = 16;
/// The session salt, and the IV (RFC 7714 §8.1).
const SALT_LEN: usize = 12;

/// One packet kind's (SRTP's or SRTCP's) session key and salt in one direction. The key holds
/// its AES schedule and GHASH table inline (about 550 bytes), so asking for this struct's lines
/// ahead of a packet brings in all the cipher reads of it.
pub(super) struct Gcm {
    key: LessSafeKey,
    salt: [u8; SALT_LEN],
}

impl Gcm {
    /// The session key and salt `labels` name, derived from a 128- or 256-bit master key.
    pub(super) fn new(
        master_key: &[u8],
        master_salt: &[u8],
        labels: Labels,
    ) -> Result<Self, SrtpError> {
        if master_salt.len() != SALT_LEN {
            return Err(SrtpError::Keys);
        }
        let mut session_key = [0u8; 32];
        let (algorithm, session_key) = match master_key.len() {
            16 => (&AES_128_GCM, &mut session_key[..16]),
            32 => (&AES_256_GCM, &mut session_key[..]),
            _ => return Err(SrtpError::Keys),
        };
        kdf::derive(master_key, master_salt, labels.encryption, session_key)?;
        let mut salt = [0u8; SALT_LEN];
        kdf::derive(master_key, master_salt, labels.salt, &mut salt)?;
        let key = UnboundKey::new(algorithm, session_key).map_err(|_| SrtpError::Keys)?;
        Ok(Self {
            key: LessSafeKey::new(key),
            salt,
        })
    }
}

impl Transform for Gcm {
    /// Encrypts the payload with the header as associated data, and writes the tag after it.
    fn seal_rtp(&self, buf: &mut [u8], len: usize, packet: Rtp) -> Result<usize, SrtpError> {
        let (header, rest) = buf.split_at_mut(packet.header_len);
        let (payload, after) = rest.split_at_mut(len - packet.header_len);
        let nonce = self.nonce(packet.ssrc, packet.index);
        let tag = self
            .key
            .seal_in_place_separate_tag(nonce, Aad::from(&*header), payload)
            .map_err(|_| SrtpError::TooLong)?;
        after[..TAG_LEN].copy_from_slice(tag.as_ref());
        Ok(len + TAG_LEN)
    }

    fn open_rtp(&self, buf: &mut [u8], packet: Rtp) -> Result<usize, SrtpError> {
        let (header, rest) = buf.split_at_mut(packet.header_len);
        let nonce = self.nonce(packet.ssrc, packet.index);
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(&*header), rest)
            .map_err(|_| SrtpError::Rejected)?;
        Ok(packet.header_len + plain.len())
    }

    /// Encrypts and appends the tag, then the E flag and index (RFC 7714 §9.1: the trailer
    /// after the tag, and authenticated).
    fn seal_rtcp(&self, buf: &mut [u8], len: usize, packet: Rtcp) -> Result<usize, SrtpError> {
        let trailer = (packet.index | super::E_FLAG).to_be_bytes();
        let (header, rest) = buf.split_at_mut(RTCP_HEADER_LEN);
        let (payload, after) = rest.split_at_mut(len - RTCP_HEADER_LEN);
        let aad = rtcp_aad(header, trailer);
        let nonce = self.nonce(packet.ssrc, u64::from(packet.index));
        let tag = self
            .key
            .seal_in_place_separate_tag(nonce, Aad::from(aad), payload)
            .map_err(|_| SrtpError::TooLong)?;
        after[..TAG_LEN].copy_from_slice(tag.as_ref());
        after[TAG_LEN..TAG_LEN + SRTCP_INDEX_LEN].copy_from_slice(&trailer);
        Ok(len + TAG_LEN + SRTCP_INDEX_LEN)
    }

    /// Authenticates the packet, the trailer after the tag as associated data, then
    /// decrypts it.
    fn open_rtcp(&self, buf: &mut [u8], packet: Rtcp) -> Result<usize, SrtpError> {
        let plain_len = buf.len() - TAG_LEN - SRTCP_INDEX_LEN;
        let (sealed, tail) = buf.split_at_mut(plain_len);
        let (tag, trailer) = tail.split_at(TAG_LEN);
        let tag = Tag::try_from(tag).map_err(|_| SrtpError::Rejected)?;
        let mut trailer_bytes = [0u8; SRTCP_INDEX_LEN];
        trailer_bytes.copy_from_slice(trailer);
        let (header, payload) = sealed.split_at_mut(RTCP_HEADER_LEN);
        let aad = rtcp_aad(header, trailer_bytes);
        let nonce = self.nonce(packet.ssrc, u64::from(packet.index));
        self.key
            .open_in_place_separate_tag(nonce, Aad::from(aad), tag, payload, 0..)
            .map_err(|_| SrtpError::Rejected)?;
        Ok(plain_len)
    }
}

impl Gcm {
    /// The IV: 2 zero octets, the SSRC, then the low 48 bits of `index` (the rollover count
    /// and sequence number of SRTP, a zero bit and the 31-bit index of SRTCP), XORed with the
    /// session salt (RFC 7714 §8.1, §9.1).
    fn nonce(&self, ssrc: u32, index: u64) -> Nonce {
        let mut iv = [0u8; SALT_LEN];
        iv[2..6].copy_from_slice(&ssrc.to_be_bytes());
        iv[6..12].copy_from_slice(&index.to_be_bytes()[2..8]);
        for (byte, salt) in iv.iter_mut().zip(self.salt) {
            *byte ^= salt;
        }
        Nonce::assume_unique_for_key(iv)
    }
}

/// SRTCP's associated data: the first 8 octets of the header, then the E flag and index
/// (RFC 7714 §9.1).
fn rtcp_aad(
    header: &[u8],
    trailer: [u8; SRTCP_INDEX_LEN],
) -> [u8; RTCP_HEADER_LEN + SRTCP_INDEX_LEN] {
    let mut aad = [0u8; RTCP_HEADER_LEN + SRTCP_INDEX_LEN];
    aad[..RTCP_HEADER_LEN].copy_from_slice(&header[..RTCP_HEADER_LEN]);
    aad[RTCP_HEADER_LEN..].copy_from_slice(&trailer);
    aad
}
