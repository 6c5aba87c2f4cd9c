//! The association against the DTLS stack itself in the client role, presenting an RSA
//! certificate: what some clients send, and what the `dtls` crate's client cannot (it takes
//! ECDSA and Ed25519 keys only). In memory, one flight at a time.

use std::net::SocketAddr;
use std::time::Instant;

use bytes::BytesMut;
use rtc_dtls::config::ConfigBuilder;
use rtc_dtls::crypto::Certificate;
use rtc_dtls::endpoint::{Endpoint, EndpointEvent};
use rtc_dtls::extension::extension_use_srtp::SrtpProtectionProfile;
use rtc_shared::error::Error as StackError;

use super::association_tests::assert_keys_work;
use super::*;

/// A fixed RSA 2048 certificate and key (the stack cannot generate RSA keys).
fn rsa_certificate(crypto: &dyn rtc_dtls::crypto_provider::RTCCrypto) -> Certificate {
    Certificate::from_pem(include_str!("test_rsa_client.pem"), crypto).expect("the test's key")
}

/// What each end made of the handshake: the association's keys or failure, the client's keys.
struct Outcome {
    server: Option<Result<SrtpKeys, DtlsError>>,
    client: Option<SrtpKeys>,
}

/// A handshake between the association, told `sdp_fingerprint`, and the stack as a client
/// presenting the RSA certificate and offering `profiles`.
fn handshake(sdp_fingerprint: Option<&str>, profiles: Vec<SrtpProtectionProfile>) -> Outcome {
    let node = DtlsCertificate::generate().expect("certificate");
    let provider = rtc_dtls::crypto_provider::default_provider().expect("a crypto provider");
    let certificate = rsa_certificate(provider.crypto());
    let own_fingerprint = fingerprint_of(certificate.certificate[0].as_ref());
    let node_hash = sha256(node.der());
    let client_config = ConfigBuilder::default()
        .with_crypto_provider(provider)
        .with_certificates(vec![certificate])
        .with_srtp_protection_profiles(profiles)
        // As a browser does: the node's certificate is trusted for its SDP fingerprint.
        .with_insecure_skip_verify(true)
        .with_verify_peer_certificate(Some(Arc::new(move |certs: &[Vec<u8>], _| {
            match certs.first() {
                Some(der) if sha256(der) == node_hash => Ok(()),
                _ => Err(StackError::ErrFingerprintMismatch),
            }
        })))
        .build(true, None)
        .expect("a client configuration");
    let server_addr = stack_client::NODE;
    let now = Instant::now();
    let mut client = stack_client::connect(now, client_config);

    let config = DtlsConfig::new(&node, HANDSHAKE_TIMEOUT).expect("configuration");
    let fingerprint = sdp_fingerprint.map_or(own_fingerprint, str::to_owned);
    let (algorithm, value) = fingerprint.split_once(' ').expect("a fingerprint");
    let mut association =
        DtlsAssociation::new(now, &config, (algorithm, value)).expect("an association");
    let mut outcome = Outcome {
        server: None,
        client: None,
    };
    let mut buf = vec![0; DATAGRAM_LIMIT];
    // Each round carries one flight each way; a handshake takes three.
    for _ in 0..6 {
        while let Some(datagram) = client.poll_transmit() {
            let _ = association.handle_datagram(now, &datagram.message);
        }
        let mut to_client = Vec::new();
        while let Some(output) = association.poll_output(&mut buf) {
            match output {
                DtlsOutput::Datagram(datagram) => to_client.push(datagram.to_vec()),
                DtlsOutput::Connected(keys) => outcome.server = Some(Ok(keys)),
                DtlsOutput::Failed(err) => outcome.server = Some(Err(err)),
                DtlsOutput::ApplicationData(_) | DtlsOutput::Closed => {}
            }
        }
        for datagram in to_client {
            let events = client
                .read(now, server_addr, None, BytesMut::from(&datagram[..]))
                .unwrap_or_default();
            if events
                .iter()
                .any(|event| matches!(event, EndpointEvent::HandshakeComplete))
            {
                outcome.client = client_keys(&client, server_addr);
            }
        }
    }
    outcome
}

/// The client's SRTP keys, exported as the node exports its own.
fn client_keys(client: &Endpoint, server: SocketAddr) -> Option<SrtpKeys> {
    let state = client.get_connection_state(server)?;
    let profile = association::srtp_profile(state.srtp_protection_profile())?;
    let length = 2 * (profile.key_len() + profile.salt_len());
    let material = state
        .export_keying_material("EXTRACTOR-dtls_srtp", &[], length)
        .ok()?;
    split_keying_material(profile, material.as_ref(), Side::Client)
}

#[test]
fn an_rsa_client_certificate_is_taken() {
    let offers = [
        (
            vec![SrtpProtectionProfile::Srtp_Aead_Aes_128_Gcm],
            SrtpProfile::AeadAes128Gcm,
        ),
        (
            vec![SrtpProtectionProfile::Srtp_Aes128_Cm_Hmac_Sha1_80],
            SrtpProfile::Aes128CmHmacSha1_80,
        ),
    ];
    for (offer, expected) in offers {
        let outcome = handshake(None, offer);
        let server = match outcome.server {
            Some(Ok(keys)) => keys,
            other => panic!("the association did not connect: {other:?}"),
        };
        assert_eq!(server.profile, expected);
        let client = outcome.client.expect("the client connected");
        assert_eq!(client, server.mirrored());
        assert_keys_work(&client, &server);
    }
}

#[test]
fn an_rsa_client_certificate_not_matching_the_sdp_fingerprint_is_refused() {
    let other = DtlsCertificate::generate().expect("certificate");
    let outcome = handshake(
        Some(&other.fingerprint()),
        vec![SrtpProtectionProfile::Srtp_Aead_Aes_128_Gcm],
    );
    assert!(
        matches!(outcome.server, Some(Err(DtlsError::FingerprintMismatch))),
        "{:?}",
        outcome.server
    );
    // Refused before the node's last flight: the client never finishes.
    assert_eq!(outcome.client, None);
}
