//! The data channel association a relay link carries, between two nodes' cores: its SCTP
//! packets cross inside the link's SRTCP (the test carries the datagrams, real keys), it
//! comes up with the link and ends with it.

use std::time::Duration;

use sfu::node::core::LINK_TIMEOUT;

use crate::relay::Pair;

#[test]
fn a_links_association_comes_up_over_its_srtcp_and_ends_with_the_link() {
    let mut pair = Pair::new();
    let link = pair.link.mirrored();
    let data_links = |pair: &Pair| {
        let figures = |h: &sfu::node::testing::Harness| h.core.snapshot().media_relay.data_links;
        (figures(&pair.a), figures(&pair.b))
    };
    assert_eq!(data_links(&pair), (0, 0));
    pair.start(&link);
    // The edge's INIT, the origin's INIT ACK, COOKIE ECHO and ACK: each inside an APP packet
    // the other end authenticated and decrypted.
    assert_eq!(data_links(&pair), (1, 1), "both ends up");
    let metrics = pair.a.core.snapshot().render();
    assert!(
        metrics.contains("strata_media_relay_data_links 1"),
        "{metrics}"
    );
    // Keepalives keep it; the association has nothing to say meanwhile.
    pair.run(Duration::from_millis(250), 8, false);
    assert_eq!(data_links(&pair), (1, 1));

    // The link cut: both ends lose it, and its association with it.
    pair.run(Duration::from_millis(250), 8, true);
    assert!(Duration::from_millis(250) * 8 > LINK_TIMEOUT);
    assert_eq!(pair.a.core.relay_counters().links_lost, 1);
    assert_eq!(data_links(&pair), (0, 0));
    assert_eq!(pair.b.core.data_relay().entries(), 0, "nothing of it left");
    assert_eq!(pair.a.core.data_relay().entries(), 0);
}
