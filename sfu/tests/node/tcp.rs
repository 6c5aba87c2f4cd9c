//! Sessions bound over ICE-TCP in the core: a TCP connection is one more kind of address, so
//! a publisher over TCP reaches a viewer over UDP and the other way round, the STUN answer
//! goes back on the connection it came on (reflecting its peer), bytes and sessions count by
//! transport, and a connection that closes ends its session.

use selector::Layer;
use sfu::node::metrics::DropReason;
use sfu::node::peer::Join;
use sfu::node::remote::{ConnectionId, Remote, Transport};
use sfu::node::testing::{av1_track, av1_viewer, binding_request, credentials, publisher};
use stun::message::{Getter, Message, BINDING_SUCCESS};
use stun::xoraddr::XorMappedAddress;

use crate::fixtures::{addr, harness, l3t3, DD_IN, DD_OUT};

/// Connection `id`, from a client's port on loopback.
fn tcp(id: u64, port: u16) -> Remote {
    Remote::Tcp {
        id: ConnectionId(id),
        peer: addr(port),
    }
}

#[test]
fn a_binding_request_over_tcp_is_answered_on_its_connection_and_binds_the_session() {
    let mut h = harness();
    let ice = credentials(1);
    let viewer = av1_viewer(0x10, None, Layer::MAX);
    let id = h
        .core
        .add_viewer(h.now, Join::new("room", ice.clone()), viewer)
        .expect("room for a viewer");
    h.send(tcp(7, 5000), &binding_request(&ice, true));
    let answers = &h.sent[&tcp(7, 5000)];
    let mut response = Message::new();
    response.raw = answers[0].clone();
    response.decode().expect("STUN");
    assert_eq!(response.typ, BINDING_SUCCESS);
    let mut mapped = XorMappedAddress::default();
    mapped.get_from(&response).expect("a mapped address");
    assert_eq!(
        (mapped.ip, mapped.port),
        (addr(5000).ip(), 5000),
        "its peer's"
    );
    assert!(
        !h.sent.contains_key(&addr(5000).into()),
        "not to its UDP twin"
    );
    assert_eq!(h.core.peer(id).and_then(|p| p.addr), Some(tcp(7, 5000)));
    // A datagram from the peer's address over UDP is a stranger's: the session is on TCP.
    h.send(addr(5000), &[0x80, 96, 0, 1]);
    assert_eq!(h.core.counters().dropped(DropReason::UnknownSource), 1);
    assert_eq!(h.core.snapshot().sessions_by_transport, [0, 1]);
}

#[test]
fn media_crosses_between_a_tcp_publisher_and_a_udp_viewer_and_back() {
    let mut h = harness();
    h.publisher("room", publisher([av1_track(0xA1, DD_IN)]), tcp(1, 6000));
    let viewer = av1_viewer(0x10, Some(DD_OUT), Layer::MAX);
    h.viewer("room", viewer, addr(6001));
    h.publisher("other", publisher([av1_track(0xB1, DD_IN)]), addr(6002));
    let viewer = av1_viewer(0x20, Some(DD_OUT), Layer::MAX);
    h.viewer("other", viewer, tcp(2, 6003));
    let (over_tcp, over_udp) = (l3t3(0xA1, 10), l3t3(0xB1, 10));
    for (a, b) in over_tcp.iter().zip(&over_udp) {
        h.send(tcp(1, 6000), a);
        h.send(addr(6002), b);
    }
    assert!(!h.media_to(addr(6001)).is_empty(), "TCP in, UDP out");
    assert!(!h.media_to(tcp(2, 6003)).is_empty(), "UDP in, TCP out");
    assert!(
        h.media_to(addr(6003)).is_empty(),
        "not to the TCP peer's UDP twin"
    );
    let snapshot = h.core.snapshot();
    assert_eq!(snapshot.sessions_by_transport, [2, 2]);
    let sent: usize = over_tcp.iter().map(Vec::len).sum();
    let counters = h.core.counters();
    assert!(
        counters.tcp_bytes_in >= sent as u64,
        "the frames' bytes, STUN too"
    );
    assert!(counters.tcp_bytes_out > 0 && counters.bytes_out > 0);
    assert_eq!(Transport::ALL.map(Transport::label), ["udp", "tcp"]);
}

#[test]
fn a_closed_connection_ends_its_session_and_no_other() {
    let mut h = harness();
    let on_tcp = h.publisher("room", publisher([av1_track(0xA1, DD_IN)]), tcp(1, 7000));
    let viewer = av1_viewer(0x10, Some(DD_OUT), Layer::MAX);
    let on_udp = h.viewer("room", viewer, addr(7000));
    // A connection no session is bound to, and the UDP twin of the closed one: nothing ends.
    h.core.handle_closed(tcp(9, 7009));
    h.core.handle_closed(Remote::Udp(addr(7000)));
    assert!(h.core.peer(on_tcp).is_some() && h.core.peer(on_udp).is_some());
    h.core.handle_closed(tcp(1, 7000));
    assert!(h.core.peer(on_tcp).is_none(), "ended with its connection");
    assert_eq!(h.core.poll_removed(), Some(on_tcp));
    assert!(h.core.peer(on_udp).is_some());
    // A session that moved from its connection to UDP (nominated there) outlives it.
    let ice = credentials(3);
    let viewer = av1_viewer(0x30, None, Layer::MAX);
    let moved = h
        .core
        .add_viewer(h.now, Join::new("room", ice.clone()), viewer)
        .expect("room for a viewer");
    h.send(tcp(4, 7004), &binding_request(&ice, false));
    h.send(addr(7005), &binding_request(&ice, true));
    h.core.handle_closed(tcp(4, 7004));
    assert_eq!(
        h.core.peer(moved).and_then(|p| p.addr),
        Some(addr(7005).into())
    );
}
