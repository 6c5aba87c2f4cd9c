//! This node as a member of the cluster: its boot epoch, its lease (until when its last
//! registration is sure to stand), its load as last measured, the other nodes as last read,
//! and the rooms it is home of. The heartbeat refreshes it; each new session asks it where to
//! go.
//!
//! A lease starts when the request that set it was sent, so it ends no later than the store's
//! own record of it: while the lease holds, no other node can take a home from this one, so a
//! node that believes it is a room's home (see [`is_home`](Member::is_home)) is the only one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::directory::to_pull;
use super::placement::{elsewhere, preferred_home, Placement};
use super::room_part::Part;
use super::store::{ClusterStore, Load, NodeRef, NodeState, Registration, StoreError};
use crate::node::core::FollowedNode;

/// Who this node is to the other nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The node id, the same across restarts.
    pub node: String,
    /// Where clients reach its HTTP routes.
    pub url: String,
    /// Where the relay between nodes reaches it.
    pub relay: Option<String>,
}

/// The node's part in the cluster, shared by its heartbeat, its HTTP routes and its drain.
#[derive(Debug)]
pub struct Member {
    store: Arc<dyn ClusterStore>,
    identity: Identity,
    lease: Duration,
    home_below: u32,
    state: Mutex<State>,
    /// Woken to send a heartbeat now (a drain begins).
    beat_now: Notify,
    counters: Counters,
}

#[derive(Debug, Default)]
struct State {
    epoch: Option<u64>,
    /// Until when the last registration stands.
    lease_until: Option<Instant>,
    draining: bool,
    /// Left the cluster: no more registrations.
    left: bool,
    load: Load,
    /// The other nodes, as the last heartbeat read them, each with when its registration
    /// is gone at the latest (unless refreshed since): a node that died leaves this view
    /// with its registration, not a heartbeat later.
    others: Vec<(Registration, Instant)>,
    /// The rooms this node is home of, each until when its home record stands.
    homes: HashMap<String, Instant>,
    /// The rooms whose publishers this node last listed in the directory.
    listed: Vec<String>,
}

impl State {
    /// The other nodes whose registration may still stand at `now`.
    fn peers(&self, now: Instant) -> impl Iterator<Item = &Registration> {
        self.others
            .iter()
            .filter(move |(_, until)| *until > now)
            .map(|(registration, _)| registration)
    }
}

/// What `/metrics` shows of the member.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) here: AtomicU64,
    pub(super) redirected: AtomicU64,
    pub(super) unavailable: AtomicU64,
    pub(super) store_unavailable: AtomicU64,
    pub(super) fenced: AtomicU64,
    pub(super) epochs: AtomicU64,
    /// The room feed's requests to the store that failed ...
    pub(super) feed_unavailable: AtomicU64,
    /// ... and the parts it read that did not read as one.
    pub(super) parts_unreadable: AtomicU64,
    /// Notices of rooms' changes sent to their other nodes, ...
    pub(super) notices_sent: AtomicU64,
    /// ... received from them, ...
    pub(super) notices_received: AtomicU64,
    /// ... and refused (not a room's notice), ...
    pub(super) notices_refused: AtomicU64,
    /// ... and the subscription to them failed or lost.
    pub(super) subscription_lost: AtomicU64,
    /// Relay requests refused before they reached a core, by reason (in
    /// [`LinkError::LABELS`](super::relay_link::LinkError::LABELS)' order).
    pub(super) relay_refused: [AtomicU64; 7],
    /// Joins that went on before the relay's pulls they asked for were done.
    pub(super) join_pulls_late: AtomicU64,
}

/// The member's state at a glance, for `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// The lease holds: the node takes new sessions (unless draining or full).
    pub attached: bool,
    /// Draining: no new sessions.
    pub draining: bool,
    /// The boot epoch, 0 before the first.
    pub epoch: u64,
    /// Other nodes that take sessions, as last read.
    pub serving_others: usize,
    /// Rooms homed here.
    pub homes: usize,
}

impl Member {
    /// A member that has not registered yet: it refuses new sessions until its first
    /// heartbeat registers it. `home_below`: see [`elsewhere`].
    pub fn new(
        store: Arc<dyn ClusterStore>,
        identity: Identity,
        lease: Duration,
        home_below: u32,
    ) -> Self {
        Self {
            store,
            identity,
            lease,
            home_below,
            state: Mutex::default(),
            beat_now: Notify::new(),
            counters: Counters::default(),
        }
    }

    /// Registers with `load` (taking a new epoch first when the lease has run out, or on
    /// the first beat), extends the homes of `live_rooms` (rooms with a session here) this
    /// node holds, and reads the other nodes. Homes of rooms without a session here are
    /// left to expire.
    ///
    /// A node fenced by the store registers anew at once, under a new epoch: after the store
    /// lost its data (a Redis server restarted empty) it is back within one beat.
    pub async fn heartbeat(&self, load: Load, live_rooms: &[String]) -> Result<(), StoreError> {
        match self.beat(load, live_rooms).await {
            Err(StoreError::Fenced) => self.beat(load, live_rooms).await,
            result => result,
        }
    }

    async fn beat(&self, load: Load, live_rooms: &[String]) -> Result<(), StoreError> {
        if self.state.lock().left {
            return Ok(());
        }
        let start = Instant::now();
        let result = self.register(start, load, live_rooms).await;
        match &result {
            Err(StoreError::Fenced) => {
                self.counters.fenced.fetch_add(1, Ordering::Relaxed);
                let mut state = self.state.lock();
                state.epoch = None;
                state.lease_until = None;
                state.homes.clear();
            }
            Err(_) => {
                self.counters
                    .store_unavailable
                    .fetch_add(1, Ordering::Relaxed);
            }
            Ok(()) => {}
        }
        result
    }

    async fn register(
        &self,
        start: Instant,
        load: Load,
        live_rooms: &[String],
    ) -> Result<(), StoreError> {
        let (epoch, renewing) = match self.current_epoch(start) {
            Some(epoch) => (epoch, true),
            None => (self.new_epoch().await?, false),
        };
        let (registration, rooms) = {
            let mut state = self.state.lock();
            state.load = load;
            let rooms: Vec<String> = live_rooms
                .iter()
                .filter(|room| state.homes.contains_key(*room))
                .cloned()
                .collect();
            (self.registration(epoch, &state), rooms)
        };
        let held = self
            .store
            .register(&registration, &rooms, self.lease)
            .await?;
        {
            let mut state = self.state.lock();
            // A lease that ran out while the write was on its way is not renewed by it: the
            // node was cut off meanwhile (and refused sessions), so it registers anew, under a
            // new epoch, as after any lapse.
            if renewing && state.lease_until.is_none_or(|t| t <= Instant::now()) {
                state.lease_until = None;
                return Err(StoreError::Unavailable(
                    "the lease ran out before the store answered".into(),
                ));
            }
            let until = start + self.lease;
            state.lease_until = Some(until);
            for (room, held) in rooms.into_iter().zip(held) {
                if held {
                    state.homes.insert(room, until);
                } else {
                    state.homes.remove(&room);
                }
            }
            state.homes.retain(|_, until| *until > start);
        }
        self.claim_unheld(epoch, live_rooms).await?;
        self.read_others().await
    }

    /// Reads the other nodes' registrations from the store.
    async fn read_others(&self) -> Result<(), StoreError> {
        let asked = Instant::now();
        let others = self.store.nodes().await?;
        let me = &self.identity.node;
        self.state.lock().others = others
            .into_iter()
            .filter(|listed| listed.registration.node != *me)
            .map(|listed| (listed.registration, asked + listed.left))
            .collect();
        Ok(())
    }

    /// The other nodes, as the last heartbeat read them, or read again now when they lack
    /// one `known` wants (a node that registered since: a pull from it need not wait for
    /// the next heartbeat).
    async fn peers_knowing(&self, known: impl Fn(&[Registration]) -> bool) -> Vec<Registration> {
        let peers = self.peers();
        if known(&peers) {
            return peers;
        }
        if let Err(failed) = self.read_others().await {
            tracing::debug!(%failed, "the other nodes were not read again");
        }
        self.peers()
    }

    /// Claims the homes of the rooms with a session here that this node holds no home for:
    /// after a new epoch (its earlier homes are void, or the store lost them) and when their
    /// home is gone (its node died). A room another live node holds stays its. A draining
    /// node claims none: it is to hand its rooms over.
    async fn claim_unheld(&self, epoch: u64, live_rooms: &[String]) -> Result<(), StoreError> {
        let unheld: Vec<&String> = {
            let state = self.state.lock();
            if state.draining {
                return Ok(());
            }
            live_rooms
                .iter()
                .filter(|room| !state.homes.contains_key(*room))
                .collect()
        };
        let me = NodeRef {
            node: self.identity.node.clone(),
            epoch,
        };
        for room in unheld {
            let start = Instant::now();
            if self.store.claim_home(room, &me, self.lease).await? == me {
                let mut state = self.state.lock();
                if state.epoch == Some(epoch) {
                    state.homes.insert(room.clone(), start + self.lease);
                }
            }
        }
        Ok(())
    }

    /// The epoch, while its lease holds.
    fn current_epoch(&self, now: Instant) -> Option<u64> {
        let state = self.state.lock();
        state
            .epoch
            .filter(|_| state.lease_until.is_some_and(|t| t > now))
    }

    /// A new boot epoch: whatever the last one wrote (its homes) is void from now on.
    async fn new_epoch(&self) -> Result<u64, StoreError> {
        let epoch = self.store.next_epoch(&self.identity.node).await?;
        self.counters.epochs.fetch_add(1, Ordering::Relaxed);
        let mut state = self.state.lock();
        state.epoch = Some(epoch);
        state.homes.clear();
        Ok(epoch)
    }

    fn registration(&self, epoch: u64, state: &State) -> Registration {
        Registration {
            node: self.identity.node.clone(),
            epoch,
            url: self.identity.url.clone(),
            relay: self.identity.relay.clone(),
            state: match state.draining {
                true => NodeState::Draining,
                false => NodeState::Serving,
            },
            load: state.load,
        }
    }

    /// Where a new session for `room` goes. Here when this node is registered, serving and
    /// not full, and the room's home (claimed here if it has none) is this node or is not to
    /// be preferred; elsewhere when this node drains or is full; unavailable when this node
    /// is cut off from the store, or no node can take it.
    pub async fn place(&self, room: &str) -> Placement {
        let placement = self.choose(room).await;
        let counter = match placement {
            Placement::Here => &self.counters.here,
            Placement::Redirect(_) => &self.counters.redirected,
            Placement::Unavailable => &self.counters.unavailable,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        placement
    }

    async fn choose(&self, room: &str) -> Placement {
        let start = Instant::now();
        let (me, stays) = {
            let state = self.state.lock();
            let Some(epoch) = state.epoch.filter(|_| state.lease_until > Some(start)) else {
                return Placement::Unavailable;
            };
            let me = NodeRef {
                node: self.identity.node.clone(),
                epoch,
            };
            (me, !state.draining && !state.load.full())
        };
        if !stays {
            return match self.store.home(room).await {
                Ok(home) => self.redirect(elsewhere(&self.peers(), home.as_ref(), self.home_below)),
                Err(_) => Placement::Unavailable,
            };
        }
        match self.store.claim_home(room, &me, self.lease).await {
            Ok(home) if home == me => {
                let mut state = self.state.lock();
                state.homes.insert(room.to_owned(), start + self.lease);
                state.load.sessions += 1;
                Placement::Here
            }
            Ok(home) => {
                let others = self.peers();
                match preferred_home(&others, Some(&home), self.home_below) {
                    Some(home) => Placement::Redirect(home.url.clone()),
                    None => {
                        self.state.lock().load.sessions += 1;
                        Placement::Here
                    }
                }
            }
            Err(_) => Placement::Unavailable,
        }
    }

    fn redirect(&self, to: Option<&Registration>) -> Placement {
        to.map_or(Placement::Unavailable, |r| {
            Placement::Redirect(r.url.clone())
        })
    }

    /// The other nodes, as the last heartbeat read them.
    pub fn peers(&self) -> Vec<Registration> {
        let now = Instant::now();
        let state = self.state.lock();
        state.peers(now).cloned().collect()
    }

    /// The registration of `room`'s home when it is another node (read again when the last
    /// heartbeat did not know it): where the media relay pulls the room's publishers from.
    pub async fn home_elsewhere(&self, room: &str) -> Option<Registration> {
        let home = self.store.home(room).await.ok()??;
        if home.node == self.identity.node {
            return None;
        }
        let peers = self
            .peers_knowing(|peers| peers.iter().any(|r| r.node_ref() == home))
            .await;
        peers.into_iter().find(|r| r.node_ref() == home)
    }

    /// Lists in the directory the publishers this node hosts in each room of `hosted`
    /// (standing for a lease), and clears the rooms it listed last time and hosts none in
    /// now. Nothing while the node is not registered.
    pub async fn list_hosted(&self, hosted: &[(String, Vec<String>)]) -> Result<(), StoreError> {
        let Some(me) = self.me() else {
            return Ok(());
        };
        let gone: Vec<String> = {
            let state = self.state.lock();
            let listed = state.listed.iter();
            listed
                .filter(|room| !hosted.iter().any(|(r, _)| r == *room))
                .cloned()
                .collect()
        };
        for room in &gone {
            self.store.set_hosted(room, &me, &[], self.lease).await?;
        }
        for (room, names) in hosted {
            self.store.set_hosted(room, &me, names, self.lease).await?;
        }
        self.state.lock().listed = hosted.iter().map(|(room, _)| room.clone()).collect();
        Ok(())
    }

    /// The publishers of `room` another live node hosts and `here` (the names of the room's
    /// publishers on this node) lacks, each with its node's registration: what the relay
    /// pulls, and from where.
    pub async fn hosted_elsewhere(
        &self,
        room: &str,
        here: &[String],
    ) -> Result<Vec<(Registration, String)>, StoreError> {
        let entries = self.store.hosted(room).await?;
        let wanted = to_pull(&entries, &self.identity.node, here);
        let peers = self
            .peers_knowing(|peers| {
                let mut nodes = wanted.iter().map(|(node, _)| node);
                nodes.all(|node| peers.iter().any(|r| r.node_ref() == *node))
            })
            .await;
        Ok(wanted
            .into_iter()
            .filter_map(|(node, name)| {
                let registration = peers.iter().find(|r| r.node_ref() == node)?;
                Some((registration.clone(), name))
            })
            .collect())
    }

    /// The node `node` while its registration may stand: as the last heartbeat read it, or
    /// as the store has it now.
    pub async fn peer(&self, node: &str) -> Option<Registration> {
        let peers = self
            .peers_knowing(|peers| peers.iter().any(|r| r.node == node))
            .await;
        peers.into_iter().find(|r| r.node == node)
    }

    /// What each other live node holds of `room`, from its part of the room's state in the
    /// store (under the room's live home): whom a participant joining here pulls from. Parts
    /// that do not read are left out (the room feed counts them).
    pub async fn room_nodes(
        &self,
        room: &str,
    ) -> Result<Vec<(Registration, FollowedNode)>, StoreError> {
        let Some(parts) = self.store.read_parts(room).await? else {
            return Ok(Vec::new());
        };
        let me = &self.identity.node;
        let peers = self
            .peers_knowing(|peers| {
                let mut nodes = parts.parts.iter().map(|(node, _)| node);
                nodes.all(|node| node == me || peers.iter().any(|r| r.node == *node))
            })
            .await;
        let nodes = parts.parts.into_iter().filter_map(|(node, json)| {
            let registration = peers.iter().find(|r| r.node == node)?;
            let part = Part::read(json.as_bytes()).ok()?;
            Some((registration.clone(), part.node(&node)))
        });
        Ok(nodes.collect())
    }

    /// This boot, while its lease holds.
    fn me(&self) -> Option<NodeRef> {
        let epoch = self.current_epoch(Instant::now())?;
        Some(NodeRef {
            node: self.identity.node.clone(),
            epoch,
        })
    }

    /// Whether this node is the home of `room` now: it claimed it (or kept it) and the record
    /// is sure to stand. Never true of two nodes at once.
    pub fn is_home(&self, room: &str) -> bool {
        let now = Instant::now();
        let state = self.state.lock();
        state.lease_until.is_some_and(|t| t > now)
            && state.homes.get(room).is_some_and(|until| *until > now)
    }

    /// Stops taking new sessions, and has the next heartbeat (sent now) tell the others.
    pub fn drain(&self) {
        self.state.lock().draining = true;
        self.beat_now.notify_one();
    }

    /// Woken when a heartbeat should go now rather than at its time.
    pub async fn beat_requested(&self) {
        self.beat_now.notified().await;
    }

    /// Leaves the cluster for good: the registration and this node's homes are removed, and
    /// heartbeats from now on do nothing.
    pub async fn leave(&self) -> Result<(), StoreError> {
        let (epoch, rooms) = {
            let mut state = self.state.lock();
            state.left = true;
            state.lease_until = None;
            (state.epoch, state.homes.keys().cloned().collect::<Vec<_>>())
        };
        let Some(epoch) = epoch else { return Ok(()) };
        let me = NodeRef {
            node: self.identity.node.clone(),
            epoch,
        };
        self.store.deregister(&me, &rooms).await
    }

    /// The member at a glance.
    pub fn status(&self) -> Status {
        let now = Instant::now();
        let state = self.state.lock();
        Status {
            attached: state.lease_until.is_some_and(|t| t > now),
            draining: state.draining,
            epoch: state.epoch.unwrap_or(0),
            serving_others: state.peers(now).filter(|r| r.takes_sessions()).count(),
            homes: state.homes.values().filter(|until| **until > now).count(),
        }
    }

    /// Who this node is to the others.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    pub(super) fn counters(&self) -> &Counters {
        &self.counters
    }
}
