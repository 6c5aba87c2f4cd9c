//! Pacing toward a viewer transport with an estimate: a leaky bucket, so that what the router
//! sends toward a viewer leaves at a little above its bandwidth estimate and a keyframe
//! (several times an average frame, sent by the publisher in one burst) reaches a shallow
//! bottleneck queue spread out instead of overflowing it; and the queues of jobs waiting for
//! it.
//!
//! The bucket fills with each packet's bits and drains at the pacing rate; a packet may go
//! while the level is within a small burst allowance. Sizes are charged after the write, so a
//! packet the selector drops costs nothing.
//!
//! A job for a transport whose pacer is closed (or that already has jobs waiting) waits in
//! that transport's queue; queued jobs leave as the pacer opens, audio and retransmissions
//! before video, each class in order. Jobs are references into the publishers' receive rings,
//! so a queue holds no packet copies. Probe packets keep their own cluster's timing and go
//! past the pacer.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::engine::router::Job;

/// The pacing rate over the estimate, in percent: a little above it, so that what the
/// allocation fits within the estimate never waits for long and a burst drains within
/// a few frames.
pub const PACING_PERCENT: u64 = 110;
/// The level the bucket may reach and still let a packet go: one frame interval's worth at
/// the rate (as a sender's pacer allows), so an ordinary frame after an idle gap leaves at once
/// instead of spread over the next frame's time (a viewer of 720p at 30 fps would otherwise
/// wait some 20 ms for the end of each frame), while a keyframe, several frames' worth, is
/// still spread out ...
pub const PACING_BURST: Duration = Duration::from_millis(40);
/// ... and at least one full-size packet, so a slow rate is not held below one per wake-up.
const MIN_BURST_BITS: u64 = 1_500 * 8;
/// The longest a job waits for the pacer: past it, it is sent anyway (and counted), since
/// video held longer than this is later than a viewer's jitter buffer waits, and the
/// receive ring it points into moves on. Only an allocation above the pacing rate gets here.
pub const MAX_HOLD: Duration = Duration::from_millis(400);

#[derive(Debug, Clone, Copy)]
struct Pacer {
    rate_bps: u64,
    /// Bits sent that the rate has not yet drained, as of `at`.
    level_bits: u64,
    at: Option<Instant>,
}

impl Pacer {
    /// A pacer for a transport whose estimate is `estimate_bps`.
    pub fn new(estimate_bps: u64) -> Self {
        Self {
            rate_bps: pacing_rate(estimate_bps),
            level_bits: 0,
            at: None,
        }
    }

    /// The estimate changed: the rate follows it from now on.
    pub fn set_estimate(&mut self, now: Instant, estimate_bps: u64) {
        self.drain(now);
        self.rate_bps = pacing_rate(estimate_bps);
    }

    /// Whether a packet may leave at `now`.
    pub fn may_send(&mut self, now: Instant) -> bool {
        self.drain(now);
        self.level_bits <= self.burst_bits()
    }

    /// A packet of `bytes` left at `now`.
    pub fn on_sent(&mut self, now: Instant, bytes: usize) {
        self.drain(now);
        self.level_bits = self.level_bits.saturating_add(bytes as u64 * 8);
    }

    /// When the next packet may leave: now if it may already.
    pub fn next_send(&self) -> Option<Instant> {
        let at = self.at?;
        let over = self.level_bits.saturating_sub(self.burst_bits());
        // Rounded up: a wake-up at the returned time always finds the bucket open, so a host
        // that sleeps until then does not spin.
        let micros = (over * 1_000_000).div_ceil(self.rate_bps.max(1));
        Some(at + Duration::from_micros(micros))
    }

    fn burst_bits(&self) -> u64 {
        let burst = self
            .rate_bps
            .saturating_mul(PACING_BURST.as_micros() as u64)
            / 1_000_000;
        burst.max(MIN_BURST_BITS)
    }

    fn drain(&mut self, now: Instant) {
        let Some(at) = self.at.filter(|&at| now > at) else {
            self.at = self.at.or(Some(now));
            return;
        };
        let elapsed = now.duration_since(at).as_micros() as u64;
        let drained = self.rate_bps.saturating_mul(elapsed) / 1_000_000;
        self.level_bits = self.level_bits.saturating_sub(drained);
        self.at = Some(now);
    }
}

/// A paced transport: its bucket and what waits for it.
#[derive(Debug)]
pub(in crate::engine) struct Paced {
    pacer: Pacer,
    /// Audio and retransmissions, with when each was queued.
    urgent: VecDeque<(Instant, Job)>,
    /// Video.
    media: VecDeque<(Instant, Job)>,
    /// Retransmissions among `urgent`.
    retransmissions: usize,
    /// Whether the transport is in the router's list of those with jobs waiting.
    listed: bool,
}

impl Paced {
    pub fn new(estimate_bps: u64) -> Self {
        Self {
            pacer: Pacer::new(estimate_bps),
            urgent: VecDeque::new(),
            media: VecDeque::new(),
            retransmissions: 0,
            listed: false,
        }
    }

    /// The estimate changed: the rate follows it from now on.
    pub fn set_estimate(&mut self, now: Instant, estimate_bps: u64) {
        self.pacer.set_estimate(now, estimate_bps);
    }

    /// Whether `job` waits instead of going now: when the pacer is closed or others wait
    /// before it. `Some(true)` when it waits and the transport was not listed as having jobs
    /// waiting (it is listed now); `None` when it may go. `urgent` (audio or a retransmission)
    /// is asked only if it waits.
    pub fn hold(&mut self, now: Instant, job: Job, urgent: impl FnOnce() -> bool) -> Option<bool> {
        if self.is_empty() && self.pacer.may_send(now) {
            return None;
        }
        let queue = if urgent() {
            &mut self.urgent
        } else {
            &mut self.media
        };
        self.retransmissions += usize::from(matches!(job, Job::Retransmit { .. }));
        queue.push_back((now, job));
        Some(!std::mem::replace(&mut self.listed, true))
    }

    /// A packet of `bytes` left at `now`: the bucket is charged with it.
    pub fn on_sent(&mut self, now: Instant, bytes: usize) {
        self.pacer.on_sent(now, bytes);
    }

    /// Retransmissions waiting.
    pub fn retransmissions(&self) -> usize {
        self.retransmissions
    }

    /// Jobs waiting (those the selector will drop included: it decides when they leave).
    pub fn len(&self) -> usize {
        self.urgent.len() + self.media.len()
    }

    pub fn is_empty(&self) -> bool {
        self.urgent.is_empty() && self.media.is_empty()
    }

    /// Whether it stays on the router's list of transports with jobs waiting: while it has
    /// some.
    pub fn stays_listed(&mut self) -> bool {
        self.listed = !self.is_empty();
        self.listed
    }

    fn head(&self) -> Option<Instant> {
        self.urgent
            .front()
            .or(self.media.front())
            .map(|&(at, _)| at)
    }

    /// The next job that may leave at `now`, and whether it waited past [`MAX_HOLD`].
    pub fn pop(&mut self, now: Instant) -> Option<(Job, bool)> {
        let overdue = self.head().is_some_and(|at| now >= at + MAX_HOLD);
        if !overdue && !self.pacer.may_send(now) {
            return None;
        }
        let (_, job) = self.urgent.pop_front().or_else(|| self.media.pop_front())?;
        self.retransmissions -= usize::from(matches!(job, Job::Retransmit { .. }));
        Some((job, overdue))
    }

    /// When the head of its queue may leave.
    pub fn due(&self) -> Option<Instant> {
        let head = self.head()?;
        let open = self.pacer.next_send().unwrap_or(head);
        Some(open.min(head + MAX_HOLD))
    }
}

fn pacing_rate(estimate_bps: u64) -> u64 {
    (estimate_bps.saturating_mul(PACING_PERCENT) / 100).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends packets of `bytes` as fast as the pacer lets them go for `span`, waking at its
    /// `next_send`; returns the bits sent.
    fn saturate(pacer: &mut Pacer, start: Instant, span: Duration, bytes: usize) -> u64 {
        let mut now = start;
        let mut bits = 0;
        while now < start + span {
            while pacer.may_send(now) {
                pacer.on_sent(now, bytes);
                bits += bytes as u64 * 8;
            }
            let next = pacer.next_send().expect("has sent");
            assert!(
                next > now,
                "a wake-up that finds the bucket closed would spin"
            );
            now = next;
        }
        bits
    }

    #[test]
    fn a_saturated_pacer_sends_at_a_little_above_the_estimate() {
        let start = Instant::now();
        let mut pacer = Pacer::new(1_000_000);
        let bits = saturate(&mut pacer, start, Duration::from_secs(10), 1_200);
        let rate = bits / 10;
        // Give or take the burst allowance and the last packet.
        let pacing = 1_000_000 * PACING_PERCENT / 100;
        assert!(
            (pacing - pacing / 200..pacing + pacing / 200).contains(&rate),
            "{rate} bit/s"
        );
    }

    #[test]
    fn a_burst_leaves_spread_out_at_the_pacing_rate() {
        let start = Instant::now();
        let mut pacer = Pacer::new(800_000);
        let rate = pacing_rate(800_000);
        // Ten packets due at once: the burst allowance lets the first few go, the others
        // follow at the rate.
        let mut sent = Vec::new();
        let mut now = start;
        while sent.len() < 10 {
            if pacer.may_send(now) {
                pacer.on_sent(now, 1_250);
                sent.push(now);
            } else {
                now = pacer.next_send().expect("has sent");
            }
        }
        // 10,000 bits each: a packet may go while the level is within the allowance.
        let allowance = rate * PACING_BURST.as_micros() as u64 / 1_000_000;
        let at_once = (allowance / 10_000 + 1) as usize;
        assert!(at_once < 10);
        assert!(sent[..at_once].iter().all(|&t| t == start), "{sent:?}");
        assert!(sent[at_once] > start, "{sent:?}");
        let gaps: Vec<Duration> = sent.windows(2).map(|w| w[1] - w[0]).collect();
        let apart = Duration::from_micros(10_000 * 1_000_000 / rate);
        for gap in &gaps[at_once..] {
            assert!(gap.abs_diff(apart) <= Duration::from_micros(1), "{gaps:?}");
        }
    }

    #[test]
    fn an_idle_pacer_lets_the_next_packet_go_at_once() {
        let start = Instant::now();
        let mut pacer = Pacer::new(500_000);
        pacer.on_sent(start, 100_000);
        assert!(!pacer.may_send(start + Duration::from_millis(10)));
        // 800,000 bits, drained at the rate.
        let open = pacer.next_send().expect("has sent");
        let drained = Duration::from_micros(800_000 * 1_000_000 / pacing_rate(500_000));
        assert!(open <= start + drained);
        assert!(pacer.may_send(open));
        assert!(pacer.may_send(start + Duration::from_secs(5)));
    }

    #[test]
    fn a_new_estimate_changes_the_rate_from_then_on() {
        let start = Instant::now();
        let mut pacer = Pacer::new(1_000_000);
        let slow = saturate(&mut pacer, start, Duration::from_secs(2), 1_000);
        pacer.set_estimate(start + Duration::from_secs(2), 2_000_000);
        let fast = saturate(
            &mut pacer,
            start + Duration::from_secs(2),
            Duration::from_secs(2),
            1_000,
        );
        assert!(
            fast > slow * 19 / 10,
            "{slow} then {fast} bits in two seconds"
        );
    }
}
