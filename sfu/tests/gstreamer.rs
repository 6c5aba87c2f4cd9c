//! End to end with a client that is not a browser: GStreamer's webrtcbin (the script
//! `tests/gstreamer/client.py`) publishing over WHIP and watching over WHEP, beside a real
//! Chromium. The GStreamer viewer is judged by what its decoder produced (frames, the caps
//! after the decoder, frames per second over the last seconds); Chromium by its own stats.
//!
//! Ignored by default: they need GStreamer's Python bindings and Chromium in a private network
//! namespace with only loopback. `.ci/browser-test` installs and runs them; by hand:
//! `unshare -n sh -c 'ip link set lo up && cargo test -p sfu --release --test gstreamer -- --ignored --test-threads=1'`.

// Shared with the browser tests, which use the parts these tests leave out.
#[allow(dead_code)]
#[path = "browser/chromium.rs"]
mod chromium;
#[allow(dead_code)]
#[path = "browser/node.rs"]
mod node;
#[allow(dead_code)]
#[path = "browser/strata.rs"]
mod strata;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use chromium::{Chromium, Page};
use node::Node;
use strata::{num, poll_until, size, stats, EVERY_SECOND};

/// What the GStreamer publisher's camera sends.
const SIZE: (f64, f64) = (640.0, 480.0);
/// The slowest decoding accepted, of a 30 fps source.
const MIN_FPS: f64 = 20.0;
/// How long a GStreamer viewer runs: connecting takes well under a second, the frame rate is
/// measured over its last 4 seconds.
const VIEWER_SECONDS: &str = "9";
/// How long a GStreamer publisher may run; it is stopped when its scenario ends.
const PUBLISHER_SECONDS: &str = "40";

#[test]
#[ignore = "needs GStreamer and chromium in a private network namespace: run .ci/browser-test"]
fn gstreamer_vp8_and_opus_to_gstreamer_and_chromium() {
    gstreamer_publisher_to_both_viewers("vp8", "video/VP8");
}

#[test]
#[ignore = "needs GStreamer and chromium in a private network namespace: run .ci/browser-test"]
fn gstreamer_x264_constrained_baseline_to_gstreamer_and_chromium() {
    gstreamer_publisher_to_both_viewers("h264", "video/H264");
}

/// A GStreamer viewer that cannot decode the room's video: its video section, the first of
/// its bundle, is answered inactive, and webrtcbin keeps the bundle and gets the audio.
#[test]
#[ignore = "needs GStreamer and chromium in a private network namespace: run .ci/browser-test"]
fn gstreamer_viewer_without_the_rooms_codec_still_gets_audio() {
    let node = Node::start(&[]);
    let _publisher = Client::publish(&node, "x264", "h264", &[]);
    let decoded = Client::watch_with(&node, "x264", &["--codecs", "vp8"]).decoded();
    eprintln!("a VP8-only viewer of H.264: {decoded}");
    assert_eq!(num(&decoded, "frames"), 0.0, "{decoded}");
    assert!(
        num(&decoded, "audio_buffers") > 0.0,
        "audio through the bundle: {decoded}"
    );
}

#[test]
#[ignore = "needs GStreamer and chromium in a private network namespace: run .ci/browser-test"]
fn gstreamer_offer_before_caps_without_ssrcs() {
    let node = Node::start(&[]);
    let _publisher = Client::publish(&node, "caps", "vp8", &["--before-caps"]);
    let decoded = Client::watch(&node, "caps").decoded();
    assert_decodes(&decoded, Some(SIZE), "a viewer of an SSRC-less publisher");
}

#[test]
#[ignore = "needs GStreamer and chromium in a private network namespace: run .ci/browser-test"]
fn chromium_publisher_to_gstreamer() {
    let node = Node::start(&[]);
    let browser = Chromium::launch();
    let page = browser.open(&node.url("/"));
    let options = json!({ "room": "browser", "codec": "VP8", "scalabilityMode": "L1T1" });
    let id = strata::publish(&page, options);
    strata::wait_publishing(&page, &id);
    let decoded = Client::watch(&node, "browser").decoded();
    // The browser's size follows its bandwidth estimate: any size, at the full rate.
    assert_decodes(&decoded, None, "a GStreamer viewer of Chromium");
}

/// webrtcbin with its ICE agent's UDP off: libnice's active TCP candidates reach the node's
/// passive one, and a GStreamer publisher and viewer carry VP8 and Opus over ICE-TCP alone.
#[test]
#[ignore = "needs GStreamer and chromium in a private network namespace: run .ci/browser-test"]
fn gstreamer_over_ice_tcp() {
    let node = Node::start(&[]);
    let tcp_only = ["--tcp-only"];
    let _publisher = Client::publish(&node, "gst-tcp", "vp8", &tcp_only);
    let viewer = Client::watch_with(&node, "gst-tcp", &tcp_only);
    let decoded = viewer.decoded();
    assert_decodes(&decoded, Some(SIZE), "a GStreamer viewer over ICE-TCP");
    // The viewer's connection closed with it; the publisher's is still its session's.
    let metrics = metrics(&node);
    for series in [
        "strata_sessions_by_transport{transport=\"tcp\"} 1",
        "strata_sessions_by_transport{transport=\"udp\"} 0",
        "strata_tcp_connections_accepted_total 2",
    ] {
        assert!(metrics.contains(series), "{series} in\n{metrics}");
    }
}

/// The node's `/metrics`, over a plain HTTP/1.1 request.
fn metrics(node: &Node) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(&node.http).expect("connects");
    let request = format!(
        "GET /metrics HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        node.http
    );
    stream.write_all(request.as_bytes()).expect("sent");
    let mut reply = String::new();
    stream.read_to_string(&mut reply).expect("a reply");
    reply
}

/// A GStreamer publisher of `video` and Opus, watched at once by a GStreamer viewer and a
/// Chromium viewer, which must receive `mime`.
fn gstreamer_publisher_to_both_viewers(video: &str, mime: &str) {
    let node = Node::start(&[]);
    let room = format!("gst-{video}");
    let _publisher = Client::publish(&node, &room, video, &[]);
    let viewer = Client::watch(&node, &room);
    let browser = Chromium::launch();
    let page = browser.open(&node.url("/"));
    let id = strata::watch(&page, json!({ "room": room }));
    assert_chromium_decodes(&page, &id, mime);
    assert_decodes(&viewer.decoded(), Some(SIZE), "the GStreamer viewer");
}

fn assert_chromium_decodes(page: &Page, id: &str, mime: &str) {
    poll_until(
        page,
        Duration::from_secs(20),
        EVERY_SECOND,
        &format!("Chromium decodes {SIZE:?}"),
        |s| (size(s, id) == SIZE).then_some(()),
    );
    let window = Duration::from_secs(4);
    let decoded = |s: &Value| num(&s[id]["video"], "framesDecoded");
    let before = decoded(&stats(page));
    std::thread::sleep(window);
    let now = stats(page);
    let fps = (decoded(&now) - before) / window.as_secs_f64();
    let video = &now[id]["video"];
    eprintln!(
        "Chromium viewer: {:?} at {fps} fps, {}",
        size(&now, id),
        video["codec"]
    );
    assert!(fps >= MIN_FPS, "Chromium decodes at {fps} fps: {now:#}");
    assert_eq!(video["codec"], mime, "{now:#}");
    assert!(
        num(&now[id]["audio"], "packetsReceived") > 0.0,
        "audio: {now:#}"
    );
}

fn assert_decodes(decoded: &Value, size: Option<(f64, f64)>, who: &str) {
    eprintln!("{who}: {decoded}");
    let fps = num(decoded, "fps");
    assert!(fps >= MIN_FPS, "{who} decodes at {fps} fps: {decoded}");
    let decoded_size = (num(decoded, "width"), num(decoded, "height"));
    match size {
        Some(size) => assert_eq!(decoded_size, size, "{who}: {decoded}"),
        None => assert!(decoded_size.0 > 0.0, "{who}: {decoded}"),
    }
    assert!(
        num(decoded, "audio_buffers") > 0.0,
        "{who} decodes audio: {decoded}"
    );
}

/// One run of the GStreamer client, killed on drop.
struct Client {
    /// Taken by [`Client::decoded`], which waits for the run to end.
    child: Option<Child>,
}

impl Client {
    fn publish(node: &Node, room: &str, video: &str, extra: &[&str]) -> Self {
        let url = node.url(&format!("/whip/{room}"));
        let mut args = vec![
            "publish",
            &url,
            "--video",
            video,
            "--seconds",
            PUBLISHER_SECONDS,
        ];
        args.extend_from_slice(extra);
        let client = Self::start(&args);
        // Let it connect and encode before anyone watches.
        std::thread::sleep(Duration::from_secs(2));
        client
    }

    fn watch(node: &Node, room: &str) -> Self {
        Self::watch_with(node, room, &[])
    }

    fn watch_with(node: &Node, room: &str, extra: &[&str]) -> Self {
        let url = node.url(&format!("/whep/{room}"));
        let mut args = vec!["watch", &url, "--seconds", VIEWER_SECONDS];
        args.extend_from_slice(extra);
        Self::start(&args)
    }

    fn start(args: &[&str]) -> Self {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/gstreamer/client.py");
        let child = Command::new(python())
            .arg(script)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(chromium::debug_output())
            .spawn()
            .expect("start the GStreamer client");
        Self { child: Some(child) }
    }

    /// The viewer's summary, the last line it prints when its run ends.
    fn decoded(mut self) -> Value {
        let child = self.child.take().expect("a client is waited for once");
        let output = child.wait_with_output().expect("the viewer ends");
        let text = String::from_utf8_lossy(&output.stdout);
        let last = text.lines().last().unwrap_or_default();
        serde_json::from_str(last).unwrap_or_else(|_| panic!("a summary from the viewer: {text}"))
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The system's Python, which has the GStreamer bindings (`python3-gi`), even where another
/// Python comes first on the path.
fn python() -> &'static str {
    if std::path::Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}
