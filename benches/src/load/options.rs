//! The load test's command line.

use std::path::PathBuf;

use clap::Parser;

use super::floor::Pace;
use crate::client::Transport;

/// Loads a node with one AV1 L3T3 publisher (a generated stream with its Dependency
/// Descriptor, plus Opus) and N viewers at a mix of layers, each a WebRTC peer of the
/// independent client crate (ICE, DTLS, SRTP, RTCP), and reports what the viewers got and what
/// it cost the node.
#[derive(Debug, Clone, Parser)]
#[command(name = "load")]
pub struct Options {
    /// Viewers to connect (a third each at spatial layer 0, 1 and 2, unless `--layer`).
    #[arg(long, default_value_t = 50)]
    pub viewers: usize,
    /// Every viewer at this spatial layer (0: 180p at 200 kbit/s, 1: 360p at 550 kbit/s,
    /// 2: 720p at 1.75 Mbit/s): what one layer costs, for viewers per core at that size.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=2))]
    pub layer: Option<u8>,
    /// Seconds measured once every viewer is connected and the warm-up is over.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Seconds at most between the last viewer connecting and the measurement: it starts once
    /// the node sends every viewer the spatial layer it asked for (its bandwidth estimate
    /// climbs there over some seconds, each spatial up-switch with a keyframe), or when these
    /// are up.
    #[arg(long, default_value_t = 20.0)]
    pub warmup: f64,
    /// What the viewers' media goes over: `udp`, or `tcp` (ICE over TCP: each viewer one
    /// connection to the node's passive candidate, RFC 4571 framing). The publisher is on UDP.
    #[arg(long, value_enum, default_value = "udp")]
    pub viewer_transport: Transport,
    /// Rooms, each with its own publisher; the viewers are dealt out over them in turn. A
    /// room lives on one of the node's workers, so one room measures one worker.
    #[arg(long, default_value_t = 1)]
    pub rooms: usize,
    /// Passed to the node as `--workers N` (not passed when left out).
    #[arg(long)]
    pub workers: Option<usize>,
    /// `false` turns the node's UDP segmentation offload off (`udp_gso = false` in its
    /// settings), to measure what it saves with the same binary; `true` leaves the setting out.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub gso: bool,
    /// Percent of the datagrams each viewer drops on arrival once connected (seeded).
    #[arg(long, default_value_t = 0.0)]
    pub loss: f64,
    /// Seeds the simulated loss and the frame sizes.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Threads the viewers are spread over (the publisher has its own).
    #[arg(long, default_value_t = 2)]
    pub client_threads: usize,
    /// Seconds the kernel's floor is measured for, before the node starts: one socket sends
    /// full-size datagrams with `sendmmsg` to as many loopback sockets as there are viewers;
    /// the node's CPU per delivered packet is reported against its CPU per datagram. Measured
    /// again after the viewers stopped, at the node's pace (its datagrams per call, calls a
    /// second and wake-ups a second). 0 skips both.
    #[arg(long, default_value_t = 2.0)]
    pub floor_seconds: f64,
    /// The floor alone, no node: the kernel's best case, then the same sender at each pace
    /// given (`PER_CALL,CALL_US,WAKE_US`: datagrams a call, microseconds between calls and
    /// between wake-ups), each for `--floor-seconds` to `--viewers` destinations. Repeatable;
    /// the pace the load run measured the node at is in its log line for the paced floor.
    #[arg(long, value_name = "PER_CALL,CALL_US,WAKE_US")]
    pub floor_pace: Vec<Pace>,
    /// The node on one core (the highest this process may use), this tool on another (the
    /// lowest); the floor's sender on the node's, its reader on the tool's.
    #[arg(long)]
    pub pin: bool,
    /// Nodes, each its own process with `--workers` of its own: above 1 they form a cluster on
    /// a redis-server started for the run, the publishers on the first node and the viewers
    /// dealt out over all of them in turn, so the others get the stream through the media
    /// relay; each node is reported apart.
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
    /// The Redis server a run across nodes starts.
    #[arg(long, default_value = "redis-server")]
    pub redis_server: PathBuf,
    /// The node's binary; by default the tool builds it (release) beside itself.
    #[arg(long)]
    pub node: Option<PathBuf>,
    /// Seconds the viewers may take to connect, all told.
    #[arg(long, default_value_t = 60.0)]
    pub connect_timeout: f64,
    /// One JSON line instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Exit non-zero unless every viewer connected and received video and the loss after
    /// retransmission stayed below `--max-loss` percent.
    #[arg(long)]
    pub check: bool,
    /// The loss after retransmission (percent) `--check` allows.
    #[arg(long, default_value_t = 1.0)]
    pub max_loss: f64,
    /// The data mode, in place of the media load: this many conference participants in one
    /// room, each with one data channel the node relays to the others, writing `--data-rate`
    /// messages a second; reports the message latency. 0: the media load.
    #[arg(long, default_value_t = 0)]
    pub participants: usize,
    /// Messages each participant writes per second in the data mode.
    #[arg(long, default_value_t = 10.0)]
    pub data_rate: f64,
    /// Bytes of each message in the data mode (at least the 12 of its time stamp and writer).
    #[arg(long, default_value_t = 100)]
    pub data_size: usize,
}

/// Why the options cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OptionsError {
    #[error("--viewers must be at least 1")]
    NoViewers,
    #[error("--client-threads must be at least 1")]
    NoThreads,
    #[error("--workers must be at least 1")]
    NoWorkers,
    #[error("--rooms must be from 1 to --viewers")]
    Rooms,
    #[error("--loss is a percentage from 0 to 100, not {0}")]
    Loss(f64),
    #[error("--{0} must be a number of seconds (positive, or 0 where 0 is allowed)")]
    Seconds(&'static str),
    #[error("--participants must be 0 (no data mode) or at least 2")]
    Participants,
    #[error("--data-rate must be a positive number of messages a second")]
    DataRate,
    #[error("--nodes must be from 1 to --viewers")]
    Nodes,
    #[error("--{0} runs one node: not with --nodes above 1")]
    OneNode(&'static str),
    #[error("--floor-pace measures the floor alone: not with --participants, --nodes above 1 or --floor-seconds 0")]
    FloorAlone,
}

impl Options {
    pub fn validate(&self) -> Result<(), OptionsError> {
        if self.viewers == 0 {
            return Err(OptionsError::NoViewers);
        }
        if self.client_threads == 0 {
            return Err(OptionsError::NoThreads);
        }
        if self.workers == Some(0) {
            return Err(OptionsError::NoWorkers);
        }
        if self.rooms == 0 || self.rooms > self.viewers {
            return Err(OptionsError::Rooms);
        }
        if !(0.0..=100.0).contains(&self.loss) {
            return Err(OptionsError::Loss(self.loss));
        }
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !positive(self.seconds) {
            return Err(OptionsError::Seconds("seconds"));
        }
        if !positive(self.connect_timeout) {
            return Err(OptionsError::Seconds("connect-timeout"));
        }
        let not_negative = |v: f64| v.is_finite() && v >= 0.0;
        if !not_negative(self.warmup) {
            return Err(OptionsError::Seconds("warmup"));
        }
        if !not_negative(self.floor_seconds) {
            return Err(OptionsError::Seconds("floor-seconds"));
        }
        if self.participants == 1 {
            return Err(OptionsError::Participants);
        }
        if !positive(self.data_rate) {
            return Err(OptionsError::DataRate);
        }
        self.validate_nodes()?;
        self.validate_floor()
    }

    fn validate_floor(&self) -> Result<(), OptionsError> {
        let alone = self.participants == 0 && self.nodes == 1 && self.floor_seconds > 0.0;
        match self.floor_pace.is_empty() || alone {
            true => Ok(()),
            false => Err(OptionsError::FloorAlone),
        }
    }

    fn validate_nodes(&self) -> Result<(), OptionsError> {
        if self.nodes == 0 || self.nodes > self.viewers {
            return Err(OptionsError::Nodes);
        }
        if self.nodes > 1 && self.pin {
            return Err(OptionsError::OneNode("pin"));
        }
        if self.nodes > 1 && self.participants > 0 {
            return Err(OptionsError::OneNode("participants"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_defaults_run_and_bad_values_are_named() {
        let options = Options::parse_from(["load"]);
        assert_eq!(options.validate(), Ok(()));
        let options = Options::parse_from(["load", "--viewers", "300", "--loss", "2.5"]);
        assert_eq!((options.viewers, options.loss), (300, 2.5));
        assert_eq!(options.workers, None);
        assert!(options.gso, "the node's own setting unless told");
        assert!(!Options::parse_from(["load", "--gso", "false"]).gso);
        assert_eq!(options.viewer_transport, Transport::Udp);
        let options = Options::parse_from(["load", "--viewer-transport", "tcp"]);
        assert_eq!(options.viewer_transport, Transport::Tcp);
        assert!(Options::try_parse_from(["load", "--viewer-transport", "quic"]).is_err());
        let bad = Options::parse_from(["load", "--loss", "120"]);
        assert_eq!(bad.validate(), Err(OptionsError::Loss(120.0)));
        let bad = Options::parse_from(["load", "--seconds", "0"]);
        assert_eq!(bad.validate(), Err(OptionsError::Seconds("seconds")));
    }

    #[test]
    fn pinning_is_asked_for_and_the_floor_may_be_skipped() {
        let options = Options::parse_from(["load"]);
        assert_eq!((options.pin, options.floor_seconds), (false, 2.0));
        let options = Options::parse_from(["load", "--pin", "--floor-seconds", "0"]);
        assert_eq!((options.pin, options.floor_seconds), (true, 0.0));
        assert_eq!(options.validate(), Ok(()));
        let bad = Options::parse_from(["load", "--floor-seconds=-1"]);
        assert_eq!(bad.validate(), Err(OptionsError::Seconds("floor-seconds")));
    }

    #[test]
    fn the_floor_alone_takes_paces_and_nothing_else() {
        assert!(Options::parse_from(["load"]).floor_pace.is_empty());
        let alone = [
            "load",
            "--floor-pace",
            "28,638,918",
            "--floor-pace",
            "28,638,5000",
        ];
        let options = Options::parse_from(alone);
        assert_eq!(options.floor_pace.len(), 2);
        assert_eq!(
            options.floor_pace[1].wake_interval,
            Duration::from_millis(5)
        );
        assert_eq!(options.validate(), Ok(()));
        for other in [
            ["--participants", "4"],
            ["--nodes", "2"],
            ["--floor-seconds", "0"],
        ] {
            let options = Options::parse_from(alone.iter().chain(&other));
            assert_eq!(
                options.validate(),
                Err(OptionsError::FloorAlone),
                "{other:?}"
            );
        }
        assert!(Options::try_parse_from(["load", "--floor-pace", "28,638"]).is_err());
    }

    #[test]
    fn a_run_across_nodes_is_unpinned_media() {
        let options = Options::parse_from(["load"]);
        assert_eq!(options.nodes, 1);
        assert_eq!(options.redis_server, PathBuf::from("redis-server"));
        let options = Options::parse_from(["load", "--nodes", "3", "--viewers", "240"]);
        assert_eq!(options.validate(), Ok(()));
        let bad = Options::parse_from(["load", "--nodes", "0"]);
        assert_eq!(bad.validate(), Err(OptionsError::Nodes));
        let bad = Options::parse_from(["load", "--nodes", "3", "--viewers", "2"]);
        assert_eq!(bad.validate(), Err(OptionsError::Nodes));
        let bad = Options::parse_from(["load", "--nodes", "2", "--pin"]);
        assert_eq!(bad.validate(), Err(OptionsError::OneNode("pin")));
        let bad = Options::parse_from(["load", "--nodes", "2", "--participants", "4"]);
        assert_eq!(bad.validate(), Err(OptionsError::OneNode("participants")));
    }

    #[test]
    fn the_data_mode_takes_participants_and_a_rate() {
        let options = Options::parse_from(["load"]);
        assert_eq!((options.participants, options.data_rate), (0, 10.0));
        let options = Options::parse_from(["load", "--participants", "50", "--data-rate", "10"]);
        assert_eq!(options.validate(), Ok(()));
        let bad = Options::parse_from(["load", "--participants", "1"]);
        assert_eq!(bad.validate(), Err(OptionsError::Participants));
        let bad = Options::parse_from(["load", "--participants", "5", "--data-rate", "0"]);
        assert_eq!(bad.validate(), Err(OptionsError::DataRate));
    }
}
