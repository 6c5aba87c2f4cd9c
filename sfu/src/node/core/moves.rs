//! Where a session's packets go: the address ICE latched it to, and the addresses it is
//! nominated at later. Before its keys a session moves with each nomination (nothing but its
//! handshake goes there). Once connected, it moves only when its client answers the node's own
//! check at the new address: a binding request's source can be forged by whoever holds the
//! session's credentials, which would point its media at an address of their choosing (another
//! host's, or another session's), and a check's transaction reaches only the address it is
//! sent to. An address another connected session is at is checked alike, whoever asks.

use std::time::Instant;

use super::NodeCore;
use crate::node::ice::{check_request, CheckResponse, TransactionBytes};
use crate::node::metrics::DropReason;
use crate::node::peer::{Move, PeerId};
use crate::node::remote::Remote;

impl NodeCore {
    /// Session `id`'s binding request from `to` proved its password, and latches the session
    /// there (its first) or nominates `to`.
    pub(super) fn nominated(&mut self, id: PeerId, to: Remote) {
        let Some(peer) = self.peers.get(&id) else {
            return;
        };
        let connected = |other: &PeerId| self.peers.get(other).is_some_and(|p| p.srtp.is_some());
        let taken = self
            .by_addr
            .get(&to)
            .is_some_and(|other| *other != id && connected(other));
        if peer.srtp.is_none() && !taken {
            self.move_to(id, to);
        } else {
            self.check(id, to);
        }
    }

    /// The node's check of `to` for session `id`: the same transaction again while the
    /// session waits to move there, a new one for another address. A session without its
    /// client's credentials (it came without an offer) cannot be checked, and stays.
    fn check(&mut self, id: PeerId, to: Remote) {
        let worker = self.steering.as_ref().map_or(0, |(worker, _)| *worker);
        let Some(peer) = self.peers.get_mut(&id) else {
            return;
        };
        let Some(remote) = &peer.remote_ice else {
            return;
        };
        let moving = match peer.moving {
            Some(moving) if moving.to == to => moving,
            before => {
                if let Some(before) = before {
                    self.checks.remove(&before.transaction);
                }
                let mut transaction: TransactionBytes = rand::random();
                // The worker's mark: the reader hands the answer to this core by it.
                transaction[0] = worker as u8;
                let moving = Move { to, transaction };
                peer.moving = Some(moving);
                self.checks.insert(transaction, id);
                moving
            }
        };
        let username = format!("{}:{}", remote.ufrag, peer.ice.local_ufrag);
        let tie_breaker = rand::random();
        if let Ok(request) = check_request(&username, &remote.pwd, moving.transaction, tie_breaker)
        {
            self.handshake_out.push_back((to, request));
            self.counters.ice_checks_sent += 1;
        }
    }

    /// A binding success response: the answer to one of the node's checks moves its session
    /// there, when it comes from the address checked and is signed with the client's password.
    /// Anything else is counted and dropped.
    pub(super) fn handle_check_response(&mut self, now: Instant, from: Remote, data: &[u8]) {
        let Some(id) = self.answered_check(from, data) else {
            self.counters.drop(DropReason::BadStun);
            return;
        };
        if let Some(peer) = self.peers.get_mut(&id) {
            peer.last_seen = now;
        }
        self.counters.ice_checks_answered += 1;
        self.move_to(id, from);
    }

    fn answered_check(&self, from: Remote, data: &[u8]) -> Option<PeerId> {
        let response = CheckResponse::parse(data).ok()?;
        let id = *self.checks.get(&response.transaction)?;
        let peer = self.peers.get(&id)?;
        if peer.moving?.to != from {
            return None;
        }
        response.verify(&peer.remote_ice.as_ref()?.pwd).ok()?;
        Some(id)
    }

    /// Session `id` is reached at `to` from now on. Another session that was there is not
    /// reachable any more (a client that reconnected from the same port).
    fn move_to(&mut self, id: PeerId, to: Remote) {
        let Some(peer) = self.peers.get_mut(&id) else {
            return;
        };
        if let Some(moving) = peer.moving.take() {
            self.checks.remove(&moving.transaction);
        }
        // Counted as relayed once it moves to a TURN server's address from elsewhere.
        let was_relayed = peer.addr.is_some_and(|a| self.relays.contains(a));
        if !was_relayed && self.relays.contains(to) {
            self.counters.sessions_relayed += 1;
        }
        if let Some(old) = peer.addr.replace(to) {
            self.by_addr.remove(&old);
            self.unbind(old);
        }
        self.bind(to);
        if let Some(other) = self.by_addr.insert(to, id).filter(|&o| o != id) {
            if let Some(peer) = self.peers.get_mut(&other) {
                peer.addr = None;
            }
        }
    }
}
