//! Probe clusters toward viewers whose allocation the estimate holds below what they asked
//! for: the newest packet of one of their subscriptions sent again on its RTX stream, paced at
//! the cluster's rate and stamped with the cluster, so the viewer's feedback shows whether the
//! path carries more before they are moved up.

use std::time::Instant;

use super::{Job, Router};
use crate::engine::bwe::BandwidthEstimator;
use crate::engine::down_track::{Transmit, WriteError};
use crate::engine::track::DownTrackId;
use crate::engine::transport::TransportId;

use super::send::{source_packet, stamped};
use super::Output;

impl Router {
    /// Starts a cluster toward `transport` that brings what it is sent up to `target_bps`
    /// while it runs: probe packets at the rate media (`media_bps`) leaves over, the media
    /// sent meanwhile counted in the cluster. Only if it has a send side and may probe.
    pub(super) fn start_probe(
        &mut self,
        now: Instant,
        transport: TransportId,
        target_bps: u64,
        media_bps: u64,
    ) {
        // At least a quarter of the target in probe packets, so a cluster ends soon even
        // when media alone is near the target.
        let rate_bps = target_bps.saturating_sub(media_bps).max(target_bps / 4);
        let Some(on) = self.transports.get_mut(&transport) else {
            return;
        };
        let last_down = on.allocation.and_then(|a| a.last_down);
        // Not before the viewer's first feedback: until it reports, nothing would measure
        // the cluster.
        let Some(side) = on
            .send
            .as_deref_mut()
            .filter(|side| side.history.counters().matched > 0)
        else {
            return;
        };
        // A cluster the path carried whole, with no downgrade or fall of the estimate
        // since, says the path may carry more: the next may follow sooner, so a viewer whose
        // link opened up climbs within seconds.
        let estimator = &side.estimator;
        let room_shown = estimator.capacity_bps().is_none()
            && estimator
                .probe_result_at()
                .zip(estimator.probe_result_bps())
                .is_some_and(|(at, bps)| {
                    last_down.is_none_or(|down| at > down) && estimator.estimate_bps() >= bps
                });
        if side.prober.start(now, rate_bps, room_shown).is_some() {
            self.counters.probe_clusters += 1;
        }
    }

    /// Queues the probe packets due at `now`.
    pub(super) fn queue_probes(&mut self, now: Instant) {
        for (&transport, on) in &mut self.transports {
            let Some(side) = on.send.as_deref_mut() else {
                continue;
            };
            let Some(cluster) = side.prober.due(now) else {
                continue;
            };
            let mut ids = on.down_tracks.values();
            let source = ids.find(|id| {
                self.down_tracks
                    .get(id)
                    .is_some_and(|d| d.transport() == transport && d.probe_source().is_some())
            });
            match source {
                Some(&down_track) => self.jobs.push_back(Job::Probe {
                    down_track,
                    cluster,
                }),
                None => side.prober.abandon(),
            }
        }
    }

    /// When the next probe packet is due, toward any viewer.
    pub(super) fn probe_due(&self) -> Option<Instant> {
        self.transports
            .values()
            .filter_map(|t| t.send.as_ref()?.prober.next_due())
            .min()
    }

    /// One probe packet of `cluster` through subscription `id`.
    pub(super) fn probe(
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
            let size = transmit.len + transmit.payload.len();
            side.history.on_send(now, size, Some(cluster));
            side.prober.on_sent(now, size);
        }
        Ok(Some(Output {
            transport,
            down_track: id,
            transmit,
        }))
    }
}
