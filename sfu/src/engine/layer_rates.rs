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
//!
//! The figure is a layer's steady rate, with each keyframe counted as a delta frame: a layer
//! switch asks the publisher for one, many times a delta frame's size, and a plain mean would
//! price the layer above what it goes on sending for as long as the keyframe is in the window
//! (see `LayerRates::bitrates`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rtp_ext::codec::PayloadDescriptor;
use rtp_ext::dd::{DecodeTargetIndication, FrameDependencyStructure};
use selector::Layer;

use super::packet::ParsedPacket;

/// Spatial and temporal layers measured: four each, as many as any codec here describes.
pub const MEASURED_LAYERS: usize = 4;
const TARGETS: usize = MEASURED_LAYERS * MEASURED_LAYERS;
// A packet's target layers are one bit each of a `u16`.
const _: () = assert!(TARGETS <= 16);
/// The window is this many buckets of [`BUCKET`], the last still filling: two seconds, short
/// enough to follow a publisher's encoder within a second or two.
const BUCKETS: usize = 10;
const BUCKET: Duration = Duration::from_millis(200);
/// Complete buckets from which the steady rate is worked out; before, the mean over the time
/// seen, so that allocation has a figure from the first packet on.
const STEADY_AFTER: u64 = 3;
/// Decode targets a Dependency Descriptor may have (AV1 RTP spec A.8.2: 5 bits).
const MAX_DECODE_TARGETS: usize = 32;
/// A packet whose RTP timestamp is at most this far behind the last frame's is of that frame
/// or an earlier one (a retransmission, a reordered packet), not a new frame: a second of a
/// 90 kHz clock. Farther behind, the stream's timestamps started again.
const LATE_TICKS: u32 = 90_000;

/// What each target layer was sent, in buckets of [`BUCKET`] from the first packet.
#[derive(Debug, Clone)]
pub(super) struct LayerRates {
    counts: [[Counts; TARGETS]; BUCKETS],
    /// The bucket (counted from the first packet's) each slot holds; `None` until used.
    held: [Option<u64>; BUCKETS],
    clock: Option<Clock>,
    /// Each target layer's last frame.
    last: [Option<Frame>; TARGETS],
    /// Each decode target's layer index under the structure last seen, worked out once per
    /// structure rather than per packet: per stream, since each simulcast stream has its own.
    targets: [Option<Targets>; MEASURED_LAYERS],
}

/// One target layer's frames begun in a bucket, and their bytes. A frame here is the layer's
/// packets of one RTP timestamp (with spatial layers, every spatial layer's frame of the
/// temporal unit); its bytes all count in the bucket it began in, so a keyframe is never
/// split from its count at the window's edge.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    bytes: u32,
    frames: u16,
    /// Of those, the keyframes and their bytes.
    key_bytes: u32,
    keyframes: u16,
}

/// A window's [`Counts`], summed.
#[derive(Debug, Clone, Copy, Default)]
struct Sums {
    bytes: u64,
    frames: u64,
    key_bytes: u64,
    keyframes: u64,
}

impl Sums {
    fn add(&mut self, c: &Counts) {
        self.bytes += u64::from(c.bytes);
        self.frames += u64::from(c.frames);
        self.key_bytes += u64::from(c.key_bytes);
        self.keyframes += u64::from(c.keyframes);
    }

    /// The bytes, each keyframe counted as a delta frame of the window's mean size; keyframes
    /// alone (nothing else sent yet) count whole.
    fn steady_bytes(&self) -> u64 {
        let delta_frames = self.frames.saturating_sub(self.keyframes);
        if self.keyframes == 0 || delta_frames == 0 {
            return self.bytes;
        }
        let delta_bytes = self.bytes.saturating_sub(self.key_bytes);
        delta_bytes + delta_bytes * self.keyframes / delta_frames
    }
}

/// The buckets' grid: the first packet starts bucket 0.
#[derive(Debug, Clone, Copy)]
struct Clock {
    first: Instant,
    /// The latest packet's bucket, and when it ends.
    current: u64,
    end: Instant,
}

impl Clock {
    fn bucket_of(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.first);
        u64::try_from(since.as_nanos() / BUCKET.as_nanos()).unwrap_or(u64::MAX)
    }

    fn start_of(&self, bucket: u64) -> Instant {
        let nanos = u64::try_from(BUCKET.as_nanos()).unwrap_or(u64::MAX);
        self.first + Duration::from_nanos(bucket.saturating_mul(nanos))
    }
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    timestamp: u32,
    bucket: u64,
    key: bool,
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
            counts: [[Counts::default(); TARGETS]; BUCKETS],
            held: [None; BUCKETS],
            clock: None,
            last: [None; TARGETS],
            targets: [const { None }; MEASURED_LAYERS],
        }
    }
}

impl LayerRates {
    /// Counts a received packet of stream `stream` toward the target layers that need it.
    pub fn record(&mut self, now: Instant, packet: &ParsedPacket, simulcast: bool) {
        let mut layers = self.layers_of(packet, simulcast);
        let bucket = self.advance(now);
        let size = u32::try_from(packet.bytes.len()).unwrap_or(u32::MAX);
        while layers != 0 {
            let target = layers.trailing_zeros() as usize;
            layers &= layers - 1;
            self.count(target, bucket, packet, size);
        }
    }

    /// The target layers that need `packet`, a bit each.
    fn layers_of(&mut self, packet: &ParsedPacket, simulcast: bool) -> u16 {
        let mut layers = 0;
        if let (Some(dd), Some(structure)) = (&packet.dd, &packet.structure) {
            let Some(targets) = self.targets_of(structure, simulcast.then_some(packet.stream))
            else {
                return 0;
            };
            for (dt, dti) in dd.frame_dependencies.dtis.iter().enumerate() {
                let target = targets.get(dt).copied().flatten();
                if let (Some(i), true) = (target, dti != DecodeTargetIndication::NotPresent) {
                    layers |= 1 << i;
                }
            }
            return layers;
        }
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
                if let Some(i) = index(Layer::new(s, t)) {
                    layers |= 1 << i;
                }
            }
        }
        layers
    }

    /// Counts `size` bytes of `packet` toward `target`: a new frame in `bucket`, or more of
    /// the layer's last frame, in the bucket that frame began in while one holds it.
    fn count(&mut self, target: usize, bucket: u64, packet: &ParsedPacket, size: u32) {
        let timestamp = packet.fields.timestamp;
        let frame = match self.last[target] {
            Some(last) if last.timestamp.wrapping_sub(timestamp) <= LATE_TICKS => last,
            _ => {
                let frame = Frame {
                    timestamp,
                    bucket,
                    key: packet.keyframe_start,
                };
                self.last[target] = Some(frame);
                let counts = &mut self.counts[slot(bucket)][target];
                counts.frames = counts.frames.saturating_add(1);
                counts.keyframes = counts.keyframes.saturating_add(u16::from(frame.key));
                frame
            }
        };
        // A frame longer than the window (none is) goes on as delta bytes of the latest bucket.
        let (slot, key) = match self.slot_of(frame.bucket) {
            Some(slot) => (slot, frame.key),
            None => (slot(bucket), false),
        };
        let counts = &mut self.counts[slot][target];
        counts.bytes = counts.bytes.saturating_add(size);
        if key {
            counts.key_bytes = counts.key_bytes.saturating_add(size);
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

    /// Every target layer's steady bitrate: its bytes over the window's complete buckets
    /// before `now`, each keyframe counted as a delta frame of their mean size.
    ///
    /// Why keyframes apart: one is many times a delta frame (a VP9 one tens of times), each
    /// layer switch asks for one, and a plain mean would price the layer above what it goes
    /// on to send for the two seconds the keyframe stays in the window, while the viewer it is
    /// fitted to pays the burst once, spread by the pacer. Counted as the frame slot it takes,
    /// it leaves the steady rate, whatever the frame rate and however many keyframes the
    /// window holds. Why not a statistic of the buckets' byte rates (a median, a mean without
    /// the largest bucket): it cannot tell a keyframe from a layer's own sparse or uneven
    /// frames. At 7.5 frames a second a bucket of 200 ms holds 1 or 2, which a median reads as
    /// 5 or 10 a second; at 2.5 a second every other bucket holds one, read as 0 or 5; a
    /// temporal layer 0 frame is several times an upper layer's and, at a low frame rate,
    /// comes as seldom as a keyframe; and a mean without the largest bucket survives one
    /// keyframe where a switch and the encoder's own interval put three. The packets say
    /// which frames are keyframes; the rest is a plain mean, exact to a frame, over complete
    /// buckets so that no frame at the window's ends counts over part of its interval.
    ///
    /// Keyframes that come often (an encoder's short interval, repeated requests) stay out of
    /// the figure too, though each costs more than a delta frame: a viewer whose link cannot
    /// carry them sees its estimate fall. A paused stream sends nothing: its rate falls as its
    /// frames leave the window, to 0 two seconds after the last.
    pub fn bitrates(&self, now: Instant) -> LayerBitrates {
        let Some(clock) = self.clock else {
            return LayerBitrates::default();
        };
        let latest = clock.bucket_of(now).max(clock.current);
        if latest < STEADY_AFTER {
            return self.start_up(&clock, now);
        }
        let oldest = (latest + 1).saturating_sub(BUCKETS as u64);
        let mut sums = [Sums::default(); TARGETS];
        for slot in (oldest..latest).filter_map(|b| self.slot_of(b)) {
            for (sum, counts) in sums.iter_mut().zip(&self.counts[slot]) {
                sum.add(counts);
            }
        }
        let micros = u64::try_from(BUCKET.as_micros()).unwrap_or(u64::MAX) * (latest - oldest);
        LayerBitrates {
            bps: sums.map(|s| s.steady_bytes().saturating_mul(8_000_000) / micros),
        }
    }

    /// The mean over the time seen, while too few buckets are complete for a steady rate: a
    /// figure at once, the first keyframe in it.
    fn start_up(&self, clock: &Clock, now: Instant) -> LayerBitrates {
        let mut total = [0u64; TARGETS];
        for slot in (0..=clock.current).filter_map(|b| self.slot_of(b)) {
            for (sum, counts) in total.iter_mut().zip(&self.counts[slot]) {
                *sum += u64::from(counts.bytes);
            }
        }
        // At least one bucket's span: a first burst is not taken for a huge rate.
        let span = now
            .saturating_duration_since(clock.first)
            .clamp(BUCKET, BUCKET * BUCKETS as u32);
        let micros = span.as_micros().max(1) as u64;
        LayerBitrates {
            bps: total.map(|bytes| bytes.saturating_mul(8_000_000) / micros),
        }
    }

    /// The bucket `now` falls in, its slot emptied first if it held an older one.
    fn advance(&mut self, now: Instant) -> u64 {
        if let Some(clock) = self.clock.filter(|c| now < c.end) {
            return clock.current;
        }
        let mut clock = self.clock.unwrap_or(Clock {
            first: now,
            current: 0,
            end: now,
        });
        clock.current = clock.bucket_of(now);
        clock.end = clock.start_of(clock.current + 1);
        self.clock = Some(clock);
        let slot = slot(clock.current);
        if self.held[slot] != Some(clock.current) {
            self.held[slot] = Some(clock.current);
            self.counts[slot] = [Counts::default(); TARGETS];
        }
        clock.current
    }

    /// The slot holding `bucket`, if one still does.
    fn slot_of(&self, bucket: u64) -> Option<usize> {
        let slot = slot(bucket);
        (self.held[slot] == Some(bucket)).then_some(slot)
    }
}

fn slot(bucket: u64) -> usize {
    (bucket % BUCKETS as u64) as usize
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
