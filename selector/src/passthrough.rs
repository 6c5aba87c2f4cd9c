//! Pass-through for audio and single-layer video: every packet goes to the subscriber with its
//! own marker. Video waits for a keyframe first: a decoder given delta frames it cannot use
//! would only ask for one itself, later.

use crate::selection::{KeyframeRequests, Selection};

#[derive(Debug, Clone, Default)]
pub struct PassThrough {
    needs_keyframe: bool,
    keyframes: KeyframeRequests,
}

impl PassThrough {
    /// For audio: forward from the first packet.
    pub fn audio() -> Self {
        Self::default()
    }

    /// For single-layer video: forward from the first keyframe.
    pub fn video() -> Self {
        Self {
            needs_keyframe: true,
            ..Default::default()
        }
    }

    pub fn keyframe_requests(&mut self) -> &mut KeyframeRequests {
        &mut self.keyframes
    }

    /// `keyframe_start`: the packet starts a keyframe (ignored for audio).
    pub fn select(&mut self, marker: bool, keyframe_start: bool) -> Selection {
        if self.needs_keyframe {
            if !keyframe_start {
                self.keyframes.request();
                return Selection::DROP;
            }
            self.needs_keyframe = false;
            self.keyframes.satisfied();
        }
        Selection::forward(marker)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audio_forwards_everything_with_its_marker() {
        let mut p = PassThrough::audio();
        assert_eq!(p.select(true, false), Selection::forward(true));
        assert_eq!(p.select(false, false), Selection::forward(false));
        assert!(!p.keyframe_requests().take());
    }

    #[test]
    fn video_waits_for_a_keyframe_and_asks_once() {
        let mut p = PassThrough::video();
        assert_eq!(p.select(true, false), Selection::DROP);
        assert_eq!(p.select(true, false), Selection::DROP);
        assert!(p.keyframe_requests().take());
        assert!(!p.keyframe_requests().take());
        assert_eq!(p.select(false, true), Selection::forward(false));
        assert_eq!(p.select(true, false), Selection::forward(true));
        assert!(!p.keyframe_requests().waiting());
    }
}
