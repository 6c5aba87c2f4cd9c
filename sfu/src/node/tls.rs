//! HTTPS for the node's HTTP side: a certificate and key from PEM files (read again on SIGHUP,
//! so a renewed certificate takes over without a restart and without touching open
//! connections or sessions), or a fresh self-signed one for a quick try on a LAN. HTTP/2 is
//! offered by ALPN beside HTTP/1.1.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use rustls::crypto::aws_lc_rs;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};
use tokio_rustls::TlsAcceptor;

/// ALPN protocols the node speaks, preferred first (RFC 7301; `h2` is RFC 9113's).
pub const ALPN_H2: &[u8] = b"h2";
const ALPN_HTTP1: &[u8] = b"http/1.1";

/// Where the node's certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsSource {
    /// A certificate chain and its private key, PEM, read again on SIGHUP.
    Files {
        /// The certificate chain, leaf first.
        cert: PathBuf,
        /// The leaf's private key (PKCS#8, PKCS#1 or SEC1).
        key: PathBuf,
    },
    /// A fresh self-signed certificate for these names (DNS names or IP addresses).
    SelfSigned(Vec<String>),
}

/// Why the node has no usable certificate.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read, or holds nothing of the kind asked for.
    #[error("cannot read {what} from {path}: {reason}")]
    Pem {
        /// "a certificate" or "a private key".
        what: &'static str,
        /// The file, as configured.
        path: String,
        /// What the reader said.
        reason: String,
    },
    /// The key is of a kind the cryptography does not sign with, or does not match.
    #[error("the private key cannot be used: {0}")]
    Key(rustls::Error),
    /// The self-signed certificate could not be made.
    #[error("cannot make a self-signed certificate: {0}")]
    SelfSigned(String),
    /// The TLS configuration was refused (no protocol version in common with the provider).
    #[error("bad TLS configuration: {0}")]
    Config(rustls::Error),
}

/// The certificate the node presents, swappable while it serves: each handshake reads the
/// current one.
#[derive(Debug)]
pub struct Certificates {
    source: TlsSource,
    current: RwLock<Arc<CertifiedKey>>,
}

impl Certificates {
    /// Loads (or makes) the certificate from `source`.
    pub fn load(source: TlsSource) -> Result<Self, TlsError> {
        let current = RwLock::new(Arc::new(certified_key(&source)?));
        Ok(Self { source, current })
    }

    /// Reads the files again; on failure the certificate in use stays. A self-signed
    /// certificate is kept (a new one would only break the pages that accepted it).
    pub fn reload(&self) -> Result<(), TlsError> {
        if let TlsSource::Files { .. } = self.source {
            *self.current.write() = Arc::new(certified_key(&self.source)?);
        }
        Ok(())
    }

    /// The SHA-256 fingerprint of the leaf certificate in use, as hex pairs joined by colons:
    /// what a person compares before accepting a self-signed certificate.
    pub fn fingerprint(&self) -> String {
        let current = self.current.read();
        let leaf = current.cert.first().map_or(&[][..], |der| der.as_ref());
        let pairs: Vec<String> = Sha256::digest(leaf)
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect();
        pairs.join(":")
    }

    /// An acceptor presenting these certificates, offering HTTP/2 and HTTP/1.1.
    pub fn acceptor(self: &Arc<Self>) -> Result<TlsAcceptor, TlsError> {
        let provider = Arc::new(aws_lc_rs::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![ALPN_H2.to_vec(), ALPN_HTTP1.to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().clone())
    }
}

fn certified_key(source: &TlsSource) -> Result<CertifiedKey, TlsError> {
    let (chain, key) = match source {
        TlsSource::Files { cert, key } => (read_chain(cert)?, read_key(key)?),
        TlsSource::SelfSigned(names) => self_signed(names)?,
    };
    let provider = aws_lc_rs::default_provider();
    CertifiedKey::from_der(chain, key, &provider).map_err(TlsError::Key)
}

fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem_error = |reason: String| TlsError::Pem {
        what: "a certificate",
        path: path.display().to_string(),
        reason,
    };
    let chain = CertificateDer::pem_file_iter(path)
        .map_err(|e| pem_error(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(e.to_string()))?;
    if chain.is_empty() {
        return Err(pem_error("no CERTIFICATE block".to_owned()));
    }
    Ok(chain)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| TlsError::Pem {
        what: "a private key",
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

fn self_signed(
    names: &[String],
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let made = rcgen::generate_simple_self_signed(names.to_vec())
        .map_err(|e| TlsError::SelfSigned(e.to_string()))?;
    let key = PrivateKeyDer::try_from(made.signing_key.serialize_der())
        .map_err(|e| TlsError::SelfSigned(e.to_owned()))?;
    Ok((vec![made.cert.der().clone()], key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        let made = rcgen::generate_simple_self_signed(vec![name.to_owned()]).expect("made");
        let cert = dir.join(format!("{name}.crt"));
        let key = dir.join(format!("{name}.key"));
        std::fs::write(&cert, made.cert.pem()).expect("written");
        std::fs::write(&key, made.signing_key.serialize_pem()).expect("written");
        (cert, key)
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("strata-tls-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("made");
        dir
    }

    #[test]
    fn a_reload_takes_the_new_files_and_a_bad_one_keeps_the_old() {
        let dir = temp_dir("reload");
        let (cert, key) = write_pair(&dir, "one.test");
        let certificates = Certificates::load(TlsSource::Files {
            cert: cert.clone(),
            key: key.clone(),
        })
        .expect("loaded");
        let first = certificates.fingerprint();
        let (cert2, key2) = write_pair(&dir, "two.test");
        std::fs::rename(&cert2, &cert).expect("moved");
        std::fs::rename(&key2, &key).expect("moved");
        certificates.reload().expect("reloaded");
        let second = certificates.fingerprint();
        assert_ne!(first, second, "the new certificate is presented");
        std::fs::write(&key, "not a key").expect("written");
        let error = certificates.reload().expect_err("a broken key");
        assert!(error.to_string().contains("private key"), "{error}");
        assert_eq!(certificates.fingerprint(), second, "the old one stays");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn missing_or_empty_files_say_what_was_wrong() {
        let dir = temp_dir("missing");
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "").expect("written");
        let no_file = Certificates::load(TlsSource::Files {
            cert: dir.join("absent.crt"),
            key: empty.clone(),
        })
        .expect_err("absent");
        assert!(no_file.to_string().contains("absent.crt"), "{no_file}");
        let no_block = Certificates::load(TlsSource::Files {
            cert: empty.clone(),
            key: empty,
        })
        .expect_err("empty");
        assert!(
            no_block.to_string().contains("no CERTIFICATE"),
            "{no_block}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_self_signed_certificate_offers_h2_first() {
        let certificates = Arc::new(
            Certificates::load(TlsSource::SelfSigned(vec!["localhost".to_owned()])).expect("made"),
        );
        assert_eq!(certificates.fingerprint().len(), 32 * 3 - 1);
        let acceptor = certificates.acceptor().expect("an acceptor");
        assert_eq!(acceptor.config().alpn_protocols[0], ALPN_H2);
    }
}
