//! One room across nodes: nodes running in this process on one in-memory store, each serving
//! part of a room's participants (`prefer_home_below_percent = 0`), answer `GET /rooms/{room}`
//! with the same JSON, and each participant's event stream tells of the other nodes'
//! arrivals and departures; a home that dies takes its participants out of the others' view
//! within its lease.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::Value;
use sfu::node::cluster::memory::MemoryStore;

use crate::cluster_http::InProcess;
use crate::http_node::{request_to, SDP};

const PUBLISHER: &str = include_str!("../../src/node/sdp/fixtures/publisher_av1.sdp");
const VIEWER: &str = include_str!("../../src/node/sdp/fixtures/viewer_recvonly.sdp");

/// Long beside the nodes' lease (1.5 s) and feed (200 ms), even on a busy machine.
const PATIENCE: Duration = Duration::from_secs(10);

/// A node that serves every session it is sent, whichever node is the room's home.
fn spreading(store: &MemoryStore) -> InProcess {
    InProcess::start_tuned(store, 10, &[], |config| {
        config.cluster.prefer_home_below_percent = 0;
    })
}

/// Two such nodes, each seeing the other.
fn two_nodes() -> (InProcess, InProcess) {
    let store = MemoryStore::new();
    let (a, b) = (spreading(&store), spreading(&store));
    a.wait_until_attached(1);
    b.wait_until_attached(1);
    (a, b)
}

/// Joins room `call` on the node at `http` as `name`: the participant's resource.
pub fn join(http: &str, name: &str, offer: &str) -> String {
    let path = format!("/rooms/call?name={name}");
    let reply = request_to(http, "POST", &path, &[SDP], offer);
    assert_eq!(reply.status, 201, "{name}: {}", reply.body);
    reply.header("location").expect("a resource").to_owned()
}

fn room(http: &str) -> Option<Value> {
    let reply = request_to(http, "GET", "/rooms/call", &[], "");
    (reply.status == 200).then(|| serde_json::from_str(&reply.body).expect("JSON"))
}

fn names(room: &Value) -> Vec<&str> {
    let participants = room["participants"].as_array().expect("participants");
    participants
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect()
}

/// Waits until every node (by HTTP address) answers the same room `call`, with these
/// participants in some order.
pub fn same_room(nodes: &[&str], expected: &[&str]) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let rooms: Vec<Option<Value>> = nodes.iter().map(|n| room(n)).collect();
        let first = rooms[0].clone().unwrap_or_default();
        let mut found = names(&first);
        found.sort_unstable();
        if rooms.iter().all(|r| r.as_ref() == Some(&first)) && found == expected {
            return first;
        }
        assert!(Instant::now() < deadline, "{rooms:#?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A participant's event stream, read as its events come.
struct Events {
    stream: TcpStream,
    raw: Vec<u8>,
    seen: usize,
}

impl Events {
    fn open(http: &str, resource: &str) -> Self {
        let mut stream = TcpStream::connect(http).expect("connects");
        let head = format!("GET {resource}/events HTTP/1.1\r\nHost: {http}\r\n\r\n");
        stream.write_all(head.as_bytes()).expect("sent");
        stream
            .set_read_timeout(Some(Duration::from_millis(100)))
            .expect("a timeout");
        Self {
            stream,
            raw: Vec::new(),
            seen: 0,
        }
    }

    /// Every whole event so far: its name and data.
    fn events(&self) -> Vec<(String, Value)> {
        let text = String::from_utf8_lossy(&self.raw);
        let whole = &text[..text.rfind('\n').unwrap_or(0)];
        let mut events = Vec::new();
        let mut name = None;
        for line in whole.lines() {
            if let Some(n) = line.strip_prefix("event: ") {
                name = Some(n.to_owned());
            } else if let (Some(data), Some(n)) = (line.strip_prefix("data: "), name.take()) {
                events.push((n, serde_json::from_str(data).expect("JSON")));
            }
        }
        events
    }

    /// The data of the next event named `name` that `matches`, past those already taken.
    fn wait_for(&mut self, name: &str, matches: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + PATIENCE;
        let mut buf = [0u8; 4096];
        loop {
            let events = self.events();
            let found = events
                .iter()
                .enumerate()
                .skip(self.seen)
                .find(|(_, (n, data))| n == name && matches(data));
            if let Some((at, (_, data))) = found {
                self.seen = at + 1;
                return data.clone();
            }
            assert!(Instant::now() < deadline, "no {name} in {events:#?}");
            if let Ok(n) = self.stream.read(&mut buf) {
                self.raw.extend_from_slice(&buf[..n]);
            }
        }
    }
}

/// Whether `event` names the participant called `name` (a join carries the participant, a
/// leave its name).
fn named(name: &'static str) -> impl Fn(&Value) -> bool {
    move |data| data["name"] == name
}

#[test]
fn participants_on_two_nodes_share_one_room_and_its_events() {
    let (a, b) = two_nodes();
    let alice = join(&a.http, "alice", PUBLISHER);
    let _bob = join(&a.http, "bob", VIEWER);
    let mut alices = Events::open(&a.http, &alice);
    alices.wait_for("state", |_| true);
    let carol = join(&b.http, "carol", PUBLISHER);
    let mut carols = Events::open(&b.http, &carol);
    let dave = join(&b.http, "dave", VIEWER);

    // Alice, on a, hears of carol and her tracks, then of dave, both on b.
    let joined = alices.wait_for("participant_joined", named("carol"));
    assert_eq!(joined["kind"], "participant");
    assert_eq!(joined["tracks"].as_array().map(Vec::len), Some(2));
    let hers = |data: &Value| data["participant"] == joined["id"];
    alices.wait_for("track_added", hers);
    alices.wait_for("track_added", hers);
    alices.wait_for("participant_joined", named("dave"));

    // Both nodes answer the same room: every participant, its tracks, the viewers' counts.
    let room = same_room(&[&a.http, &b.http], &["alice", "bob", "carol", "dave"]);
    let tracks: usize = room["participants"]
        .as_array()
        .expect("participants")
        .iter()
        .map(|p| p["tracks"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(tracks, 4, "alice's and carol's audio and video: {room}");
    // Carol, on b, has alice and bob in her room, from her stream's first event or after it.
    let state = carols.wait_for("state", |_| true);
    let in_state = names(&state["room"]);
    for other in ["alice", "bob"]
        .into_iter()
        .filter(|n| !in_state.contains(n))
    {
        carols.seen = 0;
        carols.wait_for("participant_joined", named(other));
    }

    // A name is the room's, whichever node has it.
    let taken = b.post("/rooms/call?name=alice", VIEWER);
    assert_eq!(taken.status, 409, "{}", taken.body);

    // Dave leaves b: alice hears it on a, and both nodes answer the room without him.
    assert_eq!(request_to(&b.http, "DELETE", &dave, &[], "").status, 200);
    alices.wait_for("participant_left", named("dave"));
    same_room(&[&a.http, &b.http], &["alice", "bob", "carol"]);
    // Alice leaves a: carol hears of her tracks and of her on b.
    assert_eq!(request_to(&a.http, "DELETE", &alice, &[], "").status, 200);
    carols.seen = 0;
    let alices_id = room["participants"]
        .as_array()
        .and_then(|all| all.iter().find(|p| p["name"] == "alice"))
        .map(|p| p["id"].clone())
        .expect("alice");
    carols.wait_for("track_removed", |d| d["participant"] == alices_id);
    carols.wait_for("participant_left", named("alice"));
    same_room(&[&a.http, &b.http], &["bob", "carol"]);
}

#[test]
fn a_dead_homes_participants_leave_the_other_nodes_room_within_its_lease() {
    let (a, b) = two_nodes();
    let _alice = join(&a.http, "alice", PUBLISHER);
    let _bob = join(&a.http, "bob", VIEWER);
    let carol = join(&b.http, "carol", PUBLISHER);
    let _dave = join(&b.http, "dave", VIEWER);
    same_room(&[&a.http, &b.http], &["alice", "bob", "carol", "dave"]);
    let mut carols = Events::open(&b.http, &carol);
    carols.wait_for("state", |_| true);
    assert_eq!(
        a.metric("strata_cluster_homes"),
        Some(1),
        "a is the room's home"
    );

    drop(a);
    let died = Instant::now();
    carols.wait_for("participant_left", named("alice"));
    carols.wait_for("participant_left", named("bob"));
    // Gone with the registration's lease (1.5 s), give or take a feed and a heartbeat.
    eprintln!(
        "a's participants left b's room {:?} after a died",
        died.elapsed()
    );
    same_room(&[&b.http], &["carol", "dave"]);
    b.wait_for("strata_cluster_homes", 1);
}
