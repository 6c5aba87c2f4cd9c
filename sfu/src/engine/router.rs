//! The Router: published tracks and their subscriptions, driven by calls. A media server embeds
//! it and runs the loop: feed packets and RTCP in with `handle_*`, then drain
//! [`poll_transmit`](Router::poll_transmit) (media to subscribers) and
//! [`poll_rtcp`](Router::poll_rtcp) (feedback to publishers) until they return `None`, and call
//! [`handle_timeout`](Router::handle_timeout) at [`poll_timeout`](Router::poll_timeout).
//! Nothing here reads a clock or touches a socket: every input carries `now`.

mod feedback;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rtp_ext::ext::{AudioLevel, HeaderExtension, TransportSequenceNumber};
use rtp_ext::rtp::RtpPacket;
use selector::{Layer, LayerLimits};

use super::down_track::{DownTrack, DownTrackCounters, SubscriberReception, Transmit, WriteError};
use super::keyframe::{KeyframeCounters, KeyframeRequester, DEFAULT_KEYFRAME_INTERVAL};
use super::receiver::{PacketRef, ReceiveError, Receiver, ReceiverCounters};
use super::rtcp::{NackPairs, ReceiverReport, RtcpWireWriter, SenderReport, WallClock};
use super::track::{DownTrackConfig, DownTrackId, StreamConfig, TrackConfig, TrackId};
use super::transport::{IdMap, Transport, TransportId, Twcc};
use super::twcc::{TwccRecorder, TWCC_INTERVAL};

/// Router settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouterConfig {
    /// At most one keyframe request per published stream per interval.
    pub keyframe_interval: Duration,
    /// Round-trip time to publishers assumed for NACK retries until one is measured.
    pub rtt: Duration,
    /// SSRC the router sends its own RTCP from.
    pub rtcp_ssrc: u32,
    /// Receiver reports to publishers and sender reports to subscribers, this often.
    pub report_interval: Duration,
    pub keyframe_request: KeyframeRequest,
}

impl Default for RouterConfig {
    fn default() -> Self {
        Self {
            keyframe_interval: DEFAULT_KEYFRAME_INTERVAL,
            rtt: Duration::from_millis(100),
            rtcp_ssrc: 1,
            report_interval: Duration::from_secs(1),
            keyframe_request: KeyframeRequest::Pli,
        }
    }
}

/// Misuse of the router's API: all [`Fault::Host`](super::Fault::Host).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RouterError {
    #[error("unknown transport")]
    UnknownTransport,
    #[error("unknown track")]
    UnknownTrack,
    #[error("unknown down track")]
    UnknownDownTrack,
    /// An SSRC is already the transport's: another track it publishes has it, or another
    /// subscription sends to it under it.
    #[error("ssrc already in use on the transport")]
    SsrcInUse,
    /// The track has no stream at that index.
    #[error("unknown stream of the track")]
    UnknownStream,
}

/// Where an RTCP packet from [`Router::poll_rtcp`] goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtcpTarget {
    Publisher(TrackId),
    Subscriber(DownTrackId),
}

/// An RTCP packet written into the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtcpTransmit {
    /// The peer connection it goes out on.
    pub transport: TransportId,
    pub to: RtcpTarget,
    pub len: usize,
}

/// A media packet for one subscriber, written into the caller's buffer plus a shared payload.
#[derive(Debug, Clone)]
pub struct Output {
    /// The subscriber's peer connection.
    pub transport: TransportId,
    pub down_track: DownTrackId,
    pub transmit: Transmit,
}

/// Something the host may want to act on or show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The layer a subscriber receives changed (None: nothing decodable is forwarded, e.g.
    /// while it waits for a keyframe).
    LayerChanged {
        down_track: DownTrackId,
        layer: Option<Layer>,
    },
    /// A keyframe request went to a publisher.
    KeyframeRequested { track: TrackId },
    /// A subscriber's receiver estimated its bandwidth (REMB): the host may lower or raise the
    /// layer limits of the transport's subscriptions to fit.
    BandwidthEstimate {
        transport: TransportId,
        bitrate_bps: u64,
    },
}

/// How keyframes are asked of publishers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyframeRequest {
    /// Picture loss indication (RFC 4585 6.3.1).
    Pli,
    /// Full intra request (RFC 5104 4.3.1), for publishers that prefer it.
    Fir,
}

/// Work queued by inputs and done when outputs are polled.
#[derive(Debug, Clone, Copy)]
enum Job {
    Forward {
        down_track: DownTrackId,
        at: PacketRef,
    },
    Retransmit {
        down_track: DownTrackId,
        out_seq: u16,
    },
}

#[derive(Debug)]
struct Published {
    transport: TransportId,
    receiver: Receiver,
    keyframes: KeyframeRequester,
    subscribers: Vec<DownTrackId>,
    /// FIR command sequence number (RFC 5104 4.3.1.1): one more per new request.
    fir_seq: u8,
}

/// RTCP the router owes publishers.
#[derive(Debug, Clone, Copy)]
#[expect(
    clippy::large_enum_variant,
    reason = "NACK pairs stay inline so a NACK costs no allocation; the queue holds a handful"
)]
enum PendingRtcp {
    ReceiverReport {
        track: TrackId,
        report: ReceiverReport,
    },
    SenderReport {
        down_track: DownTrackId,
        report: SenderReport,
    },
    Pli {
        track: TrackId,
        media_ssrc: u32,
    },
    Fir {
        track: TrackId,
        media_ssrc: u32,
        seq_nr: u8,
    },
    Nack {
        track: TrackId,
        media_ssrc: u32,
        pairs: NackPairs,
    },
}

/// Initial room in the RTCP and event queues.
const QUEUE_CAPACITY: usize = 64;

/// Router-wide counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouterCounters {
    pub rtp_in: u64,
    pub unknown_ssrc: u64,
    pub dropped_in: u64,
    pub rtcp_in: u64,
    pub bad_rtcp: u64,
    pub write_failures: u64,
    pub nacks_sent: u64,
    pub keyframe_requests_sent: u64,
}

#[derive(Debug)]
pub struct Router {
    config: RouterConfig,
    tracks: IdMap<TrackId, Published>,
    /// Boxed: a DownTrack is kilobytes (its selector's frame history), and the map probed per
    /// subscriber-packet stays small enough to stay in cache.
    down_tracks: IdMap<DownTrackId, Box<DownTrack>>,
    transports: IdMap<TransportId, Transport>,
    jobs: VecDeque<Job>,
    rtcp: VecDeque<PendingRtcp>,
    events: VecDeque<Event>,
    /// Publisher transports whose transport-wide CC feedback is due: written straight into
    /// the host's buffer when polled.
    twcc_out: VecDeque<TransportId>,
    next_twcc: Option<Instant>,
    rtcp_writer: RtcpWireWriter,
    nack_scratch: Vec<(u32, u16)>,
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
    pub fn new(config: RouterConfig) -> Self {
        Self {
            config,
            tracks: IdMap::default(),
            down_tracks: IdMap::default(),
            transports: IdMap::default(),
            jobs: VecDeque::new(),
            // Room for a round of reports and requests from the start: the queues grow only when
            // a router has more tracks and subscriptions than that, not in steady state.
            rtcp: VecDeque::with_capacity(QUEUE_CAPACITY),
            events: VecDeque::with_capacity(QUEUE_CAPACITY),
            twcc_out: VecDeque::new(),
            next_twcc: None,
            // A fixed CNAME of valid length: cannot fail.
            rtcp_writer: RtcpWireWriter::new(b"strata").expect("a short CNAME"),
            nack_scratch: Vec::new(),
            wall_clock: None,
            next_report: None,
            last_input: None,
            next_id: 1,
            counters: RouterCounters::default(),
        }
    }

    pub fn counters(&self) -> RouterCounters {
        self.counters
    }

    /// Anchors the NTP timestamps of reports: `clock.instant` read at the same moment as
    /// `clock.unix`, the time since the Unix epoch.
    pub fn set_wall_clock(&mut self, clock: WallClock) {
        self.wall_clock = Some(clock);
    }

    /// A new peer connection: what it publishes and receives is named by it from now on.
    pub fn add_transport(&mut self) -> TransportId {
        let id = TransportId(self.next_id());
        self.transports.insert(id, Transport::default());
        id
    }

    /// Removes a peer connection and everything it had: its tracks (and every subscription
    /// to them, on any transport), its subscriptions and its congestion control state.
    pub fn remove_transport(&mut self, id: TransportId) -> Result<(), RouterError> {
        let transport = self
            .transports
            .get(&id)
            .ok_or(RouterError::UnknownTransport)?;
        let tracks = transport.tracks.clone();
        let mut down_tracks: Vec<DownTrackId> = transport.down_tracks.values().copied().collect();
        down_tracks.dedup();
        for track in tracks {
            self.unpublish(track)?;
        }
        for down_track in down_tracks {
            // Some went with the tracks just unpublished.
            let _ = self.unsubscribe(down_track);
        }
        self.transports.remove(&id);
        Ok(())
    }

    /// Publishes a track received on `transport`; its SSRCs must be new to that transport.
    pub fn publish(
        &mut self,
        transport: TransportId,
        config: TrackConfig,
    ) -> Result<TrackId, RouterError> {
        let id = TrackId(self.next_id());
        let on = self
            .transports
            .get_mut(&transport)
            .ok_or(RouterError::UnknownTransport)?;
        let ssrcs = config
            .streams
            .iter()
            .flat_map(|s| [Some(s.ssrc), s.rtx_ssrc])
            .flatten();
        if ssrcs.clone().any(|ssrc| on.ssrcs.contains_key(&ssrc)) {
            return Err(RouterError::SsrcInUse);
        }
        for ssrc in ssrcs {
            on.ssrcs.insert(ssrc, id);
        }
        on.tracks.push(id);
        let keyframes = KeyframeRequester::new(config.streams.len(), self.config.keyframe_interval);
        let receiver = Receiver::new(config);
        self.tracks.insert(
            id,
            Published {
                transport,
                receiver,
                keyframes,
                subscribers: Vec::new(),
                fir_seq: 0,
            },
        );
        Ok(id)
    }

    /// Gives stream `index` of a published track its SSRCs once the host has learned them
    /// (simulcast streams are announced by rid; their SSRCs show up with the first packets).
    /// The SSRCs the stream had before are forgotten.
    pub fn bind_stream(
        &mut self,
        track: TrackId,
        index: usize,
        ssrcs: StreamConfig,
    ) -> Result<(), RouterError> {
        let published = self
            .tracks
            .get_mut(&track)
            .ok_or(RouterError::UnknownTrack)?;
        let on = self
            .transports
            .get_mut(&published.transport)
            .ok_or(RouterError::UnknownTransport)?;
        let taken = [Some(ssrcs.ssrc), ssrcs.rtx_ssrc]
            .into_iter()
            .flatten()
            .any(|ssrc| on.ssrcs.get(&ssrc).is_some_and(|&t| t != track));
        if taken {
            return Err(RouterError::SsrcInUse);
        }
        let old = *published
            .receiver
            .config()
            .streams
            .get(index)
            .ok_or(RouterError::UnknownStream)?;
        for ssrc in [Some(old.ssrc), old.rtx_ssrc].into_iter().flatten() {
            on.ssrcs.remove(&ssrc);
        }
        published.receiver.bind_stream(index, ssrcs);
        for ssrc in [Some(ssrcs.ssrc), ssrcs.rtx_ssrc].into_iter().flatten() {
            on.ssrcs.insert(ssrc, track);
        }
        Ok(())
    }

    /// Removes a track and every subscription to it.
    pub fn unpublish(&mut self, track: TrackId) -> Result<(), RouterError> {
        let published = self
            .tracks
            .remove(&track)
            .ok_or(RouterError::UnknownTrack)?;
        if let Some(on) = self.transports.get_mut(&published.transport) {
            on.ssrcs.retain(|_, t| *t != track);
            on.tracks.retain(|t| *t != track);
            if on.twcc.as_ref().is_some_and(|t| t.track == track) {
                on.twcc = None;
            }
        }
        for down_track in published.subscribers {
            if let Some(removed) = self.down_tracks.remove(&down_track) {
                self.forget_down_track(&removed, down_track);
            }
        }
        Ok(())
    }

    /// Subscribes `transport` to a track: the DownTrack's SSRCs must be new to that transport.
    pub fn subscribe(
        &mut self,
        transport: TransportId,
        track: TrackId,
        config: DownTrackConfig,
        limits: LayerLimits,
    ) -> Result<DownTrackId, RouterError> {
        let id = DownTrackId(self.next_id());
        let on = self
            .transports
            .get_mut(&transport)
            .ok_or(RouterError::UnknownTransport)?;
        let published = self
            .tracks
            .get_mut(&track)
            .ok_or(RouterError::UnknownTrack)?;
        let ssrcs = [Some(config.ssrc), config.rtx.map(|(ssrc, _)| ssrc)];
        let ssrcs = ssrcs.into_iter().flatten();
        if ssrcs.clone().any(|ssrc| on.down_tracks.contains_key(&ssrc)) {
            return Err(RouterError::SsrcInUse);
        }
        for ssrc in ssrcs {
            on.down_tracks.insert(ssrc, id);
        }
        let down_track = DownTrack::new(
            transport,
            track,
            published.receiver.config(),
            config,
            limits,
        );
        published.subscribers.push(id);
        self.down_tracks.insert(id, Box::new(down_track));
        Ok(id)
    }

    pub fn unsubscribe(&mut self, down_track: DownTrackId) -> Result<(), RouterError> {
        let removed = self
            .down_tracks
            .remove(&down_track)
            .ok_or(RouterError::UnknownDownTrack)?;
        if let Some(published) = self.tracks.get_mut(&removed.track()) {
            published.subscribers.retain(|&d| d != down_track);
        }
        self.forget_down_track(&removed, down_track);
        Ok(())
    }

    /// How many entries the router's tables hold, summed (transports, tracks, subscriptions,
    /// SSRCs, transport-wide CC state): zero once every transport is gone.
    pub fn table_entries(&self) -> usize {
        self.tracks.len()
            + self.down_tracks.len()
            + self.transports.len()
            + self
                .transports
                .values()
                .map(Transport::entries)
                .sum::<usize>()
            + self.twcc_out.len()
    }

    /// The transport that publishes a track.
    pub fn track_transport(&self, track: TrackId) -> Option<TransportId> {
        self.tracks.get(&track).map(|p| p.transport)
    }

    /// The subscriptions to a track.
    pub fn subscribers(&self, track: TrackId) -> &[DownTrackId] {
        self.tracks
            .get(&track)
            .map_or(&[], |p| p.subscribers.as_slice())
    }

    /// Takes a removed DownTrack's SSRCs off its transport.
    fn forget_down_track(&mut self, removed: &DownTrack, id: DownTrackId) {
        if let Some(on) = self.transports.get_mut(&removed.transport()) {
            on.down_tracks.retain(|_, d| *d != id);
        }
    }

    pub fn down_track(&self, id: DownTrackId) -> Option<&DownTrack> {
        self.down_tracks.get(&id).map(|d| &**d)
    }

    pub fn set_limits(&mut self, id: DownTrackId, limits: LayerLimits) -> Result<(), RouterError> {
        self.down_tracks
            .get(&id)
            .ok_or(RouterError::UnknownDownTrack)?
            .set_limits(limits);
        Ok(())
    }

    pub fn set_muted(&mut self, id: DownTrackId, muted: bool) -> Result<(), RouterError> {
        self.down_tracks
            .get(&id)
            .ok_or(RouterError::UnknownDownTrack)?
            .set_muted(muted);
        Ok(())
    }

    /// What a published track was published with (simulcast SSRCs as bound so far).
    pub fn receiver_config(&self, track: TrackId) -> Option<&TrackConfig> {
        Some(self.tracks.get(&track)?.receiver.config())
    }

    /// The published track an SSRC (media or RTX) belongs to.
    /// The track `transport` publishes under `ssrc`.
    pub fn ssrc_track(&self, transport: TransportId, ssrc: u32) -> Option<TrackId> {
        self.transports.get(&transport)?.ssrcs.get(&ssrc).copied()
    }

    pub fn receiver_counters(&self, track: TrackId) -> Option<ReceiverCounters> {
        Some(self.tracks.get(&track)?.receiver.counters())
    }

    /// The round trip to the track's publisher, measured from NACK to retransmission.
    pub fn publisher_rtt(&self, track: TrackId) -> Option<Duration> {
        self.tracks.get(&track)?.receiver.publisher_rtt()
    }

    /// The latest audio level the track's publisher sent (RFC 6464), for active-speaker use.
    pub fn audio_level(&self, track: TrackId) -> Option<AudioLevel> {
        self.tracks.get(&track)?.receiver.audio_level()
    }

    pub fn keyframe_counters(&self, track: TrackId) -> Option<KeyframeCounters> {
        Some(self.tracks.get(&track)?.keyframes.counters())
    }

    /// What a subscriber last reported of its reception: loss, jitter, round-trip time.
    pub fn down_track_reception(&self, id: DownTrackId) -> Option<SubscriberReception> {
        self.down_tracks.get(&id)?.reception()
    }

    pub fn down_track_counters(&self, id: DownTrackId) -> Option<DownTrackCounters> {
        Some(self.down_tracks.get(&id)?.counters())
    }

    /// One RTP packet from a publisher. A bad packet is counted and dropped; nothing else
    /// changes.
    pub fn handle_rtp(
        &mut self,
        now: Instant,
        transport: TransportId,
        packet: Bytes,
    ) -> Result<(), ReceiveError> {
        self.last_input = Some(now);
        self.counters.rtp_in += 1;
        let Some(on) = self.transports.get_mut(&transport) else {
            return Err(ReceiveError::UnknownTransport);
        };
        let ssrc = packet
            .get(8..12)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        // Looked up in the transport's own table: a packet under an SSRC it did not publish
        // is not taken for anybody else's track.
        let Some(&track) = ssrc.and_then(|ssrc| on.ssrcs.get(&ssrc)) else {
            self.counters.unknown_ssrc += 1;
            return Err(ReceiveError::UnknownSsrc);
        };
        let Some(published) = self.tracks.get_mut(&track) else {
            return Err(ReceiveError::UnknownSsrc);
        };
        // The header is parsed here once, for the transport-wide sequence and the receiver.
        let view = match RtpPacket::parse(&packet) {
            Ok(view) => view,
            Err(e) => {
                self.counters.dropped_in += 1;
                return Err(published.receiver.refuse(ReceiveError::Malformed(e)));
            }
        };
        // Transport-wide feedback reports every packet that arrived, whatever the receiver
        // makes of it: the padding probes and retransmissions it drops are what the
        // publisher's bandwidth estimate ramps up on. Reported lost, they would hold the
        // estimate (and the upper spatial layers) down.
        if let Some(cc) = published.receiver.config().transport_cc {
            if let Some(seq) = transport_seq(&view, cc.ext_id) {
                let media_ssrc = published.receiver.config().streams[0].ssrc;
                let twcc = on.twcc.get_or_insert_with(|| Twcc {
                    recorder: TwccRecorder::new(now),
                    track,
                    media_ssrc,
                    queued: false,
                });
                twcc.recorder.record(seq, now);
            }
        }
        let at = published
            .receiver
            .receive_parsed(now, &view, packet.clone())
            .inspect_err(|e| {
                self.counters.dropped_in += 1;
                // Without the structure nothing of the stream can be selected: a keyframe brings
                // it (at most one request per interval, however many packets wait).
                if let ReceiveError::UnreadableDd { stream } = *e {
                    published.keyframes.request(now, stream);
                }
            })?;
        self.jobs.extend(
            published
                .subscribers
                .iter()
                .map(|&down_track| Job::Forward { down_track, at }),
        );
        Ok(())
    }

    /// Timers: NACKs due to publishers, keyframe requests due, reports due.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.last_input = Some(now);
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
                self.events.push_back(Event::KeyframeRequested { track });
            }
        }
        if self.next_twcc.is_none_or(|at| now >= at) {
            self.next_twcc = Some(now + TWCC_INTERVAL);
            self.queue_transport_cc();
        }
        if self.next_report.is_none_or(|at| now >= at) {
            self.next_report = Some(now + self.config.report_interval);
            self.queue_reports(now);
        }
    }

    /// Transport-wide CC feedback for every publisher transport that received packets.
    fn queue_transport_cc(&mut self) {
        for (&transport, on) in &mut self.transports {
            let Some(twcc) = on.twcc.as_mut().filter(|t| !t.queued) else {
                continue;
            };
            if twcc.recorder.has_pending() {
                twcc.queued = true;
                self.twcc_out.push_back(transport);
            }
        }
    }

    /// A receiver report per published track, a sender report per DownTrack that sent.
    fn queue_reports(&mut self, now: Instant) {
        let sender_ssrc = self.config.rtcp_ssrc;
        for (&track, published) in &mut self.tracks {
            let blocks = published.receiver.report_blocks(now);
            if !blocks.is_empty() {
                let report = ReceiverReport {
                    sender_ssrc,
                    blocks,
                };
                self.rtcp
                    .push_back(PendingRtcp::ReceiverReport { track, report });
            }
        }
        let ntp = self.wall_clock.get_or_insert(anchor(now)).ntp(now);
        for (&down_track, d) in &self.down_tracks {
            if let Some(report) = d.sender_report(now, ntp) {
                self.rtcp
                    .push_back(PendingRtcp::SenderReport { down_track, report });
            }
        }
    }

    /// The next event for the host.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) is next due: always a time once the
    /// router has a track or a subscription and has seen an input (the reports are due at
    /// the first one), so a host that sleeps until then never misses a duty.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let has_work = !self.tracks.is_empty() || !self.down_tracks.is_empty();
        let reports = self.next_report.or(self.last_input.filter(|_| has_work));
        self.tracks
            .values()
            .flat_map(|p| [p.receiver.next_timeout(), p.keyframes.next_timeout()])
            .chain([reports, self.next_twcc.filter(|_| self.has_twcc())])
            .flatten()
            .min()
    }

    fn has_twcc(&self) -> bool {
        self.transports.values().any(|t| t.twcc.is_some())
    }

    /// The next media packet for a subscriber, its header written into `buf`.
    pub fn poll_transmit(&mut self, buf: &mut [u8]) -> Option<Output> {
        while let Some(job) = self.jobs.pop_front() {
            self.touch_next_down_track();
            let result = match job {
                Job::Forward { down_track, at } => self.forward(down_track, at, buf),
                Job::Retransmit {
                    down_track,
                    out_seq,
                } => self.retransmit(down_track, out_seq, buf),
            };
            match result {
                Ok(Some(output)) => return Some(output),
                Ok(None) => {}
                Err(WriteError::Rewrite) => self.counters.write_failures += 1,
                Err(WriteError::NotRemembered) => {}
            }
        }
        None
    }

    /// Loads the next job's DownTrack while this one is written: with hundreds of subscribers
    /// their state is out of cache, and the load overlaps the current subscriber's work
    /// instead of stalling the next.
    fn touch_next_down_track(&self) {
        if let Some(Job::Forward { down_track, .. }) = self.jobs.front() {
            if let Some(next) = self.down_tracks.get(down_track) {
                next.touch();
            }
        }
    }

    fn forward(
        &mut self,
        id: DownTrackId,
        at: PacketRef,
        buf: &mut [u8],
    ) -> Result<Option<Output>, WriteError> {
        let Some(down_track) = self.down_tracks.get(&id) else {
            return Ok(None);
        };
        let Some(published) = self.tracks.get_mut(&down_track.track()) else {
            return Ok(None);
        };
        let Some(packet) = published.receiver.packet(at) else {
            return Ok(None);
        };
        let written = down_track.write(packet, at, buf);
        // A packet to forward came through `handle_rtp`, which set `last_input`.
        if let (Some(stream), Some(now)) = (written.keyframe, self.last_input) {
            published.keyframes.request(now, stream);
        }
        if let Some(layer) = written.layer_changed {
            self.events.push_back(Event::LayerChanged {
                down_track: id,
                layer,
            });
        }
        let transport = down_track.transport();
        Ok(written.result?.map(|transmit| Output {
            transport,
            down_track: id,
            transmit,
        }))
    }

    fn retransmit(
        &mut self,
        id: DownTrackId,
        out_seq: u16,
        buf: &mut [u8],
    ) -> Result<Option<Output>, WriteError> {
        let Some(down_track) = self.down_tracks.get(&id) else {
            return Ok(None);
        };
        let Some(at) = down_track.sent_source(out_seq) else {
            return Ok(None);
        };
        let packet = self
            .tracks
            .get(&down_track.track())
            .and_then(|p| p.receiver.packet(at));
        let Some(packet) = packet else {
            return Ok(None);
        };
        let transmit = down_track.write_retransmission(out_seq, packet, buf)?;
        Ok(Some(Output {
            transport: down_track.transport(),
            down_track: id,
            transmit,
        }))
    }

    fn next_id(&mut self) -> u32 {
        self.next_id += 1;
        self.next_id - 1
    }
}

/// A wall clock anchored at `now` when the host gave none: NTP times then count from the
/// Unix epoch at the router's first use. Relative times (RTT, LSR and DLSR) stay right.
fn anchor(now: Instant) -> WallClock {
    WallClock {
        instant: now,
        unix: Duration::ZERO,
    }
}

/// Packs NACK-due sequence numbers, per stream, into NACK packets.
fn queue_nacks(rtcp: &mut VecDeque<PendingRtcp>, track: TrackId, due: &[(u32, u16)]) {
    let mut current: Option<(u32, NackPairs)> = None;
    for &(ssrc, seq) in due {
        if current.as_ref().is_some_and(|(s, _)| *s != ssrc) {
            flush(rtcp, track, current.take());
        }
        let (_, pairs) = current.get_or_insert_with(|| (ssrc, NackPairs::default()));
        if pairs.push(seq).is_err() {
            flush(rtcp, track, current.take());
            let mut pairs = NackPairs::default();
            // A fresh list holds one number.
            let _ = pairs.push(seq);
            current = Some((ssrc, pairs));
        }
    }
    flush(rtcp, track, current);
}

fn flush(rtcp: &mut VecDeque<PendingRtcp>, track: TrackId, nack: Option<(u32, NackPairs)>) {
    if let Some((media_ssrc, pairs)) = nack {
        rtcp.push_back(PendingRtcp::Nack {
            track,
            media_ssrc,
            pairs,
        });
    }
}

/// The transport-wide sequence number a packet carries, if it is readable.
fn transport_seq(packet: &RtpPacket<'_>, ext_id: u8) -> Option<u16> {
    let value = packet.extension(ext_id)?;
    TransportSequenceNumber::parse(value).ok().map(|seq| seq.0)
}
