//! Debian's coturn as a real TURN server for the tests: a shared secret (`use-auth-secret`),
//! UDP only, on loopback, relaying to loopback peers (the node, in the tests).

use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};

/// The shared secret the node mints credentials from.
pub const SECRET: &str = "north";
const REALM: &str = "strata.test";

/// A running turnserver, stopped when dropped.
pub struct Coturn {
    child: Child,
    /// Its UDP port on 127.0.0.1.
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

/// Starts turnserver on a free port; it answers once it has bound, which a client's first
/// requests may precede (they retry).
pub fn coturn() -> Coturn {
    let port = free_udp_port();
    let child = Command::new("turnserver")
        .args([
            "-n",
            "--listening-ip",
            "127.0.0.1",
            "--relay-ip",
            "127.0.0.1",
        ])
        .args(["--listening-port", &port.to_string()])
        .args(["--use-auth-secret", "--static-auth-secret", SECRET])
        .args(["--realm", REALM, "--allow-loopback-peers"])
        .args([
            "--no-tls",
            "--no-dtls",
            "--no-cli",
            "--no-tcp",
            "--log-file",
            "stdout",
        ])
        .args(["--min-port", "49160", "--max-port", "49200"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("turnserver runs (apt-get install coturn)");
    Coturn { child, port }
}
