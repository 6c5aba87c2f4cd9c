//! HTTPS on the `sfu serve` binary: HTTP/1.1 and HTTP/2 by ALPN, a certificate from files that a
//! SIGHUP replaces without dropping connections or sessions, a self-signed one, and the client
//! behind a trusted reverse proxy.

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme, StreamOwned};
use sha2::{Digest, Sha256};

use crate::http_node::{node_with_config, Node, Reply, SDP};

const AV1_OFFER: &str = include_str!("../../src/node/sdp/fixtures/publisher_av1.sdp");

/// Accepts any certificate: the tests compare fingerprints instead, as a person accepting a
/// self-signed certificate would.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn client_config(alpn: &[u8]) -> Arc<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    Arc::new(config)
}

type Tls = StreamOwned<ClientConnection, TcpStream>;

/// A finished TLS handshake asking for `alpn`.
fn connect(node: &Node, alpn: &[u8]) -> Tls {
    let name = ServerName::try_from("localhost").expect("a name");
    let connection = ClientConnection::new(client_config(alpn), name).expect("a client");
    let mut tls = StreamOwned::new(
        connection,
        TcpStream::connect(&node.http).expect("connects"),
    );
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock).expect("a handshake");
    }
    tls
}

/// The SHA-256 of the certificate the node presented, as hex pairs with colons.
fn fingerprint(tls: &Tls) -> String {
    let leaf = &tls.conn.peer_certificates().expect("presented")[0];
    let pairs: Vec<String> = Sha256::digest(leaf)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    pairs.join(":")
}

/// One HTTP/1.1 request on a kept-alive TLS connection (the reply read by its length).
fn request(tls: &mut Tls, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    use std::io::{BufRead, BufReader, Read, Write};
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    tls.write_all(head.as_bytes()).expect("sent");
    tls.write_all(body.as_bytes()).expect("sent");
    let mut reader = BufReader::new(tls);
    let mut raw = String::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("a head line");
        raw.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let length = raw
        .lines()
        .find_map(|l| {
            l.to_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().to_owned())
        })
        .and_then(|v| v.parse::<usize>().ok())
        .expect("a length");
    let mut body = vec![0; length];
    reader.read_exact(&mut body).expect("the body");
    raw.push_str(&String::from_utf8_lossy(&body));
    Reply::parse(&raw)
}

fn write_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let made = rcgen::generate_simple_self_signed(vec![name.to_owned()]).expect("made");
    let cert = dir.join(format!("{name}.crt"));
    let key = dir.join(format!("{name}.key"));
    std::fs::write(&cert, made.cert.pem()).expect("written");
    std::fs::write(&key, made.signing_key.serialize_pem()).expect("written");
    (cert, key)
}

#[test]
fn https_over_http1_and_http2_with_a_self_signed_certificate() {
    let node = Node::start(&["--tls-self-signed"]);
    let mut http1 = connect(&node, b"http/1.1");
    assert_eq!(http1.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
    let page = request(&mut http1, "GET", "/", &[], "");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("<html"), "the demo page");
    // Twelve requests at once on one HTTP/2 connection: more than the six connections a
    // browser opens to a host over HTTP/1.1.
    let (alpn, statuses) = http2_gets(&node, 12);
    assert_eq!(alpn.as_deref(), Some(&b"h2"[..]));
    assert_eq!(statuses, vec![200; 12]);
}

type Http2 = hyper::client::conn::http2::SendRequest<Empty<Bytes>>;

/// An HTTP/2 connection over TLS to the node, pinging it every `ping` if asked: its
/// requests, the protocol ALPN chose, and the connection's task (done when it closes).
async fn http2_connect(
    node: &Node,
    ping: Option<Duration>,
) -> (Http2, Option<Vec<u8>>, tokio::task::JoinHandle<()>) {
    let tcp = tokio::net::TcpStream::connect(&node.http)
        .await
        .expect("connects");
    let name = ServerName::try_from("localhost").expect("a name");
    let tls = tokio_rustls::TlsConnector::from(client_config(b"h2"))
        .connect(name, tcp)
        .await
        .expect("a handshake");
    let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    let io = hyper_util::rt::TokioIo::new(tls);
    let mut builder =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
    builder.timer(hyper_util::rt::TokioTimer::new());
    if let Some(ping) = ping {
        builder
            .keep_alive_interval(ping)
            .keep_alive_while_idle(true);
    }
    let (sender, connection) = builder.handshake(io).await.expect("an HTTP/2 connection");
    let task = tokio::spawn(async move {
        let _ = connection.await;
    });
    (sender, alpn, task)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// `count` concurrent GET /metrics on one HTTP/2 connection: the protocol ALPN chose, and
/// their statuses.
fn http2_gets(node: &Node, count: usize) -> (Option<Vec<u8>>, Vec<u16>) {
    runtime().block_on(async move {
        let (sender, alpn, _connection) = http2_connect(node, None).await;
        let mut requests = tokio::task::JoinSet::new();
        for _ in 0..count {
            let mut sender = sender.clone();
            requests.spawn(async move {
                let request = hyper::Request::get("https://localhost/metrics")
                    .body(Empty::<Bytes>::new())
                    .expect("a request");
                let response = sender.send_request(request).await.expect("a response");
                let status = response.status().as_u16();
                response.into_body().collect().await.expect("a body");
                status
            });
        }
        (alpn, requests.join_all().await)
    })
}

/// An HTTP/2 connection with no request open is closed at the idle timeout, as an HTTP/1.1
/// one is, so idle connections cannot hold every connection slot.
#[test]
fn an_idle_http2_connection_is_closed_at_the_idle_timeout() {
    let node = node_with_config("tls_self_signed = true\nhttp_idle_timeout_ms = 300\n", &[]);
    runtime().block_on(async {
        let (_sender, _, connection) = http2_connect(&node, None).await;
        let ended = tokio::time::timeout(Duration::from_secs(5), connection).await;
        assert!(ended.is_ok(), "the node closed the idle connection");
    });
}

/// A client's pings are bytes, which would keep the idle timeout from firing: an HTTP/2
/// connection pinging every 100 ms is closed once it has had no stream open for the idle
/// timeout, and kept while a stream (an event stream) is open on it.
#[test]
fn a_pinging_http2_connection_is_kept_only_while_a_stream_is_open() {
    let node = node_with_config("tls_self_signed = true\nhttp_idle_timeout_ms = 300\n", &[]);
    let mut tls = connect(&node, b"http/1.1");
    let alice = request(
        &mut tls,
        "POST",
        "/rooms/call?name=alice",
        &[SDP],
        AV1_OFFER,
    );
    assert_eq!(alice.status, 201, "{}", alice.body);
    let events = format!(
        "https://localhost{}/events",
        alice.header("location").expect("a resource")
    );
    let ping = Some(Duration::from_millis(100));
    runtime().block_on(async {
        let (_idle, _, pinging) = http2_connect(&node, ping).await;
        let (mut sender, _, streaming) = http2_connect(&node, ping).await;
        let request = hyper::Request::get(events)
            .body(Empty::<Bytes>::new())
            .expect("a request");
        let response = sender.send_request(request).await.expect("a response");
        assert_eq!(response.status(), 200);
        let ended = tokio::time::timeout(Duration::from_secs(5), pinging).await;
        assert!(
            ended.is_ok(),
            "the node closed the connection with no stream"
        );
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        assert!(
            !streaming.is_finished(),
            "the node kept the connection with a stream open, five idle timeouts on"
        );
        drop(response);
        let ended = tokio::time::timeout(Duration::from_secs(5), streaming).await;
        assert!(ended.is_ok(), "and closed it once the stream was reset");
    });
}

/// A TLS handshake trickled a byte at a time (each byte would keep an idle connection) is
/// given the header timeout in all, so such clients cannot hold every connection slot.
#[test]
fn a_trickled_tls_handshake_is_closed_at_the_header_timeout() {
    let node = node_with_config(
        "tls_self_signed = true\nhttp_header_timeout_ms = 500\nhttp_idle_timeout_ms = 1000\n",
        &[],
    );
    let mut stream = TcpStream::connect(&node.http).expect("connects");
    // A handshake record of 16 KiB announced, then its bytes one by one.
    let mut written = stream.write(&[0x16, 0x03, 0x01, 0x40, 0x00]).is_ok();
    let start = Instant::now();
    while written && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(100));
        written = stream.write(&[0x01]).is_ok_and(|n| n == 1);
    }
    assert!(
        !written,
        "the node closed the handshake it was given a byte at a time"
    );
}

#[test]
fn sighup_presents_the_new_certificate_and_keeps_connections_and_sessions() {
    let dir = std::env::temp_dir().join(format!("strata-https-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let (cert, key) = write_pair(&dir, "first.test");
    let toml = format!(
        "tls_cert = {:?}\ntls_key = {:?}\n",
        cert.display().to_string(),
        key.display().to_string()
    );
    let node = node_with_config(&toml, &[]);
    let mut kept = connect(&node, b"http/1.1");
    let before = fingerprint(&kept);
    let published = request(&mut kept, "POST", "/whip/demo", &[SDP], AV1_OFFER);
    assert_eq!(published.status, 201, "{}", published.body);
    let resource = published.header("location").expect("a resource").to_owned();

    let (cert2, key2) = write_pair(&dir, "second.test");
    std::fs::rename(cert2, &cert).expect("replaced");
    std::fs::rename(key2, &key).expect("replaced");
    let hup = Command::new("kill")
        .args(["-HUP", &node.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(hup.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let after = loop {
        let now = fingerprint(&connect(&node, b"http/1.1"));
        if now != before {
            break now;
        }
        assert!(Instant::now() < deadline, "the new certificate within 10 s");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_ne!(after, before);
    // The connection from before the reload still serves, and the session is still there.
    let gone = request(&mut kept, "DELETE", &resource, &[], "");
    assert_eq!(
        gone.status, 200,
        "the session outlived the reload: {}",
        gone.body
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_trusted_proxy_names_the_client_for_per_client_limits() {
    let limits = "[limits]\nsessions_per_client = 1\n";
    let behind = node_with_config(&format!("trusted_proxies = [\"127.0.0.1\"]\n{limits}"), &[]);
    let from = |ip| [SDP, ("X-Forwarded-For", ip)];
    let publish = |node: &Node, ip| {
        node.request("POST", "/whip/demo", &from(ip), AV1_OFFER)
            .status
    };
    assert_eq!(publish(&behind, "198.51.100.1"), 201);
    assert_eq!(
        publish(&behind, "198.51.100.2"),
        201,
        "another client behind the proxy"
    );
    let refused = publish(&behind, "198.51.100.1");
    assert!(
        refused >= 400,
        "the first client is at its limit: {refused}"
    );

    // From an address not configured as a proxy the header is anyone's to write: ignored.
    let open = node_with_config(limits, &[]);
    assert_eq!(publish(&open, "198.51.100.1"), 201);
    let refused = publish(&open, "198.51.100.2");
    assert!(refused >= 400, "one client, whatever it claims: {refused}");
}
