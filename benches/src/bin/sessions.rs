//! What a session costs the node's core: the time one viewer's join takes against the size of
//! the room it joins (it must not grow with the room), the memory per viewer and per
//! publisher, and what stays after every session is reaped. In process, on the core itself
//! (signaling's share is the SDP work, the same for every join).
//!
//! `cargo run --release -p benches --bin sessions [-- --json]`

use std::time::{Duration, Instant};

use rtp_ext::codec::Codec;
use selector::Layer;
use sfu::engine::{RouterConfig, TrackConfig};
use sfu::node::core::NodeCore;
use sfu::node::limits::Limits;
use sfu::node::peer::{IceCredentials, Join, PeerId, Viewer, ViewerCodec, ViewerMedia};
use sfu::node::srtp::Unprotected;
use sfu::node::testing;

/// Room sizes at which the join time is sampled.
const SIZES: [usize; 5] = [10, 100, 1000, 2000, 5000];
/// Joins timed at each size (and left again, so the room keeps its size).
const SAMPLES: usize = 200;
const PUBLISHERS: usize = 500;
/// Room sizes of the room whose viewers all wait (see `waiting_joins`).
const WAITING_SIZES: [usize; 2] = [10, 2000];

fn main() {
    let json = std::env::args().any(|a| a == "--json");
    let rss_start = rss_kib();
    let (mut core, now) = core();
    let mut serial = 0u32;
    let mut sessions = vec![publisher(&mut core, now, "big", &mut serial)];
    for &size in &SIZES {
        let per_join = join_and_leave(&mut core, now, "big", &mut serial, &mut sessions, size);
        report(
            json,
            &format!("join_and_leave/room_{size}"),
            "ns",
            per_join.as_nanos() as f64,
        );
    }
    waiting_joins(json);
    let viewers = sessions.len() - 1;
    let rss_viewers = rss_kib();
    report(
        json,
        "rss/per_viewer",
        "KiB",
        (rss_viewers - rss_start) as f64 / viewers as f64,
    );
    for _ in 0..PUBLISHERS {
        let room = format!("room{serial}");
        sessions.push(publisher(&mut core, now, &room, &mut serial));
    }
    let rss_publishers = rss_kib();
    report(
        json,
        "rss/per_publisher",
        "KiB",
        (rss_publishers - rss_viewers) as f64 / PUBLISHERS as f64,
    );
    report(
        json,
        "rss/all_sessions",
        "KiB",
        (rss_publishers - rss_start) as f64,
    );
    let started = Instant::now();
    for id in sessions.drain(..).rev() {
        core.remove_peer(id).expect("live");
    }
    let reap = started.elapsed();
    assert_eq!(core.table_entries(), 0, "everything reaped");
    report(json, "reap/all_sessions", "ms", reap.as_secs_f64() * 1e3);
    report(
        json,
        "rss/after_reaping",
        "KiB",
        (rss_kib() - rss_start) as f64,
    );
    // What the node's media loop does after it reaped sessions.
    sfu::node::memory::release_freed();
    report(
        json,
        "rss/after_reaping_and_release",
        "KiB",
        (rss_kib() - rss_start) as f64,
    );
    drop(core);
    report(
        json,
        "rss/after_dropping_the_core",
        "KiB",
        (rss_kib() - rss_start) as f64,
    );
}

/// Joins to a room whose publisher sends video alone, so every viewer (asking for audio and
/// video) waits in it for audio: a join serves the joining viewer, not every waiting one.
fn waiting_joins(json: bool) {
    let (mut core, now) = core();
    let mut serial = 0u32;
    let mut sessions = vec![publisher_of(&mut core, now, "silent", &mut serial, false)];
    for size in WAITING_SIZES {
        let per_join = join_and_leave(&mut core, now, "silent", &mut serial, &mut sessions, size);
        let case = format!("join_and_leave/waiting_room_{size}");
        report(json, &case, "ns", per_join.as_nanos() as f64);
    }
}

/// Fills `room` with viewers up to `size` sessions, then the time one more viewer's join
/// and leave takes, over [`SAMPLES`].
fn join_and_leave(
    core: &mut NodeCore,
    now: Instant,
    room: &str,
    serial: &mut u32,
    sessions: &mut Vec<PeerId>,
    size: usize,
) -> Duration {
    while sessions.len() < size {
        sessions.push(viewer(core, now, room, serial));
    }
    let started = Instant::now();
    for _ in 0..SAMPLES {
        let id = viewer(core, now, room, serial);
        core.remove_peer(id).expect("just joined");
    }
    started.elapsed() / SAMPLES as u32
}

fn core() -> (NodeCore, Instant) {
    let limits = Limits {
        sessions: usize::MAX,
        sessions_per_room: usize::MAX,
        handshakes: usize::MAX,
        ..Limits::default()
    };
    let core = NodeCore::new(RouterConfig::default(), Duration::from_secs(30)).with_limits(limits);
    (core, Instant::now())
}

fn ice(serial: &mut u32) -> IceCredentials {
    *serial += 1;
    testing::credentials(*serial)
}

/// A connected viewer of AV1 video and Opus audio.
fn viewer(core: &mut NodeCore, now: Instant, room: &str, serial: &mut u32) -> PeerId {
    // Each subscription under SSRCs of its own: a transport's SSRCs are its own, and an
    // audio subscription under the video's would be refused (the viewer left waiting).
    let media = |codec, payload_type, ssrc| ViewerMedia {
        ssrc,
        rtx_ssrc: ssrc + 1,
        codecs: vec![ViewerCodec {
            codec,
            payload_type,
            rtx_payload_type: Some(payload_type + 1),
            fmtp: String::new(),
        }],
        dd_ext_id: Some(5),
        two_byte_allowed: true,
        transport_cc_ext_id: None,
        down_track: None,
    };
    let viewer = Viewer {
        video: Some(media(Codec::Av1, 45, 0x10)),
        audio: Some(media(Codec::Opus, 111, 0x20)),
        target: Layer::MAX,
        source: None,
    };
    let id = core
        .add_viewer(now, Join::new(room, ice(serial)), viewer)
        .expect("no limits");
    core.set_srtp(id, Box::new(Unprotected));
    id
}

/// A connected publisher of AV1 video and Opus audio.
fn publisher(core: &mut NodeCore, now: Instant, room: &str, serial: &mut u32) -> PeerId {
    publisher_of(core, now, room, serial, true)
}

/// A connected publisher of AV1 video, and of Opus audio if `audio`.
fn publisher_of(
    core: &mut NodeCore,
    now: Instant,
    room: &str,
    serial: &mut u32,
    audio: bool,
) -> PeerId {
    let ssrc = 0x1000 + *serial * 4;
    let mut video = testing::av1_track(ssrc, 11);
    video.streams[0].rtx_ssrc = Some(ssrc + 1);
    let audio = audio.then(|| TrackConfig::single(Codec::Opus, ssrc + 2));
    let publisher = testing::publisher([Some(video), audio].into_iter().flatten());
    let id = core
        .add_publisher(now, Join::new(room, ice(serial)), publisher)
        .expect("fresh SSRCs");
    core.set_srtp(id, Box::new(Unprotected));
    id
}

/// This process's resident set, from `/proc/self/status` (0 where there is none).
fn rss_kib() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn report(json: bool, name: &str, unit: &str, value: f64) {
    if json {
        println!("{{\"case\":\"{name}\",\"unit\":\"{unit}\",\"value\":{value:.1}}}");
    } else {
        println!("{name:<36} {value:>12.1} {unit}");
    }
}
