//! The send side of every open TCP connection: a bounded queue per connection, which the
//! workers fill with what their cores send and the connection's task drains into its socket.
//! A worker never waits on it: a packet for a full queue (a peer that does not read, or
//! reads slower than it is sent) is dropped and counted, so one slow reader neither grows the
//! node's memory nor holds up the worker's other sessions.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use parking_lot::RwLock;
use tokio::sync::mpsc;

use crate::engine::id_map::IdMap;
use crate::node::metrics::DropReason;
use crate::node::remote::ConnectionId;

/// Packets waiting to be written to one connection, at most: about a second of a 720p
/// layer's packets, and with [`MAX_DATAGRAM`](crate::node::core::MAX_DATAGRAM) bytes each
/// at most, under a MB per connection whatever its peer does.
pub const SEND_QUEUE: usize = 256;

/// Every open connection's queue, by id.
#[derive(Debug, Default)]
pub struct Links {
    /// Ids the node hands out, never a peer: an unkeyed hash is safe here.
    queues: RwLock<IdMap<ConnectionId, mpsc::Sender<Bytes>>>,
    next: AtomicU64,
}

impl Links {
    /// A new connection's id and the receiving end of its queue.
    pub fn open(&self) -> (ConnectionId, mpsc::Receiver<Bytes>) {
        let id = ConnectionId(self.next.fetch_add(1, Ordering::Relaxed));
        let (queue, receiver) = mpsc::channel(SEND_QUEUE);
        self.queues.write().insert(id, queue);
        (id, receiver)
    }

    /// The connection closed: packets for it are dropped from now on.
    pub fn close(&self, id: ConnectionId) {
        self.queues.write().remove(&id);
    }

    /// Queues a copy of `packet` for connection `id`, or says why it was dropped: the queue
    /// was full, or the connection has closed.
    pub fn send(&self, id: ConnectionId, packet: &[u8]) -> Result<(), DropReason> {
        let queues = self.queues.read();
        let queue = queues.get(&id).ok_or(DropReason::TcpClosed)?;
        queue
            .try_send(Bytes::copy_from_slice(packet))
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => DropReason::TcpQueueFull,
                mpsc::error::TrySendError::Closed(_) => DropReason::TcpClosed,
            })
    }

    /// Connections open.
    pub fn len(&self) -> usize {
        self.queues.read().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer that never reads: its queue takes [`SEND_QUEUE`] packets and drops the rest,
    /// never waiting; once it is read, it takes more.
    #[test]
    fn a_full_queue_drops_and_a_closed_connection_takes_nothing() {
        let links = Links::default();
        let (id, mut queue) = links.open();
        let (other, _other_queue) = links.open();
        assert_ne!(id, other, "ids are never reused");
        for _ in 0..SEND_QUEUE {
            assert_eq!(links.send(id, b"media"), Ok(()));
        }
        assert_eq!(links.send(id, b"media"), Err(DropReason::TcpQueueFull));
        assert_eq!(
            links.send(other, b"media"),
            Ok(()),
            "another is not held up"
        );
        assert_eq!(queue.try_recv().as_deref(), Ok(&b"media"[..]));
        assert_eq!(links.send(id, b"media"), Ok(()), "room again once read");
        links.close(id);
        assert_eq!(links.send(id, b"media"), Err(DropReason::TcpClosed));
        assert_eq!(links.len(), 1);
    }
}
