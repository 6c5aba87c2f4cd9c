//! The media relay's control channel under fuzzing: the bytes as a request body signed with
//! the cluster's secret (so reading goes past the signature), as the same body under a wrong
//! signature, as an origin's answer the edge would publish, as the link's own RTCP (its
//! BYEs, "changed" packets and the SCTP packets of its data channel association) an end
//! reads, and as the protocol of a data channel another node opened on the link.

use crate::node::cluster::relay_link::{
    read_request, sign, LinkError, RelayAnswer, RelayKind, REQUEST_LIFETIME,
};
use crate::node::core::{bye_ssrcs, changed_tags, data_ended_tags, link_data, write_link_data};
use crate::node::datachannel::relay::{link_protocol, parse_link_protocol};

/// The cluster secret the bodies are signed with.
pub const RELAY_SECRET: &str = "fuzz-cluster-secret";
/// The time requests are read at, in milliseconds since the Unix epoch.
pub const RELAY_NOW_MS: u64 = 1_700_000_000_000;

/// `relay_link`: see the module.
pub fn relay_link(data: &[u8]) {
    // The link's own RTCP as an end reads it once authenticated: BYEs, "changed" and "data
    // ended" packets.
    assert!(bye_ssrcs(data).len() <= data.len() / 4);
    assert!(changed_tags(data).len() <= data.len() / 12);
    assert!(data_ended_tags(data).len() <= data.len() / 12);
    let mut again = Vec::new();
    let carried: Vec<&[u8]> = link_data(data).filter_map(Result::ok).collect();
    for &sctp in &carried {
        write_link_data(0, sctp, &mut again).expect("a packet read fits a packet");
    }
    let reread: Vec<&[u8]> = link_data(&again).filter_map(Result::ok).collect();
    assert_eq!(reread, carried, "what was read writes back to the same");
    if let Some((owner, room)) = std::str::from_utf8(data)
        .ok()
        .and_then(|text| parse_link_protocol(text).ok())
    {
        assert_eq!(link_protocol(owner, room).as_bytes(), data);
    }
    let tag = sign(RELAY_SECRET, data);
    if let Ok(request) = read_request(RELAY_SECRET, data, &tag, RELAY_NOW_MS) {
        let lifetime = REQUEST_LIFETIME.as_millis() as u64;
        assert!(request.at_ms.abs_diff(RELAY_NOW_MS) <= lifetime);
        assert!(request.kind == RelayKind::Publisher || request.source.is_none());
        assert!(request.node.iter().all(|n| (1..=64).contains(&n.len())));
    }
    let forged = read_request("another secret", data, &tag, RELAY_NOW_MS);
    assert_eq!(forged, Err(LinkError::Unauthenticated));
    let Ok(answer) = serde_json::from_slice::<RelayAnswer>(data) else {
        return;
    };
    if let Ok(offer) = answer.offer() {
        assert_eq!(offer.tracks.len(), answer.tracks.len());
        for track in &offer.tracks {
            assert!((1..=4).contains(&track.config.streams.len()));
        }
    }
}
