//! A client as the per-client limits count it: an IPv4 address, or the /64 an IPv6 address
//! is in. A host is given a whole /64 and picks its addresses in it freely (temporary
//! addresses rotate within it, RFC 8981), so counting each IPv6 address apart would give one
//! host as many places as it cares to take.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Arc;

use parking_lot::Mutex;

/// The address a client's places are counted under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientKey(IpAddr);

/// The bits of an IPv6 address that name its network: the rest the host picks.
const V6_NETWORK: u128 = !0 << 64;

impl From<IpAddr> for ClientKey {
    fn from(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(_) => Self(ip),
            // A dual-stack socket sees an IPv4 client as `::ffff:a.b.c.d`: the same client.
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self(IpAddr::V4(v4)),
                None => Self(IpAddr::V6(Ipv6Addr::from(u128::from(v6) & V6_NETWORK))),
            },
        }
    }
}

impl fmt::Display for ClientKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            IpAddr::V4(v4) => v4.fmt(f),
            IpAddr::V6(v6) => write!(f, "{v6}/64"),
        }
    }
}

/// Places (connections) held per client, each given back when its [`ClientPlace`] drops.
#[derive(Debug, Default)]
pub struct PerClient {
    held: Mutex<HashMap<ClientKey, usize>>,
}

/// One place of a client's, held until dropped.
#[derive(Debug)]
pub struct ClientPlace {
    of: Arc<PerClient>,
    client: ClientKey,
}

impl PerClient {
    /// A place for `ip`'s client, or `None` when it holds `limit` already.
    pub fn take(self: &Arc<Self>, ip: IpAddr, limit: usize) -> Option<ClientPlace> {
        let client = ClientKey::from(ip);
        let mut held = self.held.lock();
        let n = held.entry(client).or_default();
        if *n >= limit {
            if *n == 0 {
                held.remove(&client);
            }
            return None;
        }
        *n += 1;
        Some(ClientPlace {
            of: self.clone(),
            client,
        })
    }

    /// Places `ip`'s client holds.
    pub fn held(&self, ip: IpAddr) -> usize {
        let held = self.held.lock();
        held.get(&ClientKey::from(ip)).copied().unwrap_or(0)
    }

    /// Clients holding a place: none once every place is given back.
    pub fn clients(&self) -> usize {
        self.held.lock().len()
    }
}

impl Drop for ClientPlace {
    fn drop(&mut self) {
        let mut held = self.of.held.lock();
        if let Some(n) = held.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> ClientKey {
        ClientKey::from(s.parse::<IpAddr>().expect("an address"))
    }

    #[test]
    fn an_ipv6_host_is_its_64_and_an_ipv4_client_its_address() {
        assert_eq!(
            key("2001:db8:1:2::1"),
            key("2001:db8:1:2:ffff:1234:5678:9abc")
        );
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("2001:db8:1:2::77").to_string(), "2001:db8:1:2::/64");
        assert_ne!(key("192.0.2.1"), key("192.0.2.2"));
        assert_eq!(key("::ffff:192.0.2.1"), key("192.0.2.1"));
        assert_eq!(key("192.0.2.1").to_string(), "192.0.2.1");
    }

    #[test]
    fn a_client_holds_its_places_until_they_drop() {
        let places = Arc::new(PerClient::default());
        let ip = |s: &str| s.parse::<IpAddr>().expect("an address");
        let first = places.take(ip("2001:db8::1"), 2).expect("room");
        let second = places.take(ip("2001:db8::2"), 2).expect("room");
        assert!(places.take(ip("2001:db8::3"), 2).is_none(), "the same /64");
        let other = places.take(ip("2001:db8:0:1::1"), 2).expect("another /64");
        assert_eq!(places.held(ip("2001:db8::99")), 2);
        assert!(places.take(ip("192.0.2.1"), 0).is_none());
        assert_eq!(places.clients(), 2, "a refusal at 0 keeps no entry");
        drop(first);
        assert!(places.take(ip("2001:db8::4"), 2).is_some(), "given back");
        drop((second, other));
        assert_eq!(places.clients(), 0);
    }
}
