//! The load test's data mode (`--participants N`): N conference participants in one room, no
//! media, each with one data channel that the node relays to the N - 1 others, each writing
//! `--data-rate` binary messages a second of `--data-size` bytes, spread evenly over the
//! second and over the participants. Every message starts with its write time on the process's
//! one clock, so each receiver measures the latency from a participant's write to the message's
//! arrival at another: the node's relay, both SCTP associations and DTLS records, and the
//! tool's own lag (which its CPU figure shows). One thread drives every participant.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mio::{Events, Poll};

use crate::client::{Client, ClientError};

use super::node::NodeProcess;
use super::procfs::{percent_of_core, Process};
use super::stats::Histogram;
use super::wait::{register, wait_until, MIN_TIMER_GAP};
use super::{node, progress, LoadError, Options, DRAIN, RETRY};

/// The room the participants meet in.
const ROOM: &str = "load-data";
/// A message's head: its write time (nanoseconds since the run's epoch) and its writer.
const HEAD: usize = 12;
/// The longest the loop sleeps.
const MAX_SLEEP: Duration = Duration::from_millis(10);

/// What the data mode measured.
#[derive(Debug, Clone)]
pub struct DataReport {
    pub participants: usize,
    pub connected: usize,
    /// Participants with every channel open (their own and the N - 1 others') before the
    /// measurement started.
    pub complete: usize,
    pub rate: f64,
    pub size: usize,
    pub seconds: f64,
    /// Messages written during the measurement.
    pub sent: u64,
    /// What they should have become: each to every other participant.
    pub expected: u64,
    /// Of those, arrivals (the drain after the measurement included).
    pub received: u64,
    /// Messages a participant's channel would not take (its buffer full).
    pub refused: u64,
    pub latency: Histogram,
    pub node_cpu_percent: f64,
    pub tool_cpu_percent: f64,
    /// The node's relayed messages over the run (`strata_data_messages_relayed_total`).
    pub relayed: Option<u64>,
    /// The node's drops by reason, nonzero ones.
    pub drops: Vec<(String, u64)>,
}

/// One participant as the loop drives it.
struct Participant {
    client: Client,
    last_poll: Instant,
    /// Its socket was not read empty.
    unread: bool,
    next_write: Instant,
}

/// Runs the data mode the options describe on `node`.
pub fn run(node: &NodeProcess, options: &Options) -> Result<DataReport, LoadError> {
    let n = options.participants;
    let epoch = Instant::now();
    let mut poll = Poll::new().map_err(LoadError::Io)?;
    let mut events = Events::with_capacity(1024);
    let deadline = epoch + Duration::from_secs_f64(options.connect_timeout);
    let mut participants = Vec::with_capacity(n);
    for index in 0..n {
        let client = join(node.http, index, deadline)?;
        register(&poll, &client, index).map_err(LoadError::Io)?;
        participants.push(Participant {
            client,
            last_poll: epoch,
            unread: true,
            next_write: epoch,
        });
    }
    let mut run = Run {
        participants,
        latency: Histogram::default(),
        epoch,
        inbox: Vec::new(),
        message: vec![0; options.data_size.max(HEAD)],
        measured: None,
        received: 0,
    };
    run.drive_until(&mut poll, &mut events, deadline, |r| r.complete() == n)?;
    let complete = run.complete();
    let connected = run
        .participants
        .iter()
        .filter(|p| p.client.is_connected())
        .count();
    progress(&format!(
        "{connected} of {n} participants connected, {complete} with all {n} channels open"
    ));
    let relayed_before = node::metric(&[node.http], "strata_data_messages_relayed_total");
    let node_process = Process::Pid(node.pid());
    let node_cpu = node_process.cpu_time().map_err(LoadError::Io)?;
    let tool_cpu = Process::This.cpu_time().map_err(LoadError::Io)?;
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(options.seconds);
    run.measured = Some((start, end));
    progress(&format!("measuring for {} s", options.seconds));
    let period = Duration::from_secs_f64(1.0 / options.data_rate);
    for (i, p) in run.participants.iter_mut().enumerate() {
        p.next_write = start + period.mul_f64(i as f64 / n as f64);
    }
    let (sent, refused) = run.write_until(&mut poll, &mut events, end, period)?;
    let wall = start.elapsed();
    let node_cpu = (node_process.cpu_time().map_err(LoadError::Io)?).saturating_sub(node_cpu);
    let tool_cpu = (Process::This.cpu_time().map_err(LoadError::Io)?).saturating_sub(tool_cpu);
    run.drive_until(&mut poll, &mut events, Instant::now() + DRAIN, |_| false)?;
    let relayed = node::metric(&[node.http], "strata_data_messages_relayed_total");
    Ok(DataReport {
        participants: n,
        connected,
        complete,
        rate: options.data_rate,
        size: run.message.len(),
        seconds: wall.as_secs_f64(),
        sent,
        expected: sent * (n as u64 - 1),
        received: run.received,
        refused,
        latency: run.latency,
        node_cpu_percent: percent_of_core(node_cpu, wall),
        tool_cpu_percent: percent_of_core(tool_cpu, wall),
        relayed: relayed.zip(relayed_before).map(|(a, b)| a - b),
        drops: node::drops(&[node.http]),
    })
}

/// Joins participant `index`, again while the node says it is busy (503, 429).
fn join(http: SocketAddr, index: usize, deadline: Instant) -> Result<Client, ClientError> {
    loop {
        match Client::join_room(http, ROOM, &format!("p{index}"), "load") {
            Err(ClientError::Refused { status, .. })
                if matches!(status, 429 | 503) && Instant::now() < deadline =>
            {
                std::thread::sleep(RETRY);
            }
            joined => return joined,
        }
    }
}

struct Run {
    participants: Vec<Participant>,
    latency: Histogram,
    epoch: Instant,
    /// Messages taken from a participant, kept to reuse the allocation.
    inbox: Vec<(Instant, Vec<u8>)>,
    /// The message written, its head rewritten each time.
    message: Vec<u8>,
    /// Messages written in this window are counted.
    measured: Option<(Instant, Instant)>,
    received: u64,
}

impl Run {
    /// Participants with their own channel and the N - 1 others' open.
    fn complete(&self) -> usize {
        let n = self.participants.len();
        let complete = self.participants.iter();
        complete.filter(|p| p.client.channels_open() >= n).count()
    }

    /// Drives every participant until `done` holds or `until` passes.
    fn drive_until(
        &mut self,
        poll: &mut Poll,
        events: &mut Events,
        until: Instant,
        done: impl Fn(&Self) -> bool,
    ) -> Result<(), LoadError> {
        while !done(self) && Instant::now() < until {
            self.step(poll, events, until)?;
        }
        Ok(())
    }

    /// Drives every participant until `end`, each writing a message every `period`; the
    /// messages written, and those its channel refused.
    fn write_until(
        &mut self,
        poll: &mut Poll,
        events: &mut Events,
        end: Instant,
        period: Duration,
    ) -> Result<(u64, u64), LoadError> {
        let (mut sent, mut refused) = (0, 0);
        while Instant::now() < end {
            let next = self.participants.iter().map(|p| p.next_write).min();
            self.step(poll, events, next.unwrap_or(end).min(end))?;
            let now = Instant::now();
            for (index, p) in self.participants.iter_mut().enumerate() {
                if p.next_write > now || now >= end {
                    continue;
                }
                p.next_write += period;
                let at = now.duration_since(self.epoch).as_nanos() as u64;
                self.message[..8].copy_from_slice(&at.to_le_bytes());
                self.message[8..HEAD].copy_from_slice(&(index as u32).to_le_bytes());
                match p.client.write_data(&self.message)? {
                    true => sent += 1,
                    false => refused += 1,
                }
            }
        }
        Ok((sent, refused))
    }

    /// Waits until a socket is readable, a participant's timer is due or `until`, then polls
    /// every participant that has something, recording the messages it got.
    fn step(
        &mut self,
        poll: &mut Poll,
        events: &mut Events,
        until: Instant,
    ) -> Result<(), LoadError> {
        let now = Instant::now();
        let wake = self
            .participants
            .iter()
            .map(|p| match p.unread {
                true => now,
                false => p.client.next_wake().max(p.last_poll + MIN_TIMER_GAP),
            })
            .min()
            .unwrap_or(now)
            .min(until)
            .min(now + MAX_SLEEP);
        wait_until(poll, events, wake).map_err(LoadError::Io)?;
        for event in events.iter() {
            if let Some(p) = self.participants.get_mut(event.token().0) {
                p.unread = true;
            }
        }
        let now = Instant::now();
        for i in 0..self.participants.len() {
            let p = &mut self.participants[i];
            if !p.unread && now < p.client.next_wake().max(p.last_poll + MIN_TIMER_GAP) {
                continue;
            }
            p.unread = !p.client.poll_into(&mut |_| {})?;
            p.last_poll = now;
            p.client.take_messages(&mut self.inbox);
            self.record();
        }
        Ok(())
    }

    /// Counts the messages taken, written in the measured window, with their latency.
    fn record(&mut self) {
        let Some((start, end)) = self.measured else {
            self.inbox.clear();
            return;
        };
        for (arrived, message) in self.inbox.drain(..) {
            let Some(head) = message.get(..8) else {
                continue;
            };
            let nanos = u64::from_le_bytes(head.try_into().unwrap_or_default());
            let written = self.epoch + Duration::from_nanos(nanos);
            if (start..end).contains(&written) {
                self.received += 1;
                self.latency
                    .record(arrived.saturating_duration_since(written));
            }
        }
    }
}

impl DataReport {
    /// The report as a few lines of text.
    pub fn table(&self) -> String {
        let ms = |q: f64| {
            self.latency
                .quantile(q)
                .map_or("-".into(), |d| format!("{:.2}", d.as_secs_f64() * 1e3))
        };
        let lost = self.expected.saturating_sub(self.received);
        format!(
            "participants {} (connected {}, all channels open {})\n\
             messages: {} B at {}/s each for {:.1} s: {} written ({} refused), {} of {} \
             arrived, {lost} missing\n\
             latency ms: p50 {} p99 {} max {:.2}\n\
             node CPU {:.1} % of a core, tool {:.1} %; node relayed {}; node drops {:?}\n",
            self.participants,
            self.connected,
            self.complete,
            self.size,
            self.rate,
            self.seconds,
            self.sent,
            self.refused,
            self.received,
            self.expected,
            ms(0.5),
            ms(0.99),
            self.latency.max().as_secs_f64() * 1e3,
            self.node_cpu_percent,
            self.tool_cpu_percent,
            self.relayed.map_or("-".into(), |n| n.to_string()),
            self.drops,
        )
    }

    /// The report as one JSON object.
    pub fn json(&self) -> serde_json::Value {
        let ms = |q: f64| self.latency.quantile(q).map(|d| d.as_secs_f64() * 1e3);
        serde_json::json!({
            "participants": self.participants,
            "connected": self.connected,
            "all_channels_open": self.complete,
            "message_bytes": self.size,
            "messages_per_second_each": self.rate,
            "seconds": self.seconds,
            "written": self.sent,
            "refused": self.refused,
            "expected": self.expected,
            "arrived": self.received,
            "latency_p50_ms": ms(0.5),
            "latency_p99_ms": ms(0.99),
            "latency_max_ms": self.latency.max().as_secs_f64() * 1e3,
            "node_cpu_percent": self.node_cpu_percent,
            "tool_cpu_percent": self.tool_cpu_percent,
            "node_relayed": self.relayed,
            "node_drops": self.drops,
        })
    }

    /// Why `--check` fails: a participant without every channel, or a message that did not
    /// arrive everywhere.
    pub fn check(&self) -> Vec<String> {
        let mut failures = Vec::new();
        if self.complete < self.participants {
            failures.push(format!(
                "{} of {} participants had every channel open",
                self.complete, self.participants
            ));
        }
        if self.received < self.expected || self.refused > 0 {
            failures.push(format!(
                "{} of {} messages arrived ({} refused by the writer's channel)",
                self.received, self.expected, self.refused
            ));
        }
        failures
    }
}
