//! Allocation's dispatch: the estimate a viewer transport gets, its subscriptions weighed
//! from the router's tracks and down tracks, fitted (`allocation`), and the layers set.

use std::time::Instant;

use rtp_ext::codec::MediaKind;
use selector::Layer;
use smallvec::SmallVec;

use super::{Event, Router};
use crate::engine::allocation::{default_order, Weighed};
use crate::engine::track::DownTrackId;
use crate::engine::transport::{Transport, TransportId};

impl Router {
    /// A viewer transport's bandwidth estimate: its layers are fitted to it.
    pub(super) fn on_estimate(&mut self, now: Instant, transport: TransportId, bitrate_bps: u64) {
        let Some(on) = self.transports.get_mut(&transport) else {
            return;
        };
        if on.set_estimate(now, bitrate_bps) {
            self.paced += 1;
        }
        self.events.push_back(Event::BandwidthEstimate {
            transport,
            bitrate_bps,
        });
        self.reallocate(now, transport);
    }

    /// The host changed what a subscription may get: allocation again at once, an up-switch
    /// the viewer asked for not held back by the interval between the estimate's own.
    pub(super) fn on_limits_changed(&mut self, transport: TransportId) {
        let Some(now) = self.last_input else {
            return;
        };
        if self.forget_last_up(transport) {
            self.reallocate(now, transport);
            // Nor does the viewer's own switch hold back the next up-switch the estimate
            // allows (the probe that a ceiling above the estimate starts may show it soon).
            self.forget_last_up(transport);
        }
    }

    /// Whether the transport has an allocation, its last up-switch forgotten if so.
    fn forget_last_up(&mut self, transport: TransportId) -> bool {
        self.transports
            .get_mut(&transport)
            .is_some_and(Transport::forget_last_up)
    }

    /// Allocation again for every transport with an estimate.
    pub(super) fn reallocate_all(&mut self, now: Instant) {
        // A list kept from one interval to the next: a node with hundreds of viewers makes
        // it once.
        let mut with_estimate = std::mem::take(&mut self.transport_scratch);
        with_estimate.clear();
        with_estimate.extend(
            self.transports
                .iter()
                .filter(|(_, t)| t.has_estimate())
                .map(|(&id, _)| id),
        );
        for &transport in &with_estimate {
            self.reallocate(now, transport);
        }
        self.transport_scratch = with_estimate;
    }

    /// Fits the transport's subscriptions to its estimate; one without a layer yet gets its
    /// start, which is no up-switch.
    pub(super) fn reallocate(&mut self, now: Instant, transport: TransportId) {
        if self
            .transports
            .get(&transport)
            .is_none_or(|t| !t.has_estimate())
        {
            return;
        }
        let (audio_bps, video) = self.weigh(now, transport);
        let Some(on) = self.transports.get_mut(&transport) else {
            return;
        };
        let Some(fitted) = on.reallocate(now, audio_bps, &video) else {
            return;
        };
        for &(id, layer) in &fitted.changes {
            if let Some(down_track) = self.down_tracks.get(&id) {
                down_track.set_allocated(Some(layer));
            }
            self.events.push_back(Event::LayerAllocated {
                transport,
                down_track: id,
                layer,
            });
        }
        self.paced += usize::from(fitted.paced);
        self.counters.probe_clusters += u64::from(fitted.probed);
        if fitted.probed && !self.probing.contains(&transport) {
            self.probing.push(transport);
        }
    }

    /// The transport's audio rate, and its video subscriptions with their layer rates.
    fn weigh(&self, now: Instant, transport: TransportId) -> (u64, SmallVec<[Weighed; 4]>) {
        let mut audio_bps = 0;
        let mut video = SmallVec::new();
        let Some(on) = self.transports.get(&transport) else {
            return (audio_bps, video);
        };
        let mut ids: SmallVec<[DownTrackId; 8]> = on.down_tracks.values().copied().collect();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            let Some(down_track) = self.down_tracks.get(&id) else {
                continue;
            };
            let Some(published) = self.tracks.get(&down_track.track()) else {
                continue;
            };
            let rates = published.receiver.layer_bitrates(now);
            if published.receiver.config().codec.kind() == MediaKind::Audio {
                audio_bps += rates.bps(Layer::new(0, 0));
                continue;
            }
            let (limits, allocated) = down_track.limits();
            let order = published
                .layer_order
                .clone()
                .unwrap_or_else(|| default_order(&rates));
            video.push(Weighed {
                id,
                rates,
                order,
                ceiling: limits.effective(),
                allocated,
                forwarded: down_track.current_layer(),
                priority: published.priority,
            });
        }
        (audio_bps, video)
    }
}
