//! Where a packet came from and where one goes: a UDP address, one of the node's ICE-TCP
//! connections (RFC 6544), or another node's end of a media relay link. The core binds a
//! session to whichever its ICE check came on and names it on everything it sends the
//! session; the loop around the core sends it there.

use std::net::SocketAddr;

/// The id the node gave an accepted TCP connection: unique for the node's life, so a new
/// connection from the same client port is never taken for an old one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionId(pub u64);

/// A peer's end of a transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Remote {
    /// Datagrams on the node's UDP socket, from and to this address.
    Udp(SocketAddr),
    /// Frames on one TCP connection.
    Tcp {
        /// The connection.
        id: ConnectionId,
        /// Its peer's address: the one a STUN answer reflects.
        peer: SocketAddr,
    },
    /// Datagrams on the worker's relay socket, from and to another node's: the media relay's
    /// links, which no session is ever bound to.
    Link(SocketAddr),
}

/// The transports a session may be bound over, as `/metrics` labels them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// ICE over UDP.
    Udp,
    /// ICE over TCP, passive on the node's side.
    Tcp,
}

impl Transport {
    /// Both, in the order `/metrics` lists them.
    pub const ALL: [Transport; 2] = [Transport::Udp, Transport::Tcp];

    /// The `transport` label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Udp => "udp",
            Self::Tcp => "tcp",
        }
    }
}

impl Remote {
    /// The peer's address, whichever the transport.
    pub fn addr(self) -> SocketAddr {
        match self {
            Self::Udp(addr) | Self::Tcp { peer: addr, .. } | Self::Link(addr) => addr,
        }
    }

    /// Which transport this is.
    pub fn transport(self) -> Transport {
        match self {
            Self::Udp(_) | Self::Link(_) => Transport::Udp,
            Self::Tcp { .. } => Transport::Tcp,
        }
    }
}

impl std::fmt::Display for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Udp(addr) => write!(f, "udp {addr}"),
            Self::Tcp { id, peer } => write!(f, "tcp {peer} (connection {})", id.0),
            Self::Link(addr) => write!(f, "link {addr}"),
        }
    }
}

impl From<SocketAddr> for Remote {
    fn from(addr: SocketAddr) -> Self {
        Self::Udp(addr)
    }
}

impl PartialEq<SocketAddr> for Remote {
    /// A UDP address equals itself; a TCP connection equals no UDP address, even its peer's.
    fn eq(&self, addr: &SocketAddr) -> bool {
        *self == Remote::Udp(*addr)
    }
}
