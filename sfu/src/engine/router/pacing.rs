//! Pacing toward viewer transports with an estimate. A job for a transport whose pacer is
//! closed (or that already has jobs waiting) waits in that transport's queue; queued jobs
//! leave as the pacer opens, audio and retransmissions before video, each class in order.
//! Jobs are references into the publishers' receive rings, so a queue holds no packet
//! copies. Probe packets keep their own cluster's timing and go past the pacer.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rtp_ext::codec::MediaKind;

use super::{Job, Router};
use crate::engine::pacer::Pacer;
use crate::engine::transport::TransportId;

/// The longest a job waits for the pacer: past it, it is sent anyway (and counted), since
/// video held longer than this is later than a viewer's jitter buffer waits, and the
/// receive ring it points into moves on. Only an allocation above the pacing rate gets here.
pub const MAX_HOLD: Duration = Duration::from_millis(400);

/// A paced transport: its bucket and what waits for it.
#[derive(Debug)]
pub(super) struct Paced {
    pacer: Pacer,
    /// Audio and retransmissions, with when each was queued.
    urgent: VecDeque<(Instant, Job)>,
    /// Video.
    media: VecDeque<(Instant, Job)>,
    /// Whether the transport is in the router's list of those with jobs waiting.
    listed: bool,
}

impl Paced {
    fn new(estimate_bps: u64) -> Self {
        Self {
            pacer: Pacer::new(estimate_bps),
            urgent: VecDeque::new(),
            media: VecDeque::new(),
            listed: false,
        }
    }

    fn is_empty(&self) -> bool {
        self.urgent.is_empty() && self.media.is_empty()
    }

    fn head(&self) -> Option<Instant> {
        self.urgent
            .front()
            .or(self.media.front())
            .map(|&(at, _)| at)
    }

    /// The next job that may leave at `now`, and whether it waited past [`MAX_HOLD`].
    fn pop(&mut self, now: Instant) -> Option<(Job, bool)> {
        let overdue = self.head().is_some_and(|at| now >= at + MAX_HOLD);
        if !overdue && !self.pacer.may_send(now) {
            return None;
        }
        let (_, job) = self.urgent.pop_front().or_else(|| self.media.pop_front())?;
        Some((job, overdue))
    }

    /// When the head of its queue may leave.
    fn due(&self) -> Option<Instant> {
        let head = self.head()?;
        let open = self.pacer.next_send().unwrap_or(head);
        Some(open.min(head + MAX_HOLD))
    }
}

impl Router {
    /// A viewer transport's estimate, for its pacer: paced from its first estimate on.
    pub(super) fn pace(&mut self, now: Instant, transport: TransportId, estimate_bps: u64) {
        self.pacing
            .entry(transport)
            .or_insert_with(|| Paced::new(estimate_bps))
            .pacer
            .set_estimate(now, estimate_bps);
    }

    /// Whether `job` waits in its transport's queue instead of going now: when the
    /// transport is paced and its pacer is closed or others wait before it.
    pub(super) fn hold(&mut self, job: Job) -> bool {
        if self.pacing.is_empty() {
            return false;
        }
        let (down_track, retransmission) = match job {
            Job::Forward { down_track, .. } => (down_track, false),
            Job::Retransmit { down_track, .. } => (down_track, true),
            Job::Probe { .. } => return false,
        };
        let (Some(d), Some(now)) = (self.down_tracks.get(&down_track), self.last_input) else {
            return false;
        };
        let transport = d.transport();
        let Some(paced) = self.pacing.get_mut(&transport) else {
            return false;
        };
        if paced.is_empty() && paced.pacer.may_send(now) {
            return false;
        }
        let audio = self
            .tracks
            .get(&d.track())
            .is_some_and(|p| p.receiver.config().codec.kind() == MediaKind::Audio);
        let queue = if retransmission || audio {
            &mut paced.urgent
        } else {
            &mut paced.media
        };
        queue.push_back((now, job));
        if !paced.listed {
            paced.listed = true;
            self.backlogged.push_back(transport);
        }
        true
    }

    /// The next queued job whose transport's pacer lets it go now. Transports take turns,
    /// one that is open keeps its turn until it closes or empties.
    pub(super) fn next_paced(&mut self) -> Option<Job> {
        let now = self.last_input?;
        for _ in 0..self.backlogged.len() {
            let transport = *self.backlogged.front()?;
            let Some(paced) = self.pacing.get_mut(&transport) else {
                self.backlogged.pop_front();
                continue;
            };
            if let Some((job, overdue)) = paced.pop(now) {
                self.counters.paced_overdue += u64::from(overdue);
                return Some(job);
            }
            self.backlogged.pop_front();
            if paced.is_empty() {
                paced.listed = false;
            } else {
                self.backlogged.push_back(transport);
            }
        }
        None
    }

    /// A packet of `bytes` left toward `transport`: its pacer is charged with it.
    pub(super) fn charge(&mut self, transport: TransportId, bytes: usize) {
        if self.pacing.is_empty() {
            return;
        }
        if let (Some(paced), Some(now)) = (self.pacing.get_mut(&transport), self.last_input) {
            paced.pacer.on_sent(now, bytes);
        }
    }

    /// When the next queued job may leave, toward any viewer.
    pub(super) fn pacing_due(&self) -> Option<Instant> {
        self.backlogged
            .iter()
            .filter_map(|t| self.pacing.get(t)?.due())
            .min()
    }

    /// Packets waiting for the pacer toward `transport` (those the selector will drop
    /// included: it decides when they leave).
    pub fn paced_jobs(&self, transport: TransportId) -> usize {
        self.pacing
            .get(&transport)
            .map_or(0, |p| p.urgent.len() + p.media.len())
    }
}
