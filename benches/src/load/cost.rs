//! What a delivered packet cost the node, beside the kernel's floor measured in the same run
//! (`floor`), and how the node's sends were batched.

use std::time::Duration;

use serde_json::{json, Value};

use super::floor::{per, Floor};
use super::report::row;

/// The node's `/metrics` counters of its sending.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Wire {
    /// `strata_packets_out_total`: RTP packets sent.
    pub packets_out: u64,
    /// `strata_udp_send_calls_total`: send calls, each a batch.
    pub send_calls: u64,
    /// `strata_datagrams_out_total`: UDP datagrams sent (0 from a node that does not say).
    pub datagrams: u64,
    /// `strata_udp_send_messages_total`: the messages they left in, a segmented run one.
    pub messages: u64,
    /// `strata_udp_gso_datagrams_total`: datagrams that left in segmented messages.
    pub segmented: u64,
    /// `strata_media_loop_turns_total`: turns of the node's loops (0 from a node that does
    /// not say).
    pub turns: u64,
}

impl Wire {
    /// The counters from a `/metrics` text, when it has the packets and the calls.
    pub fn parse(metrics: &str) -> Option<Self> {
        let value = |series: &str| {
            metrics
                .lines()
                .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        };
        Some(Self {
            packets_out: value("strata_packets_out_total")?,
            send_calls: value("strata_udp_send_calls_total")?,
            datagrams: value("strata_datagrams_out_total").unwrap_or(0),
            messages: value("strata_udp_send_messages_total").unwrap_or(0),
            segmented: value("strata_udp_gso_datagrams_total").unwrap_or(0),
            turns: value("strata_media_loop_turns_total").unwrap_or(0),
        })
    }

    /// What was counted between `self` and `later`.
    pub fn since(self, later: Self) -> Self {
        Self {
            packets_out: later.packets_out.saturating_sub(self.packets_out),
            send_calls: later.send_calls.saturating_sub(self.send_calls),
            datagrams: later.datagrams.saturating_sub(self.datagrams),
            messages: later.messages.saturating_sub(self.messages),
            segmented: later.segmented.saturating_sub(self.segmented),
            turns: later.turns.saturating_sub(self.turns),
        }
    }

    /// Both nodes' counters together (a run across nodes).
    pub fn plus(self, other: Self) -> Self {
        Self {
            packets_out: self.packets_out + other.packets_out,
            send_calls: self.send_calls + other.send_calls,
            datagrams: self.datagrams + other.datagrams,
            messages: self.messages + other.messages,
            segmented: self.segmented + other.segmented,
            turns: self.turns + other.turns,
        }
    }

    /// Datagrams per message the kernel was given: 1 without segmentation.
    pub fn datagrams_per_message(&self) -> Option<f64> {
        per(self.datagrams as f64, self.messages)
    }

    /// The share of the datagrams that left in segmented messages.
    pub fn segmented_share(&self) -> Option<f64> {
        per(self.segmented as f64, self.datagrams)
    }

    /// RTP packets per send call (the calls also carry RTCP, DTLS and STUN, so this is a
    /// little under the datagrams per call).
    pub fn packets_per_call(&self) -> Option<f64> {
        per(self.packets_out as f64, self.send_calls)
    }
}

/// Where a run's node and tool ran, as `/proc` lists their CPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// Whether `--pin` put them on cores of their own.
    pub pinned: bool,
    pub node_cpus: String,
    pub tool_cpus: String,
}

/// The node's cost per packet over the measured window.
#[derive(Debug, Clone, Default)]
pub struct Cost {
    pub node_cpu: Duration,
    /// Datagrams the viewers received from the node over the window (all of them: RTP, and the
    /// few RTCP and STUN ones).
    pub delivered: u64,
    /// The node's counters over the window, when its `/metrics` has them.
    pub wire: Option<Wire>,
    /// Times the node's threads slept over the window (each a wake-up), and the window.
    pub sleeps: Option<u64>,
    pub wall: Duration,
    /// None when `--floor-seconds 0`.
    pub floor: Option<Floor>,
    /// The same floor at the node's pace: what the kernel takes per datagram at the rate and
    /// the batches the node sent (none without the node's send counters).
    pub paced_floor: Option<Floor>,
    pub placement: Placement,
}

impl Cost {
    /// The node's CPU microseconds per datagram delivered.
    pub fn node_us_per_packet(&self) -> Option<f64> {
        per(self.node_cpu.as_secs_f64() * 1e6, self.delivered)
    }

    /// The node's wake-ups a second over the window.
    pub fn wakeups_per_second(&self) -> Option<f64> {
        let sleeps = self.sleeps?;
        (!self.wall.is_zero()).then(|| sleeps as f64 / self.wall.as_secs_f64())
    }

    /// How many floors the node's cost per packet is.
    pub fn ratio(&self) -> Option<f64> {
        self.ratio_to(self.floor.as_ref())
    }

    /// How many floors at its own pace the node's cost per packet is.
    pub fn paced_ratio(&self) -> Option<f64> {
        self.ratio_to(self.paced_floor.as_ref())
    }

    fn ratio_to(&self, floor: Option<&Floor>) -> Option<f64> {
        let floor = floor?.us_per_datagram()?;
        let node = self.node_us_per_packet()?;
        (floor > 0.0).then(|| node / floor)
    }

    pub fn rows(&self, out: &mut String) {
        let us = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2} us"));
        row(
            out,
            "node CPU per packet",
            format!(
                "{} per datagram delivered ({} to the viewers)",
                us(self.node_us_per_packet()),
                self.delivered
            ),
        );
        floor_row(out, "kernel floor", self.floor.as_ref());
        row(out, "node / floor", times(self.ratio()));
        if let Some(paced) = &self.paced_floor {
            floor_row(out, "kernel floor at node's pace", Some(paced));
            row(out, "node / floor at its pace", times(self.paced_ratio()));
        }
        if let Some(wire) = self.wire {
            row(
                out,
                "node packets per send call",
                format!(
                    "{} ({} RTP packets in {} calls)",
                    wire.packets_per_call()
                        .map_or("-".into(), |p| format!("{p:.1}")),
                    wire.packets_out,
                    wire.send_calls
                ),
            );
            row(
                out,
                "node datagrams per message",
                format!(
                    "{} ({} datagrams in {} messages; {} of them segmented, {})",
                    wire.datagrams_per_message()
                        .map_or("-".into(), |p| format!("{p:.2}")),
                    wire.datagrams,
                    wire.messages,
                    wire.segmented,
                    wire.segmented_share()
                        .map_or("-".into(), |s| format!("{:.1} %", s * 100.0)),
                ),
            );
        }
        if let (Some(sleeps), Some(per_second)) = (self.sleeps, self.wakeups_per_second()) {
            row(
                out,
                "node wake-ups",
                format!(
                    "{per_second:.0} a second ({sleeps} over {:.1} s; {} datagrams delivered per wake-up)",
                    self.wall.as_secs_f64(),
                    per(self.delivered as f64, sleeps).map_or("-".into(), |d| format!("{d:.1}"))
                ),
            );
        }
        if let Some(turns) = self.wire.map(|w| w.turns).filter(|&t| t > 0) {
            row(
                out,
                "node loop turns",
                format!(
                    "{:.0} a second ({turns} over {:.1} s; {} sleeps of its threads per turn)",
                    turns as f64 / self.wall.as_secs_f64().max(f64::MIN_POSITIVE),
                    self.wall.as_secs_f64(),
                    self.sleeps
                        .and_then(|s| per(s as f64, turns))
                        .map_or("-".into(), |p| format!("{p:.2}")),
                ),
            );
        }
        let p = &self.placement;
        row(
            out,
            "CPUs",
            format!(
                "node {}, tool {}{}",
                p.node_cpus,
                p.tool_cpus,
                if p.pinned { " (pinned)" } else { "" }
            ),
        );
    }

    pub fn json(&self) -> Value {
        json!({
            "node_us_per_packet": self.node_us_per_packet(),
            "delivered": self.delivered,
            "floor_us_per_datagram": self.floor.as_ref().and_then(Floor::us_per_datagram),
            "node_to_floor": self.ratio(),
            "node_wakeups_per_second": self.wakeups_per_second(),
            "paced_floor_us_per_datagram": self.paced_floor.as_ref().and_then(Floor::us_per_datagram),
            "node_to_paced_floor": self.paced_ratio(),
            "paced_floor_call_interval_us": self.paced_floor.and_then(|f| f.pace).map(|p| p.call_interval.as_micros() as u64),
            "paced_floor_wake_interval_us": self.paced_floor.and_then(|f| f.pace).map(|p| p.wake_interval.as_micros() as u64),
            "paced_floor_sleeps": self.paced_floor.map(|f| f.sleeps),
            "floor": self.floor.as_ref().map(|f| json!({
                "destinations": f.destinations,
                "sent": f.sent,
                "lost": f.lost,
                "received": f.received,
                "calls": f.calls,
                "seconds": f.wall.as_secs_f64(),
            })),
            "node_packets_out": self.wire.map(|w| w.packets_out),
            "node_send_calls": self.wire.map(|w| w.send_calls),
            "node_packets_per_call": self.wire.and_then(|w| w.packets_per_call()),
            "node_datagrams_out": self.wire.map(|w| w.datagrams),
            "node_send_messages": self.wire.map(|w| w.messages),
            "node_segmented_datagrams": self.wire.map(|w| w.segmented),
            "node_loop_turns": self.wire.map(|w| w.turns),
            "node_datagrams_per_message": self.wire.and_then(|w| w.datagrams_per_message()),
            "pinned": self.placement.pinned,
            "node_cpus": self.placement.node_cpus,
            "tool_cpus": self.placement.tool_cpus,
        })
    }
}

/// A floor's figure and what it was measured on, or that it was not.
fn floor_row(out: &mut String, label: &str, floor: Option<&Floor>) {
    let Some(f) = floor else {
        return row(out, label, "not measured".into());
    };
    let pace = f.pace.map_or(String::new(), |p| {
        format!(
            ", a call every {} us, {} sleeps",
            p.call_interval.as_micros(),
            f.sleeps
        )
    });
    row(
        out,
        label,
        format!(
            "{} per datagram (sendmmsg of {:.0} to {} loopback sockets{pace}; {} sent, {} read, over {:.1} s)",
            f.us_per_datagram().map_or("-".into(), |v| format!("{v:.2} us")),
            f.per_call().unwrap_or(0.0),
            f.destinations,
            f.sent,
            f.received,
            f.wall.as_secs_f64()
        ),
    );
}

/// A ratio as the table shows it.
fn times(ratio: Option<f64>) -> String {
    ratio.map_or("-".into(), |r| format!("{r:.1} x"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::floor::Pace;

    #[test]
    fn the_send_counters_are_read_from_metrics_and_taken_over_the_window() {
        let metrics = "# HELP strata_packets_out_total RTP packets sent.\n\
            strata_packets_out_total 1000\n\
            strata_packets_out_totals 7\n\
            strata_udp_send_calls_total 40\n";
        let before = Wire::parse(metrics).expect("both");
        assert_eq!(
            before,
            Wire {
                packets_out: 1000,
                send_calls: 40,
                ..Wire::default()
            },
            "a node that does not count messages"
        );
        assert_eq!(Wire::parse("strata_packets_out_total 1\n"), None);
        let after = Wire {
            packets_out: 4200,
            send_calls: 140,
            datagrams: 3300,
            messages: 1100,
            segmented: 2640,
            turns: 900,
        };
        let window = before.since(after);
        assert_eq!((window.packets_out, window.send_calls), (3200, 100));
        assert_eq!(
            window.turns, 900,
            "none counted before: a node that does not count turns"
        );
        assert_eq!(window.packets_per_call(), Some(32.0));
        assert_eq!(window.datagrams_per_message(), Some(3.0));
        assert_eq!(window.segmented_share(), Some(0.8));
        assert_eq!(Wire::default().packets_per_call(), None);
        let counted = format!(
            "{metrics}strata_datagrams_out_total 5\nstrata_udp_send_messages_total 4\n\
             strata_udp_gso_datagrams_total 2\nstrata_media_loop_turns_total 9\n"
        );
        let counted = Wire::parse(&counted).expect("all");
        assert_eq!(
            (
                counted.datagrams,
                counted.messages,
                counted.segmented,
                counted.turns
            ),
            (5, 4, 2, 9)
        );
    }

    #[test]
    fn the_node_is_set_against_the_floor() {
        let floor = Floor {
            destinations: 200,
            sent: 100_000,
            calls: 3125,
            received: 100_000,
            sender_cpu: Duration::from_millis(250),
            ..Floor::default()
        };
        let cost = Cost {
            node_cpu: Duration::from_secs(3),
            delivered: 600_000,
            floor: Some(floor),
            ..Cost::default()
        };
        assert_eq!(floor.us_per_datagram(), Some(2.5));
        assert_eq!(cost.node_us_per_packet(), Some(5.0));
        assert_eq!(cost.ratio(), Some(2.0));
        let json = cost.json();
        assert_eq!(json["node_to_floor"], 2.0);
        assert_eq!(json["floor"]["calls"], 3125);
        let mut table = String::new();
        cost.rows(&mut table);
        assert!(table.contains("5.00 us per datagram delivered (600000 to the viewers)"));
        assert!(table.contains("2.50 us per datagram (sendmmsg of 32 to 200 loopback"));
        assert!(table.contains("2.0 x"));
        assert!(!table.contains("at its pace"), "no paced floor, no row");
    }

    #[test]
    fn the_node_is_set_against_the_floor_at_its_pace_too() {
        let paced = Floor {
            destinations: 200,
            sent: 28_000,
            calls: 1_000,
            received: 28_000,
            sender_cpu: Duration::from_millis(112),
            pace: Pace::of(28_000, 1_000, 750, Duration::from_secs(2)),
            sleeps: 750,
            ..Floor::default()
        };
        let cost = Cost {
            node_cpu: Duration::from_secs(3),
            delivered: 600_000,
            paced_floor: Some(paced),
            ..Cost::default()
        };
        assert_eq!(cost.ratio(), None);
        assert_eq!(cost.paced_ratio(), Some(1.25));
        assert_eq!(cost.wakeups_per_second(), None, "no sleeps counted");
        assert_eq!(cost.json()["node_to_paced_floor"], 1.25);
        assert_eq!(cost.json()["paced_floor_call_interval_us"], 2_000);
        assert_eq!(cost.json()["paced_floor_wake_interval_us"], 2_666);
        let mut table = String::new();
        cost.rows(&mut table);
        assert!(
            table.contains("4.00 us per datagram (sendmmsg of 28 to 200 loopback sockets, a call every 2000 us, 750 sleeps;"),
            "{table}"
        );
        assert!(table.contains("node / floor at its pace"));
        assert!(table.contains("1.2 x"));
    }

    #[test]
    fn the_node_s_wake_ups_are_counted_a_second() {
        let cost = Cost {
            delivered: 440_000,
            sleeps: Some(11_000),
            wall: Duration::from_secs(10),
            ..Cost::default()
        };
        assert_eq!(cost.wakeups_per_second(), Some(1_100.0));
        assert_eq!(cost.json()["node_wakeups_per_second"], 1_100.0);
        let mut table = String::new();
        cost.rows(&mut table);
        assert!(
            table.contains(
                "1100 a second (11000 over 10.0 s; 40.0 datagrams delivered per wake-up)"
            ),
            "{table}"
        );
    }

    #[test]
    fn the_node_s_turns_are_counted_a_second_with_its_sleeps_per_turn() {
        let mut cost = Cost {
            delivered: 440_000,
            sleeps: Some(11_000),
            wall: Duration::from_secs(10),
            wire: Some(Wire {
                turns: 31_000,
                ..Wire::default()
            }),
            ..Cost::default()
        };
        assert_eq!(cost.json()["node_loop_turns"], 31_000);
        let mut table = String::new();
        cost.rows(&mut table);
        assert!(
            table
                .contains("3100 a second (31000 over 10.0 s; 0.35 sleeps of its threads per turn)"),
            "{table}"
        );
        // A node that does not count its turns has no such row.
        cost.wire = Some(Wire::default());
        let mut table = String::new();
        cost.rows(&mut table);
        assert!(!table.contains("node loop turns"), "{table}");
    }

    #[test]
    fn without_packets_or_a_floor_there_is_no_ratio() {
        let cost = Cost {
            node_cpu: Duration::from_secs(1),
            ..Cost::default()
        };
        assert_eq!(cost.node_us_per_packet(), None);
        assert_eq!(cost.ratio(), None);
        let cost = Cost {
            delivered: 10,
            ..cost
        };
        assert_eq!(cost.node_us_per_packet(), Some(100_000.0));
        assert_eq!(cost.ratio(), None);
        let mut table = String::new();
        cost.rows(&mut table);
        assert!(table.contains("not measured"));
    }
}
