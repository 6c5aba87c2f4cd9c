//! A spatial and temporal layer pair: what a subscriber asks for and what it receives.

/// A layer. Ordered by spatial id, then temporal id, so "highest" means best quality.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Layer {
    pub spatial: u8,
    pub temporal: u8,
}

impl Layer {
    /// The highest layer any codec here can describe: take everything.
    pub const MAX: Layer = Layer::new(u8::MAX, u8::MAX);
    pub const BASE: Layer = Layer::new(0, 0);

    pub const fn new(spatial: u8, temporal: u8) -> Self {
        Self { spatial, temporal }
    }

    /// Whether a subscriber asking for `self` may receive `other`: neither id above ours.
    pub fn covers(self, other: Layer) -> bool {
        other.spatial <= self.spatial && other.temporal <= self.temporal
    }

    /// Each id capped by `max`'s.
    pub fn capped(self, max: Layer) -> Layer {
        Layer::new(
            self.spatial.min(max.spatial),
            self.temporal.min(max.temporal),
        )
    }
}

/// The layer a subscriber wants and the most it may get, set by the engine at any time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerLimits {
    pub target: Layer,
    pub max: Layer,
}

impl Default for LayerLimits {
    /// The best layer available, without a cap.
    fn default() -> Self {
        Self {
            target: Layer::MAX,
            max: Layer::MAX,
        }
    }
}

impl LayerLimits {
    /// The target within the maximum.
    pub fn effective(&self) -> Layer {
        self.target.capped(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covers_is_per_component() {
        let l1t2 = Layer::new(1, 2);
        assert!(l1t2.covers(Layer::new(0, 2)));
        assert!(l1t2.covers(Layer::new(1, 0)));
        assert!(!l1t2.covers(Layer::new(2, 0)));
        assert!(!l1t2.covers(Layer::new(0, 3)));
    }

    #[test]
    fn effective_target_is_capped_by_max() {
        let limits = LayerLimits {
            target: Layer::new(2, 1),
            max: Layer::new(1, 2),
        };
        assert_eq!(limits.effective(), Layer::new(1, 1));
        assert_eq!(LayerLimits::default().effective(), Layer::MAX);
    }
}
