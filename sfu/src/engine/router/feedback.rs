//! The router's RTCP: a peer connection's compound datagram parsed once, each item dispatched
//! by SSRC within that connection (a sender report to the track it publishes under that SSRC;
//! receiver report blocks, NACK, PLI and FIR to the subscription the router sends under it;
//! REMB to the transport), and the RTCP the router owes, written out.

use std::time::Instant;

use smallvec::SmallVec;

use super::{Job, PendingRtcp, Router, RouterError, RtcpTarget, RtcpTransmit};
use crate::engine::bwe::BandwidthEstimator;
use crate::engine::down_track::DownTrack;
use crate::engine::rtcp::{
    compact_ntp, parse_compound, write_compound, Fir, FirEntries, FirEntry, Nack, Pli, Remb,
    RtcpFeedback, RtcpWriter, TransportCc,
};
use crate::engine::track::DownTrackId;
use crate::engine::transport::TransportId;

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
        let arrival = compact_ntp(self.wall_clock.get_or_insert(super::anchor(now)).ntp(now));
        let mut keyframes = KeyframeAsks::new();
        let mut estimate = None;
        let mut round_trip = None;
        let mut transport_cc = TransportCcItems::new();
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
                    jobs.extend(nack.pairs.lost().map(|out_seq| Job::Retransmit {
                        down_track,
                        out_seq,
                    }));
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
                if on.send.is_some() && transport_cc.len() < MAX_TRANSPORT_CC =>
            {
                transport_cc.push(feedback);
            }
            _ => {}
        });
        if parsed.is_err() {
            self.counters.bad_rtcp += 1;
        }
        // The viewer's round trip spaces its estimator's decreases: without it they wait
        // the estimator's default (200 ms) after each change, and a viewer whose link just
        // narrowed is sent too much for that much longer.
        let side = self
            .transports
            .get_mut(&transport)
            .and_then(|t| t.send.as_deref_mut());
        if let Some((side, rtt)) = side.zip(round_trip) {
            side.estimator.on_round_trip_time(now, rtt);
        }
        for feedback in &transport_cc {
            self.on_transport_cc(now, transport, feedback);
        }
        if let Some(bitrate_bps) = estimate {
            self.on_remb(now, transport, bitrate_bps);
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
            let Some(twcc) = on.and_then(|on| on.twcc.as_mut()) else {
                continue;
            };
            twcc.queued = false;
            let media_ssrc = super::uplink::media_source(&self.tracks, twcc.track);
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

fn ask(asks: &mut KeyframeAsks, target: Option<(DownTrackId, &DownTrack)>) {
    if let Some((id, _)) = target {
        if !asks.contains(&id) {
            asks.push(id);
        }
    }
}
