//! Layer allocation: per viewer, across all the video it receives, the highest layers whose
//! summed bitrate fits its estimate. Each track's layers are climbed in an explicit order
//! with a frame-rate floor: by default every temporal layer of the base spatial layer first,
//! then each higher spatial layer at full frame rate (S0T0 < S0T1 < S0T2 < S1T2 < S2T2 for
//! L3T3), so a limited viewer gets 360p at 30 fps rather than 720p at 7.5.
//! Audio is never cut: its rate comes off the estimate first.

use selector::Layer;
use smallvec::SmallVec;

use super::layer_rates::LayerBitrates;

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
