//! Layer allocation: per viewer, across all the video it receives, the highest layers whose
//! summed bitrate fits its estimate. Each track's layers are climbed in an explicit order
//! with a frame-rate floor: by default every temporal layer of the base spatial layer first,
//! then each higher spatial layer at full frame rate (S0T0 < S0T1 < S0T2 < S1T2 < S2T2 for
//! L3T3), so a limited viewer gets 360p at 30 fps rather than 720p at 7.5.
//! Audio is never cut: its rate comes off the estimate first.
//!
//! The estimate comes from the viewer (REMB) or from the router's own estimator (its
//! transport-wide CC feedback); allocation runs whenever it changes and once per report
//! interval, since the publisher's layer rates drift. Down at once when what the viewer is
//! sent no longer fits (by more than a tenth); up only after a hold-down since the last
//! downgrade and at most once per [`UP_INTERVAL`], so a fluctuating estimate does not make the
//! viewer oscillate (each spatial up-switch costs a keyframe, which also goes through the
//! publisher's keyframe throttle).

use std::time::{Duration, Instant};

use selector::Layer;
use smallvec::SmallVec;

use super::bwe::{BandwidthEstimator, FeedbackEstimator};
use super::layer_rates::{LayerBitrates, MEASURED_LAYERS};
use super::rtx_budget::RtxBudget;
use super::track::DownTrackId;

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

/// Steps a track's allocation climbs, lowest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerOrder(SmallVec<[Layer; 8]>);

impl LayerOrder {
    /// The default order for a track of `spatial` × `temporal` layers: the base spatial
    /// layer's temporal layers, then each higher spatial layer at the top temporal layer.
    pub fn frame_rate_first(spatial: u8, temporal: u8) -> Self {
        let top = temporal.saturating_sub(1);
        let base = (0..temporal.max(1)).map(|t| Layer::new(0, t));
        let upper = (1..spatial).map(|s| Layer::new(s, top));
        Self(base.chain(upper).collect())
    }

    /// An order of the host's own; an empty one is the base layer alone.
    pub fn custom(steps: &[Layer]) -> Self {
        if steps.is_empty() {
            return Self(SmallVec::from_slice(&[Layer::new(0, 0)]));
        }
        Self(SmallVec::from_slice(steps))
    }

    /// The steps capped at `ceiling`, lowest first: a step above it becomes the ceiling's
    /// share of it (S2T2 under a ceiling of S1T1 is S1T1), repeats dropped.
    fn within(&self, ceiling: Layer) -> impl Iterator<Item = Layer> + '_ {
        let mut last = None;
        self.0.iter().filter_map(move |l| {
            let capped = l.capped(ceiling);
            (last.replace(capped) != Some(capped)).then_some(capped)
        })
    }
}

/// A track's steps within its ceiling, with what each costs.
type Steps = SmallVec<[(Layer, u64); 8]>;

/// One video track a viewer receives, as allocation sees it.
#[derive(Debug, Clone, Copy)]
pub struct AllocationInput<'a> {
    /// What each of its layers costs.
    pub rates: &'a LayerBitrates,
    /// The steps to climb.
    pub order: &'a LayerOrder,
    /// The viewer's own choice: a ceiling, not a promise.
    pub ceiling: Layer,
    /// Climbed before the others (the dominant speaker's video): the others start higher
    /// than their lowest step only once every priority track is at its top.
    pub priority: bool,
}

/// Per track, in input order, the layer allocated: the highest steps whose rates together fit
/// `budget_bps`, climbed one step at a time across tracks so none starves the others (priority
/// tracks first, to the top, then the rest). A track
/// always gets its lowest measured step, even past the budget (cutting video entirely is the
/// host's call: mute it); steps with no measured rate (a layer the publisher does not send)
/// are skipped.
pub fn allocate(budget_bps: u64, tracks: &[AllocationInput<'_>]) -> SmallVec<[Layer; 4]> {
    let climbed = climb(budget_bps, tracks);
    climbed
        .steps
        .iter()
        .zip(&climbed.at)
        .map(|(s, &i)| s.get(i).map_or(Layer::new(0, 0), |&(layer, _)| layer))
        .collect()
}

/// What the next layer set above the allocation within `budget_bps` costs in all: the
/// allocation plus the cheapest single step up on any track; `None` when every track is at
/// its ceiling. A probe before an up-switch tests this rate.
pub fn next_step_bps(budget_bps: u64, tracks: &[AllocationInput<'_>]) -> Option<u64> {
    let climbed = climb(budget_bps, tracks);
    let cheapest = climbed
        .steps
        .iter()
        .zip(&climbed.at)
        .filter_map(|(s, &i)| Some(s.get(i + 1)?.1.saturating_sub(s[i].1)))
        .min()?;
    Some(climbed.spent + cheapest)
}

/// Each track's steps, the step it reached and the rate of all of them.
struct Climbed {
    steps: SmallVec<[Steps; 4]>,
    at: SmallVec<[usize; 4]>,
    spent: u64,
}

/// Climbs one step at a time across tracks while the next fits `budget_bps`.
fn climb(budget_bps: u64, tracks: &[AllocationInput<'_>]) -> Climbed {
    let steps: SmallVec<[Steps; 4]> = tracks
        .iter()
        .map(|t| measured_steps(t.rates, t.order, t.ceiling))
        .collect();
    let mut at: SmallVec<[usize; 4]> = steps.iter().map(|_| 0).collect();
    let mut spent: u64 = steps
        .iter()
        .filter_map(|s| s.first())
        .map(|&(_, r)| r)
        .sum();
    for priority in [true, false] {
        let mut climbed = true;
        while climbed {
            climbed = false;
            for (track, position) in at.iter_mut().enumerate() {
                if tracks[track].priority != priority {
                    continue;
                }
                let Some(&(_, next)) = steps[track].get(*position + 1) else {
                    continue;
                };
                let current = steps[track][*position].1;
                let cost = next.saturating_sub(current);
                if spent + cost <= budget_bps {
                    spent += cost;
                    *position += 1;
                    climbed = true;
                }
            }
        }
    }
    Climbed { steps, at, spent }
}

/// The steps of `order` within `ceiling` that the publisher sends, with their rates; the
/// lowest step alone when nothing is measured yet.
fn measured_steps(rates: &LayerBitrates, order: &LayerOrder, ceiling: Layer) -> Steps {
    let mut steps: Steps = order
        .within(ceiling)
        .map(|l| (l, rates.bps(l)))
        .filter(|&(_, r)| r > 0)
        .collect();
    if steps.is_empty() {
        steps.extend(order.within(ceiling).next().map(|l| (l, 0)));
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rates of an AV1 L3T3_KEY camera in a browser: 180p ~210 kbit/s, 360p ~500, 720p
    /// ~1,230, and each spatial layer's lower temporal layers at a half and a quarter.
    fn camera() -> LayerBitrates {
        let full = [210_000, 500_000, 1_230_000];
        LayerBitrates::from_fn(|layer| {
            let s = full.get(usize::from(layer.spatial)).copied().unwrap_or(0);
            match layer.temporal {
                0 => s / 4,
                1 => s / 2,
                2 => s,
                _ => 0,
            }
        })
    }

    fn one(budget: u64, ceiling: Layer) -> Layer {
        let rates = camera();
        let order = LayerOrder::frame_rate_first(3, 3);
        let input = AllocationInput {
            rates: &rates,
            order: &order,
            ceiling,
            priority: false,
        };
        allocate(budget, &[input])[0]
    }

    #[test]
    fn the_highest_step_that_fits_at_full_frame_rate() {
        assert_eq!(one(3_000_000, Layer::MAX), Layer::new(2, 2));
        assert_eq!(
            one(865_000, Layer::MAX),
            Layer::new(1, 2),
            "360p, not 720p at 7.5 fps"
        );
        assert_eq!(one(300_000, Layer::MAX), Layer::new(0, 2));
        assert_eq!(one(120_000, Layer::MAX), Layer::new(0, 1));
        assert_eq!(one(10_000, Layer::MAX), Layer::new(0, 0), "never nothing");
    }

    #[test]
    fn the_next_layer_set_is_the_cheapest_step_up() {
        let rates = camera();
        let order = LayerOrder::frame_rate_first(3, 3);
        let input = AllocationInput {
            rates: &rates,
            order: &order,
            ceiling: Layer::MAX,
            priority: false,
        };
        assert_eq!(next_step_bps(865_000, &[input]), Some(1_230_000), "720p");
        assert_eq!(next_step_bps(300_000, &[input]), Some(500_000), "360p");
        assert_eq!(next_step_bps(3_000_000, &[input]), None, "at the top");
        // Two cameras at 360p in 1.1 Mbit/s: one of them to 720p.
        assert_eq!(next_step_bps(1_100_000, &[input, input]), Some(1_730_000));
        let capped = AllocationInput {
            ceiling: Layer::new(1, 2),
            ..input
        };
        assert_eq!(next_step_bps(865_000, &[capped]), None, "at its ceiling");
    }

    #[test]
    fn the_viewers_choice_is_a_ceiling() {
        assert_eq!(one(3_000_000, Layer::new(1, 2)), Layer::new(1, 2));
        assert_eq!(one(3_000_000, Layer::new(2, 0)), Layer::new(2, 0));
        assert_eq!(one(3_000_000, Layer::new(1, 1)), Layer::new(1, 1));
        assert_eq!(one(300_000, Layer::new(2, 2)), Layer::new(0, 2));
    }

    #[test]
    fn tracks_climb_together_and_unsent_layers_are_skipped() {
        let rates = camera();
        let order = LayerOrder::frame_rate_first(3, 3);
        let input = AllocationInput {
            rates: &rates,
            order: &order,
            ceiling: Layer::MAX,
            priority: false,
        };
        // Two cameras in 1.1 Mbit/s: both at 360p, not one at 720p and one at 180p.
        let both = allocate(1_100_000, &[input, input]);
        assert_eq!(both.as_slice(), &[Layer::new(1, 2), Layer::new(1, 2)]);
        // A publisher that stopped its top layer: the viewer is not given it.
        let no_top = LayerBitrates::from_fn(|l| if l.spatial == 2 { 0 } else { camera().bps(l) });
        let input = AllocationInput {
            rates: &no_top,
            ..input
        };
        assert_eq!(allocate(5_000_000, &[input])[0], Layer::new(1, 2));
        // Nothing measured yet: the lowest step.
        let none = LayerBitrates::default();
        let input = AllocationInput {
            rates: &none,
            ..input
        };
        assert_eq!(allocate(5_000_000, &[input])[0], Layer::new(0, 0));
    }

    #[test]
    fn custom_orders_are_climbed_as_given() {
        let rates = camera();
        let order = LayerOrder::custom(&[Layer::new(0, 2), Layer::new(2, 1)]);
        let input = AllocationInput {
            rates: &rates,
            order: &order,
            ceiling: Layer::MAX,
            priority: false,
        };
        assert_eq!(allocate(700_000, &[input])[0], Layer::new(2, 1));
        assert_eq!(allocate(500_000, &[input])[0], Layer::new(0, 2));
        let empty = LayerOrder::custom(&[]);
        assert_eq!(empty.within(Layer::MAX).count(), 1);
    }

    #[test]
    fn a_priority_track_climbs_to_its_top_before_the_others_leave_their_base() {
        let rates = camera();
        let order = LayerOrder::frame_rate_first(3, 3);
        let other = AllocationInput {
            rates: &rates,
            order: &order,
            ceiling: Layer::MAX,
            priority: false,
        };
        let speaker = AllocationInput {
            priority: true,
            ..other
        };
        // 1.23 Mbit/s for the speaker's 720p and the others' lowest step; 52.5 kbit/s each.
        let budget = 1_230_000 + 2 * 52_500;
        assert_eq!(
            allocate(budget, &[other, speaker, other]).as_slice(),
            [Layer::new(0, 0), Layer::new(2, 2), Layer::new(0, 0)]
        );
        // Without a priority the same budget is shared: nobody reaches 720p.
        let shared = allocate(budget, &[other, other, other]);
        assert!(shared.iter().all(|l| l.spatial < 2), "{shared:?}");
        // Past the speaker's top, the rest climb as before.
        let more = allocate(budget + 2 * 450_000, &[other, speaker, other]);
        assert_eq!(
            more.as_slice(),
            [Layer::new(1, 2), Layer::new(2, 2), Layer::new(1, 2)]
        );
    }
}

/// A viewer's video subscription as allocation weighs it.
#[derive(Debug)]
pub(super) struct Weighed {
    pub id: DownTrackId,
    pub rates: LayerBitrates,
    pub order: LayerOrder,
    pub ceiling: Layer,
    pub allocated: Option<Layer>,
    /// What it is sent now.
    pub forwarded: Option<Layer>,
    /// Its track's video is climbed first.
    pub priority: bool,
}

/// What fitting a viewer's layers to its estimate decided.
#[derive(Debug)]
pub(super) struct Fit {
    /// The subscriptions whose allocated layer changes, with the layer, in the order weighed.
    pub changes: SmallVec<[(DownTrackId, Layer); 4]>,
    /// The rate to pace at, when a probe saturated the path.
    pub pacing_bps: Option<u64>,
    /// The probe cluster to start: what it brings the viewer up to, and the media rate it is
    /// sent meanwhile.
    pub probe: Option<(u64, u64)>,
}

/// Bandwidth allocation toward a viewer transport: its estimate, and when its layers last
/// went down and up (for the hold-down and the up-switch interval).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Allocation {
    pub estimate_bps: u64,
    pub last_down: Option<Instant>,
    pub last_up: Option<Instant>,
    /// The most the viewer was sent without a downgrade forced since: a rate the path
    /// carried, so going back up to it needs no probe.
    pub proven_bps: u64,
    /// Retransmissions within what the estimate leaves over.
    pub rtx: RtxBudget,
}

impl Allocation {
    /// Fits the viewer's subscriptions (`video`, beside `audio_bps` of audio) to its
    /// estimate; one without a layer yet gets its start, which is no up-switch. `estimator`:
    /// the viewer's transport-wide CC estimator, if it has one.
    pub fn fit(
        &mut self,
        now: Instant,
        audio_bps: u64,
        video: &[Weighed],
        estimator: Option<&FeedbackEstimator>,
    ) -> Fit {
        let state = *self;
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
        let tolerated = allocate(budget.saturating_add(budget / STAY_TOLERANCE), &inputs);
        // What the viewer asked for, whatever it costs: when the estimate holds it below
        // that, a probe cluster tests whether the path carries more.
        let wanted = allocate(u64::MAX, &inputs);
        let cost = |layers: &[Layer]| -> u64 {
            layers
                .iter()
                .zip(video)
                .map(|(&l, w)| w.rates.bps(l))
                .sum::<u64>()
                + audio_bps
        };
        // Up only once the hold-down is over, and toward a viewer with transport-wide CC only
        // where a probe showed the path carries the new layers: an estimate that grew while
        // the viewer was sent less than it could take says nothing about the path.
        // What the path has shown it carries: a probe's result, or what the viewer was sent
        // without overuse since the last downgrade the estimate forced.
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
        let mut changes = SmallVec::new();
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
            changes.push((w.id, next));
        }
        self.last_down = if down { Some(now) } else { state.last_down };
        self.last_up = if up { Some(now) } else { state.last_up };
        // An up-switch or a start made now is not yet sent, so it proves nothing.
        self.proven_bps = if down {
            media_bps
        } else if up || started {
            state.proven_bps
        } else {
            state.proven_bps.max(media_bps)
        };
        self.rtx.set(now, state.estimate_bps, media_bps);
        // Paced at the path's capacity when a probe saturated it and the estimate runs ahead
        // of that (never under what the viewer is allocated): a keyframe let through faster
        // than the path carries queues at its bottleneck, and the overuse that shows forces
        // a downgrade the path did not need. A probe the path carried whole says only that
        // the path carries that much, and the estimate paces then.
        let pacing_bps = capacity.map(|capacity| state.estimate_bps.min(capacity.max(media_bps)));
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
        Fit {
            changes,
            pacing_bps,
            probe: target.map(|rate| (rate + rate / PROBE_MARGIN, media_bps)),
        }
    }
}

/// The frame-rate-first order over the layers the publisher sends: as many temporal layers as
/// the base spatial layer has, as many spatial layers as have a rate at the top one.
pub(super) fn default_order(rates: &LayerBitrates) -> LayerOrder {
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
