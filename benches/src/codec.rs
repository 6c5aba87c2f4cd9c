//! Codec payload descriptor cases: the VP8 munging patch and the VP9 descriptor parse.

use std::hint::black_box;

use rtp_ext::codec::{
    KeyIdx, PictureId, TemporalLayerId, Tl0PicIdx, Vp8Descriptor, Vp8Patch, Vp8Temporal,
    Vp9Descriptor,
};
use rtp_ext::rtp::RtpPacket;

use crate::fixtures::vp9_packet;
use crate::Case;

pub fn cases() -> Vec<Case> {
    vec![vp8_munge(), vp9_parse()]
}

/// A VP8 payload with every descriptor field present (15-bit picture id, TL0PICIDX, TID/Y,
/// KEYIDX), rewritten in place with a new picture id, TL0PICIDX and KEYIDX as a forwarder does
/// for each subscriber.
fn vp8_munge() -> Case {
    let descriptor = Vp8Descriptor {
        extended: true,
        start_of_partition: true,
        picture_id: Some(PictureId::extended(12_345)),
        tl0_pic_idx: Some(Tl0PicIdx(17)),
        temporal: Some(Vp8Temporal {
            tid: TemporalLayerId(1),
            layer_sync: true,
        }),
        key_idx: Some(KeyIdx(3)),
        ..Default::default()
    };
    let mut payload = vec![0u8; 1200];
    let len = descriptor.write(&mut payload).expect("fits");
    // The VP8 payload header after the descriptor: an interframe (P bit set).
    payload[len] = 0x01;
    let mut picture_id = 0u16;
    Case::new("vp8/munge", move || {
        picture_id = picture_id.wrapping_add(1);
        let patch = Vp8Patch {
            picture_id: Some(picture_id),
            tl0_pic_idx: Some(Tl0PicIdx(picture_id as u8)),
            key_idx: Some(KeyIdx(5)),
        };
        let result = patch.apply(black_box(&descriptor), &mut payload);
        black_box(result).expect("same layout");
    })
}

/// The real keyframe start with a scalability structure: the largest descriptor a browser
/// sends.
fn vp9_parse() -> Case {
    let packet = vp9_packet(0);
    let payload = RtpPacket::parse(&packet)
        .expect("real packet")
        .payload()
        .to_vec();
    Case::new("vp9/parse", move || {
        let d = Vp9Descriptor::parse(black_box(&payload));
        black_box(d).expect("parses");
    })
}
