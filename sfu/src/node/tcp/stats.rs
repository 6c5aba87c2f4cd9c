//! What the TCP listener and its connections count, for `/metrics`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Why the node closed a connection, or why it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The peer closed it (or reset it).
    Peer,
    /// The node had no answer for it in time: no binding request of a session of the node
    /// came on it.
    HandshakeTimeout,
    /// Nothing came on it for the idle time: its session ended, or its peer went away.
    Idle,
    /// It sent a frame longer than the node takes: not ICE-TCP.
    BadFrame,
    /// Reading or writing failed.
    Error,
    /// The node is shutting down.
    Shutdown,
}

impl CloseReason {
    /// Every reason, in the counters' order.
    pub const ALL: [CloseReason; 6] = [
        Self::Peer,
        Self::HandshakeTimeout,
        Self::Idle,
        Self::BadFrame,
        Self::Error,
        Self::Shutdown,
    ];

    /// The `reason` label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Peer => "peer",
            Self::HandshakeTimeout => "handshake_timeout",
            Self::Idle => "idle",
            Self::BadFrame => "bad_frame",
            Self::Error => "error",
            Self::Shutdown => "shutdown",
        }
    }
}

/// Why a connection was refused as it came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The node has as many connections open as it holds sessions.
    NodeFull,
    /// The client's address has its maximum open.
    ClientFull,
}

impl Refusal {
    /// Every refusal, in the counters' order.
    pub const ALL: [Refusal; 2] = [Self::NodeFull, Self::ClientFull];

    /// The `reason` label.
    pub fn label(self) -> &'static str {
        match self {
            Self::NodeFull => "node_full",
            Self::ClientFull => "client_full",
        }
    }
}

/// The listener's counters, shared with `/metrics`.
#[derive(Debug, Default)]
pub struct TcpStats {
    pub(super) open: AtomicUsize,
    pub(super) accepted: AtomicU64,
    refused: [AtomicU64; Refusal::ALL.len()],
    closed: [AtomicU64; CloseReason::ALL.len()],
}

/// The counters as read at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpView {
    /// Connections open.
    pub open: usize,
    /// Connections accepted.
    pub accepted: u64,
    /// Connections refused, by [`Refusal`].
    pub refused: [u64; Refusal::ALL.len()],
    /// Connections closed, by [`CloseReason`].
    pub closed: [u64; CloseReason::ALL.len()],
}

impl TcpStats {
    pub(super) fn refuse(&self, refusal: Refusal) {
        self.refused[refusal as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn close(&self, reason: CloseReason) {
        self.closed[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn view(&self) -> TcpView {
        TcpView {
            open: self.open.load(Ordering::Relaxed),
            accepted: self.accepted.load(Ordering::Relaxed),
            refused: self.refused.each_ref().map(|n| n.load(Ordering::Relaxed)),
            closed: self.closed.each_ref().map(|n| n.load(Ordering::Relaxed)),
        }
    }
}
