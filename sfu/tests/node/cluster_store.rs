//! The cluster store's behaviour, the same tests against the in-memory store (paused time,
//! exact) and against a real redis-server (`redis_*`, ignored by default: `.ci/run` runs them
//! with `-- --ignored redis_`).

use std::collections::BTreeSet;
use std::time::Duration;

use sfu::node::cluster::directory::Hosted;
use sfu::node::cluster::memory::MemoryStore;
use sfu::node::cluster::redis::RedisStore;
use sfu::node::cluster::{ClusterStore, Load, NodeRef, NodeState, Registration, StoreError};

use crate::redis::Redis;

/// Long enough that a real server's round trips are small beside it.
const LEASE: Duration = Duration::from_millis(600);

pub fn registration(node: &str, epoch: u64) -> Registration {
    Registration {
        node: node.to_owned(),
        epoch,
        url: format!("http://{node}.test"),
        relay: None,
        state: NodeState::Serving,
        load: Load {
            sessions: 1,
            capacity: 10,
            cpu_percent: 5,
            outbound_kbps: 2_000,
        },
    }
}

fn boot(node: &str, epoch: u64) -> NodeRef {
    NodeRef {
        node: node.to_owned(),
        epoch,
    }
}

fn rooms(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

async fn register(store: &dyn ClusterStore, node: &str, epoch: u64, homes: &[&str]) -> Vec<bool> {
    store
        .register(&registration(node, epoch), &rooms(homes), LEASE)
        .await
        .expect("registered")
}

/// The registrations the store lists.
async fn registered(store: &dyn ClusterStore) -> Result<Vec<Registration>, StoreError> {
    let listed = store.nodes().await?;
    Ok(listed.into_iter().map(|l| l.registration).collect())
}

/// Nodes `a` and `b` booted (epoch 1) and registered.
async fn two_nodes(store: &dyn ClusterStore) -> (NodeRef, NodeRef) {
    for node in ["a", "b"] {
        store.next_epoch(node).await.expect("epoch");
        register(store, node, 1, &[]).await;
    }
    (boot("a", 1), boot("b", 1))
}

async fn epochs_count_per_node(store: &dyn ClusterStore) {
    assert_eq!(store.next_epoch("a").await, Ok(1));
    assert_eq!(store.next_epoch("a").await, Ok(2));
    assert_eq!(store.next_epoch("b").await, Ok(1));
}

async fn an_older_epoch_is_fenced(store: &dyn ClusterStore) {
    store.next_epoch("a").await.expect("epoch 1");
    store.next_epoch("a").await.expect("epoch 2");
    let old = store.register(&registration("a", 1), &[], LEASE).await;
    assert_eq!(old, Err(StoreError::Fenced));
    assert_eq!(
        registered(store).await,
        Ok(vec![]),
        "the fenced write is void"
    );
    register(store, "a", 2, &[]).await;
    assert_eq!(registered(store).await, Ok(vec![registration("a", 2)]));
    let unknown = store.register(&registration("z", 1), &[], LEASE).await;
    assert_eq!(unknown, Err(StoreError::Fenced), "no epoch was taken");
}

async fn a_registration_lives_while_refreshed(store: &dyn ClusterStore) {
    store.next_epoch("a").await.expect("epoch");
    register(store, "a", 1, &[]).await;
    tokio::time::sleep(LEASE / 2).await;
    register(store, "a", 1, &[]).await;
    tokio::time::sleep(LEASE * 3 / 4).await;
    let listed = store.nodes().await.expect("listed");
    assert_eq!(listed.len(), 1, "refreshed");
    assert!(
        listed[0].left <= LEASE / 4,
        "a quarter of the lease left at most: {:?}",
        listed[0].left
    );
    tokio::time::sleep(LEASE / 2).await;
    assert_eq!(registered(store).await, Ok(vec![]), "expired");
}

async fn a_home_is_taken_over_only_from_a_dead_node(store: &dyn ClusterStore) {
    let (a, b) = two_nodes(store).await;
    assert_eq!(store.claim_home("r", &a, LEASE).await, Ok(a.clone()));
    assert_eq!(
        store.claim_home("r", &b, LEASE).await,
        Ok(a.clone()),
        "a lives"
    );
    assert_eq!(store.home("r").await, Ok(Some(a.clone())));
    // b's heartbeats go on, a's stop: its registration, then its home, expire.
    tokio::time::sleep(LEASE / 2).await;
    register(store, "b", 1, &[]).await;
    tokio::time::sleep(LEASE * 3 / 4).await;
    assert_eq!(store.home("r").await, Ok(None));
    assert_eq!(store.claim_home("r", &b, LEASE).await, Ok(b.clone()));
    assert_eq!(store.home("r").await, Ok(Some(b)));
}

async fn a_reboot_voids_the_homes_of_the_boot_before(store: &dyn ClusterStore) {
    let (old_a, b) = two_nodes(store).await;
    assert_eq!(
        store.claim_home("r", &old_a, LEASE).await,
        Ok(old_a.clone())
    );
    assert_eq!(store.next_epoch("a").await, Ok(2));
    register(store, "a", 2, &[]).await;
    assert_eq!(store.home("r").await, Ok(None), "a's epoch 1 is gone");
    assert_eq!(
        store.claim_home("r", &old_a, LEASE).await,
        Err(StoreError::NotRegistered),
        "the old boot cannot claim"
    );
    assert_eq!(store.claim_home("r", &b, LEASE).await, Ok(b.clone()));
    let kept = store
        .register(&registration("a", 1), &rooms(&["r"]), LEASE)
        .await;
    assert_eq!(kept, Err(StoreError::Fenced), "nor refresh what it held");
}

async fn a_heartbeat_extends_the_homes_it_holds(store: &dyn ClusterStore) {
    let (a, b) = two_nodes(store).await;
    assert_eq!(store.claim_home("mine", &a, LEASE).await, Ok(a.clone()));
    assert_eq!(store.claim_home("theirs", &b, LEASE).await, Ok(b.clone()));
    let held = register(store, "a", 1, &["mine", "theirs", "nobody's"]).await;
    assert_eq!(held, [true, false, false]);
    // b stops; a's beats keep its registration and its home, b's home expires with b.
    for _ in 0..3 {
        tokio::time::sleep(LEASE / 2).await;
        register(store, "a", 1, &["mine"]).await;
    }
    assert_eq!(store.home("mine").await, Ok(Some(a.clone())));
    assert_eq!(store.home("theirs").await, Ok(None));
    assert_eq!(store.claim_home("theirs", &a, LEASE).await, Ok(a));
}

async fn a_node_that_leaves_takes_its_homes(store: &dyn ClusterStore) {
    let (a, b) = two_nodes(store).await;
    assert_eq!(store.claim_home("r", &a, LEASE).await, Ok(a.clone()));
    let old = boot("b", 0);
    store
        .deregister(&old, &rooms(&["r"]))
        .await
        .expect("a no-op");
    assert_eq!(
        store.nodes().await.map(|n| n.len()),
        Ok(2),
        "a stale boot leaves nothing"
    );
    store.deregister(&a, &rooms(&["r"])).await.expect("left");
    assert_eq!(registered(store).await, Ok(vec![registration("b", 1)]));
    assert_eq!(store.home("r").await, Ok(None));
    assert_eq!(store.claim_home("r", &b, LEASE).await, Ok(b));
}

/// The room directory: each node's entry read while it stands and its node lives with the
/// epoch that wrote it; a reboot voids the entries of the boot before, an empty list removes
/// the node's, and an entry not written again lapses.
async fn the_directory_lists_live_boots_entries_only(store: &dyn ClusterStore) {
    let (a, b) = two_nodes(store).await;
    let hosted = |node: &NodeRef, names: &[&str]| Hosted {
        node: node.clone(),
        publishers: rooms(names),
    };
    store
        .set_hosted("r", &a, &rooms(&["alice"]), LEASE)
        .await
        .expect("written");
    store
        .set_hosted("r", &b, &rooms(&["bob", "carol"]), LEASE)
        .await
        .expect("written");
    let mut read = store.hosted("r").await.expect("read");
    read.sort_by(|x, y| x.node.node.cmp(&y.node.node));
    assert_eq!(
        read,
        vec![hosted(&a, &["alice"]), hosted(&b, &["bob", "carol"])]
    );
    assert_eq!(store.hosted("other").await, Ok(vec![]));

    // b boots again: its entry of the boot before is void at once.
    assert_eq!(store.next_epoch("b").await, Ok(2));
    register(store, "b", 2, &[]).await;
    assert_eq!(store.hosted("r").await, Ok(vec![hosted(&a, &["alice"])]));

    store
        .set_hosted("r", &a, &[], LEASE)
        .await
        .expect("cleared");
    assert_eq!(store.hosted("r").await, Ok(vec![]));
    let b2 = boot("b", 2);
    store
        .set_hosted("r", &b2, &rooms(&["bob"]), LEASE)
        .await
        .expect("written");
    register(store, "a", 1, &[]).await;
    tokio::time::sleep(LEASE / 2).await;
    register(store, "b", 2, &[]).await;
    tokio::time::sleep(LEASE * 3 / 4).await;
    assert_eq!(
        store.hosted("r").await,
        Ok(vec![]),
        "not written again, lapsed"
    );
}

/// The parts of room `r` read back after `node` wrote `part`: the home and, by node, each part.
async fn exchange(
    store: &dyn ClusterStore,
    node: &str,
    part: &str,
) -> Option<(NodeRef, Vec<(String, String)>)> {
    let parts = store
        .exchange_part("r", node, part, LEASE, false)
        .await
        .expect("the store");
    parts.map(|mut p| {
        p.parts.sort();
        (p.home, p.parts)
    })
}

fn parts(written: &[(&str, &str)]) -> Vec<(String, String)> {
    written
        .iter()
        .map(|(n, p)| ((*n).to_owned(), (*p).to_owned()))
        .collect()
}

async fn a_rooms_parts_live_under_its_home(store: &dyn ClusterStore) {
    let (a, b) = two_nodes(store).await;
    assert_eq!(
        exchange(store, "a", "{}").await,
        None,
        "no home: nothing written"
    );
    assert_eq!(store.claim_home("r", &a, LEASE).await, Ok(a.clone()));
    let first = exchange(store, "a", "a1").await;
    assert_eq!(first, Some((a.clone(), parts(&[("a", "a1")]))));
    let both = exchange(store, "b", "b1\nwith a line break").await;
    let written = parts(&[("a", "a1"), ("b", "b1\nwith a line break")]);
    assert_eq!(both, Some((a.clone(), written)));
    assert_eq!(
        exchange(store, "a", "a2").await.map(|(_, p)| p),
        Some(parts(&[("a", "a2"), ("b", "b1\nwith a line break")])),
        "written again, in place"
    );
    // a dies: its registration, then its home, go; its part is void with its home, and b's
    // under the new home starts alone.
    tokio::time::sleep(LEASE / 2).await;
    register(store, "b", 1, &[]).await;
    tokio::time::sleep(LEASE * 3 / 4).await;
    assert_eq!(exchange(store, "b", "b2").await, None, "no live home");
    assert_eq!(store.claim_home("r", &b, LEASE).await, Ok(b.clone()));
    assert_eq!(
        exchange(store, "b", "b3").await,
        Some((b, parts(&[("b", "b3")])))
    );
}

/// Waits until the store's inbox is told of a room (a real server's subscription takes a
/// round trip): the rooms told of.
async fn told(store: &dyn ClusterStore) -> BTreeSet<String> {
    let told = tokio::time::timeout(Duration::from_secs(5), store.inbox().told()).await;
    assert!(told.is_ok(), "no notice");
    store.inbox().take()
}

async fn a_write_told_reaches_the_rooms_listeners(store: &dyn ClusterStore) {
    let (a, _b) = two_nodes(store).await;
    assert_eq!(store.claim_home("r", &a, LEASE).await, Ok(a.clone()));
    // Listening as b: once subscribed, every room listened to is to be read once.
    store.inbox().listen("b", &rooms(&["r", "s"]));
    store.heard();
    assert_eq!(told(store).await, BTreeSet::from(["r".into(), "s".into()]));
    // a writes its part twice, telling only the second time: b is told once.
    exchange(store, "a", "a1").await.expect("a home");
    let written = store.exchange_part("r", "a", "a2", LEASE, true).await;
    assert!(written.expect("the store").is_some());
    assert_eq!(told(store).await, BTreeSet::from(["r".into()]));
    let counts = store.inbox().take_counts();
    assert_eq!((counts.received, counts.refused), (1, 0));
    let read = store.read_parts("r").await.expect("the store");
    assert_eq!(
        read.map(|r| (r.home, r.parts)),
        Some((a, parts(&[("a", "a2")])))
    );
    assert_eq!(store.read_parts("s").await, Ok(None), "no home");
}

/// Each behaviour against a fresh store of each kind.
macro_rules! against_both {
    ($($name:ident, $redis_name:ident;)*) => {$(
        #[tokio::test(start_paused = true)]
        async fn $name() {
            super::$name(&MemoryStore::new()).await;
        }

        #[tokio::test]
        #[ignore = "needs redis-server: .ci/run runs it (-- --ignored redis_)"]
        async fn $redis_name() {
            let server = Redis::start();
            let store = RedisStore::open(&server.url, Duration::from_secs(2)).expect("opens");
            super::$name(&store).await;
        }
    )*};
}

mod both {
    use super::*;
    against_both! {
        epochs_count_per_node, redis_epochs_count_per_node;
        an_older_epoch_is_fenced, redis_an_older_epoch_is_fenced;
        a_registration_lives_while_refreshed, redis_a_registration_lives_while_refreshed;
        a_home_is_taken_over_only_from_a_dead_node, redis_a_home_is_taken_over_only_from_a_dead_node;
        a_reboot_voids_the_homes_of_the_boot_before, redis_a_reboot_voids_the_homes_of_the_boot_before;
        a_heartbeat_extends_the_homes_it_holds, redis_a_heartbeat_extends_the_homes_it_holds;
        a_node_that_leaves_takes_its_homes, redis_a_node_that_leaves_takes_its_homes;
        the_directory_lists_live_boots_entries_only, redis_the_directory_lists_live_boots_entries_only;
        a_rooms_parts_live_under_its_home, redis_a_rooms_parts_live_under_its_home;
        a_write_told_reaches_the_rooms_listeners, redis_a_write_told_reaches_the_rooms_listeners;
    }
}
