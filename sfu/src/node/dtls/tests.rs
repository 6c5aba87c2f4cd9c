//! The certificate, the fingerprint check and the key export's layout.

use proptest::prelude::*;

use super::*;

#[test]
fn the_fingerprint_is_sha256_of_the_der_in_uppercase_pairs() {
    let cert = DtlsCertificate::generate().expect("certificate");
    let fingerprint = cert.fingerprint();
    let (algorithm, value) = fingerprint.split_once(' ').expect("algorithm and value");
    assert_eq!(algorithm, "sha-256");
    let bytes: Vec<u8> = value
        .split(':')
        .map(|pair| {
            assert_eq!(pair, pair.to_ascii_uppercase());
            u8::from_str_radix(pair, 16).expect("hex pair")
        })
        .collect();
    assert_eq!(bytes, Sha256::digest(cert.der()).to_vec());
    // It reads back as what the check compares against.
    let parsed = expected_fingerprint((algorithm, value)).expect("well formed");
    assert_eq!(parsed, sha256(cert.der()));
}

#[test]
fn certificates_are_unique() {
    let one = DtlsCertificate::generate().expect("certificate");
    let other = DtlsCertificate::generate().expect("certificate");
    assert_ne!(one.fingerprint(), other.fingerprint());
}

#[test]
fn sdp_fingerprints_parse_in_either_case_and_nothing_else() {
    let pairs: Vec<String> = (0..32).map(|i| format!("{:02x}", i * 7)).collect();
    let lower = pairs.join(":");
    let expected: Vec<u8> = (0..32).map(|i| i * 7).collect();
    let parsed = expected_fingerprint(("SHA-256", &lower)).expect("lower case");
    assert_eq!(parsed.to_vec(), expected);
    let upper = format!(" {} ", lower.to_ascii_uppercase());
    assert_eq!(expected_fingerprint(("sha-256", &upper)).ok(), Some(parsed));

    let short = pairs[..31].join(":");
    let long = format!("{lower}:00");
    let odd = lower.replacen(':', "", 1);
    let not_hex = lower.replacen("00", "0g", 1);
    let signed = lower.replacen("00", "+0", 1);
    for malformed in [&short, &long, &odd, &not_hex, &signed, "", ":::"] {
        let result = expected_fingerprint(("sha-256", malformed));
        assert!(
            matches!(result, Err(DtlsError::MalformedFingerprint)),
            "{malformed:?}: {result:?}"
        );
    }
    let sha1 = expected_fingerprint(("sha-1", &lower));
    assert!(matches!(sha1, Err(DtlsError::UnsupportedFingerprint(h)) if h == "sha-1"));
}

#[test]
fn keying_material_splits_in_rfc_5764_order() {
    for profile in [
        SrtpProfile::AeadAes128Gcm,
        SrtpProfile::AeadAes256Gcm,
        SrtpProfile::Aes128CmHmacSha1_80,
    ] {
        let (key, salt) = (profile.key_len() as u8, profile.salt_len() as u8);
        let material: Vec<u8> = (0..2 * (key + salt)).collect();
        let server = split_keying_material(profile, &material, Side::Server).expect("fits");
        assert_eq!(server.remote_key, (0..key).collect::<Vec<u8>>());
        assert_eq!(server.local_key, (key..2 * key).collect::<Vec<u8>>());
        assert_eq!(
            server.remote_salt,
            (2 * key..2 * key + salt).collect::<Vec<u8>>()
        );
        assert_eq!(
            server.local_salt,
            (2 * key + salt..2 * (key + salt)).collect::<Vec<u8>>()
        );
        let client = split_keying_material(profile, &material, Side::Client).expect("fits");
        assert_eq!(client, server.mirrored());
        let short = &material[..material.len() - 1];
        assert_eq!(split_keying_material(profile, short, Side::Server), None);
    }
}

proptest! {
    #[test]
    fn arbitrary_fingerprints_never_panic(algorithm in ".{0,10}", value in ".{0,120}") {
        let _ = expected_fingerprint((&algorithm, &value));
    }

    #[test]
    fn written_fingerprints_read_back(hash in any::<[u8; 32]>()) {
        let value: Vec<String> = hash.iter().map(|b| format!("{b:02X}")).collect();
        let parsed = expected_fingerprint(("sha-256", &value.join(":")));
        prop_assert_eq!(parsed.ok(), Some(hash));
    }
}

#[test]
fn the_certificate_key_is_ecdsa_p256_and_the_client_stack_reads_it() {
    let cert = DtlsCertificate::generate().expect("certificate");
    let client = test_client::client_certificate(&cert);
    let kind = &client.private_key.kind;
    assert!(
        matches!(kind, dtls::crypto::CryptoPrivateKeyKind::Ecdsa256(_)),
        "{kind:?}"
    );
    assert_eq!(client.certificate.len(), 1);
    assert_eq!(client.certificate[0].as_ref(), cert.der());
}
