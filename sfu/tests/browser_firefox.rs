//! Firefox (exploration).

#[path = "browser/chromium.rs"]
#[allow(dead_code)]
mod chromium;
#[path = "browser/firefox.rs"]
#[allow(dead_code)]
mod firefox;
#[path = "browser/node.rs"]
#[allow(dead_code)]
mod node;
#[path = "browser/strata.rs"]
#[allow(dead_code)]
mod strata;

use std::time::{Duration, Instant};

use serde_json::json;

use firefox::Firefox;
use node::Node;

const P2P: &str = r#"(async () => {
  const s = await navigator.mediaDevices.getUserMedia({ video: { width: 640, height: 480, frameRate: 30 } });
  const a = new RTCPeerConnection(), b = new RTCPeerConnection();
  a.onicecandidate = (e) => e.candidate && b.addIceCandidate(e.candidate);
  b.onicecandidate = (e) => e.candidate && a.addIceCandidate(e.candidate);
  const t = a.addTransceiver(s.getVideoTracks()[0], { direction: 'sendonly' });
  preferCodec(t, 'VP8');
  await a.setLocalDescription(); await b.setRemoteDescription(a.localDescription);
  await b.setLocalDescription(); await a.setRemoteDescription(b.localDescription);
  window.p2p = { a, b };
})()"#;

const P2P_STATS: &str = r#"(async () => {
  let out = {};
  (await p2p.a.getStats()).forEach((r) => { if (r.type === 'outbound-rtp') out.tx = [r.frameWidth, r.frameHeight, r.bytesSent]; });
  (await p2p.b.getStats()).forEach((r) => { if (r.type === 'inbound-rtp') out.rx = [r.frameWidth, r.frameHeight]; });
  return out;
})()"#;

#[test]
#[ignore = "explore"]
fn explore() {
    let node = Node::start(&[]);
    let browser = Firefox::launch();
    let page = browser.open(&node.url("/"));
    let mode = std::env::var("MODE").unwrap_or_default();
    let start = Instant::now();
    if mode == "p2p2" {
        let other = Firefox::launch();
        let b = other.open(&node.url("/"));
        let offer = page.eval_json(r#"(async () => {
  const s = await navigator.mediaDevices.getUserMedia({ video: { width: 640, height: 480, frameRate: 30 }, audio: true });
  const a = new RTCPeerConnection();
  const t = a.addTransceiver(s.getVideoTracks()[0], { direction: 'sendonly', streams: [s] });
  preferCodec(t, 'VP8');
  a.addTransceiver(s.getAudioTracks()[0], { direction: 'sendonly', streams: [s] });
  await a.setLocalDescription(); await gathered(a);
  window.p2p = { a };
  return a.localDescription.sdp;
})()"#);
        let answer = b.eval_json(&format!(
            r#"(async () => {{
  const b = new RTCPeerConnection();
  await b.setRemoteDescription({{ type: 'offer', sdp: {offer} }});
  await b.setLocalDescription(); await gathered(b);
  window.p2p = {{ b }};
  return b.localDescription.sdp;
}})()"#
        ));
        page.eval_json(&format!(
            "p2p.a.setRemoteDescription({{ type: 'answer', sdp: {answer} }})"
        ));
        let start = Instant::now();
        for _ in 0..30 {
            std::thread::sleep(Duration::from_secs(1));
            let rx = b.eval_json("p2p.b.getStats().then((r) => { let o; r.forEach((x) => { if (x.type === 'inbound-rtp' && x.kind === 'video') o = [x.frameWidth, x.frameHeight, x.bytesReceived]; }); return o; })");
            println!("{:5.1} {}", start.elapsed().as_secs_f64(), rx);
        }
        return;
    }
    if mode == "p2p" {
        page.eval_json(P2P);
        for _ in 0..30 {
            std::thread::sleep(Duration::from_secs(1));
            println!(
                "{:5.1} {}",
                start.elapsed().as_secs_f64(),
                page.eval_json(P2P_STATS)
            );
        }
        return;
    }
    if std::env::var("STRIP").is_ok() {
        page.eval_json(r#"request = ((orig) => (m, p, body, ct, tok) => orig(m, p, (m === 'POST' && p.startsWith('/whip') ? body.split('\r\n').filter((l) => !l.startsWith('a=ssrc')).join('\r\n') : body), ct, tok))(request)"#);
    }
    let simulcast = mode == "simulcast";
    let publisher = strata::publish(
        &page,
        json!({ "room": "ff", "codec": "VP8", "scalabilityMode": "L1T1", "simulcast": simulcast, "width": 640, "height": 480 }),
    );
    let viewer = strata::watch(&page, json!({ "room": "ff", "spatial": 2, "temporal": 2 }));
    let mut last = 0.0;
    for _ in 0..30 {
        std::thread::sleep(Duration::from_secs(1));
        let s = strata::stats(&page);
        let enc: Vec<String> = s[&publisher]["video"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                format!(
                    "{}:{}x{} {}",
                    v["rid"], v["frameWidth"], v["frameHeight"], v["qualityLimitationReason"]
                )
            })
            .collect();
        let sent: f64 = s[&publisher]["video"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| strata::num(v, "bytesSent"))
            .sum();
        println!(
            "{:5.1} pub {:?} {:.0} kbit/s view {:?}",
            start.elapsed().as_secs_f64(),
            enc,
            (sent - last) * 8.0 / 1000.0,
            strata::size(&s, &viewer)
        );
        last = sent;
    }
    let room = page.eval_json("fetch('/rooms/ff').then((r) => r.text())");
    println!("{}", room);
    println!(
        "{}",
        page.eval_json("fetch('/metrics').then((r) => r.text())")
            .as_str()
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#') && !l.ends_with(" 0"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
