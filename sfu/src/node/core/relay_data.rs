//! Data channels across the media relay's links: each link carries one SCTP association
//! between its two nodes (the edge its client, the origin its server; the relay's side is
//! `datachannel/relay_nodes.rs`), its packets inside RTCP APP packets named `STDC` on the
//! link, after the sending end's own receiver report, so the link's SRTCP keys authenticate
//! and encrypt them as they do its keepalives. The association's chunks keep each packet
//! within about 1,120 bytes, so a datagram on the link stays within 1,200.
//!
//! The framing (RFC 3550 section 6.7): the APP packet's SSRC is the sending end's link SSRC,
//! its name `STDC`, its data the SCTP packet padded with zeros to a multiple of four bytes,
//! and its subtype (0 to 3) the number of those padding bytes.

use std::collections::BTreeSet;
use std::time::Instant;

use bytes::Bytes;

use super::relay_wire::{link_rtcp, rtcp_packets, RTCP_APP};
use super::NodeCore;
use crate::node::metrics::DropReason;
use crate::node::peer::PeerId;
use crate::node::remote::Remote;

/// The name of the APP packet that carries an SCTP packet of the link's association.
const DATA: [u8; 4] = *b"STDC";
/// An APP packet's header, SSRC and name, before its data.
const APP_HEADER: usize = 12;

/// Why an `STDC` packet carries no SCTP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LinkDataError {
    /// Its subtype gives more padding than four bytes or than its data.
    #[error("an STDC packet's padding is longer than its data")]
    Padding,
    /// An SCTP packet longer than an RTCP packet's length field can say.
    #[error("an SCTP packet too long for an STDC packet")]
    TooLong,
}

/// Appends to `out` the `STDC` APP packet that carries `sctp` under `ssrc`.
pub fn write_link_data(ssrc: u32, sctp: &[u8], out: &mut Vec<u8>) -> Result<(), LinkDataError> {
    let padding = (4 - sctp.len() % 4) % 4;
    let words = (APP_HEADER + sctp.len() + padding) / 4 - 1;
    let words = u16::try_from(words).map_err(|_| LinkDataError::TooLong)?;
    let mut header = link_rtcp(RTCP_APP, padding as u8, ssrc);
    header[2..4].copy_from_slice(&words.to_be_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&DATA);
    out.extend_from_slice(sctp);
    out.resize(out.len() + padding, 0);
    Ok(())
}

/// The SCTP packets the `STDC` APP packets of a compound carry, in order; other packets are
/// not read, and those past a bad length not seen.
pub fn link_data(compound: &[u8]) -> impl Iterator<Item = Result<&[u8], LinkDataError>> {
    let apps = rtcp_packets(compound).filter(|p| p[1] == RTCP_APP);
    apps.filter(|p| p.get(8..APP_HEADER) == Some(DATA.as_slice()))
        .map(|p| {
            let data = &p[APP_HEADER..];
            let padding = usize::from(p[0] & 0x1f);
            match data.len().checked_sub(padding) {
                Some(len) if padding < 4 => Ok(&data[..len]),
                _ => Err(LinkDataError::Padding),
            }
        })
}

impl NodeCore {
    /// The association of a new link's end: `origin` for the link toward an edge (its
    /// server), else from an origin (its client, whose INIT goes at once).
    pub(super) fn start_data_link(&mut self, now: Instant, at: Remote, origin: bool) -> PeerId {
        let id = PeerId::random();
        self.media_relays.data_links.insert(id, (at, origin));
        self.data.join_node(now, id, !origin);
        id
    }

    /// A link's association gone with its link: the channels it carried close.
    pub(super) fn end_data_link(&mut self, id: PeerId) {
        if self.media_relays.data_links.remove(&id).is_none() {
            return;
        }
        self.data.leave_node(id);
        if let Some(now) = self.data.now() {
            self.after_data(now);
        }
    }

    /// The rooms whose participants' channels the link toward `to` carries: those of the
    /// publishers it relays, and those whose data alone it relays.
    pub(super) fn sync_data_rooms(&mut self, to: Remote) {
        let Some(link) = self.media_relays.outs.get(&to) else {
            return;
        };
        let publishers = link.relays.iter();
        let rooms: BTreeSet<String> = publishers
            .filter_map(|r| self.peers.get(&r.publisher).map(|p| p.room.clone()))
            .chain(link.data_rooms.iter().map(|(room, _)| room.clone()))
            .collect();
        let id = link.data;
        self.data.node_rooms(id, rooms);
        if let Some(now) = self.data.now() {
            self.after_data(now);
        }
    }

    /// The `STDC` packets of a compound from a link (unprotected in the core's buffer, its
    /// first `len` bytes) into the link's association `id`; those that do not read counted.
    pub(super) fn data_from_link(&mut self, now: Instant, id: PeerId, len: usize) {
        let mut any = false;
        for packet in link_data(&self.plain[..len]) {
            match packet {
                Ok(packet) => {
                    self.data.handle_packet(now, id, packet);
                    any = true;
                }
                Err(e) => {
                    tracing::debug!(peer = %id, "{e}");
                    self.counters.drop(DropReason::DataLinkMalformed);
                }
            }
        }
        if any {
            self.after_data(now);
        }
    }

    /// An SCTP packet of link association `id` out on its link, or `false` when `id` is no
    /// link's.
    pub(super) fn data_to_link(&mut self, id: PeerId, packet: &Bytes) -> bool {
        let Some(&(to, origin)) = self.media_relays.data_links.get(&id) else {
            return false;
        };
        let mut compound = self.link_compound(origin);
        match write_link_data(self.link_ssrc(origin), packet, &mut compound) {
            Ok(()) => self.send_on_link(to, origin, compound),
            Err(e) => {
                tracing::debug!(peer = %id, "{e}");
                self.counters.drop(DropReason::TooLong);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_packet_reads_back_after_a_report_and_bad_padding_is_an_error() {
        let mut compound = link_rtcp(201, 0, 1).to_vec();
        write_link_data(7, b"sctp!", &mut compound).unwrap();
        assert_eq!(compound.len(), 8 + APP_HEADER + 8, "padded to a word");
        let read: Vec<_> = link_data(&compound).collect();
        assert_eq!(read, [Ok(&b"sctp!"[..])]);
        // A subtype of four bytes of padding, more than a word's.
        compound[8] = 0x80 | 4;
        assert_eq!(
            link_data(&compound).next(),
            Some(Err(LinkDataError::Padding))
        );
        // An APP packet of another name is not data.
        compound[8 + 8..8 + APP_HEADER].copy_from_slice(b"STRC");
        assert_eq!(link_data(&compound).count(), 0);
    }

    proptest! {
        #[test]
        fn every_packet_reads_back_as_written(
            packets in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..1300), 0..4),
            ssrc: u32,
        ) {
            let mut compound = link_rtcp(201, 0, ssrc).to_vec();
            for packet in &packets {
                write_link_data(ssrc, packet, &mut compound).unwrap();
            }
            let read: Vec<&[u8]> = link_data(&compound).map(Result::unwrap).collect();
            let written: Vec<&[u8]> = packets.iter().map(Vec::as_slice).collect();
            prop_assert_eq!(read, written);
        }

        #[test]
        fn any_bytes_read_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let read: usize = link_data(&bytes).filter_map(Result::ok).map(<[u8]>::len).sum();
            prop_assert!(read <= bytes.len());
        }
    }
}
