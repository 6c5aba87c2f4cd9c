//! What a test's peers do on the network beyond raw datagrams: a viewer or publisher that
//! answers with one RTCP item writes it and sends it up its transport, and one that watches
//! what it is sent reads each media arrival by its RTP header.

use bytes::Bytes;
use rtp_ext::rtp::RtpPacket;

use super::network::{Arrival, Delivery, Network, SimError, MTU};
use crate::engine::rtcp::{RtcpFeedback, RtcpWireWriter, RtcpWriter};
use crate::engine::{DownTrackId, TransportId};
use std::time::Instant;

/// The CNAME of the RTCP a peer writes.
const PEER_CNAME: &[u8] = b"peer";

/// An RTP packet that arrived at a peer, its header read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceivedMedia {
    /// When it arrived.
    pub at: Instant,
    /// The subscription it was sent for.
    pub down_track: DownTrackId,
    /// Whether the router sent it as a retransmission.
    pub retransmission: bool,
    /// The SSRC it came under: the subscription's, or its RTX SSRC.
    pub ssrc: u32,
    /// Its RTP sequence number.
    pub sequence_number: u16,
    /// Its size, header and payload.
    pub len: usize,
}

impl Arrival {
    /// The arrival as media, its header read; `None` for RTCP (or a header that does not
    /// parse, which the router never writes).
    pub fn media(&self) -> Option<ReceivedMedia> {
        let Delivery::Media {
            down_track,
            retransmission,
            packet,
        } = &self.delivery
        else {
            return None;
        };
        let fields = RtpPacket::parse(packet).ok()?.fields();
        Some(ReceivedMedia {
            at: self.at,
            down_track: *down_track,
            retransmission: *retransmission,
            ssrc: fields.ssrc,
            sequence_number: fields.sequence_number,
            len: packet.len(),
        })
    }
}

impl Network {
    /// Writes `item` as one RTCP datagram, as a peer would, and sends it up `transport`'s
    /// uplink now.
    pub fn send_feedback(
        &mut self,
        transport: TransportId,
        item: &RtcpFeedback<'_>,
    ) -> Result<(), SimError> {
        let mut buf = [0u8; MTU];
        let len = RtcpWireWriter::new(PEER_CNAME)?.write(item, &mut buf)?;
        self.send_rtcp(transport, Bytes::copy_from_slice(&buf[..len]))
    }

    /// Takes the media that arrived at `transport`'s peer so far, in order of arrival; what
    /// else arrived (RTCP) is dropped with it.
    pub fn take_media(&mut self, transport: TransportId) -> Vec<ReceivedMedia> {
        let arrivals = self.take_arrivals(transport);
        arrivals.iter().filter_map(Arrival::media).collect()
    }
}
