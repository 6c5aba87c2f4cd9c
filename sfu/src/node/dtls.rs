//! The node's DTLS 1.2 server (ICE-lite, `a=setup:passive`): one association per peer, over
//! the node's shared UDP socket, ending in the SRTP keys of that peer (RFC 5763, RFC 5764).
//!
//! [`DtlsAssociation`] (`association.rs`) is sans-IO, on the `rtc-dtls` crate: the core drives
//! one per session (`core/dtls.rs`) with datagrams and `now` in, datagrams, a timer and events
//! out. The tests check it against an independent client stack (`test_client.rs`).

mod association;
#[cfg(feature = "fuzzing")]
mod constant_random;
mod early_records;
#[cfg(any(test, feature = "fuzzing"))]
mod stack_client;

use std::sync::Arc;
use std::time::Duration;

use rtc_dtls::crypto::Certificate;
use rtc_dtls::crypto_provider::RTCCryptoProvider;
use sha2::{Digest, Sha256};

pub use association::{DtlsAssociation, DtlsConfig, DtlsOutput, DATAGRAM_LIMIT, MTU};
#[cfg(any(test, feature = "fuzzing"))]
pub use stack_client::{client_flights, client_hello};

use super::srtp::{SrtpKeys, SrtpProfile};

/// How long a peer has to complete the handshake from its first record (`dtls_timeout_ms`'s
/// default).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The only fingerprint hash the node accepts in a peer's SDP (RFC 8122: what browsers send).
const FINGERPRINT_ALGORITHM: &str = "sha-256";

/// What went wrong with a certificate, a fingerprint or an association.
#[derive(Debug, thiserror::Error)]
pub enum DtlsError {
    /// The node's key pair or self-signed certificate could not be made at start-up.
    #[error("cannot generate the node's certificate: {0}")]
    Certificate(String),
    /// The offer's `a=fingerprint` names a hash other than SHA-256, the one browsers send.
    #[error("the peer's fingerprint uses the unsupported hash {0:?}")]
    UnsupportedFingerprint(String),
    /// The offer's SHA-256 fingerprint is not 32 colon-separated hex pairs (RFC 8122 §5).
    #[error("the peer's SDP fingerprint is not 32 colon-separated hex pairs")]
    MalformedFingerprint,
    /// The certificate the peer presented is not the one its offer announced: the handshake ends
    /// before the node's last flight, so no keys come out of it.
    #[error("the peer's certificate does not match the fingerprint in its SDP")]
    FingerprintMismatch,
    /// The peer sent no certificate, so there is nothing to check the fingerprint against.
    #[error("the peer completed the handshake without a certificate")]
    NoCertificate,
    /// The handshake was not done within the configured time from the session's first record.
    #[error("the DTLS handshake did not finish within {0:?}")]
    Timeout(Duration),
    /// The handshake finished without a `use_srtp` profile (RFC 5764 §4.1.2) both sides know: no
    /// SRTP keys, no media.
    #[error("the peer agreed on no SRTP protection profile the node supports")]
    NoSrtpProfile,
    /// The DTLS stack refused a record or the handshake: its reason.
    #[error("the DTLS association failed: {0}")]
    Protocol(#[source] rtc_shared::error::Error),
    /// A datagram, or application data to send, longer than an association takes: refused
    /// whole rather than cut.
    #[error("a {0}-byte datagram is longer than a DTLS association takes")]
    DatagramTooLong(usize),
    /// A datagram whose record headers (RFC 6347 §4.1) do not add up to its length: dropped,
    /// where the stack would end the association over it.
    #[error("the datagram is not a sequence of whole DTLS records")]
    MalformedDatagram,
    /// More handshake bytes than a handshake of the node's needs, during the handshake or (the
    /// repeats of the peer's final flight) after it: refused so a peer cannot make the
    /// association buffer without bound.
    #[error("the peer sent more handshake bytes than a handshake needs")]
    HandshakeTooLong,
    /// A record the association already holds while it waits for the keys to decrypt it: a copy,
    /// dropped.
    #[error("the datagram repeats a record the handshake holds undecrypted")]
    DuplicateRecord,
    /// The peer sent its ClientHello again (the node's answer was lost): kept from the stack,
    /// whose retransmission timer then sends the answer again.
    #[error("the peer repeated the hello the node answered already")]
    RepeatedHello,
    /// More records of the next epoch arrived before the keys for them than a handshake sends:
    /// refused so they cannot pile up.
    #[error("the peer sent more records of a later epoch than a handshake needs")]
    TooManyEarlyRecords,
    /// The caller's output buffer is shorter than the largest datagram the association writes.
    #[error("the output buffer holds {0} bytes, fewer than a DTLS association needs")]
    BufferTooSmall(usize),
    /// Application data was given to an association whose handshake has not finished.
    #[error("the DTLS association is not connected yet")]
    NotConnected,
    /// The association was closed (alert, failure or timeout) and takes nothing more.
    #[error("the DTLS association has ended")]
    Ended,
}

/// The node's certificate, shared by every peer's association and announced in SDP.
#[derive(Clone)]
pub struct DtlsCertificate {
    /// The certificate and its private key, as the DTLS stack takes them.
    stack: Certificate,
    /// The cryptography the key lives in, which every association runs on too.
    provider: Arc<dyn RTCCryptoProvider>,
}

// The private key stays out of logs.
impl std::fmt::Debug for DtlsCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DtlsCertificate")
            .field("fingerprint", &self.fingerprint())
            .finish_non_exhaustive()
    }
}

impl DtlsCertificate {
    /// A fresh self-signed ECDSA P-256 certificate, its serial number the hash of its fresh
    /// key: peers trust it through the SDP fingerprint, not a chain, and some refuse two
    /// certificates with one serial.
    pub fn generate() -> Result<Self, DtlsError> {
        let provider = rtc_dtls::crypto_provider::default_provider()
            .map_err(|e| DtlsError::Certificate(e.to_string()))?;
        let stack = Certificate::generate_self_signed(vec!["strata".to_owned()], provider.crypto())
            .map_err(|e| DtlsError::Certificate(e.to_string()))?;
        Ok(Self { stack, provider })
    }

    /// The certificate's DER, what its fingerprint hashes.
    fn der(&self) -> &[u8] {
        self.stack
            .certificate
            .first()
            .map_or(&[], |der| der.as_ref())
    }

    /// The `a=fingerprint` value: `"sha-256 AB:CD:…"`.
    pub fn fingerprint(&self) -> String {
        fingerprint_of(self.der())
    }
}

/// The `a=fingerprint` value of the certificate `der`.
fn fingerprint_of(der: &[u8]) -> String {
    let pairs: Vec<String> = sha256(der).iter().map(|b| format!("{b:02X}")).collect();
    format!("{FINGERPRINT_ALGORITHM} {}", pairs.join(":"))
}

fn sha256(der: &[u8]) -> [u8; 32] {
    Sha256::digest(der).into()
}

/// The peer's SDP `a=fingerprint` as (hash algorithm, hex value), as the 32 bytes of its
/// SHA-256 hash (RFC 8122 §5: hex pairs joined by colons, in either case).
/// Whether an offer's `a=fingerprint` is one the handshake can check (the hash the node
/// takes, written in full): refused with the offer rather than at the first record.
pub fn check_fingerprint(algorithm: &str, value: &str) -> Result<(), DtlsError> {
    expected_fingerprint((algorithm, value)).map(|_| ())
}

fn expected_fingerprint((algorithm, value): (&str, &str)) -> Result<[u8; 32], DtlsError> {
    if !algorithm.eq_ignore_ascii_case(FINGERPRINT_ALGORITHM) {
        return Err(DtlsError::UnsupportedFingerprint(algorithm.to_owned()));
    }
    let mut hash = [0u8; 32];
    let mut pairs = value.trim().split(':');
    for byte in &mut hash {
        let pair = pairs.next().ok_or(DtlsError::MalformedFingerprint)?;
        // Two hex digits exactly: the integer parser would also take a sign.
        if pair.len() != 2 || !pair.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(DtlsError::MalformedFingerprint);
        }
        *byte = u8::from_str_radix(pair, 16).map_err(|_| DtlsError::MalformedFingerprint)?;
    }
    match pairs.next() {
        Some(_) => Err(DtlsError::MalformedFingerprint),
        None => Ok(hash),
    }
}

/// Which end of the handshake a key export is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The DTLS client, which sends the ClientHello (the browser, for the node).
    Client,
    /// The DTLS server: the node, an ICE-lite agent that answers (`a=setup:passive`,
    /// RFC 8842 §5.3).
    Server,
}

/// Splits exported material laid out as client key, server key, client salt, server salt
/// (RFC 5764 §4.2) into our side's and the peer's keys; None when it is not that long.
fn split_keying_material(profile: SrtpProfile, material: &[u8], side: Side) -> Option<SrtpKeys> {
    let (key_len, salt_len) = (profile.key_len(), profile.salt_len());
    if material.len() != 2 * (key_len + salt_len) {
        return None;
    }
    let (client_key, rest) = material.split_at(key_len);
    let (server_key, rest) = rest.split_at(key_len);
    let (client_salt, server_salt) = rest.split_at(salt_len);
    let (local, remote) = match side {
        Side::Client => ((client_key, client_salt), (server_key, server_salt)),
        Side::Server => ((server_key, server_salt), (client_key, client_salt)),
    };
    Some(SrtpKeys {
        profile,
        local_key: local.0.to_vec(),
        local_salt: local.1.to_vec(),
        remote_key: remote.0.to_vec(),
        remote_salt: remote.1.to_vec(),
    })
}

#[cfg(test)]
mod association_tests;
#[cfg(test)]
mod stack_client_tests;
#[cfg(test)]
pub(crate) mod test_client;
#[cfg(test)]
pub(crate) mod test_pair;
#[cfg(test)]
mod tests;
