//! A run's figures: gathered from the viewers' threads, the publisher and `/proc`, printed as a
//! table or one JSON line, and judged by `--check`.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{json, Value};

use crate::client::Transport;

use super::cluster::{NodeShare, RelayCost};
use super::cost::{Cost, Placement, Wire};
use super::floor::Floor;
use super::node::ViewerGauges;
use super::options::Options;
use super::procfs::percent_of_core;
use super::publisher::PublisherReport;
use super::stats::{Histogram, Latencies};
use super::viewers::{ViewerReport, WorkerReport};

/// How the viewers joined.
#[derive(Debug, Clone, Default)]
pub struct Joining {
    /// Viewers the node answered with 201.
    pub accepted: usize,
    /// The spatial layer each accepted viewer asked for.
    pub spatial: Vec<u8>,
    pub connected: usize,
    /// Why the others were not accepted.
    pub refused: Vec<String>,
    /// From the first WHEP request to the last answer.
    pub signaled: Duration,
    /// From the first WHEP request to the last viewer connected (or the timeout).
    pub all_connected: Duration,
}

impl Joining {
    pub fn summary(&self, viewers: usize) -> String {
        format!(
            "{} of {viewers} viewers connected in {:.2} s (signaling {:.2} s){}",
            self.connected,
            self.all_connected.as_secs_f64(),
            self.signaled.as_secs_f64(),
            match self.refused.first() {
                Some(first) => format!("; {} refused, first: {first}", self.refused.len()),
                None => String::new(),
            }
        )
    }
}

/// How the viewers' layers climbed before the measurement.
#[derive(Debug, Clone, Default)]
pub struct Warmup {
    pub took: Duration,
    /// Every viewer was sent the spatial layer it asked for.
    pub at_layer: bool,
    /// Viewers by the spatial layer the node sent them when it ended.
    pub sent: [usize; 3],
}

impl Warmup {
    pub fn summary(&self) -> String {
        let [s0, s1, s2] = self.sent;
        match self.at_layer {
            true => format!(
                "every viewer at its layer after {:.1} s of warm-up",
                self.took.as_secs_f64()
            ),
            false => format!(
                "warm-up over after {:.1} s with viewers not all at their layer (sent spatial 0/1/2: {s0}/{s1}/{s2})",
                self.took.as_secs_f64()
            ),
        }
    }
}

/// Datagrams the run's sockets dropped for a full receive buffer, over the whole run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SocketDrops {
    pub node: u64,
    pub viewers: u64,
    pub publisher: u64,
}

/// What `/proc` and `/metrics` said about the measured seconds.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    pub wall: Duration,
    /// All the nodes' CPU.
    pub node_cpu: Duration,
    /// Each node's CPU (one node: one entry).
    pub per_node_cpu: Vec<Duration>,
    pub tool_cpu: Duration,
    /// What the rest of the machine took meanwhile (other processes, interrupts): a run
    /// beside a busy neighbour measures the neighbour too.
    pub others_cpu: Duration,
    pub cores: usize,
    /// The node's resident memory with the publisher alone, and at the measurement's end.
    pub rss_before_kib: u64,
    pub rss_after_kib: u64,
    pub node_drops: Vec<(String, u64)>,
    pub keyframe_requests_sent: Option<u64>,
    /// Probe clusters the node started toward viewers held below their layers, all run long.
    pub probe_clusters: Option<u64>,
    /// The node's estimates and layers for its viewers as the measurement ended.
    pub viewer_gauges: ViewerGauges,
    pub warmup: Warmup,
    pub socket_drops: Option<SocketDrops>,
    /// The node's send counters over the measured seconds.
    pub wire: Option<Wire>,
    /// Times the node's threads slept over the measured seconds (each a wake-up).
    pub node_sleeps: Option<u64>,
    /// The kernel's floor, measured before the node started.
    pub floor: Option<Floor>,
    /// The same at the node's pace (its datagrams per call and calls a second), measured
    /// after the viewers stopped.
    pub paced_floor: Option<Floor>,
    pub placement: Placement,
}

/// Smallest, median and largest of some values.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Spread {
    fn of(values: impl IntoIterator<Item = f64>) -> Option<Self> {
        let mut values: Vec<f64> = values.into_iter().collect();
        values.sort_by(f64::total_cmp);
        let (&min, &max) = (values.first()?, values.last()?);
        Some(Self {
            min,
            median: values[values.len() / 2],
            max,
        })
    }

    fn json(spread: Option<Self>) -> Value {
        match spread {
            Some(s) => json!({"min": s.min, "median": s.median, "max": s.max}),
            None => Value::Null,
        }
    }
}

/// Everything a run reports.
#[derive(Debug, Clone)]
pub struct Report {
    pub viewers: usize,
    pub viewer_transport: Transport,
    pub rooms: usize,
    pub workers: Option<usize>,
    pub seconds: f64,
    pub simulated_loss_pct: f64,
    pub joining: Joining,
    pub connect_ms: Option<Spread>,
    pub kbps: Option<Spread>,
    pub kbps_by_spatial: [Option<Spread>; 3],
    pub frames_complete: u64,
    pub frames_complete_per_viewer: Option<Spread>,
    pub frames_incomplete: u64,
    pub expected: u64,
    pub missing: u64,
    pub repaired: u64,
    /// Viewers that received no video while measured.
    pub without_video: usize,
    pub nacks: u64,
    pub dropped_by_simulation: u64,
    pub latency: Histogram,
    pub latencies: Latencies,
    pub measured: Measured,
    pub cost: Cost,
    pub publisher: PublisherReport,
    pub errors: Vec<String>,
    /// Each node's part of a run across nodes (empty for one node).
    pub nodes: Vec<NodeShare>,
}

impl Report {
    pub fn new(
        options: &Options,
        joining: &Joining,
        measured: &Measured,
        workers: &[WorkerReport],
        publisher: &PublisherReport,
    ) -> Self {
        let all: Vec<&ViewerReport> = workers.iter().flat_map(|w| &w.viewers).collect();
        let mut latencies = Latencies::default();
        workers.iter().for_each(|w| latencies.merge(&w.latency));
        let connected: Vec<&&ViewerReport> =
            all.iter().filter(|v| v.connect_time.is_some()).collect();
        let kbps_of = |spatial: u8| {
            Spread::of(
                connected
                    .iter()
                    .filter(|v| v.spatial == spatial)
                    .map(|v| v.kbps),
            )
        };
        let sum = |pick: fn(&ViewerReport) -> u64| all.iter().map(|v| pick(v)).sum();
        Self {
            viewers: options.viewers,
            viewer_transport: options.viewer_transport,
            rooms: options.rooms,
            workers: options.workers,
            seconds: measured.wall.as_secs_f64(),
            simulated_loss_pct: options.loss,
            joining: joining.clone(),
            connect_ms: Spread::of(connected.iter().filter_map(|v| v.connect_time).map(ms)),
            kbps: Spread::of(connected.iter().map(|v| v.kbps)),
            kbps_by_spatial: [kbps_of(0), kbps_of(1), kbps_of(2)],
            frames_complete: sum(|v| v.frames_complete),
            frames_complete_per_viewer: Spread::of(
                connected.iter().map(|v| v.frames_complete as f64),
            ),
            frames_incomplete: sum(|v| v.frames_incomplete),
            expected: sum(|v| v.seq.expected),
            missing: sum(|v| v.seq.missing),
            repaired: sum(|v| v.seq.repaired),
            without_video: connected.iter().filter(|v| v.video_packets == 0).count(),
            nacks: sum(|v| v.nacks),
            dropped_by_simulation: sum(|v| v.dropped),
            latency: latencies.all(),
            latencies,
            measured: measured.clone(),
            cost: Cost {
                node_cpu: measured.node_cpu,
                delivered: sum(|v| v.datagrams),
                // The node counts its UDP send calls: with the viewers on TCP they carry
                // the publisher's feedback only, and packets per call would mean nothing.
                wire: measured
                    .wire
                    .filter(|_| options.viewer_transport == Transport::Udp),
                floor: measured.floor,
                paced_floor: measured.paced_floor,
                sleeps: measured.node_sleeps,
                wall: measured.wall,
                placement: measured.placement.clone(),
            },
            publisher: publisher.clone(),
            errors: all
                .iter()
                .filter_map(|v| Some(format!("viewer {}: {}", v.index, v.error.as_ref()?)))
                .collect(),
            nodes: match measured.per_node_cpu.len() {
                0 | 1 => Vec::new(),
                _ => NodeShare::of_run(&measured.per_node_cpu, measured.wall, workers),
            },
        }
    }

    /// Loss after retransmission, percent of the video packets the viewers should have had.
    pub fn loss_pct(&self) -> f64 {
        match self.expected {
            0 => 0.0,
            n => 100.0 * self.missing as f64 / n as f64,
        }
    }

    pub fn node_cpu_pct(&self) -> f64 {
        percent_of_core(self.measured.node_cpu, self.measured.wall)
    }

    /// Connected viewers over the cores the node used for them: how many a core would serve
    /// at this mix of layers.
    pub fn viewers_per_core(&self) -> f64 {
        let cores = self.node_cpu_pct() / 100.0;
        if cores > 0.0 {
            self.joining.connected as f64 / cores
        } else {
            0.0
        }
    }

    pub fn tool_cpu_pct(&self) -> f64 {
        percent_of_core(self.measured.tool_cpu, self.measured.wall)
    }

    pub fn others_cpu_pct(&self) -> f64 {
        percent_of_core(self.measured.others_cpu, self.measured.wall)
    }

    /// What the node's memory grew by per connected viewer, KiB.
    pub fn rss_per_viewer_kib(&self) -> f64 {
        let grown = self
            .measured
            .rss_after_kib
            .saturating_sub(self.measured.rss_before_kib);
        grown as f64 / self.joining.connected.max(1) as f64
    }

    /// The node's bandwidth estimates for its viewers, kbit/s.
    pub fn estimates_kbps(&self) -> Option<Spread> {
        Spread::of(
            self.measured
                .viewer_gauges
                .estimates
                .iter()
                .map(|bps| bps / 1000.0),
        )
    }

    /// Why the run fails `--check`, if it does.
    pub fn check(&self, max_loss_pct: f64) -> Vec<String> {
        let mut failures = Vec::new();
        if self.joining.connected < self.viewers {
            failures.push(format!(
                "{} of {} viewers connected",
                self.joining.connected, self.viewers
            ));
        }
        if self.without_video > 0 {
            failures.push(format!("{} viewers received no video", self.without_video));
        }
        if self.loss_pct() >= max_loss_pct {
            failures.push(format!(
                "loss after retransmission {:.3} % is not below {max_loss_pct} %",
                self.loss_pct()
            ));
        }
        if let Some(first) = self.errors.first() {
            failures.push(format!(
                "{} viewers failed, first: {first}",
                self.errors.len()
            ));
        }
        for node in self.nodes.iter().filter(|n| n.loss_pct() >= max_loss_pct) {
            failures.push(format!(
                "node {}: loss after retransmission {:.3} % is not below {max_loss_pct} %",
                node.index,
                node.loss_pct()
            ));
        }
        failures
    }

    pub fn json(&self) -> Value {
        let mut out = json!({
            "viewers": self.viewers,
            "workers": self.workers,
            "rooms": self.rooms,
            "seconds": self.seconds,
            "simulated_loss_pct": self.simulated_loss_pct,
            "connected": self.joining.connected,
            "refused": self.joining.refused.len(),
            "connect_s": self.joining.all_connected.as_secs_f64(),
            "connect_ms": Spread::json(self.connect_ms),
            "warmup_s": self.measured.warmup.took.as_secs_f64(),
            "warmup_at_layer": self.measured.warmup.at_layer,
            "kbps": Spread::json(self.kbps),
            "kbps_spatial": self.kbps_by_spatial.map(Spread::json),
            "frames_complete": self.frames_complete,
            "frames_complete_per_viewer": Spread::json(self.frames_complete_per_viewer),
            "frames_incomplete": self.frames_incomplete,
            "video_packets_expected": self.expected,
            "video_packets_missing": self.missing,
            "repaired": self.repaired,
            "loss_after_rtx_pct": self.loss_pct(),
            "viewers_without_video": self.without_video,
            "nacks": self.nacks,
            "dropped_by_simulation": self.dropped_by_simulation,
            "latency_ms": latency_json(&self.latency),
            "latency_ms_video_spatial": self.latencies.video.each_ref().map(latency_json),
            "latency_ms_audio": latency_json(&self.latencies.audio),
            "node_cpu_pct": self.node_cpu_pct(),
            "viewers_per_core": self.viewers_per_core(),
            "cost": self.cost.json(),
            "node_rss_kib": self.measured.rss_after_kib,
            "node_rss_per_viewer_kib": self.rss_per_viewer_kib(),
            "tool_cpu_pct": self.tool_cpu_pct(),
            "others_cpu_pct": self.others_cpu_pct(),
            "cores": self.measured.cores,
            "node_drops": self.drops_json(),
            "socket_drops": self.measured.socket_drops.map(|d| json!({
                "node": d.node, "viewers": d.viewers, "publisher": d.publisher,
            })),
            "keyframe_requests_sent": self.measured.keyframe_requests_sent,
            "node_estimate_kbps": Spread::json(self.estimates_kbps()),
            "node_spatial_sent": self.measured.viewer_gauges.spatial_sent,
            "publisher": self.publisher_json(),
            "errors": self.errors.len(),
        });
        // Beside the rest: one more key in the macro above passes its recursion limit.
        out["probe_clusters"] = json!(self.measured.probe_clusters);
        out["viewer_transport"] = json!(self.viewer_transport.label());
        if let Some(relay) = RelayCost::of(&self.nodes) {
            out["nodes"] = self.nodes.iter().map(NodeShare::json).collect();
            out["relay"] = relay.json();
        }
        out
    }

    fn drops_json(&self) -> Value {
        let drops = self.measured.node_drops.iter();
        Value::Object(
            drops
                .map(|(reason, n)| (reason.clone(), json!(n)))
                .collect(),
        )
    }

    fn publisher_json(&self) -> Value {
        let p = &self.publisher;
        json!({
            "video_kbps": rate(p.video_bytes * 8, p.sending) / 1000.0,
            "video_pps": rate(p.video_packets, p.sending),
            "audio_pps": rate(p.audio_packets, p.sending),
            "keyframes": p.keyframes,
            "keyframe_requests": p.keyframe_requests,
            "nacks": p.nacks,
            "max_lag_ms": ms(p.max_lag),
            "rtx": p.rtx,
        })
    }

    pub fn table(&self) -> String {
        let mut out = String::new();
        let workers = self.workers.map_or("default".into(), |n| n.to_string());
        let _ = writeln!(
            out,
            "load: {} viewers over {} in {} rooms, {:.1} s measured, simulated loss {} %, node \
             workers {workers}",
            self.viewers,
            self.viewer_transport.label(),
            self.rooms,
            self.seconds,
            self.simulated_loss_pct
        );
        self.table_viewers(&mut out);
        self.table_media(&mut out);
        self.table_costs(&mut out);
        if let Some(relay) = RelayCost::of(&self.nodes) {
            self.nodes.iter().for_each(|n| n.row(&mut out));
            relay.row(&mut out);
        }
        out
    }

    fn table_viewers(&self, out: &mut String) {
        let j = &self.joining;
        row(
            out,
            "viewers connected",
            format!(
                "{} / {} in {:.2} s (per viewer {})",
                j.connected,
                self.viewers,
                j.all_connected.as_secs_f64(),
                spread_text(self.connect_ms, "ms"),
            ),
        );
        if !j.refused.is_empty() {
            row(
                out,
                "refused",
                format!("{}, first: {}", j.refused.len(), j.refused[0]),
            );
        }
        row(out, "warm-up", self.measured.warmup.summary());
        row(out, "received kbit/s", spread_text(self.kbps, ""));
        for (spatial, spread) in self.kbps_by_spatial.iter().enumerate() {
            row(
                out,
                &format!("  at spatial {spatial}"),
                spread_text(*spread, ""),
            );
        }
        let sent = self.measured.viewer_gauges.spatial_sent;
        row(
            out,
            "node: estimate kbit/s",
            format!(
                "{}; sends spatial 0/1/2 to {}/{}/{} viewers; {} probe clusters",
                spread_text(self.estimates_kbps(), ""),
                sent[0],
                sent[1],
                sent[2],
                self.measured
                    .probe_clusters
                    .map_or("?".to_owned(), |n| n.to_string())
            ),
        );
        row(
            out,
            "frames complete",
            format!(
                "{} (per viewer {}), incomplete {}",
                self.frames_complete,
                spread_text(self.frames_complete_per_viewer, ""),
                self.frames_incomplete
            ),
        );
    }

    fn table_media(&self, out: &mut String) {
        row(
            out,
            "loss after retransmission",
            format!(
                "{:.3} % ({} of {} video packets; {} repaired late)",
                self.loss_pct(),
                self.missing,
                self.expected,
                self.repaired
            ),
        );
        if self.dropped_by_simulation > 0 {
            row(
                out,
                "dropped by simulation",
                self.dropped_by_simulation.to_string(),
            );
        }
        row(
            out,
            "NACKs sent by viewers",
            format!(
                "{} (the publisher got {})",
                self.nacks, self.publisher.nacks
            ),
        );
        row(
            out,
            "latency publisher->viewer",
            latency_text(&self.latency),
        );
        for (spatial, h) in self.latencies.video.iter().enumerate() {
            row(
                out,
                &format!("  video at spatial {spatial}"),
                latency_text(h),
            );
        }
        row(out, "  audio", latency_text(&self.latencies.audio));
    }

    fn table_costs(&self, out: &mut String) {
        row(
            out,
            "node CPU",
            format!(
                "{:.1} % of a core ({:.0} viewers per core)",
                self.node_cpu_pct(),
                self.viewers_per_core()
            ),
        );
        self.cost.rows(out);
        row(
            out,
            "node RSS",
            format!(
                "{:.1} MiB ({:+.0} KiB per viewer)",
                self.measured.rss_after_kib as f64 / 1024.0,
                self.rss_per_viewer_kib()
            ),
        );
        row(
            out,
            "tool CPU",
            format!("{:.1} % of a core", self.tool_cpu_pct()),
        );
        row(
            out,
            "rest of the machine",
            format!(
                "{:.1} % of a core (of {} cores)",
                self.others_cpu_pct(),
                self.measured.cores
            ),
        );
        let p = &self.publisher;
        row(
            out,
            "publisher",
            format!(
                "{:.0} kbit/s video, {:.0} packets/s, {} keyframes ({} requests), lag max {:.2} ms, RTX {}",
                rate(p.video_bytes * 8, p.sending) / 1000.0,
                rate(p.video_packets, p.sending),
                p.keyframes,
                p.keyframe_requests,
                ms(p.max_lag),
                if p.rtx { "negotiated" } else { "not negotiated" }
            ),
        );
        if !self.measured.node_drops.is_empty() {
            let drops: Vec<String> = self
                .measured
                .node_drops
                .iter()
                .map(|(r, n)| format!("{r} {n}"))
                .collect();
            row(out, "node drops", drops.join(", "));
        }
        if let Some(d) = self.measured.socket_drops {
            row(
                out,
                "receive buffer overflows",
                format!(
                    "node socket {}, viewers' {}, publisher's {}",
                    d.node, d.viewers, d.publisher
                ),
            );
        }
        if let Some(first) = self.errors.first() {
            row(
                out,
                "viewer errors",
                format!("{}, first: {first}", self.errors.len()),
            );
        }
    }
}

/// One line of the table.
pub(super) fn row(out: &mut String, name: &str, value: String) {
    let _ = writeln!(out, "  {name:<27} {value}");
}

fn spread_text(spread: Option<Spread>, unit: &str) -> String {
    match spread {
        Some(s) => format!(
            "min {:.0}{unit}, median {:.0}{unit}, max {:.0}{unit}",
            s.min, s.median, s.max
        ),
        None => "-".into(),
    }
}

pub(super) fn latency_json(h: &Histogram) -> Value {
    json!({
        "p50": h.quantile(0.5).map(ms),
        "p99": h.quantile(0.99).map(ms),
        "max": ms(h.max()),
        "packets": h.count(),
    })
}

pub(super) fn latency_text(h: &Histogram) -> String {
    let q = |q| {
        h.quantile(q)
            .map_or("-".into(), |d| format!("{:.2}", ms(d)))
    };
    format!(
        "p50 {} ms, p99 {} ms, max {:.2} ms ({} packets)",
        q(0.5),
        q(0.99),
        ms(h.max()),
        h.count()
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn rate(count: u64, over: Duration) -> f64 {
    match over.is_zero() {
        true => 0.0,
        false => count as f64 / over.as_secs_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spread_is_min_median_max() {
        let s = Spread::of([3.0, 1.0, 2.0, 10.0]).expect("values");
        assert_eq!((s.min, s.median, s.max), (1.0, 3.0, 10.0));
        assert_eq!(Spread::of([]), None);
    }
}
