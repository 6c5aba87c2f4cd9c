//! Placement, takeover and fencing as properties: nodes of a cluster on one in-memory store
//! boot, beat, die, are cut off (their requests lost, or only their replies), drain and place
//! requests in any order, on paused time. Whatever the interleaving, no two nodes are ever
//! the live home of one room, the store agrees with the node that believes it is, and each
//! placement is one the node may make.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use sfu::node::cluster::member::Identity;
use sfu::node::cluster::memory::{Link, MemoryStore};
use sfu::node::cluster::placement::Placement;
use sfu::node::cluster::{ClusterStore, Load, Member, NodeRef};

const NODES: usize = 3;
const ROOMS: [&str; 3] = ["r0", "r1", "r2"];
const LEASE: Duration = Duration::from_millis(3_000);
const CAPACITY: u32 = 3;

#[derive(Debug, Clone)]
enum Step {
    /// The node starts (again, if it ran: the old process is gone).
    Boot(usize),
    /// The node's process dies.
    Kill(usize),
    /// The node's link to the store changes.
    Link(usize, Link),
    /// The node's heartbeat runs.
    Beat(usize),
    /// A new session for a room reaches the node.
    Request(usize, usize),
    /// The node drains.
    Drain(usize),
    /// Time passes.
    Wait(u64),
}

fn step() -> impl Strategy<Value = Step> {
    let node = 0..NODES;
    let link = prop_oneof![Just(Link::Up), Just(Link::Down), Just(Link::RepliesLost)];
    prop_oneof![
        2 => node.clone().prop_map(Step::Boot),
        1 => node.clone().prop_map(Step::Kill),
        2 => (node.clone(), link).prop_map(|(n, l)| Step::Link(n, l)),
        6 => node.clone().prop_map(Step::Beat),
        6 => (node.clone(), 0..ROOMS.len()).prop_map(|(n, r)| Step::Request(n, r)),
        1 => node.prop_map(Step::Drain),
        4 => (0u64..2_500).prop_map(Step::Wait),
    ]
}

/// One running process of a node: its member, its link, the rooms it has sessions in.
struct Process {
    member: Member,
    store: Arc<MemoryStore>,
    rooms: BTreeSet<String>,
}

struct Cluster {
    store: MemoryStore,
    nodes: Vec<Option<Process>>,
}

fn url(n: usize) -> String {
    format!("http://node-{n}.test")
}

impl Cluster {
    fn boot(&mut self, n: usize) {
        let store = Arc::new(self.store.connection());
        let identity = Identity {
            node: format!("node-{n}"),
            url: url(n),
            relay: None,
        };
        let member = Member::new(store.clone(), identity, LEASE, 100);
        self.nodes[n] = Some(Process {
            member,
            store,
            rooms: BTreeSet::new(),
        });
    }

    async fn run(&mut self, step: &Step) {
        match *step {
            Step::Boot(n) => self.boot(n),
            Step::Kill(n) => self.nodes[n] = None,
            Step::Link(n, link) => {
                if let Some(p) = &self.nodes[n] {
                    p.store.set_link(link);
                }
            }
            Step::Beat(n) => {
                if let Some(p) = &self.nodes[n] {
                    let rooms: Vec<String> = p.rooms.iter().cloned().collect();
                    let load = Load {
                        sessions: rooms.len() as u32,
                        capacity: CAPACITY,
                        ..Load::default()
                    };
                    let _ = p.member.heartbeat(load, &rooms).await;
                }
            }
            Step::Request(n, room) => {
                self.request(n, ROOMS[room]).await;
            }
            Step::Drain(n) => {
                if let Some(p) = &self.nodes[n] {
                    p.member.drain();
                }
            }
            Step::Wait(ms) => tokio::time::advance(Duration::from_millis(ms)).await,
        }
    }

    async fn request(&mut self, n: usize, room: &str) -> Option<Placement> {
        let p = self.nodes[n].as_mut()?;
        let before = p.member.status();
        let placement = p.member.place(room).await;
        match &placement {
            Placement::Here => {
                assert!(before.attached, "placed here while cut off");
                assert!(!before.draining, "placed here while draining");
                p.rooms.insert(room.to_owned());
            }
            Placement::Redirect(to) => {
                assert_ne!(*to, url(n), "redirected to itself");
                assert!(before.attached, "redirected on a stale view");
            }
            Placement::Unavailable => {}
        }
        Some(placement)
    }

    /// Never two live homes, and the store names the one there is.
    async fn check_homes(&self) {
        let observer = self.store.connection();
        for room in ROOMS {
            let homes: Vec<NodeRef> = self
                .nodes
                .iter()
                .flatten()
                .filter(|p| p.member.is_home(room))
                .map(|p| NodeRef {
                    node: p.member.identity().node.clone(),
                    epoch: p.member.status().epoch,
                })
                .collect();
            assert!(homes.len() <= 1, "{room} has two live homes: {homes:?}");
            if let Some(home) = homes.first() {
                let recorded = observer
                    .home(room)
                    .await
                    .expect("the observer's link is up");
                assert_eq!(recorded.as_ref(), Some(home), "{room}: the store disagrees");
            }
        }
    }
}

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime")
}

fn cluster() -> Cluster {
    Cluster {
        store: MemoryStore::new(),
        nodes: (0..NODES).map(|_| None).collect(),
    }
}

impl Cluster {
    /// Runs the steps, checking the homes after each.
    async fn steps(&mut self, steps: &[Step]) {
        for step in steps {
            self.run(step).await;
            self.check_homes().await;
        }
    }
}

fn run(steps: &[Step]) {
    paused().block_on(cluster().steps(steps));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn never_two_live_homes_for_one_room(steps in prop::collection::vec(step(), 1..80)) {
        run(&steps);
    }
}

/// Nodes 0 and 1 booted and registered, each seeing the other.
async fn two_booted() -> Cluster {
    let mut cluster = cluster();
    let start = [Step::Boot(0), Step::Boot(1), Step::Beat(0), Step::Beat(1)];
    cluster.steps(&start).await;
    cluster
}

/// The interleaving the lease exists for: a home cut off from the store keeps believing it
/// is home only until its lease ends, which is before another node can take the room.
#[test]
fn a_cut_off_home_gives_up_before_it_can_be_replaced() {
    paused().block_on(async {
        let mut cluster = two_booted().await;
        assert_eq!(cluster.request(0, "r0").await, Some(Placement::Here));
        cluster
            .steps(&[Step::Link(0, Link::Down), Step::Wait(2_900), Step::Beat(1)])
            .await;
        assert_eq!(
            cluster.request(0, "r0").await,
            Some(Placement::Unavailable),
            "a new session needs the store"
        );
        assert!(
            cluster.nodes[0]
                .as_ref()
                .is_some_and(|p| p.member.is_home("r0")),
            "node 0's lease holds: it is still the home"
        );
        assert_eq!(
            cluster.request(1, "r0").await,
            Some(Placement::Redirect(url(0))),
            "node 0 is still the home"
        );
        cluster.steps(&[Step::Wait(200), Step::Beat(1)]).await;
        assert_eq!(
            cluster.request(0, "r0").await,
            Some(Placement::Unavailable),
            "node 0's lease ran out: cut off, it refuses"
        );
        assert_eq!(cluster.request(1, "r0").await, Some(Placement::Here));
        cluster.check_homes().await;
        assert!(cluster.nodes[1]
            .as_ref()
            .is_some_and(|p| p.member.is_home("r0")));
    });
}

/// A node back under a new epoch claims again the homes of the rooms it still has sessions in,
/// but not one another node took while it was away.
#[test]
fn a_node_back_claims_again_the_homes_no_other_node_took() {
    paused().block_on(async {
        let mut cluster = two_booted().await;
        for room in ["r0", "r1"] {
            assert_eq!(cluster.request(0, room).await, Some(Placement::Here));
        }
        let away = [Step::Link(0, Link::Down), Step::Wait(3_100), Step::Beat(1)];
        cluster.steps(&away).await;
        assert_eq!(cluster.request(1, "r1").await, Some(Placement::Here));
        let back = [Step::Link(0, Link::Up), Step::Beat(0), Step::Beat(1)];
        cluster.steps(&back).await;
        let node_0 = cluster.nodes[0].as_ref().map(|p| &p.member);
        assert!(node_0.is_some_and(|m| m.status().epoch == 2), "a new epoch");
        assert!(node_0.is_some_and(|m| m.is_home("r0")), "claimed again");
        assert!(node_0.is_some_and(|m| !m.is_home("r1")), "node 1 took it");
        assert_eq!(
            cluster.request(1, "r0").await,
            Some(Placement::Redirect(url(0)))
        );
    });
}

/// A draining node back under a new epoch claims none of its rooms' homes: they are to go to
/// the nodes that stay.
#[test]
fn a_draining_node_back_claims_no_home() {
    paused().block_on(async {
        let mut cluster = two_booted().await;
        assert_eq!(cluster.request(0, "r0").await, Some(Placement::Here));
        let away = [Step::Link(0, Link::Down), Step::Wait(3_100), Step::Drain(0)];
        cluster.steps(&away).await;
        cluster
            .steps(&[Step::Link(0, Link::Up), Step::Beat(0)])
            .await;
        let node_0 = cluster.nodes[0].as_ref().map(|p| &p.member);
        assert!(node_0.is_some_and(|m| m.status().attached && !m.is_home("r0")));
        cluster.steps(&[Step::Beat(1)]).await;
        assert_eq!(cluster.request(1, "r0").await, Some(Placement::Here));
        assert!(cluster.nodes[1]
            .as_ref()
            .is_some_and(|p| p.member.is_home("r0")));
    });
}
