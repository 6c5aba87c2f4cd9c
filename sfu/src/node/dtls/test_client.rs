//! The independent client the sans-IO association is checked against: the `dtls` crate's
//! async stack over memory, the [`Conn`] it speaks to, and its SRTP key export.

use std::net::{Ipv4Addr, SocketAddr};

use async_trait::async_trait;
use bytes::Bytes;
use dtls::conn::DTLSConn;
use dtls::crypto::Certificate;
use dtls::extension::extension_use_srtp::SrtpProtectionProfile;
use tokio::sync::{mpsc, Mutex};
use webrtc_util::{Conn, KeyingMaterialExporter};

use super::{fingerprint_of, split_keying_material, DtlsCertificate, Side};
use crate::node::srtp::{SrtpKeys, SrtpProfile};

/// The RFC 5764 §4.2 exporter label for SRTP keys (the node's stack uses it on its own).
const SRTP_EXPORTER_LABEL: &str = "EXTRACTOR-dtls_srtp";

/// The callback through which the client sends datagrams to its peer.
pub type SendDatagram = Box<dyn Fn(Bytes) + Send + Sync>;

/// What went wrong on the client's side.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("the client's handshake failed: {0}")]
    Handshake(#[source] dtls::Error),
    #[error("the client cannot export the SRTP keying material: {0}")]
    KeyExport(#[source] webrtc_util::KeyingMaterialExporterError),
    #[error("the client agreed on no SRTP profile the node knows")]
    NoSrtpProfile,
}

/// A certificate the node generated, as the client's stack takes it: from PEM only.
pub fn client_certificate(certificate: &DtlsCertificate) -> Certificate {
    let pem = certificate
        .stack
        .serialize_pem()
        .expect("an exportable key");
    Certificate::from_pem(&pem).expect("a certificate the node generated")
}

/// The `a=fingerprint` value of the client's certificate.
pub fn fingerprint(certificate: &Certificate) -> String {
    fingerprint_of(certificate.certificate[0].as_ref())
}

/// The node's SRTP profile for the client's, through their IANA number (RFC 5764 §4.1.2),
/// which both stacks' enumerations carry.
pub fn srtp_profile(profile: SrtpProtectionProfile) -> Option<SrtpProfile> {
    super::association::srtp_profile((profile as u16).into())
}

/// Exports the SRTP master keys of a finished handshake, seen from `side`.
pub async fn export_keys(dtls: &DTLSConn, side: Side) -> Result<SrtpKeys, ClientError> {
    let profile =
        srtp_profile(dtls.selected_srtpprotection_profile()).ok_or(ClientError::NoSrtpProfile)?;
    let length = 2 * (profile.key_len() + profile.salt_len());
    let material = dtls
        .connection_state()
        .await
        .export_keying_material(SRTP_EXPORTER_LABEL, &[], length)
        .await
        .map_err(ClientError::KeyExport)?;
    split_keying_material(profile, &material, side).ok_or(ClientError::NoSrtpProfile)
}

/// A [`Conn`] over a channel of inbound datagrams and a send callback.
pub struct ChannelConn {
    inbound: Mutex<mpsc::Receiver<Bytes>>,
    send: SendDatagram,
}

impl std::fmt::Debug for ChannelConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelConn").finish_non_exhaustive()
    }
}

impl ChannelConn {
    pub fn new(inbound: mpsc::Receiver<Bytes>, send: SendDatagram) -> Self {
        // The client's stack needs a process default; one already installed is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
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
