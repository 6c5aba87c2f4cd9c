//! The cluster store: what the nodes of a cluster share, behind a small trait so that the
//! node is tested against an in-memory store and runs against Redis.
//!
//! It holds three things. A boot epoch per node id, a counter each boot of the node takes the
//! next value of. A registration per node, written with a time to live that the node's
//! heartbeat refreshes; it is only written while its epoch is the node's latest, so a node
//! that booted again voids everything its older boot writes (fencing). And a home per room:
//! the node id and epoch that hold it, taken by compare-and-set only when no live node holds
//! it ("live": registered, with that epoch). A room's state as each of its nodes holds part of
//! it is kept under the home's [`NodeRef`], so that it too is void with its epoch.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::directory::Hosted;
use super::notice::Inbox;

/// A store operation in flight; `Send`, so a node's tasks can await it.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// What the nodes of a cluster share. Every operation is atomic in the store: two nodes
/// racing for one room's home see one winner.
pub trait ClusterStore: Send + Sync + fmt::Debug {
    /// The next boot epoch of `node`: greater than every one handed out before (as long as
    /// the store keeps its data), and from now on the only one its registration takes.
    fn next_epoch<'a>(&'a self, node: &'a str) -> StoreFuture<'a, u64>;

    /// Writes the node's registration to live for `ttl`, and extends by `ttl` the homes of
    /// `rooms` it still holds; says, per room, whether it holds it. [`StoreError::Fenced`]
    /// when the registration's epoch is no longer the node's latest.
    fn register<'a>(
        &'a self,
        registration: &'a Registration,
        rooms: &'a [String],
        ttl: Duration,
    ) -> StoreFuture<'a, Vec<bool>>;

    /// Every node registered now, each with the time its registration has left.
    fn nodes(&self) -> StoreFuture<'_, Vec<Listed>>;

    /// Makes `claimant` the home of `room` for `ttl` unless a live node other than it holds
    /// it; the home after the call. [`StoreError::NotRegistered`] when the claimant is not
    /// live itself (its registration expired, or it carries another epoch).
    fn claim_home<'a>(
        &'a self,
        room: &'a str,
        claimant: &'a NodeRef,
        ttl: Duration,
    ) -> StoreFuture<'a, NodeRef>;

    /// The live home of `room`, if it has one.
    fn home<'a>(&'a self, room: &'a str) -> StoreFuture<'a, Option<NodeRef>>;

    /// Removes the node's registration and the homes of `rooms` it holds, when `node` is
    /// still its latest epoch (a node leaving the cluster).
    fn deregister<'a>(&'a self, node: &'a NodeRef, rooms: &'a [String]) -> StoreFuture<'a, ()>;

    // The room directory (see [`directory`](super::directory)): which node hosts which
    // publisher of a room, for the media relay to pull each from its node.

    /// Writes `node`'s entry of `room`: the publishers it hosts there, standing for `ttl`;
    /// none removes it.
    fn set_hosted<'a>(
        &'a self,
        room: &'a str,
        node: &'a NodeRef,
        publishers: &'a [String],
        ttl: Duration,
    ) -> StoreFuture<'a, ()>;

    /// The entries of `room` whose node is registered now with the epoch they name.
    fn hosted<'a>(&'a self, room: &'a str) -> StoreFuture<'a, Vec<Hosted>>;

    // ---- Following a room's state (`room_feed`) ----
    //
    // Each node of a clustered room keeps its part of the room's state (its participants,
    // their tracks, its speaker candidate; the home's part also the room's speaker) in the
    // store under the room's home, each part under its own lease, and reads the others'. A
    // node that wrote a change tells the room's other nodes (a [`notice`](super::notice)),
    // which read the room when told.

    /// Writes `part`, what `node` holds of `room`, under the room's live home to live for
    /// `ttl`, and reads every part under that home that still lives, this one included; with
    /// `tell`, publishes a notice of the write to the nodes listening to the room. `None`, and
    /// nothing written, when the room has no live home: the parts written under a home that
    /// died, or whose node booted again, are void with it.
    fn exchange_part<'a>(
        &'a self,
        room: &'a str,
        node: &'a str,
        part: &'a str,
        ttl: Duration,
        tell: bool,
    ) -> StoreFuture<'a, Option<RoomParts>>;

    /// Every part of `room` under its live home that still lives, writing nothing; `None`
    /// when the room has no live home.
    fn read_parts<'a>(&'a self, room: &'a str) -> StoreFuture<'a, Option<RoomParts>>;

    /// Where the notices of the rooms this connection listens to arrive. Which rooms: the
    /// inbox's [`listen`](Inbox::listen), after which [`heard`](Self::heard) has the
    /// connection subscribe to them.
    fn inbox(&self) -> &Arc<Inbox>;

    /// Subscribes to the notices of the rooms the inbox listens to now (a subscription of
    /// the store's own, made again by the store after a loss).
    fn heard(&self);
}

/// What the nodes of a room hold of it, under its home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomParts {
    /// The room's home, whose parts these are.
    pub home: NodeRef,
    /// Each node's part, by node id, as the node wrote it.
    pub parts: Vec<(String, String)>,
}

/// One boot of one node: its id and the epoch it booted with.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeRef {
    /// The node's id, the same across its restarts.
    pub node: String,
    /// The boot epoch.
    pub epoch: u64,
}

impl NodeRef {
    /// `EPOCH NODE`: how a room's home is written in the store.
    pub fn to_value(&self) -> String {
        format!("{} {}", self.epoch, self.node)
    }

    /// Reads [`to_value`](Self::to_value)'s form back.
    pub fn from_value(value: &str) -> Result<Self, StoreError> {
        let bad = || StoreError::Corrupt(format!("a home reads {value:?}"));
        let (epoch, node) = value.split_once(' ').ok_or_else(bad)?;
        Ok(Self {
            node: node.to_owned(),
            epoch: epoch.parse().map_err(|_| bad())?,
        })
    }
}

impl fmt::Display for NodeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.node, self.epoch)
    }
}

/// A node as the others see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    /// The node's id.
    pub node: String,
    /// Its boot epoch.
    pub epoch: u64,
    /// Where its HTTP routes are reached (`https://node-2.example:8443`): redirects go there.
    pub url: String,
    /// Where the relay between nodes reaches it, once there is one.
    pub relay: Option<String>,
    /// Whether it takes new sessions.
    pub state: NodeState,
    /// How busy it is.
    pub load: Load,
}

impl Registration {
    /// The boot this registration is of.
    pub fn node_ref(&self) -> NodeRef {
        NodeRef {
            node: self.node.clone(),
            epoch: self.epoch,
        }
    }

    /// Serving and not full: it may be sent a new session.
    pub fn takes_sessions(&self) -> bool {
        self.state == NodeState::Serving && !self.load.full()
    }
}

/// A registration as read from the store, and how long it had left to live then: a reader
/// that asked at `t` knows it is gone by `t + left` at the latest, unless refreshed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The registration.
    pub registration: Registration,
    /// Its time to live when it was read.
    pub left: Duration,
}

/// Whether a node takes new sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeState {
    /// It takes new sessions.
    Serving,
    /// It is shutting down: it takes none, and exits once its own have ended.
    Draining,
}

/// How busy a node is, as its last heartbeat measured it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Load {
    /// Sessions on the node (WHIP, WHEP, participants).
    pub sessions: u32,
    /// Sessions the node takes at most (its `limits.sessions`).
    pub capacity: u32,
    /// The process's CPU time over the last heartbeat, in percent of all its cores.
    pub cpu_percent: u32,
    /// What it sent over the last heartbeat, kbit/s.
    pub outbound_kbps: u64,
}

impl Load {
    /// No room for another session.
    pub fn full(&self) -> bool {
        self.sessions >= self.capacity
    }

    /// How full it is, in percent: of its sessions or of its CPU, whichever is more.
    pub fn percent(&self) -> u32 {
        let sessions = match self.capacity {
            0 => 100,
            capacity => (u64::from(self.sessions) * 100 / u64::from(capacity)) as u32,
        };
        sessions.max(self.cpu_percent)
    }
}

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The store could not be reached or did not answer in time.
    #[error("the cluster store is unavailable: {0}")]
    Unavailable(String),
    /// A newer boot of the node took its place: what this boot writes is void.
    #[error("fenced: a newer boot of this node registered")]
    Fenced,
    /// The node is not registered with its epoch (its lease lapsed, or it was fenced).
    #[error("this node is not registered with its epoch")]
    NotRegistered,
    /// The store holds something that does not read as what was written there.
    #[error("the cluster store holds a bad value: {0}")]
    Corrupt(String),
}
