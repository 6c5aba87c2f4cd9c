//! The sessions' DTLS associations, driven by the core like everything else on its wire: a
//! session's first DTLS record starts its association (its handshake timeout counts from
//! there), records go in with `now`, and what the association sends leaves through the core's
//! one output path ([`NodeCore::poll_datagram`]), batched and counted with the media. Its
//! timers are the core's timers; its SRTP keys connect the session; its application data (SCTP)
//! reaches the core here.

use std::time::Instant;

use super::NodeCore;
use crate::node::dtls::{DtlsAssociation, DtlsConfig, DtlsError, DtlsOutput};
use crate::node::metrics::DropReason;
use crate::node::peer::PeerId;
use crate::node::srtp;

/// What a session's association reported that the core acts on after the association's
/// borrow ends.
enum Step {
    /// A datagram for the peer, the first `len` bytes of the core's DTLS buffer.
    Send(usize),
    Connected(srtp::SrtpKeys),
    ApplicationData(usize),
    Ended(Option<DtlsError>),
}

impl NodeCore {
    /// The certificate and handshake timeout of every session's DTLS association. Without
    /// it the core starts none, and sessions get their keys through
    /// [`set_srtp`](Self::set_srtp) alone.
    pub fn with_dtls(mut self, config: DtlsConfig) -> Self {
        self.dtls = Some(config);
        self
    }

    /// A DTLS datagram from session `id`'s address.
    pub(super) fn handle_dtls(&mut self, now: Instant, id: PeerId, data: &[u8]) {
        let Some(peer) = self.peers.get_mut(&id) else {
            return;
        };
        if peer.dtls.is_none() {
            let started = match (&self.dtls, &peer.fingerprint) {
                (Some(config), Some(fingerprint)) => {
                    let remote = (fingerprint.algorithm.as_str(), fingerprint.value.as_str());
                    DtlsAssociation::new(now, config, remote)
                }
                // A session whose keys come some other way, or a node without a certificate.
                _ => Err(DtlsError::NotConnected),
            };
            match started {
                Ok(association) => peer.dtls = Some(Box::new(association)),
                Err(e) => {
                    tracing::debug!(peer = %id, "DTLS record refused: {e}");
                    self.counters.drop(DropReason::BadDtls);
                    return;
                }
            }
        }
        let Some(association) = peer.dtls.as_mut() else {
            return;
        };
        match association.handle_datagram(now, data) {
            Ok(()) => {}
            // A retransmission after a lost answer, which comes again on the association's timer.
            Err(DtlsError::RepeatedHello) => self.counters.drop(DropReason::Duplicate),
            Err(e) => {
                tracing::debug!(peer = %id, "DTLS record refused: {e}");
                self.counters.drop(DropReason::BadDtls);
            }
        }
        self.drive_dtls(now, id);
    }

    /// When the next association's timer is due (a retransmission, a handshake's deadline).
    pub(super) fn dtls_timeout(&self) -> Option<Instant> {
        self.dtls_timers.first().map(|&(at, _)| at)
    }

    /// Serves every association whose timer is due.
    pub(super) fn handle_dtls_timeouts(&mut self, now: Instant) {
        while let Some(&(at, id)) = self.dtls_timers.first() {
            if at > now {
                break;
            }
            self.dtls_timers.pop_first();
            let Some(association) = self.peers.get_mut(&id).and_then(|p| {
                p.dtls_timer = None;
                p.dtls.as_mut()
            }) else {
                continue;
            };
            association.handle_timeout(now);
            self.drive_dtls(now, id);
        }
    }

    /// Forgets a removed session's timer.
    pub(super) fn forget_dtls_timer(&mut self, id: PeerId, timer: Option<Instant>) {
        if let Some(at) = timer {
            self.dtls_timers.remove(&(at, id));
        }
    }

    /// Takes everything session `id`'s association has for the core, then re-arms its timer.
    pub(super) fn drive_dtls(&mut self, now: Instant, id: PeerId) {
        while let Some(step) = self.next_dtls_step(id) {
            match step {
                Step::Send(len) => self.send_dtls(id, len),
                Step::Connected(keys) => self.connect_srtp(id, &keys),
                Step::ApplicationData(len) => self.on_application_data(now, id, len),
                Step::Ended(failure) => {
                    self.end_dtls(id, failure);
                    return;
                }
            }
        }
        self.arm_dtls_timer(id);
    }

    fn next_dtls_step(&mut self, id: PeerId) -> Option<Step> {
        let association = self.peers.get_mut(&id)?.dtls.as_mut()?;
        let step = match association.poll_output(&mut self.dtls_buffer)? {
            DtlsOutput::Datagram(datagram) => Step::Send(datagram.len()),
            DtlsOutput::Connected(keys) => Step::Connected(keys),
            DtlsOutput::ApplicationData(data) => Step::ApplicationData(data.len()),
            DtlsOutput::Closed => Step::Ended(None),
            DtlsOutput::Failed(e) => Step::Ended(Some(e)),
        };
        Some(step)
    }

    /// Queues a record for the session's address, before any media: a session that moved
    /// address (ICE nominated another) gets it at the new one.
    fn send_dtls(&mut self, id: PeerId, len: usize) {
        let Some(to) = self.peers.get(&id).and_then(|p| p.addr) else {
            self.counters.drop(DropReason::NotConnected);
            return;
        };
        let record = self.dtls_buffer.get(..len).unwrap_or_default().to_vec();
        self.handshake_out.push_back((to, record));
    }

    fn connect_srtp(&mut self, id: PeerId, keys: &srtp::SrtpKeys) {
        match srtp::SrtpSession::with_streams(keys, self.limits.srtp_streams_per_session) {
            Ok(context) => {
                tracing::info!(peer = %id, "DTLS-SRTP connected");
                self.set_srtp(id, Box::new(context));
            }
            Err(e) => {
                tracing::warn!(peer = %id, "SRTP keys unusable: {e}");
                self.counters.dtls_failures += 1;
                let _ = self.remove_peer(id);
            }
        }
    }

    /// The association ended: the peer closed it (`close_notify`, the peer connection
    /// closed), or it failed; either way the session ends with it.
    fn end_dtls(&mut self, id: PeerId, failure: Option<DtlsError>) {
        match failure {
            None => tracing::info!(peer = %id, "DTLS closed by the peer"),
            Some(e) => {
                tracing::warn!(peer = %id, "DTLS handshake failed: {e}");
                self.counters.dtls_failures += 1;
            }
        }
        let _ = self.remove_peer(id);
    }

    fn arm_dtls_timer(&mut self, id: PeerId) {
        let Some(peer) = self.peers.get_mut(&id) else {
            return;
        };
        let next = peer.dtls.as_ref().and_then(|a| a.poll_timeout());
        if next == peer.dtls_timer {
            return;
        }
        if let Some(old) = std::mem::replace(&mut peer.dtls_timer, next) {
            self.dtls_timers.remove(&(old, id));
        }
        if let Some(at) = next {
            self.dtls_timers.insert((at, id));
        }
    }
}
