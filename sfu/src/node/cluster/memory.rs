//! The cluster store in memory, shared by the in-process nodes of a test. Each node gets its
//! own [`connection`](MemoryStore::connection), whose link can be cut (requests fail) or made
//! to lose replies (requests take effect, the node sees a failure), to model partitions, or to
//! lose the notices meant for it. Leases run on tokio's clock, so tests with paused time
//! control them exactly.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::directory::{Hosted, Table};
use super::notice::{channel, Inbox};
use super::store::{
    ClusterStore, Listed, NodeRef, Registration, RoomParts, StoreError, StoreFuture,
};

/// The shared state, and this connection's link to it.
#[derive(Debug, Default)]
pub struct MemoryStore {
    shared: Arc<Mutex<Shared>>,
    /// This connection's number among the store's (the first is 0).
    id: u64,
    link: Arc<AtomicU8>,
    inbox: Arc<Inbox>,
}

/// What a connection's requests and replies go through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Link {
    /// Both ways.
    Up,
    /// Neither way: requests fail and change nothing.
    Down,
    /// Requests take effect but their replies are lost: the caller sees a failure.
    RepliesLost,
    /// Requests and replies go through, notices to this connection are lost.
    NoticesLost,
}

#[derive(Debug, Default)]
struct Shared {
    epochs: HashMap<String, u64>,
    nodes: HashMap<String, (Registration, Instant)>,
    homes: HashMap<String, (NodeRef, Instant)>,
    directory: Table,
    /// Per room, each node's part: under which home, what, until when.
    parts: HashMap<String, HashMap<String, Part>>,
    /// Per connection that subscribed to notices: its link, its inbox, its rooms.
    listeners: HashMap<u64, Listener>,
    connections: u64,
    /// Parts written, and notices published, since the store began.
    writes: u64,
    notices: u64,
}

#[derive(Debug)]
struct Listener {
    link: Arc<AtomicU8>,
    inbox: Weak<Inbox>,
    rooms: BTreeSet<String>,
}

#[derive(Debug)]
struct Part {
    home: NodeRef,
    value: String,
    until: Instant,
}

impl MemoryStore {
    /// An empty store, and a first connection to it.
    pub fn new() -> Self {
        Self::default()
    }

    /// Another connection to the same store, with its own link (up) and inbox.
    pub fn connection(&self) -> Self {
        let id = {
            let mut shared = self.shared.lock();
            shared.connections += 1;
            shared.connections
        };
        Self {
            shared: self.shared.clone(),
            id,
            link: Arc::default(),
            inbox: Arc::default(),
        }
    }

    /// Parts written, and notices published, through every connection so far.
    pub fn writes(&self) -> (u64, u64) {
        let shared = self.shared.lock();
        (shared.writes, shared.notices)
    }

    /// Sets this connection's link.
    pub fn set_link(&self, link: Link) {
        self.link.store(link as u8, Ordering::Relaxed);
    }

    /// Runs `op` on the shared state as the link lets it.
    fn apply<T: Send + 'static>(
        &self,
        op: impl FnOnce(&mut Shared, Instant) -> Result<T, StoreError>,
    ) -> StoreFuture<'static, T> {
        let link = self.link.load(Ordering::Relaxed);
        let result = if link == Link::Down as u8 {
            Err(StoreError::Unavailable("the link is down".into()))
        } else {
            let now = Instant::now();
            let mut shared = self.shared.lock();
            shared.expire(now);
            let result = op(&mut shared, now);
            if link == Link::RepliesLost as u8 {
                Err(StoreError::Unavailable("the reply was lost".into()))
            } else {
                result
            }
        };
        Box::pin(std::future::ready(result))
    }
}

impl Shared {
    fn expire(&mut self, now: Instant) {
        self.nodes.retain(|_, (_, until)| *until > now);
        self.homes.retain(|_, (_, until)| *until > now);
        for parts in self.parts.values_mut() {
            parts.retain(|_, part| part.until > now);
        }
        self.parts.retain(|_, parts| !parts.is_empty());
    }

    /// Registered with that epoch.
    fn live(&self, node: &NodeRef) -> bool {
        self.nodes
            .get(&node.node)
            .is_some_and(|(r, _)| r.epoch == node.epoch)
    }

    fn latest(&self, node: &NodeRef) -> bool {
        self.epochs.get(&node.node) == Some(&node.epoch)
    }
}

impl ClusterStore for MemoryStore {
    fn next_epoch<'a>(&'a self, node: &'a str) -> StoreFuture<'a, u64> {
        let node = node.to_owned();
        self.apply(move |shared, _| {
            let epoch = shared.epochs.entry(node).or_default();
            *epoch += 1;
            Ok(*epoch)
        })
    }

    fn register<'a>(
        &'a self,
        registration: &'a Registration,
        rooms: &'a [String],
        ttl: Duration,
    ) -> StoreFuture<'a, Vec<bool>> {
        let registration = registration.clone();
        let rooms = rooms.to_vec();
        self.apply(move |shared, now| {
            let me = registration.node_ref();
            if !shared.latest(&me) {
                return Err(StoreError::Fenced);
            }
            let until = now + ttl;
            shared
                .nodes
                .insert(registration.node.clone(), (registration, until));
            let held = rooms.iter().map(|room| match shared.homes.get_mut(room) {
                Some((home, expiry)) if *home == me => {
                    *expiry = until;
                    true
                }
                _ => false,
            });
            Ok(held.collect())
        })
    }

    fn nodes(&self) -> StoreFuture<'_, Vec<Listed>> {
        self.apply(|shared, now| {
            let listed = shared.nodes.values().map(|(registration, until)| Listed {
                registration: registration.clone(),
                left: until.saturating_duration_since(now),
            });
            Ok(listed.collect())
        })
    }

    fn claim_home<'a>(
        &'a self,
        room: &'a str,
        claimant: &'a NodeRef,
        ttl: Duration,
    ) -> StoreFuture<'a, NodeRef> {
        let room = room.to_owned();
        let claimant = claimant.clone();
        self.apply(move |shared, now| {
            if let Some((home, _)) = shared.homes.get(&room) {
                if *home != claimant && shared.live(home) {
                    return Ok(home.clone());
                }
            }
            if !shared.live(&claimant) {
                return Err(StoreError::NotRegistered);
            }
            shared.homes.insert(room, (claimant.clone(), now + ttl));
            Ok(claimant)
        })
    }

    fn home<'a>(&'a self, room: &'a str) -> StoreFuture<'a, Option<NodeRef>> {
        let room = room.to_owned();
        self.apply(move |shared, _| {
            let home = shared.homes.get(&room).map(|(home, _)| home);
            Ok(home.filter(|home| shared.live(home)).cloned())
        })
    }

    fn deregister<'a>(&'a self, node: &'a NodeRef, rooms: &'a [String]) -> StoreFuture<'a, ()> {
        let node = node.clone();
        let rooms = rooms.to_vec();
        self.apply(move |shared, _| {
            if !shared.latest(&node) {
                return Ok(());
            }
            shared.nodes.remove(&node.node);
            for room in rooms {
                if shared
                    .homes
                    .get(&room)
                    .is_some_and(|(home, _)| *home == node)
                {
                    shared.homes.remove(&room);
                }
            }
            Ok(())
        })
    }

    fn set_hosted<'a>(
        &'a self,
        room: &'a str,
        node: &'a NodeRef,
        publishers: &'a [String],
        ttl: Duration,
    ) -> StoreFuture<'a, ()> {
        let (room, node, publishers) = (room.to_owned(), node.clone(), publishers.to_vec());
        self.apply(move |shared, now| {
            shared.directory.set(&room, &node, &publishers, now + ttl);
            Ok(())
        })
    }

    fn hosted<'a>(&'a self, room: &'a str) -> StoreFuture<'a, Vec<Hosted>> {
        let room = room.to_owned();
        self.apply(move |shared, now| Ok(shared.directory.get(&room, now, |n| shared.live(n))))
    }

    fn exchange_part<'a>(
        &'a self,
        room: &'a str,
        node: &'a str,
        part: &'a str,
        ttl: Duration,
        tell: bool,
    ) -> StoreFuture<'a, Option<RoomParts>> {
        let (room, node, value) = (room.to_owned(), node.to_owned(), part.to_owned());
        self.apply(move |shared, now| {
            let Some(home) = shared.live_home(&room) else {
                return Ok(None);
            };
            let part = Part {
                home,
                value,
                until: now + ttl,
            };
            let parts = shared.parts.entry(room.clone()).or_default();
            parts.insert(node.clone(), part);
            shared.writes += 1;
            if tell {
                shared.publish(&room, &node);
            }
            Ok(shared.parts_under_home(&room))
        })
    }

    fn read_parts<'a>(&'a self, room: &'a str) -> StoreFuture<'a, Option<RoomParts>> {
        let room = room.to_owned();
        self.apply(move |shared, _| Ok(shared.parts_under_home(&room)))
    }

    fn inbox(&self) -> &Arc<Inbox> {
        &self.inbox
    }

    fn heard(&self) {
        let listener = Listener {
            link: self.link.clone(),
            inbox: Arc::downgrade(&self.inbox),
            rooms: self.inbox.rooms().into_iter().collect(),
        };
        let first = self.shared.lock().listeners.insert(self.id, listener);
        if first.is_none() {
            // Subscribed from now on: whatever changed before is read once, as on Redis.
            self.inbox.tell_all();
        }
    }
}

impl Shared {
    /// The room's home, when it is live.
    fn live_home(&self, room: &str) -> Option<NodeRef> {
        let (home, _) = self.homes.get(room).filter(|(h, _)| self.live(h))?;
        Some(home.clone())
    }

    /// The parts of `room` under its live home.
    fn parts_under_home(&self, room: &str) -> Option<RoomParts> {
        let home = self.live_home(room)?;
        let parts = self.parts.get(room).into_iter().flatten();
        let parts = parts
            .filter(|(_, part)| part.home == home)
            .map(|(node, part)| (node.clone(), part.value.clone()))
            .collect();
        Some(RoomParts { home, parts })
    }

    /// `node`'s notice of `room` to every connection listening to it whose link carries it.
    fn publish(&mut self, room: &str, node: &str) {
        self.notices += 1;
        let channel = channel(room);
        self.listeners.retain(|_, listener| {
            let Some(inbox) = listener.inbox.upgrade() else {
                return false;
            };
            let link = listener.link.load(Ordering::Relaxed);
            let carried = link == Link::Up as u8 || link == Link::RepliesLost as u8;
            if carried && listener.rooms.contains(room) {
                inbox.deliver(channel.as_bytes(), node.as_bytes());
            }
            true
        });
    }
}
