//! The output path: each queued job written into the caller's buffer as it polls, media,
//! retransmissions and probes alike, and recorded on the viewer's send side. A job toward a
//! paced transport whose pacer is closed waits in that transport's queue; transports with jobs
//! waiting take turns as their pacers open. Probe packets keep their own cluster's timing and
//! go past the pacer.

use std::time::Instant;

use rtp_ext::codec::MediaKind;

use super::{Event, Job, Output, Published, Router};
use crate::engine::down_track::{DownTrack, Transmit, WriteError, SEND_HISTORY};
use crate::engine::id_map::IdMap;
use crate::engine::packet::ParsedPacket;
use crate::engine::receiver::PacketRef;
use crate::engine::track::{DownTrackId, TrackId};
use crate::engine::transport::{Paced, SendSide, Transport, TransportId};

/// Which queued job's DownTrack is asked for while one is written (0: the next): far enough
/// ahead that its lines arrive before its turn, not so far that they leave again.
const AHEAD: usize = 1;
/// Retransmissions one paced transport holds while its pacer is closed, at most.
const WAITING_RETRANSMISSIONS: usize = 2 * SEND_HISTORY;

impl Router {
    /// The next media packet for a subscriber, its header written into `buf`.
    #[must_use = "what it returns is lost otherwise"]
    pub fn poll_transmit(&mut self, buf: &mut [u8]) -> Option<Output> {
        if self.packets_queued > 1 {
            self.group_jobs();
        }
        self.packets_queued = 0;
        loop {
            let job = match self.jobs.pop_front() {
                Some(job) if self.hold(job) => continue,
                Some(job) => job,
                None => self.next_paced()?,
            };
            self.touch_next_down_track();
            let result = match job {
                Job::Forward { down_track, at } => self.forward(down_track, at, buf),
                Job::Retransmit {
                    down_track,
                    out_seq,
                } => self.retransmit(down_track, out_seq, buf),
                Job::Probe {
                    down_track,
                    cluster,
                } => self.probe(down_track, cluster, buf),
            };
            match result {
                Ok(Some(output)) => {
                    if !matches!(job, Job::Probe { .. }) {
                        let size = output.transmit.len + output.transmit.payload.len();
                        self.charge(output.transport, size);
                    }
                    return Some(output);
                }
                Ok(None) => {}
                Err(WriteError::Rewrite) => self.counters.write_failures += 1,
                Err(WriteError::NotRemembered) => {}
            }
        }
    }

    /// Puts the queue in subscriber order, each subscriber's jobs in the order they came.
    /// Several publisher packets taken in one turn (a frame arrives as a burst) queue one job
    /// per subscriber each, packet after packet: written in that order, every job loads its
    /// subscriber's state (down track, send side, SRTP context) out of cache again, hundreds
    /// of subscribers later. Grouped, a subscriber's packets go out together while its state
    /// is loaded. The sort's keys are unique (the position breaks ties), so an unstable sort
    /// keeps each subscriber's order and needs no space beyond the reused scratch.
    fn group_jobs(&mut self) {
        let scratch = &mut self.job_scratch;
        scratch.clear();
        scratch.extend(self.jobs.drain(..).enumerate().map(|(i, job)| {
            let id = match job {
                Job::Forward { down_track, .. }
                | Job::Retransmit { down_track, .. }
                | Job::Probe { down_track, .. } => down_track.0,
            };
            ((u64::from(id) << 32) | i as u64, job)
        }));
        scratch.sort_unstable_by_key(|&(key, _)| key);
        self.jobs.extend(scratch.drain(..).map(|(_, job)| job));
    }

    /// The transport the next queued job writes for, if one is queued: a host that keeps
    /// per-transport state of its own (SRTP) can ask for it while this packet is finished,
    /// as the router asks for its own (the transport's pacer and send side) meanwhile.
    pub fn next_transport(&self) -> Option<TransportId> {
        let (Job::Forward { down_track, .. }
        | Job::Retransmit { down_track, .. }
        | Job::Probe { down_track, .. }) = *self.jobs.front()?;
        let transport = self.down_tracks.get(&down_track)?.transport();
        if let Some(on) = self.transports.get(&transport) {
            on.touch();
        }
        Some(transport)
    }

    /// Asks for the DownTrack of the job [`AHEAD`] while this one is written: with hundreds
    /// of subscribers their state is out of cache, and fetching it overlaps the work of the
    /// jobs before it instead of stalling its own.
    fn touch_next_down_track(&self) {
        if let Some(Job::Forward { down_track, .. }) = self.jobs.get(AHEAD) {
            if let Some(next) = self.down_tracks.get(down_track) {
                next.touch();
            }
        }
    }

    fn forward(
        &mut self,
        id: DownTrackId,
        at: PacketRef,
        buf: &mut [u8],
    ) -> Result<Option<Output>, WriteError> {
        let Some(down_track) = self.down_tracks.get(&id) else {
            return Ok(None);
        };
        let Some(published) = self.tracks.get_mut(&down_track.track()) else {
            return Ok(None);
        };
        let Some(packet) = published.receiver.packet(at) else {
            return Ok(None);
        };
        let transport = down_track.transport();
        let send = stamped(&mut self.transports, transport, down_track);
        let written = down_track.write(packet, at, send.as_ref().map(|s| s.0), buf);
        // A packet to forward came through `handle_rtp`, which set `last_input`.
        if let (Some(stream), Some(now)) = (written.keyframe, self.last_input) {
            published.keyframes.request(now, stream);
        }
        if let (Ok(Some(transmit)), Some((_, side)), Some(now)) =
            (&written.result, send, self.last_input)
        {
            side.on_sent(now, transmit.len + transmit.payload.len());
        }
        if let Some(layer) = written.layer_changed {
            self.events.push_back(Event::LayerChanged {
                transport,
                down_track: id,
                layer,
            });
        }
        Ok(written.result?.map(|transmit| Output {
            transport,
            down_track: id,
            transmit,
        }))
    }

    fn retransmit(
        &mut self,
        id: DownTrackId,
        out_seq: u16,
        buf: &mut [u8],
    ) -> Result<Option<Output>, WriteError> {
        let Some(down_track) = self.down_tracks.get(&id) else {
            return Ok(None);
        };
        let Some(at) = down_track.sent_source(out_seq) else {
            return Ok(None);
        };
        let Some(packet) = source_packet(&self.tracks, down_track, at) else {
            return Ok(None);
        };
        let transport = down_track.transport();
        let on = self.transports.get_mut(&transport);
        if let (Some(on), Some(now)) = (on, self.last_input) {
            if !on.take_rtx(now, packet.bytes.len()) {
                self.counters.retransmissions_over_budget += 1;
                return Ok(None);
            }
        }
        let send = stamped(&mut self.transports, transport, down_track);
        let seq = send.as_ref().map(|s| s.0);
        let transmit = down_track.write_retransmission(out_seq, packet, seq, buf)?;
        if let (Some((_, side)), Some(now)) = (send, self.last_input) {
            side.on_sent(now, transmit.len + transmit.payload.len());
        }
        Ok(Some(Output {
            transport: down_track.transport(),
            down_track: id,
            transmit,
        }))
    }

    /// Queues the probe packets due at `now`: each through a subscription of its transport
    /// that has a packet to send again. A transport whose cluster ended (or that is gone)
    /// leaves the probing ones.
    pub(super) fn queue_probes(&mut self, now: Instant) {
        let mut probing = std::mem::take(&mut self.probing);
        probing.retain(|&transport| self.queue_probe(now, transport));
        self.probing = probing;
    }

    /// Queues `transport`'s probe packet if one is due; whether its cluster still runs.
    fn queue_probe(&mut self, now: Instant, transport: TransportId) -> bool {
        let Some(on) = self.transports.get_mut(&transport) else {
            return false;
        };
        let Some(side) = on.send_side() else {
            return false;
        };
        if let Some(cluster) = side.probe_due(now) {
            let source = on.down_tracks.values().copied().find(|id| {
                self.down_tracks
                    .get(id)
                    .is_some_and(|d| d.transport() == transport && d.probe_source().is_some())
            });
            match source {
                Some(down_track) => self.jobs.push_back(Job::Probe {
                    down_track,
                    cluster,
                }),
                None => {
                    if let Some(side) = on.send_side_mut() {
                        side.abandon_probe();
                    }
                }
            }
        }
        on.send_side()
            .is_some_and(|side| side.next_probe().is_some())
    }

    /// One probe packet of `cluster` through subscription `id`: the newest packet it sent,
    /// again on its RTX stream.
    fn probe(
        &mut self,
        id: DownTrackId,
        cluster: u32,
        buf: &mut [u8],
    ) -> Result<Option<Output>, WriteError> {
        let (Some(down_track), Some(now)) = (self.down_tracks.get(&id), self.last_input) else {
            return Ok(None);
        };
        let Some((out_seq, at)) = down_track.probe_source() else {
            return Ok(None);
        };
        let Some(packet) = source_packet(&self.tracks, down_track, at) else {
            return Ok(None);
        };
        let transport = down_track.transport();
        let send = stamped(&mut self.transports, transport, down_track);
        let seq = send.as_ref().map(|s| s.0);
        let transmit: Transmit = down_track.write_probe(out_seq, packet, seq, buf)?;
        if let Some((_, side)) = send {
            side.on_probe_sent(now, transmit.len + transmit.payload.len(), cluster);
        }
        Ok(Some(Output {
            transport,
            down_track: id,
            transmit,
        }))
    }

    /// Whether `job` waits in its transport's queue instead of going now: when the
    /// transport is paced and its pacer is closed or others wait before it.
    fn hold(&mut self, job: Job) -> bool {
        if self.paced == 0 {
            return false;
        }
        let (down_track, retransmission) = match job {
            Job::Forward { down_track, .. } => (down_track, false),
            Job::Retransmit { down_track, .. } => (down_track, true),
            Job::Probe { .. } => return false,
        };
        let (Some(d), Some(now)) = (self.down_tracks.get(&down_track), self.last_input) else {
            return false;
        };
        let transport = d.transport();
        let Some(on) = self.transports.get_mut(&transport) else {
            return false;
        };
        let tracks = &self.tracks;
        let urgent = || {
            retransmission
                || tracks
                    .get(&d.track())
                    .is_some_and(|p| p.receiver.config().codec.kind() == MediaKind::Audio)
        };
        // NACKs that keep coming while the pacer is closed (a viewer that reports a tiny
        // estimate) would queue retransmissions for up to `MAX_HOLD`: no more wait than two
        // send histories' worth; the rest are refused now.
        let full = |paced: &Paced| paced.retransmissions() >= WAITING_RETRANSMISSIONS;
        if retransmission && on.pacer_mut().is_some_and(|paced| full(paced)) {
            self.counters.retransmissions_queue_full += 1;
            return true;
        }
        match on
            .pacer_mut()
            .and_then(|paced| paced.hold(now, job, urgent))
        {
            None => false,
            Some(listed) => {
                if listed {
                    self.backlogged.push_back(transport);
                }
                true
            }
        }
    }

    /// The next queued job whose transport's pacer lets it go now. Transports take turns,
    /// one that is open keeps its turn until it closes or empties.
    fn next_paced(&mut self) -> Option<Job> {
        let now = self.last_input?;
        for _ in 0..self.backlogged.len() {
            let transport = *self.backlogged.front()?;
            let Some(on) = self.transports.get_mut(&transport) else {
                self.backlogged.pop_front();
                continue;
            };
            if let Some((job, overdue)) = on.pacer_mut().and_then(|paced| paced.pop(now)) {
                self.counters.paced_overdue += u64::from(overdue);
                return Some(job);
            }
            self.backlogged.pop_front();
            if on.pacer_mut().is_some_and(Paced::stays_listed) {
                self.backlogged.push_back(transport);
            }
        }
        None
    }

    /// A packet of `bytes` left toward `transport`: its pacer is charged with it.
    fn charge(&mut self, transport: TransportId, bytes: usize) {
        if self.paced == 0 {
            return;
        }
        let paced = self
            .transports
            .get_mut(&transport)
            .and_then(Transport::pacer_mut);
        if let (Some(paced), Some(now)) = (paced, self.last_input) {
            paced.on_sent(now, bytes);
        }
    }

    /// When the next probe packet is due, toward any viewer.
    pub(super) fn probe_due(&self) -> Option<Instant> {
        self.probing
            .iter()
            .filter_map(|t| self.transports.get(t)?.send_side()?.next_probe())
            .min()
    }

    /// When the next queued job may leave, toward any viewer: only those listed have any.
    pub(super) fn pacing_due(&self) -> Option<Instant> {
        self.backlogged
            .iter()
            .filter_map(|t| self.transports.get(t)?.pacer()?.due())
            .min()
    }

    /// Packets waiting for the pacer toward `transport` (those the selector will drop
    /// included: it decides when they leave).
    pub fn paced_jobs(&self, transport: TransportId) -> usize {
        self.transports
            .get(&transport)
            .and_then(Transport::pacer)
            .map_or(0, Paced::len)
    }
}

/// The received packet `down_track` sent from `at`, if its track still keeps it.
fn source_packet<'a>(
    tracks: &'a IdMap<TrackId, Published>,
    down_track: &DownTrack,
    at: PacketRef,
) -> Option<&'a ParsedPacket> {
    tracks.get(&down_track.track())?.receiver.packet(at)
}

/// The transport-wide sequence number a packet of `down_track` is to carry, and the send side
/// that records it once it is written: only when the subscription negotiated the extension.
fn stamped<'a>(
    transports: &'a mut IdMap<TransportId, Transport>,
    transport: TransportId,
    down_track: &DownTrack,
) -> Option<(u16, &'a mut SendSide)> {
    down_track.config().transport_cc_ext_id?;
    let side = transports.get_mut(&transport)?.send_side_mut()?;
    Some((side.next_sequence(), side))
}
