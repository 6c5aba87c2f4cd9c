//! The ICE-TCP listener: it accepts connections within the node's limits (connections on the
//! node, per client address) and starts each one's task.

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use super::connection::Connection;
use super::links::Links;
use super::stats::{Refusal, TcpStats};
use super::Workers;
use crate::node::client_key::{ClientPlace, PerClient};
use crate::node::remote::Remote;

/// The limits on ICE-TCP connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpLimits {
    /// Connections open on the node: as many as it holds sessions (`limits.sessions`), each
    /// session being bound over one at most.
    pub connections: usize,
    /// Connections open from one client address.
    pub per_client: usize,
    /// A connection on which the node has answered nothing (no binding request of one of
    /// its sessions came) for this long is closed.
    pub handshake_timeout: Duration,
    /// A connection on which nothing came for this long is closed (a live session's ICE
    /// consent checks come every few seconds).
    pub idle_timeout: Duration,
}

/// Accepts connections on `listener` until the task is dropped.
pub async fn listen(
    listener: TcpListener,
    workers: Workers,
    links: Arc<Links>,
    stats: Arc<TcpStats>,
    limits: TcpLimits,
) {
    let clients = Clients::default();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors, mostly: the next accept may succeed once some close.
                tracing::warn!("tcp accept: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let place = match clients.admit(&stats, &limits, peer.ip()) {
            Ok(place) => place,
            Err(refusal) => {
                stats.refuse(refusal);
                tracing::debug!(%peer, reason = refusal.label(), "tcp connection refused");
                continue;
            }
        };
        // Media is many small writes: none may wait for the next.
        let _ = stream.set_nodelay(true);
        let (id, queue) = links.open();
        let connection = Connection {
            remote: Remote::Tcp { id, peer },
            queue,
            workers: workers.clone(),
            limits,
        };
        let (links, stats) = (links.clone(), stats.clone());
        tokio::spawn(async move {
            let reason = connection.run(stream, links).await;
            tracing::debug!(%peer, reason = reason.label(), "tcp connection closed");
            stats.close(reason);
            drop(place);
        });
    }
}

/// Connections open per client.
#[derive(Debug, Default)]
struct Clients {
    open: Arc<PerClient>,
}

/// A connection's place in the counts, given back when it is dropped.
struct Place {
    stats: Arc<TcpStats>,
    _client: ClientPlace,
}

impl Clients {
    /// A place for a connection from `ip`, or the limit that refuses it.
    fn admit(
        &self,
        stats: &Arc<TcpStats>,
        limits: &TcpLimits,
        ip: IpAddr,
    ) -> Result<Place, Refusal> {
        if stats.open.load(Ordering::Relaxed) >= limits.connections {
            return Err(Refusal::NodeFull);
        }
        let client = self
            .open
            .take(ip, limits.per_client)
            .ok_or(Refusal::ClientFull)?;
        stats.open.fetch_add(1, Ordering::Relaxed);
        stats.accepted.fetch_add(1, Ordering::Relaxed);
        Ok(Place {
            stats: stats.clone(),
            _client: client,
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.stats.open.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_held_per_client_and_on_the_node_and_given_back() {
        let (clients, stats) = (Clients::default(), Arc::new(TcpStats::default()));
        let limits = TcpLimits {
            connections: 3,
            per_client: 2,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
        };
        let ip = |n: u8| IpAddr::from([192, 0, 2, n]);
        let admit = |n| clients.admit(&stats, &limits, ip(n));
        let first = admit(1).expect("room");
        let _second = admit(1).expect("room");
        assert!(matches!(admit(1), Err(Refusal::ClientFull)));
        let _other = admit(2).expect("another client");
        assert!(matches!(admit(3), Err(Refusal::NodeFull)));
        assert_eq!(stats.view().open, 3);
        drop(first);
        let third = admit(3).expect("a place given back is taken again");
        assert_eq!((stats.view().open, stats.view().accepted), (3, 4));
        drop(third);
        assert_eq!(stats.view().open, 2);
        assert!(
            clients.open.held(ip(3)) == 0 && clients.open.clients() == 2,
            "no client kept at none"
        );
    }

    #[test]
    fn an_ipv6_host_is_held_to_one_client_s_connections() {
        let (clients, stats) = (Clients::default(), Arc::new(TcpStats::default()));
        let limits = TcpLimits {
            connections: 10,
            per_client: 2,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
        };
        let host = |last: u16| IpAddr::from([0x2001, 0xdb8, 7, 7, 0, 0, 0, last]);
        let _first = clients.admit(&stats, &limits, host(1)).expect("room");
        let _second = clients.admit(&stats, &limits, host(2)).expect("room");
        assert!(matches!(
            clients.admit(&stats, &limits, host(3)),
            Err(Refusal::ClientFull)
        ));
    }
}
