//! A cluster on hosts of its own: a redis-server and three `sfu serve` nodes, each in a network
//! namespace the test made (`Netns`: 10.77.N.2 behind a veth), the test's own namespace
//! routing between them. Browsers get hosts of their own the same way. Nothing here reaches
//! an address outside these namespaces.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::chromium::Chromium;
use crate::netns::{self, Netns};
use crate::node::Node;
use crate::redis::Redis;

/// How many nodes the cluster has; they are numbered from 1 as the issue names them.
pub const NODES: usize = 3;
/// Each node's HTTP and media ports on its own host, where nothing else listens.
const PORTS: (u16, u16) = (8080, 50_000);
/// The secret the nodes share: it keys the media relay.
const SECRET: &str = "a secret of the test cluster";
/// Redis's port on its host.
const REDIS_PORT: u16 = 6379;
/// A node sees the others within a heartbeat or two; far above that.
const SEES_THE_OTHERS: Duration = Duration::from_secs(10);

/// Fields in the order they are dropped: the nodes before Redis, the programs before their
/// hosts.
pub struct Cluster {
    nodes: Vec<Node>,
    /// Kept running for the cluster's life.
    _redis: Redis,
    hosts: Vec<Netns>,
    redis_host: Netns,
}

/// An HTTP answer: its status, its head's lines and its body.
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Answer {
    /// A header's value (its name in lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then_some(value.trim())
        })
    }
}

impl Cluster {
    /// Redis and three nodes on hosts of their own, each node with the relay's secret and
    /// placing sessions by load alone (`prefer_home_below_percent = 0`: a viewer is served
    /// where it asks, and the room's publisher relayed to it), node N taking at most
    /// `sessions[N - 1]` sessions when given. Returns once every node sees the two others.
    /// `how` says how to run the test if this is not a private network namespace.
    pub fn start(sessions: [Option<u32>; NODES], how: &str) -> Cluster {
        netns::require_private_network(how);
        // The test's namespace is the router between the hosts; it is a private one (above),
        // so this touches no other.
        std::fs::write("/proc/sys/net/ipv4/ip_forward", "1").expect("forward between hosts");
        let redis_host = Netns::create();
        let redis = Redis::start_within(&redis_host.enter(), &redis_host.address().to_string());
        let hosts: Vec<Netns> = (0..NODES).map(|_| Netns::create()).collect();
        let nodes = hosts
            .iter()
            .zip(sessions)
            .enumerate()
            .map(|(i, (host, limit))| {
                let mut config = format!(
                    "redis = \"{}\"\n[cluster]\nnode = \"node-{}\"\nsecret = \"{SECRET}\"\n\
                     prefer_home_below_percent = 0\n",
                    redis.url,
                    i + 1
                );
                if let Some(limit) = limit {
                    config.push_str(&format!("[limits]\nsessions = {limit}\n"));
                }
                let ip = host.address().to_string();
                Node::start_within(&host.enter(), &ip, PORTS, Some(&config), &[])
            })
            .collect();
        let cluster = Cluster {
            nodes,
            _redis: redis,
            hosts,
            redis_host,
        };
        for n in 1..=NODES {
            cluster.wait_metric(
                n,
                "strata_cluster_serving_nodes",
                (NODES - 1) as f64,
                SEES_THE_OTHERS,
            );
        }
        cluster
    }

    fn node(&self, n: usize) -> &Node {
        &self.nodes[n - 1]
    }

    /// The URL of `path` on node `n`.
    pub fn url(&self, n: usize, path: &str) -> String {
        self.node(n).url(path)
    }

    /// Node `n`'s `host:port`, as a `Location` names it.
    pub fn authority(&self, n: usize) -> &str {
        &self.node(n).http
    }

    /// A browser on a host of its own; `camera_for` names the node whose page may use the
    /// camera (an insecure origin otherwise: the node's address is not loopback).
    pub fn browser(&self, host: &Netns, camera_for: Option<usize>) -> Chromium {
        self.browser_with(host, camera_for, &[])
    }

    /// [`browser`](Self::browser) with `extra` flags.
    pub fn browser_with(
        &self,
        host: &Netns,
        camera_for: Option<usize>,
        extra: &[String],
    ) -> Chromium {
        let mut flags: Vec<String> = camera_for
            .map(|n| {
                let origin = self.url(n, "");
                format!("--unsafely-treat-insecure-origin-as-secure={origin}")
            })
            .into_iter()
            .collect();
        flags.extend_from_slice(extra);
        Chromium::launch_within(&host.enter(), &flags)
    }

    /// A request to node `n` from the test's namespace.
    pub fn request(
        &self,
        n: usize,
        method: &str,
        path: &str,
        headers: &[&str],
        body: &str,
    ) -> Answer {
        request(&self.node(n).http, method, path, headers, body)
    }

    /// A series of node `n`'s `/metrics`, with its labels as written; `None` when absent.
    pub fn metric(&self, n: usize, series: &str) -> Option<f64> {
        let text = self.request(n, "GET", "/metrics", &[], "").body;
        text.lines().find_map(|l| {
            l.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
    }

    /// Waits until node `n`'s `series` reads `value`; fails after `within`. Returns how long
    /// it took.
    pub fn wait_metric(&self, n: usize, series: &str, value: f64, within: Duration) -> Duration {
        let started = Instant::now();
        loop {
            let now = self.metric(n, series);
            if now == Some(value) {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < within,
                "node {n}'s {series} is {now:?}, not {value}, after {within:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGKILL to node `n`: it dies at once, as its machine would.
    pub fn kill(&mut self, n: usize) {
        self.nodes[n - 1].kill();
    }

    /// Node `n` cut from Redis: its host drops every segment to and from Redis's port.
    pub fn cut_from_redis(&self, n: usize) {
        self.hosts[n - 1].cut_tcp_to(self.redis_host.address(), REDIS_PORT);
    }

    /// Node `n` reaches Redis again.
    pub fn heal(&self, n: usize) {
        self.hosts[n - 1].heal();
    }
}

/// One HTTP/1.1 exchange with `http` (`host:port`) on a connection of its own.
fn request(http: &str, method: &str, path: &str, headers: &[&str], body: &str) -> Answer {
    let mut stream = TcpStream::connect(http).unwrap_or_else(|e| panic!("connect to {http}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a read timeout");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {http}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for header in headers {
        head.push_str(header);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body.as_bytes()))
        .unwrap_or_else(|e| panic!("{method} {path} to {http}: {e}"));
    let mut text = String::new();
    stream
        .read_to_string(&mut text)
        .unwrap_or_else(|e| panic!("the answer to {method} {path} from {http}: {e}"));
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status from {http}: {head}"));
    Answer {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}
