//! Selection on codec payload descriptors: VP8 temporal layers (with the munging patch) and
//! VP9 spatial/temporal layers, for streams without a Dependency Descriptor.

use std::hint::black_box;

use rtp_ext::codec::{
    PictureId, SpatialLayerId, TemporalLayerId, Tl0PicIdx, Vp8Descriptor, Vp8Temporal,
    Vp9Descriptor, Vp9LayerIndices,
};
use selector::vp8::{Vp8Packet, Vp8Selector};
use selector::vp9::{Vp9Packet, Vp9Selector};
use selector::{Layer, LayerLimits};

use crate::Case;

/// Temporal layer of each frame in the repeating pattern of three temporal layers.
const TEMPORAL_PATTERN: [u8; 4] = [0, 2, 1, 2];
/// Frames (VP8) or pictures (VP9) replayed per pass before the selector starts afresh.
const PASS_FRAMES: usize = 10_000;

pub fn cases() -> Vec<Case> {
    vec![vp8(), vp9()]
}

fn limits(target: Layer) -> LayerLimits {
    LayerLimits {
        target,
        max: Layer::MAX,
    }
}

/// An L1T3 VP8 stream, one packet per frame, keyframe first; the subscriber takes T1.
fn vp8() -> Case {
    let frames: Vec<(Vp8Descriptor, bool)> = (0..PASS_FRAMES)
        .map(|i| {
            let tid = TEMPORAL_PATTERN[i % 4];
            let descriptor = Vp8Descriptor {
                extended: true,
                start_of_partition: true,
                picture_id: Some(PictureId::extended(i as u16 & 0x7FFF)),
                tl0_pic_idx: Some(Tl0PicIdx((i / 4) as u8)),
                temporal: Some(Vp8Temporal {
                    tid: TemporalLayerId(tid),
                    layer_sync: tid > 0 && i % 4 != 3,
                }),
                ..Default::default()
            };
            (descriptor, i == 0)
        })
        .collect();
    let fresh = || {
        let mut s = Vp8Selector::new();
        s.set_limits(limits(Layer::new(0, 1)));
        s
    };
    let mut selector = fresh();
    let mut next = 0;
    Case::new("select/vp8", move || {
        if next == frames.len() {
            next = 0;
            selector = fresh();
        }
        let (descriptor, keyframe) = &frames[next];
        let packet = Vp8Packet {
            sequence_number: next as u16,
            timestamp: next as u32 * 3000,
            marker: true,
            descriptor,
            keyframe: *keyframe,
        };
        next += 1;
        black_box(selector.select(black_box(&packet)));
    })
}

/// An L3T3 VP9 stream in full SVC, one packet per frame (three per picture), keyframe first;
/// the subscriber takes S1T1.
fn vp9() -> Case {
    let mut frames = Vec::with_capacity(PASS_FRAMES * 3);
    for picture in 0..PASS_FRAMES {
        let tid = TEMPORAL_PATTERN[picture % 4];
        for sid in 0..3u8 {
            frames.push(Vp9Descriptor {
                inter_picture_predicted: picture > 0,
                flexible_mode: false,
                start_of_frame: true,
                end_of_frame: true,
                not_upper_layer_reference: false,
                picture_id: Some(PictureId::extended(picture as u16 & 0x7FFF)),
                layer: Some(Vp9LayerIndices {
                    tid: TemporalLayerId(tid),
                    switching_up_point: tid > 0,
                    sid: SpatialLayerId(sid),
                    inter_layer_dependency: sid > 0,
                }),
                tl0_pic_idx: Some(Tl0PicIdx((picture / 4) as u8)),
                reference_diffs: Default::default(),
                scalability_structure: None,
            });
        }
    }
    let fresh = || {
        let mut s = Vp9Selector::new();
        s.set_limits(limits(Layer::new(1, 1)));
        s
    };
    let mut selector = fresh();
    let mut next = 0;
    Case::new("select/vp9", move || {
        if next == frames.len() {
            next = 0;
            selector = fresh();
        }
        let packet = Vp9Packet {
            sequence_number: next as u16,
            timestamp: (next / 3) as u32 * 3000,
            marker: next % 3 == 2,
            descriptor: &frames[next],
        };
        next += 1;
        black_box(selector.select(black_box(&packet)));
    })
}
