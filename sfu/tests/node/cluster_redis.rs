//! Two `sfu serve` processes sharing a real redis-server (`redis_*`, ignored by default:
//! `.ci/run` runs them with `-- --ignored redis_`): a draining node sends new sessions to the
//! other and exits once its own have ended; a node cut off from Redis refuses new sessions
//! within 3 s and takes them again, under a new epoch, once Redis is back.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::http_node::{self, node_with_config, wait_for_metric, Node, SDP};
use crate::redis::Redis;

const PUBLISHER: &str = include_str!("../../src/node/sdp/fixtures/publisher_av1.sdp");

fn clustered(redis: &Redis) -> Node {
    node_with_config(&format!("redis = \"{}\"\n", redis.url), &[])
}

fn metric(node: &Node, series: &str) -> Option<u64> {
    http_node::metric(&node.http, series)
}

fn wait_for(node: &Node, series: &str, value: u64) {
    wait_for_metric(&node.http, series, value);
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
    assert_eq!(
        a.request("POST", "/whip/before", &[SDP], PUBLISHER).status,
        201
    );
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
    wait_for(&a, "strata_cluster_attached", 0);
    redis.thaw();
    wait_for(&a, "strata_cluster_attached", 1);
    // Requests for an epoch sent while Redis was frozen run when it thaws: any later one.
    let epoch = metric(&a, "strata_cluster_epoch");
    assert!(epoch.is_some_and(|e| e > 1), "a new epoch: {epoch:?}");
    assert_eq!(
        a.request("POST", "/whip/after", &[SDP], PUBLISHER).status,
        201
    );
    assert_eq!(
        metric(&a, "strata_publishers"),
        Some(2),
        "the first session was kept"
    );
}
