//! Real Chromium viewers behind limited links: each viewer's browser runs in a network
//! namespace of its own, behind a veth whose node-side end is shaped with a token bucket, and
//! the assertions read what that browser decodes.
//!
//! One scenario per publisher, with the node on its defaults (transport-wide CC toward the
//! viewers, which browsers negotiate). The layer rates are measured first, at the
//! link, from an unshaped viewer; the cap is set midway between the 360p and the 720p rate. A
//! viewer asking for the best layer behind that cap must settle at 360p and hold it, go to
//! 720p when the cap is lifted and back to 360p when it returns; a second, unshaped viewer of
//! the same publisher must get 720p within seconds of joining, whatever the first one does.
//!
//! Ignored by default: they need root, Chromium, `tc`, `ethtool`, and a private network
//! namespace (the node's) with 10.77.0.1 on its loopback. `.ci/browser-test` installs and runs
//! them; by hand:
//! `unshare -n sh -c 'ip link set lo up && ip addr add 10.77.0.1/32 dev lo && cargo test -p sfu --release --test browser_bandwidth -- --ignored --test-threads=1 --nocapture'`.
//! `STRATA_BW_TRACE=1` prints every sample and the node's allocation events, pass or fail.

#[path = "browser/chromium.rs"]
#[allow(
    dead_code,
    reason = "these scenarios use part of the browser tests' driver"
)]
mod chromium;
#[path = "browser/netns.rs"]
#[allow(dead_code, reason = "no firewall of its own is set here")]
mod netns;
#[path = "browser/node.rs"]
#[allow(
    dead_code,
    reason = "these scenarios use part of the browser tests' driver"
)]
mod node;
#[path = "browser/strata.rs"]
#[allow(
    dead_code,
    reason = "these scenarios use part of the browser tests' driver"
)]
mod strata;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use chromium::{Chromium, Page};
use netns::Netns;
use node::Node;
use strata::num;

const IGNORED: &str =
    "needs root, chromium, tc and ethtool in a private network namespace: run .ci/browser-test";

/// The node's address in the test's namespace: on loopback there, reached by every viewer
/// namespace through its veth.
const NODE_IP: &str = "10.77.0.1";
/// Frame sizes of the spatial layers of a 1280x720 camera: L3 modes and simulcast q, h, f.
const SIZES: [(f64, f64); 3] = [(320.0, 180.0), (640.0, 360.0), (1280.0, 720.0)];
/// The viewers' stats are read this often, to time their reactions.
const SAMPLE: Duration = Duration::from_millis(500);
/// The publisher's bitrate ramps up from 640x360 or below, which can take more than ten seconds.
const RAMP_UP: Duration = Duration::from_secs(40);
/// After a switch, until the keyframe that started it has left the measuring window.
const SETTLE: Duration = Duration::from_millis(1500);
/// How long one layer's rate is measured at the link.
const MEASURE: Duration = Duration::from_secs(3);
/// The cap lifted: room for the top layer and more.
const LIFTED_KBIT: u64 = 3000;
/// The figures: time to settle at 360p behind the cap, to hold it, to reach 720p once
/// the cap is lifted and to be back at 360p once it returns; a second viewer's time to 720p.
const TO_CAPPED: Duration = Duration::from_secs(8);
const HOLD: Duration = Duration::from_secs(30);
const TO_LIFTED: Duration = Duration::from_secs(10);
const BACK: Duration = Duration::from_secs(3);
const SECOND_TO_TOP: Duration = Duration::from_secs(5);
/// After the cap returns, freezes are counted until this long after the viewer is at 360p:
/// a freeze is reported only once the frame that ends it is decoded.
const AFTER_BACK: Duration = Duration::from_secs(4);
/// How much longer than expected a phase is waited for, to report how long it took.
const GRACE: Duration = Duration::from_secs(15);

#[derive(Clone, Copy)]
enum Publisher {
    Av1Svc,
    Vp8Simulcast,
}

impl Publisher {
    fn room(self) -> &'static str {
        match self {
            Publisher::Av1Svc => "bw-av1",
            Publisher::Vp8Simulcast => "bw-vp8",
        }
    }

    fn options(self) -> Value {
        match self {
            Publisher::Av1Svc => {
                json!({ "room": self.room(), "codec": "AV1", "scalabilityMode": "L3T3_KEY" })
            }
            Publisher::Vp8Simulcast => json!({
                "room": self.room(), "codec": "VP8", "scalabilityMode": "L1T3", "simulcast": true
            }),
        }
    }

    /// What the publisher must be sending before any viewer is judged.
    fn check(self, encodings: &[Value]) {
        match self {
            Publisher::Av1Svc => {
                assert_eq!(encodings[0]["scalabilityMode"], "L3T3_KEY", "{encodings:?}")
            }
            Publisher::Vp8Simulcast => {
                let rids: Vec<&str> = encodings.iter().filter_map(|e| e["rid"].as_str()).collect();
                assert_eq!(rids.len(), 3, "three simulcast encodings: {encodings:?}");
            }
        }
    }
}

#[test]
#[ignore = "needs root, chromium, tc and ethtool in a private network namespace: run .ci/browser-test"]
fn av1_svc_behind_a_limited_link() {
    limited_link(Publisher::Av1Svc);
}

#[test]
#[ignore = "needs root, chromium, tc and ethtool in a private network namespace: run .ci/browser-test"]
fn vp8_simulcast_behind_a_limited_link() {
    limited_link(Publisher::Vp8Simulcast);
}

/// The node's configuration: its defaults (transport-wide CC toward viewers that negotiate
/// it, as browsers do), its allocation events logged.
const CONFIG: &str = "log = \"info,dtls=error,sfu::node::core=debug\"\n";

fn limited_link(publisher: Publisher) {
    require_node_address();
    let mode = "transport-wide CC";
    let node = Node::start_on(NODE_IP, Some(CONFIG), &[]);
    let url = node.url("/");
    // The camera is for secure origins alone, and the node's address is not loopback.
    let origin = url.trim_end_matches('/');
    let sender = Chromium::launch_within(
        &[],
        &[format!(
            "--unsafely-treat-insecure-origin-as-secure={origin}"
        )],
    );
    let sending = sender.open(&url);
    let id = strata::publish(&sending, publisher.options());
    publisher.check(&strata::wait_publishing(&sending, &id));

    // The unshaped viewer measures the layer rates first, then leaves, and later comes back
    // as the second viewer.
    let unshaped = Netns::create();
    let second_browser = Chromium::launch_within(&unshaped.enter(), &[]);
    let second_page = second_browser.open(&url);
    let rates = measure_layer_rates(&second_page, &unshaped, &node, publisher.room());
    let cap = (rates[1] + rates[2]) / 2;
    println!(
        "[{} {mode}] layer rates at the link (kbit/s): 180p {}, 360p {}, 720p {}; cap {cap}",
        publisher.room(),
        rates[0],
        rates[1],
        rates[2]
    );
    assert!(
        rates[0] < rates[1] && rates[1] < rates[2],
        "each layer costs more than the one below: {rates:?} kbit/s"
    );

    let shaped = Netns::create();
    shaped.shape(cap);
    let first_browser = Chromium::launch_within(&shaped.enter(), &[]);
    let first_page = first_browser.open(&url);

    let mut scene = Scene::new(&node, &shaped, format!("{} {mode}", publisher.room()));
    let best = json!({ "room": publisher.room(), "spatial": 2, "temporal": 2 });
    let first = scene.join(
        &first_page,
        strata::watch(&first_page, best.clone()),
        "first",
    );
    let to_capped = scene.until(TO_CAPPED, "the capped viewer decodes 360p", |s| {
        s.viewers[first].decoding_at(SIZES[1])
    });

    let second = scene.join(&second_page, strata::watch(&second_page, best), "second");
    scene.viewers[first].must_stay = Some(SIZES[1]);
    let to_second = scene.until(SECOND_TO_TOP, "the second viewer decodes 720p", |s| {
        s.viewers[second].decoding_at(SIZES[2])
    });
    // Whatever the first one does from now on, the second stays at the top.
    scene.viewers[second].must_stay = Some(SIZES[2]);
    scene.run_for(HOLD.saturating_sub(to_second));
    let held = scene.viewers[first].since_join();
    scene.viewers[first].must_stay = None;
    println!(
        "[{}] 360p after {:.1} s; second viewer at 720p after {:.1} s; over the first {:.0} s: {}",
        scene.label,
        to_capped.as_secs_f64(),
        to_second.as_secs_f64(),
        held.span.as_secs_f64(),
        held
    );
    scene.check(held.freezes == 0.0, "no freeze while capped", &held);
    scene.check(
        held.plis <= 1.0,
        "at most one keyframe request while capped",
        &held,
    );
    scene.check(held.fps >= 15.0, "the capped viewer keeps decoding", &held);
    scene.check(
        held.unrepaired <= 0.02 * held.received,
        "loss while capped is repaired",
        &held,
    );

    shaped.shape(LIFTED_KBIT);
    let mark = scene.viewers[first].samples.len() - 1;
    let to_lifted = scene.until(
        TO_LIFTED,
        "the viewer decodes 720p once the cap is lifted",
        |s| s.viewers[first].decoding_at(SIZES[2]),
    );
    let up = scene.viewers[first].since(mark);
    println!(
        "[{}] cap lifted to {LIFTED_KBIT} kbit/s: 720p after {:.1} s; {}",
        scene.label,
        to_lifted.as_secs_f64(),
        up
    );

    shaped.shape(cap);
    let mark = scene.viewers[first].samples.len() - 1;
    let to_back = scene.until(BACK, "the viewer decodes 360p once the cap is back", |s| {
        s.viewers[first].decoding_at(SIZES[1])
    });
    scene.run_for(AFTER_BACK);
    let down = scene.viewers[first].since(mark);
    println!(
        "[{}] cap back to {cap} kbit/s: 360p after {:.1} s; {}",
        scene.label,
        to_back.as_secs_f64(),
        down
    );
    scene.check(
        down.freezes <= 1.0,
        "at most one freeze when the cap returns",
        &down,
    );
    let all = scene.viewers[second].since_join();
    println!("[{}] the second viewer throughout: {all}", scene.label);
    println!("[{}] the shaper: {}", scene.label, shaped.qdisc_stats());
    scene.finish();
}

/// Each spatial layer's rate at the link (kbit/s, every header and the audio included), from
/// one viewer switched from the top layer down: the top first, since the publisher takes
/// longest to reach it.
fn measure_layer_rates(page: &Page, link: &Netns, node: &Node, room: &str) -> [u64; 3] {
    let id = strata::watch(page, json!({ "room": room, "spatial": 2, "temporal": 2 }));
    let mut rates = [0; 3];
    for spatial in [2, 1, 0] {
        if spatial != 2 {
            assert_eq!(strata::set_layer(page, &id, spatial as u64, 2), 204);
        }
        let within = if spatial == 2 { RAMP_UP } else { TO_CAPPED };
        strata::poll_until(
            page,
            within,
            SAMPLE,
            &format!("the unshaped viewer decodes {:?}", SIZES[spatial]),
            |s| (strata::size(s, &id) == SIZES[spatial]).then_some(()),
        );
        std::thread::sleep(SETTLE);
        let (bytes, start) = (link.sent_bytes(), Instant::now());
        std::thread::sleep(MEASURE);
        let sent = link.sent_bytes() - bytes;
        rates[spatial] = sent * 8 / start.elapsed().as_millis().max(1) as u64;
        let now = strata::size(&strata::stats(page), &id);
        assert_eq!(
            now,
            SIZES[spatial],
            "the unshaped viewer left {:?} while its rate was measured\n{}",
            SIZES[spatial],
            node_events(node)
        );
    }
    strata::stop_all(page);
    rates
}

/// The test's own network: the node's address on its loopback, in a namespace of its own (the
/// veths and shapers it adds must touch nothing outside).
fn require_node_address() {
    let out = std::process::Command::new("ip")
        .args(["-o", "addr", "show", "dev", "lo"])
        .output()
        .expect("run ip");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("inet {NODE_IP}/")),
        "{NODE_IP} is not on this namespace's loopback: {IGNORED}"
    );
}

/// The node's allocation events so far: who joined, each viewer's estimate, the layers it
/// was allocated and switched to, and keyframe requests.
fn node_events(node: &Node) -> String {
    let wanted = [
        "joined",
        "viewer bandwidth estimate",
        "layer allocated",
        "layer changed",
        "keyframe requested",
    ];
    let mut out = String::from("--- the node's allocation events\n");
    for line in node.log_text().lines() {
        if wanted.iter().any(|w| line.contains(w)) {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

/// One reading of a viewer's inbound video.
#[derive(Clone)]
struct Sample {
    at: Duration,
    size: (f64, f64),
    decoded: f64,
    freezes: f64,
    plis: f64,
    lost: f64,
    repaired: f64,
    received: f64,
}

impl Sample {
    fn read(stats: &Value, at: Duration) -> Sample {
        let video = &stats["video"];
        Sample {
            at,
            size: (num(video, "frameWidth"), num(video, "frameHeight")),
            decoded: num(video, "framesDecoded"),
            freezes: num(video, "freezeCount"),
            plis: num(video, "pliCount"),
            lost: num(video, "packetsLost"),
            repaired: num(video, "retransmittedPacketsReceived"),
            received: num(video, "packetsReceived"),
        }
    }
}

/// What a viewer saw between two samples.
struct Span {
    span: Duration,
    fps: f64,
    freezes: f64,
    plis: f64,
    /// `packetsLost` counts the original stream only: a packet repaired by a retransmission
    /// stays lost there and arrives in `retransmittedPacketsReceived` instead.
    unrepaired: f64,
    received: f64,
    /// How often the decoded size changed.
    switches: usize,
}

impl std::fmt::Display for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.1} fps, {} freezes, {} PLIs, {} size changes, {} unrepaired of {} packets",
            self.fps, self.freezes, self.plis, self.switches, self.unrepaired, self.received
        )
    }
}

struct Watcher<'a> {
    page: &'a Page<'a>,
    id: String,
    name: &'static str,
    samples: Vec<Sample>,
    /// While set, every sample must show this size.
    must_stay: Option<(f64, f64)>,
}

impl Watcher<'_> {
    /// At `size` and decoding: a frame decoded since the sample before.
    fn decoding_at(&self, size: (f64, f64)) -> bool {
        match self.samples.as_slice() {
            [.., before, last] => last.size == size && last.decoded > before.decoded,
            _ => false,
        }
    }

    fn since_join(&self) -> Span {
        self.since(0)
    }

    fn since(&self, mark: usize) -> Span {
        let all = &self.samples[mark..];
        let (first, last) = (&all[0], &all[all.len() - 1]);
        let span = last.at - first.at;
        Span {
            span,
            fps: (last.decoded - first.decoded) / span.as_secs_f64().max(0.001),
            freezes: last.freezes - first.freezes,
            plis: last.plis - first.plis,
            unrepaired: (last.lost - first.lost) - (last.repaired - first.repaired),
            received: last.received - first.received,
            switches: all.windows(2).filter(|w| w[0].size != w[1].size).count(),
        }
    }
}

/// The viewers under watch, sampled together every [`SAMPLE`], with what is needed to explain
/// a failure: their samples, the shaper's counters and the node's allocation events.
struct Scene<'a> {
    start: Instant,
    next: Instant,
    node: &'a Node,
    link: &'a Netns,
    label: String,
    viewers: Vec<Watcher<'a>>,
    failures: Vec<String>,
    /// What the shaped link carried toward its viewer by each tick: (when, bytes so far).
    link_bytes: Vec<(Duration, u64)>,
}

impl<'a> Scene<'a> {
    fn new(node: &'a Node, link: &'a Netns, label: String) -> Scene<'a> {
        let start = Instant::now();
        Scene {
            start,
            next: start,
            node,
            link,
            label,
            viewers: Vec::new(),
            failures: Vec::new(),
            link_bytes: Vec::new(),
        }
    }

    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Watches a viewer that has just started; returns its index. The first sample is its
    /// baseline: counters are judged from there.
    fn join(&mut self, page: &'a Page<'a>, id: String, name: &'static str) -> usize {
        let first = Sample::read(&strata::stats(page)[&id], self.now());
        self.viewers.push(Watcher {
            page,
            id,
            name,
            samples: vec![first],
            must_stay: None,
        });
        self.viewers.len() - 1
    }

    /// Waits for the next sampling time, samples every viewer and checks what must hold.
    fn tick(&mut self) {
        self.next += SAMPLE;
        std::thread::sleep(self.next.saturating_duration_since(Instant::now()));
        // A slow stats call must not make the following ticks bunch up.
        self.next = self.next.max(Instant::now());
        let at = self.now();
        self.link_bytes.push((at, self.link.sent_bytes()));
        for w in &mut self.viewers {
            let sample = Sample::read(&strata::stats(w.page)[&w.id], at);
            w.samples.push(sample);
        }
        for w in &mut self.viewers {
            let last = w.samples.last().expect("sampled");
            if let Some(size) = w.must_stay.filter(|&size| last.size != size) {
                self.failures.push(format!(
                    "the {} viewer left {size:?} for {:?} at {:.1} s",
                    w.name,
                    last.size,
                    at.as_secs_f64()
                ));
                // Once is enough to tell; the figures go on.
                w.must_stay = None;
            }
        }
    }

    /// Samples until `done` holds; returns how long that took. Later than `within` is a
    /// failure kept for the end, and the scenario waits up to [`GRACE`] longer for the figure;
    /// not even then fails at once, since what follows would mean nothing.
    fn until(&mut self, within: Duration, what: &str, done: impl Fn(&Self) -> bool) -> Duration {
        let start = Instant::now();
        loop {
            self.tick();
            if done(self) {
                let took = start.elapsed();
                if took > within {
                    self.failures.push(format!(
                        "{what}: after {:.1} s, not within {within:?}",
                        took.as_secs_f64()
                    ));
                }
                return took;
            }
            if start.elapsed() >= within + GRACE {
                let all = self.failures.join("\n");
                self.fail(&format!(
                    "{all}\n{what}: not within {within:?}, nor {GRACE:?} more"
                ));
            }
        }
    }

    fn run_for(&mut self, how_long: Duration) {
        let end = Instant::now() + how_long;
        while Instant::now() < end {
            self.tick();
        }
    }

    /// A failed expectation is kept and the scenario goes on, so one run gives every
    /// figure; [`finish`](Self::finish) fails the test with them all.
    fn check(&mut self, ok: bool, what: &str, span: &Span) {
        if !ok {
            self.failures.push(format!("{what}: {span}"));
        }
    }

    fn finish(&self) {
        if !self.failures.is_empty() {
            self.fail(&self.failures.join("\n"));
        }
        if std::env::var_os("STRATA_BW_TRACE").is_some() {
            println!("{}", self.trace());
        }
    }

    fn fail(&self, what: &str) -> ! {
        panic!("[{}] {what}\n{}", self.label, self.trace());
    }

    /// Every sample of every viewer, the shaper's counters and the node's allocation events.
    fn trace(&self) -> String {
        let mut out = String::new();
        for w in &self.viewers {
            let _ = writeln!(
                out,
                "--- the {} viewer (t, size, decoded, freezes, PLIs, lost, repaired, received)",
                w.name
            );
            for s in &w.samples {
                let _ = writeln!(
                    out,
                    "{:6.1} {:>4}x{:<4} {:6} {} {} {} {} {}",
                    s.at.as_secs_f64(),
                    s.size.0,
                    s.size.1,
                    s.decoded,
                    s.freezes,
                    s.plis,
                    s.lost,
                    s.repaired,
                    s.received
                );
            }
        }
        let _ = writeln!(
            out,
            "--- the shaped link toward the first viewer (t, kbit/s)"
        );
        for pair in self.link_bytes.windows(2) {
            let ((t0, b0), (t1, b1)) = (pair[0], pair[1]);
            let kbit = (b1 - b0) as f64 * 8.0 / (t1 - t0).as_secs_f64().max(0.001) / 1000.0;
            let _ = writeln!(out, "{:6.1} {kbit:6.0}", t1.as_secs_f64());
        }
        let _ = writeln!(out, "--- the shaper\n{}", self.link.qdisc_stats());
        out + &node_events(self.node)
    }
}
