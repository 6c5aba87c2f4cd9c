//! One peer connection's share of the router: the SSRCs it publishes under (RFC 3550 section 8:
//! SSRCs are unique within one RTP session, not across a node), the SSRCs the router sends to
//! it, and its transport-wide congestion control state. Every packet and RTCP datagram comes in
//! naming its transport and is looked up there only, so no peer can write into, or answer for,
//! another's streams.

use std::time::Instant;

use smallvec::SmallVec;

use super::bwe::{EstimatorConfig, FeedbackEstimator, PacketResult, Prober, SendHistory};
use super::publisher_estimate::PublisherEstimate;
use super::rtx_budget::RtxBudget;
use super::track::{DownTrackId, TrackId};
use super::twcc::TwccRecorder;

/// A peer connection, as the router names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TransportId(pub u32);

/// Transport-wide CC feedback state of a transport that publishes with the extension.
#[derive(Debug)]
pub(super) struct Twcc {
    pub recorder: TwccRecorder,
    /// A track of the transport: where the feedback goes, and whose SSRC it names.
    pub track: TrackId,
    /// Whether the router has queued the transport for feedback not yet written.
    pub queued: bool,
}

/// Bandwidth allocation toward a viewer transport: its estimate, and when its layers last
/// went down and up (for the hold-down and the up-switch interval).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Allocation {
    pub estimate_bps: u64,
    pub last_down: Option<Instant>,
    pub last_up: Option<Instant>,
    /// The most the viewer was sent without a downgrade forced since: a rate the path
    /// carried, so going back up to it needs no probe.
    pub proven_bps: u64,
    /// Retransmissions within what the estimate leaves over.
    pub rtx: RtxBudget,
}

/// The send side of transport-wide CC toward a viewer that negotiated it: the sequence
/// stamped on every packet sent to it, what was sent, and the estimate its feedback gives.
#[derive(Debug)]
pub(super) struct SendSide {
    pub history: SendHistory,
    pub estimator: FeedbackEstimator,
    /// Matched feedback, reused from one feedback to the next.
    pub results: Vec<PacketResult>,
    /// The estimate last handed to allocation, and when.
    pub reported: Option<(Instant, u64)>,
    /// Probe clusters toward it.
    pub prober: Prober,
}

/// Feedback of a few hundred packets matches without growing the results.
const RESULTS_CAPACITY: usize = 512;

impl SendSide {
    /// A send side whose estimate starts at `initial_bps`.
    pub fn new(initial_bps: u64) -> Self {
        let config = EstimatorConfig {
            initial_bps,
            ..EstimatorConfig::default()
        };
        Self {
            history: SendHistory::new(),
            estimator: FeedbackEstimator::new(config),
            results: Vec::with_capacity(RESULTS_CAPACITY),
            reported: None,
            prober: Prober::default(),
        }
    }
}

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

#[derive(Debug, Default)]
pub(super) struct Transport {
    /// Media and RTX SSRCs of the tracks it publishes.
    pub ssrcs: SsrcTable<TrackId>,
    pub tracks: SmallVec<[TrackId; 4]>,
    /// Media and RTX SSRCs the router sends to it, and whose they are.
    pub down_tracks: SsrcTable<DownTrackId>,
    /// Transport-wide CC of what it publishes; the outgoing transport-wide sequence and the
    /// bandwidth estimate toward it belong here too.
    pub twcc: Option<Twcc>,
    /// The uplink estimate of what it publishes, when it negotiated REMB and not
    /// transport-wide CC. Boxed: most transports have none.
    pub remb: Option<Box<PublisherEstimate>>,
    /// Layer allocation toward it, once it has a bandwidth estimate.
    pub allocation: Option<Allocation>,
    /// Transport-wide CC toward it, once a subscription on it negotiated the extension. Boxed:
    /// its history and windows are kilobytes, and most transports only publish.
    pub send: Option<Box<SendSide>>,
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
            + usize::from(self.send.is_some())
    }
}
