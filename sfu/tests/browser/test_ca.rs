//! A certificate authority of the test's own: leaf certificates for the addresses of the
//! test's hosts (the node, the TURN server), a HOME whose NSS database trusts it (where
//! Chromium on Linux looks for locally trusted authorities), and a root store for the test's
//! own TLS client. Its files live in a directory removed on drop.

use std::net::{IpAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use sha2::{Digest, Sha256};

pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    dir: PathBuf,
}

/// A leaf certificate and its key, as PEM files.
pub struct Leaf {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Its SHA-256, to tell which certificate a server presented.
    pub sha256: Vec<u8>,
}

impl TestCa {
    /// A fresh authority, its files in a new temporary directory.
    pub fn new() -> TestCa {
        let dir = std::env::temp_dir().join(format!("strata-ca-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("make the CA's directory");
        let mut params = CertificateParams::new(Vec::new()).expect("CA parameters");
        params
            .distinguished_name
            .push(DnType::CommonName, "strata test CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("a CA key");
        let issuer = CertifiedIssuer::self_signed(params, key).expect("a CA certificate");
        std::fs::write(dir.join("ca.pem"), issuer.pem()).expect("write the CA certificate");
        TestCa { issuer, dir }
    }

    /// A server certificate for `ip` signed by this authority, written as `<name>.crt` and
    /// `<name>.key` (replacing files of that name by a rename, as a renewal would).
    pub fn issue(&self, name: &str, ip: IpAddr) -> Leaf {
        let mut params = CertificateParams::new(Vec::new()).expect("leaf parameters");
        params.distinguished_name.push(DnType::CommonName, name);
        params.subject_alt_names = vec![SanType::IpAddress(ip)];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().expect("a leaf key");
        let cert = params.signed_by(&key, &self.issuer).expect("a leaf");
        let (path, key_path) = (
            self.dir.join(format!("{name}.crt")),
            self.dir.join(format!("{name}.key")),
        );
        replace(&path, cert.pem().as_bytes());
        replace(&key_path, key.serialize_pem().as_bytes());
        Leaf {
            cert: path,
            key: key_path,
            sha256: Sha256::digest(cert.der()).to_vec(),
        }
    }

    /// A HOME for Chromium whose NSS database (`$HOME/.pki/nssdb`) trusts this authority to
    /// issue server certificates.
    pub fn trusting_home(&self) -> PathBuf {
        let home = self.dir.join("home");
        let db = home.join(".pki/nssdb");
        if !db.exists() {
            std::fs::create_dir_all(&db).expect("make the NSS database's directory");
            let db = format!("sql:{}", db.display());
            let ca = self.dir.join("ca.pem");
            certutil(&["-d", &db, "-N", "--empty-password"]);
            let ca = ca.to_str().expect("a UTF-8 path");
            certutil(&["-d", &db, "-A", "-t", "C,,", "-n", "strata-test", "-i", ca]);
        }
        home
    }

    /// The SHA-256 of the certificate the server at `addr` presents to a new connection that
    /// checks it against this authority for `ip` (and fails the test if it does not hold).
    pub fn presented(&self, addr: &str, ip: IpAddr) -> Vec<u8> {
        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from(self.issuer.der().to_vec()))
            .expect("the CA as a root");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = ServerName::IpAddress(ip.into());
        let connection = ClientConnection::new(Arc::new(config), name).expect("a client");
        let tcp = TcpStream::connect(addr).expect("connect to the TLS server");
        let mut tls = StreamOwned::new(connection, tcp);
        while tls.conn.is_handshaking() {
            tls.conn
                .complete_io(&mut tls.sock)
                .expect("a verified handshake");
        }
        let leaf = &tls.conn.peer_certificates().expect("presented")[0];
        Sha256::digest(leaf).to_vec()
    }
}

impl Drop for TestCa {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Writes `path` whole by a rename, so a reader sees the old file or the new one.
fn replace(path: &Path, bytes: &[u8]) {
    let fresh = path.with_extension("new");
    std::fs::write(&fresh, bytes).expect("write a certificate file");
    std::fs::rename(&fresh, path).expect("move a certificate file in place");
}

fn certutil(args: &[&str]) {
    let out = Command::new("certutil")
        .args(args)
        .output()
        .expect("run certutil (apt-get install libnss3-tools)");
    assert!(
        out.status.success(),
        "certutil {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
