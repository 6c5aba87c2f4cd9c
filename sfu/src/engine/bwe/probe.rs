//! The probe bitrate estimator: what a probe cluster (packets sent back to back at a chosen
//! rate) shows the path can carry. The delay-based estimate may rise only a little above what
//! the path acknowledges, and a forwarding server's media rate is what the publishers send,
//! so the estimate can climb past the media rate only when a probe shows the room.

use std::time::{Duration, Instant};

use super::inter_arrival::millis;
use super::PacketResult;

/// Clusters measured at once; a new cluster takes the slot least recently fed.
const CLUSTERS: usize = 4;
/// A cluster with fewer received packets says nothing.
const MIN_PACKETS: u32 = 5;
/// A cluster sent or received over longer than this is not a burst.
const MAX_INTERVAL: Duration = Duration::from_secs(1);
/// A receive rate above this multiple of the send rate is a measuring artifact.
const MAX_RECEIVE_RATIO: f64 = 2.0;
/// A receive rate under this fraction of the send rate means the probe saturated the path...
const MIN_UNSATURATED_RATIO: f64 = 0.9;
/// ...and the path's capacity is then taken as this fraction of the receive rate.
const SATURATED_UTILIZATION: f64 = 0.95;

/// What the feedback reported of one cluster: its received packets by their extremes.
#[derive(Debug, Clone, Copy)]
struct Cluster {
    id: u32,
    first_send: Instant,
    last_send: Instant,
    first_arrival: Duration,
    last_arrival: Duration,
    /// Bytes of the last packet sent: sent after the send interval closes.
    last_send_size: usize,
    /// Bytes of the first packet received: received before the receive interval opens.
    first_arrival_size: usize,
    bytes: usize,
    packets: u32,
    /// The highest transport-wide sequence number reported of it, received or lost.
    last_sequence: i64,
    /// When it last took a packet, for replacing the stalest.
    fed: Instant,
    /// Whether the feedback reported a packet sent after it: it is then measured whole.
    complete: bool,
    /// Whether its rate was read.
    measured: bool,
}

impl Cluster {
    fn new(now: Instant, id: u32, packet: &PacketResult) -> Self {
        Self {
            id,
            first_send: packet.send_time,
            last_send: packet.send_time,
            first_arrival: Duration::MAX,
            last_arrival: Duration::ZERO,
            last_send_size: 0,
            first_arrival_size: 0,
            bytes: 0,
            packets: 0,
            last_sequence: packet.sequence,
            fed: now,
            complete: false,
            measured: false,
        }
    }

    /// Takes one packet of the cluster the feedback reported, received or lost: a lost one
    /// only tells that the cluster reached that far.
    fn add(&mut self, now: Instant, packet: &PacketResult) {
        self.last_sequence = self.last_sequence.max(packet.sequence);
        self.fed = now;
        let Some(arrival) = packet.arrival else {
            return;
        };
        if self.packets == 0 || packet.send_time < self.first_send {
            self.first_send = packet.send_time;
        }
        if self.packets == 0 || packet.send_time >= self.last_send {
            self.last_send = packet.send_time;
            self.last_send_size = packet.size;
        }
        if arrival < self.first_arrival {
            self.first_arrival = arrival;
            self.first_arrival_size = packet.size;
        }
        self.last_arrival = self.last_arrival.max(arrival);
        self.bytes = self.bytes.saturating_add(packet.size);
        self.packets = self.packets.saturating_add(1);
    }

    /// The rate the path showed: the lesser of the send and receive rates, or under the
    /// receive rate when the probe saturated the path; and whether it did.
    fn bitrate_bps(&self) -> Option<(f64, bool)> {
        if self.packets < MIN_PACKETS {
            return None;
        }
        let send_interval = self.last_send.saturating_duration_since(self.first_send);
        let receive_interval = self.last_arrival.saturating_sub(self.first_arrival);
        let valid = |interval: Duration| !interval.is_zero() && interval <= MAX_INTERVAL;
        if !valid(send_interval) || !valid(receive_interval) {
            return None;
        }
        let rate = |bytes: usize, interval: Duration| bytes as f64 * 8000.0 / millis(interval);
        let send_bps = rate(
            self.bytes.saturating_sub(self.last_send_size),
            send_interval,
        );
        let receive_bps = rate(
            self.bytes.saturating_sub(self.first_arrival_size),
            receive_interval,
        );
        if receive_bps > MAX_RECEIVE_RATIO * send_bps {
            return None;
        }
        Some(if receive_bps < MIN_UNSATURATED_RATIO * send_bps {
            (SATURATED_UTILIZATION * receive_bps, true)
        } else {
            (send_bps.min(receive_bps), false)
        })
    }
}

/// The clusters being measured, in fixed slots.
#[derive(Debug, Clone, Default)]
pub(super) struct ProbeBitrate {
    clusters: [Option<Cluster>; CLUSTERS],
    last_result_bps: Option<u64>,
    /// Whether the cluster of the last result saturated the path: its rate is then the
    /// path's capacity, not only a rate the path carries.
    last_saturated: bool,
}

impl ProbeBitrate {
    /// Takes one feedback's packets, in sequence order. A packet of no cluster (or of a
    /// later one) reported past a cluster's last completes that cluster: the packets are
    /// numbered in send order, so the feedback has then reported all of it. Measured before,
    /// a cluster would show the rate of its head alone, and a shaper's burst lets the head
    /// through faster than the path carries.
    pub(super) fn on_feedback(&mut self, now: Instant, packets: &[PacketResult]) {
        for packet in packets {
            for cluster in self.clusters.iter_mut().flatten() {
                if Some(cluster.id) != packet.probe_cluster
                    && packet.sequence > cluster.last_sequence
                {
                    cluster.complete = true;
                }
            }
            if let Some(id) = packet.probe_cluster {
                self.on_packet(now, id, packet);
            }
        }
    }

    fn on_packet(&mut self, now: Instant, id: u32, packet: &PacketResult) {
        if let Some(cluster) = self.clusters.iter_mut().flatten().find(|c| c.id == id) {
            cluster.add(now, packet);
            return;
        }
        // Empty slots sort first, then the stalest cluster.
        if let Some(slot) = self
            .clusters
            .iter_mut()
            .min_by_key(|slot| slot.map(|cluster| cluster.fed))
        {
            let mut cluster = Cluster::new(now, id, packet);
            cluster.add(now, packet);
            *slot = Some(cluster);
        }
    }

    /// The highest rate of the clusters completed since the last call, if any gives one; it
    /// is then also [`Self::last_result_bps`]. Each cluster is measured once.
    pub(super) fn take_result_bps(&mut self) -> Option<u64> {
        let (best, saturated) = self
            .clusters
            .iter_mut()
            .flatten()
            .filter(|cluster| cluster.complete && !cluster.measured)
            .filter_map(|cluster| {
                cluster.measured = true;
                cluster.bitrate_bps()
            })
            .max_by(|a, b| a.0.total_cmp(&b.0))?;
        let bps = best as u64;
        self.last_result_bps = Some(bps);
        self.last_saturated = saturated;
        Some(bps)
    }

    /// The path's capacity, when the last probe saturated it.
    pub(super) fn capacity_bps(&self) -> Option<u64> {
        self.last_result_bps.filter(|_| self.last_saturated)
    }

    /// The last rate a probe showed.
    pub(super) fn last_result_bps(&self) -> Option<u64> {
        self.last_result_bps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packet `index` of cluster 7 (or of none), 1200 bytes sent and received at the offsets
    /// given, in microseconds.
    fn packet(start: Instant, index: i64, sent_us: u64, arrival_us: Option<u64>) -> PacketResult {
        PacketResult {
            sequence: index,
            send_time: start + Duration::from_micros(sent_us),
            size: 1200,
            probe_cluster: Some(7),
            arrival: arrival_us.map(Duration::from_micros),
        }
    }

    /// Ten packets of cluster 7 sent 4 ms apart and received `spacing_us` apart, then one of
    /// no cluster.
    fn cluster(start: Instant, spacing_us: u64) -> Vec<PacketResult> {
        let mut packets: Vec<_> = (0..10u64)
            .map(|i| packet(start, i as i64, i * 4_000, Some(50_000 + i * spacing_us)))
            .collect();
        let mut after = packet(start, 10, 40_000, Some(50_000 + 10 * spacing_us));
        after.probe_cluster = None;
        packets.push(after);
        packets
    }

    #[test]
    fn a_cluster_through_a_wide_path_shows_its_send_rate() {
        let start = Instant::now();
        let mut probe = ProbeBitrate::default();
        // 1200 bytes every 4 ms: 2.4 Mbit/s, carried as sent.
        probe.on_feedback(start, &cluster(start, 4_000));
        assert_eq!(probe.take_result_bps(), Some(2_400_000));
        assert_eq!(probe.take_result_bps(), None);
        assert_eq!(probe.last_result_bps(), Some(2_400_000));
        assert_eq!(probe.capacity_bps(), None, "a lower bound only");
    }

    #[test]
    fn a_saturated_path_shows_under_its_receive_rate() {
        let start = Instant::now();
        let mut probe = ProbeBitrate::default();
        // Sent at 2.4 Mbit/s, received at 1.2.
        probe.on_feedback(start, &cluster(start, 8_000));
        let bps = probe.take_result_bps().expect("a rate");
        assert!(bps.abs_diff(1_140_000) <= 1, "{bps}");
        assert_eq!(probe.capacity_bps(), Some(bps), "the path's capacity");
    }

    #[test]
    fn a_cluster_is_measured_only_once_the_feedback_reported_past_it() {
        let start = Instant::now();
        let mut probe = ProbeBitrate::default();
        let packets = cluster(start, 8_000);
        // The head came through a shaper's burst at the send rate: measured alone it would
        // show 2.4 Mbit/s.
        let mut head = packets[..6].to_vec();
        for (i, p) in head.iter_mut().enumerate() {
            p.arrival = Some(Duration::from_micros(50_000 + i as u64 * 4_000));
        }
        probe.on_feedback(start, &head);
        assert_eq!(
            probe.take_result_bps(),
            None,
            "not before its end is reported"
        );
        // The rest, one of it lost, then the packet after it.
        let mut tail = packets[6..].to_vec();
        tail[1].arrival = None;
        probe.on_feedback(start, &tail);
        let bps = probe.take_result_bps().expect("a rate");
        // Nine received: eight after the first over 72 ms of arrivals (the last at 122 ms),
        // under the send rate.
        let expected = 0.95 * (8.0 * 1200.0 * 8.0) / 0.072;
        assert!((bps as f64 - expected).abs() <= 1.0, "{bps} vs {expected}");
        assert_eq!(probe.take_result_bps(), None, "measured once");
    }

    #[test]
    fn too_few_or_simultaneous_packets_show_nothing() {
        let start = Instant::now();
        let mut probe = ProbeBitrate::default();
        let mut packets: Vec<_> = (0..10)
            .map(|i| packet(start, i, 0, Some(50_000 + i as u64)))
            .collect();
        packets.push(PacketResult {
            probe_cluster: None,
            ..packet(start, 10, 0, Some(60_000))
        });
        probe.on_feedback(start, &packets);
        assert_eq!(probe.take_result_bps(), None);
        // Three packets of each of many clusters, each completed by the next.
        let packets: Vec<_> = (0..30)
            .map(|i| PacketResult {
                probe_cluster: Some(i as u32 / 3),
                ..packet(start, i, i as u64 * 1_000, Some(i as u64 * 1_000))
            })
            .collect();
        probe.on_feedback(start, &packets);
        assert_eq!(probe.take_result_bps(), None);
    }
}
