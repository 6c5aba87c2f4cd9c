//! The media relay between two `sfu serve` processes sharing a real redis-server (`redis_*`,
//! ignored by default: `.ci/run` runs them with `-- --ignored redis_`): a viewer on a node
//! that is not its room's home has the room's publisher relayed from the home over a link
//! keyed from the cluster's secret; the link's keepalives hold it while the viewer stays, and
//! the edge ends it (a BYE the origin must authenticate) after its linger once the viewer
//! left.

use crate::data_client::DataClient;
use crate::http_node::{metric, node_with_config, wait_for_metric, Node, SDP};
use crate::redis::Redis;

const PUBLISHER: &str = include_str!("../../src/node/sdp/fixtures/publisher_av1.sdp");
const VIEWER: &str = include_str!("../../src/node/sdp/fixtures/chromium156_viewer_recvonly.sdp");

/// A node of the cluster on `redis` with the relay's secret (`secret`), every room's sessions
/// served where they land.
fn relaying(redis: &Redis, secret: &str) -> Node {
    let toml = format!(
        "redis = \"{}\"\n[cluster]\nsecret = \"{secret}\"\nprefer_home_below_percent = 0\n",
        redis.url
    );
    node_with_config(&toml, &[])
}

/// Two nodes on `redis` under these secrets, each seeing the other.
fn two_nodes(redis: &Redis, secrets: [&str; 2]) -> (Node, Node) {
    let (a, b) = (relaying(redis, secrets[0]), relaying(redis, secrets[1]));
    wait_for_metric(&a.http, "strata_cluster_serving_nodes", 1);
    wait_for_metric(&b.http, "strata_cluster_serving_nodes", 1);
    (a, b)
}

fn relays(node: &Node, direction: &str) -> Option<u64> {
    metric(
        &node.http,
        &format!("strata_media_relays{{direction=\"{direction}\"}}"),
    )
}

#[test]
#[ignore = "needs redis-server: .ci/run runs it (-- --ignored redis_)"]
fn redis_a_viewer_on_another_node_pulls_the_publisher_and_the_relay_ends_after_it_leaves() {
    let redis = Redis::start();
    let (a, b) = two_nodes(&redis, ["s3cret", "s3cret"]);
    let published = a.request("POST", "/whip/room", &[SDP], PUBLISHER);
    assert_eq!(published.status, 201, "{}", published.body);

    let watching = b.request("POST", "/whep/room", &[SDP], VIEWER);
    assert_eq!(watching.status, 201, "{}", watching.body);
    assert!(
        watching.body.contains("AV1"),
        "negotiated against the relayed publisher's codecs: {}",
        watching.body
    );
    assert_eq!(relays(&a, "out"), Some(1));
    assert_eq!(relays(&b, "in"), Some(1));
    assert_eq!(
        metric(&b.http, "strata_publishers"),
        Some(1),
        "the relay-in"
    );

    // Keepalives hold the link over longer than its timeout.
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(relays(&a, "out"), Some(1));
    assert_eq!(relays(&b, "in"), Some(1));
    assert_eq!(
        metric(&a.http, "strata_media_relay_links_lost_total"),
        Some(0)
    );

    let resource = watching.header("location").expect("a resource").to_owned();
    assert_eq!(b.request("DELETE", &resource, &[], "").status, 200);
    wait_for_metric(&b.http, "strata_media_relays_ended_idle_total", 1);
    wait_for_metric(&a.http, "strata_media_relays{direction=\"out\"}", 0);
    assert_eq!(
        metric(&a.http, "strata_media_relay_links_lost_total"),
        Some(0),
        "a BYE"
    );
    assert_eq!(metric(&b.http, "strata_publishers"), Some(0));
}

#[test]
#[ignore = "needs redis-server: .ci/run runs it (-- --ignored redis_)"]
fn redis_a_node_with_another_secret_gets_no_relay() {
    let redis = Redis::start();
    let (a, b) = two_nodes(&redis, ["s3cret", "other"]);
    assert_eq!(
        a.request("POST", "/whip/room", &[SDP], PUBLISHER).status,
        201
    );
    let watching = b.request("POST", "/whep/room", &[SDP], VIEWER);
    assert_eq!(watching.status, 201, "the viewer waits as for a publisher");
    assert_eq!(relays(&a, "out"), Some(0));
    assert_eq!(relays(&b, "in"), Some(0));
}

/// The AV1 publisher's offer under SSRCs of its own (`n` apart from the fixture's).
fn participant_offer(n: u32) -> String {
    ["1502939553", "2831756498", "3126541231"]
        .iter()
        .fold(PUBLISHER.to_owned(), |offer, ssrc| {
            let moved = ssrc.parse::<u32>().expect("an SSRC") + n;
            offer.replace(ssrc, &moved.to_string())
        })
}

#[test]
#[ignore = "needs redis-server: .ci/run runs it (-- --ignored redis_)"]
fn redis_a_conference_of_four_on_two_nodes_relays_each_nodes_two_to_the_other_on_one_link() {
    let redis = Redis::start();
    let (a, b) = two_nodes(&redis, ["s3cret", "s3cret"]);
    let joins = [(&a, "alice"), (&b, "bob"), (&a, "carol"), (&b, "dave")];
    for (n, (node, name)) in joins.into_iter().enumerate() {
        let path = format!("/rooms/call?name={name}");
        let joined = node.request("POST", &path, &[SDP], &participant_offer(n as u32));
        assert_eq!(joined.status, 201, "{name}: {}", joined.body);
    }
    // Each node pulls the other's two participants (the later ones within two heartbeats),
    // over one link each way.
    for node in [&a, &b] {
        wait_for_metric(&node.http, "strata_media_relays{direction=\"in\"}", 2);
        wait_for_metric(&node.http, "strata_media_relays{direction=\"out\"}", 2);
        let links = |direction: &str| {
            metric(
                &node.http,
                &format!("strata_media_relay_links{{direction=\"{direction}\"}}"),
            )
        };
        assert_eq!((links("in"), links("out")), (Some(1), Some(1)));
        assert_eq!(
            metric(&node.http, "strata_publishers"),
            Some(2),
            "the relay-ins"
        );
    }
}

#[test]
#[ignore = "needs redis-server: .ci/run runs it (-- --ignored redis_)"]
fn redis_data_only_participants_on_two_nodes_hear_each_other_over_relays_of_the_rooms_data() {
    let redis = Redis::start();
    let (a, b) = two_nodes(&redis, ["s3cret", "s3cret"]);
    let ada = DataClient::join(&a.http, "call", "ada");
    ada.connected();
    // Ada is in the room's state (a's part written, at its next look) before bo joins.
    wait_for_metric(&a.http, "strata_cluster_room_notices_sent_total", 1);
    let bo = DataClient::join(&b.http, "call", "bo");
    ada.greet(0, "chat", "hello from ada");
    bo.greet(0, "chat", "hello from bo");
    bo.wait_for("hello from ada");
    ada.wait_for("hello from bo");
    for node in [&a, &b] {
        let data = |direction: &str| {
            metric(
                &node.http,
                &format!("strata_media_data_relays{{direction=\"{direction}\"}}"),
            )
        };
        assert_eq!((data("out"), data("in")), (Some(1), Some(1)));
        assert_eq!(
            (relays(node, "out"), relays(node, "in")),
            (Some(0), Some(0))
        );
    }
}

/// Two rooms served by different workers of each of two nodes (`--workers 2`): each worker
/// relays on links of its own, from and to its own relay socket, so both rooms' publishers
/// reach the other node and both links hold (their keepalives authenticated both ways).
#[test]
#[ignore = "needs redis-server: .ci/run runs it (-- --ignored redis_)"]
fn redis_rooms_on_different_workers_each_relay_on_links_of_their_own() {
    use sfu::node::shard::worker_for_room;
    let redis = Redis::start();
    let node = || {
        let toml = format!(
            "redis = \"{}\"\n[cluster]\nsecret = \"s3cret\"\nprefer_home_below_percent = 0\n",
            redis.url
        );
        node_with_config(&toml, &["--workers", "2"])
    };
    let (a, b) = (node(), node());
    wait_for_metric(&a.http, "strata_cluster_serving_nodes", 1);
    wait_for_metric(&b.http, "strata_cluster_serving_nodes", 1);
    let rooms: Vec<String> = ["w", "x", "y", "z"].map(String::from).into_iter().collect();
    let first = rooms.iter().find(|r| worker_for_room(r, 2) == 0);
    let second = rooms.iter().find(|r| worker_for_room(r, 2) == 1);
    let (Some(first), Some(second)) = (first, second) else {
        panic!("rooms on both workers among {rooms:?}");
    };
    for (n, room) in [first, second].into_iter().enumerate() {
        let path = format!("/whip/{room}");
        let published = a.request("POST", &path, &[SDP], &participant_offer(n as u32));
        assert_eq!(published.status, 201, "{room}: {}", published.body);
        let watching = b.request("POST", &format!("/whep/{room}"), &[SDP], VIEWER);
        assert_eq!(watching.status, 201, "{room}: {}", watching.body);
    }
    assert_eq!(relays(&a, "out"), Some(2));
    assert_eq!(relays(&b, "in"), Some(2));
    let links = |node: &Node, direction: &str| {
        metric(
            &node.http,
            &format!("strata_media_relay_links{{direction=\"{direction}\"}}"),
        )
    };
    assert_eq!(links(&a, "out"), Some(2), "a link per pair of workers");
    assert_eq!(links(&b, "in"), Some(2));

    // Past the link timeout: both links kept alive.
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(relays(&b, "in"), Some(2));
    for node in [&a, &b] {
        assert_eq!(
            metric(&node.http, "strata_media_relay_links_lost_total"),
            Some(0)
        );
    }
    let refused = "strata_media_relays_refused_total{reason=\"ssrc_taken\"}";
    assert_eq!(metric(&a.http, refused), Some(0));
}

/// A node pulls from one that registered after its last heartbeat read the others: it reads
/// them again rather than wait for its next beat (here 30 s away).
#[test]
#[ignore = "needs redis-server: .ci/run runs it (-- --ignored redis_)"]
fn redis_a_node_pulls_at_once_from_one_it_has_not_heard_of_yet() {
    let redis = Redis::start();
    let slow = format!(
        "redis = \"{}\"\n[cluster]\nsecret = \"s3cret\"\nprefer_home_below_percent = 0\n\
         lease_ms = 60000\nheartbeat_ms = 30000\n",
        redis.url
    );
    let a = node_with_config(&slow, &[]);
    wait_for_metric(&a.http, "strata_cluster_attached", 1);
    let b = relaying(&redis, "s3cret");
    wait_for_metric(&b.http, "strata_cluster_serving_nodes", 1);
    assert_eq!(
        metric(&a.http, "strata_cluster_serving_nodes"),
        Some(0),
        "node a has not read node b's registration yet"
    );
    let published = b.request("POST", "/whip/late", &[SDP], PUBLISHER);
    assert_eq!(published.status, 201, "{}", published.body);
    let watching = a.request("POST", "/whep/late", &[SDP], VIEWER);
    assert_eq!(watching.status, 201, "{}", watching.body);
    assert_eq!(relays(&a, "in"), Some(1), "relayed before the answer");
}
