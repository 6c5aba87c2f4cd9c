//! The node under test, in this process: on its own runtime, through the same `serve` the
//! `sfu serve` command runs (only the flag parsing is left out). A test of another package
//! cannot name the `sfu` binary cargo builds, and a binary found on disk could be stale.
//! It listens on loopback: UDP, ICE-TCP on the UDP port's number, HTTP.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use benches::client;
use sfu::node::config::NodeConfig;
use sfu::node::limits::Limits;

/// The node binds its sockets and answers in well under a second; this is for a loaded
/// machine.
const STARTUP: Duration = Duration::from_secs(20);

/// The node's HTTP address; its runtime stops (and its sockets close) on drop.
pub struct Node {
    pub http: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("bound").port()
}

fn free_udp_port() -> u16 {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("a free port");
    socket.local_addr().expect("bound").port()
}

impl Node {
    /// A node with `workers` media workers and `limits`, once it answers.
    pub fn start(workers: usize, limits: Limits) -> Self {
        Self::start_with(NodeConfig {
            workers,
            limits,
            ..NodeConfig::default()
        })
    }

    /// A node with the settings of `settings` but its addresses, once it answers.
    pub fn start_with(settings: NodeConfig) -> Self {
        // The node's log, with RUST_LOG set (e.g. `sfu=debug`); the first test to
        // start a node installs it.
        let filter = tracing_subscriber::EnvFilter::from_default_env();
        let log = tracing_subscriber::fmt().with_env_filter(filter);
        let _ = log.with_test_writer().try_init();
        // One node starts at a time in this process, from picking its ports until it
        // answers: a port picked here is free only until someone binds it, and the nodes
        // of the tests running beside this one would otherwise race for it.
        static STARTING: Mutex<()> = Mutex::new(());
        let _one = STARTING.lock().unwrap_or_else(PoisonError::into_inner);
        let loopback = Ipv4Addr::LOCALHOST.into();
        let config = NodeConfig {
            http: SocketAddr::new(loopback, free_port()),
            udp: SocketAddr::new(loopback, free_udp_port()),
            ..settings
        };
        let http = config.http;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.spawn(async move {
            if let Err(e) = sfu::node::server::serve(config).await {
                eprintln!("the node stopped: {e}");
            }
        });
        // An answer comes once all of its sockets are bound.
        let deadline = Instant::now() + STARTUP;
        while client::http::request(http, "GET", "/metrics", &[], "").is_err() {
            assert!(Instant::now() < deadline, "the node answers");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self {
            http,
            runtime: Some(runtime),
        }
    }

    /// `/metrics`, for a failure's message.
    pub fn metrics(&self) -> String {
        let reply = client::http::request(self.http, "GET", "/metrics", &[], "").expect("metrics");
        let lines = reply
            .body
            .lines()
            .filter(|l| !l.starts_with('#') && !l.ends_with(" 0"));
        lines.collect::<Vec<_>>().join("\n")
    }
}
