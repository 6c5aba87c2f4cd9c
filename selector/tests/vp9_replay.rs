//! Real VP9 packets through the VP9 selector at every target layer: browser packets from the
//! shared vectors and two browser captures (one with real loss). No panic, one decision per
//! frame, the marker only on a frame's last packet and at most once per picture, and at
//! temporal layer 0 exactly the pictures with TID 0 from the first keyframe on.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rtp_ext::codec::Vp9Descriptor;
use rtp_ext::rtp::RtpPacket;
use selector::vp9::{Vp9Packet, Vp9Selector};
use selector::{Layer, LayerLimits};

const CAPTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/captures");
const VECTORS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/vectors/dd-vectors.json"
);

/// The RTP packets of a classic pcap of Ethernet, IPv4 and UDP frames.
fn pcap_rtp_packets(name: &str) -> Vec<Vec<u8>> {
    let data = std::fs::read(format!("{CAPTURES}/{name}")).expect("capture present");
    let mut packets = Vec::new();
    let mut at = 24;
    while at + 16 <= data.len() {
        let captured =
            u32::from_le_bytes(data[at + 8..at + 12].try_into().expect("4 bytes")) as usize;
        let frame = &data[at + 16..at + 16 + captured];
        at += 16 + captured;
        let ip = &frame[14..];
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        assert_eq!(ip[9], 17, "UDP");
        packets.push(ip[ihl + 8..].to_vec());
    }
    packets
}

/// The vector packets grouped by SSRC, in order: they come from several unrelated streams.
fn vector_streams() -> BTreeMap<String, Vec<Vec<u8>>> {
    let text = std::fs::read_to_string(VECTORS).expect("vectors present");
    let json: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let mut streams: BTreeMap<String, Vec<Vec<u8>>> = BTreeMap::new();
    for p in json["vp9_rtp_packets"]["packets"]
        .as_array()
        .expect("packets")
    {
        let bytes = hex::decode(p["hex"].as_str().expect("hex")).expect("valid hex");
        let ssrc = p["ssrc"].as_str().expect("ssrc").to_owned();
        streams.entry(ssrc).or_default().push(bytes);
    }
    streams
}

struct Parsed {
    sequence_number: u16,
    timestamp: u32,
    marker: bool,
    descriptor: Vp9Descriptor,
}

fn parse(packets: &[Vec<u8>]) -> Vec<Parsed> {
    packets
        .iter()
        .map(|bytes| {
            let rtp = RtpPacket::parse(bytes).expect("RTP");
            let fields = rtp.fields();
            Parsed {
                sequence_number: fields.sequence_number,
                timestamp: fields.timestamp,
                marker: fields.marker,
                descriptor: Vp9Descriptor::parse(rtp.payload()).expect("VP9 descriptor"),
            }
        })
        .collect()
}

fn targets() -> Vec<Layer> {
    let mut targets: Vec<Layer> = (0..3)
        .flat_map(|s| (0..3).map(move |t| Layer::new(s, t)))
        .collect();
    targets.push(Layer::MAX);
    targets
}

/// Replays `packets` at `target`; checks the per-packet rules and returns the forwarded
/// picture ids.
fn replay(packets: &[Parsed], target: Layer) -> BTreeSet<u16> {
    let mut selector = Vp9Selector::new();
    selector.set_limits(LayerLimits {
        target,
        max: Layer::MAX,
    });
    let mut decisions: HashMap<(u16, u8), bool> = HashMap::new();
    let mut markers: BTreeMap<u32, u32> = BTreeMap::new();
    let mut forwarded = BTreeSet::new();
    for p in packets {
        let d = &p.descriptor;
        let selection = selector.select(&Vp9Packet {
            sequence_number: p.sequence_number,
            timestamp: p.timestamp,
            marker: p.marker,
            descriptor: d,
        });
        let pid = d.picture_id.expect("browsers send picture ids").value();
        let layer = d.layer.unwrap_or_default();
        let key = (pid, layer.sid.0);
        let first = *decisions.entry(key).or_insert(selection.forward);
        assert_eq!(first, selection.forward, "{target:?}: frame {key:?} split");
        if selection.forward {
            assert!(
                target.covers(Layer::new(layer.sid.0, layer.tid.0)),
                "{target:?}: forwarded a frame above the target"
            );
            forwarded.insert(pid);
        }
        if selection.marker {
            assert!(
                d.end_of_frame,
                "marker on a packet that does not end a frame"
            );
            *markers.entry(p.timestamp).or_default() += 1;
        }
    }
    for (ts, count) in markers {
        assert_eq!(count, 1, "{target:?}: picture {ts} has {count} markers");
    }
    forwarded
}

/// Picture ids with TID 0 from the first keyframe on: what temporal layer 0 receives.
fn base_temporal_pictures(packets: &[Parsed]) -> BTreeSet<u16> {
    packets
        .iter()
        .map(|p| &p.descriptor)
        .skip_while(|d| !d.is_keyframe())
        .filter(|d| d.layer.is_none_or(|l| l.tid.0 == 0))
        .filter_map(|d| d.picture_id.map(|id| id.value()))
        .collect()
}

fn check_stream(packets: &[Parsed]) {
    for target in targets() {
        let forwarded = replay(packets, target);
        if target.temporal == 0 {
            assert_eq!(forwarded, base_temporal_pictures(packets), "{target:?}");
        }
    }
}

#[test]
fn browser_vector_packets_replay_at_every_target() {
    let streams = vector_streams();
    assert_eq!(streams.values().map(Vec::len).sum::<usize>(), 19);
    for packets in streams.values() {
        check_stream(&parse(packets));
    }
}

#[test]
fn contiguous_capture_replays_at_every_target() {
    let packets = parse(&pcap_rtp_packets("contiguous_vp9.pcap"));
    assert_eq!(packets.len(), 200);
    // It starts after its keyframe: nothing decodes, so nothing is forwarded.
    assert!(base_temporal_pictures(&packets).is_empty());
    check_stream(&packets);
}

#[test]
fn lossy_capture_replays_at_every_target() {
    let packets = parse(&pcap_rtp_packets("vp9.pcap"));
    assert_eq!(packets.len(), 316);
    assert!(
        !replay(&packets, Layer::MAX).is_empty(),
        "starts with a keyframe"
    );
    check_stream(&packets);
}
