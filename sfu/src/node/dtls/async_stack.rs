//! The `dtls` crate's async stack over memory: the [`Conn`] it speaks to, and its SRTP key
//! export. The async handshake task serves with it; the tests drive it as the independent
//! client the sans-IO association is checked against.

use std::net::{Ipv4Addr, SocketAddr};

use async_trait::async_trait;
use bytes::Bytes;
use dtls::conn::DTLSConn;
use dtls::extension::extension_use_srtp::SrtpProtectionProfile;
use tokio::sync::{mpsc, Mutex};
use webrtc_util::{Conn, KeyingMaterialExporter};

use super::{split_keying_material, DtlsError, Side, SRTP_EXPORTER_LABEL};
use crate::node::srtp::{SrtpKeys, SrtpProfile};

/// The callback through which a stack sends datagrams to its peer.
pub type SendDatagram = Box<dyn Fn(Bytes) + Send + Sync>;

/// The SRTP protection profiles both ends of the stack know, in the node's order.
pub(crate) fn srtp_profile(profile: SrtpProtectionProfile) -> Option<SrtpProfile> {
    match profile {
        SrtpProtectionProfile::Srtp_Aead_Aes_128_Gcm => Some(SrtpProfile::AeadAes128Gcm),
        SrtpProtectionProfile::Srtp_Aead_Aes_256_Gcm => Some(SrtpProfile::AeadAes256Gcm),
        SrtpProtectionProfile::Srtp_Aes128_Cm_Hmac_Sha1_80 => {
            Some(SrtpProfile::Aes128CmHmacSha1_80)
        }
        _ => None,
    }
}

/// Exports the SRTP master keys of a finished handshake, seen from `side`.
pub async fn export_keys(dtls: &DTLSConn, side: Side) -> Result<SrtpKeys, DtlsError> {
    let profile =
        srtp_profile(dtls.selected_srtpprotection_profile()).ok_or(DtlsError::NoSrtpProfile)?;
    let length = 2 * (profile.key_len() + profile.salt_len());
    let material = dtls
        .connection_state()
        .await
        .export_keying_material(SRTP_EXPORTER_LABEL, &[], length)
        .await
        .map_err(DtlsError::KeyExport)?;
    split_keying_material(profile, &material, side).ok_or(DtlsError::NoSrtpProfile)
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
