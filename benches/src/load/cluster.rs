//! A run across nodes (`--nodes N`, N above 1): a redis-server for the cluster store and N
//! node processes on it, each with the same relay secret and placing sessions by load alone
//! (`prefer_home_below_percent = 0`), so a viewer stays on the node it asked. The publisher is
//! on the first node (the *origin*, the room's home); the viewers are dealt out over all the
//! nodes in turn, so the others (the *edges*) get the stream once each through the media relay.
//! Each node's CPU, what its viewers received and their latency are reported apart: what a
//! viewer costs on a node that relays against one where the publisher is local, and what the
//! relay adds to the latency.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::node::{self, NodeProcess};
use super::options::Options;
use super::redis::RedisProcess;
use super::report::{latency_json, latency_text, row};
use super::stats::Histogram;
use super::viewers::WorkerReport;
use super::LoadError;

/// How long the nodes may take to see each other registered.
const MEET: Duration = Duration::from_secs(15);

/// What makes a node a member of the run's cluster: the store, its name, the relay's secret.
#[derive(Debug, Clone)]
pub struct Seat {
    pub redis: String,
    pub name: String,
    pub secret: String,
}

impl Seat {
    /// The node's configuration: the store (a top-level key, so before `limits`' table), the
    /// limits, then its `[cluster]` table.
    pub fn toml(&self, limits: &str) -> String {
        format!(
            "redis = \"{}\"\n{limits}[cluster]\nnode = \"{}\"\nsecret = \"{}\"\n\
             prefer_home_below_percent = 0\n",
            self.redis, self.name, self.secret
        )
    }
}

/// The run's nodes (one, or a cluster on its own redis-server). The nodes stop before the
/// store does: fields drop in order.
#[derive(Debug)]
pub struct Nodes {
    pub all: Vec<NodeProcess>,
    _redis: Option<RedisProcess>,
}

impl Nodes {
    /// The origin: the publishers' node.
    pub fn origin(&self) -> &NodeProcess {
        &self.all[0]
    }

    pub fn https(&self) -> Vec<SocketAddr> {
        self.all.iter().map(|n| n.http).collect()
    }

    /// The node whose viewer `index` is (dealt out in turn).
    pub fn of_viewer(nodes: usize, index: usize) -> usize {
        index % nodes
    }

    /// The spatial layer viewer `index` asks for, unless `--layer`: a third each at 0, 1 and
    /// 2 on every node (dealt out in turn over the nodes first).
    pub fn spatial_of(nodes: usize, index: usize) -> u8 {
        (index / nodes.max(1) % 3) as u8
    }
}

/// Starts `options.nodes` nodes of `binary`: one alone (on `cpu` when pinned), or a cluster on
/// a redis-server of its own, and waits until each node sees every other one.
pub fn start(
    binary: &Path,
    options: &Options,
    sessions: usize,
    cpu: Option<usize>,
) -> Result<Nodes, LoadError> {
    if options.nodes == 1 {
        let node = node::start(binary, options.workers, options.gso, sessions, cpu, None)?;
        return Ok(Nodes {
            all: vec![node],
            _redis: None,
        });
    }
    let redis = RedisProcess::start(&options.redis_server)?;
    let secret = format!("load-{}-{}", std::process::id(), unix_nanos());
    let mut all = Vec::new();
    for index in 0..options.nodes {
        let seat = Seat {
            redis: redis.url(),
            name: format!("load-node-{index}"),
            secret: secret.clone(),
        };
        all.push(node::start(
            binary,
            options.workers,
            options.gso,
            sessions,
            None,
            Some(&seat),
        )?);
    }
    wait_until_they_meet(&all)?;
    Ok(Nodes {
        all,
        _redis: Some(redis),
    })
}

fn unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Waits until every node counts all the others as serving (`strata_cluster_serving_nodes`).
fn wait_until_they_meet(nodes: &[NodeProcess]) -> Result<(), LoadError> {
    let others = (nodes.len() - 1) as u64;
    let deadline = Instant::now() + MEET;
    loop {
        let met = nodes
            .iter()
            .all(|n| node::metric(&[n.http], "strata_cluster_serving_nodes") == Some(others));
        if met {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(LoadError::Redis(format!(
                "the {} nodes did not all see each other within {MEET:?}",
                nodes.len()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Viewer threads for a run over `nodes`: `wanted` rounded up to a multiple of the nodes, so
/// that each thread's viewers are all on one node (viewer `i` is on thread `i % threads` and
/// node `i % nodes`) and each thread's latency histogram is one node's.
pub fn viewer_threads(wanted: usize, viewers: usize, nodes: usize) -> usize {
    let threads = wanted.min(viewers).max(1);
    match nodes {
        0 | 1 => threads,
        n => threads.div_ceil(n) * n,
    }
}

/// One node's part of a run across nodes.
#[derive(Debug, Clone, Default)]
pub struct NodeShare {
    pub index: usize,
    /// Its viewers that connected.
    pub viewers: usize,
    pub cpu: Duration,
    pub wall: Duration,
    /// Datagrams its viewers received over the window.
    pub delivered: u64,
    pub expected: u64,
    pub missing: u64,
    pub latency: Histogram,
}

impl NodeShare {
    /// Each node's share: its CPU (`cpu[node]`) and what the viewers of its threads got.
    pub fn of_run(cpu: &[Duration], wall: Duration, workers: &[WorkerReport]) -> Vec<Self> {
        let nodes = cpu.len();
        let mut shares: Vec<Self> = (0..nodes)
            .map(|index| Self {
                index,
                cpu: cpu[index],
                wall,
                ..Self::default()
            })
            .collect();
        for (thread, worker) in workers.iter().enumerate() {
            let share = &mut shares[thread % nodes];
            share.latency.merge(&worker.latency.all());
            for viewer in &worker.viewers {
                debug_assert_eq!(Nodes::of_viewer(nodes, viewer.index), thread % nodes);
                share.viewers += usize::from(viewer.connect_time.is_some());
                share.delivered += viewer.datagrams;
                share.expected += viewer.seq.expected;
                share.missing += viewer.seq.missing;
            }
        }
        shares
    }

    pub fn role(&self) -> &'static str {
        match self.index {
            0 => "origin",
            _ => "edge",
        }
    }

    /// Percent of a core the node used.
    pub fn cpu_pct(&self) -> f64 {
        match self.wall.is_zero() {
            true => 0.0,
            false => 100.0 * self.cpu.as_secs_f64() / self.wall.as_secs_f64(),
        }
    }

    /// Percent of a core per connected viewer.
    pub fn cpu_pct_per_viewer(&self) -> Option<f64> {
        (self.viewers > 0).then(|| self.cpu_pct() / self.viewers as f64)
    }

    pub fn us_per_packet(&self) -> Option<f64> {
        (self.delivered > 0).then(|| self.cpu.as_secs_f64() * 1e6 / self.delivered as f64)
    }

    /// Loss after retransmission, percent of the video packets its viewers should have had.
    pub fn loss_pct(&self) -> f64 {
        match self.expected {
            0 => 0.0,
            n => 100.0 * self.missing as f64 / n as f64,
        }
    }

    pub fn json(&self) -> Value {
        json!({
            "node": self.index,
            "role": self.role(),
            "viewers": self.viewers,
            "cpu_pct": self.cpu_pct(),
            "cpu_pct_per_viewer": self.cpu_pct_per_viewer(),
            "us_per_packet": self.us_per_packet(),
            "delivered": self.delivered,
            "loss_after_rtx_pct": self.loss_pct(),
            "latency_ms": latency_json(&self.latency),
        })
    }

    pub fn row(&self, out: &mut String) {
        let per_viewer = self
            .cpu_pct_per_viewer()
            .map_or("-".into(), |v| format!("{v:.3}"));
        let per_packet = self
            .us_per_packet()
            .map_or("-".into(), |v| format!("{v:.2}"));
        row(
            out,
            &format!("node {} ({})", self.index, self.role()),
            format!(
                "{} viewers, CPU {:.1} % ({per_viewer} % per viewer, {per_packet} us per \
                 packet), loss after RTX {:.3} %, latency {}",
                self.viewers,
                self.cpu_pct(),
                self.loss_pct(),
                latency_text(&self.latency)
            ),
        );
    }
}

/// What relaying costs, from the nodes' shares: an edge's CPU per viewer over the origin's
/// (the mean of the edges'), and what the relay adds to the p99 latency (the worst edge's p99
/// less the origin's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RelayCost {
    pub cpu_per_viewer_ratio: Option<f64>,
    pub added_p99_ms: Option<f64>,
}

impl RelayCost {
    pub fn of(shares: &[NodeShare]) -> Option<Self> {
        let (origin, edges) = shares.split_first()?;
        if edges.is_empty() {
            return None;
        }
        let ratios: Vec<f64> = edges
            .iter()
            .filter_map(NodeShare::cpu_pct_per_viewer)
            .collect();
        let origin_per_viewer = origin.cpu_pct_per_viewer().filter(|v| *v > 0.0);
        let cpu_per_viewer_ratio = origin_per_viewer
            .filter(|_| !ratios.is_empty())
            .map(|o| ratios.iter().sum::<f64>() / ratios.len() as f64 / o);
        let p99 = |s: &NodeShare| s.latency.quantile(0.99).map(|d| d.as_secs_f64() * 1e3);
        let worst_edge = edges.iter().filter_map(p99).reduce(f64::max);
        let added_p99_ms = worst_edge.zip(p99(origin)).map(|(e, o)| e - o);
        Some(Self {
            cpu_per_viewer_ratio,
            added_p99_ms,
        })
    }

    pub fn json(&self) -> Value {
        json!({
            "edge_to_origin_cpu_per_viewer": self.cpu_per_viewer_ratio,
            "relay_added_p99_ms": self.added_p99_ms,
        })
    }

    pub fn row(&self, out: &mut String) {
        let ratio = self
            .cpu_per_viewer_ratio
            .map_or("-".into(), |r| format!("{r:.2}"));
        let added = self
            .added_p99_ms
            .map_or("-".into(), |a| format!("{a:+.2} ms"));
        row(
            out,
            "relay",
            format!("edge / origin CPU per viewer {ratio}, p99 latency added {added}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::stats::{Latencies, SeqCounts};
    use crate::load::viewers::ViewerReport;

    fn viewer(index: usize, datagrams: u64, missing: u64) -> ViewerReport {
        ViewerReport {
            index,
            spatial: 0,
            port: 0,
            connect_time: Some(Duration::from_millis(100)),
            kbps: 0.0,
            datagrams,
            seq: SeqCounts {
                expected: 1000,
                missing,
                repaired: 0,
            },
            frames_complete: 0,
            frames_incomplete: 0,
            video_packets: datagrams,
            audio_packets: 0,
            untagged: 0,
            nacks: 0,
            dropped: 0,
            error: None,
        }
    }

    fn worker(viewers: Vec<ViewerReport>, latency_ms: u64) -> WorkerReport {
        let mut latency = Latencies::default();
        for _ in 0..100 {
            latency.video[0].record(Duration::from_millis(latency_ms));
        }
        WorkerReport { viewers, latency }
    }

    #[test]
    fn a_cluster_node_is_configured_with_the_store_its_name_and_the_secret() {
        let seat = Seat {
            redis: "unix:///tmp/r.sock".into(),
            name: "load-node-1".into(),
            secret: "s".into(),
        };
        let config =
            sfu::node::config::NodeConfig::from_toml(&seat.toml("[limits]\nsessions = 9\n"))
                .expect("TOML");
        assert_eq!(config.limits.sessions, 9);
        let text = seat.toml("");
        assert!(text.starts_with("redis = \"unix:///tmp/r.sock\"\n"));
        assert!(text.contains("node = \"load-node-1\"") && text.contains("secret = \"s\""));
        assert!(text.contains("prefer_home_below_percent = 0"));
    }

    #[test]
    fn each_thread_holds_the_viewers_of_one_node() {
        assert_eq!(viewer_threads(2, 240, 1), 2);
        assert_eq!(viewer_threads(2, 240, 3), 3);
        assert_eq!(viewer_threads(4, 240, 3), 6);
        assert_eq!(viewer_threads(4, 2, 1), 2);
        for threads in [3, 6] {
            for index in 0..240 {
                assert_eq!(index % threads % 3, Nodes::of_viewer(3, index));
            }
        }
        let on_node = |node: usize| {
            let mut layers = [0; 3];
            (0..240)
                .filter(|&i| Nodes::of_viewer(3, i) == node)
                .for_each(|i| layers[usize::from(Nodes::spatial_of(3, i))] += 1);
            layers
        };
        assert_eq!([on_node(0), on_node(1), on_node(2)], [[27, 27, 26]; 3]);
        let alone: Vec<u8> = (0..6).map(|i| Nodes::spatial_of(1, i)).collect();
        assert_eq!(alone, [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn shares_set_an_edge_against_the_origin() {
        let second = Duration::from_secs(1);
        let workers = [
            worker(vec![viewer(0, 5000, 0), viewer(2, 5000, 0)], 2),
            worker(vec![viewer(1, 5000, 1), viewer(3, 5000, 1)], 4),
        ];
        let cpu = [Duration::from_millis(100), Duration::from_millis(110)];
        let shares = NodeShare::of_run(&cpu, second, &workers);
        assert_eq!((shares[0].viewers, shares[1].viewers), (2, 2));
        assert_eq!(shares[0].us_per_packet(), Some(10.0));
        assert_eq!(shares[1].cpu_pct_per_viewer(), Some(5.5));
        assert_eq!(shares[1].loss_pct(), 0.1);
        assert_eq!((shares[0].role(), shares[1].role()), ("origin", "edge"));
        let cost = RelayCost::of(&shares).expect("an edge");
        assert!((cost.cpu_per_viewer_ratio.expect("both") - 1.1).abs() < 1e-9);
        let added = cost.added_p99_ms.expect("both");
        assert!((1.5..=2.5).contains(&added), "{added}");
        assert_eq!(RelayCost::of(&shares[..1]), None);
        let mut table = String::new();
        shares[1].row(&mut table);
        assert!(table.contains("node 1 (edge)") && table.contains("5.500 % per viewer"));
    }
}
