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

/// The received packets of one cluster, by their extremes.
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
    /// When it last took a packet, for replacing the stalest.
    fed: Instant,
    /// Whether it took packets since its rate was last read.
    fresh: bool,
}

impl Cluster {
    fn new(now: Instant, id: u32, packet: &PacketResult, arrival: Duration) -> Self {
        Self {
            id,
            first_send: packet.send_time,
            last_send: packet.send_time,
            first_arrival: arrival,
            last_arrival: arrival,
            last_send_size: packet.size,
            first_arrival_size: packet.size,
            bytes: packet.size,
            packets: 1,
            fed: now,
            fresh: true,
        }
    }

    fn add(&mut self, now: Instant, packet: &PacketResult, arrival: Duration) {
        if packet.send_time < self.first_send {
            self.first_send = packet.send_time;
        }
        if packet.send_time >= self.last_send {
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
        self.fed = now;
        self.fresh = true;
    }

    /// The rate the path showed: the lesser of the send and receive rates, or under the
    /// receive rate when the probe saturated the path.
    fn bitrate_bps(&self) -> Option<f64> {
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
            SATURATED_UTILIZATION * receive_bps
        } else {
            send_bps.min(receive_bps)
        })
    }
}

/// The clusters being measured, in fixed slots.
#[derive(Debug, Clone, Default)]
pub(super) struct ProbeBitrate {
    clusters: [Option<Cluster>; CLUSTERS],
    last_result_bps: Option<u64>,
}

impl ProbeBitrate {
    /// Takes one received packet of probe cluster `id`.
    pub(super) fn on_packet(
        &mut self,
        now: Instant,
        id: u32,
        packet: &PacketResult,
        arrival: Duration,
    ) {
        if let Some(cluster) = self.clusters.iter_mut().flatten().find(|c| c.id == id) {
            cluster.add(now, packet, arrival);
            return;
        }
        // Empty slots sort first, then the stalest cluster.
        if let Some(slot) = self
            .clusters
            .iter_mut()
            .min_by_key(|slot| slot.map(|cluster| cluster.fed))
        {
            *slot = Some(Cluster::new(now, id, packet, arrival));
        }
    }

    /// The highest rate of the clusters fed since the last call, if any gives one; it is
    /// then also [`Self::last_result_bps`].
    pub(super) fn take_result_bps(&mut self) -> Option<u64> {
        let best = self
            .clusters
            .iter_mut()
            .flatten()
            .filter_map(|cluster| {
                std::mem::take(&mut cluster.fresh)
                    .then(|| cluster.bitrate_bps())
                    .flatten()
            })
            .fold(None, |best: Option<f64>, bps| {
                Some(best.map_or(bps, |b| b.max(bps)))
            })?;
        let bps = best as u64;
        self.last_result_bps = Some(bps);
        Some(bps)
    }

    /// The last rate a probe showed.
    pub(super) fn last_result_bps(&self) -> Option<u64> {
        self.last_result_bps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(start: Instant, sent_us: u64, arrival_us: u64) -> (PacketResult, Duration) {
        let arrival = Duration::from_micros(arrival_us);
        let result = PacketResult {
            sequence: 0,
            send_time: start + Duration::from_micros(sent_us),
            size: 1200,
            probe_cluster: Some(7),
            arrival: Some(arrival),
        };
        (result, arrival)
    }

    #[test]
    fn a_cluster_through_a_wide_path_shows_its_send_rate() {
        let start = Instant::now();
        let mut probe = ProbeBitrate::default();
        // 1200 bytes every 4 ms: 2.4 Mbit/s, carried as sent.
        for index in 0..10 {
            let (result, arrival) = packet(start, index * 4_000, 50_000 + index * 4_000);
            probe.on_packet(start, 7, &result, arrival);
        }
        assert_eq!(probe.take_result_bps(), Some(2_400_000));
        assert_eq!(probe.take_result_bps(), None);
        assert_eq!(probe.last_result_bps(), Some(2_400_000));
    }

    #[test]
    fn a_saturated_path_shows_under_its_receive_rate() {
        let start = Instant::now();
        let mut probe = ProbeBitrate::default();
        // Sent at 2.4 Mbit/s, received at 1.2.
        for index in 0..10 {
            let (result, arrival) = packet(start, index * 4_000, 50_000 + index * 8_000);
            probe.on_packet(start, 7, &result, arrival);
        }
        let bps = probe.take_result_bps().expect("a rate");
        assert!(bps.abs_diff(1_140_000) <= 1, "{bps}");
    }

    #[test]
    fn too_few_or_simultaneous_packets_show_nothing() {
        let start = Instant::now();
        let mut probe = ProbeBitrate::default();
        for index in 0..10 {
            let (result, arrival) = packet(start, 0, 50_000 + index);
            probe.on_packet(start, 7, &result, arrival);
        }
        assert_eq!(probe.take_result_bps(), None);
        for id in 0..10 {
            let (result, arrival) = packet(start, u64::from(id), 1);
            probe.on_packet(start, id, &result, arrival);
        }
        assert_eq!(probe.take_result_bps(), None);
    }
}
