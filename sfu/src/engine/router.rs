//! The Router: published tracks and their subscriptions, driven by calls. A media server embeds
//! it and runs the loop: feed packets and RTCP in with `handle_*`, then drain
//! [`poll_transmit`](Router::poll_transmit) (media to subscribers) and
//! [`poll_rtcp`](Router::poll_rtcp) (feedback to publishers) until they return `None`, and call
//! [`handle_timeout`](Router::handle_timeout) at [`poll_timeout`](Router::poll_timeout).
//! Nothing here reads a clock or touches a socket: every input carries `now`.
//!
//! This file holds the type, its poll order and the dispatch of inputs and timers; each
//! concept it dispatches to has a file of its own: `publish` (transports, tracks, stream
//! binding and subscriptions), `settings` (what the host changes on a running track or
//! subscription), `send` (the fan-out, retransmissions, probes and pacing), `feedback` (RTCP
//! in and out), `allocate` (layers fitted to a viewer's estimate), `queries` and `types`.

mod allocate;
mod feedback;
mod publish;
mod queries;
mod send;
mod settings;
mod types;

pub use queries::DownTrackInfo;
pub use types::{
    Event, KeyframeRequest, Output, RouterConfig, RouterCounters, RouterError, RtcpTarget,
    RtcpTransmit,
};

use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;
use rtp_ext::rtp::RtpPacket;
use smallvec::SmallVec;

use super::bwe::PacketResult;
use super::down_track::DownTrack;
use super::id_map::IdMap;
use super::receiver::{PacketRef, ReceiveError};
use super::rtcp::{RtcpWireWriter, WallClock};
use super::track::{DownTrackId, TrackId};
use super::transport::{Transport, TransportId, RESULTS_CAPACITY, TWCC_INTERVAL};
use feedback::{queue_nacks, PendingRtcp};
use publish::Published;

/// Work queued by inputs and done when outputs are polled.
#[derive(Debug, Clone, Copy)]
pub(super) enum Job {
    Forward {
        down_track: DownTrackId,
        at: PacketRef,
    },
    Retransmit {
        down_track: DownTrackId,
        out_seq: u16,
    },
    Probe {
        down_track: DownTrackId,
        cluster: u32,
    },
}

/// Initial room in the RTCP and event queues.
const QUEUE_CAPACITY: usize = 64;

/// Published tracks, their subscriptions and the transports they travel on.
///
/// # Poll order
/// After every input (`handle_rtp`, `handle_rtcp`, `handle_timeout`, or an API call that
/// changes a subscription), drain in this order until each returns `None`:
/// 1. [`poll_transmit`](Self::poll_transmit): media and retransmissions to subscribers;
///    polling runs the fan-out, so a selector that needs a keyframe raises its request here.
/// 2. [`poll_rtcp`](Self::poll_rtcp): reports, NACKs, keyframe requests and transport-wide
///    CC feedback, including what step 1 raised.
/// 3. [`poll_event`](Self::poll_event): what the host may act on or show.
///
/// Then sleep until [`poll_timeout`](Self::poll_timeout) (or the next input) and call
/// [`handle_timeout`](Self::handle_timeout) with the time it is then.
///
/// # Example
/// One publisher and one subscriber on two transports, driven by hand:
/// ```
/// use std::time::Instant;
/// use bytes::Bytes;
/// use rtp_ext::codec::Codec;
/// use selector::LayerLimits;
/// use sfu::engine::{DownTrackConfig, Router, RouterConfig, TrackConfig};
///
/// let mut router = Router::new(RouterConfig::default());
/// let (publisher, viewer) = (router.add_transport(), router.add_transport());
/// let track = router.publish(publisher, TrackConfig::single(Codec::Opus, 0x1111))?;
/// let down = router.subscribe(viewer, track, DownTrackConfig::new(0x2222, 111), LayerLimits::default())?;
///
/// // An Opus packet: RTP version 2, payload type 111, sequence 1, timestamp 960.
/// let mut packet = vec![0x80, 111, 0, 1, 0, 0, 0x03, 0xc0, 0, 0, 0x11, 0x11];
/// packet.extend_from_slice(&[0xfc, 0xff, 0xfe]);
/// let now = Instant::now();
/// router.handle_rtp(now, publisher, Bytes::from(packet)).expect("a valid packet");
///
/// let mut buf = [0u8; 1500];
/// let out = router.poll_transmit(&mut buf).expect("forwarded");
/// assert_eq!((out.transport, out.down_track), (viewer, down));
/// assert_eq!(&buf[8..12], &[0, 0, 0x22, 0x22], "sent under the subscriber's SSRC");
/// assert_eq!(&out.transmit.payload[..], &[0xfc, 0xff, 0xfe], "payload shared, not copied");
/// while router.poll_rtcp(&mut buf).is_some() {}
/// while router.poll_event().is_some() {}
/// assert!(router.poll_timeout().is_some(), "reports are due later");
/// # Ok::<(), sfu::engine::RouterError>(())
/// ```
#[derive(Debug)]
pub struct Router {
    config: RouterConfig,
    tracks: IdMap<TrackId, Published>,
    /// Boxed: a DownTrack is kilobytes (its selector's frame history), and the map probed per
    /// subscriber-packet stays small enough to stay in cache.
    down_tracks: IdMap<DownTrackId, Box<DownTrack>>,
    transports: IdMap<TransportId, Transport>,
    jobs: VecDeque<Job>,
    /// Publisher packets whose forwards were queued since the queue was last put in
    /// subscriber order (see `group_jobs`), and the space that ordering reuses.
    packets_queued: u32,
    job_scratch: Vec<(u64, Job)>,
    /// How many transports are paced to their estimate (none: jobs go without looking),
    /// and the ones with jobs waiting.
    paced: usize,
    backlogged: VecDeque<TransportId>,
    /// Transports whose last allocation started a probe cluster, until it ends: the timers
    /// and the probe queue look at these alone, not at every viewer's transport on every turn.
    probing: Vec<TransportId>,
    rtcp: VecDeque<PendingRtcp>,
    events: VecDeque<Event>,
    /// Publisher transports whose transport-wide CC feedback is due: written straight into
    /// the host's buffer when polled.
    twcc_out: VecDeque<TransportId>,
    next_twcc: Option<Instant>,
    rtcp_writer: RtcpWireWriter,
    nack_scratch: Vec<(u32, u16)>,
    transport_scratch: Vec<TransportId>,
    /// Any viewer's transport-wide feedback matched to what was sent, one feedback at a time.
    feedback_results: Vec<PacketResult>,
    /// Maps `now` to wall-clock NTP time for reports; anchored at the first use if the host
    /// gives none.
    wall_clock: Option<WallClock>,
    next_report: Option<Instant>,
    /// The `now` of the latest input: work raised while polling (a keyframe a selector needs)
    /// is due as of then, and the periodic timers start from it.
    last_input: Option<Instant>,
    next_id: u32,
    counters: RouterCounters,
}

impl Router {
    /// A router with no transports yet.
    pub fn new(config: RouterConfig) -> Self {
        Self {
            config,
            tracks: IdMap::default(),
            down_tracks: IdMap::default(),
            transports: IdMap::default(),
            jobs: VecDeque::new(),
            packets_queued: 0,
            job_scratch: Vec::new(),
            paced: 0,
            backlogged: VecDeque::new(),
            probing: Vec::new(),
            // Room for a round of reports and requests from the start: the queues grow only when
            // a router has more tracks and subscriptions than that, not in steady state.
            rtcp: VecDeque::with_capacity(QUEUE_CAPACITY),
            events: VecDeque::with_capacity(QUEUE_CAPACITY),
            twcc_out: VecDeque::new(),
            next_twcc: None,
            // A fixed CNAME of valid length: cannot fail.
            rtcp_writer: RtcpWireWriter::new(b"strata").expect("a short CNAME"),
            nack_scratch: Vec::new(),
            transport_scratch: Vec::new(),
            feedback_results: Vec::with_capacity(RESULTS_CAPACITY),
            wall_clock: None,
            next_report: None,
            last_input: None,
            next_id: 1,
            counters: RouterCounters::default(),
        }
    }

    /// Anchors the NTP timestamps of reports: `clock.instant` read at the same moment as
    /// `clock.unix`, the time since the Unix epoch.
    pub fn set_wall_clock(&mut self, clock: WallClock) {
        self.wall_clock = Some(clock);
    }

    /// One RTP packet from a publisher. A bad packet is counted and dropped; nothing else
    /// changes.
    pub fn handle_rtp(
        &mut self,
        now: Instant,
        transport: TransportId,
        packet: Bytes,
    ) -> Result<(), ReceiveError> {
        self.handle_rtp_arrived(now, now, transport, packet)
    }

    /// One RTP packet from a publisher, taken at `now` but `arrived` at the host earlier (a
    /// kernel's receive stamp, for a host that reads its socket some time after datagrams
    /// come): the arrival times reported back to the publisher (transport-wide feedback, the
    /// REMB estimate, the interarrival jitter in receiver reports) are `arrived`, as its
    /// bandwidth estimate needs the path's timing, not the host's reads; everything else
    /// happens at `now`. An arrival after `now` is `now`.
    pub fn handle_rtp_arrived(
        &mut self,
        now: Instant,
        arrived: Instant,
        transport: TransportId,
        packet: Bytes,
    ) -> Result<(), ReceiveError> {
        self.last_input = Some(now);
        self.counters.rtp_in += 1;
        if !self.transports.contains_key(&transport) {
            return Err(ReceiveError::UnknownTransport);
        }
        // The header is parsed here once, for stream binding, the transport-wide sequence and
        // the receiver.
        let view = match RtpPacket::parse(&packet) {
            Ok(view) => view,
            Err(e) => return Err(self.refuse_malformed(transport, &packet, e)),
        };
        // Looked up in the transport's own table: a packet under an SSRC it did not publish
        // is not taken for anybody else's track.
        let ssrc = view.fields().ssrc;
        let known = self
            .transports
            .get(&transport)
            .and_then(|on| on.ssrcs.get(&ssrc));
        let Some(track) = known.copied().or_else(|| self.bind(now, transport, &view)) else {
            self.counters.unknown_ssrc += 1;
            return Err(ReceiveError::UnknownSsrc);
        };
        let (Some(published), Some(on)) = (
            self.tracks.get_mut(&track),
            self.transports.get_mut(&transport),
        ) else {
            return Err(ReceiveError::UnknownSsrc);
        };
        let arrived = arrived.min(now);
        on.handle_arrival(arrived, track, published.receiver.config(), &view);
        let at = published
            .receiver
            .receive_parsed(now, arrived, &view, packet.clone())
            .inspect_err(|e| {
                self.counters.dropped_in += 1;
                // Without the structure nothing of the stream can be selected: a keyframe brings
                // it (at most one request per interval, however many packets wait).
                if let ReceiveError::UnreadableDd { stream } = *e {
                    published.keyframes.request(now, stream);
                }
            })?;
        // A keyframe answers whatever was asked of its stream before it.
        if published
            .receiver
            .packet(at)
            .is_some_and(|p| p.keyframe_start)
        {
            published.keyframes.answered(at.stream);
        }
        // The level of the packet just taken (the last one written, for a packet without).
        if let Some(level) = published.receiver.audio_level() {
            published.speech.on_level(now, level.level);
        }
        let activity = published.receiver.take_activity_change();
        if published.forwarded {
            self.jobs.extend(
                published
                    .subscribers
                    .iter()
                    .map(|&down_track| Job::Forward { down_track, at }),
            );
            self.packets_queued += 1;
        }
        if let Some(active) = activity {
            self.on_streams_sent(now, track, active);
        }
        Ok(())
    }

    /// A simulcast publisher paused or resumed a stream: its subscribers follow at once (a
    /// paused stream's viewers move to the next stream below and ask for its keyframe), and
    /// their allocations are made again without it.
    fn on_streams_sent(&mut self, now: Instant, track: TrackId, active: u8) {
        let Some(published) = self.tracks.get(&track) else {
            return;
        };
        let mut transports: SmallVec<[TransportId; 8]> = SmallVec::new();
        for down_track in published
            .subscribers
            .iter()
            .filter_map(|d| self.down_tracks.get(d))
        {
            down_track.set_active_streams(active);
            transports.push(down_track.transport());
        }
        self.events.push_back(Event::StreamsSent { track, active });
        transports.sort_unstable();
        transports.dedup();
        for transport in transports {
            self.reallocate(now, transport);
        }
    }

    /// A packet whose header did not parse: counted by the track its SSRC names on the
    /// transport, if any.
    fn refuse_malformed(
        &mut self,
        transport: TransportId,
        packet: &[u8],
        error: rtp_ext::rtp::ParseError,
    ) -> ReceiveError {
        let ssrc = packet
            .get(8..12)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        let track = ssrc.and_then(|ssrc| self.ssrc_track(transport, ssrc));
        match track.and_then(|t| self.tracks.get_mut(&t)) {
            Some(published) => {
                self.counters.dropped_in += 1;
                published.receiver.refuse(ReceiveError::Malformed(error))
            }
            None => {
                self.counters.unknown_ssrc += 1;
                ReceiveError::UnknownSsrc
            }
        }
    }

    /// Timers: NACKs due to publishers, keyframe requests due, reports due.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.last_input = Some(now);
        self.queue_probes(now);
        let rtt = self.config.rtt;
        for (&track, published) in &mut self.tracks {
            self.nack_scratch.clear();
            published
                .receiver
                .poll_nacks(now, rtt, &mut self.nack_scratch);
            queue_nacks(&mut self.rtcp, track, &self.nack_scratch);
            while let Some(stream) = published.keyframes.poll(now) {
                let media_ssrc = published.receiver.config().streams[usize::from(stream)].ssrc;
                let request = match self.config.keyframe_request {
                    KeyframeRequest::Pli => PendingRtcp::Pli { track, media_ssrc },
                    KeyframeRequest::Fir => {
                        published.fir_seq = published.fir_seq.wrapping_add(1);
                        let seq_nr = published.fir_seq;
                        PendingRtcp::Fir {
                            track,
                            media_ssrc,
                            seq_nr,
                        }
                    }
                };
                self.rtcp.push_back(request);
                self.events.push_back(Event::KeyframeRequested {
                    transport: published.transport,
                    track,
                });
            }
        }
        if self.next_twcc.is_none_or(|at| now >= at) {
            self.next_twcc = Some(now + TWCC_INTERVAL);
            self.queue_uplink_feedback(now);
        }
        if self.next_report.is_none_or(|at| now >= at) {
            self.next_report = Some(now + self.config.report_interval);
            self.queue_reports(now);
            self.reallocate_all(now);
        }
    }

    /// The next event for the host.
    #[must_use = "what it returns is lost otherwise"]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) is next due: always a time once the
    /// router has a track or a subscription and has seen an input (the reports are due at
    /// the first one), so a host that sleeps until then never misses a duty.
    #[must_use = "what it returns is lost otherwise"]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let has_work = !self.tracks.is_empty() || !self.down_tracks.is_empty();
        let reports = self.next_report.or(self.last_input.filter(|_| has_work));
        self.tracks
            .values()
            .flat_map(|p| [p.receiver.next_timeout(), p.keyframes.next_timeout()])
            .chain([
                reports,
                self.next_twcc.filter(|_| self.has_uplink_feedback()),
            ])
            .chain([self.probe_due(), self.pacing_due()])
            .flatten()
            .min()
    }

    fn next_id(&mut self) -> u32 {
        self.next_id += 1;
        self.next_id - 1
    }
}
