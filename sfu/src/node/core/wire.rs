//! The core's datagrams: STUN answered, DTLS to its sessions' associations (`dtls.rs`), SRTP
//! and SRTCP from sessions into the engine, and what the engine sends out encrypted to its
//! session's address.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;

use super::NodeCore;
use crate::capture::{classify, PayloadKind};
use crate::engine::prefetch::prefetch;
use crate::engine::{ReceiveError, Transmit, TransportId};
use crate::node::batch::Sent;
use crate::node::ice::{is_binding_success, BindingRequest, IceError};
use crate::node::metrics::DropReason;
use crate::node::peer::{PeerId, Role};
use crate::node::remote::Remote;
use crate::node::srtp::MAX_OVERHEAD;

/// The longest datagram the node reads, as its receive buffers are sized: a longer one
/// arrives cut, and fails authentication.
const MAX_RECEIVED: usize = 2048;
/// What a viewer's header rewrite may add to a packet: a Dependency Descriptor with the
/// structure attached (255 bytes at most), a transport-wide sequence number, an RTX original
/// sequence number, the two-byte extension form.
const REWRITE_ROOM: usize = 512;
/// The buffer one datagram the node sends is written into: the longest packet it reads, as
/// rewritten, and what protection adds. A longer one is dropped, counted.
pub const MAX_DATAGRAM: usize = MAX_RECEIVED + REWRITE_ROOM + MAX_OVERHEAD;

impl NodeCore {
    /// What became of a batch sent: the datagrams the socket did not take (its send buffer
    /// was full, or the host refused the destination) are dropped, by that reason.
    pub fn count_sent(&mut self, outcome: Sent) {
        for _ in 0..outcome.lost {
            self.counters.drop(DropReason::SendFailed);
        }
        self.counters.datagrams_out += outcome.sent as u64;
        self.counters.send_calls += outcome.calls as u64;
        self.counters.send_messages += outcome.messages as u64;
        self.counters.segmented_datagrams += outcome.segmented as u64;
        self.counters.segmentation_refused += outcome.refusals as u64;
    }

    /// A turn of the loop around the core is over.
    pub fn count_turn(&mut self) {
        self.counters.loop_turns += 1;
    }

    /// One datagram from the UDP socket.
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        self.handle_packet(now, Remote::Udp(from), data);
    }

    /// One datagram from the UDP socket, taken at `now` but `arrived` earlier (the kernel's
    /// receive stamp, when the socket is read in spaced turns): a publisher's media is
    /// reported back to it as arriving then ([`Router::handle_rtp_arrived`]); everything else
    /// happens at `now`. A datagram handed over `Owned` (a copy the loop made anyway, to pass
    /// it between threads) is decrypted where it is, and a publisher's packet kept there: it
    /// is not copied again.
    ///
    /// [`Router::handle_rtp_arrived`]: crate::engine::Router::handle_rtp_arrived
    pub fn handle_datagram_arrived(
        &mut self,
        now: Instant,
        arrived: Instant,
        from: SocketAddr,
        data: Cow<'_, [u8]>,
    ) {
        self.take_packet(now, arrived, Remote::Udp(from), data);
    }

    /// One packet from either transport: a UDP datagram, or a frame of a TCP connection
    /// (RFC 4571 takes its length off). The same from here on, but for whose bytes they count.
    pub fn handle_packet(&mut self, now: Instant, from: Remote, data: &[u8]) {
        self.take_packet(now, now, from, Cow::Borrowed(data));
    }

    fn take_packet(&mut self, now: Instant, arrived: Instant, from: Remote, data: Cow<'_, [u8]>) {
        self.arm_sweep(now);
        match from {
            Remote::Udp(_) | Remote::Link(_) => {
                self.counters.datagrams_in += 1;
                self.counters.bytes_in += data.len() as u64;
            }
            Remote::Tcp { .. } => self.counters.tcp_bytes_in += data.len() as u64,
        }
        if let Remote::Link(_) = from {
            // A relay socket carries links alone: no session is ever bound there.
            match self.is_link(from) {
                true => self.handle_from_link(now, from, &data),
                false => self.counters.drop(DropReason::UnknownSource),
            }
            return;
        }
        if self.relays.contains(from) {
            self.counters.relayed_bytes_in += data.len() as u64;
        }
        let kind = classify(&data);
        if kind == PayloadKind::Stun {
            self.handle_stun(now, from, &data);
            return;
        }
        let bound = self.by_addr.get(&from).copied();
        let Some(id) = bound.or_else(|| self.moving_to(from)) else {
            self.counters.drop(DropReason::UnknownSource);
            return;
        };
        match kind {
            PayloadKind::Dtls => self.handle_dtls(now, id, &data),
            PayloadKind::Rtp => {
                self.handle_srtp(now, arrived, id, data);
            }
            PayloadKind::Rtcp => {
                self.handle_srtcp(now, id, &data);
            }
            _ => self.counters.drop(DropReason::NotWebRtc),
        }
    }

    /// A TCP connection closed (by its peer, an error, or the node at a limit): the session
    /// bound to it ends, as one whose ICE went silent does, for nothing reaches it any more.
    /// One that moved to another address since is not its any more, and stays; UDP has no
    /// connection to close.
    pub fn handle_closed(&mut self, remote: Remote) {
        let Remote::Tcp { .. } = remote else {
            return;
        };
        let Some(&id) = self.by_addr.get(&remote) else {
            return;
        };
        tracing::info!(peer = %id, "its TCP connection closed");
        let _ = self.remove_peer(id);
    }

    fn handle_stun(&mut self, now: Instant, from: Remote, data: &[u8]) {
        if is_binding_success(data) {
            self.handle_check_response(now, from, data);
            return;
        }
        let answered = BindingRequest::parse(data).and_then(|request| {
            let id = *self
                .by_ufrag
                .get(&request.local_ufrag)
                .ok_or(IceError::UnknownUfrag)?;
            let peer = self.peers.get(&id).ok_or(IceError::UnknownUfrag)?;
            let nominated = request.use_candidate;
            // Its current credentials, or those before its last ICE restart.
            let current = request.local_ufrag == peer.ice.local_ufrag;
            let ice = match &peer.previous_ice {
                Some(previous) if !current => previous,
                _ => &peer.ice,
            };
            let response = request.answer(&ice.local_pwd, from.addr())?;
            Ok((id, nominated, current, response))
        });
        let Ok((id, nominated, current, response)) = answered else {
            self.counters.drop(DropReason::BadStun);
            return;
        };
        self.handshake_out.push_back((from, response));
        if current {
            self.forget_previous_ice(id);
        }
        let Some(peer) = self.peers.get_mut(&id) else {
            return;
        };
        // Consent is the pair's in use (RFC 7675): checks on another pair (or from an
        // address only named once) do not keep the session.
        if peer.addr.is_none_or(|addr| addr == from) || nominated {
            peer.last_seen = now;
        }
        // Latch the first address that proves it knows our password, and move to the one the
        // browser nominates.
        if peer.addr.is_none() || (nominated && peer.addr != Some(from)) {
            self.nominated(id, from);
        } else if peer.addr != Some(from) {
            self.heard_from(id, from);
        }
    }

    /// Whether the packet authenticated.
    pub(super) fn handle_srtp(
        &mut self,
        now: Instant,
        arrived: Instant,
        id: PeerId,
        data: Cow<'_, [u8]>,
    ) -> bool {
        let Some(peer) = self.peers.get_mut(&id) else {
            return false;
        };
        if !matches!(peer.role, Role::Publisher(_) | Role::Participant(_)) {
            self.counters.drop(DropReason::NotAPublisher);
            return false;
        }
        let Some(srtp) = peer.srtp.as_mut() else {
            self.counters.drop(DropReason::NoKeys);
            return false;
        };
        // The packet's one copy (here, or the one the loop handed over): the buffer the
        // engine keeps and shares with every subscriber, decrypted there.
        let mut packet = data.into_owned();
        match srtp.unprotect_rtp(&mut packet) {
            Ok(len) => packet.truncate(len),
            Err(refused) => {
                self.counters.drop(DropReason::of_srtp(refused));
                return false;
            }
        }
        let transport = peer.transport;
        let packet = Bytes::from(packet);
        // Shared with the links only when there are some: a share costs an allocation.
        let relayed = self.wants_relay(transport).then(|| packet.clone());
        match self
            .router
            .handle_rtp_arrived(now, arrived, transport, packet)
        {
            Ok(()) => {
                if let Some(packet) = relayed {
                    self.relay_packet(transport, &packet);
                }
            }
            Err(refused) => {
                if let ReceiveError::UnknownTransport = refused {
                    tracing::error!(peer = %id, "a session's transport is unknown to the engine");
                }
                self.counters.drop(DropReason::of_receive(refused));
            }
        }
        true
    }

    /// Decrypted in the reused `plain` and parsed there: the engine keeps none of it. The
    /// plain packet's length, when it authenticated.
    pub(super) fn handle_srtcp(&mut self, now: Instant, id: PeerId, data: &[u8]) -> Option<usize> {
        let peer = self.peers.get_mut(&id)?;
        let Some(srtp) = peer.srtp.as_mut() else {
            self.counters.drop(DropReason::NoKeys);
            return None;
        };
        self.plain.clear();
        self.plain.extend_from_slice(data);
        let len = match srtp.unprotect_rtcp(&mut self.plain) {
            Ok(len) => len,
            Err(refused) => {
                self.counters.drop(DropReason::of_srtp(refused));
                return None;
            }
        };
        // Parsed once; the engine dispatches each item within the session's transport.
        let transport = peer.transport;
        let _ = self.router.handle_rtcp(now, transport, &self.plain[..len]);
        if self.wants_relay(transport) {
            let compound = std::mem::take(&mut self.plain);
            self.relay_rtcp(now, transport, &compound[..len]);
            self.plain = compound;
        }
        Some(len)
    }

    /// The next datagram to send, written into `out` (of [`MAX_DATAGRAM`] bytes, whatever
    /// they hold): where it goes and its length. STUN answers and DTLS records first, then
    /// RTCP, then media.
    pub fn poll_datagram(&mut self, out: &mut [u8]) -> Option<(Remote, usize)> {
        if let Some((to, response)) = self.handshake_out.pop_front() {
            if let Some(slot) = out.get_mut(..response.len()) {
                slot.copy_from_slice(&response);
                return Some((to, response.len()));
            }
            self.counters.drop(DropReason::TooLong);
        }
        if let Some(sent) = self.poll_relayed(out) {
            return Some(sent);
        }
        // The engine writes each packet where it is sent from, and leaves room after it for
        // what protection adds there.
        let room = out.len().checked_sub(MAX_OVERHEAD)?;
        let next = self
            .poll_rtcp(out, room)
            .or_else(|| self.poll_media(out, room));
        if next.is_none() {
            // Sending raised what it raises (layer changes): take it now.
            self.handle_events();
        }
        next
    }

    fn poll_rtcp(&mut self, out: &mut [u8], room: usize) -> Option<(Remote, usize)> {
        while let Some(rtcp) = self.router.poll_rtcp(&mut out[..room]) {
            if let Some(sent) = self.protect(rtcp.transport, true, out, rtcp.len) {
                return Some(sent);
            }
        }
        None
    }

    /// Each viewer's header as the engine writes it, then the payload every viewer shares
    /// copied after it: the packet's only copy on its way out.
    fn poll_media(&mut self, out: &mut [u8], room: usize) -> Option<(Remote, usize)> {
        while let Some(output) = self.router.poll_transmit(&mut out[..room]) {
            let Transmit {
                len: header,
                payload,
                ..
            } = output.transmit;
            let len = header + payload.len();
            let Some(body) = out[..room].get_mut(header..len) else {
                self.counters.drop(DropReason::TooLong);
                continue;
            };
            body.copy_from_slice(&payload);
            self.prefetch_next_session();
            if let Some(sent) = self.protect(output.transport, false, out, len) {
                self.counters.rtp_out += 1;
                return Some(sent);
            }
        }
        None
    }

    /// Asks for the next viewer's session state (its address and SRTP context) while this
    /// packet is encrypted: with hundreds of viewers it is out of cache by its turn.
    fn prefetch_next_session(&self) {
        let Some(transport) = self.router.next_transport() else {
            return;
        };
        let Some(peer) = self
            .by_transport
            .get(&transport)
            .and_then(|id| self.peers.get(id))
        else {
            return;
        };
        prefetch(&peer.addr);
        if let Some(srtp) = &peer.srtp {
            srtp.prefetch();
        }
    }

    /// Encrypts the packet in `out[..len]` in place for the session on `transport`: where it
    /// goes and its protected length. None (counted) while the session has no address or
    /// keys; None for a transport whose session is gone.
    fn protect(
        &mut self,
        transport: TransportId,
        rtcp: bool,
        out: &mut [u8],
        len: usize,
    ) -> Option<(Remote, usize)> {
        let id = *self.by_transport.get(&transport)?;
        if let Some(sent) = self.protect_on_link(id, rtcp, out, len) {
            return sent;
        }
        let peer = self.peers.get_mut(&id)?;
        let (Some(to), Some(srtp)) = (peer.addr, peer.srtp.as_mut()) else {
            self.counters.drop(DropReason::NotConnected);
            return None;
        };
        let result = if rtcp {
            srtp.protect_rtcp(out, len)
        } else {
            srtp.protect_rtp(out, len)
        };
        match result {
            Ok(protected) => {
                match to {
                    Remote::Udp(_) | Remote::Link(_) => {
                        self.counters.bytes_out += protected as u64;
                    }
                    Remote::Tcp { .. } => self.counters.tcp_bytes_out += protected as u64,
                }
                if self.relays.contains(to) {
                    self.counters.relayed_bytes_out += protected as u64;
                }
                Some((to, protected))
            }
            Err(_) => {
                self.counters.drop(DropReason::SrtpRejected);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests;
