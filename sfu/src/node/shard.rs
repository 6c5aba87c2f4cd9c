//! Media work split across workers (`--workers N`). A room lives on one worker, whose core
//! holds all of its sessions, so a room's fan-out runs on one core and rooms spread across
//! cores; every worker sends on the one UDP socket.
//!
//! One reader takes every datagram off the socket and hands it to the worker that owns its
//! sender, through that worker's bounded queue: one reader keeps each sender's datagrams in
//! the order they came (several readers would reorder them, and a receiver takes reordering
//! for loss), and a worker that falls behind loses what overflows its own queue (counted)
//! and slows no other. Reading is the small part of an SFU's work: each packet comes in once
//! and goes out to every viewer.
//!
//! Whose a datagram is comes from the address ICE bound its session to, or, for a binding
//! request before that, from the worker's mark at the head of the ufrag the node gave the
//! session in its answer. No one's goes to worker 0, whose core counts it as dropped.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::RwLock;
use tokio::sync::mpsc;

use super::arrival;
use super::batch::{each_received, RecvBatch};
use super::spaced_reads::SpacedReads;

use super::ice::{is_binding_success, BindingRequest};
use crate::capture::{classify, PayloadKind};
use crate::engine::id_map::IdMap;

/// A worker's index, from 0.
pub type WorkerId = usize;

/// Workers at most: the ufrag mark is two hex digits.
pub const MAX_WORKERS: usize = 256;

/// Datagrams waiting for a worker, at most.
pub const HANDOFF_QUEUE: usize = 4096;

/// A datagram handed to the worker that owns its sender, with the instant it arrived: its one
/// copy, which the worker's core decrypts in place and, for a publisher's packet, keeps.
pub type Handoff = (SocketAddr, Vec<u8>, Instant);

/// The worker that serves `room`: a hash of its name, the same in every request (FNV-1a: the
/// standard hasher is keyed at random per process).
pub fn worker_for_room(room: &str, workers: usize) -> WorkerId {
    let hash = room.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (hash % workers.clamp(1, MAX_WORKERS) as u64) as usize
}

/// `ufrag` marked as worker `worker`'s: two hex digits before it (ICE characters, RFC 8839
/// section 5.4).
pub fn mark_ufrag(worker: WorkerId, ufrag: &str) -> String {
    format!("{:02x}{ufrag}", worker % MAX_WORKERS)
}

/// The worker a marked ufrag names.
pub fn worker_of_ufrag(ufrag: &str) -> Option<WorkerId> {
    usize::from_str_radix(ufrag.get(..2)?, 16).ok()
}

/// Which worker owns each address a session was bound at.
#[derive(Debug, Default)]
pub struct Steering {
    /// Bound only for sessions whose binding request proved their password, so no sender
    /// picks its keys: an unkeyed hash is safe here.
    owners: RwLock<IdMap<SocketAddr, WorkerId>>,
}

impl Steering {
    /// `worker`'s session is now at `addr` (a session elsewhere that was there is not).
    pub fn bind(&self, addr: SocketAddr, worker: WorkerId) {
        self.owners.write().insert(addr, worker);
    }

    /// `worker` takes what comes from `addr` unless another worker is bound there.
    pub fn bind_if_free(&self, addr: SocketAddr, worker: WorkerId) {
        self.owners.write().entry(addr).or_insert(worker);
    }

    /// `worker`'s session left `addr`; a binding another worker made since stays.
    pub fn unbind(&self, addr: SocketAddr, worker: WorkerId) {
        let mut owners = self.owners.write();
        if owners.get(&addr) == Some(&worker) {
            owners.remove(&addr);
        }
    }

    /// The worker a datagram from `from` is for, if any says so: the owner of its address,
    /// the mark in a binding request's ufrag, or the mark in the transaction of the check a
    /// response answers.
    pub fn owner(&self, from: SocketAddr, datagram: &[u8]) -> Option<WorkerId> {
        if let Some(&worker) = self.owners.read().get(&from) {
            return Some(worker);
        }
        if classify(datagram) != PayloadKind::Stun {
            return None;
        }
        if is_binding_success(datagram) {
            return datagram.get(8).map(|&mark| usize::from(mark));
        }
        let request = BindingRequest::parse(datagram).ok()?;
        worker_of_ufrag(&request.local_ufrag)
    }

    /// Addresses bound, on every worker.
    pub fn len(&self) -> usize {
        self.owners.read().len()
    }

    /// Whether no address is bound on any worker.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One worker's part in the split: its index, the shared steering table, its queue from
/// the reader and what overflowed it.
#[derive(Debug)]
pub struct Shard {
    /// The worker's index.
    pub worker: WorkerId,
    /// Which worker each bound address goes to, shared with the reader and the other workers.
    pub steering: Arc<Steering>,
    /// The datagrams the reader hands this worker.
    pub inbox: mpsc::Receiver<Handoff>,
    /// Datagrams the reader dropped because the queue was full, not yet counted.
    pub lost: Arc<AtomicU64>,
}

/// The one reader of the socket, and where it hands each datagram.
#[derive(Debug)]
pub struct Reader {
    steering: Arc<Steering>,
    queues: Vec<(mpsc::Sender<Handoff>, Arc<AtomicU64>)>,
}

/// The reader and the shards of `workers` workers, sharing one steering table.
pub fn split(workers: usize) -> (Reader, Vec<Shard>) {
    let steering = Arc::new(Steering::default());
    let mut queues = Vec::new();
    let mut shards = Vec::new();
    for worker in 0..workers.clamp(1, MAX_WORKERS) {
        let (queue, inbox) = mpsc::channel(HANDOFF_QUEUE);
        let lost = Arc::new(AtomicU64::new(0));
        queues.push((queue, lost.clone()));
        shards.push(Shard {
            worker,
            steering: steering.clone(),
            inbox,
            lost,
        });
    }
    (Reader { steering, queues }, shards)
}

impl Reader {
    /// Hands a datagram that `arrived` to its worker, or counts it lost there when that
    /// worker's queue is full; says which worker, and whether it went.
    pub fn steer(&self, from: SocketAddr, datagram: &[u8], arrived: Instant) -> (WorkerId, bool) {
        let worker = self
            .steering
            .owner(from, datagram)
            .filter(|&w| w < self.queues.len())
            .unwrap_or(0);
        let (queue, lost) = &self.queues[worker];
        let sent = queue.try_send((from, datagram.to_vec(), arrived)).is_ok();
        if !sent {
            lost.fetch_add(1, Ordering::Relaxed);
        }
        (worker, sent)
    }

    /// Reads the socket a batch at a time, at arrivals or in spaced turns as `reads` say,
    /// and steers every datagram, until the workers are gone.
    pub async fn run(self, mut reads: SpacedReads) {
        let mut inbound = RecvBatch::new(2048);
        while !self.queues.iter().all(|(queue, _)| queue.is_closed()) {
            match reads.next_read() {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => {
                    if let Err(e) = reads.readable().await {
                        tracing::debug!("udp receive: {e}");
                        continue;
                    }
                }
            }
            let now = tokio::time::Instant::now().into_std();
            let read = reads.read(now, &mut inbound);
            each_received(read, &inbound, |from, data, waited| {
                self.steer(from, data, arrival::stamped(now, waited));
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::node::ice::binding_request;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn a_room_stays_on_its_worker_and_rooms_spread() {
        let rooms: Vec<String> = (0..200).map(|i| format!("room-{i}")).collect();
        for workers in [1, 2, 3, 8] {
            let mut load = vec![0; workers];
            for room in &rooms {
                let worker = worker_for_room(room, workers);
                assert_eq!(worker, worker_for_room(room, workers), "the same each time");
                load[worker] += 1;
            }
            // 200 rooms over at most 8 workers: none gets less than half its share.
            let share = rooms.len() / workers;
            assert!(load.iter().all(|&n| n >= share / 2), "{workers}: {load:?}");
        }
    }

    #[test]
    fn a_binding_request_before_its_address_is_bound_goes_to_the_worker_its_ufrag_names() {
        let steering = Steering::default();
        let ufrag = mark_ufrag(5, "abcdefgh");
        let request = binding_request(
            &format!("{ufrag}:remote"),
            "a-password-of-24-chars!!",
            false,
        )
        .expect("a request");
        assert_eq!(steering.owner(addr(1000), &request), Some(5));
        // Media from an address no worker bound: no one's (the reader counts it).
        assert_eq!(steering.owner(addr(1000), &[0x80, 96, 0, 1]), None);
        // The answer to a worker's check: the worker its transaction names.
        let mut answer = stun::message::Message::new();
        let setters: [Box<dyn stun::message::Setter>; 2] = [
            Box::new(stun::message::BINDING_SUCCESS),
            Box::new(stun::agent::TransactionId([7; 12])),
        ];
        answer.build(&setters).expect("a response");
        assert_eq!(steering.owner(addr(1001), &answer.raw), Some(7));
        steering.bind(addr(1000), 2);
        assert_eq!(steering.owner(addr(1000), &[0x80, 96, 0, 1]), Some(2));
        assert_eq!(
            steering.owner(addr(1000), &request),
            Some(2),
            "the address first"
        );
        // Another worker's session took the address since: its binding stays.
        steering.bind(addr(1000), 3);
        steering.unbind(addr(1000), 2);
        assert_eq!(steering.owner(addr(1000), &[0x80]), Some(3));
        steering.unbind(addr(1000), 3);
        assert!(steering.is_empty());
    }

    #[test]
    fn a_full_queue_loses_the_datagram_and_never_waits() {
        let (reader, mut shards) = split(2);
        let now = Instant::now();
        reader.steering.bind(addr(7), 1);
        for _ in 0..HANDOFF_QUEUE {
            assert_eq!(reader.steer(addr(7), b"x", now), (1, true));
        }
        assert_eq!(reader.steer(addr(7), b"x", now), (1, false));
        assert_eq!(shards[1].lost.load(Ordering::Relaxed), 1);
        // No one's goes to worker 0, whose core counts it.
        assert_eq!(reader.steer(addr(9), b"x", now), (0, true));
        let queued = std::iter::from_fn(|| shards[1].inbox.try_recv().ok()).count();
        assert_eq!(queued, HANDOFF_QUEUE);
        assert_eq!(shards[0].lost.load(Ordering::Relaxed), 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Datagrams from senders bound to three workers (and from one no worker has):
        /// each worker gets exactly its own senders' datagrams, once each, in the order they
        /// came and with the instants they came; the unknown sender's go to worker 0.
        #[test]
        fn every_datagram_reaches_its_worker_once_and_in_order(
            ports in proptest::collection::vec(0u16..7, 1..300)
        ) {
            let (reader, mut shards) = split(3);
            let owner = |port: u16| if port == 6 { 0 } else { usize::from(port) % 3 };
            for port in 0u16..6 {
                reader.steering.bind(addr(port), owner(port));
            }
            let start = Instant::now();
            let mut expected = vec![Vec::new(); 3];
            for (n, &port) in ports.iter().enumerate() {
                let datagram = (n as u32).to_be_bytes();
                let arrived = start + std::time::Duration::from_micros(n as u64 * 100);
                expected[owner(port)].push((addr(port), datagram.to_vec(), arrived));
                prop_assert_eq!(
                    reader.steer(addr(port), &datagram, arrived),
                    (owner(port), true)
                );
            }
            for (shard, expected) in shards.iter_mut().zip(&expected) {
                let got: Vec<_> = std::iter::from_fn(|| shard.inbox.try_recv().ok())
                    .map(|(from, data, arrived)| (from, data.to_vec(), arrived))
                    .collect();
                prop_assert_eq!(&got, expected);
            }
        }
    }
}
