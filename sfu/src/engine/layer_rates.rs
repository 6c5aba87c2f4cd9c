//! The bitrate of each layer a published track offers, over a sliding window: what a
//! subscriber receiving that layer would be sent. Layer allocation fits a viewer's estimate
//! with these figures, so they are measured per target layer, not per frame layer.
//!
//! A packet counts toward every target layer that needs it:
//! - with a Dependency Descriptor, exactly the decode targets its frame is part of (its
//!   decode target indications), whatever the codec: a K-SVC upper layer does not pay for the
//!   lower layers' delta frames. A simulcast stream's descriptor describes that stream alone
//!   (its targets are all of spatial layer 0): they count as the stream's own layer;
//! - a VP9 frame without one, toward its own and every higher spatial layer (a frame of
//!   spatial layer `s` may be referenced from `s + 1`, which the packet does not say) and its
//!   own and higher temporal layers: an over-count for K-SVC, never an under-count;
//! - a simulcast stream's frame (VP8, H264, or any codec sent as several streams), toward its
//!   own stream's layer only, at its own and higher temporal layers;
//! - a frame that names no temporal layer (audio, a stream sent without temporal layers),
//!   toward temporal layer 0 alone: that is every layer its stream has.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rtp_ext::codec::PayloadDescriptor;
use rtp_ext::dd::{DecodeTargetIndication, FrameDependencyStructure};
use selector::Layer;

use super::packet::ParsedPacket;

/// Spatial and temporal layers measured: four each, as many as any codec here describes.
pub const MEASURED_LAYERS: usize = 4;
const TARGETS: usize = MEASURED_LAYERS * MEASURED_LAYERS;
/// The window is this many buckets of [`BUCKET`]: long enough to span a keyframe interval's
/// share of bursts, short enough to follow a publisher's encoder within a second or two.
const BUCKETS: usize = 10;
const BUCKET: Duration = Duration::from_millis(200);
/// Decode targets a Dependency Descriptor may have (AV1 RTP spec A.8.2: 5 bits).
const MAX_DECODE_TARGETS: usize = 32;

/// Bytes per target layer, in buckets of [`BUCKET`] ending now.
#[derive(Debug, Clone)]
pub(super) struct LayerRates {
    bytes: [[u32; TARGETS]; BUCKETS],
    /// When each bucket started; `None` until used.
    starts: [Option<Instant>; BUCKETS],
    current: usize,
    /// The first packet: rates over less than a whole window divide by the time seen.
    first: Option<Instant>,
    /// Each decode target's layer index under the structure last seen, worked out once per
    /// structure rather than per packet: per stream, since each simulcast stream has its own.
    targets: [Option<Targets>; MEASURED_LAYERS],
}

/// A structure, and the counter index of each of its decode targets.
type Targets = (
    Arc<FrameDependencyStructure>,
    [Option<u8>; MAX_DECODE_TARGETS],
);

/// The bitrate of every target layer of a track, in bits per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LayerBitrates {
    bps: [u64; TARGETS],
}

impl LayerBitrates {
    /// Rates given by the host (for allocation of its own, or a test): `f` of each layer.
    pub fn from_fn(f: impl Fn(Layer) -> u64) -> Self {
        let mut bps = [0; TARGETS];
        for (i, slot) in bps.iter_mut().enumerate() {
            *slot = f(Layer::new(
                (i / MEASURED_LAYERS) as u8,
                (i % MEASURED_LAYERS) as u8,
            ));
        }
        Self { bps }
    }

    /// What a subscriber receiving `layer` would be sent; 0 for a layer the track does not
    /// have (or not measured yet).
    pub fn bps(&self, layer: Layer) -> u64 {
        index(layer).map_or(0, |i| self.bps[i])
    }
}

impl Default for LayerRates {
    fn default() -> Self {
        Self {
            bytes: [[0; TARGETS]; BUCKETS],
            starts: [None; BUCKETS],
            current: 0,
            first: None,
            targets: [const { None }; MEASURED_LAYERS],
        }
    }
}

impl LayerRates {
    /// Counts a received packet of stream `stream` toward the target layers that need it.
    pub fn record(&mut self, now: Instant, packet: &ParsedPacket, simulcast: bool) {
        self.first.get_or_insert(now);
        let size = u32::try_from(packet.bytes.len()).unwrap_or(u32::MAX);
        if let (Some(dd), Some(structure)) = (&packet.dd, &packet.structure) {
            let Some(targets) = self.targets_of(structure, simulcast.then_some(packet.stream))
            else {
                return;
            };
            let bucket = self.bucket(now);
            for (dt, dti) in dd.frame_dependencies.dtis.iter().enumerate() {
                let target = targets.get(dt).copied().flatten();
                if let (Some(i), true) = (target, dti != DecodeTargetIndication::NotPresent) {
                    let i = usize::from(i);
                    bucket[i] = bucket[i].saturating_add(size);
                }
            }
            return;
        }
        let bucket = self.bucket(now);
        let mut add = |layer: Layer| {
            if let Some(i) = index(layer) {
                bucket[i] = bucket[i].saturating_add(size);
            }
        };
        let summary = packet.descriptor.as_ref().map(PayloadDescriptor::summary);
        // A frame that names no temporal layer (audio, a stream without temporal layers) is
        // all its stream has: it counts toward temporal layer 0 alone, so the track shows
        // the layers it has and allocation climbs no step that costs nothing.
        let temporal = summary.and_then(|s| s.temporal_layer).map(|t| t.0);
        let temporal_layers = match temporal {
            Some(t) => t..MEASURED_LAYERS as u8,
            None => 0..1,
        };
        let (spatial, upward) = match summary.and_then(|s| s.spatial_layer) {
            Some(s) if !simulcast => (s.0, true),
            _ => (packet.stream, false),
        };
        for s in spatial..MEASURED_LAYERS as u8 {
            if s > spatial && !upward {
                break;
            }
            for t in temporal_layers.clone() {
                add(Layer::new(s, t));
            }
        }
    }

    /// The decode targets' counter indices under `structure` (of simulcast stream `stream`,
    /// if it is one), worked out when it changes; `None` for a stream past what is measured.
    fn targets_of(
        &mut self,
        structure: &Arc<FrameDependencyStructure>,
        stream: Option<u8>,
    ) -> Option<[Option<u8>; MAX_DECODE_TARGETS]> {
        let slot = self.targets.get_mut(usize::from(stream.unwrap_or(0)))?;
        match slot {
            Some((known, targets)) if Arc::ptr_eq(known, structure) => Some(*targets),
            _ => {
                let targets = target_indices(structure, stream);
                *slot = Some((structure.clone(), targets));
                Some(targets)
            }
        }
    }

    /// Every target layer's bitrate over the window ending at `now`.
    pub fn bitrates(&self, now: Instant) -> LayerBitrates {
        let Some(first) = self.first else {
            return LayerBitrates::default();
        };
        let window = BUCKET * BUCKETS as u32;
        let since = now.checked_sub(window);
        let mut total = [0u64; TARGETS];
        let live = self
            .starts
            .iter()
            .zip(&self.bytes)
            .filter(|(start, _)| start.is_some_and(|s| since.is_none_or(|since| s > since)));
        for (_, bucket) in live {
            for (sum, &b) in total.iter_mut().zip(bucket) {
                *sum += u64::from(b);
            }
        }
        // At least one bucket's span: a first burst is not taken for a huge rate.
        let span = now.saturating_duration_since(first).clamp(BUCKET, window);
        let micros = span.as_micros().max(1) as u64;
        LayerBitrates {
            bps: total.map(|bytes| bytes.saturating_mul(8_000_000) / micros),
        }
    }

    /// The bucket `now` falls in, emptied first if it is one the window has moved past.
    fn bucket(&mut self, now: Instant) -> &mut [u32; TARGETS] {
        let current_start = self.starts[self.current];
        if current_start.is_none_or(|start| now >= start + BUCKET) {
            self.current = (self.current + 1) % BUCKETS;
            self.starts[self.current] = Some(now);
            self.bytes[self.current] = [0; TARGETS];
        }
        &mut self.bytes[self.current]
    }
}

/// Each decode target's index into the per-layer counters, or `None` past what is measured:
/// its own layer, or its temporal layer of simulcast stream `stream`.
fn target_indices(
    structure: &FrameDependencyStructure,
    stream: Option<u8>,
) -> [Option<u8>; MAX_DECODE_TARGETS] {
    let mut targets = [None; MAX_DECODE_TARGETS];
    let count = usize::from(structure.decode_target_count).min(MAX_DECODE_TARGETS);
    for (dt, target) in targets.iter_mut().enumerate().take(count) {
        let layer = structure.decode_target_layer(dt);
        let spatial = stream.unwrap_or(layer.spatial_id);
        *target = index(Layer::new(spatial, layer.temporal_id)).map(|i| i as u8);
    }
    targets
}

fn index(layer: Layer) -> Option<usize> {
    let (s, t) = (usize::from(layer.spatial), usize::from(layer.temporal));
    (s < MEASURED_LAYERS && t < MEASURED_LAYERS).then_some(s * MEASURED_LAYERS + t)
}
