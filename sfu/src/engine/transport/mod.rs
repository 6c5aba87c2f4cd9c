//! One peer connection: the SSRCs it publishes under (RFC 3550 section 8: SSRCs are unique
//! within one RTP session, not across a node), the SSRCs the router sends to it, and the
//! congestion control of both directions. As a publisher it is owed feedback: transport-wide
//! CC (`twcc`) or, when it negotiated REMB alone, an estimate of its uplink
//! (`publisher_estimate`). As a viewer it has an estimate (its REMB, or its transport-wide CC
//! feedback through the `send_side`), a `pacer` and `prober` clusters.
//!
//! Every packet and RTCP datagram comes in naming its transport and is looked up there only,
//! so no peer can write into, or answer for, another's streams. The router dispatches between
//! receivers, down tracks and transports; what concerns one transport alone is done here:
//! its SSRC tables, the feedback it is owed as a publisher and its allocation as a viewer.
//! Its send side and pacer are parts of their own, which the router reaches through
//! `Transport::send_side` and `Transport::pacer` rather than through a method here for
//! each of theirs.

mod pacer;
mod prober;
mod publisher_estimate;
mod send_side;
mod twcc;

pub(super) use pacer::Paced;
pub use pacer::{MAX_HOLD, PACING_BURST, PACING_PERCENT};
pub use publisher_estimate::{PUBLISHER_INITIAL_BPS, REMB_INTERVAL};
pub(super) use send_side::{SendSide, RESULTS_CAPACITY};
pub(super) use twcc::{Twcc, TWCC_INTERVAL};

use std::time::Instant;

use rtp_ext::ext::{AbsSendTime, HeaderExtension, TransportSequenceNumber};
use rtp_ext::rtp::RtpPacket;
use selector::Layer;
use smallvec::SmallVec;

use super::allocation::{Allocation, Fit, Weighed};
use super::bwe::EstimatorConfig;
use super::prefetch::prefetch_lines;
use super::track::{DownTrackId, TrackConfig, TrackId};
use publisher_estimate::PublisherEstimate;
use twcc::TwccRecorder;

/// A peer connection, as the router names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TransportId(pub u32);

/// A transport's SSRCs and whose they are. A peer connection has a handful (a media and an
/// RTX SSRC per track), so they sit inline and are searched in order: no allocation per
/// transport, and a lookup as fast as a hash probe at that size.
#[derive(Debug)]
pub(super) struct SsrcTable<V>(SmallVec<[(u32, V); 4]>);

impl<V> Default for SsrcTable<V> {
    fn default() -> Self {
        Self(SmallVec::new())
    }
}

impl<V: Copy> SsrcTable<V> {
    pub fn get(&self, ssrc: &u32) -> Option<&V> {
        self.0.iter().find(|(s, _)| s == ssrc).map(|(_, v)| v)
    }

    pub fn contains_key(&self, ssrc: &u32) -> bool {
        self.get(ssrc).is_some()
    }

    /// Callers check [`contains_key`](Self::contains_key) first: an SSRC is entered once.
    pub fn insert(&mut self, ssrc: u32, value: V) {
        self.0.push((ssrc, value));
    }

    pub fn remove(&mut self, ssrc: &u32) {
        self.0.retain(|(s, _)| s != ssrc);
    }

    pub fn retain(&mut self, mut keep: impl FnMut(&u32, &V) -> bool) {
        self.0.retain(|(s, v)| keep(s, v));
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.0.iter().map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }
}

/// What a new allocation changed.
#[derive(Debug)]
pub(super) struct Reallocated {
    /// The subscriptions whose allocated layer changes, with the layer.
    pub changes: SmallVec<[(DownTrackId, Layer); 4]>,
    /// Whether it was paced for the first time.
    pub paced: bool,
    /// Whether a probe cluster started.
    pub probed: bool,
}

/// One peer connection's state, as the router keeps it.
#[derive(Debug, Default)]
pub(super) struct Transport {
    /// Media and RTX SSRCs of the tracks it publishes.
    pub ssrcs: SsrcTable<TrackId>,
    pub tracks: SmallVec<[TrackId; 4]>,
    /// Media and RTX SSRCs the router sends to it, and whose they are.
    pub down_tracks: SsrcTable<DownTrackId>,
    /// Transport-wide CC of what it publishes.
    twcc: Option<Twcc>,
    /// The uplink estimate of what it publishes, when it negotiated REMB and not
    /// transport-wide CC. Boxed: most transports have none.
    remb: Option<Box<PublisherEstimate>>,
    /// Layer allocation toward it, once it has a bandwidth estimate.
    allocation: Option<Allocation>,
    /// Its pacer and the jobs waiting for it, from its first estimate on.
    pacing: Option<Paced>,
    /// Transport-wide CC toward it, once a subscription on it negotiated the extension. Boxed:
    /// its history and windows are kilobytes, and most transports only publish.
    send: Option<Box<SendSide>>,
}

impl Transport {
    /// Entries held: zero once it published and received nothing.
    pub fn entries(&self) -> usize {
        self.ssrcs.len()
            + self.tracks.len()
            + self.down_tracks.len()
            + usize::from(self.twcc.is_some())
            + usize::from(self.remb.is_some())
            + usize::from(self.allocation.is_some())
            + usize::from(self.pacing.is_some())
            + usize::from(self.send.is_some())
    }

    /// Enters a track it publishes under `ssrcs` (none of them the transport's yet: `false`
    /// otherwise).
    pub fn publish(&mut self, track: TrackId, ssrcs: impl Iterator<Item = u32> + Clone) -> bool {
        if ssrcs.clone().any(|ssrc| self.ssrcs.contains_key(&ssrc)) {
            return false;
        }
        for ssrc in ssrcs {
            self.ssrcs.insert(ssrc, track);
        }
        self.tracks.push(track);
        true
    }

    /// Forgets a track it published: its SSRCs, and the feedback that went through it, which
    /// goes through another of its tracks if it has one (REMB), or starts over with the next
    /// packet (transport-wide CC, whose feedback names the track's SSRC).
    pub fn unpublish(&mut self, track: TrackId) {
        self.ssrcs.retain(|_, t| *t != track);
        self.tracks.retain(|t| *t != track);
        if self.twcc.as_ref().is_some_and(|t| t.track == track) {
            self.twcc = None;
        }
        if self.remb.as_ref().is_some_and(|r| r.track == track) {
            match self.tracks.first() {
                Some(&other) => self.remb.iter_mut().for_each(|r| r.track = other),
                None => self.remb = None,
            }
        }
    }

    /// Enters a subscription's SSRCs (`ssrcs`, none of them the transport's yet: `false`
    /// otherwise); one that negotiated transport-wide CC (`transport_cc`) starts the send
    /// side, with its estimate at `initial_bps`, if there is none yet. Whether it did: the
    /// transport estimates from now on.
    pub fn subscribe(
        &mut self,
        id: DownTrackId,
        ssrcs: impl Iterator<Item = u32> + Clone,
        transport_cc: bool,
        initial_bps: u64,
    ) -> Option<bool> {
        if ssrcs
            .clone()
            .any(|ssrc| self.down_tracks.contains_key(&ssrc))
        {
            return None;
        }
        for ssrc in ssrcs {
            self.down_tracks.insert(ssrc, id);
        }
        let estimating = transport_cc && self.send.is_none();
        if estimating {
            self.send = Some(Box::new(SendSide::new(initial_bps)));
        }
        Some(estimating)
    }

    /// Notes a publisher's packet of `track` for the feedback its transport gets.
    ///
    /// Every packet that arrived counts, whatever the receiver makes of it: the padding probes
    /// and retransmissions it drops are what the publisher's bandwidth estimate ramps up on.
    /// Reported lost, they would hold the estimate (and the upper spatial layers) down.
    pub fn handle_arrival(
        &mut self,
        now: Instant,
        track: TrackId,
        config: &TrackConfig,
        packet: &RtpPacket<'_>,
    ) {
        if let Some(cc) = config.transport_cc {
            if let Some(seq) = read::<TransportSequenceNumber>(packet, cc.ext_id) {
                let twcc = self.twcc.get_or_insert_with(|| Twcc {
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
            self.remb
                .get_or_insert_with(|| Box::new(PublisherEstimate::new(track, now)))
                .record(now, sent, packet.as_bytes().len());
        }
    }

    /// Whether it gets transport-wide CC feedback or REMB as a publisher.
    pub fn has_uplink_feedback(&self) -> bool {
        self.twcc.is_some() || self.remb.is_some()
    }

    /// Whether transport-wide CC feedback is now due for what it published, and not queued
    /// yet: it is queued from now on.
    pub fn poll_twcc_due(&mut self) -> bool {
        let Some(twcc) = self.twcc.as_mut().filter(|t| !t.queued) else {
            return false;
        };
        twcc.queued = twcc.recorder.has_pending();
        twcc.queued
    }

    /// Its queued transport-wide CC feedback, to be written now (no longer queued).
    pub fn take_twcc(&mut self) -> Option<&mut Twcc> {
        let twcc = self.twcc.as_mut()?;
        twcc.queued = false;
        Some(twcc)
    }

    /// The REMB due to it as a publisher at `now`, if any: the track it goes through, and
    /// the bitrate.
    pub fn poll_remb(&mut self, now: Instant) -> Option<(TrackId, u64)> {
        let remb = self.remb.as_mut()?;
        Some((remb.track, remb.poll_remb(now)?))
    }

    /// Asks for what writing its next packet reads (this entry: its pacer; its send side)
    /// ahead of it: with hundreds of viewers each one's state is out of cache by its turn.
    pub fn touch(&self) {
        prefetch_lines(self, size_of::<Self>());
        if let Some(send) = &self.send {
            send.touch();
        }
    }

    /// The send side, toward a viewer that negotiated transport-wide CC: its estimator, its
    /// feedback, round trips and probe clusters are the router's to drive through it.
    pub fn send_side(&self) -> Option<&SendSide> {
        self.send.as_deref()
    }

    /// The send side, to drive: see [`send_side`](Self::send_side).
    pub fn send_side_mut(&mut self) -> Option<&mut SendSide> {
        self.send.as_deref_mut()
    }

    /// Its pacer and the jobs waiting for it, from its first estimate on: the router holds
    /// jobs in it, takes them out when it opens and charges it with what left.
    pub fn pacer(&self) -> Option<&Paced> {
        self.pacing.as_ref()
    }

    /// Its pacer, to drive: see [`pacer`](Self::pacer).
    pub fn pacer_mut(&mut self) -> Option<&mut Paced> {
        self.pacing.as_mut()
    }

    /// Its REMB as a viewer: a ceiling on its transport-wide estimate when it has one, the
    /// estimate itself when it has not, up to what the server grants one viewer (a REMB may
    /// say up to 2^64 bits per second, past what the rates derived from it can hold).
    /// Returns the estimate.
    pub fn handle_remb(&mut self, now: Instant, bitrate_bps: u64) -> u64 {
        match self.send.as_deref_mut() {
            Some(side) => side.handle_remb(now, bitrate_bps),
            None => bitrate_bps.min(EstimatorConfig::default().max_bps),
        }
    }

    /// Its bandwidth estimate as a viewer: what its layers are allocated to and its pacer
    /// paces at. Whether it was paced for the first time.
    pub fn set_estimate(&mut self, now: Instant, bitrate_bps: u64) -> bool {
        self.allocation
            .get_or_insert_with(Allocation::default)
            .estimate_bps = bitrate_bps;
        self.pace(now, bitrate_bps)
    }

    /// Whether it has a bandwidth estimate as a viewer: its layers are allocated to it.
    pub fn has_estimate(&self) -> bool {
        self.allocation.is_some()
    }

    /// Forgets when its layers last went up, so the next up-switch is not held back by the
    /// interval; whether it has an allocation.
    pub fn forget_last_up(&mut self) -> bool {
        self.allocation.as_mut().map(|a| a.last_up = None).is_some()
    }

    /// Fits its subscriptions (`video`, beside `audio_bps` of audio) to its estimate, paces
    /// and probes as that decided; `None` before it has an estimate.
    pub fn reallocate(
        &mut self,
        now: Instant,
        audio_bps: u64,
        video: &[Weighed],
    ) -> Option<Reallocated> {
        let allocation = self.allocation.as_mut()?;
        let estimator = self.send.as_deref().map(SendSide::estimator);
        let Fit {
            changes,
            pacing_bps,
            probe,
        } = allocation.fit(now, audio_bps, video, estimator);
        let paced = pacing_bps.is_some_and(|bps| self.pace(now, bps));
        let probed = probe.is_some_and(|(target, media)| self.start_probe(now, target, media));
        Some(Reallocated {
            changes,
            paced,
            probed,
        })
    }

    /// Its pacing rate follows `estimate_bps` from `now`: paced from its first estimate on.
    /// Whether it was paced for the first time.
    fn pace(&mut self, now: Instant, estimate_bps: u64) -> bool {
        let first = self.pacing.is_none();
        self.pacing
            .get_or_insert_with(|| Paced::new(estimate_bps))
            .set_estimate(now, estimate_bps);
        first
    }

    /// Retransmissions within what its estimate leaves over: whether one of `bytes` may go
    /// at `now` (always, before it has an estimate).
    pub fn take_rtx(&mut self, now: Instant, bytes: usize) -> bool {
        self.allocation
            .as_mut()
            .is_none_or(|allocation| allocation.rtx.take(now, bytes))
    }

    /// Starts a probe cluster toward it that brings what it is sent up to `target_bps`,
    /// media (`media_bps`) included: only if it has a send side and may probe. Whether one
    /// started.
    pub fn start_probe(&mut self, now: Instant, target_bps: u64, media_bps: u64) -> bool {
        let last_down = self.allocation.and_then(|a| a.last_down);
        self.send
            .as_deref_mut()
            .is_some_and(|side| side.start_probe(now, target_bps, media_bps, last_down))
    }
}

/// A header extension the packet carries, if it is readable.
fn read<'a, E: HeaderExtension<'a>>(packet: &RtpPacket<'a>, id: u8) -> Option<E> {
    E::parse(packet.extension(id)?).ok()
}
