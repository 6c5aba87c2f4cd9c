//! The node's whole per-packet path, through its core: a publisher's SRTP packet taken in
//! (authenticated and decrypted, parsed and kept by the engine) and, for the fan-out cases,
//! every datagram it makes the core send polled into a batch's buffers (each viewer's header
//! written, the payload after it, the packet protected there). Real AES-128-GCM sessions on
//! both sides; no socket, which `node/egress_srtp` measures.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use selector::scalability::{GeneratorConfig, ScalabilityMode, StreamGenerator};
use sfu::engine::RouterConfig;
use sfu::node::batch::Batch;
use sfu::node::core::{NodeCore, MAX_DATAGRAM};
use sfu::node::srtp::{session, SrtpContext, SrtpProfile};
use sfu::node::testing::{av1_room, keys, DD_EXT};

use crate::node::{with_room, PACKET_LEN};
use crate::{Case, Stream};

const SSRC: u32 = 0x1000;
/// Publisher packets per pass; a fresh core starts each pass (the SRTP replay windows and
/// the engine refuse repeated sequence numbers).
const PASS: usize = 2_000;

pub fn cases() -> Vec<Case> {
    vec![
        node_path("node/ingress/av1_l3t3", 0, Intake::Read),
        node_path("node/ingress/handed_over/av1_l3t3", 0, Intake::HandedOver),
        node_path("node/fanout/av1_l3t3/8", 8, Intake::Read),
        node_path("node/fanout/av1_l3t3/100", 100, Intake::Read),
    ]
}

/// An L3T3 stream from its first keyframe, each packet's payload grown to [`PACKET_LEN`]
/// bytes, protected as the publisher's browser sends it; and which carry a keyframe's
/// dependency structure.
fn publisher_stream() -> (Vec<Vec<u8>>, Vec<usize>) {
    let config = GeneratorConfig {
        keyframe_interval_tus: 300,
        ssrc: SSRC,
        ..Default::default()
    };
    let generator = StreamGenerator::new(ScalabilityMode::L3T3, config);
    let structure = generator.structure().clone();
    // The publisher is session 0 of the room.
    let keys = keys(SrtpProfile::AeadAes128Gcm, 0).mirrored();
    let mut browser = session(&keys).expect("valid keys");
    let mut structures = Vec::new();
    let packets = generator
        .take(PASS)
        .enumerate()
        .map(|(i, p)| {
            if p.descriptor.attached_structure.is_some() {
                structures.push(i);
            }
            let mut packet = p.rtp_bytes(DD_EXT, &structure);
            // The payload is bytes to the node: a filler is as good as AV1 OBUs.
            packet.resize(PACKET_LEN, 0x5A);
            let mut buf = with_room(&packet);
            let len = browser
                .protect_rtp(&mut buf, packet.len())
                .expect("protects");
            buf.truncate(len);
            buf
        })
        .collect();
    (packets, structures)
}

fn addr(n: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, (n >> 8) as u8, n as u8], 5000))
}

/// A core with one AV1 L3T3 publisher (session 0) and `viewers` viewers of every layer, all
/// connected.
fn core_with(now: Instant, viewers: usize) -> NodeCore {
    let config = RouterConfig {
        // Far above the stream: no viewer's layers are held back by its estimate.
        initial_estimate_bps: 1_000_000_000,
        ..RouterConfig::default()
    };
    let mut core = NodeCore::new(config, Duration::from_secs(3600));
    let addrs: Vec<SocketAddr> = (0..=viewers).map(addr).collect();
    av1_room(&mut core, now, SSRC, 0x5000, &addrs);
    core
}

/// Polls everything the core sends into the batch's buffers, as the media loop does; a full
/// batch is forgotten where the loop would send it. Returns the datagrams polled.
fn drain(core: &mut NodeCore, batch: &mut Batch) -> usize {
    let mut polled = 0;
    loop {
        let Some(buffer) = batch.next_buffer() else {
            batch.clear();
            continue;
        };
        let Some((to, len)) = core.poll_datagram(buffer) else {
            break;
        };
        // Every session here is bound over UDP.
        batch.commit(to.addr(), len);
        polled += 1;
    }
    batch.clear();
    polled
}

/// How a datagram reaches the core.
#[derive(Clone, Copy)]
enum Intake {
    /// Lent from the socket's receive batch, as a node of one worker reads it.
    Read,
    /// Copied by the socket's reader and handed to the worker that owns its sender, as a node
    /// of several workers takes it: the copy is counted in the op.
    HandedOver,
}

/// Each op is one publisher packet through the core and everything it makes the core send:
/// a datagram per viewer, and RTCP when the engine has some.
fn node_path(name: &'static str, viewers: usize, intake: Intake) -> Case {
    let now = Instant::now();
    let (packets, structures) = publisher_stream();
    let mut batch = Batch::new(MAX_DATAGRAM);
    let mut core = core_with(now, viewers);
    let mut next = 0;
    let stream = Stream {
        pass: packets.len(),
        structures,
    };
    Case::per_unit(name, viewers.max(1) as u64, move || {
        if next == packets.len() {
            next = 0;
            core = core_with(now, viewers);
        }
        let packet = &packets[next];
        match intake {
            Intake::Read => core.handle_datagram(now, addr(0), packet),
            Intake::HandedOver => {
                let copy = Cow::Owned(packet.to_vec());
                core.handle_datagram_arrived(now, now, addr(0), copy);
            }
        }
        next += 1;
        let sent = drain(&mut core, &mut batch);
        assert!(
            sent >= viewers,
            "{name}: {sent} datagrams for {viewers} viewers"
        );
    })
    .over(stream)
}
