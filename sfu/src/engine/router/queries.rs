//! What a host may read of the router's state: copies and shared references to configuration
//! only, so no caller can change a DownTrack or a Receiver behind the router's back.

use std::time::{Duration, Instant};

use rtp_ext::ext::AudioLevel;
use selector::Layer;

use super::{Router, RouterCounters, Transport};
use crate::engine::bwe::BandwidthEstimator;
use crate::engine::down_track::{DownTrackCounters, SubscriberReception};
use crate::engine::keyframe::KeyframeCounters;
use crate::engine::layer_rates::LayerBitrates;
use crate::engine::receiver::ReceiverCounters;
use crate::engine::track::{DownTrackId, TrackConfig, TrackId};
use crate::engine::transport::TransportId;

/// A subscription as the host may see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownTrackInfo {
    /// The published track it forwards.
    pub track: TrackId,
    /// The peer connection it sends on.
    pub transport: TransportId,
    /// The SSRC it sends under.
    pub ssrc: u32,
    /// The layer it forwards now; None while nothing decodable is forwarded.
    pub layer: Option<Layer>,
}

impl Router {
    /// Router-wide counters.
    pub fn counters(&self) -> RouterCounters {
        self.counters
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

    /// A subscription's track, transport, SSRC and current layer.
    pub fn down_track_info(&self, id: DownTrackId) -> Option<DownTrackInfo> {
        let down_track = self.down_tracks.get(&id)?;
        Some(DownTrackInfo {
            track: down_track.track(),
            transport: down_track.transport(),
            ssrc: down_track.config().ssrc,
            layer: down_track.current_layer(),
        })
    }

    /// What a published track was published with (simulcast SSRCs as bound so far).
    pub fn receiver_config(&self, track: TrackId) -> Option<&TrackConfig> {
        Some(self.tracks.get(&track)?.receiver.config())
    }

    /// The track `transport` publishes under `ssrc` (media or RTX).
    pub fn ssrc_track(&self, transport: TransportId, ssrc: u32) -> Option<TrackId> {
        self.transports.get(&transport)?.ssrcs.get(&ssrc).copied()
    }

    /// What a published track's receiver took in, dropped and asked to have repaired.
    pub fn receiver_counters(&self, track: TrackId) -> Option<ReceiverCounters> {
        Some(self.tracks.get(&track)?.receiver.counters())
    }

    /// The round trip to the track's publisher, measured from NACK to retransmission.
    pub fn publisher_rtt(&self, track: TrackId) -> Option<Duration> {
        self.tracks.get(&track)?.receiver.publisher_rtt()
    }

    /// The round trip to a viewer transport with transport-wide CC, from its receiver
    /// reports, as its bandwidth estimator has it.
    pub fn viewer_round_trip(&self, transport: TransportId) -> Option<Duration> {
        self.transports
            .get(&transport)?
            .send_side()?
            .estimator()
            .round_trip_time()
    }

    /// What a subscriber of the track receiving each layer would be sent, measured over the
    /// last two seconds up to `now`, each keyframe counted as a delta frame.
    pub fn layer_bitrates(&self, track: TrackId, now: Instant) -> Option<LayerBitrates> {
        Some(self.tracks.get(&track)?.receiver.layer_bitrates(now))
    }

    /// The latest audio level the track's publisher sent (RFC 6464), for active-speaker use.
    pub fn audio_level(&self, track: TrackId) -> Option<AudioLevel> {
        self.tracks.get(&track)?.receiver.audio_level()
    }

    /// How loud an audio track is at `now`, in dB above silence (0 silent, 127 as loud as it
    /// gets), from the levels its publisher writes (RFC 6464), smoothed over about a third of
    /// a second; `None` for an unknown track. A host picks speakers from it.
    pub fn speech_level(&self, track: TrackId, now: Instant) -> Option<f32> {
        Some(self.tracks.get(&track)?.speech.at(now))
    }

    /// Keyframe requests to the track's publisher: asked for, sent, and held back by the
    /// throttle.
    pub fn keyframe_counters(&self, track: TrackId) -> Option<KeyframeCounters> {
        Some(self.tracks.get(&track)?.keyframes.counters())
    }

    /// What a subscriber last reported of its reception: loss, jitter, round-trip time.
    pub fn down_track_reception(&self, id: DownTrackId) -> Option<SubscriberReception> {
        self.down_tracks.get(&id)?.reception()
    }

    /// What a subscription forwarded, dropped and retransmitted.
    pub fn down_track_counters(&self, id: DownTrackId) -> Option<DownTrackCounters> {
        Some(self.down_tracks.get(&id)?.counters())
    }
}
