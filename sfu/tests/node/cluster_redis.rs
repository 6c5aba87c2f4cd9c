//! Two `sfu serve` processes sharing a real redis-server (`redis_*`, ignored by default:
//! `.ci/run` runs them with `-- --ignored redis_`): a draining node sends new sessions to the
//! other and exits once its own have ended; a node cut off from Redis refuses new sessions
//! within 3 s, serves the sessions it has meanwhile, and takes new ones again, under a new
//! epoch, once Redis is back; a room with participants on both nodes reads the same on
//! both, a join on one is noticed on the other (also once Redis restarted empty and the
//! subscription was made again), and an idle room publishes no notice. A node
//! killed and Redis restarted empty: cluster_failures.rs.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::cluster_rooms::{join, same_room};
use crate::http_node::{self, node_with_config, open, wait_for_metric, Node, SDP};
use crate::redis::Redis;

pub const PUBLISHER: &str = include_str!("../../src/node/sdp/fixtures/publisher_av1.sdp");
pub const VIEWER: &str = include_str!("../../src/node/sdp/fixtures/viewer_recvonly.sdp");

fn clustered(redis: &Redis) -> Node {
    node_with_config(&format!("redis = \"{}\"\n", redis.url), &[])
}

/// The sessions a node of [`clustered_as`] takes.
pub const CAPACITY: u64 = 50;

/// A node of the cluster with this id.
pub fn clustered_as(redis: &Redis, node: &str) -> Node {
    let toml = format!(
        "redis = \"{}\"\n[limits]\nsessions = {CAPACITY}\n[cluster]\nnode = \"{node}\"\n",
        redis.url
    );
    node_with_config(&toml, &[])
}

/// Two nodes that serve every session they are sent, whichever node is the room's home, each
/// seeing the other.
fn spreading_pair(redis: &Redis) -> (Node, Node) {
    let toml = format!(
        "redis = \"{}\"\n[cluster]\nprefer_home_below_percent = 0\n",
        redis.url
    );
    let (a, b) = (node_with_config(&toml, &[]), node_with_config(&toml, &[]));
    wait_for(&a, "strata_cluster_serving_nodes", 1);
    wait_for(&b, "strata_cluster_serving_nodes", 1);
    (a, b)
}

pub fn metric(node: &Node, series: &str) -> Option<u64> {
    http_node::metric(&node.http, series)
}

pub fn wait_for(node: &Node, series: &str, value: u64) {
    wait_for_metric(&node.http, series, value);
}

/// The sessions made by [`open`] still answer on `node`: a viewer's state and layer choice,
/// a publisher's trickle.
pub fn still_served(node: &Node, whip: &str, whep: &str) {
    let state = node.request("GET", whep, &[], "");
    assert_eq!(state.status, 200, "the viewer's state: {}", state.body);
    let json = ("Content-Type", "application/json");
    let layer = node.request("PATCH", whep, &[json], r#"{"spatial":0,"temporal":0}"#);
    assert_eq!(layer.status, 204, "a layer choice: {}", layer.body);
    let trickle = ("Content-Type", "application/trickle-ice-sdpfrag");
    let patch = node.request("PATCH", whip, &[trickle], "a=mid:0\r\n");
    assert_eq!(patch.status, 204, "a trickle: {}", patch.body);
    assert_eq!(metric(node, "strata_publishers"), Some(1));
    assert_eq!(metric(node, "strata_subscribers"), Some(1));
}

#[test]
#[ignore = "needs redis-server: .ci/run runs it (-- --ignored redis_)"]
fn redis_a_draining_node_redirects_and_exits_once_its_sessions_end() {
    let redis = Redis::start();
    let (a, mut b) = (clustered(&redis), clustered(&redis));
    wait_for(&a, "strata_cluster_serving_nodes", 1);
    wait_for(&b, "strata_cluster_serving_nodes", 1);
    let session = b.request("POST", "/whip/stay", &[SDP], PUBLISHER);
    assert_eq!(session.status, 201);
    let resource = session.header("location").expect("a resource").to_owned();
    let term = Command::new("kill")
        .args(["-TERM", &b.child.id().to_string()])
        .status();
    assert!(term.is_ok_and(|s| s.success()));
    wait_for(&b, "strata_cluster_draining", 1);
    let moved = b.request("POST", "/whip/new", &[SDP], PUBLISHER);
    assert_eq!(moved.status, 307, "draining: {}", moved.body);
    let expected = format!("http://{}/whip/new", a.http);
    assert_eq!(moved.header("location"), Some(expected.as_str()));
    wait_for(&a, "strata_cluster_serving_nodes", 0);
    assert_eq!(b.child.try_wait().ok().flatten(), None, "a session is left");
    assert_eq!(b.request("DELETE", &resource, &[], "").status, 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = b.child.try_wait().expect("waitable") {
            break status;
        }
        assert!(Instant::now() < deadline, "the drained node did not exit");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
}

#[test]
#[ignore = "needs redis-server: .ci/run runs it (-- --ignored redis_)"]
fn redis_a_node_cut_off_refuses_within_3_s_and_returns_with_a_new_epoch() {
    let redis = Redis::start();
    let a = clustered(&redis);
    wait_for(&a, "strata_cluster_attached", 1);
    assert_eq!(metric(&a, "strata_cluster_epoch"), Some(1));
    let whip = open(&a, "/whip/before", PUBLISHER);
    let whep = open(&a, "/whep/before", VIEWER);
    redis.freeze();
    let cut = Instant::now();
    let refused = a.request("POST", "/whip/during", &[SDP], PUBLISHER);
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(refused.header("retry-after").is_some());
    assert!(
        cut.elapsed() < Duration::from_secs(3),
        "refused after {:?}",
        cut.elapsed()
    );
    still_served(&a, &whip, &whep);
    wait_for(&a, "strata_cluster_attached", 0);
    still_served(&a, &whip, &whep);
    let refused = a.request("POST", "/whep/before", &[SDP], VIEWER);
    assert_eq!(
        refused.status, 503,
        "a viewer of a room it has: {}",
        refused.body
    );
    redis.thaw();
    wait_for(&a, "strata_cluster_attached", 1);
    // Requests for an epoch sent while Redis was frozen run when it thaws: any later one.
    let epoch = metric(&a, "strata_cluster_epoch");
    assert!(epoch.is_some_and(|e| e > 1), "a new epoch: {epoch:?}");
    open(&a, "/whip/after", PUBLISHER);
    assert_eq!(
        metric(&a, "strata_publishers"),
        Some(2),
        "the first session was kept"
    );
}

#[test]
#[ignore = "needs redis-server: .ci/run runs it (-- --ignored redis_)"]
fn redis_a_room_on_two_nodes_reads_the_same_on_both() {
    let redis = Redis::start();
    let (a, b) = spreading_pair(&redis);
    join(&a.http, "alice", PUBLISHER);
    join(&a.http, "bob", VIEWER);
    join(&b.http, "carol", PUBLISHER);
    let dave = join(&b.http, "dave", VIEWER);
    let room = same_room(&[&a.http, &b.http], &["alice", "bob", "carol", "dave"]);
    assert_eq!(room["room"], "call");
    assert_eq!(b.request("DELETE", &dave, &[], "").status, 200);
    same_room(&[&a.http, &b.http], &["alice", "bob", "carol"]);
    assert_eq!(
        metric(
            &a,
            "strata_cluster_room_feed_failures_total{reason=\"unreadable_part\"}"
        ),
        Some(0)
    );
}

/// The calls Redis ran of each command over `idle` (`INFO commandstats` after
/// `CONFIG RESETSTAT`), commands called by scripts included, by name.
fn commands_over(redis: &Redis, idle: Duration) -> Vec<(String, u64)> {
    assert_eq!(redis.cli(&["CONFIG", "RESETSTAT"]), "OK");
    std::thread::sleep(idle);
    let stats = redis.cli(&["INFO", "commandstats"]);
    let calls = stats.lines().filter_map(|line| {
        let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
        let calls = rest
            .strip_prefix("calls=")?
            .split(',')
            .next()?
            .parse()
            .ok()?;
        Some((name.to_owned(), calls))
    });
    calls.collect()
}

fn calls(stats: &[(String, u64)], command: &str) -> u64 {
    let found = stats.iter().find(|(name, _)| name == command);
    found.map_or(0, |(_, calls)| *calls)
}

#[test]
#[ignore = "needs redis-server: .ci/run runs it (-- --ignored redis_)"]
fn redis_a_join_is_noticed_on_the_other_node_and_an_idle_room_publishes_nothing() {
    let redis = Redis::start();
    let (a, b) = spreading_pair(&redis);
    join(&a.http, "alice", PUBLISHER);
    join(&b.http, "carol", PUBLISHER);
    same_room(&[&a.http, &b.http], &["alice", "carol"]);

    // Ten seconds of a room on two nodes where nothing happens: each node refreshes its part
    // once a beat (1 s), beside its heartbeat's own scripts, and tells nobody anything.
    let idle = commands_over(&redis, Duration::from_secs(10));
    eprintln!("Redis over 10 s of an idle room on two nodes: {idle:?}");
    assert_eq!(calls(&idle, "publish"), 0, "{idle:?}");

    // A join on b is noticed on a: a reads the room when told, not at its next refresh.
    let received = "strata_cluster_room_notices_received_total";
    let before = metric(&a, received).expect("the notices' counter");
    let joined = Instant::now();
    join(&b.http, "dave", VIEWER);
    same_room(&[&a.http, &b.http], &["alice", "carol", "dave"]);
    eprintln!(
        "dave was in a's room {:?} after his join on b",
        joined.elapsed()
    );
    assert!(metric(&a, received) > Some(before), "a was told");
    let sent = "strata_cluster_room_notices_sent_total";
    assert!(metric(&b, sent) > Some(0), "b told");
    // The subscriptions held throughout, their pings answered.
    let lost = "strata_cluster_room_feed_failures_total{reason=\"subscription_lost\"}";
    assert_eq!((metric(&a, lost), metric(&b, lost)), (Some(0), Some(0)));
}

/// Waits until `series` on `node` is past `value`.
fn wait_past(node: &Node, series: &str, value: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(node, series).unwrap_or(0) <= value {
        assert!(Instant::now() < deadline, "{series} stays at {value}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
#[ignore = "needs redis-server: .ci/run runs it (-- --ignored redis_)"]
fn redis_notices_are_heard_again_once_redis_restarted() {
    let mut redis = Redis::start();
    let (a, b) = spreading_pair(&redis);
    join(&a.http, "alice", PUBLISHER);
    join(&b.http, "carol", PUBLISHER);
    same_room(&[&a.http, &b.http], &["alice", "carol"]);
    redis.restart_empty();
    let lost = "strata_cluster_room_feed_failures_total{reason=\"subscription_lost\"}";
    wait_past(&a, lost, 0);
    // Both registered anew (fenced once: the epochs Redis forgot) and serving.
    let fenced = "strata_cluster_heartbeat_failures_total{reason=\"fenced\"}";
    for node in [&a, &b] {
        wait_past(node, fenced, 0);
        wait_for(node, "strata_cluster_attached", 1);
    }
    same_room(&[&a.http, &b.http], &["alice", "carol"]);
    // a subscribed again: b's next change reaches it as a notice, not only by its reads.
    let received = "strata_cluster_room_notices_received_total";
    let before = metric(&a, received).expect("the notices' counter");
    join(&b.http, "dave", VIEWER);
    same_room(&[&a.http, &b.http], &["alice", "carol", "dave"]);
    wait_past(&a, received, before);
}
