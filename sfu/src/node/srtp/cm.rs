//! The AES counter mode transform with HMAC-SHA1 authentication of SRTP and SRTCP (RFC 3711
//! §4.1.1, §4.2.1), 80-bit tags, in place: the payload is encrypted where it lies, the tag
//! (and for SRTCP the E flag and index before it) follows.

use aws_lc_rs::cipher::{EncryptingKey, EncryptionContext, UnboundCipherKey, AES_128};
use aws_lc_rs::constant_time::verify_slices_are_equal;
use aws_lc_rs::hmac::{self, HMAC_SHA1_FOR_LEGACY_USE_ONLY};
use aws_lc_rs::iv::FixedLength;

use super::kdf::{self, Labels};
use super::{Rtcp, Rtp, SrtpError, Transform, RTCP_HEADER_LEN, SRTCP_INDEX_LEN};

/// The authentication tag: HMAC-SHA1 truncated to 80 bits.
pub(super) const TAG_LEN: usize = 10;
/// The session salt (RFC 3711 §4.3.2: 112 bits).
const SALT_LEN: usize = 14;
/// The session authentication key (RFC 3711 §4.2.1: 160 bits).
const AUTH_KEY_LEN: usize = 20;

/// One packet kind's (SRTP's or SRTCP's) session keys and salt in one direction.
pub(super) struct AesCm {
    cipher: EncryptingKey,
    auth: hmac::Key,
    salt: [u8; SALT_LEN],
}

impl AesCm {
    /// The session keys and salt `labels` name, derived from a 128-bit master key.
    pub(super) fn new(
        master_key: &[u8],
        master_salt: &[u8],
        labels: Labels,
    ) -> Result<Self, SrtpError> {
        if master_key.len() != 16 || master_salt.len() != SALT_LEN {
            return Err(SrtpError::Keys);
        }
        let mut key = [0u8; 16];
        kdf::derive(master_key, master_salt, labels.encryption, &mut key)?;
        let mut auth = [0u8; AUTH_KEY_LEN];
        kdf::derive(master_key, master_salt, labels.authentication, &mut auth)?;
        let mut salt = [0u8; SALT_LEN];
        kdf::derive(master_key, master_salt, labels.salt, &mut salt)?;
        let key = UnboundCipherKey::new(&AES_128, &key).map_err(|_| SrtpError::Keys)?;
        Ok(Self {
            cipher: EncryptingKey::ctr(key).map_err(|_| SrtpError::Keys)?,
            auth: hmac::Key::new(HMAC_SHA1_FOR_LEGACY_USE_ONLY, &auth),
            salt,
        })
    }
}

impl Transform for AesCm {
    /// Encrypts the payload, then appends the tag over the packet and the rollover count
    /// (RFC 3711 §4.2).
    fn seal_rtp(&self, buf: &mut [u8], len: usize, packet: Rtp) -> Result<usize, SrtpError> {
        let (header_len, index) = (packet.header_len, packet.index);
        self.apply_keystream(&mut buf[header_len..len], packet.ssrc, index)?;
        let tag = self.tag(&buf[..len], rollover_count(index));
        buf[len..len + TAG_LEN].copy_from_slice(&tag.as_ref()[..TAG_LEN]);
        Ok(len + TAG_LEN)
    }

    /// Authenticates the packet as sent under its index, then decrypts it.
    fn open_rtp(&self, buf: &mut [u8], packet: Rtp) -> Result<usize, SrtpError> {
        let (header_len, index) = (packet.header_len, packet.index);
        let plain_len = buf.len() - TAG_LEN;
        self.verify(buf, plain_len, rollover_count(index))?;
        self.apply_keystream(&mut buf[header_len..plain_len], packet.ssrc, index)?;
        Ok(plain_len)
    }

    /// Encrypts, appends the E flag and index, then the tag over all of it (RFC 3711 §3.4).
    fn seal_rtcp(&self, buf: &mut [u8], len: usize, packet: Rtcp) -> Result<usize, SrtpError> {
        let Rtcp { ssrc, index } = packet;
        self.apply_keystream(&mut buf[RTCP_HEADER_LEN..len], ssrc, u64::from(index))?;
        let authenticated = len + SRTCP_INDEX_LEN;
        buf[len..authenticated].copy_from_slice(&(index | super::E_FLAG).to_be_bytes());
        let tag = self.tag(&buf[..authenticated], []);
        buf[authenticated..authenticated + TAG_LEN].copy_from_slice(&tag.as_ref()[..TAG_LEN]);
        Ok(authenticated + TAG_LEN)
    }

    /// Authenticates the packet (the trailer before the tag included), then decrypts it.
    fn open_rtcp(&self, buf: &mut [u8], packet: Rtcp) -> Result<usize, SrtpError> {
        let Rtcp { ssrc, index } = packet;
        let authenticated = buf.len() - TAG_LEN;
        self.verify(buf, authenticated, [])?;
        let plain_len = authenticated - SRTCP_INDEX_LEN;
        self.apply_keystream(&mut buf[RTCP_HEADER_LEN..plain_len], ssrc, u64::from(index))?;
        Ok(plain_len)
    }
}

impl AesCm {
    /// Encrypts or decrypts `data` in place: the AES-CM keystream from IV = (salt << 16) XOR
    /// (SSRC << 64) XOR (index << 16) (RFC 3711 §4.1.1).
    fn apply_keystream(&self, data: &mut [u8], ssrc: u32, index: u64) -> Result<(), SrtpError> {
        let mut iv = [0u8; 16];
        iv[..SALT_LEN].copy_from_slice(&self.salt);
        for (byte, x) in iv[4..8].iter_mut().zip(ssrc.to_be_bytes()) {
            *byte ^= x;
        }
        for (byte, x) in iv[8..14].iter_mut().zip(&index.to_be_bytes()[2..8]) {
            *byte ^= x;
        }
        let context = EncryptionContext::Iv128(FixedLength::from(iv));
        self.cipher
            .less_safe_encrypt(data, context)
            .map(drop)
            .map_err(|_| SrtpError::TooLong)
    }

    /// The full HMAC-SHA1 of `authenticated` followed by `suffix` (SRTP's rollover count).
    fn tag<const N: usize>(&self, authenticated: &[u8], suffix: [u8; N]) -> hmac::Tag {
        let mut context = hmac::Context::with_key(&self.auth);
        context.update(authenticated);
        context.update(&suffix);
        context.sign()
    }

    /// Whether the tag after `buf[..authenticated]` is that portion's, in constant time.
    fn verify<const N: usize>(
        &self,
        buf: &[u8],
        authenticated: usize,
        suffix: [u8; N],
    ) -> Result<(), SrtpError> {
        let tag = self.tag(&buf[..authenticated], suffix);
        verify_slices_are_equal(&tag.as_ref()[..TAG_LEN], &buf[authenticated..])
            .map_err(|_| SrtpError::Rejected)
    }
}

/// The rollover count of an extended sequence number, as the tag covers it.
fn rollover_count(index: u64) -> [u8; 4] {
    ((index >> 16) as u32).to_be_bytes()
}
