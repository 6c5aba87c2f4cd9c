//! Fitting each viewer transport's layers to its bandwidth estimate. The estimate comes from
//! the viewer (REMB) or, later, from the router's own estimator; allocation runs whenever it
//! changes and once per report interval, since the publisher's layer rates drift.
//!
//! Down at once when what the viewer is sent no longer fits; up only after a hold-down since
//! the last downgrade and at most once per [`UP_INTERVAL`], so a fluctuating estimate does not
//! make the viewer oscillate (each spatial up-switch costs a keyframe, which also goes
//! through the publisher's keyframe throttle).

use std::time::{Duration, Instant};

use rtp_ext::codec::MediaKind;
use selector::Layer;
use smallvec::SmallVec;

use super::{Event, Router};
use crate::engine::allocation::{allocate, AllocationInput, LayerOrder};
use crate::engine::layer_rates::{LayerBitrates, MEASURED_LAYERS};
use crate::engine::track::DownTrackId;
use crate::engine::transport::{Allocation, TransportId};

/// No up-switch this soon after a downgrade.
pub const HOLD_DOWN: Duration = Duration::from_secs(5);
/// At most one up-switch per transport this often.
pub const UP_INTERVAL: Duration = Duration::from_secs(2);

/// A viewer's video subscription as allocation weighs it.
struct Weighed {
    id: DownTrackId,
    rates: LayerBitrates,
    order: LayerOrder,
    ceiling: Layer,
    allocated: Option<Layer>,
}

impl Router {
    /// A viewer transport's bandwidth estimate: its layers are fitted to it.
    pub(super) fn on_estimate(&mut self, now: Instant, transport: TransportId, bitrate_bps: u64) {
        let Some(on) = self.transports.get_mut(&transport) else {
            return;
        };
        on.allocation
            .get_or_insert_with(Allocation::default)
            .estimate_bps = bitrate_bps;
        self.events.push_back(Event::BandwidthEstimate {
            transport,
            bitrate_bps,
        });
        self.reallocate(now, transport);
    }

    /// Allocation again for every transport with an estimate.
    pub(super) fn reallocate_all(&mut self, now: Instant) {
        let with_estimate: SmallVec<[TransportId; 16]> = self
            .transports
            .iter()
            .filter(|(_, t)| t.allocation.is_some())
            .map(|(&id, _)| id)
            .collect();
        for transport in with_estimate {
            self.reallocate(now, transport);
        }
    }

    fn reallocate(&mut self, now: Instant, transport: TransportId) {
        let Some(state) = self.transports.get(&transport).and_then(|t| t.allocation) else {
            return;
        };
        let (audio_bps, video) = self.weigh(now, transport);
        let inputs: SmallVec<[AllocationInput<'_>; 4]> = video
            .iter()
            .map(|w| AllocationInput {
                rates: &w.rates,
                order: &w.order,
                ceiling: w.ceiling,
            })
            .collect();
        let chosen = allocate(state.estimate_bps.saturating_sub(audio_bps), &inputs);
        let may_rise = state.last_down.is_none_or(|at| now >= at + HOLD_DOWN)
            && state.last_up.is_none_or(|at| now >= at + UP_INTERVAL);
        let (mut down, mut up) = (false, false);
        let mut media_bps = audio_bps;
        for (w, layer) in video.iter().zip(chosen) {
            let rate = |l: Option<Layer>| l.map_or(u64::MAX, |l| w.rates.bps(l));
            let lower = rate(Some(layer)) < rate(w.allocated);
            let higher = rate(Some(layer)) > rate(w.allocated);
            if (higher && !may_rise) || Some(layer) == w.allocated || !(lower || higher) {
                media_bps += w.allocated.map_or(0, |l| w.rates.bps(l));
                continue;
            }
            media_bps += w.rates.bps(layer);
            down |= lower;
            up |= higher;
            if let Some(down_track) = self.down_tracks.get(&w.id) {
                down_track.set_allocated(Some(layer));
            }
            self.events.push_back(Event::LayerAllocated {
                transport,
                down_track: w.id,
                layer,
            });
        }
        if let Some(state) = self
            .transports
            .get_mut(&transport)
            .and_then(|t| t.allocation.as_mut())
        {
            state.last_down = if down { Some(now) } else { state.last_down };
            state.last_up = if up { Some(now) } else { state.last_up };
            state.rtx.set(now, state.estimate_bps, media_bps);
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
            });
        }
        (audio_bps, video)
    }
}

/// The frame-rate-first order over the layers the publisher sends: as many temporal layers as
/// the base spatial layer has, as many spatial layers as have a rate at the top one.
fn default_order(rates: &LayerBitrates) -> LayerOrder {
    let layers = 0..MEASURED_LAYERS as u8;
    let temporal = layers
        .clone()
        .filter(|&t| rates.bps(Layer::new(0, t)) > 0)
        .max()
        .map_or(1, |t| t + 1);
    let spatial = layers
        .filter(|&s| rates.bps(Layer::new(s, temporal - 1)) > 0)
        .max()
        .map_or(1, |s| s + 1);
    LayerOrder::frame_rate_first(spatial, temporal)
}
