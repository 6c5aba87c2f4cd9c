//! The core's datagrams: STUN answered, DTLS to its sessions' associations (`dtls.rs`), SRTP
//! and SRTCP from sessions into the engine, and what the engine sends out encrypted to its
//! session's address.

use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;

use super::NodeCore;
use crate::capture::{classify, PayloadKind};
use crate::engine::{Output, ReceiveError};
use crate::node::batch::Sent;
use crate::node::ice::{BindingRequest, IceError};
use crate::node::metrics::DropReason;
use crate::node::peer::{PeerId, Role};
use crate::node::srtp::MAX_OVERHEAD;

/// Largest datagram the node writes: an MTU-sized packet plus the SRTP tag.
pub const MAX_DATAGRAM: usize = 1500;

impl NodeCore {
    /// What became of a batch sent: the datagrams the socket did not take (its send buffer
    /// was full, or the host refused the destination) are dropped, by that reason.
    pub fn count_sent(&mut self, outcome: Sent) {
        for _ in 0..outcome.lost {
            self.counters.drop(DropReason::SendFailed);
        }
        self.counters.send_calls += outcome.calls as u64;
    }

    /// One datagram from the UDP socket.
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        self.arm_sweep(now);
        self.counters.datagrams_in += 1;
        self.counters.bytes_in += data.len() as u64;
        let kind = classify(data);
        if kind == PayloadKind::Stun {
            self.handle_stun(now, from, data);
            return;
        }
        let Some(&id) = self.by_addr.get(&from) else {
            self.counters.drop(DropReason::UnknownSource);
            return;
        };
        match kind {
            PayloadKind::Dtls => self.handle_dtls(now, id, data),
            PayloadKind::Rtp => self.handle_srtp(now, id, data),
            PayloadKind::Rtcp => self.handle_srtcp(now, id, data),
            _ => self.counters.drop(DropReason::NotWebRtc),
        }
    }

    fn handle_stun(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        let answered = BindingRequest::parse(data).and_then(|request| {
            let id = *self
                .by_ufrag
                .get(&request.local_ufrag)
                .ok_or(IceError::UnknownUfrag)?;
            let peer = self.peers.get(&id).ok_or(IceError::UnknownUfrag)?;
            let nominated = request.use_candidate;
            let response = request.answer(&peer.ice.local_pwd, from)?;
            Ok((id, nominated, response))
        });
        let Ok((id, nominated, response)) = answered else {
            self.counters.drop(DropReason::BadStun);
            return;
        };
        self.handshake_out.push_back((from, response));
        let Some(peer) = self.peers.get_mut(&id) else {
            return;
        };
        peer.last_seen = now;
        // Latch the first address that proves it knows our password, and move to the one the
        // browser nominates.
        if peer.addr.is_none() || (nominated && peer.addr != Some(from)) {
            if let Some(old) = peer.addr.replace(from) {
                self.by_addr.remove(&old);
                self.unbind(old);
            }
            self.bind(from);
            if let Some(other) = self.by_addr.insert(from, id).filter(|&o| o != id) {
                // Another session had that address (a client that reconnected from the same
                // port): it is not reachable there any more.
                if let Some(peer) = self.peers.get_mut(&other) {
                    peer.addr = None;
                }
            }
        }
    }

    fn handle_srtp(&mut self, now: Instant, id: PeerId, data: &[u8]) {
        if !self.unprotect(id, data, false) {
            return;
        }
        let Some(peer) = self.peers.get_mut(&id) else {
            return;
        };
        let transport = peer.transport;
        if !matches!(peer.role, Role::Publisher(_) | Role::Participant(_)) {
            self.counters.drop(DropReason::NotAPublisher);
            return;
        }
        let packet = Bytes::copy_from_slice(&self.plain);
        if let Err(refused) = self.router.handle_rtp(now, transport, packet) {
            if let ReceiveError::UnknownTransport = refused {
                tracing::error!(peer = %id, "a session's transport is unknown to the engine");
            }
            self.counters.drop(DropReason::of_receive(refused));
        }
    }

    fn handle_srtcp(&mut self, now: Instant, id: PeerId, data: &[u8]) {
        if !self.unprotect(id, data, true) {
            return;
        }
        if let Some(peer) = self.peers.get(&id) {
            // Parsed once; the engine dispatches each item within the session's transport.
            let _ = self.router.handle_rtcp(now, peer.transport, &self.plain);
        }
    }

    /// Decrypts into `plain`; false (counted) when the session has no keys yet or the packet
    /// fails authentication or replay protection.
    fn unprotect(&mut self, id: PeerId, data: &[u8], rtcp: bool) -> bool {
        let Some(srtp) = self.peers.get_mut(&id).and_then(|p| p.srtp.as_mut()) else {
            self.counters.drop(DropReason::NoKeys);
            return false;
        };
        self.plain.clear();
        self.plain.extend_from_slice(data);
        let result = if rtcp {
            srtp.unprotect_rtcp(&mut self.plain)
        } else {
            srtp.unprotect_rtp(&mut self.plain)
        };
        match result {
            Ok(len) => {
                self.plain.truncate(len);
                true
            }
            Err(_) => {
                self.counters.drop(DropReason::SrtpRejected);
                false
            }
        }
    }

    /// The next datagram to send, written into `out`: STUN answers and DTLS records, then
    /// RTCP, then media.
    pub fn poll_datagram(&mut self, out: &mut Vec<u8>) -> Option<SocketAddr> {
        if let Some((to, response)) = self.handshake_out.pop_front() {
            out.clear();
            out.extend_from_slice(&response);
            return Some(to);
        }
        let next = self.poll_rtcp(out).or_else(|| self.poll_media(out));
        if next.is_none() {
            // Sending raised what it raises (layer changes): take it now.
            self.handle_events();
        }
        next
    }

    fn poll_rtcp(&mut self, out: &mut Vec<u8>) -> Option<SocketAddr> {
        let mut buf = [0u8; MAX_DATAGRAM];
        while let Some(rtcp) = self.router.poll_rtcp(&mut buf) {
            let Some(&id) = self.by_transport.get(&rtcp.transport) else {
                continue;
            };
            out.clear();
            out.extend_from_slice(&buf[..rtcp.len]);
            if let Some(to) = self.protect(id, true, out) {
                return Some(to);
            }
        }
        None
    }

    fn poll_media(&mut self, out: &mut Vec<u8>) -> Option<SocketAddr> {
        let mut header = [0u8; MAX_DATAGRAM];
        while let Some(Output {
            transport,
            transmit,
            ..
        }) = self.router.poll_transmit(&mut header)
        {
            let Some(&id) = self.by_transport.get(&transport) else {
                continue;
            };
            out.clear();
            out.extend_from_slice(&header[..transmit.len]);
            out.extend_from_slice(&transmit.payload);
            if let Some(to) = self.protect(id, false, out) {
                self.counters.rtp_out += 1;
                return Some(to);
            }
        }
        None
    }

    /// Encrypts the packet in `out` in place for a connected session; None (counted) while it
    /// has no address or keys.
    fn protect(&mut self, id: PeerId, rtcp: bool, out: &mut Vec<u8>) -> Option<SocketAddr> {
        let peer = self.peers.get_mut(&id)?;
        let (Some(to), Some(srtp)) = (peer.addr, peer.srtp.as_mut()) else {
            self.counters.drop(DropReason::NotConnected);
            return None;
        };
        let len = out.len();
        out.resize(len + MAX_OVERHEAD, 0);
        let result = if rtcp {
            srtp.protect_rtcp(out, len)
        } else {
            srtp.protect_rtp(out, len)
        };
        match result {
            Ok(protected) => {
                out.truncate(protected);
                self.counters.bytes_out += protected as u64;
                Some(to)
            }
            Err(_) => {
                self.counters.drop(DropReason::SrtpRejected);
                None
            }
        }
    }
}
