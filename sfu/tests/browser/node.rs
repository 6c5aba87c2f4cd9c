//! The node under test: `sfu serve` on free loopback ports, killed on drop. Its log is kept in
//! a file and printed when a test fails, since that is when it is wanted. `STRATA_LOG` sets
//! its filter (say `info,dtls=error,sfu=debug` for allocations and keyframe requests) and
//! `STRATA_NODE_LOG=path` keeps the whole log of a run.

use std::net::{TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The node's own events; the DTLS crate warns once per unknown extension of every browser hello.
const LOG_FILTER: &str = "info,dtls=error";

pub struct Node {
    child: Child,
    log: PathBuf,
    config_file: Option<PathBuf>,
    pub http: String,
}

fn free_tcp_port(ip: &str) -> u16 {
    let listener = TcpListener::bind((ip, 0)).expect("bind a free TCP port");
    listener.local_addr().expect("local address").port()
}

fn free_udp_port(ip: &str) -> u16 {
    let socket = UdpSocket::bind((ip, 0)).expect("bind a free UDP port");
    socket.local_addr().expect("local address").port()
}

impl Node {
    /// Starts the node with `args` after the addresses (tokens, secrets) and waits until its
    /// HTTP port accepts connections, which is its readiness contract.
    pub fn start(args: &[&str]) -> Node {
        Node::start_on("127.0.0.1", None, args)
    }

    /// Starts the node serving and announcing `ip` (a local address other than loopback, for
    /// browsers in other network namespaces), with `config` as its TOML file when given.
    pub fn start_on(ip: &str, config: Option<&str>, args: &[&str]) -> Node {
        Node::start_at(ip, free_tcp_port(ip), config, args)
    }

    /// As [`start_on`](Self::start_on), its HTTP side on `http_port`.
    pub fn start_at(ip: &str, http_port: u16, config: Option<&str>, args: &[&str]) -> Node {
        let udp_port = free_udp_port(ip);
        Node::start_within(&[], ip, (http_port, udp_port), config, args)
    }

    /// Starts the node through `prefix` (`nsenter -t PID -n`: inside a host's network
    /// namespace of its own; nothing for here), serving and announcing `ip` on these HTTP and
    /// UDP ports, with `config` as its TOML file when given.
    pub fn start_within(
        prefix: &[String],
        ip: &str,
        (http_port, udp_port): (u16, u16),
        config: Option<&str>,
        args: &[&str],
    ) -> Node {
        let http = format!("{ip}:{http_port}");
        let udp = format!("{ip}:{udp_port}");
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let stem = std::env::temp_dir().join(format!(
            "strata-node-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        let log = stem.with_extension("log");
        let file = std::fs::File::create(&log).expect("create the node's log file");
        // `nsenter` without a PID namespace to enter executes the node in its own place, so
        // the child is the node itself: a kill reaches it.
        let mut command = match prefix.split_first() {
            Some((program, rest)) => {
                let mut command = Command::new(program);
                command.args(rest).arg(env!("CARGO_BIN_EXE_sfu"));
                command
            }
            None => Command::new(env!("CARGO_BIN_EXE_sfu")),
        };
        command.args(["serve", "--http", &http, "--udp", &udp]);
        if ip != "127.0.0.1" {
            command.args(["--public-ip", ip]);
        }
        let config_file = config.map(|text| {
            let path = stem.with_extension("toml");
            std::fs::write(&path, text).expect("write the node's configuration");
            command.arg("--config").arg(&path);
            path
        });
        let child = command
            .args(args)
            .env(
                "STRATA_LOG",
                std::env::var("STRATA_LOG").unwrap_or_else(|_| LOG_FILTER.into()),
            )
            // Plain text: the log goes to a file and is printed into the test output.
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start the node");
        let mut node = Node {
            child,
            log,
            config_file,
            http,
        };
        node.wait_ready();
        node
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(&self.http).is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "the node exited before serving: {status}\n{}",
                    self.log_text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "the node never listened on {}",
                self.http
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.http)
    }

    /// The URL of `path` on a node serving HTTPS (`tls_cert` in its configuration).
    pub fn https_url(&self, path: &str) -> String {
        format!("https://{}{path}", self.http)
    }

    /// SIGHUP: the node reads its certificate files again.
    pub fn hang_up(&self) {
        let status = Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "SIGHUP to the node");
    }

    /// SIGKILL: the node dies at once, as its machine would, leaving nothing behind it.
    pub fn kill(&mut self) {
        self.child.kill().expect("kill the node");
        let _ = self.child.wait();
    }

    /// Everything the node has logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let text = self.log_text();
            let tail: Vec<&str> = text.lines().rev().take(80).collect();
            eprintln!("--- the node's last log lines ---");
            tail.iter().rev().for_each(|line| eprintln!("{line}"));
        }
        // `STRATA_NODE_LOG=path` keeps the whole log of a run, passed or failed, to read later.
        if let Some(keep) = std::env::var_os("STRATA_NODE_LOG") {
            let _ = std::fs::copy(&self.log, keep);
        }
        let _ = std::fs::remove_file(&self.log);
        if let Some(path) = &self.config_file {
            let _ = std::fs::remove_file(path);
        }
    }
}
