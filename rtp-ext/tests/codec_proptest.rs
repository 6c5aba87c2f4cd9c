//! Properties of the codec payload descriptors: random descriptors survive write and parse,
//! VP8 patches keep lengths, built H264 and AV1 payload heads parse to what was built, and no
//! parser panics on arbitrary bytes.

use proptest::prelude::*;
use rtp_ext::codec::{
    parse_payload, Av1Descriptor, Codec, H264Descriptor, KeyIdx, NalUnitType, ObuExtension,
    ObuHeader, ObuType, PDiff, Packetization, PartitionId, PictureGroupEntry, PictureId,
    Resolution, ScalabilityStructure, SpatialLayerId, TemporalLayerId, Tl0PicIdx, Vp8Descriptor,
    Vp8Patch, Vp8Temporal, Vp9Descriptor, Vp9LayerIndices, VP9_MAX_DESCRIPTOR_SIZE,
    VP9_MAX_PICTURE_GROUP,
};
use rtp_ext::dd::InlineVec;

fn picture_id() -> impl Strategy<Value = PictureId> {
    prop_oneof![
        any::<u16>().prop_map(PictureId::short),
        any::<u16>().prop_map(PictureId::extended),
    ]
}

fn vp8_descriptor() -> impl Strategy<Value = Vp8Descriptor> {
    let temporal = (0u8..4, any::<bool>()).prop_map(|(tid, layer_sync)| Vp8Temporal {
        tid: TemporalLayerId(tid),
        layer_sync,
    });
    (
        any::<[bool; 3]>(),
        0u8..8,
        proptest::option::of(picture_id()),
        proptest::option::of(any::<u8>().prop_map(Tl0PicIdx)),
        proptest::option::of(temporal),
        proptest::option::of((0u8..32).prop_map(KeyIdx)),
    )
        .prop_map(
            |([x, n, s], pid, picture_id, tl0_pic_idx, temporal, key_idx)| {
                let any_field = picture_id.is_some()
                    || tl0_pic_idx.is_some()
                    || temporal.is_some()
                    || key_idx.is_some();
                Vp8Descriptor {
                    // The writer sets X for any optional field, and the reader reports it.
                    extended: x || any_field,
                    non_reference: n,
                    start_of_partition: s,
                    partition_id: PartitionId(pid),
                    picture_id,
                    tl0_pic_idx,
                    temporal,
                    key_idx,
                }
            },
        )
}

fn diffs(
    max: u8,
    count: std::ops::RangeInclusive<usize>,
) -> impl Strategy<Value = InlineVec<PDiff, 3>> {
    proptest::collection::vec((0..=max).prop_map(PDiff), count)
        .prop_map(|d| InlineVec::from_slice(&d).expect("at most 3"))
}

fn scalability_structure() -> impl Strategy<Value = ScalabilityStructure> {
    let resolution =
        (any::<u16>(), any::<u16>()).prop_map(|(width, height)| Resolution { width, height });
    let entry = (0u8..8, any::<bool>(), diffs(255, 0..=3)).prop_map(|(tid, u, reference_diffs)| {
        PictureGroupEntry {
            tid: TemporalLayerId(tid),
            switching_up_point: u,
            reference_diffs,
        }
    });
    (
        1u8..=8,
        any::<bool>(),
        proptest::collection::vec(resolution, 8),
        proptest::option::of(proptest::collection::vec(entry, 0..=VP9_MAX_PICTURE_GROUP)),
    )
        .prop_map(|(spatial_layers, y, res, group)| ScalabilityStructure {
            spatial_layers,
            resolutions: y.then(|| {
                InlineVec::from_slice(&res[..usize::from(spatial_layers)]).expect("at most 8")
            }),
            picture_group: group.map(|g| InlineVec::from_slice(&g).expect("bounded above")),
        })
}

fn vp9_descriptor() -> impl Strategy<Value = Vp9Descriptor> {
    let layer = (0u8..8, any::<bool>(), 0u8..8, any::<bool>()).prop_map(|(tid, u, sid, d)| {
        Vp9LayerIndices {
            tid: TemporalLayerId(tid),
            switching_up_point: u,
            sid: SpatialLayerId(sid),
            inter_layer_dependency: d,
        }
    });
    (
        any::<[bool; 5]>(),
        proptest::option::of(picture_id()),
        proptest::option::of(layer),
        any::<u8>(),
        diffs(127, 1..=3),
        proptest::option::of(scalability_structure()),
    )
        .prop_map(
            |([p, f, b, e, z], picture_id, layer, tl0, flexible_diffs, ss)| Vp9Descriptor {
                inter_picture_predicted: p,
                flexible_mode: f,
                start_of_frame: b,
                end_of_frame: e,
                not_upper_layer_reference: z,
                picture_id,
                layer,
                tl0_pic_idx: (layer.is_some() && !f).then_some(Tl0PicIdx(tl0)),
                reference_diffs: match f && p {
                    true => flexible_diffs,
                    false => InlineVec::new(),
                },
                scalability_structure: ss,
            },
        )
}

/// NAL unit header with NRI 3 and `nal_type`, then a slice-like body.
fn nal_unit(nal_type: u8, body: &[u8]) -> Vec<u8> {
    let mut nal = vec![0x60 | nal_type];
    nal.extend_from_slice(body);
    nal
}

proptest! {
    #[test]
    fn vp8_write_then_parse_is_identity(d in vp8_descriptor(), tail in any::<Vec<u8>>()) {
        let mut buf = vec![0u8; Vp8Descriptor::MAX_SIZE];
        let len = d.write(&mut buf).unwrap();
        prop_assert_eq!(len, d.size());
        buf.truncate(len);
        buf.extend_from_slice(&tail);
        prop_assert_eq!(Vp8Descriptor::parse(&buf), Ok(d));
    }

    #[test]
    fn vp8_patch_keeps_length_and_wraps(
        d in vp8_descriptor(),
        new_id in any::<u16>(),
        tl0 in any::<u8>(),
        key_idx in 0u8..32,
        tail in any::<Vec<u8>>(),
    ) {
        let mut packet = vec![0u8; Vp8Descriptor::MAX_SIZE];
        let len = d.write(&mut packet).unwrap();
        packet.truncate(len);
        packet.extend_from_slice(&tail);
        let parsed = Vp8Descriptor::parse(&packet).unwrap();
        let patch = Vp8Patch {
            picture_id: d.picture_id.map(|_| new_id),
            tl0_pic_idx: d.tl0_pic_idx.map(|_| Tl0PicIdx(tl0)),
            key_idx: d.key_idx.map(|_| KeyIdx(key_idx)),
        };
        let mut copy = packet.clone();
        patch.apply(&parsed, &mut copy).unwrap();
        prop_assert_eq!(copy.len(), packet.len());
        let back = Vp8Descriptor::parse(&copy).unwrap();
        prop_assert_eq!(back.size(), d.size());
        if let Some(id) = back.picture_id {
            let modulus = u32::from(id.modulus());
            prop_assert_eq!(u32::from(id.value()), u32::from(new_id) % modulus);
            prop_assert_eq!(id.is_extended(), d.picture_id.unwrap().is_extended());
        }
        prop_assert_eq!(back.tl0_pic_idx, patch.tl0_pic_idx);
        prop_assert_eq!(back.key_idx, patch.key_idx);
        prop_assert_eq!(back.temporal, d.temporal);
        prop_assert_eq!(&copy[len..], &packet[len..]);
    }

    #[test]
    fn vp9_write_then_parse_is_identity(d in vp9_descriptor(), tail in any::<Vec<u8>>()) {
        let mut buf = vec![0u8; VP9_MAX_DESCRIPTOR_SIZE];
        let len = d.write(&mut buf).unwrap();
        prop_assert_eq!(len, d.size());
        buf.truncate(len);
        buf.extend_from_slice(&tail);
        prop_assert_eq!(Vp9Descriptor::parse(&buf), Ok(d));
    }

    /// NAL units of types 1 to 23 sent as one single NAL unit packet, a STAP-A, or the first
    /// and last fragments of an FU-A.
    #[test]
    fn h264_built_payloads_parse_back(
        types in proptest::collection::vec(1u8..=23, 1..6),
        first_mb_zero in any::<bool>(),
    ) {
        let body = [if first_mb_zero { 0x80 } else { 0x40 }, 0x11];
        let keyish = |ts: &[u8]| ts.iter().any(|t| [5, 7, 8].contains(t));

        let single = H264Descriptor::parse(&nal_unit(types[0], &body)).unwrap();
        prop_assert_eq!(single.packetization, Packetization::SingleNalUnit);
        prop_assert!(single.nal_types.contains(NalUnitType(types[0])));
        prop_assert_eq!(single.is_keyframe(), keyish(&types[..1]));

        let mut stap = vec![0x78];
        for &t in &types {
            let nal = nal_unit(t, &body);
            stap.extend_from_slice(&(nal.len() as u16).to_be_bytes());
            stap.extend_from_slice(&nal);
        }
        let stap = H264Descriptor::parse(&stap).unwrap();
        prop_assert_eq!(stap.packetization, Packetization::StapA);
        for t in 1..=23u8 {
            prop_assert_eq!(stap.nal_types.contains(NalUnitType(t)), types.contains(&t));
        }
        prop_assert_eq!(stap.is_keyframe(), keyish(&types));
        prop_assert_eq!(stap.start_of_frame, single.start_of_frame);

        let fu_start = H264Descriptor::parse(&[0x7C, 0x80 | types[0], body[0]]).unwrap();
        prop_assert_eq!(fu_start.is_keyframe(), single.is_keyframe());
        prop_assert_eq!(fu_start.start_of_frame, single.start_of_frame);
        let fu_end = H264Descriptor::parse(&[0x7C, 0x40 | types[0], 0]).unwrap();
        prop_assert_eq!(fu_end.packetization, Packetization::FuA { start: false, end: true });
        prop_assert!(!fu_end.is_keyframe());
    }

    /// An aggregation header and a first OBU element built from random fields parse back.
    #[test]
    fn av1_built_payloads_parse_back(
        [y, n, has_size, has_ext] in any::<[bool; 4]>(),
        w in 0u8..4,
        obu_type in 0u8..16,
        temporal_id in 0u8..8,
        spatial_id in 0u8..4,
        body in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let mut element = vec![obu_type << 3 | u8::from(has_ext) << 2 | u8::from(has_size) << 1];
        if has_ext {
            element.push(temporal_id << 5 | spatial_id << 3);
        }
        element.extend_from_slice(&body);
        let mut payload = vec![u8::from(y) << 6 | w << 4 | u8::from(n) << 3];
        if w != 1 {
            // leb128 of the element length.
            let mut len = element.len();
            loop {
                let more = len >= 0x80;
                payload.push((len & 0x7F) as u8 | if more { 0x80 } else { 0 });
                len >>= 7;
                if !more { break; }
            }
        }
        payload.extend_from_slice(&element);
        let d = Av1Descriptor::parse(&payload).unwrap();
        let expected = Av1Descriptor {
            first_is_continuation: false,
            last_continues: y,
            element_count: w,
            new_coded_video_sequence: n,
            first_obu: Some(ObuHeader {
                obu_type: ObuType(obu_type),
                extension: has_ext.then_some(ObuExtension {
                    temporal_id: TemporalLayerId(temporal_id),
                    spatial_id: SpatialLayerId(spatial_id),
                }),
                has_size_field: has_size,
            }),
        };
        prop_assert_eq!(d, expected);
        prop_assert_eq!(d.is_keyframe(), n || obu_type == 1);
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        for codec in [Codec::Vp8, Codec::Vp9, Codec::H264, Codec::Av1, Codec::Opus] {
            if let Ok(parsed) = parse_payload(codec, &data) {
                let _ = parsed.summary();
            }
        }
    }
}

#[cfg(feature = "fuzzing")]
proptest! {
    /// The fuzz body's own assertions over random bytes, biased towards VP8 and VP9 flags by
    /// trying each input also with its first byte's X or I flag set.
    #[test]
    fn fuzz_body_holds_on_random_bytes(mut data in proptest::collection::vec(any::<u8>(), 1..120)) {
        rtp_ext::fuzz::codec_payloads(&data);
        data[0] |= 0x80;
        rtp_ext::fuzz::codec_payloads(&data);
    }
}
