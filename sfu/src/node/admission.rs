//! The node-wide limits on sessions, counted across every worker's core: sessions on the
//! node, sessions per HTTP client, handshakes in progress. A room's own limit is its
//! worker's alone to check (a room lives on one worker).

use std::collections::HashMap;
use std::net::IpAddr;

use parking_lot::Mutex;

use super::limits::{LimitError, Limits};

/// Places taken by live sessions, shared by the node's cores.
#[derive(Debug, Default)]
pub struct Admission {
    counts: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    sessions: usize,
    /// Sessions without SRTP keys yet.
    connecting: usize,
    clients: HashMap<IpAddr, usize>,
}

impl Admission {
    /// Takes a place for a new session in a room of `room` sessions, or says which limit
    /// refuses it (the node's first, then the room's, the client's, the handshakes').
    pub fn admit(
        &self,
        limits: &Limits,
        room: usize,
        client: Option<IpAddr>,
    ) -> Result<(), LimitError> {
        let mut counts = self.counts.lock();
        let of_client = client
            .and_then(|c| counts.clients.get(&c).copied())
            .unwrap_or(0);
        if counts.sessions >= limits.sessions {
            return Err(LimitError::NodeFull(limits.sessions));
        }
        if room >= limits.sessions_per_room {
            return Err(LimitError::RoomFull(limits.sessions_per_room));
        }
        if of_client >= limits.sessions_per_client {
            return Err(LimitError::ClientFull(limits.sessions_per_client));
        }
        if counts.connecting >= limits.handshakes {
            return Err(LimitError::Handshakes(limits.handshakes));
        }
        counts.sessions += 1;
        counts.connecting += 1;
        if let Some(client) = client {
            *counts.clients.entry(client).or_default() += 1;
        }
        Ok(())
    }

    /// A session admitted here has its SRTP keys.
    pub fn connected(&self) {
        let mut counts = self.counts.lock();
        counts.connecting = counts.connecting.saturating_sub(1);
    }

    /// A session admitted here left (`connecting`: before its keys).
    pub fn left(&self, client: Option<IpAddr>, connecting: bool) {
        let mut counts = self.counts.lock();
        counts.sessions = counts.sessions.saturating_sub(1);
        if connecting {
            counts.connecting = counts.connecting.saturating_sub(1);
        }
        if let Some(client) = client {
            if let Some(n) = counts.clients.get_mut(&client) {
                *n -= 1;
                if *n == 0 {
                    counts.clients.remove(&client);
                }
            }
        }
    }

    /// Entries held: zero once every session admitted has left.
    pub fn entries(&self) -> usize {
        let counts = self.counts.lock();
        counts.sessions + counts.connecting + counts.clients.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_taken_and_given_back_across_cores() {
        let limits = Limits {
            sessions: 3,
            sessions_per_client: 2,
            handshakes: 2,
            ..Limits::default()
        };
        let shared = Admission::default();
        let client = Some(IpAddr::from([10, 0, 0, 1]));
        let other = Some(IpAddr::from([10, 0, 0, 2]));
        assert_eq!(shared.admit(&limits, 0, client), Ok(()));
        assert_eq!(shared.admit(&limits, 0, client), Ok(()));
        assert_eq!(
            shared.admit(&limits, 0, client),
            Err(LimitError::ClientFull(2))
        );
        assert_eq!(
            shared.admit(&limits, 0, other),
            Err(LimitError::Handshakes(2)),
            "two still connecting"
        );
        shared.connected();
        assert_eq!(
            shared.admit(&limits, 5, other),
            Ok(()),
            "the room is checked against its own limit only"
        );
        assert_eq!(shared.admit(&limits, 0, None), Err(LimitError::NodeFull(3)));
        shared.left(client, false);
        shared.left(client, true);
        shared.left(other, true);
        assert_eq!(shared.entries(), 0);
    }
}
