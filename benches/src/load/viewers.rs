//! A viewers' thread: takes viewers as signaling hands them over, and drives them all from one
//! epoll loop, each polled when its socket is readable or its WebRTC timer is due. What each
//! receives is counted as it arrives (no packet is kept); latency goes to the thread's one
//! histogram.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::{Events, Poll};

use crate::client::{Client, Traffic};

use super::stats::{Latencies, SeqCounts, ViewerStats};
use super::wait::{deregister, register, wait_until, MIN_TIMER_GAP};
use super::{Control, LoadError, Phase};

/// The longest the loop sleeps, so new viewers and phase changes are taken up promptly.
const MAX_SLEEP: Duration = Duration::from_millis(10);

/// A viewer whose signaling is done, for a thread to drive.
#[derive(Debug)]
pub struct ViewerJob {
    pub index: usize,
    pub spatial: u8,
    pub client: Client,
    /// When its signaling started.
    pub joined: Instant,
}

/// What one viewer got.
#[derive(Debug, Clone)]
pub struct ViewerReport {
    pub index: usize,
    pub spatial: u8,
    /// Its socket's local port.
    pub port: u16,
    /// From the WHEP request to ICE and DTLS done.
    pub connect_time: Option<Duration>,
    /// Kilobits a second over the measured period, every datagram counted whole.
    pub kbps: f64,
    /// Datagrams received over the measured period (those the simulated loss then dropped
    /// included: the node sent them).
    pub datagrams: u64,
    pub seq: SeqCounts,
    pub frames_complete: u64,
    pub frames_incomplete: u64,
    pub video_packets: u64,
    pub audio_packets: u64,
    pub untagged: u64,
    pub nacks: u64,
    /// Datagrams the simulated loss dropped.
    pub dropped: u64,
    pub error: Option<String>,
}

/// Everything a thread's viewers got.
#[derive(Debug, Clone, Default)]
pub struct WorkerReport {
    pub viewers: Vec<ViewerReport>,
    pub latency: Latencies,
}

struct Slot {
    job: ViewerJob,
    stats: ViewerStats,
    connected_at: Option<Instant>,
    last_poll: Instant,
    /// The socket was not read empty: poll again without waiting for readiness.
    unread: bool,
    error: Option<String>,
    measured_from: Option<(Instant, Traffic)>,
    measured_to: Option<(Instant, Traffic)>,
}

/// Starts a viewers' thread; `connected` counts viewers as they connect.
pub fn spawn(
    name: String,
    jobs: Receiver<ViewerJob>,
    control: Arc<Control>,
    epoch: Instant,
    connected: Arc<AtomicUsize>,
) -> std::io::Result<JoinHandle<Result<WorkerReport, LoadError>>> {
    std::thread::Builder::new().name(name).spawn(move || {
        let mut worker = Worker {
            poll: Poll::new().map_err(LoadError::Io)?,
            events: Events::with_capacity(1024),
            ready: Vec::new(),
            slots: Vec::new(),
            latency: Latencies::default(),
            epoch,
            connected,
            phase: Phase::Joining,
        };
        worker.run(&jobs, &control)?;
        Ok(worker.report())
    })
}

struct Worker {
    poll: Poll,
    events: Events,
    /// The viewers the last wait found readable (kept to reuse its allocation).
    ready: Vec<usize>,
    slots: Vec<Slot>,
    latency: Latencies,
    epoch: Instant,
    connected: Arc<AtomicUsize>,
    phase: Phase,
}

impl Worker {
    fn run(&mut self, jobs: &Receiver<ViewerJob>, control: &Control) -> Result<(), LoadError> {
        let mut more_jobs = true;
        loop {
            while more_jobs {
                match jobs.try_recv() {
                    Ok(job) => self.add(job)?,
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => more_jobs = false,
                }
            }
            let phase = control.phase();
            if phase != self.phase {
                self.enter(phase);
            }
            if phase == Phase::Stopped {
                return Ok(());
            }
            let wake = self.earliest().min(Instant::now() + MAX_SLEEP);
            wait_until(&mut self.poll, &mut self.events, wake).map_err(LoadError::Io)?;
            self.ready.clear();
            self.ready.extend(self.events.iter().map(|e| e.token().0));
            for i in 0..self.ready.len() {
                self.drive(self.ready[i]);
            }
            let now = Instant::now();
            for index in 0..self.slots.len() {
                if self.due(index, now) {
                    self.drive(index);
                }
            }
        }
    }

    fn add(&mut self, job: ViewerJob) -> Result<(), LoadError> {
        register(&self.poll, &job.client, self.slots.len()).map_err(LoadError::Io)?;
        let now = Instant::now();
        let mut stats = ViewerStats::new(job.spatial);
        if self.phase >= Phase::Measuring {
            stats.seq.start_counting();
        }
        let traffic = job.client.traffic();
        let measuring = self.phase == Phase::Measuring;
        self.slots.push(Slot {
            job,
            stats,
            connected_at: None,
            last_poll: now,
            // Datagrams may have come before it was registered.
            unread: true,
            error: None,
            measured_from: measuring.then_some((now, traffic)),
            measured_to: None,
        });
        Ok(())
    }

    /// Marks the viewers where a phase starts: losses count from the measurement on, the
    /// received rate is taken over the measurement only.
    fn enter(&mut self, phase: Phase) {
        let now = Instant::now();
        for slot in &mut self.slots {
            let traffic = slot.job.client.traffic();
            match phase {
                Phase::Measuring => {
                    slot.stats.seq.start_counting();
                    slot.measured_from = Some((now, traffic));
                }
                Phase::Draining => slot.measured_to = Some((now, traffic)),
                Phase::Joining | Phase::Stopped => {}
            }
        }
        self.phase = phase;
    }

    /// The soonest any viewer needs polling.
    fn earliest(&self) -> Instant {
        let now = Instant::now();
        self.slots
            .iter()
            .filter(|s| s.error.is_none())
            .map(|s| match s.unread {
                true => now,
                false => s.job.client.next_wake().max(s.last_poll + MIN_TIMER_GAP),
            })
            .min()
            .unwrap_or(now + MAX_SLEEP)
    }

    fn due(&self, index: usize, now: Instant) -> bool {
        let slot = &self.slots[index];
        let timer = slot
            .job
            .client
            .next_wake()
            .max(slot.last_poll + MIN_TIMER_GAP);
        slot.error.is_none() && (slot.unread || now >= timer)
    }

    /// Polls one viewer, counting what it receives.
    fn drive(&mut self, index: usize) {
        let measuring = self.phase >= Phase::Measuring;
        let (epoch, latency) = (self.epoch, &mut self.latency);
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        if slot.error.is_some() {
            return;
        }
        let stats = &mut slot.stats;
        let polled = slot
            .job
            .client
            .poll_into(&mut |arrival| stats.record(&arrival, measuring, epoch, latency));
        let now = Instant::now();
        slot.last_poll = now;
        match polled {
            Ok(emptied) => slot.unread = !emptied,
            Err(e) => {
                slot.error = Some(e.to_string());
                let _ = deregister(&self.poll, &slot.job.client);
            }
        }
        if slot.connected_at.is_none() && slot.job.client.is_connected() {
            slot.connected_at = Some(now);
            self.connected.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn report(self) -> WorkerReport {
        let viewers = self.slots.iter().map(viewer_report).collect();
        WorkerReport {
            viewers,
            latency: self.latency,
        }
    }
}

fn viewer_report(slot: &Slot) -> ViewerReport {
    let (kbps, datagrams) = match (slot.measured_from, slot.measured_to) {
        (Some((from, before)), Some((to, after))) if to > from => {
            let bits = (after.bytes - before.bytes) as f64 * 8.0;
            let kbps = bits / (to - from).as_secs_f64() / 1000.0;
            (kbps, after.datagrams - before.datagrams)
        }
        _ => (0.0, 0),
    };
    let (frames_complete, frames_incomplete) = slot.stats.frames.finish();
    let client = &slot.job.client;
    ViewerReport {
        index: slot.job.index,
        spatial: slot.job.spatial,
        port: client.local_addr().port(),
        connect_time: slot.connected_at.map(|at| at - slot.job.joined),
        kbps,
        datagrams,
        seq: slot.stats.seq.finish(),
        frames_complete,
        frames_incomplete,
        video_packets: slot.stats.video_packets,
        audio_packets: slot.stats.audio_packets,
        untagged: slot.stats.untagged,
        nacks: client.video_nacks(),
        dropped: client.traffic().dropped,
        error: slot.error.clone(),
    }
}
