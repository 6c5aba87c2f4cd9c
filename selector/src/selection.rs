//! What every selector answers per packet, and the keyframe signal it raises.

/// The decision for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Selection {
    pub forward: bool,
    /// The RTP marker to send: set on the last packet of the highest forwarded spatial layer of
    /// a temporal unit.
    pub marker: bool,
    /// Length of the rewritten DD written for this packet (0 when there is none).
    pub descriptor_len: usize,
}

impl Selection {
    pub const DROP: Selection = Selection {
        forward: false,
        marker: false,
        descriptor_len: 0,
    };

    pub fn forward(marker: bool) -> Self {
        Self {
            forward: true,
            marker,
            descriptor_len: 0,
        }
    }
}

/// A selector's need for a keyframe from the publisher. Raised once per wait; the engine takes
/// it, merges it with other subscribers' and throttles it per source.
#[derive(Debug, Clone, Copy, Default)]
pub struct KeyframeRequests {
    waiting: bool,
    pending: bool,
    raised: u64,
}

impl KeyframeRequests {
    /// Whether the selector is waiting for a keyframe to reach its target.
    pub fn waiting(&self) -> bool {
        self.waiting
    }

    /// True once per new wait: the engine should ask the publisher for a keyframe.
    pub fn take(&mut self) -> bool {
        std::mem::take(&mut self.pending)
    }

    /// Requests raised so far.
    pub fn raised(&self) -> u64 {
        self.raised
    }

    pub(crate) fn request(&mut self) {
        if !self.waiting {
            self.waiting = true;
            self.pending = true;
            self.raised += 1;
        }
    }

    pub(crate) fn satisfied(&mut self) {
        self.waiting = false;
        self.pending = false;
    }
}
