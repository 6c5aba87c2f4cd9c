//! Debian's coturn as a real TURN server for the tests: a shared secret (`use-auth-secret`),
//! and either UDP on loopback relaying to loopback peers, or TLS over TCP on port 443 of a test
//! host's address with a certificate the test made, as a server for strict networks runs.

use std::net::{IpAddr, TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The shared secret the node mints credentials from.
pub const SECRET: &str = "north";
const REALM: &str = "strata.test";
/// Where TURN over TLS listens on networks that let nothing but HTTPS out.
pub const TLS_PORT: u16 = 443;

/// A running turnserver, stopped when dropped.
pub struct Coturn {
    child: Child,
    /// Its listening port: UDP on 127.0.0.1, or [`TLS_PORT`].
    pub port: u16,
}

impl Drop for Coturn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_udp_port() -> u16 {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("a port");
    socket.local_addr().expect("an address").port()
}

/// Starts turnserver on a free UDP port of loopback; it answers once it has bound, which a
/// client's first requests may precede (they retry).
pub fn coturn() -> Coturn {
    let port = free_udp_port();
    let child = spawn(&[
        "--listening-ip",
        "127.0.0.1",
        "--relay-ip",
        "127.0.0.1",
        "--listening-port",
        &port.to_string(),
        "--allow-loopback-peers",
        "--no-tls",
        "--no-tcp",
    ]);
    Coturn { child, port }
}

/// Starts turnserver with TLS over TCP alone, on port 443 of `ip` (relaying from `ip` too),
/// presenting `cert` (PEM chain) with `key`; returns once it accepts connections.
pub fn coturn_tls(ip: IpAddr, cert: &Path, key: &Path) -> Coturn {
    let (ip_text, cert, key) = (ip.to_string(), path_text(cert), path_text(key));
    let mut child = spawn(&[
        "--listening-ip",
        &ip_text,
        "--relay-ip",
        &ip_text,
        "--tls-listening-port",
        &TLS_PORT.to_string(),
        "--cert",
        cert,
        "--pkey",
        key,
        "--no-udp",
        "--no-tcp",
    ]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect((ip, TLS_PORT)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("turnserver exited before listening: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "turnserver never listened on {ip}:443"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Coturn {
        child,
        port: TLS_PORT,
    }
}

fn path_text(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// turnserver with no configuration file, the shared secret, and `listening` (where it listens
/// and relays from, and over what).
fn spawn(listening: &[&str]) -> Child {
    Command::new("turnserver")
        .arg("-n")
        .args(listening)
        .args(["--use-auth-secret", "--static-auth-secret", SECRET])
        .args(["--realm", REALM])
        .args(["--no-dtls", "--no-cli", "--log-file", "stdout"])
        .args(["--min-port", "49160", "--max-port", "49200"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("turnserver runs (apt-get install coturn)")
}
