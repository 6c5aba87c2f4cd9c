//! Conformance: the 19 Chrome and Firefox VP9 RTP packets in `../shared/vectors/dd-vectors.json`
//! parse to the payload descriptor fields upstream tests assert, and write back byte for byte.

use rtp_ext::codec::{parse_payload, Codec, PayloadDescriptor, Vp9Descriptor};
use rtp_ext::rtp::RtpPacket;
use serde_json::Value;

mod common;

fn packets() -> Vec<Value> {
    common::packets("vp9_rtp_packets")
}

/// The marker bit and the payload of a real packet.
fn rtp_payload(packet: &[u8]) -> (bool, &[u8]) {
    let parsed = RtpPacket::parse(packet).expect("real packet");
    (parsed.fields().marker, parsed.payload())
}

fn optional(v: &Value) -> Option<u64> {
    v.as_u64()
}

#[test]
fn all_vp9_packets_match_expected_fields() {
    let packets = packets();
    assert_eq!(packets.len(), 19);
    for p in &packets {
        let name = p["description"].as_str().expect("description");
        let e = &p["expected"];
        let bytes = hex::decode(p["hex"].as_str().expect("hex")).expect("hex digits");
        let (marker, payload) = rtp_payload(&bytes);
        assert!(payload.starts_with(&hex::decode(p["payload_prefix"].as_str().unwrap()).unwrap()));
        let d = Vp9Descriptor::parse(payload).unwrap_or_else(|err| panic!("{name}: {err}"));
        let flag = |key: &str| e[key].as_bool().unwrap_or_else(|| panic!("{name}: {key}"));

        assert_eq!(d.start_of_frame, flag("isStartOfFrame"), "{name}");
        assert_eq!(d.end_of_frame, flag("isEndOfFrame"), "{name}");
        // End of picture is the RTP marker bit (RFC 9628 section 4.1), not a descriptor field.
        assert_eq!(marker, flag("isEndOfPicture"), "{name}");
        assert_eq!(d.is_keyframe(), flag("isKeyframe"), "{name}");
        assert_eq!(
            d.inter_picture_predicted,
            flag("isInterPicturePredicted"),
            "{name}"
        );
        let id = d.picture_id.expect("every vector has a picture id");
        assert_eq!(
            u64::from(id.value()),
            e["pictureId"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(id.is_extended(), flag("hasExtendedPictureId"), "{name}");
        // "Upper level reference" is the inverse of Z.
        assert_eq!(
            !d.not_upper_layer_reference,
            flag("isUpperLevelReference"),
            "{name}"
        );
        let layer = d.layer;
        assert_eq!(
            layer.map(|l| u64::from(l.tid.0)),
            optional(&e["tid"]),
            "{name}"
        );
        assert_eq!(
            layer.map(|l| u64::from(l.sid.0)),
            optional(&e["sid"]),
            "{name}"
        );
        let switching = layer.is_some_and(|l| l.switching_up_point);
        assert_eq!(switching, flag("isSwitchingUpPoint"), "{name}");
        let inter_layer = layer.is_some_and(|l| l.inter_layer_dependency);
        assert_eq!(inter_layer, flag("usesInterLayerDependency"), "{name}");
        let tl0 = d.tl0_pic_idx.map(|t| u64::from(t.0));
        assert_eq!(tl0, optional(&e["tL0PICIDX"]), "{name}");
        let size = e["descriptorSize"].as_u64().unwrap();
        assert_eq!(d.size() as u64, size, "{name}");

        let mut buf = [0u8; rtp_ext::codec::VP9_MAX_DESCRIPTOR_SIZE];
        let written = d
            .write(&mut buf)
            .unwrap_or_else(|err| panic!("{name}: {err}"));
        assert_eq!(
            &buf[..written],
            &payload[..size as usize],
            "{name}: rewrite"
        );
    }
}

#[test]
fn summaries_of_the_k_svc_keyframe() {
    let packets = packets();
    let summaries: Vec<_> = packets[..8]
        .iter()
        .map(|p| {
            let bytes = hex::decode(p["hex"].as_str().unwrap()).unwrap();
            match parse_payload(Codec::Vp9, rtp_payload(&bytes).1).unwrap() {
                d @ PayloadDescriptor::Vp9(_) => d.summary(),
                other => panic!("not VP9: {other:?}"),
            }
        })
        .collect();
    // Spatial layers 0, 1, 2 of one keyframe picture; only layer 0 is decodable alone.
    let layers: Vec<_> = summaries
        .iter()
        .map(|s| s.spatial_layer.unwrap().0)
        .collect();
    assert_eq!(layers, [0, 0, 0, 1, 1, 1, 2, 2]);
    let keyframes: Vec<_> = summaries.iter().map(|s| s.keyframe).collect();
    assert_eq!(
        keyframes,
        [true, true, true, false, false, false, false, false]
    );
    assert!(summaries
        .iter()
        .all(|s| s.picture_id.unwrap().value() == 7781));
}

#[test]
fn first_keyframe_carries_a_three_layer_scalability_structure() {
    let bytes = hex::decode(packets()[0]["hex"].as_str().unwrap()).unwrap();
    let d = Vp9Descriptor::parse(rtp_payload(&bytes).1).unwrap();
    let ss = d.scalability_structure.expect("SS on the keyframe");
    assert_eq!(ss.spatial_layers, 3);
    let widths: Vec<_> = ss.resolutions.unwrap().iter().map(|r| r.width).collect();
    assert_eq!(widths, [320, 640, 1280]);
    let group = ss.picture_group.unwrap();
    let tids: Vec<_> = group.iter().map(|g| g.tid.0).collect();
    assert_eq!(tids, [0, 2, 1, 2]);
}
