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

/// A selector's need for a keyframe from the publisher. Raised when a wait starts, and again
/// every [`RETRY_AFTER_PACKETS`] packets while it lasts; the engine takes it, merges it with
/// other subscribers' and throttles it per source.
#[derive(Debug, Clone, Copy, Default)]
pub struct KeyframeRequests {
    waiting: bool,
    pending: bool,
    raised: u64,
    /// Packets seen since the request was last raised.
    since_raised: u32,
}

/// Packets a wait lasts before the request is raised again. A request lost on its way, or
/// ignored by a publisher that rate-limits keyframes (one encoder's simulcast streams share
/// one limit), must not leave the subscriber waiting for good; the engine's throttle keeps
/// the retries to one per interval per source.
pub const RETRY_AFTER_PACKETS: u32 = 64;

impl KeyframeRequests {
    /// Whether the selector is waiting for a keyframe to reach its target.
    pub fn waiting(&self) -> bool {
        self.waiting
    }

    /// True when a request is due: the engine should ask the publisher for a keyframe.
    pub fn take(&mut self) -> bool {
        std::mem::take(&mut self.pending)
    }

    /// Requests raised so far.
    pub fn raised(&self) -> u64 {
        self.raised
    }

    /// Called for each packet that finds the selector still needing a keyframe.
    pub(crate) fn request(&mut self) {
        if self.waiting {
            self.since_raised += 1;
            if self.since_raised < RETRY_AFTER_PACKETS {
                return;
            }
        }
        self.waiting = true;
        self.pending = true;
        self.raised += 1;
        self.since_raised = 0;
    }

    /// The selector waits for another keyframe than the one asked for: the next packet
    /// raises a request at once.
    pub(crate) fn restart(&mut self) {
        self.waiting = false;
        self.since_raised = 0;
    }

    pub(crate) fn satisfied(&mut self) {
        self.waiting = false;
        self.pending = false;
        self.since_raised = 0;
    }
}
