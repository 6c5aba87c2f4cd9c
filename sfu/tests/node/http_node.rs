//! The `sfu serve` binary on free ports for the HTTP tests, and one request at a time to it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

pub const SDP: (&str, &str) = ("Content-Type", "application/sdp");

pub struct Node {
    pub child: Child,
    pub http: String,
    /// Held open so that what the node prints later finds its reader.
    _stdout: BufReader<ChildStdout>,
    /// The settings file [`node_with_config`] wrote, removed with the node.
    config_file: Option<PathBuf>,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(path) = &self.config_file {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Node {
    /// Starts the node on ports the kernel picks and learns its HTTP address from the line
    /// it prints. Ports picked here and handed over would race: between a probe releasing one
    /// and the node binding it, a node of a test running beside this one may take it, and this
    /// test would then talk to that node (and see it reset when its test ends).
    pub fn start(extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sfu"))
            .args(["serve", "--http", "127.0.0.1:0", "--udp", "127.0.0.1:0"])
            .args(["--log", "warn"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the sfu binary starts");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        // An HTTPS node prints its certificate's fingerprint first.
        let mut line = String::new();
        while !line.contains("Strata is serving") {
            line.clear();
            let read = stdout.read_line(&mut line).expect("the node's lines");
            assert!(read > 0, "the node ended before it served");
        }
        let http = line
            .split("://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("the node serves: {line:?}"))
            .to_owned();
        Self {
            child,
            http,
            _stdout: stdout,
            config_file: None,
        }
    }

    /// One HTTP/1.1 request; the status, the lowercased headers and the body.
    pub fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        request_to(&self.http, method, path, headers, body)
    }
}

/// One HTTP/1.1 request to the server at `http` (`host:port`).
pub fn request_to(
    http: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    request_over(
        TcpStream::connect(http).expect("connects"),
        http,
        method,
        path,
        headers,
        body,
    )
}

/// A connection to the server at `http` from another loopback address (`127.x.y.z`): another
/// client, as the node counts them.
pub fn connect_from(http: &str, source: [u8; 4]) -> TcpStream {
    let socket =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
    let from = std::net::SocketAddr::from((source, 0));
    socket.bind(&from.into()).expect("a loopback address");
    let to: std::net::SocketAddr = http.parse().expect("an address");
    socket.connect(&to.into()).expect("connects");
    socket.into()
}

/// One HTTP/1.1 request over `stream`, a connection to the server at `http`.
pub fn request_over(
    mut stream: TcpStream,
    http: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {http}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("sent");
    stream.write_all(body.as_bytes()).expect("sent");
    let mut raw = String::new();
    stream.read_to_string(&mut raw).expect("a reply");
    Reply::parse(&raw)
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn parse(raw: &str) -> Self {
        let (head, body) = raw.split_once("\r\n\r\n").expect("a head");
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .expect("a status line");
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_lowercase(), v.trim().to_owned()))
            .collect();
        Self {
            status,
            headers,
            body: body.to_owned(),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A node started with these settings as its TOML file.
pub fn node_with_config(toml: &str, extra: &[&str]) -> Node {
    static FILES: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "strata-test-{}-{}.toml",
        std::process::id(),
        FILES.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, toml).expect("a temporary file");
    let text = path.to_string_lossy().into_owned();
    let mut args = vec!["--config", text.as_str()];
    args.extend_from_slice(extra);
    let mut node = Node::start(&args);
    node.config_file = Some(path);
    node
}

/// One series' value in the `/metrics` of the server at `http`.
pub fn metric(http: &str, series: &str) -> Option<u64> {
    let metrics = request_to(http, "GET", "/metrics", &[], "");
    value_in(&metrics.body, series)
}

/// As [`metric`], asked from another loopback address (`127.x.y.z`): another client, with a
/// share of the node's HTTP connections of its own.
pub fn metric_from(http: &str, source: [u8; 4], series: &str) -> Option<u64> {
    let stream = connect_from(http, source);
    let metrics = request_over(stream, http, "GET", "/metrics", &[], "");
    value_in(&metrics.body, series)
}

fn value_in(metrics: &str, series: &str) -> Option<u64> {
    metrics.lines().find_map(|line| {
        let (name, value) = line.split_once(' ')?;
        (name == series).then(|| value.parse().ok())?
    })
}

/// Waits (15 s at most) until a series of the server at `http` has this value.
pub fn wait_for_metric(http: &str, series: &str, value: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while metric(http, series) != Some(value) {
        assert!(
            std::time::Instant::now() < deadline,
            "{series} never became {value}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A session opened on `node`: its resource.
pub fn open(node: &Node, path: &str, offer: &str) -> String {
    let reply = node.request("POST", path, &[SDP], offer);
    assert_eq!(reply.status, 201, "{path}: {}", reply.body);
    reply.header("location").expect("a resource").to_owned()
}
