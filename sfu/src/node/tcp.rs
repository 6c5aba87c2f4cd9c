//! ICE over TCP (RFC 6544), passive on the node's side, for clients whose network blocks UDP:
//! every answer offers a `tcptype passive` host candidate after the UDP one, and the node
//! listens for the connections clients open to it.
//!
//! A connection is one more kind of address to the core ([`Remote::Tcp`]): its frames
//! (RFC 4571, `framing.rs`) go to the worker whose session its first ICE check named, as
//! datagrams do, and what the core sends that session comes back through the connection's
//! bounded send queue (`links.rs`). Each connection is one task (`connection.rs`) that reads
//! and writes it; the listener (`listener.rs`) holds the limits: connections on the node (as
//! many as it holds sessions), per client address, and a time to answer in.
//!
//! Nothing here blocks a worker: a slow reader's queue fills and what does not fit is dropped
//! and counted, as a full UDP send buffer loses datagrams; a connection that closes ends its
//! session at once, as ICE silence would later.

mod connection;
pub mod framing;
mod links;
mod listener;
mod stats;
#[cfg(test)]
mod tests;

use bytes::Bytes;
use tokio::sync::mpsc;

pub use self::links::{Links, SEND_QUEUE};
pub use self::listener::{listen, TcpLimits};
pub use self::stats::{CloseReason, Refusal, TcpStats, TcpView};
use super::remote::Remote;
use super::shard::{worker_of_ufrag, WorkerId};
use crate::capture::{classify, PayloadKind};
use crate::node::ice::BindingRequest;

/// Inputs from TCP connections waiting for one worker, at most; a connection whose worker is
/// behind waits to read more (TCP's flow control then slows its peer), it drops nothing.
pub const INBOX: usize = 1024;

/// What a connection tells the worker of its session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TcpInput {
    /// A frame it received, its length taken off.
    Frame(Remote, Bytes),
    /// It closed: its session ends.
    Closed(Remote),
}

/// Where connections hand their inputs: each worker's inbox.
#[derive(Debug, Clone)]
pub struct Workers {
    inboxes: Vec<mpsc::Sender<TcpInput>>,
}

/// The workers' side of TCP: the inboxes for the listener, and each worker's receiver.
pub fn inboxes(workers: usize) -> (Workers, Vec<mpsc::Receiver<TcpInput>>) {
    let (inboxes, receivers) = (0..workers.max(1)).map(|_| mpsc::channel(INBOX)).unzip();
    (Workers { inboxes }, receivers)
}

impl Workers {
    /// The worker a frame names, if it names one: the mark in a binding request's ufrag (as
    /// for a datagram before its address is bound).
    fn named_by(&self, frame: &[u8]) -> Option<WorkerId> {
        if self.inboxes.len() == 1 {
            return Some(0);
        }
        if classify(frame) != PayloadKind::Stun {
            return None;
        }
        let request = BindingRequest::parse(frame).ok()?;
        worker_of_ufrag(&request.local_ufrag).filter(|&w| w < self.inboxes.len())
    }

    /// Hands `input` to `worker` (worker 0 when none is known yet: its core counts what is
    /// no one's), waiting while its inbox is full. False once the workers are gone.
    async fn hand(&self, worker: Option<WorkerId>, input: TcpInput) -> bool {
        let inbox = &self.inboxes[worker.unwrap_or(0)];
        inbox.send(input).await.is_ok()
    }
}
