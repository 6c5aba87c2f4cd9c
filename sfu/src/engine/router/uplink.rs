//! Congestion feedback toward publishers, so that each sends what its uplink carries:
//! transport-wide CC feedback to a publisher that estimates for itself, REMB to one that
//! negotiated REMB alone (the router estimates its uplink for it).

use std::time::Instant;

use rtp_ext::ext::{AbsSendTime, HeaderExtension, TransportSequenceNumber};
use rtp_ext::rtp::RtpPacket;

use super::{PendingRtcp, Published, Router};
use crate::engine::id_map::IdMap;
use crate::engine::publisher_estimate::PublisherEstimate;
use crate::engine::rtcp::RembSsrcs;
use crate::engine::track::TrackId;
use crate::engine::transport::{Transport, Twcc};
use crate::engine::twcc::TwccRecorder;

/// Notes a publisher's packet for the feedback its transport gets.
///
/// Every packet that arrived counts, whatever the receiver makes of it: the padding probes
/// and retransmissions it drops are what the publisher's bandwidth estimate ramps up on.
/// Reported lost, they would hold the estimate (and the upper spatial layers) down.
pub(super) fn note_arrival(
    on: &mut Transport,
    published: &Published,
    track: TrackId,
    packet: &RtpPacket<'_>,
    now: Instant,
) {
    let config = published.receiver.config();
    if let Some(cc) = config.transport_cc {
        if let Some(seq) = read::<TransportSequenceNumber>(packet, cc.ext_id) {
            let twcc = on.twcc.get_or_insert_with(|| Twcc {
                recorder: TwccRecorder::new(now),
                track,
                queued: false,
            });
            twcc.recorder.record(seq.0, now);
        }
        return;
    }
    let Some(remb) = config.remb else {
        return;
    };
    if let Some(sent) = read::<AbsSendTime>(packet, remb.abs_send_time_ext_id) {
        on.remb
            .get_or_insert_with(|| Box::new(PublisherEstimate::new(track, now)))
            .record(now, sent, packet.as_bytes().len());
    }
}

/// The SSRC transport-wide feedback names as its media source: one the publisher sends, read
/// when the feedback is written. A sender may ignore feedback about an SSRC it does not send,
/// and a stream named by rid or mid has none until its first packet: fixed at the transport's
/// first packet, it was 0 whenever a simulcast track's upper stream spoke first, and the
/// publisher ignored every feedback (its estimate sank to its floor, its upper streams
/// stopped). The track's first bound media SSRC, else an RTX one.
pub(super) fn media_source(tracks: &IdMap<TrackId, Published>, track: TrackId) -> u32 {
    let Some(published) = tracks.get(&track) else {
        return 0;
    };
    let streams = &published.receiver.config().streams;
    let media = streams.iter().map(|s| s.ssrc).find(|&ssrc| ssrc != 0);
    let repair = || streams.iter().find_map(|s| s.rtx_ssrc);
    media.or_else(repair).unwrap_or(0)
}

/// A header extension the packet carries, if it is readable.
fn read<'a, E: HeaderExtension<'a>>(packet: &RtpPacket<'a>, id: u8) -> Option<E> {
    E::parse(packet.extension(id)?).ok()
}

/// The transport's feedback no longer goes through an unpublished track: through another of
/// its tracks if it has one (REMB), or it starts over with the next packet (transport-wide CC,
/// whose feedback names the track's SSRC).
pub(super) fn forget_track(on: &mut Transport, track: TrackId) {
    if on.twcc.as_ref().is_some_and(|t| t.track == track) {
        on.twcc = None;
    }
    if on.remb.as_ref().is_some_and(|r| r.track == track) {
        match on.tracks.first() {
            Some(&other) => on.remb.iter_mut().for_each(|r| r.track = other),
            None => on.remb = None,
        }
    }
}

impl Router {
    /// Transport-wide CC feedback for every publisher transport that received packets, and a
    /// REMB for every REMB publisher whose estimate is due to be told.
    pub(super) fn queue_uplink_feedback(&mut self, now: Instant) {
        for (&transport, on) in &mut self.transports {
            if let Some(twcc) = on.twcc.as_mut().filter(|t| !t.queued) {
                if twcc.recorder.has_pending() {
                    twcc.queued = true;
                    self.twcc_out.push_back(transport);
                }
            }
            let Some(remb) = on.remb.as_mut() else {
                continue;
            };
            let Some(bitrate_bps) = remb.poll_remb(now) else {
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
                track: remb.track,
                bitrate_bps,
                ssrcs,
            });
        }
    }

    /// Whether any publisher transport gets transport-wide CC feedback or REMB.
    pub(super) fn has_uplink_feedback(&self) -> bool {
        self.transports
            .values()
            .any(|t| t.twcc.is_some() || t.remb.is_some())
    }
}
