//! Retransmissions inside a viewer's estimate: a token bucket per viewer transport, filled at
//! what the estimate leaves over after the media allocated to it, plus a small floor so a lone
//! loss on a full link is still repaired. A NACK the bucket has no room for is not answered:
//! answering every NACK of a congested viewer offers its link many times what it carries,
//! which is how such a viewer freezes.

use std::time::{Duration, Instant};

/// The share of the estimate retransmissions may always use.
const FLOOR_DIVISOR: u64 = 20;
/// How much unused budget the bucket holds: a burst of losses is repaired at once, a long
/// stretch of them at the rate.
const DEPTH: Duration = Duration::from_millis(250);

/// Bytes of retransmission a viewer transport may be sent now.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct RtxBudget {
    rate_bps: u64,
    /// Millibits available, as of `updated`: fine enough that refilling every few
    /// microseconds loses nothing to rounding.
    tokens: u64,
    updated: Option<Instant>,
}

impl RtxBudget {
    /// The estimate and what its media takes of it, as of `now`.
    /// The first estimate starts with a full bucket.
    pub fn set(&mut self, now: Instant, estimate_bps: u64, media_bps: u64) {
        let first = self.updated.is_none();
        self.refill(now);
        self.rate_bps = estimate_bps
            .saturating_sub(media_bps)
            .saturating_add(estimate_bps / FLOOR_DIVISOR);
        self.tokens = if first {
            self.depth()
        } else {
            self.tokens.min(self.depth())
        };
    }

    /// Takes `bytes` if the budget has them.
    pub fn take(&mut self, now: Instant, bytes: usize) -> bool {
        self.refill(now);
        let cost = (bytes as u64).saturating_mul(8_000);
        let room = self.tokens >= cost;
        if room {
            self.tokens -= cost;
        }
        room
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = self
            .updated
            .map_or(Duration::ZERO, |at| now.saturating_duration_since(at));
        self.updated = Some(now);
        let earned = (u128::from(self.rate_bps) * elapsed.as_micros() / 1_000) as u64;
        self.tokens = self.tokens.saturating_add(earned).min(self.depth());
    }

    fn depth(&self) -> u64 {
        (u128::from(self.rate_bps) * DEPTH.as_micros() / 1_000) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spare_rate_and_floor_bound_what_goes_out() {
        let start = Instant::now();
        let mut budget = RtxBudget::default();
        // 1 Mbit/s estimate, 900 kbit/s of media: 100 + 50 kbit/s for repairs.
        budget.set(start, 1_000_000, 900_000);
        let mut sent = 0;
        for ms in 0..=2_000u64 {
            let now = start + Duration::from_millis(ms);
            // A NACK of a 1,000-byte packet every millisecond: far more than the budget.
            if budget.take(now, 1_000) {
                sent += 1_000;
            }
        }
        // 150 kbit/s for two seconds, plus the bucket's depth at the start.
        let allowed = 150_000 * 2 / 8 + 150_000 / 4 / 8;
        assert!(sent <= allowed, "{sent} bytes sent of {allowed}");
        assert!(sent >= allowed - 2_000, "{sent} bytes sent of {allowed}");
    }

    #[test]
    fn a_full_link_still_repairs_a_lone_loss() {
        let start = Instant::now();
        let mut budget = RtxBudget::default();
        budget.set(start, 1_000_000, 1_200_000);
        assert!(budget.take(start + Duration::from_millis(100), 1_200));
        assert!(!budget.take(start + Duration::from_millis(100), 100_000));
    }
}
