//! The node's DTLS 1.2 server (ICE-lite, `a=setup:passive`): one handshake per peer, over the
//! node's shared UDP socket, ending in the SRTP keys of that peer (RFC 5763, RFC 5764).
//!
//! The socket loop demultiplexes datagrams (RFC 7983) and pushes a peer's DTLS datagrams into
//! its [`DtlsInput`]; the handshake answers through the `send` callback it was started with. The
//! DTLS stack only speaks to a [`Conn`], so an in-memory one sits between the two.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use dtls::config::{ClientAuthType, Config, ExtendedMasterSecretType};
use dtls::conn::DTLSConn;
use dtls::crypto::Certificate;
use dtls::extension::extension_use_srtp::SrtpProtectionProfile;
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot, Mutex};
use webrtc_util::{Conn, KeyingMaterialExporter};

use super::srtp::{SrtpKeys, SrtpProfile};

/// How long a peer has to complete the handshake from the moment it starts.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Datagrams queued towards one handshake. DTLS retransmits lost flights, so a peer flooding
/// the queue only loses its own surplus datagrams.
const INPUT_QUEUE: usize = 64;

/// The RFC 5764 §4.2 exporter label for SRTP keys.
const SRTP_EXPORTER_LABEL: &str = "EXTRACTOR-dtls_srtp";

/// The only fingerprint hash the node accepts in a peer's SDP (RFC 8122: what browsers send).
const FINGERPRINT_ALGORITHM: &str = "sha-256";

/// What went wrong while setting up DTLS.
#[derive(Debug, thiserror::Error)]
pub enum DtlsError {
    #[error("cannot generate the node's certificate: {0}")]
    Certificate(#[source] dtls::Error),
    #[error("the peer's fingerprint uses the unsupported hash {0:?}")]
    UnsupportedFingerprint(String),
    #[error("the peer's certificate does not match the fingerprint in its SDP")]
    FingerprintMismatch,
    #[error("the DTLS handshake failed: {0}")]
    Handshake(#[source] dtls::Error),
    #[error("the DTLS handshake did not finish within {0:?}")]
    Timeout(Duration),
    #[error("the peer agreed on no SRTP protection profile the node supports")]
    NoSrtpProfile,
    #[error("cannot export the SRTP keying material: {0}")]
    KeyExport(#[source] webrtc_util::KeyingMaterialExporterError),
}

/// The node's certificate, shared by every peer's handshake and announced in SDP.
#[derive(Debug, Clone)]
pub struct DtlsCertificate {
    certificate: Certificate,
}

impl DtlsCertificate {
    /// A fresh self-signed ECDSA P-256 certificate: peers trust it through the SDP fingerprint,
    /// not a chain.
    pub fn generate() -> Result<Self, DtlsError> {
        let certificate = Certificate::generate_self_signed(vec!["strata".to_owned()])
            .map_err(DtlsError::Certificate)?;
        Ok(Self { certificate })
    }

    /// The `a=fingerprint` value: `"sha-256 AB:CD:…"`.
    pub fn fingerprint(&self) -> String {
        let der = self
            .certificate
            .certificate
            .first()
            .map_or(&[][..], |c| c.as_ref());
        format!("{FINGERPRINT_ALGORITHM} {}", sha256_fingerprint(der))
    }
}

/// SHA-256 of `der` as uppercase hex pairs joined by colons (RFC 8122 §5).
fn sha256_fingerprint(der: &[u8]) -> String {
    let digest = Sha256::digest(der);
    let pairs: Vec<String> = digest.iter().map(|b| format!("{b:02X}")).collect();
    pairs.join(":")
}

/// Where the socket loop pushes one peer's DTLS datagrams. Dropping it ends the peer's DTLS
/// connection.
#[derive(Debug)]
pub struct DtlsInput {
    datagrams: mpsc::Sender<Bytes>,
    // Never sent on: the connection task watches for its drop.
    _alive: oneshot::Sender<()>,
}

impl DtlsInput {
    /// Hands one DTLS datagram to the handshake. A full queue drops it; the peer retransmits.
    pub fn push(&self, datagram: Bytes) {
        let _ = self.datagrams.try_send(datagram);
    }
}

/// The callback through which the handshake sends datagrams to the peer.
pub type SendDatagram = Box<dyn Fn(Bytes) + Send + Sync>;

/// The node's side of one peer's DTLS association.
#[derive(Debug)]
pub struct DtlsServer;

impl DtlsServer {
    /// Starts the server handshake on the current tokio runtime. `remote_fingerprint` is the
    /// peer's SDP `a=fingerprint` as (hash algorithm, hex value). The receiver yields the SRTP
    /// keys once the handshake completes; the connection then stays up, answering
    /// retransmitted flights, until the returned [`DtlsInput`] is dropped.
    pub fn start(
        cert: &DtlsCertificate,
        remote_fingerprint: (&str, &str),
        send: SendDatagram,
    ) -> (DtlsInput, oneshot::Receiver<Result<SrtpKeys, DtlsError>>) {
        Self::start_with_timeout(cert, remote_fingerprint, send, HANDSHAKE_TIMEOUT)
    }

    pub fn start_with_timeout(
        cert: &DtlsCertificate,
        remote_fingerprint: (&str, &str),
        send: SendDatagram,
        timeout: Duration,
    ) -> (DtlsInput, oneshot::Receiver<Result<SrtpKeys, DtlsError>>) {
        let (datagrams, inbound) = mpsc::channel(INPUT_QUEUE);
        let (alive, dropped) = oneshot::channel();
        let (keys_tx, keys_rx) = oneshot::channel();
        let input = DtlsInput {
            datagrams,
            _alive: alive,
        };
        match expected_fingerprint(remote_fingerprint) {
            Ok(expected) => {
                let handshake = Handshake {
                    certificate: cert.certificate.clone(),
                    expected,
                    timeout,
                };
                let conn = Arc::new(ChannelConn::new(inbound, send));
                tokio::spawn(run(handshake, conn, keys_tx, dropped));
            }
            Err(err) => {
                let _ = keys_tx.send(Err(err));
            }
        }
        (input, keys_rx)
    }
}

/// The peer's fingerprint normalised for comparison with [`sha256_fingerprint`].
fn expected_fingerprint((algorithm, value): (&str, &str)) -> Result<String, DtlsError> {
    if !algorithm.eq_ignore_ascii_case(FINGERPRINT_ALGORITHM) {
        return Err(DtlsError::UnsupportedFingerprint(algorithm.to_owned()));
    }
    Ok(value.trim().to_ascii_uppercase())
}

/// What one handshake needs besides its conn.
struct Handshake {
    certificate: Certificate,
    /// The peer's SHA-256 fingerprint as [`sha256_fingerprint`] writes it.
    expected: String,
    timeout: Duration,
}

/// One peer's connection: handshake, key export, then staying up until the input is dropped.
async fn run(
    handshake: Handshake,
    conn: Arc<ChannelConn>,
    keys_tx: oneshot::Sender<Result<SrtpKeys, DtlsError>>,
    dropped: oneshot::Receiver<()>,
) {
    let dtls = match handshake.run(conn).await {
        Ok(dtls) => dtls,
        Err(err) => {
            let _ = keys_tx.send(Err(err));
            return;
        }
    };
    let keys = export_keys(&dtls, Side::Server).await;
    let exported = keys.is_ok();
    let _ = keys_tx.send(keys);
    if exported {
        // The DTLS stack answers retransmitted flights for as long as the connection lives.
        let _ = dropped.await;
    }
    let _ = dtls.close().await;
}

impl Handshake {
    async fn run(self, conn: Arc<ChannelConn>) -> Result<DTLSConn, DtlsError> {
        let mismatch = Arc::new(AtomicBool::new(false));
        let config = server_config(self.certificate, self.expected, Arc::clone(&mismatch));
        let handshake = DTLSConn::new(conn, config, false, None);
        match tokio::time::timeout(self.timeout, handshake).await {
            Err(_elapsed) => Err(DtlsError::Timeout(self.timeout)),
            // The stack reports our verifier's refusal as a generic certificate error.
            Ok(Err(_)) if mismatch.load(Ordering::SeqCst) => Err(DtlsError::FingerprintMismatch),
            Ok(Err(err)) => Err(DtlsError::Handshake(err)),
            Ok(Ok(dtls)) => Ok(dtls),
        }
    }
}

fn server_config(certificate: Certificate, expected: String, mismatch: Arc<AtomicBool>) -> Config {
    Config {
        certificates: vec![certificate],
        srtp_protection_profiles: vec![
            SrtpProtectionProfile::Srtp_Aead_Aes_128_Gcm,
            SrtpProtectionProfile::Srtp_Aes128_Cm_Hmac_Sha1_80,
        ],
        extended_master_secret: ExtendedMasterSecretType::Require,
        client_auth: ClientAuthType::RequireAnyClientCert,
        // WebRTC certificates are self-signed: the SDP fingerprint is what authenticates them.
        insecure_skip_verify: true,
        verify_peer_certificate: Some(Arc::new(move |certs: &[Vec<u8>], _chains| {
            let matches = certs
                .first()
                .is_some_and(|der| sha256_fingerprint(der) == expected);
            if matches {
                Ok(())
            } else {
                mismatch.store(true, Ordering::SeqCst);
                Err(dtls::Error::ErrInvalidCertificate)
            }
        })),
        ..Config::default()
    }
}

/// Which end of the handshake a key export is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

/// Exports the SRTP master keys of a finished handshake, seen from `side`.
pub async fn export_keys(dtls: &DTLSConn, side: Side) -> Result<SrtpKeys, DtlsError> {
    let profile = match dtls.selected_srtpprotection_profile() {
        SrtpProtectionProfile::Srtp_Aead_Aes_128_Gcm => SrtpProfile::AeadAes128Gcm,
        SrtpProtectionProfile::Srtp_Aes128_Cm_Hmac_Sha1_80 => SrtpProfile::Aes128CmHmacSha1_80,
        _ => return Err(DtlsError::NoSrtpProfile),
    };
    let length = 2 * (profile.key_len() + profile.salt_len());
    let material = dtls
        .connection_state()
        .await
        .export_keying_material(SRTP_EXPORTER_LABEL, &[], length)
        .await
        .map_err(DtlsError::KeyExport)?;
    Ok(split_keying_material(profile, &material, side))
}

/// Splits exported material laid out as client key, server key, client salt, server salt
/// (RFC 5764 §4.2) into our side's and the peer's keys.
fn split_keying_material(profile: SrtpProfile, material: &[u8], side: Side) -> SrtpKeys {
    let (key_len, salt_len) = (profile.key_len(), profile.salt_len());
    let (client_key, rest) = material.split_at(key_len);
    let (server_key, rest) = rest.split_at(key_len);
    let (client_salt, server_salt) = rest.split_at(salt_len);
    let (local, remote) = match side {
        Side::Client => ((client_key, client_salt), (server_key, server_salt)),
        Side::Server => ((server_key, server_salt), (client_key, client_salt)),
    };
    SrtpKeys {
        profile,
        local_key: local.0.to_vec(),
        local_salt: local.1.to_vec(),
        remote_key: remote.0.to_vec(),
        remote_salt: remote.1.to_vec(),
    }
}

/// A [`Conn`] over a channel of inbound datagrams and a send callback.
pub(crate) struct ChannelConn {
    inbound: Mutex<mpsc::Receiver<Bytes>>,
    send: SendDatagram,
}

impl std::fmt::Debug for ChannelConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelConn").finish_non_exhaustive()
    }
}

impl ChannelConn {
    pub(crate) fn new(inbound: mpsc::Receiver<Bytes>, send: SendDatagram) -> Self {
        Self {
            inbound: Mutex::new(inbound),
            send,
        }
    }
}

/// The address the DTLS stack is told for both ends: it only uses them for logging and the
/// client's server name, and the socket loop owns the real ones.
fn placeholder_addr() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))
}

#[async_trait]
impl Conn for ChannelConn {
    async fn connect(&self, _addr: SocketAddr) -> webrtc_util::Result<()> {
        Ok(())
    }

    async fn recv(&self, buf: &mut [u8]) -> webrtc_util::Result<usize> {
        let Some(datagram) = self.inbound.lock().await.recv().await else {
            // The DTLS reader retries on every error, so a closed input must not be one: it
            // waits here until the connection is closed, which ends the reader.
            return std::future::pending().await;
        };
        // A datagram longer than the stack's buffer is truncated, and then fails to parse.
        let n = datagram.len().min(buf.len());
        buf[..n].copy_from_slice(&datagram[..n]);
        Ok(n)
    }

    async fn recv_from(&self, buf: &mut [u8]) -> webrtc_util::Result<(usize, SocketAddr)> {
        Ok((self.recv(buf).await?, placeholder_addr()))
    }

    async fn send(&self, buf: &[u8]) -> webrtc_util::Result<usize> {
        (self.send)(Bytes::copy_from_slice(buf));
        Ok(buf.len())
    }

    async fn send_to(&self, buf: &[u8], _target: SocketAddr) -> webrtc_util::Result<usize> {
        self.send(buf).await
    }

    fn local_addr(&self) -> webrtc_util::Result<SocketAddr> {
        Ok(placeholder_addr())
    }

    fn remote_addr(&self) -> Option<SocketAddr> {
        None
    }

    // Nothing to release: the channel closes when both ends are dropped. (Taking the lock here
    // would wait on a pending `recv`.)
    async fn close(&self) -> webrtc_util::Result<()> {
        Ok(())
    }

    fn as_any(&self) -> &(dyn std::any::Any + Send + Sync) {
        self
    }
}

#[cfg(test)]
mod tests;
