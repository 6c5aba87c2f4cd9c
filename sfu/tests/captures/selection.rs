//! The real browser captures through the selectors a subscriber would get for them: VP8
//! temporal selection with its munger, and pass-through video for AV1 and H264 (captures
//! without a Dependency Descriptor or layers). VP9 and the DD packets are replayed in the
//! selector crate's own tests.

use rtp_ext::codec::{parse_payload, Codec, PayloadDescriptor, Vp8Descriptor};
use rtp_ext::rtp::RtpPacket;
use selector::passthrough::PassThrough;
use selector::vp8::{Vp8Packet, Vp8Selector};
use selector::{Layer, LayerLimits};

use crate::common;

/// Pass-through video forwards nothing before the first keyframe and everything after it.
fn pass_through(name: &str, codec: Codec) {
    let packets = common::rtp_packets(name);
    let mut selector = PassThrough::video();
    let mut forwarded = Vec::new();
    for bytes in &packets {
        let packet = RtpPacket::parse(bytes).expect("RTP");
        let summary = parse_payload(codec, packet.payload()).map(|d| d.summary());
        let keyframe_start = summary.is_ok_and(|s| s.keyframe && s.start_of_frame != Some(false));
        let selection = selector.select(packet.fields().marker, keyframe_start);
        assert_eq!(
            selection.marker,
            selection.forward && packet.fields().marker
        );
        forwarded.push(selection.forward);
    }
    let first = forwarded
        .iter()
        .position(|&f| f)
        .expect("a keyframe in the capture");
    assert!(
        forwarded[first..].iter().all(|&f| f),
        "{name}: everything after the keyframe"
    );
    let first_packet = RtpPacket::parse(&packets[first]).expect("RTP");
    let first_summary = parse_payload(codec, first_packet.payload())
        .expect("descriptor")
        .summary();
    assert!(first_summary.keyframe, "{name}: starts at a keyframe");
}

#[test]
fn av1_capture_passes_through_from_its_first_keyframe() {
    pass_through("av1.pcap", Codec::Av1);
}

#[test]
fn h264_capture_passes_through_from_its_first_keyframe() {
    pass_through("h264.pcap", Codec::H264);
}

/// The VP8 capture at every temporal target: the first frame forwarded is a keyframe, every
/// frame within the target is forwarded after it, and the munged picture ids the subscriber
/// sees go up by one per forwarded frame.
#[test]
fn vp8_capture_through_temporal_selection() {
    let packets = common::rtp_packets("vp8.pcap");
    let mut forwarded_per_target = Vec::new();
    for temporal in 0..3 {
        let mut selector = Vp8Selector::new();
        selector.set_limits(LayerLimits {
            target: Layer::new(0, temporal),
            max: Layer::MAX,
        });
        let mut picture_ids: Vec<u16> = Vec::new();
        let mut expected_frames = 0;
        let mut started = false;
        for bytes in &packets {
            let packet = RtpPacket::parse(bytes).expect("RTP");
            let payload = packet.payload();
            let Ok(PayloadDescriptor::Vp8 {
                descriptor,
                keyframe,
            }) = parse_payload(Codec::Vp8, payload)
            else {
                panic!("VP8 payload");
            };
            let fields = packet.fields();
            let vp8 = Vp8Packet {
                sequence_number: fields.sequence_number,
                timestamp: fields.timestamp,
                marker: fields.marker,
                descriptor: &descriptor,
                keyframe,
            };
            let out = selector.select(&vp8);
            let tid = descriptor.temporal.map_or(0, |t| t.tid.0);
            let frame_start = descriptor.start_of_partition && descriptor.partition_id.0 == 0;
            if (started || keyframe) && frame_start && tid <= temporal {
                expected_frames += 1;
            }
            if !out.selection.forward {
                assert!(
                    started || !keyframe,
                    "T{temporal}: a keyframe start is never dropped at first"
                );
                continue;
            }
            started |= keyframe;
            assert!(started, "T{temporal}: forwarding starts at a keyframe");
            if frame_start {
                let mut munged = payload.to_vec();
                out.patch
                    .apply(&descriptor, &mut munged)
                    .expect("same layout");
                let rewritten = Vp8Descriptor::parse(&munged).expect("still VP8");
                picture_ids.extend(rewritten.picture_id.map(|p| p.value()));
            }
        }
        // The capture is L1T2: T0 and T1 alternate. Every frame within the target from the
        // first keyframe on goes out.
        assert_eq!(
            picture_ids.len(),
            expected_frames,
            "T{temporal}: frames forwarded"
        );
        assert!(expected_frames > 45, "T{temporal}: the capture's frames");
        for pair in picture_ids.windows(2) {
            let step = pair[1].wrapping_sub(pair[0]) & 0x7FFF;
            assert_eq!(step, 1, "T{temporal}: picture ids continuous ({pair:?})");
        }
        forwarded_per_target.push(picture_ids.len());
    }
    assert!(
        forwarded_per_target[0] < forwarded_per_target[1],
        "T0 drops the T1 frames"
    );
    assert_eq!(
        forwarded_per_target[1], forwarded_per_target[2],
        "no T2 in an L1T2 capture"
    );
}
