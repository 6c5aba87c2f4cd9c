//! Packet groups and the delay variation between consecutive ones
//! (draft-ietf-rmcat-gcc-02, section 5.2).
//!
//! The delay signal is measured between groups of packets sent within one short burst, not
//! between single packets: the spacing inside a burst is the pacer's, not the path's. A group
//! also takes in packets that arrive sooner after its last one than they were sent after it, in
//! a short burst: a link that delivers a backlog at once (after a radio wake-up, say) says
//! nothing about a queue building.

use std::time::{Duration, Instant};

/// Packets sent within this span of a group's first one belong to it.
const BURST_SPAN: Duration = Duration::from_millis(5);
/// A packet arriving within this gap after the group's last one, sooner than it was sent
/// after it, belongs to the group.
const BURST_ARRIVAL_GAP_MS: f64 = 5.0;
/// A group takes in arrival bursts only this long after its first arrival.
const MAX_BURST_DURATION_MS: f64 = 100.0;
/// A delay variation larger than this, either way, is the viewer's clock jumping, not a
/// queue: the groups start over.
const MAX_DELAY_VARIATION_MS: f64 = 3000.0;

/// Milliseconds as the filters reckon them.
pub(super) fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// Packets sent in one burst, by their extremes.
#[derive(Debug, Clone, Copy)]
struct PacketGroup {
    first_send: Instant,
    last_send: Instant,
    first_arrival_ms: f64,
    last_arrival_ms: f64,
}

impl PacketGroup {
    fn new(send_time: Instant, arrival_ms: f64) -> Self {
        Self {
            first_send: send_time,
            last_send: send_time,
            first_arrival_ms: arrival_ms,
            last_arrival_ms: arrival_ms,
        }
    }

    /// Whether the packet is part of this burst, by send time or by arrival.
    fn takes(&self, send_time: Instant, arrival_ms: f64) -> bool {
        if send_time.saturating_duration_since(self.first_send) <= BURST_SPAN {
            return true;
        }
        let arrival_gap_ms = arrival_ms - self.last_arrival_ms;
        let send_gap_ms = millis(send_time.saturating_duration_since(self.last_send));
        arrival_gap_ms < send_gap_ms
            && arrival_gap_ms <= BURST_ARRIVAL_GAP_MS
            && arrival_ms - self.first_arrival_ms < MAX_BURST_DURATION_MS
    }

    fn add(&mut self, send_time: Instant, arrival_ms: f64) {
        self.last_send = self.last_send.max(send_time);
        self.last_arrival_ms = self.last_arrival_ms.max(arrival_ms);
    }
}

/// How one complete group moved against the one before it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct GroupDelta {
    /// Between the two groups' last send times, in milliseconds.
    pub send_delta_ms: f64,
    /// Between the two groups' last arrivals, in milliseconds.
    pub arrival_delta_ms: f64,
    /// The later group's last arrival on the viewer's clock, in milliseconds.
    pub arrival_ms: f64,
}

/// Groups received packets, in send order, and yields the delta of each completed group.
#[derive(Debug, Clone, Default)]
pub(super) struct InterArrival {
    /// The group packets are being added to.
    current: Option<PacketGroup>,
    /// The last complete group, which the next one is measured against.
    previous: Option<PacketGroup>,
}

impl InterArrival {
    /// Takes one received packet; when it starts a new group, the delta of the group it
    /// completed, if there is one to measure against.
    pub(super) fn on_packet(
        &mut self,
        send_time: Instant,
        arrival: Duration,
    ) -> Option<GroupDelta> {
        let arrival_ms = millis(arrival);
        let Some(current) = self.current.as_mut() else {
            self.current = Some(PacketGroup::new(send_time, arrival_ms));
            return None;
        };
        if send_time < current.first_send {
            // Sent before the group being built: a late packet of a burst already measured.
            return None;
        }
        if current.takes(send_time, arrival_ms) {
            current.add(send_time, arrival_ms);
            return None;
        }
        let complete = std::mem::replace(current, PacketGroup::new(send_time, arrival_ms));
        let previous = self.previous.replace(complete)?;
        let delta = GroupDelta {
            send_delta_ms: millis(
                complete
                    .last_send
                    .saturating_duration_since(previous.last_send),
            ),
            arrival_delta_ms: complete.last_arrival_ms - previous.last_arrival_ms,
            arrival_ms: complete.last_arrival_ms,
        };
        if (delta.arrival_delta_ms - delta.send_delta_ms).abs() > MAX_DELAY_VARIATION_MS {
            self.previous = None;
            return None;
        }
        if delta.arrival_delta_ms < 0.0 {
            // The groups arrived out of order: no delay to read; keep measuring from the
            // earlier one.
            self.previous = Some(previous);
            return None;
        }
        Some(delta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(value: u64) -> Duration {
        Duration::from_millis(value)
    }

    #[test]
    fn packets_within_five_milliseconds_of_sending_form_one_group() {
        let start = Instant::now();
        let mut groups = InterArrival::default();
        // Three bursts, 20 ms apart, each of two packets 2 ms apart; the path adds 1 ms of
        // queue per burst.
        let mut deltas = Vec::new();
        for burst in 0..4u64 {
            for packet in 0..2u64 {
                let sent = burst * 20 + packet * 2;
                let arrived = 1000 + sent + burst;
                deltas.extend(groups.on_packet(start + ms(sent), ms(arrived)));
            }
        }
        // The fourth burst's first packet completes the third group: two deltas.
        assert_eq!(deltas.len(), 2);
        for delta in deltas {
            assert!((delta.send_delta_ms - 20.0).abs() < 1e-9);
            assert!((delta.arrival_delta_ms - 21.0).abs() < 1e-9);
        }
    }

    #[test]
    fn an_arrival_burst_joins_the_group() {
        let start = Instant::now();
        let mut groups = InterArrival::default();
        assert_eq!(groups.on_packet(start, ms(100)), None);
        // Sent 10 ms later but arrived 1 ms later: delivered with the backlog.
        assert_eq!(groups.on_packet(start + ms(10), ms(101)), None);
        assert_eq!(groups.on_packet(start + ms(30), ms(130)), None);
        let delta = groups.on_packet(start + ms(60), ms(160)).expect("a delta");
        assert!((delta.send_delta_ms - 20.0).abs() < 1e-9);
        assert!((delta.arrival_delta_ms - 29.0).abs() < 1e-9);
    }

    #[test]
    fn a_clock_jump_starts_over() {
        let start = Instant::now();
        let mut groups = InterArrival::default();
        let packets = [
            (0, 100),
            (20, 120),
            (40, 9_000),
            (60, 9_020),
            (80, 9_040),
            (100, 9_060),
        ];
        let measured: Vec<bool> = packets
            .iter()
            .map(|&(sent, arrived)| groups.on_packet(start + ms(sent), ms(arrived)).is_some())
            .collect();
        // The group arriving 8.9 s late is not measured, nor the one after it; then the
        // groups on the new clock are.
        assert_eq!(measured, [false, false, true, false, false, true]);
    }
}
