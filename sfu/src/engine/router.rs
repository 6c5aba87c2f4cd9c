//! The Router: published tracks and their subscriptions, driven by calls. A media server embeds
//! it and runs the loop: feed packets and RTCP in with `handle_*`, then drain
//! [`poll_transmit`](Router::poll_transmit) (media to subscribers) and
//! [`poll_rtcp`](Router::poll_rtcp) (feedback to publishers) until they return `None`, and call
//! [`handle_timeout`](Router::handle_timeout) at [`poll_timeout`](Router::poll_timeout).
//! Nothing here reads a clock or touches a socket: every input carries `now`.

mod allocate;
mod feedback;
mod queries;
mod send;
mod types;

pub use queries::DownTrackInfo;
pub use types::{
    Event, KeyframeRequest, Output, RouterConfig, RouterCounters, RouterError, RtcpTarget,
    RtcpTransmit,
};

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rtp_ext::rtp::RtpPacket;
use selector::LayerLimits;
use smallvec::SmallVec;

use super::allocation::LayerOrder;
use super::binding;
use super::down_track::DownTrack;
use super::id_map::IdMap;
use super::keyframe::KeyframeRequester;
use super::receiver::{PacketRef, ReceiveError, Receiver};
use super::rtcp::{NackPairs, ReceiverReport, RembSsrcs, RtcpWireWriter, SenderReport, WallClock};
use super::speech::SpeechLevel;
use super::track::{DownTrackConfig, DownTrackId, StreamConfig, TrackConfig, TrackId};
use super::transport::{Transport, TransportId, TWCC_INTERVAL};

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

#[derive(Debug)]
struct Published {
    transport: TransportId,
    receiver: Receiver,
    keyframes: KeyframeRequester,
    subscribers: Vec<DownTrackId>,
    /// FIR command sequence number (RFC 5104 4.3.1.1): one more per new request.
    fir_seq: u8,
    /// The order allocation climbs its layers in, if the host set one.
    layer_order: Option<LayerOrder>,
    /// Allocation climbs its layers before other tracks' (the host's choice: the dominant
    /// speaker's video).
    priority: bool,
    /// Whether its packets go to its subscribers (the host holds back all but the loudest
    /// audio tracks, say). It is received, repaired and reported either way.
    forwarded: bool,
    /// How loud it is, for an audio track whose publisher writes its level.
    speech: SpeechLevel,
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
    Remb {
        track: TrackId,
        bitrate_bps: u64,
        ssrcs: RembSsrcs,
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
    rtcp: VecDeque<PendingRtcp>,
    events: VecDeque<Event>,
    /// Publisher transports whose transport-wide CC feedback is due: written straight into
    /// the host's buffer when polled.
    twcc_out: VecDeque<TransportId>,
    next_twcc: Option<Instant>,
    rtcp_writer: RtcpWireWriter,
    nack_scratch: Vec<(u32, u16)>,
    transport_scratch: Vec<TransportId>,
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

    /// A new peer connection: what it publishes and receives is named by it from now on.
    #[must_use = "what it returns is lost otherwise"]
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
        if self.transports.remove(&id).is_some_and(|t| t.paced()) {
            self.paced -= 1;
        }
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
        // Streams named by rid or mid have no SSRCs yet: their first packets bind them.
        let ssrcs = config
            .streams
            .iter()
            .filter(|_| !config.stream_ids.binds())
            .flat_map(|s| [Some(s.ssrc), s.rtx_ssrc])
            .flatten();
        if !on.publish(id, ssrcs) {
            return Err(RouterError::SsrcInUse);
        }
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
                layer_order: None,
                priority: false,
                forwarded: true,
                speech: SpeechLevel::default(),
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
            on.unpublish(track);
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
        let transport_cc = config.transport_cc_ext_id.is_some();
        let initial_bps = self.config.initial_estimate_bps;
        let estimating = on
            .subscribe(id, ssrcs.into_iter().flatten(), transport_cc, initial_bps)
            .ok_or(RouterError::SsrcInUse)?;
        let down_track = DownTrack::new(
            transport,
            track,
            published.receiver.config(),
            config,
            limits,
        );
        published.subscribers.push(id);
        self.down_tracks.insert(id, Box::new(down_track));
        // Room for what each report interval queues per subscription (a sender report, an
        // allocation and a layer event), made now rather than at the first interval.
        let subscriptions = self.down_tracks.len();
        self.rtcp
            .reserve(subscriptions.saturating_sub(self.rtcp.len()));
        self.events
            .reserve((2 * subscriptions).saturating_sub(self.events.len()));
        self.transport_scratch.reserve(
            self.transports
                .len()
                .saturating_sub(self.transport_scratch.len()),
        );
        // A viewer that estimates is allocated from its initial estimate before anything is
        // forwarded to it, so its first packets already fit; a later subscription on it from
        // the estimate it has then (or its selector would aim at the top layer until the next
        // feedback, and wait for a keyframe of a simulcast stream it is not going to get).
        if let Some(now) = self.last_input {
            if estimating {
                self.on_estimate(now, transport, self.config.initial_estimate_bps);
            } else {
                self.reallocate(now, transport);
            }
        }
        Ok(id)
    }

    /// Ends a subscription: nothing more is forwarded to it and its SSRCs leave its transport.
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

    /// Takes a removed DownTrack's SSRCs off its transport.
    fn forget_down_track(&mut self, removed: &DownTrack, id: DownTrackId) {
        if let Some(on) = self.transports.get_mut(&removed.transport()) {
            on.down_tracks.retain(|_, d| *d != id);
        }
    }

    /// Sets the layers a subscription may forward (a ceiling; the switch happens at the next switch
    /// point).
    pub fn set_limits(&mut self, id: DownTrackId, limits: LayerLimits) -> Result<(), RouterError> {
        let down_track = self
            .down_tracks
            .get(&id)
            .ok_or(RouterError::UnknownDownTrack)?;
        down_track.set_limits(limits);
        let transport = down_track.transport();
        self.on_limits_changed(transport);
        Ok(())
    }

    /// Pauses a subscription (nothing forwarded) or resumes it (at the next switch point, with a
    /// keyframe request through the throttle).
    pub fn set_muted(&mut self, id: DownTrackId, muted: bool) -> Result<(), RouterError> {
        self.down_tracks
            .get(&id)
            .ok_or(RouterError::UnknownDownTrack)?
            .set_muted(muted);
        Ok(())
    }

    /// The order in which allocation climbs a track's layers for viewers short of bandwidth
    /// (`None`: the default, every temporal layer of the base spatial layer first, then each
    /// spatial layer at full frame rate).
    pub fn set_layer_order(
        &mut self,
        track: TrackId,
        order: Option<LayerOrder>,
    ) -> Result<(), RouterError> {
        self.tracks
            .get_mut(&track)
            .ok_or(RouterError::UnknownTrack)?
            .layer_order = order;
        Ok(())
    }

    /// Gives a track's video the first share of its viewers' estimates (the dominant
    /// speaker's): allocation climbs it to the top before the others leave their lowest step.
    pub fn set_priority(&mut self, track: TrackId, priority: bool) -> Result<(), RouterError> {
        self.tracks
            .get_mut(&track)
            .ok_or(RouterError::UnknownTrack)?
            .priority = priority;
        Ok(())
    }

    /// Whether a track's packets go to its subscribers: a host that forwards only the
    /// loudest audio tracks holds the others back. Held back, a track is still received,
    /// repaired and reported, and its speech level kept.
    pub fn set_forwarded(&mut self, track: TrackId, forwarded: bool) -> Result<(), RouterError> {
        self.tracks
            .get_mut(&track)
            .ok_or(RouterError::UnknownTrack)?
            .forwarded = forwarded;
        Ok(())
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
        let Some(track) = known.copied().or_else(|| self.bind(transport, &view)) else {
            self.counters.unknown_ssrc += 1;
            return Err(ReceiveError::UnknownSsrc);
        };
        let (Some(published), Some(on)) = (
            self.tracks.get_mut(&track),
            self.transports.get_mut(&transport),
        ) else {
            return Err(ReceiveError::UnknownSsrc);
        };
        on.handle_arrival(now, track, published.receiver.config(), &view);
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

    /// Binds the packet's SSRC to the stream of the transport's tracks that its rid, mid or
    /// payload type names, if any.
    fn bind(&mut self, transport: TransportId, packet: &RtpPacket<'_>) -> Option<TrackId> {
        let ssrc = packet.fields().ssrc;
        let (track, index, ssrcs) =
            self.transports
                .get(&transport)?
                .tracks
                .iter()
                .find_map(|&track| {
                    let config = self.tracks.get(&track)?.receiver.config();
                    let (index, repair) = binding::claim(config, packet)?;
                    let stream = *config.streams.get(index)?;
                    let ssrcs = binding::bound(&config.stream_ids, stream, ssrc, repair);
                    Some((track, index, ssrcs))
                })?;
        self.bind_stream(track, index, ssrcs).ok()?;
        self.events.push_back(Event::StreamBound {
            transport,
            track,
            stream: u8::try_from(index).unwrap_or(u8::MAX),
            ssrcs,
        });
        Some(track)
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
