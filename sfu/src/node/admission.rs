//! The node-wide limits on sessions, counted across every worker's core: sessions on the
//! node, handshakes in progress, and each of both per HTTP client. A room's own limit is its
//! worker's alone to check (a room lives on one worker).

use std::collections::HashMap;
use std::net::IpAddr;

use parking_lot::Mutex;

use super::client_key::ClientKey;
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
    clients: HashMap<ClientKey, Client>,
}

/// One client's share of the counts; gone once it holds no session.
#[derive(Debug, Default, Clone, Copy)]
struct Client {
    sessions: usize,
    connecting: usize,
}

impl Admission {
    /// Takes a place for a new session in a room of `room` sessions, or says which limit
    /// refuses it (the node's first, then the room's, the client's sessions, its handshakes,
    /// the node's handshakes).
    pub fn admit(
        &self,
        limits: &Limits,
        room: usize,
        client: Option<IpAddr>,
    ) -> Result<(), LimitError> {
        let mut counts = self.counts.lock();
        let client = client.map(ClientKey::from);
        let of_client = client
            .and_then(|c| counts.clients.get(&c).copied())
            .unwrap_or_default();
        if counts.sessions >= limits.sessions {
            return Err(LimitError::NodeFull(limits.sessions));
        }
        if room >= limits.sessions_per_room {
            return Err(LimitError::RoomFull(limits.sessions_per_room));
        }
        if of_client.sessions >= limits.sessions_per_client {
            return Err(LimitError::ClientFull(limits.sessions_per_client));
        }
        if of_client.connecting >= limits.handshakes_per_client {
            return Err(LimitError::ClientHandshakes(limits.handshakes_per_client));
        }
        if counts.connecting >= limits.handshakes {
            return Err(LimitError::Handshakes(limits.handshakes));
        }
        counts.sessions += 1;
        counts.connecting += 1;
        if let Some(client) = client {
            let of_client = counts.clients.entry(client).or_default();
            of_client.sessions += 1;
            of_client.connecting += 1;
        }
        Ok(())
    }

    /// A session admitted here for `client` has its SRTP keys.
    pub fn connected(&self, client: Option<IpAddr>) {
        let mut counts = self.counts.lock();
        counts.connecting = counts.connecting.saturating_sub(1);
        let client = client.map(ClientKey::from);
        if let Some(of_client) = client.and_then(|c| counts.clients.get_mut(&c)) {
            of_client.connecting = of_client.connecting.saturating_sub(1);
        }
    }

    /// A session admitted here left (`connecting`: before its keys).
    pub fn left(&self, client: Option<IpAddr>, connecting: bool) {
        let mut counts = self.counts.lock();
        counts.sessions = counts.sessions.saturating_sub(1);
        if connecting {
            counts.connecting = counts.connecting.saturating_sub(1);
        }
        let Some(client) = client.map(ClientKey::from) else {
            return;
        };
        if let Some(of_client) = counts.clients.get_mut(&client) {
            of_client.sessions = of_client.sessions.saturating_sub(1);
            if connecting {
                of_client.connecting = of_client.connecting.saturating_sub(1);
            }
            if of_client.sessions == 0 {
                counts.clients.remove(&client);
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
        shared.connected(client);
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

    #[test]
    fn a_client_holds_its_share_of_the_handshakes_and_an_ipv6_host_is_one_client() {
        let limits = Limits {
            handshakes: 10,
            handshakes_per_client: 2,
            ..Limits::default()
        };
        let shared = Admission::default();
        let host = |last: u16| Some(IpAddr::from([0x2001, 0xdb8, 0, 1, 0, 0, 0, last]));
        assert_eq!(shared.admit(&limits, 0, host(1)), Ok(()));
        assert_eq!(shared.admit(&limits, 0, host(2)), Ok(()));
        assert_eq!(
            shared.admit(&limits, 0, host(3)),
            Err(LimitError::ClientHandshakes(2)),
            "another address of the same /64"
        );
        let elsewhere = Some(IpAddr::from([0x2001, 0xdb8, 0, 2, 0, 0, 0, 1]));
        assert_eq!(shared.admit(&limits, 0, elsewhere), Ok(()));
        shared.connected(host(1));
        assert_eq!(
            shared.admit(&limits, 0, host(4)),
            Ok(()),
            "a connected session gives its handshake place back"
        );
        for (client, connecting) in [(host(1), false), (host(2), true), (host(4), true)] {
            shared.left(client, connecting);
        }
        shared.left(elsewhere, true);
        assert_eq!(shared.entries(), 0);
    }
}
