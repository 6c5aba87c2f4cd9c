//! The node under a flood, with a real viewer beside it: sessions pour into one room as fast
//! as a client can make them (none of them ever connects, so the sweep must reap them), junk
//! UDP hits the media port and `/metrics` is scraped twice a second, while a Chromium
//! publisher and viewer in another room go on at 720p. Bounded: about a minute.
//!
//! Ignored by default, like the browser tests: `.ci/browser-test` runs it in a private
//! network namespace with only loopback.

#[path = "browser/chromium.rs"]
#[allow(dead_code, reason = "the soak uses part of the browser tests' driver")]
mod chromium;
#[path = "browser/node.rs"]
#[allow(dead_code, reason = "the soak uses part of the browser tests' driver")]
mod node;
#[path = "browser/strata.rs"]
#[allow(dead_code, reason = "the soak uses part of the browser tests' driver")]
mod strata;

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::json;

use chromium::Chromium;
use node::Node;
use strata::{num, poll_until, size, stats, EVERY_SECOND};

const VIEWER_OFFER: &str = include_str!("../src/node/sdp/fixtures/viewer_recvonly.sdp");
/// Flood sessions never connect: they are gone this long after they came.
const SETTINGS: &str = "peer_timeout_ms = 3000\n[limits]\nsessions = 5000\n\
    sessions_per_room = 5000\nsessions_per_client = 5000\nhandshakes = 5000\n\
    handshakes_per_client = 5000\njoins_per_client_per_second = 0\n";
const FLOOD: Duration = Duration::from_secs(30);

#[test]
#[ignore = "needs chromium in a private network namespace: run .ci/browser-test"]
fn a_flood_in_one_room_does_not_disturb_another() {
    let node = Node::start_on("127.0.0.1", Some(SETTINGS), &[]);
    let browser = Chromium::launch();
    let page = browser.open(&node.url("/"));
    let publisher = strata::publish(
        &page,
        json!({ "room": "pair", "codec": "AV1", "scalabilityMode": "L3T3_KEY" }),
    );
    strata::wait_publishing(&page, &publisher);
    let viewer = strata::watch(
        &page,
        json!({ "room": "pair", "spatial": 2, "temporal": 2 }),
    );
    poll_until(
        &page,
        Duration::from_secs(40),
        EVERY_SECOND,
        "720p before the flood",
        |s| (size(s, &viewer) == (1280.0, 720.0)).then_some(()),
    );
    let before = stats(&page)[&viewer]["video"].clone();

    let running = Arc::new(AtomicBool::new(true));
    let flood = Flood::start(&node.http, &running);
    let scraper = scrape(&node.http, &running);
    let started = Instant::now();
    let mut last = num(&before, "framesDecoded");
    while started.elapsed() < FLOOD {
        std::thread::sleep(EVERY_SECOND);
        let now = stats(&page);
        let decoded = num(&now[&viewer]["video"], "framesDecoded");
        assert!(decoded > last, "the viewer decodes every second: {now:#}");
        assert_eq!(size(&now, &viewer), (1280.0, 720.0), "still 720p: {now:#}");
        last = decoded;
    }
    running.store(false, Ordering::Relaxed);
    let created = flood.join().expect("the flood ran");
    let scrapes = scraper.join().expect("the scraper ran");
    eprintln!("flood: {created} sessions made, /metrics answered {scrapes} times");
    let after = stats(&page)[&viewer]["video"].clone();
    let freezes = num(&after, "freezeCount") - num(&before, "freezeCount");
    assert_eq!(freezes, 0.0, "no freeze during the flood: {after:#}");
    assert!(created >= 300, "the flood made {created} sessions");
    assert!(
        scrapes >= FLOOD.as_secs() as usize,
        "/metrics answered {scrapes} times"
    );
    // Every flood session is reaped; the Chromium pair stays.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let metrics = get(&node.http, "/metrics");
        if metrics.contains("strata_subscribers 1\n") && metrics.contains("strata_publishers 1\n") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "flood sessions reaped:\n{metrics}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A client that makes viewer sessions in room `flood` as fast as the node answers, and sends
/// junk datagrams to the media port between them.
struct Flood;

impl Flood {
    fn start(http: &str, running: &Arc<AtomicBool>) -> JoinHandle<usize> {
        let (http, running) = (http.to_owned(), Arc::clone(running));
        std::thread::spawn(move || {
            let junk = UdpSocket::bind("127.0.0.1:0").expect("a socket");
            let mut media_port = None;
            let mut created = 0;
            let mut seed = 0x9E37_79B9u32;
            while running.load(Ordering::Relaxed) {
                let answer = post(&http, "/whep/flood", VIEWER_OFFER);
                if answer.starts_with("HTTP/1.1 201") {
                    created += 1;
                    media_port = media_port.or_else(|| candidate_port(&answer));
                }
                for _ in 0..20 {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    let datagram: Vec<u8> = (0..100).map(|i| (seed >> (i % 24)) as u8).collect();
                    if let Some(port) = media_port {
                        let _ = junk.send_to(&datagram, ("127.0.0.1", port));
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            created
        })
    }
}

/// `GET /metrics` twice a second; how many answered.
fn scrape(http: &str, running: &Arc<AtomicBool>) -> JoinHandle<usize> {
    let (http, running) = (http.to_owned(), Arc::clone(running));
    std::thread::spawn(move || {
        let mut answered = 0;
        while running.load(Ordering::Relaxed) {
            answered += usize::from(get(&http, "/metrics").contains("strata_rooms"));
            std::thread::sleep(Duration::from_millis(500));
        }
        answered
    })
}

/// The UDP port of the answer's host candidate.
fn candidate_port(answer: &str) -> Option<u16> {
    let line = answer.lines().find(|l| l.starts_with("a=candidate:"))?;
    let fields: Vec<&str> = line.split(' ').collect();
    fields.get(5)?.parse().ok()
}

fn post(http: &str, path: &str, body: &str) -> String {
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {http}\r\nConnection: close\r\n\
         Content-Type: application/sdp\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    exchange(http, &(head + body))
}

fn get(http: &str, path: &str) -> String {
    exchange(
        http,
        &format!("GET {path} HTTP/1.1\r\nHost: {http}\r\nConnection: close\r\n\r\n"),
    )
}

fn exchange(http: &str, request: &str) -> String {
    let Ok(mut stream) = TcpStream::connect(http) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reply = String::new();
    if stream.write_all(request.as_bytes()).is_ok() {
        let _ = stream.read_to_string(&mut reply);
    }
    reply
}
