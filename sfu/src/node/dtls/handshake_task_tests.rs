//! The async handshake task against the `dtls` crate's client, through channels.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use dtls::config::{Config, ExtendedMasterSecretType};
use dtls::conn::DTLSConn;
use dtls::extension::extension_use_srtp::SrtpProtectionProfile;
use tokio::sync::{mpsc, oneshot};

use super::async_stack::{export_keys, ChannelConn, SendDatagram};
use super::handshake_task::INPUT_QUEUE;
use super::*;
use crate::node::srtp::{SrtpKeys, SrtpProfile};

/// A `dtls` crate client connected to a [`DtlsServer`] through channels, standing in for a
/// browser.
struct Peers {
    server_keys: oneshot::Receiver<Result<SrtpKeys, DtlsError>>,
    server_input: Arc<DtlsInput>,
    client_conn: Arc<ChannelConn>,
    client_cert: DtlsCertificate,
    /// Held by the server's send callback: while it has other owners, the connection lives.
    server_alive: Arc<()>,
}

fn connect(server_cert: &DtlsCertificate, fingerprint_in_sdp: Option<String>) -> Peers {
    let client_cert = DtlsCertificate::generate().expect("certificate");
    let sdp = fingerprint_in_sdp.unwrap_or_else(|| client_cert.fingerprint());
    let (algorithm, value) = sdp.split_once(' ').expect("algorithm and value");
    let (to_client, client_inbound) = mpsc::channel(INPUT_QUEUE);
    let server_alive = Arc::new(());
    let alive = Arc::clone(&server_alive);
    let send_to_client: SendDatagram = Box::new(move |d| {
        let _ = &alive;
        let _ = to_client.try_send(d);
    });
    let (server_input, server_keys) =
        DtlsServer::start(server_cert, (algorithm, value), send_to_client);
    let server_input = Arc::new(server_input);
    // Weak, so the test alone decides when the server's input is dropped.
    let input = Arc::downgrade(&server_input);
    let send_to_server: SendDatagram = Box::new(move |d| {
        if let Some(input) = input.upgrade() {
            input.push(d);
        }
    });
    Peers {
        server_keys,
        server_input,
        client_conn: Arc::new(ChannelConn::new(client_inbound, send_to_server)),
        client_cert,
        server_alive,
    }
}

fn client_config(cert: &DtlsCertificate, profiles: Vec<SrtpProtectionProfile>) -> Config {
    Config {
        certificates: vec![cert.legacy.clone()],
        srtp_protection_profiles: profiles,
        extended_master_secret: ExtendedMasterSecretType::Require,
        insecure_skip_verify: true,
        server_name: "strata".to_owned(),
        ..Config::default()
    }
}

async fn handshake(
    peers: Peers,
    profiles: Vec<SrtpProtectionProfile>,
) -> (Result<SrtpKeys, DtlsError>, Result<SrtpKeys, DtlsError>) {
    let config = client_config(&peers.client_cert, profiles);
    let client = async {
        let dtls = DTLSConn::new(peers.client_conn, config, true, None)
            .await
            .map_err(DtlsError::Handshake)?;
        export_keys(&dtls, Side::Client).await
    };
    let server = async { peers.server_keys.await.expect("the server task answers") };
    tokio::join!(client, server)
}

const BOTH: [SrtpProtectionProfile; 2] = [
    SrtpProtectionProfile::Srtp_Aead_Aes_128_Gcm,
    SrtpProtectionProfile::Srtp_Aes128_Cm_Hmac_Sha1_80,
];

#[tokio::test]
async fn both_sides_derive_the_same_srtp_keys() {
    let server_cert = DtlsCertificate::generate().expect("certificate");
    let (client, server) = handshake(connect(&server_cert, None), BOTH.to_vec()).await;
    let (client, server) = (client.expect("client keys"), server.expect("server keys"));
    assert_eq!(server.profile, SrtpProfile::AeadAes128Gcm);
    assert_eq!(client, server.mirrored());
    assert_eq!(server.local_key.len(), 16);
    assert_eq!(server.local_salt.len(), 12);
    assert_ne!(server.local_key, server.remote_key);
}

#[tokio::test]
async fn the_client_profile_order_decides_and_aes_cm_keys_have_14_byte_salts() {
    let server_cert = DtlsCertificate::generate().expect("certificate");
    let profiles = vec![BOTH[1], BOTH[0]];
    let (client, server) = handshake(connect(&server_cert, None), profiles).await;
    let (client, server) = (client.expect("client keys"), server.expect("server keys"));
    assert_eq!(server.profile, SrtpProfile::Aes128CmHmacSha1_80);
    assert_eq!(server.local_salt.len(), 14);
    assert_eq!(client, server.mirrored());
}

#[tokio::test]
async fn a_certificate_not_matching_the_sdp_fingerprint_fails() {
    let server_cert = DtlsCertificate::generate().expect("certificate");
    let other = DtlsCertificate::generate()
        .expect("certificate")
        .fingerprint();
    let (client, server) = handshake(connect(&server_cert, Some(other)), BOTH.to_vec()).await;
    assert!(
        matches!(server, Err(DtlsError::FingerprintMismatch)),
        "{server:?}"
    );
    assert!(client.is_err());
}

#[tokio::test]
async fn an_unsupported_fingerprint_hash_fails_at_once() {
    let server_cert = DtlsCertificate::generate().expect("certificate");
    let (_input, keys) = DtlsServer::start(&server_cert, ("sha-1", "AB:CD"), Box::new(|_| {}));
    let result = keys.await.expect("the server task answers");
    assert!(matches!(result, Err(DtlsError::UnsupportedFingerprint(h)) if h == "sha-1"));
}

#[tokio::test]
async fn garbage_datagrams_do_not_stop_a_handshake() {
    let server_cert = DtlsCertificate::generate().expect("certificate");
    let peers = connect(&server_cert, None);
    let garbage: [&[u8]; 5] = [
        b"",
        &[22],
        &[22, 254, 253, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF],
        &[20, 254, 253, 0, 9, 0, 0, 0, 0, 0, 0, 0, 1, 1],
        &[0xAB; 3000],
    ];
    for datagram in garbage {
        peers.server_input.push(Bytes::copy_from_slice(datagram));
    }
    let input = Arc::clone(&peers.server_input);
    let alive = Arc::clone(&peers.server_alive);
    let (client, server) = handshake(peers, BOTH.to_vec()).await;
    assert_eq!(
        client.expect("client keys"),
        server.expect("server keys").mirrored()
    );
    // After the handshake too: the connection reads the garbage off its queue and stays up.
    for datagram in garbage {
        input.push(Bytes::copy_from_slice(datagram));
    }
    let queue = &input.datagrams;
    assert!(queue.capacity() < queue.max_capacity(), "queued");
    let drained = async {
        while queue.capacity() < queue.max_capacity() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), drained)
        .await
        .expect("the connection reads on after the handshake");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        Arc::strong_count(&alive) > 1,
        "garbage after the handshake ended the connection"
    );
}

#[tokio::test]
async fn the_connection_lives_until_its_input_is_dropped() {
    let server_cert = DtlsCertificate::generate().expect("certificate");
    let peers = connect(&server_cert, None);
    let (alive, input) = (
        Arc::clone(&peers.server_alive),
        Arc::clone(&peers.server_input),
    );
    let (client, server) = handshake(peers, BOTH.to_vec()).await;
    assert_eq!(
        client.expect("client keys"),
        server.expect("server keys").mirrored()
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        Arc::strong_count(&alive) > 1,
        "the connection stays up after the handshake"
    );
    drop(input);
    let ended = async {
        while Arc::strong_count(&alive) > 1 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), ended)
        .await
        .expect("the connection ends once its input is dropped");
}

#[tokio::test]
async fn a_silent_peer_times_out() {
    let server_cert = DtlsCertificate::generate().expect("certificate");
    let fingerprint = server_cert.fingerprint();
    let (algorithm, value) = fingerprint.split_once(' ').expect("algorithm and value");
    let timeout = Duration::from_millis(300);
    let (_input, keys) =
        DtlsServer::start_with_timeout(&server_cert, (algorithm, value), Box::new(|_| {}), timeout);
    let result = keys.await.expect("the server task answers");
    assert!(
        matches!(result, Err(DtlsError::Timeout(t)) if t == timeout),
        "{result:?}"
    );
}

#[test]
fn the_certificate_key_is_ecdsa_p256() {
    let cert = DtlsCertificate::generate().expect("certificate");
    let kind = &cert.legacy.private_key.kind;
    assert!(
        matches!(kind, dtls::crypto::CryptoPrivateKeyKind::Ecdsa256(_)),
        "{kind:?}"
    );
}

#[test]
fn the_legacy_stack_presents_the_same_certificate() {
    let cert = DtlsCertificate::generate().expect("certificate");
    assert_eq!(cert.legacy.certificate.len(), 1);
    assert_eq!(
        cert.legacy.certificate[0].as_ref(),
        &cert.der.certificate[..]
    );
}
