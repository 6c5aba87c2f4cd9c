//! The relay between nodes pulling on change, with nodes running in this process on one
//! in-memory store (real HTTP, real UDP between their media ports): data-only participants on
//! two nodes hear each other with no publisher in the room, a greeting written as a
//! participant joins reaches the other node, the relays of the room's data end once one side
//! has nobody; a publisher joining one node, and its track set changing, are pulled by the
//! other well before its next heartbeat (a minute away), through the room's state and the
//! origin's word on the link.

use std::time::Instant;

use sfu::node::cluster::memory::MemoryStore;
use sfu::node::cluster::relay_link;

use crate::cluster_http::InProcess;
use crate::cluster_rooms::join;
use crate::data_client::DataClient;
use crate::http_node::{request_to, SDP};

const PUBLISHER: &str = include_str!("../../src/node/sdp/fixtures/publisher_av1.sdp");

/// A relaying node of the cluster of `store` that serves every session it is sent, beating
/// every `heartbeat_ms`.
fn relaying(store: &MemoryStore, heartbeat_ms: u64) -> InProcess {
    InProcess::start_tuned(store, 10, &[], |config| {
        config.cluster.prefer_home_below_percent = 0;
        config.cluster.secret = Some("s3cret".to_owned());
        config.cluster.heartbeat_ms = heartbeat_ms;
        config.cluster.lease_ms = 15 * heartbeat_ms.max(100);
    })
}

/// Two relaying nodes beating every 100 ms, each seeing the other.
fn two_nodes() -> (InProcess, InProcess) {
    let store = MemoryStore::new();
    let (a, b) = (relaying(&store, 100), relaying(&store, 100));
    a.wait_until_attached(1);
    b.wait_until_attached(1);
    (a, b)
}

/// `series` of relays by direction on `node`: out, in.
fn both_ways(node: &InProcess, series: &str) -> (Option<u64>, Option<u64>) {
    let of = |direction: &str| node.metric(&format!("{series}{{direction=\"{direction}\"}}"));
    (of("out"), of("in"))
}

#[test]
fn data_only_participants_on_two_nodes_hear_each_other_and_the_data_relays_end_with_one_side() {
    let (a, b) = two_nodes();
    let ada = DataClient::join(&a.http, "call", "ada");
    ada.connected();
    let bo = DataClient::join(&b.http, "call", "bo");
    bo.connected();
    // Each node relays the room's data to the other: no publisher anywhere.
    for node in [&a, &b] {
        node.wait_for("strata_media_data_relays{direction=\"out\"}", 1);
        node.wait_for("strata_media_data_relays{direction=\"in\"}", 1);
        assert_eq!(both_ways(node, "strata_media_relays"), (Some(0), Some(0)));
        assert_eq!(node.metric("strata_publishers"), Some(0));
        node.wait_for("strata_media_relay_data_links", 2);
    }
    ada.greet(0, "chat", "from ada");
    bo.greet(0, "chat", "from bo");
    let (from_ada, _) = bo.wait_for("from ada");
    let (from_bo, _) = ada.wait_for("from bo");
    assert!(from_ada.starts_with('p') && from_bo.starts_with('p'));
    assert_ne!(from_ada, from_bo, "each names its owner");
    for i in 0..10 {
        ada.send(0, &format!("ada {i}"));
        bo.send(0, &format!("bo {i}"));
    }
    bo.wait_for("ada 9");
    ada.wait_for("bo 9");
    let only = |client: &DataClient, who: &str| {
        let heard = client.messages();
        let theirs: Vec<&String> = heard.iter().filter(|m| m.starts_with(who)).collect();
        let expected: Vec<String> = (0..10).map(|i| format!("{who} {i}")).collect();
        assert_eq!(
            theirs,
            expected.iter().collect::<Vec<_>>(),
            "once each, in order"
        );
    };
    only(&bo, "ada");
    only(&ada, "bo");
    for node in [&a, &b] {
        assert_eq!(node.metric("strata_data_link_messages_total"), Some(11));
    }

    // Ada leaves: a has nobody in the room, and b sees a's part empty. Both ends of both
    // relays end after their linger, and the links with them.
    ada.leave();
    for node in [&a, &b] {
        node.wait_for("strata_media_data_relays{direction=\"in\"}", 0);
        node.wait_for("strata_media_data_relays{direction=\"out\"}", 0);
        node.wait_for("strata_media_relay_links{direction=\"in\"}", 0);
        node.wait_for("strata_media_relay_links{direction=\"out\"}", 0);
        assert_eq!(node.metric("strata_media_data_relays_ended_total"), Some(1));
        assert_eq!(node.metric("strata_media_relay_links_lost_total"), Some(0));
    }
    drop(bo);
}

#[test]
fn a_greeting_written_as_a_participant_joins_reaches_the_node_it_did_not_join() {
    let (a, b) = two_nodes();
    let ada = DataClient::join(&a.http, "call", "ada");
    ada.connected();
    // Ada is in the room's state: a wrote its part (at its next look, 200 ms at most).
    a.wait_for("strata_cluster_room_notices_sent_total", 1);
    let asked = Instant::now();
    let bo = DataClient::join(&b.http, "call", "bo");
    let answered = asked.elapsed();
    // Whether b relays its room's data to a by the time bo has its answer.
    let relayed = b.metric("strata_media_data_relays{direction=\"out\"}");
    bo.greet(0, "chat", "hello from bo");
    let up = bo.connected() - asked;
    let (_, heard) = ada.wait_for("hello from bo");
    let heard = heard - asked;
    eprintln!(
        "bo answered after {answered:?} (b relaying its data to a: {relayed:?}), its \
         association up after {up:?}, its greeting heard on a after {heard:?}"
    );
    assert_eq!(
        relayed,
        Some(1),
        "a pulled b's data before it answered b's pull of its own, before bo's answer"
    );
    assert_eq!(
        b.metric("strata_media_relay_pulls_total{reason=\"answer\"}"),
        Some(0)
    );
    assert_eq!(
        a.metric("strata_media_relay_pulls_total{reason=\"answer\"}"),
        Some(1),
        "a pulled bo's data as bo's node asked for ada's"
    );
}

#[test]
fn participants_joining_two_nodes_at_once_hear_each_other_once_the_room_state_is_read() {
    let (a, b) = two_nodes();
    let asked = Instant::now();
    let ada = DataClient::join(&a.http, "call", "ada");
    let bo = DataClient::join(&b.http, "call", "bo");
    // Neither node's part of the room is written yet: neither join finds the other. Each
    // writes on from its first moment, a message every 10 ms.
    ada.greet(0, "chat", "ada 0");
    bo.greet(0, "chat", "bo 0");
    let up = ada.connected().max(bo.connected()) - asked;
    let mut sent = 1;
    let deadline = Instant::now() + std::time::Duration::from_secs(5);
    while ada.messages().is_empty() || bo.messages().is_empty() {
        assert!(Instant::now() < deadline, "never crossed");
        ada.send(0, &format!("ada {sent}"));
        bo.send(0, &format!("bo {sent}"));
        sent += 1;
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let first = |client: &DataClient| {
        let (text, at) = client.first_message().expect("one");
        (text, at - asked)
    };
    eprintln!(
        "both up after {up:?}; first heard on b: {:?}, on a: {:?}",
        first(&bo),
        first(&ada)
    );
    // From the first heard on, every later message crosses.
    ada.send(0, "ada last");
    bo.send(0, "bo last");
    bo.wait_for("ada last");
    ada.wait_for("bo last");
}

/// A participant's offer that publishes the fixture's audio alone.
fn audio_only(offer: &str) -> String {
    let audio = &offer[..offer.find("m=video").expect("a video section")];
    audio.replace("a=group:BUNDLE 0 1", "a=group:BUNDLE 0")
}

#[test]
fn a_publisher_and_its_new_track_are_pulled_on_change_not_at_the_next_heartbeat() {
    let store = MemoryStore::new();
    let a = relaying(&store, 100);
    a.wait_until_attached(0);
    // b beats once as it starts, and next a minute later: what it pulls before then, it
    // pulls on change.
    let b = relaying(&store, 60_000);
    b.wait_until_attached(1);
    a.wait_until_attached(1);
    let bo = DataClient::join(&b.http, "call", "bo");
    bo.connected();

    let asked = Instant::now();
    let ada = join(&a.http, "ada", &audio_only(PUBLISHER));
    b.wait_for("strata_media_relays{direction=\"in\"}", 1);
    let pulled = asked.elapsed();
    assert_eq!(
        b.metric("strata_media_relay_pulls_total{reason=\"publisher\"}"),
        Some(1),
        "the room's state showed ada's track"
    );
    assert_eq!(
        b.metric("strata_media_relays_started_total{direction=\"in\"}"),
        Some(1)
    );

    // Ada offers again with her camera: a says so on the link, and b pulls her again.
    let asked_again = Instant::now();
    let again = request_to(&a.http, "PATCH", &ada, &[SDP], PUBLISHER);
    assert_eq!(again.status, 200, "{}", again.body);
    b.wait_for("strata_media_relays_started_total{direction=\"in\"}", 2);
    let renewed = asked_again.elapsed();
    assert_eq!(
        b.metric("strata_media_relay_pulls_total{reason=\"changed\"}"),
        Some(1),
        "one pull, however many times a said so"
    );
    assert_eq!(b.metric("strata_media_relays{direction=\"in\"}"), Some(1));
    // Each wait above gives up after 15 s: both came well before b's next heartbeat.
    eprintln!("ada pulled by b {pulled:?} after her join, again {renewed:?} after her offer");
}

#[test]
fn relay_requests_no_node_of_the_cluster_would_send_are_refused_with_a_reason_and_counted() {
    let (a, _b) = two_nodes();
    let now = relay_link::unix_ms();
    let body = |room: &str, source: &str| {
        format!(
            r#"{{"room":"{room}","source":{source},"relay":"127.0.0.1:9","nonce":"00ff","at_ms":{now},"kind":"data","node":"edge"}}"#
        )
    };
    let post = |body: &str, secret: &str| {
        let tag = relay_link::sign(secret, body.as_bytes());
        let headers = [
            ("content-type", "application/json"),
            (relay_link::AUTH_HEADER, tag.as_str()),
        ];
        request_to(&a.http, "POST", "/cluster/relay", &headers, body)
    };
    let refused = |reason: &str| {
        let series = format!("strata_cluster_relay_requests_refused_total{{reason=\"{reason}\"}}");
        a.metric(&series)
    };
    let forged = post(&body("call", "null"), "not the secret");
    assert_eq!(forged.status, 403);
    let naming = post(&body("call", r#""alice""#), "s3cret");
    assert_eq!(naming.status, 400);
    assert_eq!(naming.body, "a relay of a room's data names no publisher");
    let spaced = post(&body("a room", "null"), "s3cret");
    assert_eq!(spaced.status, 400);
    assert_eq!(spaced.body, "the room's name is not one this node serves");
    let counted = ["unauthenticated", "data_with_source", "bad_room", "stale"].map(refused);
    assert_eq!(counted, [Some(1), Some(1), Some(1), Some(0)]);
    assert_eq!(
        a.metric("strata_media_data_relays{direction=\"out\"}"),
        Some(0)
    );
}

/// A participant joining the third node of a room that has participants on two others has
/// both nodes' data relayed by its answer: its node asks them together, not one after the
/// other, and each pulls its data in turn.
#[test]
fn a_participant_joining_a_third_node_has_both_others_data_by_its_answer() {
    let store = MemoryStore::new();
    let nodes = [0, 1, 2].map(|_| relaying(&store, 100));
    for node in &nodes {
        node.wait_until_attached(2);
    }
    let [a, b, c] = &nodes;
    let ada = DataClient::join(&a.http, "call", "ada");
    ada.connected();
    let bo = DataClient::join(&b.http, "call", "bo");
    bo.connected();
    // Both parts are in the room's state.
    for node in [a, b] {
        node.wait_for("strata_media_data_relays{direction=\"in\"}", 1);
    }
    let asked = Instant::now();
    let cy = DataClient::join(&c.http, "call", "cy");
    let answered = asked.elapsed();
    let relayed = both_ways(c, "strata_media_data_relays");
    eprintln!("cy answered after {answered:?}, c's data relays (out, in): {relayed:?}");
    assert_eq!(relayed, (Some(2), Some(2)), "both nodes' data, both ways");
    cy.greet(0, "chat", "hello from cy");
    ada.wait_for("hello from cy");
    bo.wait_for("hello from cy");
}

/// A relay request's body arrives within the body timeout, as a session's does: its
/// signature is checked only once it has all come, so until then anyone may be sending it.
#[test]
fn a_relay_request_whose_body_does_not_arrive_in_time_is_refused() {
    use std::io::{Read, Write};
    let store = MemoryStore::new();
    let node = InProcess::start_tuned(&store, 10, &[], |config| {
        config.cluster.secret = Some("s3cret".to_owned());
        config.http_body_timeout_ms = 500;
    });
    let mut stream = std::net::TcpStream::connect(&node.http).expect("connects");
    let head = "POST /cluster/relay HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                Content-Length: 1000\r\n\r\n{";
    stream.write_all(head.as_bytes()).expect("sent");
    let timeout = std::time::Duration::from_secs(20);
    stream.set_read_timeout(Some(timeout)).expect("a timeout");
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
}

/// A join waits a bounded time for the pulls it asks for. The directory names ten
/// publishers on a registered node that takes connections and never answers, so each pull
/// waits out the origin's answer timeout (2 s), one after the other: 20 s of pulls for a
/// participant joining the room. It is answered once the join's wait is over, as is a viewer
/// joining behind it (whose pull waits for those), each counted as going on before its pulls.
#[test]
fn joins_go_on_while_pulls_from_a_silent_node_hold_the_relay() {
    use sfu::node::cluster::{ClusterStore, Load, NodeState, Registration};
    use std::time::Duration;
    const VIEWER: &str = include_str!("../../src/node/sdp/fixtures/viewer_recvonly.sdp");
    let store = MemoryStore::new();
    let node = relaying(&store, 100);
    node.wait_until_attached(0);
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let epoch = store.next_epoch("silent").await.expect("an epoch");
        let registration = Registration {
            node: "silent".to_owned(),
            epoch,
            url: format!("http://{}", silent.local_addr().expect("an address")),
            relay: Some("127.0.0.1:9".to_owned()),
            state: NodeState::Serving,
            // Nearly full: seen as a node that serves, never the one a session is sent to.
            load: Load {
                sessions: 999,
                capacity: 1000,
                cpu_percent: 99,
                outbound_kbps: 0,
            },
        };
        let minute = Duration::from_secs(60);
        let registered = store.register(&registration, &[], minute).await;
        registered.expect("registered");
        let names: Vec<String> = (0..10).map(|i| format!("p{i}")).collect();
        let node_ref = registration.node_ref();
        let listed = store.set_hosted("call", &node_ref, &names, minute).await;
        listed.expect("listed");
    });
    node.wait_until_attached(1);
    let start = Instant::now();
    let participant = node.post("/rooms/call?name=ada", PUBLISHER);
    assert_eq!(participant.status, 201, "{}", participant.body);
    let viewer = node.post("/whep/call", VIEWER);
    assert_eq!(viewer.status, 201, "{}", viewer.body);
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "answered after {:?}, behind the pulls",
        start.elapsed()
    );
    assert_eq!(node.metric("strata_cluster_join_pulls_late_total"), Some(2));
}
