//! SRTP key derivation (RFC 3711 §4.3) at key derivation rate 0, with the AES-CM PRF of the
//! master key's size (RFC 3711 §4.3.3 for 128 bits, RFC 6188 §7 for 256, which RFC 7714 §11
//! names for the AES-256-GCM profile).

use aws_lc_rs::cipher::{EncryptingKey, EncryptionContext, UnboundCipherKey, AES_128, AES_256};
use aws_lc_rs::iv::FixedLength;

use super::SrtpError;

/// The labels of one packet kind's session keys (RFC 3711 §4.3.1).
#[derive(Debug, Clone, Copy)]
pub(super) struct Labels {
    pub encryption: u8,
    pub authentication: u8,
    pub salt: u8,
}

/// SRTP's session keys.
pub(super) const SRTP: Labels = Labels {
    encryption: 0x00,
    authentication: 0x01,
    salt: 0x02,
};

/// SRTCP's session keys.
pub(super) const SRTCP: Labels = Labels {
    encryption: 0x03,
    authentication: 0x04,
    salt: 0x05,
};

/// The AES block, and the PRF's input.
const BLOCK: usize = 16;

/// Fills `out` with the session key `label` names: the AES-CM keystream under the master key
/// from IV = (master salt XOR label << 48) << 16, that is the salt in the first bytes of the
/// block, the label XORed into byte 7 and the block counter in the last two bytes. A 12-byte
/// salt (the AES-GCM profiles) leaves bytes 12 and 13 zero, as a 14-byte one padded with
/// zeros would.
pub(super) fn derive(
    master_key: &[u8],
    master_salt: &[u8],
    label: u8,
    out: &mut [u8],
) -> Result<(), SrtpError> {
    let algorithm = match master_key.len() {
        16 => &AES_128,
        32 => &AES_256,
        _ => return Err(SrtpError::Keys),
    };
    // Two bytes of counter: 2^16 blocks of keystream, far more than any session key.
    if master_salt.len() > BLOCK - 2 || out.len() > BLOCK << 16 {
        return Err(SrtpError::Keys);
    }
    let mut iv = [0u8; BLOCK];
    iv[..master_salt.len()].copy_from_slice(master_salt);
    iv[7] ^= label;
    let key = UnboundCipherKey::new(algorithm, master_key).map_err(|_| SrtpError::Keys)?;
    let prf = EncryptingKey::ctr(key).map_err(|_| SrtpError::Keys)?;
    out.fill(0);
    prf.less_safe_encrypt(out, EncryptionContext::Iv128(FixedLength::from(iv)))
        .map_err(|_| SrtpError::Keys)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        hex::decode(s.replace(' ', "")).expect("hex")
    }

    /// RFC 3711 Appendix B.3: the key derivation test vectors.
    #[test]
    fn rfc_3711_b3_session_keys() {
        let master_key = hex("E1F97A0D3E018BE0D64FA32C06DE4139");
        let master_salt = hex("0EC675AD498AFEEBB6960B3AABE6");
        let mut key = [0u8; 16];
        derive(&master_key, &master_salt, SRTP.encryption, &mut key).expect("derives");
        assert_eq!(key.to_vec(), hex("C61E7A93744F39EE10734AFE3FF7A087"));
        let mut salt = [0u8; 14];
        derive(&master_key, &master_salt, SRTP.salt, &mut salt).expect("derives");
        assert_eq!(salt.to_vec(), hex("30CBBC08863D8C85D49DB34A9AE1"));
        let mut auth = [0u8; 20];
        derive(&master_key, &master_salt, SRTP.authentication, &mut auth).expect("derives");
        assert_eq!(
            auth.to_vec(),
            hex("CEBE321F6FF7716B6FD4AB49AF256A156D38BAA4")
        );
    }

    /// RFC 6188 §7.2: the AES-256 PRF's test vectors.
    #[test]
    fn rfc_6188_7_2_session_keys() {
        let master_key = hex("f0f04914b513f2763a1b1fa130f10e29 98f6f6e43e4309d1e622a0e332b9f1b6");
        let master_salt = hex("3b04803de51ee7c96423ab5b78d2");
        let mut key = [0u8; 32];
        derive(&master_key, &master_salt, SRTP.encryption, &mut key).expect("derives");
        assert_eq!(
            key.to_vec(),
            hex("5ba1064e30ec51613cad926c5a28ef73 1ec7fb397f70a960653caf06554cd8c4")
        );
        let mut salt = [0u8; 14];
        derive(&master_key, &master_salt, SRTP.salt, &mut salt).expect("derives");
        assert_eq!(salt.to_vec(), hex("fa31791685ca444a9e07c6c64e93"));
        let mut auth = [0u8; 20];
        derive(&master_key, &master_salt, SRTP.authentication, &mut auth).expect("derives");
        assert_eq!(
            auth.to_vec(),
            hex("fd9c32d39ed5fbb5a9dc96b30818454d1313dc05")
        );
    }

    #[test]
    fn keys_of_other_sizes_are_refused() {
        let mut out = [0u8; 16];
        for len in [0, 15, 17, 24, 33] {
            let key = vec![1; len];
            let derived = derive(&key, &[2; 14], SRTP.encryption, &mut out);
            assert_eq!(derived, Err(SrtpError::Keys), "{len}");
        }
        let derived = derive(&[1; 16], &[2; 15], SRTP.encryption, &mut out);
        assert_eq!(derived, Err(SrtpError::Keys), "a salt over 14 bytes");
    }
}
