//! Participants' data channels in the core: the SCTP a participant's DTLS association carries
//! goes to the relay (`datachannel::relay`), the relay's packets leave through that
//! participant's association, its timers are the core's, and its channels' comings and goings
//! reach the room's event streams.

use std::time::Instant;

use super::NodeCore;
use crate::node::datachannel::relay::{DataRelay, RelayEvent};
use crate::node::datachannel::DataChannelConfig;
use crate::node::metrics::DropReason;
use crate::node::peer::PeerId;
use crate::node::room_view::ChannelView;
use crate::node::sdp::SctpOffer;
use crate::node::session_events::SessionEvent;

impl NodeCore {
    /// The same core with other data channel settings.
    pub fn with_data_channels(mut self, config: DataChannelConfig) -> Self {
        self.data = DataRelay::new(config);
        self
    }

    /// The data channels of every participant, for their counters and state.
    pub fn data_relay(&self) -> &DataRelay {
        &self.data
    }

    /// Participant `id` negotiated a data section (`sctp`): its association is awaited.
    pub(super) fn start_data(&mut self, now: Instant, id: PeerId, sctp: Option<SctpOffer>) {
        let (Some(sctp), Some(peer)) = (sctp, self.peers.get(&id)) else {
            return;
        };
        let Some(identity) = &peer.identity else {
            return;
        };
        let member = (peer.room.as_str(), identity.public);
        self.data.join(now, id, member, sctp.max_message_size);
    }

    /// SCTP from the peer, the first `len` bytes of the core's DTLS buffer: to its
    /// association, or counted when its offer had no data section.
    pub(super) fn on_application_data(&mut self, now: Instant, id: PeerId, len: usize) {
        if !self.data.has(id) {
            tracing::debug!(peer = %id, len, "DTLS application data without a data section");
            self.counters.drop(DropReason::DataChannel);
            return;
        }
        let packet = self.dtls_buffer.get(..len).unwrap_or_default();
        self.data.handle_packet(now, id, packet);
        self.after_data(now);
    }

    /// The relay's timers.
    pub(super) fn handle_data_timeouts(&mut self, now: Instant) {
        if self.data.poll_timeout().is_some_and(|at| at <= now) {
            self.data.handle_timeout(now);
            self.after_data(now);
        }
    }

    /// A participant left: its channels close toward the others.
    pub(super) fn end_data(&mut self, id: PeerId) {
        self.data.leave(id);
        // Without a time, the relay never had an input: nothing to send.
        if let Some(now) = self.data.now() {
            self.after_data(now);
        }
    }

    /// Sends the relay's packets through each participant's DTLS association and tells the
    /// rooms what opened and closed.
    pub(super) fn after_data(&mut self, now: Instant) {
        while let Some((id, packet)) = self.data.poll_packet() {
            if self.data_to_link(id, &packet) {
                continue;
            }
            let Some(association) = self.peers.get_mut(&id).and_then(|p| p.dtls.as_mut()) else {
                self.counters.drop(DropReason::NotConnected);
                continue;
            };
            if let Err(e) = association.send_application_data(&packet) {
                tracing::debug!(peer = %id, "SCTP packet not sent: {e}");
                self.counters.drop(DropReason::SendFailed);
                continue;
            }
            self.drive_dtls(now, id);
        }
        while let Some((room, owner, event)) = self.data.poll_event() {
            let event = match event {
                RelayEvent::Opened(info) => SessionEvent::DataChannelOpened(ChannelView::of(&info)),
                RelayEvent::Closed(info) => SessionEvent::DataChannelClosed(ChannelView::of(&info)),
            };
            self.broadcast(&room, owner, event);
        }
    }
}
