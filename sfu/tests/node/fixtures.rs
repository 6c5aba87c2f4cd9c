//! What the core's tests start from: a core with the node's defaults, the addresses sessions
//! send from, the stream a publisher sends and what a viewer's packets say of their layers.

use std::net::SocketAddr;
use std::time::Duration;

use rtp_ext::dd::DependencyDescriptor;
use rtp_ext::rtp::RtpPacket;
use sfu::engine::RouterConfig;
use sfu::node::core::NodeCore;
use sfu::node::testing::Harness;

use crate::common;

/// The Dependency Descriptor's extension id in what publishers send.
pub const DD_IN: u8 = 11;
/// The Dependency Descriptor's extension id toward viewers that negotiated it.
pub const DD_OUT: u8 = 5;

/// A core with the default engine and a 30 s session timeout.
pub fn core() -> NodeCore {
    NodeCore::new(RouterConfig::default(), Duration::from_secs(30))
}

/// A harness around [`core`].
pub fn harness() -> Harness {
    Harness::new(core())
}

/// A session's address on loopback.
pub fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// `tus` temporal units of an L3T3 stream.
pub fn l3t3(ssrc: u32, tus: usize) -> Vec<Vec<u8>> {
    common::l3t3_stream(ssrc, tus, DD_IN)
}

/// The spatial ids a viewer received, read from the DD its packets carry.
pub fn spatial_ids(packets: &[Vec<u8>], dd: u8) -> Vec<u8> {
    let mut structure = None;
    packets
        .iter()
        .filter_map(|p| {
            let packet = RtpPacket::parse(p).ok()?;
            let dd = DependencyDescriptor::parse(packet.extension(dd)?, structure.as_ref()).ok()?;
            if let Some(s) = &dd.attached_structure {
                structure = Some(s.clone());
            }
            Some(dd.spatial_id())
        })
        .collect()
}
