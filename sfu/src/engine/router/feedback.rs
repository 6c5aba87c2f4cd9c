//! The router's RTCP: a peer connection's compound datagram parsed once, each item dispatched
//! by SSRC within that connection (a sender report to the track it publishes under that SSRC;
//! receiver report blocks, NACK, PLI and FIR to the subscription the router sends under it;
//! REMB and transport-wide CC feedback to the transport), and the RTCP the router owes,
//! written out: reports, repair and keyframe requests, and congestion feedback toward
//! publishers, so that each sends what its uplink carries (transport-wide CC feedback to a
//! publisher that estimates for itself, REMB to one that negotiated REMB alone).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use smallvec::SmallVec;

use super::{Job, Published, Router, RouterError, RtcpTarget, RtcpTransmit};
use crate::engine::down_track::{DownTrack, SEND_HISTORY};
use crate::engine::id_map::IdMap;
use crate::engine::rtcp::{
    compact_ntp, parse_compound, write_compound, Fir, FirEntries, FirEntry, Nack, NackPairs, Pli,
    ReceiverReport, Remb, RembSsrcs, RtcpFeedback, RtcpWriter, SenderReport, TransportCc,
    WallClock,
};
use crate::engine::track::{DownTrackId, TrackId};
use crate::engine::transport::{Transport, TransportId};

/// Subscriptions one datagram may ask keyframes for without allocating.
type KeyframeAsks = SmallVec<[DownTrackId; 4]>;

/// Transport-wide CC feedback items of one datagram: a viewer sends one per interval.
type TransportCcItems<'a> = SmallVec<[TransportCc<'a>; MAX_TRANSPORT_CC]>;
const MAX_TRANSPORT_CC: usize = 4;

impl Router {
    /// A compound RTCP datagram from a peer connection, parsed once. Items about SSRCs the
    /// transport neither publishes nor receives are skipped: feedback from one peer never
    /// reaches another's streams. A malformed item is counted; the items before it stand.
    pub fn handle_rtcp(
        &mut self,
        now: Instant,
        transport: TransportId,
        datagram: &[u8],
    ) -> Result<(), RouterError> {
        let on = self
            .transports
            .get(&transport)
            .ok_or(RouterError::UnknownTransport)?;
        self.last_input = Some(now);
        self.counters.rtcp_in += 1;
        let arrival = compact_ntp(self.wall_clock.get_or_insert(anchor(now)).ntp(now));
        let mut keyframes = KeyframeAsks::new();
        let mut estimate = None;
        let mut round_trip = None;
        let mut transport_cc = TransportCcItems::new();
        let (mut nacked, mut over_history) = (Nacked::default(), 0);
        let (tracks, down_tracks, jobs) = (&mut self.tracks, &self.down_tracks, &mut self.jobs);
        // The subscription the router sends to this transport under `ssrc` (media, not RTX).
        let sent_under = |ssrc: u32| {
            let id = *on.down_tracks.get(&ssrc)?;
            let down_track: &DownTrack = down_tracks.get(&id)?;
            (down_track.config().ssrc == ssrc).then_some((id, down_track))
        };
        let parsed = parse_compound(datagram, |item| match item {
            RtcpFeedback::SenderReport(report) => {
                let track = on.ssrcs.get(&report.ssrc).and_then(|t| tracks.get_mut(t));
                if let Some(published) = track {
                    published.receiver.on_sender_report(&report, now);
                }
            }
            RtcpFeedback::ReceiverReport(report) => {
                for block in report.blocks.iter() {
                    if let Some((_, down_track)) = sent_under(block.ssrc) {
                        down_track.on_report_block(block, arrival);
                        round_trip = block.round_trip_time(arrival).or(round_trip);
                    }
                }
            }
            RtcpFeedback::Nack(nack) => {
                if let Some((down_track, _)) = sent_under(nack.media_ssrc) {
                    let room = nacked.room(down_track);
                    let before = jobs.len();
                    jobs.extend(nack.pairs.lost().take(room).map(|out_seq| Job::Retransmit {
                        down_track,
                        out_seq,
                    }));
                    let taken = jobs.len() - before;
                    nacked.take(down_track, taken);
                    over_history += nack.pairs.lost().count().saturating_sub(taken) as u64;
                }
            }
            RtcpFeedback::Pli(pli) => ask(&mut keyframes, sent_under(pli.media_ssrc)),
            RtcpFeedback::Fir(fir) => {
                for entry in fir.entries.iter() {
                    ask(&mut keyframes, sent_under(entry.ssrc));
                }
            }
            RtcpFeedback::Remb(remb) => estimate = Some(remb.bitrate_bps),
            // About what the router sent this transport: only a viewer with a send side has
            // a history to match it against.
            RtcpFeedback::TransportCc(feedback)
                if on.send_side().is_some() && transport_cc.len() < MAX_TRANSPORT_CC =>
            {
                transport_cc.push(feedback);
            }
            _ => {}
        });
        if parsed.is_err() {
            self.counters.bad_rtcp += 1;
        }
        self.counters.nacks_over_history += over_history;
        let side = self.transports.get_mut(&transport);
        if let (Some(side), Some(rtt)) = (side.and_then(Transport::send_side_mut), round_trip) {
            side.handle_round_trip(now, rtt);
        }
        // Each feedback hands the estimate to allocation when it moved (or a second passed).
        for feedback in &transport_cc {
            let Some(side) = self
                .transports
                .get_mut(&transport)
                .and_then(Transport::send_side_mut)
            else {
                break;
            };
            match side.handle_feedback(now, feedback, &mut self.feedback_results) {
                Ok(Some(estimate)) => self.on_estimate(now, transport, estimate),
                Ok(None) => {}
                Err(_) => self.counters.bad_rtcp += 1,
            }
        }
        let on = self.transports.get_mut(&transport);
        if let (Some(on), Some(bitrate_bps)) = (on, estimate) {
            let estimate = on.handle_remb(now, bitrate_bps);
            self.on_estimate(now, transport, estimate);
        }
        for down_track in keyframes {
            self.request_keyframe(now, down_track);
        }
        Ok(())
    }

    /// A subscriber's PLI or FIR: a (throttled) keyframe request for the stream it receives
    /// (its simulcast stream, or the one stream of an SVC track).
    fn request_keyframe(&mut self, now: Instant, id: DownTrackId) {
        let Some(down_track) = self.down_tracks.get(&id) else {
            return;
        };
        let stream = down_track.current_layer().map_or(0, |l| l.spatial);
        if let Some(published) = self.tracks.get_mut(&down_track.track()) {
            let simulcast = published.receiver.config().is_simulcast();
            published
                .keyframes
                .request(now, if simulcast { stream } else { 0 });
        }
    }

    /// The transport an RTCP packet goes out on.
    fn transport_of(&self, to: RtcpTarget) -> Option<TransportId> {
        match to {
            RtcpTarget::Publisher(track) => self.tracks.get(&track).map(|p| p.transport),
            RtcpTarget::Subscriber(down_track) => {
                self.down_tracks.get(&down_track).map(|d| d.transport())
            }
        }
    }

    /// The next RTCP packet for a publisher or a subscriber, written into `buf`.
    #[must_use = "what it returns is lost otherwise"]
    pub fn poll_rtcp(&mut self, buf: &mut [u8]) -> Option<RtcpTransmit> {
        let sender_ssrc = self.config.rtcp_ssrc;
        while let Some(transport) = self.twcc_out.pop_front() {
            // Gone when its track was unpublished while it waited.
            let on = self.transports.get_mut(&transport);
            let Some(twcc) = on.and_then(|on| on.take_twcc()) else {
                continue;
            };
            let media_ssrc = media_source(&self.tracks, twcc.track);
            if let Some(len) = twcc.recorder.write_feedback(sender_ssrc, media_ssrc, buf) {
                let to = RtcpTarget::Publisher(twcc.track);
                return Some(RtcpTransmit { transport, to, len });
            }
        }
        while let Some(pending) = self.rtcp.pop_front() {
            let (to, item) = self.rtcp_item(pending);
            let Some(transport) = self.transport_of(to) else {
                // Its track or subscription went while the item waited.
                continue;
            };
            // Reports go out as compound packets with the SDES CNAME RFC 3550 asks for.
            let written = match item {
                RtcpFeedback::ReceiverReport(_) | RtcpFeedback::SenderReport(_) => {
                    write_compound(&mut self.rtcp_writer, &[item], &[], buf)
                }
                _ => self.rtcp_writer.write(&item, buf),
            };
            if let Ok(len) = written {
                return Some(RtcpTransmit { transport, to, len });
            }
        }
        None
    }

    fn rtcp_item(&mut self, pending: PendingRtcp) -> (RtcpTarget, RtcpFeedback<'static>) {
        let sender_ssrc = self.config.rtcp_ssrc;
        match pending {
            PendingRtcp::ReceiverReport { track, report } => (
                RtcpTarget::Publisher(track),
                RtcpFeedback::ReceiverReport(report),
            ),
            PendingRtcp::SenderReport { down_track, report } => (
                RtcpTarget::Subscriber(down_track),
                RtcpFeedback::SenderReport(report),
            ),
            PendingRtcp::Pli { track, media_ssrc } => {
                self.counters.keyframe_requests_sent += 1;
                let pli = Pli {
                    sender_ssrc,
                    media_ssrc,
                };
                (RtcpTarget::Publisher(track), RtcpFeedback::Pli(pli))
            }
            PendingRtcp::Fir {
                track,
                media_ssrc,
                seq_nr,
            } => {
                self.counters.keyframe_requests_sent += 1;
                let mut entries = FirEntries::default();
                // One entry fits an empty list.
                let _ = entries.push(FirEntry {
                    ssrc: media_ssrc,
                    seq_nr,
                });
                let fir = Fir {
                    sender_ssrc,
                    entries,
                };
                (RtcpTarget::Publisher(track), RtcpFeedback::Fir(fir))
            }
            PendingRtcp::Nack {
                track,
                media_ssrc,
                pairs,
            } => {
                self.counters.nacks_sent += 1;
                let nack = Nack {
                    sender_ssrc,
                    media_ssrc,
                    pairs,
                };
                (RtcpTarget::Publisher(track), RtcpFeedback::Nack(nack))
            }
            PendingRtcp::Remb {
                track,
                bitrate_bps,
                ssrcs,
            } => {
                self.counters.rembs_sent += 1;
                let remb = Remb {
                    sender_ssrc,
                    bitrate_bps,
                    ssrcs,
                };
                (RtcpTarget::Publisher(track), RtcpFeedback::Remb(remb))
            }
        }
    }
}

impl Router {
    /// Transport-wide CC feedback for every publisher transport that received packets, and a
    /// REMB for every REMB publisher whose estimate is due to be told.
    pub(super) fn queue_uplink_feedback(&mut self, now: Instant) {
        for (&transport, on) in &mut self.transports {
            if on.poll_twcc_due() {
                self.twcc_out.push_back(transport);
            }
            let Some((track, bitrate_bps)) = on.poll_remb(now) else {
                continue;
            };
            let mut ssrcs = RembSsrcs::default();
            let media = on.tracks.iter().filter_map(|t| self.tracks.get(t));
            for stream in media.flat_map(|p| p.receiver.config().streams.iter()) {
                // A stream not bound yet has no SSRC; past the list's room the rest go
                // unnamed (the REMB still caps the whole transport).
                if stream.ssrc != 0 && ssrcs.push(stream.ssrc).is_err() {
                    break;
                }
            }
            self.rtcp.push_back(PendingRtcp::Remb {
                track,
                bitrate_bps,
                ssrcs,
            });
        }
    }

    /// Whether any publisher transport gets transport-wide CC feedback or REMB. Only a
    /// transport that publishes a track gets either, so only publishers are looked at: the
    /// timers ask on every turn, and the viewers' transports are hundreds.
    pub(super) fn has_uplink_feedback(&self) -> bool {
        self.tracks.values().any(|published| {
            self.transports
                .get(&published.transport)
                .is_some_and(Transport::has_uplink_feedback)
        })
    }

    /// A receiver report per published track, a sender report per DownTrack that sent.
    pub(super) fn queue_reports(&mut self, now: Instant) {
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
}

/// The SSRC transport-wide feedback names as its media source: one the publisher sends, read
/// when the feedback is written. A sender may ignore feedback about an SSRC it does not send,
/// and a stream named by rid or mid has none until its first packet: fixed at the transport's
/// first packet, it was 0 whenever a simulcast track's upper stream spoke first, and the
/// publisher ignored every feedback (its estimate sank to its floor, its upper streams
/// stopped). The track's first bound media SSRC, else an RTX one.
fn media_source(tracks: &IdMap<TrackId, Published>, track: TrackId) -> u32 {
    let Some(published) = tracks.get(&track) else {
        return 0;
    };
    let streams = &published.receiver.config().streams;
    let media = streams.iter().map(|s| s.ssrc).find(|&ssrc| ssrc != 0);
    let repair = || streams.iter().find_map(|s| s.rtx_ssrc);
    media.or_else(repair).unwrap_or(0)
}

fn ask(asks: &mut KeyframeAsks, target: Option<(DownTrackId, &DownTrack)>) {
    if let Some((id, _)) = target {
        if !asks.contains(&id) {
            asks.push(id);
        }
    }
}

/// RTCP the router owes publishers.
#[derive(Debug, Clone, Copy)]
#[expect(
    clippy::large_enum_variant,
    reason = "NACK pairs stay inline so a NACK costs no allocation; the queue holds a handful"
)]
pub(super) enum PendingRtcp {
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

/// A wall clock anchored at `now` when the host gave none: NTP times then count from the
/// Unix epoch at the router's first use. Relative times (RTT, LSR and DLSR) stay right.
fn anchor(now: Instant) -> WallClock {
    WallClock {
        instant: now,
        unix: Duration::ZERO,
    }
}

/// Packs NACK-due sequence numbers, per stream, into NACK packets.
pub(super) fn queue_nacks(rtcp: &mut VecDeque<PendingRtcp>, track: TrackId, due: &[(u32, u16)]) {
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

/// The retransmissions one datagram asked of each subscription so far: at most
/// [`SEND_HISTORY`] each, what it remembers. A NACK item names up to 1,088 sequence numbers
/// in 256 bytes, and a datagram may carry many naming the same packets: without the bound a
/// few kilobytes would queue thousands of jobs.
#[derive(Default)]
struct Nacked(SmallVec<[(DownTrackId, usize); 2]>);

impl Nacked {
    /// How many more `down_track` may be asked in this datagram.
    fn room(&self, down_track: DownTrackId) -> usize {
        let taken = self
            .0
            .iter()
            .find(|(d, _)| *d == down_track)
            .map_or(0, |e| e.1);
        SEND_HISTORY - taken
    }

    fn take(&mut self, down_track: DownTrackId, count: usize) {
        match self.0.iter_mut().find(|(d, _)| *d == down_track) {
            Some(entry) => entry.1 += count,
            None => self.0.push((down_track, count)),
        }
    }
}
