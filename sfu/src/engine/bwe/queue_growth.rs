//! A queue that grows fast, read straight from each feedback's media packets: when the path's
//! capacity falls under what is sent, every packet waits longer than the one before, and the
//! arrivals spread wider than the sends. The trendline sees this too, but only once its
//! window and smoothing have taken it in (about a third of a second through a real browser's
//! feedback); a viewer sent 720p over a link that just fell to 360p's rate fills a 200 ms
//! queue in half a second, and freezes. Two feedbacks in a row that each show the queue
//! growing by a fifth of the time they span are overuse at once.
//!
//! One feedback alone is not enough: a receiver whose thread stalled stamps the packets that
//! waited for it late, all in one feedback.

use std::time::Duration;

use super::PacketResult;

/// A feedback shows the queue growing when its media packets waited this much longer from
/// the first to the last ...
const MIN_GROWTH: Duration = Duration::from_millis(10);
/// ... and at least this part of the time the sends spanned (sent at 1.25 times what the
/// path carries, or more).
const GROWTH_PER_SEND: f64 = 0.2;

/// Packets sent within this span of a group's first are one burst: the queue is read at the
/// head of each, since a burst's own tail waits behind its head at any bottleneck, growing
/// queue or not.
const GROUP_SPAN: Duration = Duration::from_millis(5);

/// What one feedback's media packets (probes left out) show of the path's queue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct QueueReading {
    /// How much longer the last send group waited than the first: each group's least wait,
    /// so the reading is the standing queue and not a burst's serialization behind it.
    pub growth: Duration,
    /// How long the sends spanned, first group to last.
    pub sent_span: Duration,
}

impl QueueReading {
    /// The reading of `packets`' received media packets; None unless they make at least two
    /// send groups.
    pub(super) fn of(packets: &[PacketResult]) -> Option<Self> {
        let mut media = packets
            .iter()
            .filter(|p| p.probe_cluster.is_none())
            .filter_map(|p| Some((p.send_time, p.arrival?)));
        let (base_send, base_arrival) = media.next()?;
        // A packet's wait relative to the first packet's, in microseconds.
        let wait = |send: std::time::Instant, arrival: Duration| {
            let sent = send.saturating_duration_since(base_send).as_micros() as i64;
            let arrived = arrival.as_micros() as i64 - base_arrival.as_micros() as i64;
            arrived - sent
        };
        let (mut first_wait, mut group) = (0i64, (base_send, 0i64));
        let mut groups = 1;
        for (send, arrival) in media {
            let w = wait(send, arrival);
            if send.saturating_duration_since(group.0) > GROUP_SPAN {
                if groups == 1 {
                    first_wait = group.1;
                }
                groups += 1;
                group = (send, w);
            } else {
                group.1 = group.1.min(w);
            }
        }
        (groups >= 2).then(|| Self {
            growth: Duration::from_micros((group.1 - first_wait).max(0) as u64),
            sent_span: group.0.saturating_duration_since(base_send),
        })
    }

    /// Whether the queue grew by [`MIN_GROWTH`] and [`GROWTH_PER_SEND`] of the send span.
    fn grows_fast(&self) -> bool {
        self.growth >= MIN_GROWTH
            && self.growth.as_secs_f64() >= GROWTH_PER_SEND * self.sent_span.as_secs_f64()
    }
}

/// Watches for a queue that grows fast in consecutive feedbacks.
#[derive(Debug, Clone, Default)]
pub(super) struct QueueSurge {
    /// Whether the feedback before showed it.
    growing: bool,
}

impl QueueSurge {
    /// Takes one feedback's reading (None for one with probe packets, whose queue is the
    /// probe's, or with too few media packets); whether this feedback and the one before
    /// both show the queue growing fast.
    pub(super) fn on_reading(&mut self, reading: Option<QueueReading>) -> bool {
        let fast = reading.is_some_and(|r| r.grows_fast());
        let surge = self.growing && fast;
        self.growing = fast;
        surge
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// Ten 1200-byte packets 10 ms apart from `from_ms`, each waiting `growth_us` longer than
    /// the one before.
    fn feedback(start: Instant, from_ms: u64, growth_us: u64) -> Vec<PacketResult> {
        (0..10u64)
            .map(|i| {
                let sent = Duration::from_millis(from_ms + i * 10);
                PacketResult {
                    sequence: i as i64,
                    send_time: start + sent,
                    size: 1200,
                    probe_cluster: None,
                    arrival: Some(sent + Duration::from_micros(growth_us * i)),
                }
            })
            .collect()
    }

    #[test]
    fn reads_how_much_longer_the_last_packet_waited() {
        let start = Instant::now();
        let reading = QueueReading::of(&feedback(start, 0, 4_000)).expect("ten packets");
        assert_eq!(reading.growth, Duration::from_millis(36));
        assert_eq!(reading.sent_span, Duration::from_millis(90));
        assert_eq!(QueueReading::of(&feedback(start, 0, 0)[..1]), None);
    }

    #[test]
    fn a_bursts_own_tail_is_no_growth() {
        let start = Instant::now();
        // Bursts of five packets sent together 33 ms apart, each spread 8 ms at the
        // bottleneck: the queue ahead of each burst is the same, so nothing grows.
        let packets: Vec<PacketResult> = (0..15u64)
            .map(|i| {
                let sent = Duration::from_millis(33 * (i / 5));
                PacketResult {
                    sequence: i as i64,
                    send_time: start + sent,
                    size: 1200,
                    probe_cluster: None,
                    arrival: Some(sent + Duration::from_millis(2 * (i % 5))),
                }
            })
            .collect();
        let reading = QueueReading::of(&packets).expect("three groups");
        assert_eq!(reading.growth, Duration::ZERO);
        assert_eq!(reading.sent_span, Duration::from_millis(66));
        // The same bursts, each waiting 12 ms longer than the one before: growth.
        let growing: Vec<PacketResult> = packets
            .iter()
            .map(|p| PacketResult {
                arrival: p
                    .arrival
                    .map(|a| a + Duration::from_millis(12 * (p.sequence as u64 / 5))),
                ..*p
            })
            .collect();
        let reading = QueueReading::of(&growing).expect("three groups");
        assert_eq!(reading.growth, Duration::from_millis(24));
    }

    #[test]
    fn two_fast_growing_feedbacks_in_a_row_are_a_surge_one_is_not() {
        let start = Instant::now();
        let read = |from, growth| QueueReading::of(&feedback(start, from, growth));
        let mut surge = QueueSurge::default();
        // A stall: one feedback's packets stamped late, then normal again.
        assert!(!surge.on_reading(read(0, 4_000)));
        assert!(!surge.on_reading(read(100, 0)));
        // Slow growth (a tenth of the send span) is the trendline's to judge.
        assert!(!surge.on_reading(read(200, 1_000)));
        assert!(!surge.on_reading(read(300, 1_000)));
        // A fast one twice.
        assert!(!surge.on_reading(read(400, 4_000)));
        assert!(surge.on_reading(read(500, 4_000)));
        // A probe's feedback in between is no reading, and breaks the run.
        assert!(!surge.on_reading(None));
        assert!(!surge.on_reading(read(700, 4_000)));
    }
}
