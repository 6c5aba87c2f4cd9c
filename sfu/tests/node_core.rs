//! The node's media core driven directly, without sockets or clocks: ICE-lite binding,
//! sessions joining and leaving rooms, per-viewer layers (an AV1 viewer without the DD gets
//! the base spatial layer only), simulcast streams bound by rid, and bad datagrams counted.
//! SRTP is replaced by a pass-through context: its own tests live with it.

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtp_ext::codec::{Codec, MediaKind};
use rtp_ext::dd::DependencyDescriptor;
use rtp_ext::rtp::RtpPacket;
use selector::Layer;
use sfu::engine::{RouterConfig, StreamConfig, StreamIds, TrackConfig};
use sfu::node::admission::Admission;
use sfu::node::core::{CoreError, NodeCore, Resource, MAX_DATAGRAM};
use sfu::node::limits::{LimitError, Limits};
use sfu::node::metrics::DropReason;
use sfu::node::peer::{
    IceCredentials, Join, Kind, Owner, PeerId, PublishedTrack, Publisher, Viewer, ViewerCodec,
    ViewerMedia,
};
use sfu::node::shard::Steering;
use sfu::node::srtp::Unprotected;
use sfu::node::stats::Ceiling;
use stun::message::{Message, BINDING_SUCCESS};

const DD_IN: u8 = 11;
const DD_OUT: u8 = 5;
const AV1_PT: u8 = 45;

fn ice(n: u32) -> IceCredentials {
    IceCredentials {
        local_ufrag: format!("ufrag{n}"),
        local_pwd: format!("password-of-session-{n:04}"),
    }
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn binding_request(ice: &IceCredentials, nominate: bool) -> Vec<u8> {
    let username = format!("{}:browser", ice.local_ufrag);
    sfu::node::ice::binding_request(&username, &ice.local_pwd, nominate).expect("valid request")
}

struct Harness {
    core: NodeCore,
    now: Instant,
    next: u32,
    /// Datagrams the core sent, by destination.
    sent: HashMap<SocketAddr, Vec<Vec<u8>>>,
}

impl Harness {
    fn new() -> Self {
        Self {
            core: NodeCore::new(RouterConfig::default(), Duration::from_secs(30)),
            now: Instant::now(),
            next: 0,
            sent: HashMap::new(),
        }
    }

    /// ICE nomination from `at` and a finished DTLS handshake.
    fn connect(&mut self, id: PeerId, ice: &IceCredentials, at: SocketAddr) {
        self.core
            .handle_datagram(self.now, at, &binding_request(ice, true));
        self.core.set_srtp(id, Box::new(Unprotected));
        self.drain();
    }

    fn publisher(&mut self, room: &str, publisher: Publisher, at: SocketAddr) -> PeerId {
        self.next += 1;
        let ice = ice(self.next);
        let id = self
            .core
            .add_publisher(self.now, Join::new(room, ice.clone()), publisher)
            .expect("free SSRCs");
        self.connect(id, &ice, at);
        id
    }

    fn viewer(&mut self, room: &str, viewer: Viewer, at: SocketAddr) -> PeerId {
        self.next += 1;
        let ice = ice(self.next);
        let id = self
            .core
            .add_viewer(self.now, Join::new(room, ice.clone()), viewer)
            .expect("room for a viewer");
        self.connect(id, &ice, at);
        id
    }

    fn send(&mut self, from: SocketAddr, datagram: &[u8]) {
        self.core.handle_datagram(self.now, from, datagram);
        self.drain();
    }

    fn drain(&mut self) {
        let mut out = vec![0; MAX_DATAGRAM];
        while let Some((to, len)) = self.core.poll_datagram(&mut out) {
            self.sent.entry(to).or_default().push(out[..len].to_vec());
        }
    }

    /// RTP packets sent to `to` (RTCP and STUN left out).
    fn media_to(&self, to: SocketAddr) -> Vec<Vec<u8>> {
        self.sent
            .get(&to)
            .into_iter()
            .flatten()
            .filter(|d| d.first().is_some_and(|b| b & 0xC0 == 0x80))
            .filter(|d| d.get(1).is_some_and(|pt| !(192..=223).contains(pt)))
            .cloned()
            .collect()
    }
}

fn av1_track(ssrc: u32) -> TrackConfig {
    let mut config = TrackConfig::single(Codec::Av1, ssrc);
    config.dd_ext_id = Some(DD_IN);
    config
}

fn publisher_of(mut config: TrackConfig, rids: &[&str]) -> Publisher {
    if !rids.is_empty() {
        config.stream_ids = StreamIds::Rids {
            rids: rids.iter().map(|r| r.to_string()).collect(),
            rid_ext: 12,
            repaired_rid_ext: Some(13),
            announced: Default::default(),
        };
    }
    Publisher {
        tracks: vec![PublishedTrack {
            mid: String::new(),
            config,
            id: None,
            fmtp: String::new(),
        }],
        codecs: Vec::new(),
    }
}

fn av1_viewer(ssrc: u32, dd: Option<u8>, target: Layer) -> Viewer {
    Viewer {
        video: Some(ViewerMedia {
            ssrc,
            rtx_ssrc: ssrc + 1,
            codecs: vec![ViewerCodec {
                codec: Codec::Av1,
                payload_type: AV1_PT,
                rtx_payload_type: Some(AV1_PT + 1),
                fmtp: String::new(),
            }],
            dd_ext_id: dd,
            two_byte_allowed: true,
            transport_cc_ext_id: None,
            down_track: None,
        }),
        audio: None,
        target,
        source: None,
    }
}

/// `tus` temporal units of an L3T3 stream.
fn l3t3(ssrc: u32, tus: usize) -> Vec<Vec<u8>> {
    common::l3t3_stream(ssrc, tus, DD_IN)
}

/// The spatial ids a viewer received, read from the DD its packets carry.
fn spatial_ids(packets: &[Vec<u8>], dd: u8) -> Vec<u8> {
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

#[test]
fn binding_requests_are_answered_and_latch_the_nominated_address() {
    let mut h = Harness::new();
    let credentials = ice(1);
    let id = h
        .core
        .add_viewer(
            h.now,
            Join::new("room", credentials.clone()),
            av1_viewer(0x10, None, Layer::MAX),
        )
        .expect("room for a viewer");
    h.send(addr(4000), &binding_request(&credentials, false));
    h.send(addr(4001), &binding_request(&credentials, true));
    for port in [4000, 4001] {
        let mut response = Message::new();
        response.raw = h.sent[&addr(port)][0].clone();
        response.decode().expect("STUN");
        assert_eq!(response.typ, BINDING_SUCCESS);
    }
    assert_eq!(h.core.peer(id).and_then(|p| p.addr), Some(addr(4001)));
    let mut wrong = ice(1);
    wrong.local_pwd = "not the password at all".into();
    h.send(addr(4002), &binding_request(&wrong, true));
    assert!(!h.sent.contains_key(&addr(4002)));
    assert_eq!(h.core.peer(id).and_then(|p| p.addr), Some(addr(4001)));
    assert_eq!(h.core.counters().dropped(DropReason::BadStun), 1);
}

#[test]
fn viewers_get_their_layers_and_av1_without_dd_only_the_base_layer() {
    let mut h = Harness::new();
    let with_dd = h.viewer(
        "room",
        av1_viewer(0x10, Some(DD_OUT), Layer::MAX),
        addr(5001),
    );
    h.viewer("room", av1_viewer(0x20, None, Layer::MAX), addr(5002));
    h.publisher("room", publisher_of(av1_track(0xA1), &[]), addr(5000));
    assert_eq!(h.core.snapshot().subscriptions, 2);
    for packet in l3t3(0xA1, 30) {
        h.send(addr(5000), &packet);
    }
    let full = h.media_to(addr(5001));
    let spatial = spatial_ids(&full, DD_OUT);
    assert_eq!(spatial.len(), full.len(), "every packet carries our DD");
    assert!((0..3).all(|s| spatial.contains(&s)), "all three layers");

    let base = h.media_to(addr(5002));
    assert!(!base.is_empty());
    for p in &base {
        let packet = RtpPacket::parse(p).expect("RTP");
        assert_eq!(packet.extension_count(), 0, "no DD toward this viewer");
        assert_eq!(packet.fields().payload_type, AV1_PT);
    }
    assert!(
        base.len() * 2 < full.len(),
        "the base layer alone: {} of {} packets",
        base.len(),
        full.len()
    );

    h.core
        .set_target(with_dd, Layer::new(0, 0))
        .expect("a viewer");
    let before = h.media_to(addr(5001)).len();
    for packet in l3t3(0xA1, 60).split_off(l3t3(0xA1, 30).len()) {
        h.send(addr(5000), &packet);
    }
    let after = &h.media_to(addr(5001))[before..];
    assert!(!after.is_empty());
    assert!(spatial_ids(after, DD_OUT).iter().all(|&s| s == 0));
}

#[test]
fn a_viewer_moves_to_the_next_publisher_when_the_first_leaves() {
    let mut h = Harness::new();
    let first = h.publisher("room", publisher_of(av1_track(0xA1), &[]), addr(6000));
    h.viewer(
        "room",
        av1_viewer(0x10, Some(DD_OUT), Layer::MAX),
        addr(6001),
    );
    h.publisher("room", publisher_of(av1_track(0xB1), &[]), addr(6002));
    h.publisher("other", publisher_of(av1_track(0xC1), &[]), addr(6003));
    assert_eq!(h.core.snapshot().subscriptions, 1);
    h.core.remove_peer(first).expect("known");
    assert_eq!(h.core.poll_removed(), Some(first));
    let snapshot = h.core.snapshot();
    assert_eq!((snapshot.publishers, snapshot.subscriptions), (2, 1));
    for packet in l3t3(0xB1, 10) {
        h.send(addr(6002), &packet);
    }
    let from_the_room = h.media_to(addr(6001)).len();
    assert!(from_the_room > 0, "the second publisher's media");
    for packet in l3t3(0xC1, 10) {
        h.send(addr(6003), &packet);
    }
    assert_eq!(
        h.media_to(addr(6001)).len(),
        from_the_room,
        "nothing from another room"
    );
}

#[test]
fn simulcast_streams_are_bound_by_rid() {
    let mut h = Harness::new();
    let mut config = TrackConfig::single(Codec::Av1, 0xF0);
    config.dd_ext_id = Some(DD_IN);
    config.streams = (0..2)
        .map(|i| StreamConfig {
            ssrc: 0xF0 + i,
            rtx_ssrc: None,
        })
        .collect();
    h.publisher("room", publisher_of(config, &["q", "f"]), addr(7000));
    h.viewer(
        "room",
        av1_viewer(0x10, Some(DD_OUT), Layer::MAX),
        addr(7001),
    );
    for packet in l3t3(0x5151, 20) {
        h.send(addr(7000), &common::with_rid(&packet, 12, b"f"));
    }
    assert!(
        !h.media_to(addr(7001)).is_empty(),
        "stream f is bound and forwarded"
    );
    let stats = h.core.snapshot();
    assert_eq!(stats.node.dropped(DropReason::UnknownSsrc), 0);
}

#[test]
fn datagrams_from_strangers_and_before_keys_are_counted_and_dropped() {
    let mut h = Harness::new();
    h.send(addr(8000), &l3t3(0xA1, 1)[0]);
    assert_eq!(h.core.counters().dropped(DropReason::UnknownSource), 1);
    let credentials = ice(9);
    let publisher = publisher_of(av1_track(0xA1), &[]);
    h.core
        .add_publisher(h.now, Join::new("room", credentials.clone()), publisher)
        .expect("free SSRC");
    h.send(addr(8001), &binding_request(&credentials, true));
    h.send(addr(8001), &l3t3(0xA1, 1)[0]);
    assert_eq!(h.core.counters().dropped(DropReason::NoKeys), 1);
    h.send(addr(8001), &[0x41, 0x00]);
    assert_eq!(h.core.counters().dropped(DropReason::NotWebRtc), 1);
    // SSRCs are the publisher's own (RFC 3550 section 8): another session may use the same,
    // but one session cannot announce one twice.
    let again = publisher_of(av1_track(0xA1), &[]);
    assert!(h
        .core
        .add_publisher(h.now, Join::new("room", ice(10)), again)
        .is_ok());
    let mut twice = publisher_of(av1_track(0xB1), &[]);
    twice.tracks.push(twice.tracks[0].clone());
    let before = h.core.table_entries();
    assert_eq!(
        h.core
            .add_publisher(h.now, Join::new("room", ice(11)), twice)
            .map(|_| ()),
        Err(CoreError::SsrcInUse)
    );
    assert_eq!(h.core.table_entries(), before, "nothing of it stays");
}

/// Whether a datagram is a PLI (RFC 4585 section 6.3.1: PSFB, FMT 1), alone or in a compound.
fn has_pli(datagram: &[u8]) -> bool {
    let mut rest = datagram;
    while rest.len() >= 4 {
        if rest[0] & 0x1F == 1 && rest[1] == 206 {
            return true;
        }
        let words = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
        rest = rest.get((words + 1) * 4..).unwrap_or_default();
    }
    false
}

impl Harness {
    /// What the media loop does on each input: the input, then whatever timer is due.
    fn step(&mut self, from: SocketAddr, datagram: &[u8]) {
        self.core.handle_datagram(self.now, from, datagram);
        if self.core.poll_timeout().is_some_and(|at| at <= self.now) {
            self.core.handle_timeout(self.now);
        }
        self.drain();
    }
}

#[test]
fn timers_run_on_time_under_an_input_every_100_ms() {
    let mut h = Harness::new();
    h.core = NodeCore::new(RouterConfig::default(), Duration::from_secs(3));
    h.publisher("room", publisher_of(av1_track(0xA1), &[]), addr(9000));
    h.viewer(
        "room",
        av1_viewer(0x10, Some(DD_OUT), Layer::MAX),
        addr(9001),
    );
    // The stream without its first keyframe: the viewer can only start at a keyframe it has
    // to ask for, and nothing but a timer sends that request upstream.
    let packets = l3t3(0xA1, 60);
    let skip = packets
        .iter()
        .position(|p| p[1] & 0x80 != 0)
        .expect("a marker")
        + 1;
    let started = h.now;
    let mut pli_at = None;
    let mut removed_at = None;
    for packet in packets[skip..].iter().cycle().take(60) {
        h.now += Duration::from_millis(100);
        h.step(addr(9000), packet);
        if pli_at.is_none()
            && h.sent
                .get(&addr(9000))
                .is_some_and(|d| d.iter().any(|d| has_pli(d)))
        {
            pli_at = Some(h.now - started);
        }
        if removed_at.is_none() && h.core.poll_removed().is_some() {
            removed_at = Some(h.now - started);
        }
    }
    assert_eq!(
        pli_at,
        Some(Duration::from_millis(100)),
        "the keyframe request goes out with the first packet that needs it"
    );
    // Neither session sends STUN after connecting: both are silent for the 3 s timeout, and
    // the once-a-second sweep removes them within a second after it.
    let removed = removed_at.expect("the silent sessions are swept");
    assert!(
        removed > Duration::from_secs(3) && removed <= Duration::from_millis(4100),
        "swept at {removed:?}"
    );
    assert_eq!(h.core.snapshot().publishers + h.core.snapshot().viewers, 0);
}

#[test]
fn a_publisher_cannot_send_under_another_sessions_ssrc() {
    let mut h = Harness::new();
    h.publisher("a", publisher_of(av1_track(0xA1), &[]), addr(9100));
    h.viewer("a", av1_viewer(0x10, Some(DD_OUT), Layer::MAX), addr(9101));
    h.publisher("b", publisher_of(av1_track(0xB1), &[]), addr(9102));
    h.viewer("b", av1_viewer(0x20, Some(DD_OUT), Layer::MAX), addr(9103));
    for packet in l3t3(0xA1, 10) {
        h.send(addr(9100), &packet);
    }
    let before = h.media_to(addr(9101)).len();
    assert!(before > 0, "room a's own media flows");
    // Room b's publisher sends under room a's SSRC, with sequence numbers following it.
    let injected = l3t3(0xA1, 20);
    for packet in &injected[before..] {
        h.send(addr(9102), packet);
    }
    assert_eq!(
        h.media_to(addr(9101)).len(),
        before,
        "nothing reached room a"
    );
    assert!(h.media_to(addr(9103)).is_empty(), "nor room b");
    assert_eq!(
        h.core.counters().dropped(DropReason::UnknownSsrc),
        (injected.len() - before) as u64
    );
}

/// Also as one worker of several: the addresses its sessions were bound at leave the shared
/// steering table, whether a session is ended or swept out for silence.
#[test]
fn sessions_that_come_and_go_leave_every_table_empty() {
    let mut h = Harness::new();
    let steering = Arc::new(Steering::default());
    let admission = Arc::new(Admission::default());
    h.core = std::mem::replace(
        &mut h.core,
        NodeCore::new(RouterConfig::default(), Duration::from_secs(30)),
    )
    .with_shard(1, admission.clone(), steering.clone());
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut live = Vec::new();
    for i in 0..1000u32 {
        let room = format!("room{}", next() % 7);
        let at = addr(10_000 + (i % 50_000) as u16);
        let id = if next() % 4 == 0 {
            h.publisher(&room, publisher_of(av1_track(0x1000 + i), &[]), at)
        } else {
            h.viewer(&room, av1_viewer(0x10, Some(DD_OUT), Layer::MAX), at)
        };
        live.push(id);
        if next() % 3 == 0 {
            let index = (next() % live.len() as u64) as usize;
            h.core.remove_peer(live.swap_remove(index)).expect("live");
        }
    }
    assert!(h.core.table_entries() > 0);
    assert_eq!(
        steering.len(),
        live.len(),
        "one bound address per live session"
    );
    for _ in 0..live.len() / 2 {
        let id = live.pop().expect("live");
        h.core.remove_peer(id).expect("live");
    }
    // The rest fall silent and are swept.
    h.now += Duration::from_secs(31);
    h.core.handle_timeout(h.now);
    h.drain();
    assert_eq!(h.core.table_entries(), 0, "every map is empty");
    assert!(steering.is_empty(), "no address steered to a gone session");
    assert_eq!(admission.entries(), 0, "no place held for a gone session");
    assert_eq!(h.core.room_count(), 0);
    assert_eq!(h.core.remove_peer(PeerId(7)), Err(CoreError::UnknownPeer));
}

#[test]
fn each_limit_refuses_with_its_reason_and_changes_nothing() {
    let limits = Limits {
        sessions: 4,
        sessions_per_room: 2,
        sessions_per_client: 3,
        handshakes: 3,
        ..Limits::default()
    };
    let mut core =
        NodeCore::new(RouterConfig::default(), Duration::from_secs(30)).with_limits(limits);
    let now = Instant::now();
    let client = |n: u8| Some(std::net::IpAddr::from([10, 0, 0, n]));
    let join = |room: &str, n: u32, c: u8| Join {
        client: client(c),
        ..Join::new(room, ice(n))
    };
    let viewer = || av1_viewer(0x10, None, Layer::MAX);
    let a = core
        .add_viewer(now, join("a", 1, 1), viewer())
        .expect("room");
    let b = core
        .add_viewer(now, join("a", 2, 1), viewer())
        .expect("room");
    let full = |core: &mut NodeCore, join: Join, wanted: LimitError| {
        let before = core.table_entries();
        assert_eq!(
            core.add_viewer(now, join.clone(), viewer()),
            Err(CoreError::Limit(wanted))
        );
        let publisher = publisher_of(av1_track(0x77), &[]);
        assert_eq!(
            core.add_publisher(now, join, publisher),
            Err(CoreError::Limit(wanted))
        );
        assert_eq!(core.table_entries(), before, "nothing changed");
        assert_eq!(core.counters().refused(wanted), 2);
    };
    full(&mut core, join("a", 3, 2), LimitError::RoomFull(2));
    core.add_viewer(now, join("b", 4, 1), viewer())
        .expect("room");
    full(&mut core, join("c", 5, 1), LimitError::ClientFull(3));
    full(&mut core, join("c", 6, 2), LimitError::Handshakes(3));
    core.set_srtp(a, Box::new(Unprotected));
    core.add_viewer(now, join("c", 7, 2), viewer())
        .expect("a handshake ended");
    full(&mut core, join("d", 8, 3), LimitError::NodeFull(4));
    core.remove_peer(b).expect("live");
    core.add_viewer(now, join("d", 9, 3), viewer())
        .expect("a session left");
}

#[test]
fn a_resource_answers_only_its_kind_room_and_creator() {
    let mut core = NodeCore::new(RouterConfig::default(), Duration::from_secs(30));
    let now = Instant::now();
    let alice = Owner::of("Bearer alice");
    let join = Join {
        owner: Some(alice),
        ..Join::new("room", ice(1))
    };
    let id = core
        .add_viewer(now, join, av1_viewer(0x10, None, Layer::MAX))
        .expect("room");
    let resource = |kind, room: &str, owner| Resource {
        kind,
        room: room.to_owned(),
        id,
        owner,
    };
    assert_eq!(
        core.resource(&resource(Kind::Viewer, "room", Some(alice))),
        Ok(id)
    );
    let mallory = Some(Owner::of("Bearer mallory"));
    assert_eq!(
        core.resource(&resource(Kind::Viewer, "room", mallory)),
        Err(CoreError::NotOwner)
    );
    assert_eq!(
        core.resource(&resource(Kind::Viewer, "room", None)),
        Err(CoreError::NotOwner)
    );
    for (kind, room) in [(Kind::Publisher, "room"), (Kind::Viewer, "other")] {
        assert_eq!(
            core.resource(&resource(kind, room, Some(alice))),
            Err(CoreError::UnknownPeer)
        );
    }
    assert_eq!(id.to_string().len(), 32, "128 bits in hex");
    assert_eq!(id.to_string().parse(), Ok(id));
}

#[test]
fn a_packet_the_engine_refuses_is_counted_once() {
    let mut h = Harness::new();
    h.publisher("room", publisher_of(av1_track(0xA1), &[]), addr(9200));
    let packets = l3t3(0xA1, 2);
    h.send(addr(9200), &packets[0]);
    h.send(addr(9200), &packets[0]);
    let mut truncated = packets[1].clone();
    truncated.truncate(13);
    h.send(addr(9200), &truncated);
    let counters = h.core.counters();
    assert_eq!(counters.dropped(DropReason::Duplicate), 1, "the duplicate");
    assert_eq!(counters.dropped(DropReason::MalformedRtp), 1, "the cut one");
    assert_eq!(counters.dropped(DropReason::UnknownSsrc), 0, "each once");
    let text = h.core.snapshot().render();
    for (reason, n) in [("duplicate", 1), ("malformed_rtp", 1), ("unknown_ssrc", 0)] {
        let series = format!("strata_dropped_total{{reason=\"{reason}\"}} {n}");
        assert!(text.contains(&series), "{series} in\n{text}");
    }
    assert!(!text.contains("reason=\"engine\""), "no catch-all reason");
}

#[test]
fn a_viewer_negotiates_against_the_live_publisher_not_a_reaped_one() {
    let mut h = Harness::new();
    let codec = |codec| sfu::node::sdp::RoomCodec {
        codec,
        fmtp: String::new(),
    };
    let mut vp8 = publisher_of(TrackConfig::single(Codec::Vp8, 0xE1), &[]);
    vp8.codecs = vec![codec(Codec::Vp8)];
    let first = h.publisher("room", vp8, addr(9300));
    let mut av1 = publisher_of(av1_track(0xE2), &[]);
    av1.codecs = vec![codec(Codec::Av1)];
    h.publisher("room", av1, addr(9301));
    assert_eq!(
        h.core.room_codecs("room", None),
        Ok(vec![codec(Codec::Vp8)])
    );
    h.core.remove_peer(first).expect("live");
    assert_eq!(
        h.core.room_codecs("room", None),
        Ok(vec![codec(Codec::Av1)])
    );
    assert_eq!(h.core.room_codecs("elsewhere", None), Ok(Vec::new()));
    assert_eq!(
        h.core.room_codecs("room", Some("nobody")),
        Err(CoreError::NoSuchParticipant)
    );
}

/// A viewer's REMB for its media SSRC.
fn remb(media_ssrc: u32, bitrate_bps: u64) -> Vec<u8> {
    use sfu::engine::rtcp::{Remb, RembSsrcs, RtcpFeedback, RtcpWireWriter, RtcpWriter};
    let mut ssrcs = RembSsrcs::default();
    ssrcs.push(media_ssrc).expect("room");
    let remb = RtcpFeedback::Remb(Remb {
        sender_ssrc: 9,
        bitrate_bps,
        ssrcs,
    });
    let mut buf = [0u8; 100];
    let len = RtcpWireWriter::new(b"viewer")
        .expect("a short CNAME")
        .write(&remb, &mut buf)
        .expect("fits");
    buf[..len].to_vec()
}

#[test]
fn the_engines_events_are_consumed_a_viewers_estimate_kept() {
    let mut h = Harness::new();
    h.publisher("room", publisher_of(av1_track(0xA1), &[]), addr(9400));
    let viewer = h.viewer(
        "room",
        av1_viewer(0x10, Some(DD_OUT), Layer::MAX),
        addr(9401),
    );
    for packet in l3t3(0xA1, 10) {
        h.send(addr(9400), &packet);
    }
    assert!(
        h.core.counters().layer_changes >= 1,
        "the viewer started on a layer"
    );
    h.send(addr(9401), &remb(0x10, 800_000));
    assert_eq!(h.core.counters().bandwidth_estimates, 1);
    assert_eq!(
        h.core.peer(viewer).and_then(|p| p.estimate_bps),
        Some(800_000)
    );
}

/// The value of one sample of the text format, by its name and labels.
fn sample(text: &str, series: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// A viewer's stats and its `/metrics` series follow what it asked for, its estimate and the
/// allocation that estimate made; an AV1 viewer without the DD has the base spatial layer as
/// its ceiling; a viewer's series go with it.
#[test]
fn a_viewers_estimate_and_layers_show_in_its_stats_and_metrics() {
    let mut h = Harness::new();
    h.publisher("room", publisher_of(av1_track(0xA1), &[]), addr(9600));
    let asked = Layer::new(u8::MAX, 1);
    let viewer = h.viewer("room", av1_viewer(0x10, Some(DD_OUT), asked), addr(9601));
    let no_dd = h.viewer("room", av1_viewer(0x20, None, asked), addr(9602));
    for packet in l3t3(0xA1, 10) {
        h.send(addr(9600), &packet);
    }
    let stats = h.core.viewer_stats(viewer).expect("a viewer");
    assert_eq!(stats.estimate_bps, None);
    let [video] = stats.tracks.as_slice() else {
        panic!("one subscription: {stats:?}");
    };
    assert_eq!(video.kind, MediaKind::Video);
    assert_eq!(video.codec, Codec::Av1);
    assert_eq!(
        video.layer,
        Some(Layer::new(2, 1).into()),
        "the top, as asked"
    );
    assert_eq!(video.allocated, None, "no estimate, no allocation");
    let open_spatial = Ceiling {
        spatial: None,
        temporal: Some(1),
    };
    assert_eq!(video.ceiling, Some(open_spatial));
    assert!(video.bytes_sent > 0 && video.packets_sent > 0);
    let base_only = h.core.viewer_stats(no_dd).expect("a viewer").tracks;
    assert_eq!(
        base_only.first().and_then(|t| t.ceiling),
        Some(Ceiling {
            spatial: Some(0),
            temporal: Some(1)
        })
    );

    // Far too little for anything above the base layer.
    h.send(addr(9601), &remb(0x10, 1_000));
    let stats = h.core.viewer_stats(viewer).expect("a viewer");
    assert_eq!(stats.estimate_bps, Some(1_000));
    let video = stats.tracks.first().expect("subscribed");
    assert_eq!(video.allocated, Some(Layer::BASE.into()));

    let text = h.core.snapshot().render();
    let labels = format!("{{session=\"{viewer}\",room=\"room\"");
    let series = |name: &str, more: &str| sample(&text, &format!("strata_{name}{labels}{more}}}"));
    assert_eq!(series("viewer_estimate_bps", ""), Some(1_000), "{text}");
    let axis = |a| format!(",axis=\"{a}\"");
    assert_eq!(series("viewer_allocated_layer", &axis("spatial")), Some(0));
    assert_eq!(series("viewer_allocated_layer", &axis("temporal")), Some(0));
    assert_eq!(series("viewer_ceiling_layer", &axis("temporal")), Some(1));
    assert_eq!(
        series("viewer_ceiling_layer", &axis("spatial")),
        None,
        "an open axis has no sample"
    );
    let video_kind = ",kind=\"video\"";
    assert_eq!(
        series("viewer_sent_bytes_total", video_kind),
        Some(video.bytes_sent)
    );
    assert_eq!(
        series("viewer_sent_packets_total", video_kind),
        Some(video.packets_sent)
    );
    let other = format!("{{session=\"{no_dd}\",room=\"room\"}}");
    assert_eq!(
        sample(&text, &format!("strata_viewer_estimate_bps{other}")),
        None,
        "no estimate from the other viewer"
    );
    assert!(text.contains(&format!("strata_viewer_ceiling_layer{{session=\"{no_dd}\"")));

    h.core.remove_peer(viewer).expect("live");
    let text = h.core.snapshot().render();
    assert!(
        !text.contains(&viewer.to_string()),
        "its series went with it"
    );
    assert!(h.core.viewer_stats(viewer).is_none());
}

/// With viewer estimation on, a viewer that negotiated transport-wide CC gets the sequence on
/// every packet, counting up in send order; with it off (the default), none.
#[test]
fn viewer_estimation_stamps_the_transport_wide_sequence() {
    const TWCC: u8 = 3;
    for on in [false, true] {
        let mut h = Harness::new();
        h.core = NodeCore::new(RouterConfig::default(), Duration::from_secs(30))
            .with_viewer_estimation(on);
        h.publisher("room", publisher_of(av1_track(0xA1), &[]), addr(9500));
        let mut viewer = av1_viewer(0x10, Some(DD_OUT), Layer::MAX);
        if let Some(video) = viewer.video.as_mut() {
            video.transport_cc_ext_id = Some(TWCC);
        }
        h.viewer("room", viewer, addr(9501));
        for packet in l3t3(0xA1, 10) {
            h.send(addr(9500), &packet);
        }
        let media = h.media_to(addr(9501));
        assert!(!media.is_empty(), "forwarded");
        let sequences: Vec<u16> = media
            .iter()
            .filter_map(|p| {
                RtpPacket::parse(p)
                    .ok()?
                    .extension(TWCC)
                    .map(|v| u16::from_be_bytes([v[0], v[1]]))
            })
            .collect();
        if on {
            let expected: Vec<u16> = (0..media.len() as u16).collect();
            assert_eq!(sequences, expected, "one sequence, in send order");
        } else {
            assert!(sequences.is_empty(), "off by default");
        }
    }
}
