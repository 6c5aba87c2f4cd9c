//! The TURN servers of `[[ice_servers]]` as the node sees them from its side: a session whose
//! selected address is one of theirs reaches the node through a relay. Their hosts are resolved
//! once, at start; what a relay then sends from is its relay address, which on the usual set-up
//! (one TURN server on one public address) is the address its URL names.

use std::net::{IpAddr, ToSocketAddrs};

use super::ice_servers::IceServerConfig;
use super::remote::Remote;

/// The default ports of RFC 7065's URIs, which resolution needs (they do not change the
/// addresses found).
const TURN_PORT: u16 = 3478;
const TURNS_PORT: u16 = 5349;

/// The addresses of the configured TURN servers. A handful at most, so a scan is cheaper than
/// a hash; none when no TURN server is configured, and then nothing is ever relayed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelayHosts(Vec<IpAddr>);

impl RelayHosts {
    /// The hosts of every `turn:` and `turns:` URL of `servers`, resolved now. A host that
    /// does not resolve is logged and left out: its sessions are then not counted as relayed.
    pub fn resolve(servers: &[IceServerConfig]) -> Self {
        let mut found = Vec::new();
        for url in servers.iter().flat_map(|s| &s.urls) {
            let Some((host, port)) = turn_host(url) else {
                continue;
            };
            match (host, port).to_socket_addrs() {
                Ok(addrs) => found.extend(addrs.map(|a| a.ip())),
                Err(e) => tracing::warn!(%url, "a TURN server's host does not resolve: {e}"),
            }
        }
        found.sort_unstable();
        found.dedup();
        Self(found)
    }

    /// These addresses, as given.
    pub fn new(addrs: Vec<IpAddr>) -> Self {
        Self(addrs)
    }

    /// Whether `remote` is a TURN server's: a session there is relayed. A relay reaches the
    /// node over UDP whatever the client's leg to it, so a TCP connection never is one.
    pub fn contains(&self, remote: Remote) -> bool {
        match remote {
            Remote::Udp(addr) => self.0.contains(&addr.ip()),
            Remote::Tcp { .. } | Remote::Link(_) => false,
        }
    }
}

/// The host and port of a `turn:` or `turns:` URL (RFC 7065 section 3.1:
/// `turn:host[:port][?transport=udp|tcp]`, an IPv6 host in brackets); `None` for STUN URLs,
/// whose servers relay nothing.
fn turn_host(url: &str) -> Option<(&str, u16)> {
    let (rest, default_port) = if let Some(rest) = url.strip_prefix("turns:") {
        (rest, TURNS_PORT)
    } else {
        (url.strip_prefix("turn:")?, TURN_PORT)
    };
    let authority = rest.split('?').next().unwrap_or(rest);
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (host, after) = v6.split_once(']')?;
            (host, after.strip_prefix(':'))
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port = match port {
        Some(port) => port.parse().ok()?,
        None => default_port,
    };
    (!host.is_empty()).then_some((host, port))
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::node::remote::ConnectionId;

    #[test]
    fn turn_urls_name_their_host_and_port() {
        assert_eq!(
            turn_host("turn:192.0.2.1?transport=udp"),
            Some(("192.0.2.1", 3478))
        );
        assert_eq!(
            turn_host("turns:turn.example.net:443?transport=tcp"),
            Some(("turn.example.net", 443))
        );
        assert_eq!(
            turn_host("turns:[2001:db8::1]"),
            Some(("2001:db8::1", 5349))
        );
        assert_eq!(
            turn_host("turn:[2001:db8::1]:80"),
            Some(("2001:db8::1", 80))
        );
        assert_eq!(turn_host("stun:192.0.2.1"), None);
        assert_eq!(turn_host("turn::3478"), None);
        assert_eq!(turn_host("turn:host:port"), None);
    }

    #[test]
    fn only_turn_servers_addresses_are_relays() {
        let config = |urls: &[&str]| IceServerConfig {
            urls: urls.iter().map(|u| (*u).to_owned()).collect(),
            username: None,
            credential: None,
            secret: Some("s".to_owned()),
            ttl_seconds: None,
        };
        let relays = RelayHosts::resolve(&[
            config(&["stun:192.0.2.9:3478"]),
            config(&["turn:192.0.2.1:3478?transport=udp", "turns:192.0.2.1:443"]),
            config(&["turn:[2001:db8::1]"]),
        ]);
        assert_eq!(
            relays,
            RelayHosts::new(vec![
                "192.0.2.1".parse().expect("an address"),
                "2001:db8::1".parse().expect("an address"),
            ])
        );
        let udp = |a: &str| Remote::Udp(a.parse().expect("an address"));
        // Any port of the server's address: a relay sends from ports of its own.
        assert!(relays.contains(udp("192.0.2.1:49160")));
        assert!(!relays.contains(udp("192.0.2.9:3478")));
        assert!(!RelayHosts::default().contains(udp("192.0.2.1:1")));
        // A relay reaches the node over UDP: a TCP connection from its host is a client's.
        let tcp = Remote::Tcp {
            id: ConnectionId(1),
            peer: "192.0.2.1:49160".parse().expect("an address"),
        };
        assert!(!relays.contains(tcp));
    }

    /// A viewer nominating a TURN server's address is one relayed session, whatever ports it
    /// moves between there; what the node sends it and receives from there is counted.
    #[test]
    fn a_session_at_a_relay_is_counted_once_with_its_bytes() {
        use std::time::{Duration, Instant};

        use selector::scalability::{GeneratorConfig, ScalabilityMode, StreamGenerator};

        use crate::engine::RouterConfig;
        use crate::node::core::{NodeCore, MAX_DATAGRAM};
        use crate::node::srtp::{session, SrtpContext, SrtpProfile, MAX_OVERHEAD};
        use crate::node::testing::{
            answer_check, av1_room, binding_request, credentials, keys, DD_EXT,
        };

        let publisher: SocketAddr = "10.0.0.1:5000".parse().expect("an address");
        let relay: SocketAddr = "192.0.2.1:49160".parse().expect("an address");
        let relays = RelayHosts::new(vec![relay.ip()]);
        let now = Instant::now();
        let mut core =
            NodeCore::new(RouterConfig::default(), Duration::from_secs(60)).with_relays(relays);
        av1_room(&mut core, now, 0xA1, 0x10, &[publisher, relay]);
        assert_eq!(core.counters().sessions_relayed, 1, "the viewer alone");
        let from_relay = core.counters().relayed_bytes_in;
        assert!(from_relay > 0, "its binding request came through the relay");
        // Another port of the same relay (a new allocation): the same session, still relayed.
        let moved = SocketAddr::new(relay.ip(), 49161);
        let request = binding_request(&credentials(1), true);
        core.handle_datagram(now, moved, &request);
        // The node's check of the new port, answered there: the session moves.
        let is_binding_request = |d: &[u8]| d.get(..2) == Some(&[0, 1]);
        let mut out = vec![0; MAX_DATAGRAM];
        let mut check = None;
        while let Some((to, len)) = core.poll_datagram(&mut out) {
            if to == Remote::Udp(moved) && is_binding_request(&out[..len]) {
                check = Some(out[..len].to_vec());
            }
        }
        let answer = answer_check(&check.expect("a check"), &credentials(1));
        core.handle_datagram(now, moved, &answer);
        assert_eq!(core.counters().sessions_relayed, 1, "counted once");
        let through_relay = (request.len() + answer.len()) as u64;
        assert_eq!(core.counters().relayed_bytes_in, from_relay + through_relay);

        let config = GeneratorConfig {
            ssrc: 0xA1,
            ..Default::default()
        };
        let generator = StreamGenerator::new(ScalabilityMode::L3T3, config);
        let structure = generator.structure().clone();
        let mut browser = session(&keys(SrtpProfile::AeadAes128Gcm, 0).mirrored()).expect("keys");
        while core.poll_datagram(&mut out).is_some() {}
        let before = (core.counters().bytes_out, core.counters().relayed_bytes_out);
        let (mut sent_to_relay, mut sent_elsewhere) = (0, 0);
        for packet in generator.take(10) {
            let mut rtp = packet.rtp_bytes(DD_EXT, &structure);
            let len = rtp.len();
            rtp.resize(len + MAX_OVERHEAD, 0);
            let len = browser.protect_rtp(&mut rtp, len).expect("protects");
            core.handle_datagram(now, publisher, &rtp[..len]);
            while let Some((to, len)) = core.poll_datagram(&mut out) {
                // Media to the viewer at its new relay port; RTCP to the publisher.
                if to == Remote::Udp(moved) {
                    sent_to_relay += len as u64;
                } else {
                    sent_elsewhere += len as u64;
                }
            }
        }
        assert!(sent_to_relay > 0);
        let counters = core.counters();
        assert_eq!(
            counters.bytes_out - before.0,
            sent_to_relay + sent_elsewhere
        );
        assert_eq!(counters.relayed_bytes_out - before.1, sent_to_relay);
        assert_eq!(
            counters.relayed_bytes_in,
            from_relay + through_relay,
            "the publisher's packets are not the relay's"
        );
    }
}
