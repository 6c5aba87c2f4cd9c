//! Fitting each viewer transport's layers to its bandwidth estimate. The estimate comes from
//! the viewer (REMB) or, later, from the router's own estimator; allocation runs whenever it
//! changes and once per report interval, since the publisher's layer rates drift.
//!
//! Down at once when what the viewer is sent no longer fits (by more than a tenth); up only after a hold-down since
//! the last downgrade and at most once per [`UP_INTERVAL`], so a fluctuating estimate does not
//! make the viewer oscillate (each spatial up-switch costs a keyframe, which also goes
//! through the publisher's keyframe throttle).

use std::time::{Duration, Instant};

use rtp_ext::codec::MediaKind;
use selector::Layer;
use smallvec::SmallVec;

use super::{Event, Router};
use crate::engine::allocation::{allocate, next_step_bps, AllocationInput, LayerOrder};
use crate::engine::bwe::BandwidthEstimator;
use crate::engine::layer_rates::{LayerBitrates, MEASURED_LAYERS};
use crate::engine::rtcp::TransportCc;
use crate::engine::track::DownTrackId;
use crate::engine::transport::{Allocation, SendSide, TransportId};

/// No up-switch this soon after a downgrade.
pub const HOLD_DOWN: Duration = Duration::from_secs(5);
/// At most one up-switch per transport this often.
pub const UP_INTERVAL: Duration = Duration::from_secs(2);
/// Probes run one part in this many above the rate they test, so that a path that carries
/// it shows it with room to spare: a probe's result comes out under what was sent (media
/// frames in it are bursty, the last packet's time is not counted).
const PROBE_MARGIN: u64 = 2;
/// A subscription keeps its layer while that fits within one part in this many over the
/// budget.
const STAY_TOLERANCE: u64 = 10;
/// An up-switch fits in all but this fraction (a sixth) of what the path has shown it
/// carries: a probe through a token-bucket shaper has read a fifth above the shaper's rate.
const RISE_HEADROOM: u64 = 6;
/// A transport-wide estimate is handed to allocation when it moves by more than one part in
/// this many ...
const REPORT_CHANGE: u64 = 20;
/// ... or this long after the last one.
const REPORT_INTERVAL: Duration = Duration::from_secs(1);

/// A viewer's video subscription as allocation weighs it.
struct Weighed {
    id: DownTrackId,
    rates: LayerBitrates,
    order: LayerOrder,
    ceiling: Layer,
    allocated: Option<Layer>,
    /// What it is sent now.
    forwarded: Option<Layer>,
    /// Its track's video is climbed first.
    priority: bool,
}

impl Router {
    /// A viewer's transport-wide CC feedback: matched against what was sent, fed to the
    /// estimator, and the estimate handed to allocation when it moved (or a second passed).
    pub(super) fn on_transport_cc(
        &mut self,
        now: Instant,
        transport: TransportId,
        feedback: &TransportCc<'_>,
    ) {
        let Some(side) = self
            .transports
            .get_mut(&transport)
            .and_then(|t| t.send.as_deref_mut())
        else {
            return;
        };
        if side
            .history
            .on_feedback(feedback, &mut side.results)
            .is_err()
        {
            self.counters.bad_rtcp += 1;
            return;
        }
        side.estimator.on_feedback(now, &side.results);
        if let Some(estimate) = report_due(side, now) {
            self.on_estimate(now, transport, estimate);
        }
    }

    /// A viewer's REMB: a ceiling on its transport-wide estimate when it has one, the estimate
    /// itself when it has not.
    pub(super) fn on_remb(&mut self, now: Instant, transport: TransportId, bitrate_bps: u64) {
        let side = self
            .transports
            .get_mut(&transport)
            .and_then(|t| t.send.as_deref_mut());
        let estimate = match side {
            Some(side) => {
                side.estimator.on_remb(now, bitrate_bps);
                side.reported = Some((now, side.estimator.estimate_bps()));
                side.estimator.estimate_bps()
            }
            None => bitrate_bps,
        };
        self.on_estimate(now, transport, estimate);
    }

    /// A viewer transport's bandwidth estimate: its layers are fitted to it.
    pub(super) fn on_estimate(&mut self, now: Instant, transport: TransportId, bitrate_bps: u64) {
        let Some(on) = self.transports.get_mut(&transport) else {
            return;
        };
        on.allocation
            .get_or_insert_with(Allocation::default)
            .estimate_bps = bitrate_bps;
        self.pace(now, transport, bitrate_bps);
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
        let state = self
            .transports
            .get_mut(&transport)
            .and_then(|t| t.allocation.as_mut());
        state.map(|s| s.last_up = None).is_some()
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
                .filter(|(_, t)| t.allocation.is_some())
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
                priority: w.priority,
            })
            .collect();
        let budget = state.estimate_bps.saturating_sub(audio_bps);
        let chosen = allocate(budget, &inputs);
        // What could stay: a layer's steady rate still drifts by several percent with what
        // the camera sees (keyframes no longer move it, see `layer_rates`), and a layer that
        // fits on average should not be dropped (and, after the hold-down, taken again) each
        // time it drifts over.
        let tolerated = allocate(budget + budget / STAY_TOLERANCE, &inputs);
        // What the viewer asked for, whatever it costs: when the estimate holds it below
        // that, a probe cluster tests whether the path carries more.
        let wanted = allocate(u64::MAX, &inputs);
        let cost = |layers: &[Layer]| -> u64 {
            layers
                .iter()
                .zip(&video)
                .map(|(&l, w)| w.rates.bps(l))
                .sum::<u64>()
                + audio_bps
        };
        // Up only once the hold-down is over, and toward a viewer with transport-wide CC only
        // where a probe showed the path carries the new layers: an estimate that grew while
        // the viewer was sent less than it could take says nothing about the path.
        // What the path has shown it carries: a probe's result, or what the viewer was sent
        // without overuse since the last downgrade the estimate forced.
        let estimator = self
            .transports
            .get(&transport)
            .and_then(|t| t.send.as_ref())
            .map(|side| &side.estimator);
        let confirmed = estimator.map(|e| e.probe_result_bps().unwrap_or(0).max(state.proven_bps));
        let capacity = estimator.and_then(|e| e.capacity_bps());
        // What an up-switch may reach: the best that fits the estimate and, toward a viewer
        // with transport-wide CC, what the path has shown it carries (an estimate can run
        // ahead of that, and the layers a probe confirmed should not wait for it).
        // Rising takes headroom where staying takes a tolerance: a probe through a shaper
        // reads above the path's rate (its burst passes at the send rate), and the layer's
        // steady rate leaves out what its keyframes send above a delta frame.
        let shown = |c: u64| c - c / RISE_HEADROOM;
        let rise_to = match confirmed {
            Some(c) => allocate(budget.min(shown(c).saturating_sub(audio_bps)), &inputs),
            None => chosen.clone(),
        };
        // A first allocation toward a viewer with transport-wide CC starts within the
        // headroom of the estimate: it may still be the transport's initial guess, and what
        // the viewer starts on it gets until its feedback shows the path (a simulcast
        // stream's switch down waits for that stream's keyframe). A REMB is the viewer's own
        // measure, and a start takes it as it is.
        let start = match confirmed {
            Some(_) => allocate(shown(budget), &inputs),
            None => chosen.clone(),
        };
        let covers = |probed: u64| shown(probed) >= cost(&rise_to);
        // A probe since the downgrade that shows the path carries the new layers ends the
        // hold-down early: it is the evidence the hold-down waits for.
        let probed_since_down = estimator
            .and_then(|e| e.probe_result_at().zip(e.probe_result_bps()))
            .is_some_and(|(at, bps)| state.last_down.is_none_or(|down| at > down) && covers(bps));
        let held = state.last_down.is_some_and(|at| now < at + HOLD_DOWN) && !probed_since_down;
        let may_rise = !held && state.last_up.is_none_or(|at| now >= at + UP_INTERVAL);
        let (mut down, mut up, mut started) = (false, false, false);
        let mut media_bps = audio_bps;
        for ((((w, &layer), &kept), &asked), &first) in video
            .iter()
            .zip(&rise_to)
            .zip(&tolerated)
            .zip(&wanted)
            .zip(&start)
        {
            let rate = |l: Option<Layer>| l.map_or(u64::MAX, |l| w.rates.bps(l));
            let current = rate(w.allocated);
            // Down to the best that fits within the tolerance; up to the best that fits. A
            // down to what the viewer asked for is its own choice, and one below what it was
            // never sent a start: no hold-down follows either.
            let next = if w.allocated.is_none() || rate(Some(kept)) < current {
                started |= w.allocated.is_none();
                let to = if w.allocated.is_none() { first } else { kept };
                let forced = w.forwarded.is_some_and(|f| w.rates.bps(f) > rate(Some(to)));
                down |= forced && rate(Some(to)) < rate(Some(asked));
                Some(to)
            } else if rate(Some(layer)) > current && may_rise {
                up = true;
                Some(layer)
            } else {
                None
            };
            let Some(next) = next.filter(|&l| Some(l) != w.allocated) else {
                media_bps += w.allocated.map_or(0, |l| w.rates.bps(l));
                continue;
            };
            media_bps += w.rates.bps(next);
            if let Some(down_track) = self.down_tracks.get(&w.id) {
                down_track.set_allocated(Some(next));
            }
            self.events.push_back(Event::LayerAllocated {
                transport,
                down_track: w.id,
                layer: next,
            });
        }
        if let Some(state) = self
            .transports
            .get_mut(&transport)
            .and_then(|t| t.allocation.as_mut())
        {
            state.last_down = if down { Some(now) } else { state.last_down };
            state.last_up = if up { Some(now) } else { state.last_up };
            // An up-switch or a start made now is not yet sent, so it proves nothing.
            state.proven_bps = if down {
                media_bps
            } else if up || started {
                state.proven_bps
            } else {
                state.proven_bps.max(media_bps)
            };
            state.rtx.set(now, state.estimate_bps, media_bps);
        }
        // Paced at the path's capacity when a probe saturated it and the estimate runs ahead
        // of that (never under what the viewer is allocated): a keyframe let through faster
        // than the path carries queues at its bottleneck, and the overuse that shows forces
        // a downgrade the path did not need. A probe the path carried whole says only that
        // the path carries that much, and the estimate paces then.
        if let Some(capacity) = capacity {
            let pacing_bps = state.estimate_bps.min(capacity.max(media_bps));
            self.pace(now, transport, pacing_bps);
        }
        // Probe when the estimate holds the viewer below what it asked for (at the rate of
        // the next layer set up), or when nothing yet shows the path carries the layers the
        // estimate allows (at their rate).
        // It also probes at the rate of the layers the estimate allows when the viewer is
        // sent less and what the path showed is too little to rise to them: otherwise a
        // probe that read between the two would be the last.
        let unconfirmed = confirmed.is_some_and(|c| c + c / STAY_TOLERANCE < cost(&chosen));
        let short_of =
            confirmed.is_some_and(|c| shown(c) < cost(&chosen)) && media_bps < cost(&chosen);
        let next = next_step_bps(budget, &inputs).map(|video| video + audio_bps);
        let target = if unconfirmed || short_of {
            Some(cost(&chosen))
        } else {
            next
        };
        if let Some(rate) = target {
            self.start_probe(now, transport, rate + rate / PROBE_MARGIN, media_bps);
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

/// The estimate to hand to allocation after a feedback: when it moved by more than
/// [`REPORT_CHANGE`] since the last one handed over, or [`REPORT_INTERVAL`] passed.
fn report_due(side: &mut SendSide, now: Instant) -> Option<u64> {
    let estimate = side.estimator.estimate_bps();
    let due = side.reported.is_none_or(|(at, last)| {
        now >= at + REPORT_INTERVAL || estimate.abs_diff(last) > last / REPORT_CHANGE
    });
    due.then(|| {
        side.reported = Some((now, estimate));
        estimate
    })
}
