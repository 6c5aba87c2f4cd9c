//! Placement over HTTP: nodes running in this process on one in-memory store answer the
//! requests that open sessions with `201` (here), `307` (to another node, the same path) or
//! `503` with `Retry-After` (no node can take it), as their load, the room's home and their
//! link to the store say.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sfu::node::cluster::memory::{Link, MemoryStore};
use sfu::node::config::NodeConfig;
use sfu::node::server::serve_with;
use tokio::net::TcpListener;

use crate::http_node::{metric, request_to, wait_for_metric, Reply, SDP};

const PUBLISHER: &str = include_str!("../../src/node/sdp/fixtures/publisher_av1.sdp");
const VIEWER: &str = include_str!("../../src/node/sdp/fixtures/viewer_recvonly.sdp");

/// A node served by its own runtime in this process, stopped when dropped.
pub struct InProcess {
    pub http: String,
    pub store: Arc<MemoryStore>,
    _runtime: tokio::runtime::Runtime,
}

impl InProcess {
    /// A node of the cluster of `shared` taking `capacity` sessions, beating every 100 ms
    /// with a lease of 1.5 s (long beside a beat, even on a busy machine).
    pub fn start(shared: &MemoryStore, capacity: usize) -> Self {
        Self::start_with(shared, capacity, &[])
    }

    /// The same, taking only these bearer tokens.
    fn start_with(shared: &MemoryStore, capacity: usize, tokens: &[&str]) -> Self {
        Self::start_tuned(shared, capacity, tokens, |_| {})
    }

    /// The same, with `tune` applied to its settings last.
    pub fn start_tuned(
        shared: &MemoryStore,
        capacity: usize,
        tokens: &[&str],
        tune: impl FnOnce(&mut NodeConfig),
    ) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let listener = runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("a port");
        let http = listener.local_addr().expect("bound").to_string();
        let mut config = NodeConfig {
            udp: "127.0.0.1:0".parse().expect("an address"),
            workers: 1,
            tokens: tokens.iter().map(|t| (*t).to_owned()).collect(),
            ..NodeConfig::default()
        };
        config.limits.sessions = capacity;
        config.cluster.heartbeat_ms = 100;
        config.cluster.lease_ms = 1_500;
        config.cluster.url = Some(format!("http://{http}"));
        tune(&mut config);
        let store = Arc::new(shared.connection());
        runtime.spawn(serve_with(config, listener, Some(store.clone())));
        Self {
            http,
            store,
            _runtime: runtime,
        }
    }

    pub fn post(&self, path: &str, offer: &str) -> Reply {
        request_to(&self.http, "POST", path, &[SDP], offer)
    }

    pub fn metric(&self, series: &str) -> Option<u64> {
        metric(&self.http, series)
    }

    /// Waits until the node is registered and sees `others` other nodes taking sessions.
    pub fn wait_until_attached(&self, others: u64) {
        self.wait_for("strata_cluster_attached", 1);
        self.wait_for("strata_cluster_serving_nodes", others);
    }

    pub fn wait_for(&self, series: &str, value: u64) {
        wait_for_metric(&self.http, series, value);
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.http)
    }
}

#[test]
fn a_full_node_redirects_to_one_with_room_and_503_when_none_has() {
    let store = MemoryStore::new();
    let (a, b) = (InProcess::start(&store, 1), InProcess::start(&store, 1));
    a.wait_until_attached(1);
    b.wait_until_attached(1);
    assert_eq!(a.post("/whip/one", PUBLISHER).status, 201);
    // Once a's heartbeat has measured its session, b sees it full (and a knows it is).
    b.wait_for("strata_cluster_serving_nodes", 0);
    let moved = a.post("/whip/two?name=cam", PUBLISHER);
    assert_eq!(moved.status, 307, "a is full: {}", moved.body);
    let location = moved.header("location").expect("a Location");
    assert_eq!(
        location,
        b.url("/whip/two?name=cam"),
        "b, the same path and query"
    );
    assert_eq!(b.post("/whip/two?name=cam", PUBLISHER).status, 201);
    a.wait_for("strata_cluster_serving_nodes", 0);
    let refused = a.post("/whip/three", PUBLISHER);
    assert_eq!(refused.status, 503, "both are full");
    assert_eq!(refused.header("retry-after"), Some("5"));
    assert_eq!(
        a.metric("strata_cluster_placements_total{reason=\"redirected\"}"),
        Some(1)
    );
    assert_eq!(
        a.metric("strata_cluster_placements_total{reason=\"unavailable\"}"),
        Some(1)
    );
}

#[test]
fn a_new_session_goes_to_the_rooms_home() {
    let store = MemoryStore::new();
    let (a, b) = (InProcess::start(&store, 10), InProcess::start(&store, 10));
    a.wait_until_attached(1);
    b.wait_until_attached(1);
    assert_eq!(
        b.post("/whip/live", PUBLISHER).status,
        201,
        "b is home of live"
    );
    let viewer = a.post("/whep/live?spatial=1", VIEWER);
    assert_eq!(viewer.status, 307);
    assert_eq!(
        viewer.header("location"),
        Some(b.url("/whep/live?spatial=1").as_str())
    );
    assert_eq!(
        a.post("/whep/elsewhere", VIEWER).status,
        201,
        "another room stays"
    );
    let other = request_to(&a.http, "GET", "/whip/live", &[], "");
    assert_ne!(
        other.status, 307,
        "only requests that open a session are placed"
    );
}

#[test]
fn a_node_cut_off_from_the_store_refuses_then_returns_with_a_new_epoch() {
    let store = MemoryStore::new();
    let (a, b) = (InProcess::start(&store, 10), InProcess::start(&store, 10));
    a.wait_until_attached(1);
    b.wait_until_attached(1);
    assert_eq!(a.metric("strata_cluster_epoch"), Some(1));
    a.store.set_link(Link::Down);
    let refused = a.post("/whip/cut", PUBLISHER);
    assert_eq!(refused.status, 503, "a new session needs the store");
    assert!(refused.header("retry-after").is_some());
    a.wait_for("strata_cluster_attached", 0);
    assert_eq!(a.post("/whip/cut", PUBLISHER).status, 503);
    a.store.set_link(Link::Up);
    a.wait_until_attached(1);
    assert_eq!(
        a.metric("strata_cluster_epoch"),
        Some(2),
        "a new boot epoch"
    );
    assert_eq!(a.post("/whip/cut", PUBLISHER).status, 201);
}

#[test]
fn a_request_is_authorized_before_it_is_placed() {
    let store = MemoryStore::new();
    let a = InProcess::start_with(&store, 0, &["secret"]);
    let b = InProcess::start(&store, 10);
    b.wait_until_attached(0);
    let anonymous = a.post("/whip/room", PUBLISHER);
    assert_eq!(
        anonymous.status, 401,
        "no credential: nothing of the cluster is told"
    );
    assert_eq!(anonymous.header("location"), None);
    let headers = [SDP, ("Authorization", "Bearer secret")];
    // a's /metrics takes a token it was not given: its first heartbeat shows in its answers
    // (503 before it, 307 after).
    let deadline = Instant::now() + Duration::from_secs(10);
    let moved = loop {
        let reply = request_to(&a.http, "POST", "/whip/room", &headers, PUBLISHER);
        if reply.status != 503 || Instant::now() > deadline {
            break reply;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(moved.status, 307, "a takes no session: {}", moved.body);
    assert_eq!(moved.header("location"), Some(b.url("/whip/room").as_str()));
}

/// A client's sessions a second are counted at the door, before the store is asked where the
/// session goes, and once: the node that takes it does not count it again.
#[test]
fn a_client_past_its_rate_is_refused_before_it_is_placed_and_counted_once() {
    let store = MemoryStore::new();
    let one_a_second = |config: &mut NodeConfig| config.limits.joins_per_client_per_second = 1;
    let a = InProcess::start_tuned(&store, 0, &[], one_a_second);
    let b = InProcess::start_tuned(&store, 10, &[], one_a_second);
    a.wait_until_attached(1);
    b.wait_until_attached(0);
    let here = b.post("/whep/room", VIEWER);
    assert_eq!(here.status, 201, "one token, spent once: {}", here.body);
    let moved = a.post("/whep/room", VIEWER);
    assert_eq!(moved.status, 307, "{}", moved.body);
    let refused = a.post("/whep/room", VIEWER);
    assert_eq!(refused.status, 429, "not placed: {}", refused.body);
    assert_eq!(refused.header("location"), None);
    assert_eq!(
        a.metric("strata_sessions_refused_total{reason=\"client_rate\"}"),
        Some(1)
    );
}

/// `GET /cluster/nodes` lists the nodes that take sessions, the one asked first: a full one
/// leaves the list, as it would send a client on.
#[test]
fn the_cluster_nodes_that_take_sessions_are_listed() {
    let store = MemoryStore::new();
    let (a, b) = (InProcess::start(&store, 1), InProcess::start(&store, 4));
    a.wait_until_attached(1);
    b.wait_until_attached(1);
    let listed = |node: &InProcess| {
        let answer = request_to(&node.http, "GET", "/cluster/nodes", &[], "");
        assert_eq!(answer.status, 200, "{}", answer.body);
        let list: serde_json::Value = serde_json::from_str(&answer.body).expect("JSON");
        list["nodes"].as_array().expect("a list").clone()
    };
    assert_eq!(listed(&a), [a.url(""), b.url("")]);
    assert_eq!(listed(&b), [b.url(""), a.url("")]);

    assert_eq!(a.post("/whip/one", PUBLISHER).status, 201);
    b.wait_for("strata_cluster_serving_nodes", 0);
    assert_eq!(listed(&b), [b.url("")], "a is full");
}

/// `cluster.relay` naming the media port (where links ended before each worker had a relay
/// socket of its own) stops the node at start with a reason, not at the first relay.
#[test]
fn a_relay_port_that_is_the_media_port_is_refused_at_start() {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let media = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("a free port");
    let listener = runtime
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .expect("a port");
    let mut config = NodeConfig {
        udp: media,
        workers: 2,
        ..NodeConfig::default()
    };
    config.cluster.secret = Some("s3cret".to_owned());
    config.cluster.relay = Some(format!("127.0.0.1:{}", media.port() - 1));
    let store = Arc::new(MemoryStore::new().connection());
    let served = runtime.block_on(serve_with(config, listener, Some(store)));
    let refused = served.expect_err("refused at start").to_string();
    assert!(refused.contains("media port"), "{refused}");
}
