//! The async DTLS server the media loop starts today: one task per handshake on the `dtls`
//! crate, fed through a [`DtlsInput`], answering through a send callback. The sans-IO
//! [`super::DtlsAssociation`] replaces it once the core drives the associations.
//!
//! The socket loop demultiplexes datagrams (RFC 7983) and pushes a peer's DTLS datagrams into
//! its [`DtlsInput`]; the handshake answers through the `send` callback it was started with.
//! The DTLS stack only speaks to a `Conn`, so an in-memory one sits between the two.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use dtls::config::{ClientAuthType, Config, ExtendedMasterSecretType};
use dtls::conn::DTLSConn;
use dtls::crypto::Certificate;
use dtls::extension::extension_use_srtp::SrtpProtectionProfile;
use tokio::sync::{mpsc, oneshot};

use super::async_stack::{export_keys, ChannelConn, SendDatagram};
use super::{expected_fingerprint, sha256, DtlsCertificate, DtlsError, Side, HANDSHAKE_TIMEOUT};
use crate::node::srtp::SrtpKeys;

/// Datagrams queued towards one handshake. DTLS retransmits lost flights, so a peer flooding
/// the queue only loses its own surplus datagrams.
pub(super) const INPUT_QUEUE: usize = 64;

/// The node's certificate for this stack: it reads the key from PEM only.
pub(super) fn legacy_certificate(der: &dimpl::DtlsCertificate) -> Result<Certificate, DtlsError> {
    let block = |tag: &str, bytes: &[u8]| {
        let base64 = base64::engine::general_purpose::STANDARD.encode(bytes);
        let lines: Vec<&str> = base64
            .as_bytes()
            .chunks(64)
            .map(|line| std::str::from_utf8(line).expect("base64 is ASCII"))
            .collect();
        format!(
            "-----BEGIN {tag}-----\n{}\n-----END {tag}-----\n",
            lines.join("\n")
        )
    };
    let pem = block("PRIVATE_KEY", &der.private_key) + &block("CERTIFICATE", &der.certificate);
    Certificate::from_pem(&pem).map_err(|e| DtlsError::Certificate(e.to_string()))
}

/// Where the socket loop pushes one peer's DTLS datagrams. Dropping it ends the peer's DTLS
/// connection.
#[derive(Debug)]
pub struct DtlsInput {
    pub(super) datagrams: mpsc::Sender<Bytes>,
    // Never sent on: the connection task watches for its drop.
    _alive: oneshot::Sender<()>,
}

impl DtlsInput {
    /// Hands one DTLS datagram to the handshake. A full queue drops it; the peer retransmits.
    pub fn push(&self, datagram: Bytes) {
        let _ = self.datagrams.try_send(datagram);
    }
}

/// The node's side of one peer's DTLS association, as an async task.
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
                    certificate: cert.legacy.clone(),
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

/// What one handshake needs besides its conn.
struct Handshake {
    certificate: Certificate,
    /// The peer's certificate's SHA-256 hash, from its SDP.
    expected: [u8; 32],
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

fn server_config(
    certificate: Certificate,
    expected: [u8; 32],
    mismatch: Arc<AtomicBool>,
) -> Config {
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
            let matches = certs.first().is_some_and(|der| sha256(der) == expected);
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
