//! The load test: the node as its own process, one publisher and N viewers in this one, all
//! WebRTC peers of the independent client crate (`crate::client`), so every session does real
//! ICE, DTLS, SRTP and RTCP (receiver reports, NACK, transport-wide CC feedback) over loopback:
//! UDP, or for the viewers with `--viewer-transport tcp` one ICE-TCP connection each.
//!
//! The run: build and start the node; connect the publisher, which streams a generated AV1
//! L3T3 stream with its Dependency Descriptor and Opus (`source`); connect the viewers, a
//! third each asking for spatial layer 0, 1 and 2; let their bandwidth estimates ramp up
//! (`--warmup`); measure for `--seconds`; stop the media and let the last retransmissions
//! land; report. Every packet's payload ends in a tag with its send time on the process's one
//! clock (`tag`), so a viewer measures the latency the node adds (and the tool's own lag,
//! which its CPU figure shows). The node's CPU and memory come from `/proc`. Before the node
//! starts, the kernel's floor (`floor`): what a datagram costs to send when that is all a
//! process does, against which the node's CPU per delivered packet is set. With `--pin` the
//! node and the tool run on cores of their own (`pin`). With `--nodes N` the node is a cluster
//! of N on a redis-server of the run's, the viewers spread over them (`cluster`).

pub mod cluster;
pub mod cost;
pub mod data;
pub mod floor;
pub mod floor_sweep;
pub mod node;
pub mod options;
pub mod pin;
pub mod procfs;
pub mod publisher;
pub mod redis;
pub mod report;
pub mod source;
pub mod stats;
pub mod tag;
pub mod viewers;
pub mod wait;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::client::{Client, ClientError, Transport, VideoCodec};

use cluster::Nodes;
use cost::Placement;
use floor::{Floor, FloorError, Pace, Until};
use node::NodeProcess;
pub use options::{Options, OptionsError};
use pin::{PinError, Pinning};
use procfs::Process;
pub use report::Report;
use report::{Joining, Measured, SocketDrops, Warmup};
use viewers::{ViewerJob, WorkerReport};

/// Room `index` of a run.
fn room(index: usize) -> String {
    format!("load-{index}")
}
/// How long the publisher may take to connect.
const PUBLISHER_READY: Duration = Duration::from_secs(30);
/// The stream runs this long before the first viewer joins, so the room has its track.
const STREAM_SETTLE: Duration = Duration::from_millis(500);
/// After the media stops: NACKs for the last packets and their retransmissions land.
const DRAIN: Duration = Duration::from_millis(1500);
/// A refused join (the node's limits on sessions still connecting) is tried again after this.
const RETRY: Duration = Duration::from_millis(50);
/// Temporal layer every viewer asks for: all of them.
const TEMPORAL: u8 = 2;
/// How often the warm-up asks the node where its viewers are.
const WARMUP_POLL: Duration = Duration::from_millis(500);
/// Once every viewer is at its layer, the last up-switch's keyframe is let through first.
const WARMUP_SETTLE: Duration = Duration::from_secs(1);

/// Why a run could not be done.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Options(#[from] OptionsError),
    #[error(transparent)]
    Pin(#[from] PinError),
    #[error(transparent)]
    Floor(#[from] FloorError),
    #[error("building the node: {0}")]
    Build(String),
    #[error("cannot start the node {0}: {1}")]
    NodeSpawn(String, std::io::Error),
    #[error("the node does not take --workers (not implemented in this build):\n{0}")]
    NoWorkersFlag(String),
    #[error("the node exited ({status}):\n{log}")]
    NodeExited { status: String, log: String },
    #[error("the node did not answer HTTP in time:\n{0}")]
    NodeNotListening(String),
    #[error("the publisher: {0}")]
    Publisher(String),
    #[error("the publisher did not connect in time")]
    PublisherNotConnected,
    #[error("a client: {0}")]
    Client(#[from] ClientError),
    #[error("{0}")]
    Io(std::io::Error),
    #[error("the {0} thread panicked")]
    Panicked(&'static str),
    #[error("the cluster store: {0}")]
    Redis(String),
}

/// Where a run is; every thread reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Phase {
    /// The publisher streams, viewers connect and warm up; nothing is counted yet.
    Joining,
    /// Everything is counted.
    Measuring,
    /// The publisher sends no new media but answers NACKs; arrivals still count.
    Draining,
    Stopped,
}

/// The run's phase, shared by its threads.
#[derive(Debug, Default)]
pub struct Control(AtomicU8);

impl Control {
    pub fn phase(&self) -> Phase {
        match self.0.load(Ordering::Acquire) {
            0 => Phase::Joining,
            1 => Phase::Measuring,
            2 => Phase::Draining,
            _ => Phase::Stopped,
        }
    }

    pub fn set(&self, phase: Phase) {
        self.0.store(phase as u8, Ordering::Release);
    }
}

/// Stops every thread of the run however it ends, an error included.
struct StopOnDrop(Arc<Control>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.set(Phase::Stopped);
    }
}

/// Runs the load test the options describe.
pub fn run(options: &Options) -> Result<Report, LoadError> {
    options.validate()?;
    let pinning = pin_tool(options)?;
    let floor = measure_floor(options, pinning, None)?;
    let mut nodes = start_nodes(options, pinning)?;
    let https = nodes.https();
    let placement = Placement {
        pinned: pinning.is_some(),
        node_cpus: pin::allowed_list(nodes.origin().pid()).map_err(LoadError::Io)?,
        tool_cpus: pin::allowed_list(std::process::id()).map_err(LoadError::Io)?,
    };
    let control = Arc::new(Control::default());
    let _stop = StopOnDrop(Arc::clone(&control));
    let epoch = Instant::now();
    let publishers = (0..options.rooms)
        .map(|index| start_publisher(nodes.origin(), options, &room(index), epoch, &control))
        .collect::<Result<Vec<_>, _>>()?;
    std::thread::sleep(STREAM_SETTLE);
    let rss_before = rss_kib(&nodes.all)?;
    let connected = Arc::new(AtomicUsize::new(0));
    let (senders, workers) = start_viewer_threads(options, epoch, &control, &connected)?;
    let joining = join_viewers(&https, options, &senders, &connected);
    drop(senders);
    progress(&joining.summary(options.viewers));
    let warmup = warm_up(&https, options, &joining);
    progress(&warmup.summary());
    let mut measured = measure(&mut nodes.all, options, &control, rss_before)?;
    measured.warmup = warmup;
    measured.floor = floor;
    measured.placement = placement;
    measured.viewer_gauges = node::viewer_gauges(&https);
    std::thread::sleep(DRAIN);
    control.set(Phase::Stopped);
    let mut reports = Vec::new();
    for worker in workers {
        reports.push(join(worker, "viewers")??);
    }
    let mut ports = Vec::new();
    let mut publisher: Option<publisher::PublisherReport> = None;
    for handle in publishers {
        let report = join(handle, "publisher")??;
        ports.push(report.port);
        match &mut publisher {
            Some(all) => all.merge(&report),
            None => publisher = Some(report),
        }
    }
    let publisher = publisher.ok_or(LoadError::PublisherNotConnected)?;
    let node_ports: Vec<u16> = nodes.all.iter().map(|n| n.udp.port()).collect();
    measured.socket_drops = socket_drops(&node_ports, &reports, &ports);
    measured.node_drops = node::drops(&https);
    measured.keyframe_requests_sent = node::metric(&https, "strata_keyframe_requests_sent_total");
    measured.probe_clusters = node::metric(&https, "strata_probe_clusters_total");
    // Every viewer and publisher stopped, and the nodes with them: the floor at the node's
    // pace has the machine to itself (a node still sending to its gone viewers' ports would
    // reach the floor's sockets that took them).
    drop(nodes);
    let pace = measured
        .wire
        .filter(|_| options.viewer_transport == Transport::Udp);
    let pace = pace.zip(measured.node_sleeps).and_then(|(w, sleeps)| {
        Pace::of(
            w.datagrams.max(w.packets_out),
            w.send_calls,
            sleeps,
            measured.wall,
        )
    });
    if let Some(pace) = pace {
        measured.paced_floor = measure_floor(options, pinning, Some(pace))?;
    }
    Ok(Report::new(
        options, &joining, &measured, &reports, &publisher,
    ))
}

/// With `--pin`, the cores the run uses, this thread already on the tool's: before it starts
/// any other, since they inherit its mask.
fn pin_tool(options: &Options) -> Result<Option<Pinning>, LoadError> {
    let pinning = match options.pin {
        true => Some(Pinning::for_this_machine()?),
        false => None,
    };
    if let Some(pinning) = pinning {
        pin::pin_this_thread(pinning.tool)?;
    }
    Ok(pinning)
}

/// Runs the data mode (`--participants N`): the node alone, N participants exchanging data
/// channel messages.
pub fn run_data(options: &Options) -> Result<data::DataReport, LoadError> {
    options.validate()?;
    let nodes = start_nodes(options, None)?;
    data::run(nodes.origin(), options)
}

/// The kernel's floor for as many destinations as viewers, as fast as it goes or at `pace`,
/// unless `--floor-seconds 0`; its sender on the node's core when pinned, as the node's sends
/// are.
fn measure_floor(
    options: &Options,
    pinning: Option<Pinning>,
    pace: Option<Pace>,
) -> Result<Option<Floor>, LoadError> {
    if options.floor_seconds == 0.0 {
        return Ok(None);
    }
    let at = match pace {
        Some(p) => format!(
            " at a pace of {} a call every {} us, a wake-up every {} us (--floor-pace {p})",
            p.per_call,
            p.call_interval.as_micros(),
            p.wake_interval.as_micros()
        ),
        None => String::new(),
    };
    progress(&format!(
        "measuring the kernel's floor{at} for {} s ({} loopback destinations)",
        options.floor_seconds, options.viewers
    ));
    let until = Until::Elapsed(Duration::from_secs_f64(options.floor_seconds));
    let floor = floor::measure(options.viewers, until, pinning.map(|p| p.node), pace)?;
    progress(&format!(
        "kernel floor{at}: {:.2} us per datagram ({} sent, {} read)",
        floor.us_per_datagram().unwrap_or(0.0),
        floor.sent,
        floor.received
    ));
    Ok(Some(floor))
}

/// The nodes (`--nodes`, one by default), built unless `--node` names their binary, up and
/// answering (and, a cluster, seeing each other).
fn start_nodes(options: &Options, pinning: Option<Pinning>) -> Result<Nodes, LoadError> {
    let binary = match &options.node {
        Some(path) => path.clone(),
        None => {
            progress("building the node (cargo build --release -p sfu)");
            node::build()?
        }
    };
    let cpu = pinning.map(|p| p.node);
    let sessions = options.viewers.max(options.participants);
    let nodes = cluster::start(&binary, options, sessions, cpu)?;
    for node in &nodes.all {
        let (pid, http, udp) = (node.pid(), node.http, node.udp);
        progress(&format!("node {pid} up on {http} (UDP {udp})"));
    }
    Ok(nodes)
}

fn start_publisher(
    node: &NodeProcess,
    options: &Options,
    room: &str,
    epoch: Instant,
    control: &Arc<Control>,
) -> Result<JoinHandle<Result<publisher::PublisherReport, LoadError>>, LoadError> {
    let (ready_tx, ready_rx) = mpsc::channel();
    let handle = publisher::spawn(
        node.http,
        room.into(),
        options.seed,
        epoch,
        Arc::clone(control),
        ready_tx,
    )
    .map_err(LoadError::Io)?;
    match ready_rx.recv_timeout(PUBLISHER_READY) {
        Ok(Ok(())) => {
            progress("publisher connected, streaming AV1 L3T3 + Opus");
            Ok(handle)
        }
        Ok(Err(e)) => Err(LoadError::Publisher(e)),
        Err(_) => Err(LoadError::PublisherNotConnected),
    }
}

type Workers = Vec<JoinHandle<Result<WorkerReport, LoadError>>>;

fn start_viewer_threads(
    options: &Options,
    epoch: Instant,
    control: &Arc<Control>,
    connected: &Arc<AtomicUsize>,
) -> Result<(Vec<Sender<ViewerJob>>, Workers), LoadError> {
    let threads = cluster::viewer_threads(options.client_threads, options.viewers, options.nodes);
    let mut senders = Vec::new();
    let mut handles = Vec::new();
    for i in 0..threads {
        let (tx, rx) = mpsc::channel();
        let control = Arc::clone(control);
        let connected = Arc::clone(connected);
        let handle = viewers::spawn(format!("viewers-{i}"), rx, control, epoch, connected)
            .map_err(LoadError::Io)?;
        senders.push(tx);
        handles.push(handle);
    }
    Ok((senders, handles))
}

/// Signals every viewer (one after another, as a crowd of browsers joining would) and hands
/// each to a thread that drives its connection; waits until all have connected.
fn join_viewers(
    nodes: &[SocketAddr],
    options: &Options,
    senders: &[Sender<ViewerJob>],
    connected: &AtomicUsize,
) -> Joining {
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(options.connect_timeout);
    let mut joining = Joining::default();
    for index in 0..options.viewers {
        let spatial = options
            .layer
            .unwrap_or(Nodes::spatial_of(nodes.len(), index));
        let http = nodes[Nodes::of_viewer(nodes.len(), index)];
        match signal(http, options, index, spatial, deadline) {
            Ok(job) => {
                joining.accepted += 1;
                joining.spatial.push(spatial);
                // A thread ends only after the run: its receiver is there.
                let _ = senders[index % senders.len()].send(job);
            }
            Err(e) => joining.refused.push(format!("viewer {index}: {e}")),
        }
    }
    joining.signaled = start.elapsed();
    while connected.load(Ordering::Relaxed) < joining.accepted && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    joining.connected = connected.load(Ordering::Relaxed);
    joining.all_connected = start.elapsed();
    joining
}

/// One viewer's WHEP request, tried again while the node says it is busy (503, 429).
fn signal(
    http: SocketAddr,
    options: &Options,
    index: usize,
    spatial: u8,
    deadline: Instant,
) -> Result<ViewerJob, ClientError> {
    let query = format!("?spatial={spatial}&temporal={TEMPORAL}");
    loop {
        let joined = Instant::now();
        let room = room(index % options.rooms);
        let transport = options.viewer_transport;
        match Client::watch_over(http, &room, &query, VideoCodec::Av1, transport) {
            Ok(mut client) => {
                client.set_recording(false);
                client.use_kernel_timestamps()?;
                // Each viewer its own draw, all from the run's seed.
                let seed = options.seed ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                client.set_inbound_loss(options.loss, seed);
                return Ok(ViewerJob {
                    index,
                    spatial,
                    client,
                    joined,
                });
            }
            Err(ClientError::Refused { status, .. })
                if matches!(status, 429 | 503) && Instant::now() < deadline =>
            {
                std::thread::sleep(RETRY);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Waits until the node sends each viewer the spatial layer it asked for (and a moment more),
/// or `--warmup` seconds.
fn warm_up(nodes: &[SocketAddr], options: &Options, joining: &Joining) -> Warmup {
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(options.warmup);
    let wanted = wanted_layers(&joining.spatial);
    loop {
        let sent = node::viewer_gauges(nodes).spatial_sent;
        if sent == wanted {
            std::thread::sleep(WARMUP_SETTLE);
            return Warmup {
                took: start.elapsed(),
                at_layer: true,
                sent,
            };
        }
        if Instant::now() >= deadline {
            return Warmup {
                took: start.elapsed(),
                at_layer: false,
                sent,
            };
        }
        std::thread::sleep(WARMUP_POLL);
    }
}

/// Viewers by the spatial layer they asked for.
fn wanted_layers(spatial: &[u8]) -> [usize; 3] {
    let mut wanted = [0; 3];
    for &s in spatial {
        wanted[usize::from(s).min(2)] += 1;
    }
    wanted
}

/// Counts the nodes' and this process's CPU over the measured seconds, and the nodes' sends
/// (their `/metrics` read outside the CPU counts: rendering it is no part of the load); starts
/// the drain.
fn measure(
    nodes: &mut [NodeProcess],
    options: &Options,
    control: &Control,
    rss_before: u64,
) -> Result<Measured, LoadError> {
    let https: Vec<SocketAddr> = nodes.iter().map(|n| n.http).collect();
    let wire_before = node::wire(&https);
    let sleeps_before = sleeps(nodes);
    let node_cpu = cpu_times(nodes)?;
    let tool_cpu = Process::This.cpu_time().map_err(LoadError::Io)?;
    let (busy, cores) = procfs::machine_busy().map_err(LoadError::Io)?;
    let start = Instant::now();
    control.set(Phase::Measuring);
    progress(&format!("measuring for {} s", options.seconds));
    let end = start + Duration::from_secs_f64(options.seconds);
    while Instant::now() < end {
        for node in nodes.iter_mut() {
            if let Some(status) = node.exited() {
                let log = node.log_tail();
                return Err(LoadError::NodeExited { status, log });
            }
        }
        std::thread::sleep(
            end.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(200)),
        );
    }
    let wall = start.elapsed();
    let node_sleeps = sleeps_before
        .zip(sleeps(nodes))
        .map(|(before, after)| after.saturating_sub(before));
    let per_node_cpu: Vec<Duration> = cpu_times(nodes)?
        .iter()
        .zip(&node_cpu)
        .map(|(after, before)| after.saturating_sub(*before))
        .collect();
    let node_cpu: Duration = per_node_cpu.iter().sum();
    let tool_cpu = (Process::This.cpu_time().map_err(LoadError::Io)?).saturating_sub(tool_cpu);
    let busy = (procfs::machine_busy().map_err(LoadError::Io)?.0).saturating_sub(busy);
    // The viewers' counts end with the CPU's: what they receive is set against it.
    control.set(Phase::Draining);
    let wire = wire_before
        .zip(node::wire(&https))
        .map(|(before, after)| before.since(after));
    Ok(Measured {
        wall,
        node_cpu,
        per_node_cpu,
        tool_cpu,
        others_cpu: busy.saturating_sub(node_cpu + tool_cpu),
        cores,
        rss_before_kib: rss_before,
        rss_after_kib: rss_kib(nodes)?,
        wire,
        node_sleeps,
        ..Measured::default()
    })
}

/// The nodes' sleeps so far, all told: none when one cannot be read.
fn sleeps(nodes: &[NodeProcess]) -> Option<u64> {
    nodes
        .iter()
        .map(|n| Process::Pid(n.pid()).sleeps().ok())
        .sum()
}

/// Each node's CPU time so far.
fn cpu_times(nodes: &[NodeProcess]) -> Result<Vec<Duration>, LoadError> {
    nodes
        .iter()
        .map(|n| Process::Pid(n.pid()).cpu_time().map_err(LoadError::Io))
        .collect()
}

/// The nodes' resident memory, all told.
fn rss_kib(nodes: &[NodeProcess]) -> Result<u64, LoadError> {
    nodes
        .iter()
        .map(|n| Process::Pid(n.pid()).rss_kib().map_err(LoadError::Io))
        .sum()
}

/// What the run's sockets dropped for a full receive buffer: the node's, the viewers', the
/// publisher's (none when `/proc/net/udp` cannot be read).
fn socket_drops(
    node_ports: &[u16],
    workers: &[WorkerReport],
    publishers: &[u16],
) -> Option<SocketDrops> {
    let table = procfs::udp_drops().ok()?;
    let of = |port: u16| {
        table
            .iter()
            .filter(|(p, _)| *p == port)
            .map(|(_, n)| n)
            .sum::<u64>()
    };
    let viewers = workers.iter().flat_map(|w| &w.viewers);
    Some(SocketDrops {
        node: node_ports.iter().map(|&p| of(p)).sum(),
        viewers: viewers.map(|v| of(v.port)).sum(),
        publisher: publishers.iter().map(|&p| of(p)).sum(),
    })
}

fn join<T>(handle: JoinHandle<T>, name: &'static str) -> Result<T, LoadError> {
    handle.join().map_err(|_| LoadError::Panicked(name))
}

fn progress(line: &str) {
    eprintln!("load: {line}");
}
