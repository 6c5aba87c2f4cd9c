//! The output path: each queued job written into the caller's buffer as it polls, media,
//! retransmissions and probes alike, and recorded on the viewer's send side.

use std::time::Instant;

use super::{Event, Job, Output, Published, Router};
use crate::engine::down_track::{DownTrack, Transmit, WriteError};
use crate::engine::id_map::IdMap;
use crate::engine::packet::ParsedPacket;
use crate::engine::receiver::PacketRef;
use crate::engine::track::{DownTrackId, TrackId};
use crate::engine::transport::{SendSide, Transport, TransportId};

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

    /// Loads the next job's DownTrack while this one is written: with hundreds of subscribers
    /// their state is out of cache, and the load overlaps the current subscriber's work
    /// instead of stalling the next.
    fn touch_next_down_track(&self) {
        if let Some(Job::Forward { down_track, .. }) = self.jobs.front() {
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
            record(side, now, transmit);
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
        let budget = self
            .transports
            .get_mut(&transport)
            .and_then(|t| t.allocation.as_mut());
        if let (Some(allocation), Some(now)) = (budget, self.last_input) {
            if !allocation.rtx.take(now, packet.bytes.len()) {
                self.counters.retransmissions_over_budget += 1;
                return Ok(None);
            }
        }
        let send = stamped(&mut self.transports, transport, down_track);
        let seq = send.as_ref().map(|s| s.0);
        let transmit = down_track.write_retransmission(out_seq, packet, seq, buf)?;
        if let (Some((_, side)), Some(now)) = (send, self.last_input) {
            record(side, now, &transmit);
        }
        Ok(Some(Output {
            transport: down_track.transport(),
            down_track: id,
            transmit,
        }))
    }
}

/// The received packet `down_track` sent from `at`, if its track still keeps it.
pub(super) fn source_packet<'a>(
    tracks: &'a IdMap<TrackId, Published>,
    down_track: &DownTrack,
    at: PacketRef,
) -> Option<&'a ParsedPacket> {
    tracks.get(&down_track.track())?.receiver.packet(at)
}

/// The transport-wide sequence number a packet of `down_track` is to carry, and the send side
/// that records it once it is written: only when the subscription negotiated the extension.
pub(super) fn stamped<'a>(
    transports: &'a mut IdMap<TransportId, Transport>,
    transport: TransportId,
    down_track: &DownTrack,
) -> Option<(u16, &'a mut SendSide)> {
    down_track.config().transport_cc_ext_id?;
    let side = transports.get_mut(&transport)?.send.as_deref_mut()?;
    Some((side.history.next_sequence(), side))
}

/// Records a media packet or retransmission sent on a transport with a send side: a
/// running probe cluster counts it too, so its result is what the path carried of all.
fn record(side: &mut SendSide, now: Instant, transmit: &Transmit) {
    let cluster = side.prober.running();
    side.history
        .on_send(now, transmit.len + transmit.payload.len(), cluster);
}
