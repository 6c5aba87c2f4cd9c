//! Where a session's packets go: the address ICE latched it to, and the addresses it is
//! nominated at later. Before its keys a session moves with each nomination (nothing but its
//! handshake goes there). Once connected, it moves only when its client answers the node's own
//! check at the new address: a binding request's source can be forged by whoever holds the
//! session's credentials, which would point its media at an address of their choosing (another
//! host's, or another session's), and a check's transaction reaches only the address it is
//! sent to. An address another connected session is at is checked alike, whoever asks.
//!
//! While the check is out, what arrives from the new address is the session's (a client that
//! moved sends from there at once; taking its packets points nothing there), unless another
//! session is at that address; so is what arrives from an address the client checked without
//! nominating it yet.

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

    /// The session whose check waits at `from`, if any: what comes from there is its.
    pub(super) fn moving_to(&self, from: Remote) -> Option<PeerId> {
        self.moving_to.get(&from).copied()
    }

    /// Session `id`'s binding request from `to`, which is not its address, proved its password
    /// without nominating it: a client sends from a pair it is about to nominate (after an ICE
    /// restart, say) before it nominates it. What comes from there is the session's from now
    /// on, though nothing goes there yet; unless a check of a nominated address is out, which
    /// this does not displace.
    pub(super) fn heard_from(&mut self, id: PeerId, to: Remote) {
        if self.peers.get(&id).is_some_and(|p| p.moving.is_none()) {
            self.expect_at(id, to);
        }
    }

    /// The node's check of `to` for session `id`: the same transaction again while the
    /// session waits to move there, a new one for another address. A session without its
    /// client's credentials (it came without an offer) cannot be checked, and stays.
    fn check(&mut self, id: PeerId, to: Remote) {
        let Some(peer) = self.peers.get(&id) else {
            return;
        };
        let Some(remote) = &peer.remote_ice else {
            return;
        };
        let username = format!("{}:{}", remote.ufrag, peer.ice.local_ufrag);
        let pwd = remote.pwd.clone();
        let Some(transaction) = self.expect_at(id, to) else {
            return;
        };
        if let Ok(request) = check_request(&username, &pwd, transaction, rand::random()) {
            self.handshake_out.push_back((to, request));
            self.counters.ice_checks_sent += 1;
        }
    }

    /// Session `id` may move to `to` once its client answers there: the transaction the check
    /// of `to` goes under (the one out already, or a new one for another address).
    fn expect_at(&mut self, id: PeerId, to: Remote) -> Option<TransactionBytes> {
        let worker = self.steering.as_ref().map_or(0, |(worker, _)| *worker);
        let transaction = match self.peers.get(&id)?.moving {
            Some(moving) if moving.to == to => moving.transaction,
            _ => {
                self.forget_move(id);
                let mut transaction: TransactionBytes = rand::random();
                // The worker's mark: the reader hands the answer to this core by it.
                transaction[0] = worker as u8;
                transaction
            }
        };
        self.wait_at(id, Move { to, transaction });
        Some(transaction)
    }

    /// Session `id` waits to move as `moving` says: the address is its until then (another
    /// session's check there is given up; it asks again with its client's next nomination).
    fn wait_at(&mut self, id: PeerId, moving: Move) {
        if let Some(other) = self.moving_to.insert(moving.to, id).filter(|&o| o != id) {
            if let Some(peer) = self.peers.get_mut(&other) {
                peer.moving = None;
            }
        }
        // Steered here unless another worker's session is there.
        if !self.by_addr.contains_key(&moving.to) {
            self.bind_if_free(moving.to);
        }
        if let Some(peer) = self.peers.get_mut(&id) {
            peer.moving = Some(moving);
        }
    }

    /// Gives up session `id`'s check, if it has one out.
    pub(super) fn forget_move(&mut self, id: PeerId) {
        let Some(moving) = self.peers.get_mut(&id).and_then(|p| p.moving.take()) else {
            return;
        };
        if self.moving_to.get(&moving.to) == Some(&id) {
            self.moving_to.remove(&moving.to);
            if !self.by_addr.contains_key(&moving.to) {
                self.unbind(moving.to);
            }
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
        let id = self.moving_to(from)?;
        let peer = self.peers.get(&id)?;
        if peer.moving?.transaction != response.transaction {
            return None;
        }
        response.verify(&peer.remote_ice.as_ref()?.pwd).ok()?;
        Some(id)
    }

    /// Session `id` is reached at `to` from now on. Another session that was there is not
    /// reachable any more (a client that reconnected from the same port).
    fn move_to(&mut self, id: PeerId, to: Remote) {
        self.forget_move(id);
        let Some(peer) = self.peers.get_mut(&id) else {
            return;
        };
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
