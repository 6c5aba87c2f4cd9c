//! The five real AV1 packets with a Dependency Descriptor (`av1_rtp_packets_with_dd` in the
//! shared vectors) through DD selection, one selector per SSRC as the engine keeps them.

use std::collections::HashMap;
use std::sync::Arc;

use rtp_ext::dd::{DependencyDescriptor, FrameDependencyStructure};
use rtp_ext::rtp::RtpPacket;
use selector::dd::{DdPacket, DdSelector, MAX_DD_SIZE};
use selector::{Layer, LayerLimits};
use serde_json::Value;

struct Forwarded {
    marker: bool,
    rewritten: DependencyDescriptor,
}

fn packets() -> Vec<Vec<u8>> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/vectors/dd-vectors.json"
    );
    let all: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("vectors")).expect("json");
    let set = &all["av1_rtp_packets_with_dd"];
    assert_eq!(set["dd_ext_id"], 11);
    set["packets"]
        .as_array()
        .expect("list")
        .iter()
        .map(|p| hex::decode(p["hex"].as_str().expect("hex")).expect("digits"))
        .collect()
}

/// Replays all five packets with `target` for every SSRC; `None` for a dropped packet.
fn replay(target: Layer) -> Vec<Option<Forwarded>> {
    let mut selectors: HashMap<u32, (DdSelector, Option<Arc<FrameDependencyStructure>>)> =
        HashMap::new();
    let mut out = Vec::new();
    for bytes in packets() {
        let packet = RtpPacket::parse(&bytes).expect("real packet");
        let fields = packet.fields();
        let (selector, structure) = selectors.entry(fields.ssrc).or_insert_with(|| {
            let mut s = DdSelector::new();
            s.set_limits(LayerLimits {
                target,
                max: Layer::MAX,
            });
            (s, None)
        });
        let dd = DependencyDescriptor::parse(packet.extension(11).expect("DD"), structure.as_ref())
            .expect("DD parses");
        if dd.attached_structure.is_some() {
            structure.clone_from(&dd.attached_structure);
        }
        let known = structure.as_ref().expect("structure seen");
        let dd_packet = DdPacket {
            sequence_number: fields.sequence_number,
            marker: fields.marker,
            descriptor: &dd,
            structure: known,
        };
        let mut buf = [0u8; MAX_DD_SIZE];
        let selection = selector.select(&dd_packet, &mut buf).expect("rewrites");
        out.push(selection.forward.then(|| {
            Forwarded {
                marker: selection.marker,
                rewritten: DependencyDescriptor::parse(
                    &buf[..selection.descriptor_len],
                    Some(known),
                )
                .expect("parses"),
            }
        }));
    }
    out
}

#[test]
fn best_layer_forwards_all_five_with_their_structures_and_markers() {
    let out = replay(Layer::MAX);
    let forwarded: Vec<bool> = out.iter().map(Option::is_some).collect();
    assert_eq!(forwarded, [true; 5]);
    let got: Vec<_> = out.iter().flatten().collect();
    // Non-scalable keyframe: structure passed on, one decode target.
    assert!(got[0].rewritten.attached_structure.is_some());
    assert_eq!(got[0].rewritten.active_decode_targets, Some(0b1));
    assert!(!got[0].marker, "not the end of the frame");
    // Its second packet ends the frame and the temporal unit.
    assert!(got[2].marker);
    assert_eq!(got[2].rewritten.frame_number, 1);
    // Scalable keyframe of an L3T3_KEY stream: the subscriber takes S2T2 and is told it can
    // decode S2's three targets (S0 and S1 frames after the keyframe will not reach it).
    assert_eq!(
        got[1]
            .rewritten
            .attached_structure
            .as_ref()
            .map(|s| s.decode_target_count),
        Some(9)
    );
    assert_eq!(got[1].rewritten.active_decode_targets, Some(0b111_000_000));
    // The publisher shrinks its active decode targets to S0 (0x7) right after the keyframe: the
    // subscriber has every S0 frame since it, so it falls back at once, without a keyframe, and
    // is told it can decode S0's three targets only.
    assert_eq!(got[3].rewritten.active_decode_targets, Some(0b111));
    assert!(
        got[3].marker,
        "S0 is now the highest forwarded spatial layer"
    );
    // Portrait L1T3 keyframe without chains: forwarded, all three temporal targets.
    assert_eq!(got[4].rewritten.active_decode_targets, Some(0b111));
    assert_eq!(got[4].rewritten.frame_dependencies.chain_diffs.len(), 0);
}

#[test]
fn base_temporal_layer_drops_the_t2_frame() {
    let out = replay(Layer::new(0, 0));
    let forwarded: Vec<bool> = out.iter().map(Option::is_some).collect();
    assert_eq!(forwarded, [true, true, true, false, true]);
    let scalable_key = out[1].as_ref().unwrap();
    assert_eq!(
        scalable_key.rewritten.active_decode_targets,
        Some(0b1),
        "S0T0 only"
    );
}
