//! The scalability modes the generator knows, named as in the W3C WebRTC-SVC registry.

use std::fmt;

use rtp_ext::dd::FrameDependencyStructure;

use super::pattern::{self, Pattern};
use super::structure;

/// A scalability mode: how many spatial and temporal layers a stream has and how its frames
/// reference each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScalabilityMode {
    /// One layer, every frame references the previous one.
    L1T1,
    /// One spatial layer, three temporal layers.
    L1T3,
    /// Full SVC: two spatial layers, each delta frame also references the layer below.
    L2T2,
    /// Like `L2T2`, but only the keyframe is shared; the spatial layers' T0 frames are shifted by
    /// one temporal unit.
    L2T2KeyShift,
    /// Full SVC: three spatial and three temporal layers.
    L3T3,
    /// K-SVC: spatial layers share only the keyframe.
    L3T3Key,
    /// Simulcast in one stream: three independent spatial layers, each with its own keyframe.
    S3T3,
}

impl ScalabilityMode {
    pub const ALL: [Self; 7] = [
        Self::L1T1,
        Self::L1T3,
        Self::L2T2,
        Self::L2T2KeyShift,
        Self::L3T3,
        Self::L3T3Key,
        Self::S3T3,
    ];

    /// Parses a registry name such as `"L3T3_KEY"`; `None` for a mode the generator lacks.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|mode| mode.name() == name)
    }

    /// The registry name, such as `"L2T2_KEY_SHIFT"`.
    pub fn name(self) -> &'static str {
        match self {
            Self::L1T1 => "L1T1",
            Self::L1T3 => "L1T3",
            Self::L2T2 => "L2T2",
            Self::L2T2KeyShift => "L2T2_KEY_SHIFT",
            Self::L3T3 => "L3T3",
            Self::L3T3Key => "L3T3_KEY",
            Self::S3T3 => "S3T3",
        }
    }

    pub fn spatial_layers(self) -> u8 {
        self.pattern().spatial_layers
    }

    pub fn temporal_layers(self) -> u8 {
        self.pattern().temporal_layers
    }

    /// Decode targets: one per (spatial, temporal) layer pair, numbered
    /// `spatial_id * temporal_layers + temporal_id`.
    pub fn decode_target_count(self) -> u8 {
        self.spatial_layers() * self.temporal_layers()
    }

    /// The decode target that decodes up to the given layers.
    pub fn decode_target(self, spatial_id: u8, temporal_id: u8) -> usize {
        usize::from(spatial_id) * usize::from(self.temporal_layers()) + usize::from(temporal_id)
    }

    /// The template dependency structure the mode's keyframes carry, derived from its frame
    /// pattern.
    pub fn template_structure(self) -> FrameDependencyStructure {
        structure::derive(self.pattern())
    }

    pub(crate) fn pattern(self) -> &'static Pattern {
        match self {
            Self::L1T1 => &pattern::L1T1,
            Self::L1T3 => &pattern::L1T3,
            Self::L2T2 => &pattern::L2T2,
            Self::L2T2KeyShift => &pattern::L2T2_KEY_SHIFT,
            Self::L3T3 => &pattern::L3T3,
            Self::L3T3Key => &pattern::L3T3_KEY,
            Self::S3T3 => &pattern::S3T3,
        }
    }
}

impl fmt::Display for ScalabilityMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_fail() {
        for mode in ScalabilityMode::ALL {
            assert_eq!(ScalabilityMode::from_name(mode.name()), Some(mode));
        }
        assert_eq!(
            ScalabilityMode::from_name("L3T3_KEY"),
            Some(ScalabilityMode::L3T3Key)
        );
        assert_eq!(ScalabilityMode::from_name("l3t3"), None);
        assert_eq!(ScalabilityMode::from_name("L3T2"), None);
    }

    #[test]
    fn layer_counts() {
        use ScalabilityMode::*;
        let counts: Vec<_> = ScalabilityMode::ALL
            .iter()
            .map(|m| (m.spatial_layers(), m.temporal_layers()))
            .collect();
        assert_eq!(
            counts,
            [(1, 1), (1, 3), (2, 2), (2, 2), (3, 3), (3, 3), (3, 3)]
        );
        assert_eq!(L3T3.decode_target(2, 1), 7);
        assert_eq!(L2T2KeyShift.decode_target_count(), 4);
    }
}
