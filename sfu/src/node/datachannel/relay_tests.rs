//! The relay against the SCTP stack as a client runs it, for what the independent client of
//! the in-memory tests cannot send: a PPID of none of RFC 8831's, and DATA on a stream no
//! DCEP opened (a channel negotiated out of band).

use std::time::Instant;

use bytes::Bytes;
use sctp_proto::PayloadProtocolIdentifier as Ppid;

use super::*;
use crate::node::datachannel::sctp::tests::{chat, client, exchange, open_from_client, NodeEnd};

/// The relay as the client of its one participant reaches it.
struct Through<'a> {
    relay: &'a mut DataRelay,
    id: PeerId,
}

impl NodeEnd for Through<'_> {
    fn receive(&mut self, now: Instant, packet: &[u8]) {
        self.relay.handle_packet(now, self.id, packet);
    }

    fn transmit(&mut self) -> Option<Bytes> {
        let (to, packet) = self.relay.poll_packet()?;
        assert_eq!(to, self.id, "the relay has one participant");
        Some(packet)
    }
}

#[test]
fn messages_of_an_unknown_ppid_or_on_no_channel_are_counted_by_reason() {
    let now = Instant::now();
    let mut relay = DataRelay::new(DataChannelConfig::default());
    let id = PeerId(1);
    relay.join(now, id, ("room", ParticipantId(1)), Some(256 * 1024));
    let mut client = client();
    let mut node = Through {
        relay: &mut relay,
        id,
    };
    exchange(now, &mut client, &mut node);
    open_from_client(&mut client, 0, &chat());
    exchange(now, &mut client, &mut node);
    assert_eq!(relay.channels_of(id).len(), 1, "its channel opened");

    let mut node = Through {
        relay: &mut relay,
        id,
    };
    let mut s = client.association.stream(0).unwrap();
    s.write_with_ppi(b"?", Ppid::Unknown).unwrap();
    s.write_with_ppi(b"ok", Ppid::String).unwrap();
    // Stream 2, as a channel negotiated out of band would use it: no DCEP before its DATA.
    let mut s = client.association.open_stream(2, Ppid::String).unwrap();
    s.write_with_ppi(b"out of band", Ppid::String).unwrap();
    exchange(now, &mut client, &mut node);

    // The string on its channel is no drop: it has no one else to go to.
    let counters = relay.counters();
    assert_eq!(counters.dropped(DropReason::DataUnknownPpid), 1);
    assert_eq!(counters.dropped(DropReason::DataNoChannel), 1);
}
