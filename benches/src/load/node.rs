//! The node under load, as its own process: built with cargo beside this tool, started on its
//! defaults but for free loopback ports and the session limits a load of one client address
//! needs, and stopped when this handle goes.

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::client::http;

use super::cluster::Seat;
use super::cost::Wire;
use super::pin::spawning_on;
use super::LoadError;

/// How long the node may take to answer HTTP after it starts.
const STARTUP: Duration = Duration::from_secs(20);
/// Log lines shown when the node fails.
const LOG_TAIL_LINES: usize = 15;
/// Sessions beyond the viewers: the publisher, and a margin for ones still being reaped.
const SPARE_SESSIONS: usize = 16;

/// A running node; killed (and waited for) on drop.
#[derive(Debug)]
pub struct NodeProcess {
    child: Child,
    pub http: SocketAddr,
    pub udp: SocketAddr,
    dir: PathBuf,
}

impl NodeProcess {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last lines of what the node logged.
    pub fn log_tail(&self) -> String {
        log_tail(&self.dir.join("node.log"))
    }

    /// Whether it is still running, and when it is not, how it ended.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(None) => None,
            Ok(Some(status)) => Some(status.to_string()),
            Err(e) => Some(e.to_string()),
        }
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Builds the node's binary in release into the target directory this tool was built in, and
/// returns its path: a binary found on disk could be stale.
pub fn build() -> Result<PathBuf, LoadError> {
    let exe = std::env::current_exe().map_err(LoadError::Io)?;
    // This tool is `<target>/<profile>/load`.
    let target = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| LoadError::Build(format!("no target directory above {}", exe.display())))?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let status = Command::new(cargo)
        .args([
            "build",
            "--release",
            "-p",
            "sfu",
            "--bin",
            "sfu",
            "--target-dir",
        ])
        .arg(target)
        .current_dir(workspace)
        .stdout(Stdio::null())
        .status()
        .map_err(|e| LoadError::Build(format!("cannot run cargo: {e}")))?;
    if !status.success() {
        return Err(LoadError::Build(format!(
            "cargo build of the node: {status}"
        )));
    }
    Ok(target.join("release").join("sfu"))
}

/// Starts `binary serve` on free loopback ports, with `--workers` only when asked for,
/// without UDP segmentation when `gso` is false, on `cpu` alone when given, a member of a
/// cluster when `seat` says which, and waits until its HTTP answers.
pub fn start(
    binary: &Path,
    workers: Option<usize>,
    gso: bool,
    viewers: usize,
    cpu: Option<usize>,
    seat: Option<&Seat>,
) -> Result<NodeProcess, LoadError> {
    let http = SocketAddr::new(Ipv4Addr::LOCALHOST.into(), free_tcp_port()?);
    let udp = SocketAddr::new(Ipv4Addr::LOCALHOST.into(), free_udp_port()?);
    let dir = std::env::temp_dir().join(format!(
        "strata-load-{}-{}",
        std::process::id(),
        http.port()
    ));
    std::fs::create_dir_all(&dir).map_err(LoadError::Io)?;
    let config = dir.join("node.toml");
    let toml = match seat {
        Some(seat) => seat.toml(&settings_toml(gso, viewers)),
        None => settings_toml(gso, viewers),
    };
    std::fs::write(&config, toml).map_err(LoadError::Io)?;
    let log = File::create(dir.join("node.log")).map_err(LoadError::Io)?;
    let mut command = Command::new(binary);
    command.arg("serve").arg("--config").arg(&config).args([
        "--http",
        &http.to_string(),
        "--udp",
        &udp.to_string(),
    ]);
    if let Some(n) = workers {
        command.args(["--workers", &n.to_string()]);
    }
    command
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(LoadError::Io)?)
        .stderr(log);
    let spawned = match cpu {
        Some(cpu) => spawning_on(cpu, || command.spawn())?,
        None => command.spawn(),
    };
    let child = spawned.map_err(|e| LoadError::NodeSpawn(binary.display().to_string(), e))?;
    let mut node = NodeProcess {
        child,
        http,
        udp,
        dir,
    };
    wait_until_listening(&mut node, workers)?;
    Ok(node)
}

/// The node's settings: segmentation left to the node's default unless turned off (a node
/// built before the setting takes the file without it), and the limits.
fn settings_toml(gso: bool, viewers: usize) -> String {
    let gso = if gso { "" } else { "udp_gso = false\n" };
    format!("{gso}{}", limits_toml(viewers))
}

/// The limits a run needs raised: every viewer comes from one address (127.0.0.1), which the
/// node holds to 100 sessions, 20 handshakes, 20 new sessions a second, 200 HTTP connections
/// and 20 ICE-TCP connections by default; a room holds 1000 and the node 2000; a room's
/// conference participants (the data mode's) 50, or as many as the run has.
fn limits_toml(viewers: usize) -> String {
    let sessions = viewers + SPARE_SESSIONS;
    format!(
        "[limits]\nsessions_per_client = {sessions}\ntcp_connections_per_client = {sessions}\n\
         handshakes_per_client = {sessions}\nhttp_connections_per_client = {sessions}\n\
         joins_per_client_per_second = 0\n\
         sessions_per_room = {}\nsessions = {}\nparticipants_per_room = {}\n",
        sessions.max(1000),
        sessions.max(2000),
        viewers.max(50)
    )
}

fn wait_until_listening(node: &mut NodeProcess, workers: Option<usize>) -> Result<(), LoadError> {
    let deadline = Instant::now() + STARTUP;
    loop {
        if let Some(status) = node.exited() {
            let log = node.log_tail();
            if workers.is_some() && log.contains("--workers") {
                return Err(LoadError::NoWorkersFlag(log));
            }
            return Err(LoadError::NodeExited { status, log });
        }
        let answered = http::request(node.http, "GET", "/metrics", &[], "");
        if answered.is_ok_and(|r| r.status == 200) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(LoadError::NodeNotListening(node.log_tail()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn free_tcp_port() -> Result<u16, LoadError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(LoadError::Io)?;
    Ok(listener.local_addr().map_err(LoadError::Io)?.port())
}

fn free_udp_port() -> Result<u16, LoadError> {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).map_err(LoadError::Io)?;
    Ok(socket.local_addr().map_err(LoadError::Io)?.port())
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(LOG_TAIL_LINES);
    lines[start..].join("\n")
}

/// Every nonzero `strata_dropped_total{reason=...}` of the nodes' `/metrics`, by reason, summed
/// over the nodes.
pub fn drops(nodes: &[SocketAddr]) -> Vec<(String, u64)> {
    let mut all: Vec<(String, u64)> = Vec::new();
    for (reason, n) in nodes.iter().flat_map(|&node| drops_of(node)) {
        match all.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, sum)) => *sum += n,
            None => all.push((reason, n)),
        }
    }
    all
}

/// Every nonzero `strata_dropped_total{reason=...}` of one node's `/metrics`, by reason.
pub fn drops_of(node: SocketAddr) -> Vec<(String, u64)> {
    let Ok(reply) = http::request(node, "GET", "/metrics", &[], "") else {
        return Vec::new();
    };
    reply
        .body
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("strata_dropped_total{reason=\"")?;
            let (reason, value) = rest.split_once("\"} ")?;
            let value: u64 = value.trim().parse().ok()?;
            (value > 0).then(|| (reason.to_owned(), value))
        })
        .collect()
}

/// What the node says of its viewers, from its per-viewer `/metrics` series.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ViewerGauges {
    /// Each viewer's bandwidth estimate (bit/s), for those that have one.
    pub estimates: Vec<f64>,
    /// Viewers by the spatial layer their video is sent at now (0, 1, 2).
    pub spatial_sent: [usize; 3],
}

/// The nodes' view of their viewers now, all together.
pub fn viewer_gauges(nodes: &[SocketAddr]) -> ViewerGauges {
    let mut all = ViewerGauges::default();
    for &node in nodes {
        let Ok(reply) = http::request(node, "GET", "/metrics", &[], "") else {
            continue;
        };
        let one = parse_viewer_gauges(&reply.body);
        all.estimates.extend(one.estimates);
        for (sum, n) in all.spatial_sent.iter_mut().zip(one.spatial_sent) {
            *sum += n;
        }
    }
    all
}

fn parse_viewer_gauges(metrics: &str) -> ViewerGauges {
    let mut gauges = ViewerGauges::default();
    for line in metrics.lines() {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        if series.starts_with("strata_viewer_estimate_bps{") {
            gauges.estimates.push(value);
        } else if series.starts_with("strata_viewer_layer{")
            && series.ends_with("axis=\"spatial\"}")
        {
            if let Some(n) = gauges.spatial_sent.get_mut(value as usize) {
                *n += 1;
            }
        }
    }
    gauges
}

/// The nodes' send counters now, summed, when every node's `/metrics` has them.
pub fn wire(nodes: &[SocketAddr]) -> Option<Wire> {
    nodes.iter().try_fold(Wire::default(), |sum, &node| {
        let reply = http::request(node, "GET", "/metrics", &[], "").ok()?;
        Some(sum.plus(Wire::parse(&reply.body)?))
    })
}

/// One series of the nodes' `/metrics` (no labels), summed over those that have it.
pub fn metric(nodes: &[SocketAddr], series: &str) -> Option<u64> {
    nodes
        .iter()
        .filter_map(|&node| crate::client::metric(node, series).ok().flatten())
        .reduce(|a, b| a + b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_view_of_its_viewers_is_read_from_metrics() {
        let metrics = "# TYPE strata_viewer_estimate_bps gauge\n\
            strata_viewer_estimate_bps{session=\"a\",room=\"load\"} 2500000\n\
            strata_viewer_estimate_bps{session=\"b\",room=\"load\"} 900000\n\
            strata_viewer_layer{session=\"a\",room=\"load\",axis=\"spatial\"} 2\n\
            strata_viewer_layer{session=\"a\",room=\"load\",axis=\"temporal\"} 2\n\
            strata_viewer_layer{session=\"b\",room=\"load\",axis=\"spatial\"} 1\n\
            strata_viewer_allocated_layer{session=\"b\",room=\"load\",axis=\"spatial\"} 0\n";
        let gauges = parse_viewer_gauges(metrics);
        assert_eq!(gauges.estimates, vec![2_500_000.0, 900_000.0]);
        assert_eq!(gauges.spatial_sent, [0, 1, 1]);
    }

    #[test]
    fn the_limits_cover_the_viewers_from_one_address() {
        let config = sfu::node::config::NodeConfig::from_toml(&limits_toml(3000)).expect("TOML");
        assert_eq!(config.limits.sessions_per_client, 3016);
        assert_eq!(config.limits.tcp_connections_per_client, 3016);
        assert_eq!(config.limits.handshakes_per_client, 3016);
        assert_eq!(config.limits.http_connections_per_client, 3016);
        assert_eq!(config.limits.joins_per_client_per_second, 0);
        assert_eq!(config.limits.sessions_per_room, 3016);
        assert_eq!(config.limits.sessions, 3016);
        let config = sfu::node::config::NodeConfig::from_toml(&limits_toml(50)).expect("TOML");
        assert_eq!(config.limits.sessions_per_room, 1000);
        assert_eq!(config.limits.sessions, 2000);
        assert_eq!(config.limits.participants_per_room, 50);
        let config = sfu::node::config::NodeConfig::from_toml(&limits_toml(80)).expect("TOML");
        assert_eq!(config.limits.participants_per_room, 80);
        let toml = settings_toml(false, 80);
        let config = sfu::node::config::NodeConfig::from_toml(&toml).expect("TOML");
        assert!(!config.udp_gso);
        assert_eq!(config.limits.participants_per_room, 80);
        assert_eq!(settings_toml(true, 80), limits_toml(80), "left to the node");
    }
}
