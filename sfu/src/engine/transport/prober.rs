//! Probe clusters toward a viewer: a short burst of packets sent at a chosen rate, above what
//! the viewer's media needs now, so that its feedback shows whether the path carries the next
//! layers before the viewer is moved up to them. A delay-based estimate alone cannot rise much
//! above what is acknowledged, so without probes a viewer that once went down stays down.
//!
//! The prober keeps time (when a cluster starts, when its next packet is due, paced at the
//! cluster's rate, and when it has sent enough to be measured) and picks a cluster's rate
//! from what the estimator has shown. What the packets are is the router's business: the
//! newest packet of one of the viewer's subscriptions sent again on its RTX stream, stamped
//! with the cluster.

use std::time::{Duration, Instant};

use crate::engine::bwe::{BandwidthEstimator, FeedbackEstimator};

/// A cluster is measured over at least this many packets ...
const MIN_PACKETS: u32 = 5;
/// ... and at least this long at its rate: three frame intervals at 30 fps, so the media
/// sent meanwhile (which counts in the cluster, and comes a frame at a time) is in it, and
/// long enough that a shaper's burst (which lets the cluster's head through faster than the
/// path's rate) is a small part of what the cluster measures.
const MIN_DURATION: Duration = Duration::from_millis(100);
/// Never more packets than this in one cluster, however small they are.
const MAX_PACKETS: u32 = 40;
/// A cluster keeps its own timeline: a packet sent late (the host woke after it was due)
/// moves the next no later, so the packets behind go out sooner and the cluster holds its
/// rate; but never more than this behind, so a host that stalled sends a short burst, not
/// what the stall held back. Paced from each wake instead, a cluster of packets a few
/// milliseconds apart ran at 0.69 of its rate (median of 227 clusters toward 50 viewers on
/// a timer that wakes up to a millisecond late), and read too low to move anyone up.
const MAX_BEHIND: Duration = Duration::from_millis(5);
/// Clusters start at most this often per viewer ...
const PROBE_INTERVAL: Duration = Duration::from_secs(5);
/// ... but for its first few, and after a cluster the path carried whole, a second apart: a
/// viewer that joins starts below the top layers, its first cluster goes out before the
/// layers' rates are measured, and it should not wait five seconds for the next; nor should
/// a viewer whose link has shown room for more.
const INITIAL_CLUSTERS: u32 = 3;
const SOON_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy)]
struct Cluster {
    id: u32,
    rate_bps: u64,
    sent_bytes: u64,
    sent_packets: u32,
    next_at: Instant,
}

/// The probe clusters of one viewer transport.
#[derive(Debug, Default)]
pub(super) struct Prober {
    next_id: u32,
    cluster: Option<Cluster>,
    last_started: Option<Instant>,
}

impl Prober {
    /// Starts a cluster that brings what the viewer is sent up to `target_bps` while it runs:
    /// probe packets at the rate media (`media_bps`) leaves over, the media sent meanwhile
    /// counted in the cluster. `last_down`: the viewer's last forced downgrade. Whether one
    /// started.
    pub fn start_toward(
        &mut self,
        now: Instant,
        target_bps: u64,
        media_bps: u64,
        estimator: &FeedbackEstimator,
        last_down: Option<Instant>,
    ) -> bool {
        // At least a quarter of the target in probe packets, so a cluster ends soon even
        // when media alone is near the target.
        let rate_bps = target_bps.saturating_sub(media_bps).max(target_bps / 4);
        // A cluster the path carried whole, with no downgrade or fall of the estimate
        // since, says the path may carry more: the next may follow sooner, so a viewer whose
        // link opened up climbs within seconds.
        let room_shown = estimator.capacity_bps().is_none()
            && estimator
                .probe_result_at()
                .zip(estimator.probe_result_bps())
                .is_some_and(|(at, bps)| {
                    last_down.is_none_or(|down| at > down) && estimator.estimate_bps() >= bps
                });
        self.start(now, rate_bps, room_shown).is_some()
    }

    /// Starts a cluster at `rate_bps` unless one runs or one started within
    /// [`PROBE_INTERVAL`] (within `SOON_INTERVAL` for the first few, or when the caller
    /// says the last cluster showed room: `room_shown`); returns its id if it started.
    pub fn start(&mut self, now: Instant, rate_bps: u64, room_shown: bool) -> Option<u32> {
        let interval = if self.next_id < INITIAL_CLUSTERS || room_shown {
            SOON_INTERVAL
        } else {
            PROBE_INTERVAL
        };
        let too_soon = self.last_started.is_some_and(|at| now < at + interval);
        if self.cluster.is_some() || too_soon || rate_bps == 0 {
            return None;
        }
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        self.last_started = Some(now);
        self.cluster = Some(Cluster {
            id,
            rate_bps,
            sent_bytes: 0,
            sent_packets: 0,
            next_at: now,
        });
        Some(id)
    }

    /// The running cluster: what else is sent meanwhile belongs to it too, so its result is
    /// what the path carried of everything.
    pub fn running(&self) -> Option<u32> {
        self.cluster.map(|c| c.id)
    }

    /// When the running cluster's next packet is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.cluster.map(|c| c.next_at)
    }

    /// The cluster a packet is due for at `now`, if any.
    pub fn due(&self, now: Instant) -> Option<u32> {
        self.cluster.filter(|c| now >= c.next_at).map(|c| c.id)
    }

    /// A probe packet of `size` bytes went out at `now`: the next is due when the cluster's
    /// rate has carried this one (counted from when this one was due, within
    /// `MAX_BEHIND` of `now`), and the cluster ends once it is long enough to measure.
    pub fn on_sent(&mut self, now: Instant, size: usize) {
        let Some(cluster) = self.cluster.as_mut() else {
            return;
        };
        cluster.sent_bytes += size as u64;
        cluster.sent_packets += 1;
        let micros = (size as u64 * 8_000_000) / cluster.rate_bps.max(1);
        let due = cluster
            .next_at
            .max(now.checked_sub(MAX_BEHIND).unwrap_or(now));
        cluster.next_at = due + Duration::from_micros(micros);
        let long_enough =
            cluster.sent_bytes * 8_000_000 >= cluster.rate_bps * MIN_DURATION.as_micros() as u64;
        let measured = cluster.sent_packets >= MIN_PACKETS && long_enough;
        if measured || cluster.sent_packets >= MAX_PACKETS {
            self.cluster = None;
        }
    }

    /// Gives up the running cluster (nothing to send it with).
    pub fn abandon(&mut self) {
        self.cluster = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_is_paced_at_its_rate_and_ends_once_measurable() {
        let start = Instant::now();
        let mut prober = Prober::default();
        let id = prober.start(start, 2_000_000, false).expect("starts");
        let mut now = start;
        let mut sent = 0;
        while let Some(due) = prober.next_due() {
            now = due;
            assert_eq!(prober.due(now), Some(id));
            prober.on_sent(now, 1_000);
            sent += 1;
        }
        // 1,000 bytes at 2 Mbit/s every 4 ms; 100 ms at 2 Mbit/s is 25,000 bytes: 25 packets.
        assert_eq!(sent, 25);
        assert_eq!(now, start + Duration::from_millis(96));
        assert_eq!(
            prober.start(now, 2_000_000, false),
            None,
            "not again so soon"
        );
        // The first few a second apart, then one per interval.
        let mut at = start;
        for n in 1..INITIAL_CLUSTERS {
            at += SOON_INTERVAL;
            assert_eq!(prober.start(at, 2_000_000, false), Some(id + n));
            prober.abandon();
        }
        at += SOON_INTERVAL;
        assert_eq!(prober.start(at, 2_000_000, false), None);
        // After a cluster that showed room, a second apart again.
        assert_eq!(prober.start(at, 2_000_000, true), Some(id + 3));
        prober.abandon();
        assert_eq!(prober.start(at + SOON_INTERVAL / 2, 2_000_000, true), None);
        assert_eq!(
            prober.start(at + PROBE_INTERVAL / 2, 2_000_000, false),
            None
        );
        assert_eq!(
            prober.start(at + SOON_INTERVAL, 2_000_000, true),
            Some(id + 4)
        );
        prober.abandon();
        assert_eq!(prober.start(at + PROBE_INTERVAL, 2_000_000, false), None);
        let at = at + SOON_INTERVAL + PROBE_INTERVAL;
        assert_eq!(prober.start(at, 2_000_000, false), Some(id + 5));
    }

    #[test]
    fn a_cluster_sent_from_late_wakes_keeps_its_rate_within_the_bound() {
        let start = Instant::now();
        let mut prober = Prober::default();
        prober.start(start, 2_000_000, false).expect("starts");
        // 1,000 bytes at 2 Mbit/s are due every 4 ms; each wake comes 1 ms late.
        let mut due = Vec::new();
        while let Some(at) = prober.next_due() {
            due.push(at.duration_since(start).as_millis());
            prober.on_sent(at + Duration::from_millis(1), 1_000);
        }
        let on_time: Vec<u128> = (0..25).map(|i| i * 4).collect();
        assert_eq!(due, on_time, "late sends do not slow the cluster");
        // After a stall of 20 ms, what is due goes out at once, but only MAX_BEHIND of it.
        let mut prober = Prober::default();
        prober.start(start, 2_000_000, false).expect("starts");
        prober.on_sent(start, 1_000);
        let woke = start + Duration::from_millis(20);
        prober.on_sent(woke, 1_000);
        let behind = woke - MAX_BEHIND;
        let next = behind + Duration::from_millis(4);
        assert_eq!(prober.next_due(), Some(next), "one packet after the bound");
        prober.on_sent(woke, 1_000);
        let caught_up = next + Duration::from_millis(4);
        assert!(caught_up > woke);
        assert_eq!(prober.next_due(), Some(caught_up), "caught up");
    }

    #[test]
    fn small_packets_stop_at_the_cap_and_nothing_runs_twice() {
        let start = Instant::now();
        let mut prober = Prober::default();
        prober.start(start, 50_000_000, false).expect("starts");
        assert_eq!(prober.start(start, 1, false), None, "one at a time");
        for _ in 0..MAX_PACKETS {
            prober.on_sent(start, 100);
        }
        assert_eq!(prober.next_due(), None, "capped");
        assert_eq!(prober.start(start, 0, false), None);
    }
}
