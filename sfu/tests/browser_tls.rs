//! Serving other hosts, end to end: the node over HTTPS with a certificate from a test CA,
//! opened by Chromium in another network namespace (a secure context for the camera only
//! because the certificate is trusted), HTTP/2 carrying many event streams and a request at
//! once, a certificate renewed under way; and a viewer whose network lets nothing out but TCP
//! to port 443, watching through coturn over TLS with credentials the node minted.
//!
//! Ignored by default: they need root, Chromium, coturn, certutil (libnss3-tools), nftables and
//! ethtool, in a private network namespace: the test makes each browser's host a namespace of
//! its own behind a veth (`browser/netns.rs`). `.ci/browser-test` installs and runs them; by
//! hand: `unshare -n sh -c 'ip link set lo up && cargo test -p sfu --release --test browser_tls
//! -- --ignored --test-threads=1 --nocapture'`.

#[path = "browser/chromium.rs"]
#[allow(
    dead_code,
    reason = "these scenarios use part of the browser tests' driver"
)]
mod chromium;
#[path = "common/coturn.rs"]
#[allow(dead_code, reason = "only coturn over TLS is used here")]
mod coturn;
#[path = "browser/netns.rs"]
#[allow(dead_code, reason = "no link is shaped here")]
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
#[path = "browser/test_ca.rs"]
mod test_ca;
#[path = "browser/tls_site.rs"]
mod tls_site;
#[path = "browser/viewing.rs"]
#[allow(
    dead_code,
    reason = "these scenarios use part of the browser tests' driver"
)]
mod viewing;

use std::time::Duration;

use serde_json::{json, Value};

use chromium::Page;
use strata::{num, stats, EVERY_SECOND};
use tls_site::{Site, RAMP_UP};
use viewing::assert_decoding;

/// How many event streams one page holds open: more than the six connections a browser opens
/// to one host over HTTP/1.1.
const EVENT_STREAMS: usize = 8;

/// The demo page at `https://<the node's veth address>:8443/` from another host: a secure
/// context (the page could not use the camera otherwise), publishing and watching over
/// HTTP/2; eight event streams and a request at once; a renewed certificate taken on SIGHUP
/// for new connections while media flows.
#[test]
#[ignore = "needs root, chromium, certutil and a private network namespace: run .ci/browser-test"]
fn https_demo_page_from_another_host() {
    let site = Site::new(false);
    let browser = site.browser(&site.near);
    let page = browser.open(&site.node.https_url("/"));
    assert_eq!(page.eval_json("window.isSecureContext"), json!(true));
    assert_eq!(
        page.eval_json("performance.getEntriesByType('navigation')[0].nextHopProtocol"),
        json!("h2"),
        "the page came over HTTP/2"
    );
    let (_, viewer) = site.publish_and_watch(&page);

    event_streams_and_a_request(&page);

    // The publisher's encoder climbs to the camera's size in steps, each a keyframe that can
    // show as a freeze: the reload is judged once it is there.
    viewing::wait_sizes(&page, &[(&viewer, (1280.0, 720.0))], RAMP_UP);
    std::thread::sleep(EVERY_SECOND);
    let before = stats(&page)[&viewer]["video"].clone();
    let old = site.leaf.sha256.clone();
    let renewed = site.ca.issue("node", site.near.gateway().into());
    site.node.hang_up();
    let now = strata::poll_until(
        &page,
        Duration::from_secs(10),
        Duration::from_millis(100),
        "a new connection gets the renewed certificate",
        |_| {
            let presented = site
                .ca
                .presented(&site.node.http, site.near.gateway().into());
            (presented != old).then_some(presented)
        },
    );
    assert_eq!(
        now, renewed.sha256,
        "the renewed certificate, verified by the CA"
    );
    std::thread::sleep(3 * EVERY_SECOND);
    let after = stats(&page)[&viewer]["video"].clone();
    let delta = |key| num(&after, key) - num(&before, key);
    assert!(
        delta("framesDecoded") > 30.0,
        "the viewer went on decoding across the reload: {before} then {after}"
    );
    assert_eq!(
        delta("freezeCount"),
        0.0,
        "no freeze across the reload: {after}"
    );
    // A browser that never connected before trusts the renewed certificate as well.
    let second = site.browser(&site.near);
    let fresh = second.open(&site.node.https_url("/"));
    assert_eq!(fresh.eval_json("window.isSecureContext"), json!(true));
}

/// A viewer whose network reaches nothing but TCP to port 443 of coturn (and the node's page,
/// 8443) decodes through a relay over TLS, with credentials the node minted from coturn's
/// shared secret; the node counts that session, and it alone, as relayed.
#[test]
#[ignore = "needs root, chromium, coturn, certutil and nftables in a private network namespace: run .ci/browser-test"]
fn watching_through_turn_over_tls_on_443() {
    let site = Site::new(true);
    let publishing = site.browser(&site.near);
    let page = publishing.open(&site.node.https_url("/"));
    let (_, direct) = site.publish_and_watch(&page);
    let far = site.far.as_ref().expect("the strict network");
    let watching = site.browser(far);
    let strict = watching.open(&site.node.https_url("/"));
    let viewer = strata::watch(&strict, json!({ "room": tls_site::ROOM, "relay": true }));
    assert_decoding(&strict, &viewer, "a viewer through TURN over TLS", RAMP_UP);
    let local = selected_local_candidate(&strict, &viewer);
    assert_eq!(local["candidateType"], "relay", "{local}");
    assert_eq!(local["relayProtocol"], "tls", "{local}");
    let first = selected_local_candidate(&page, &direct);
    assert_eq!(
        first["candidateType"], "host",
        "the viewer beside the publisher: {first}"
    );
    let metrics = metrics_text(&page);
    assert_eq!(
        series(&metrics, "strata_sessions_relayed_total"),
        Some(1.0),
        "{metrics}"
    );
    // The viewer's media goes out through the relay; only its checks and RTCP come in.
    for (direction, least) in [("in", 1_000.0), ("out", 100_000.0)] {
        let bytes = series(
            &metrics,
            &format!("strata_relayed_bytes_total{{direction=\"{direction}\"}}"),
        );
        assert!(
            bytes.is_some_and(|b| b > least),
            "relayed {direction}: {metrics}"
        );
    }
}

/// Connection set-up over UDP and over TURN/TLS, for BENCHMARKS.md: ten viewers of each, one
/// after the other, each timed from the page's POST to ICE connected and to its first decoded
/// frame (and its gathering before the POST); medians printed. Over UDP twice: with no ICE
/// server configured, and with the TURN server configured, which every client then gathers a
/// relay candidate from before it offers. Measures, asserts nothing on speed.
#[test]
#[ignore = "a measurement: needs what watching_through_turn_over_tls_on_443 needs"]
fn connection_setup_times() {
    {
        let site = Site::new(false);
        let browser = site.browser(&site.near);
        let page = browser.open(&site.node.https_url("/"));
        site.publish_and_watch(&page);
        print_setup_times("UDP, no ICE servers", &page, false);
    }
    let site = Site::new(true);
    let publishing = site.browser(&site.near);
    let page = publishing.open(&site.node.https_url("/"));
    site.publish_and_watch(&page);
    print_setup_times("UDP, TURN configured", &page, false);
    let far = site.far.as_ref().expect("the strict network");
    let watching = site.browser(far);
    let strict = watching.open(&site.node.https_url("/"));
    print_setup_times("TURN/TLS relay", &strict, true);
}

fn print_setup_times(label: &str, page: &Page, relay: bool) {
    let times: Vec<tls_site::SetupTimes> = (0..10)
        .map(|_| tls_site::timed_watch(page, relay))
        .collect();
    let column = |pick: fn(&tls_site::SetupTimes) -> f64| {
        let mut values: Vec<f64> = times.iter().map(pick).collect();
        let all = format!("{values:.0?}");
        (median(&mut values), all)
    };
    let (gathering, _) = column(|t| t.gathering);
    let (connected, connected_all) = column(|t| t.connected);
    let (first, first_all) = column(|t| t.first_frame);
    println!(
        "[setup {label}] medians of 10: gathering {gathering:.0} ms; POST to ICE connected \
         {connected:.0} ms {connected_all}; POST to first frame {first:.0} ms {first_all}"
    );
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    }
}

/// Joins [`EVENT_STREAMS`] conference participants from the page (a receive-only offer each:
/// no media) and opens each one's event stream, reading its first event; with all of them
/// open, a request must still complete. Every exchange went over HTTP/2.
fn event_streams_and_a_request(page: &Page) {
    let result = page.eval_json(&format!(
        "{}(async () => {{
            window.heldStreams = [];
            const opened = [];
            for (let i = 0; i < {EVENT_STREAMS}; i++) {{
                const pc = new RTCPeerConnection();
                pc.addTransceiver('audio', {{ direction: 'recvonly' }});
                const offer = await pc.createOffer();
                pc.close();
                const res = await within(fetch(`/rooms/h2?name=listener${{i}}`, {{
                    method: 'POST', headers: {{ 'Content-Type': 'application/sdp' }}, body: offer.sdp,
                }}), `join ${{i}}`);
                if (res.status !== 201) throw new Error(`join ${{i}}: ${{res.status}} ${{await res.text()}}`);
                const events = await within(fetch(res.headers.get('Location') + '/events'), `events ${{i}}`);
                const reader = events.body.getReader();
                const first = await within(reader.read(), `first event ${{i}}`);
                window.heldStreams.push(reader);
                opened.push(new TextDecoder().decode(first.value).split('\\n')[0]);
            }}
            const metrics = await within(fetch('/metrics').then((r) => r.text()), 'a request beside the streams');
            const protocols = performance.getEntriesByType('resource').map((e) => e.nextHopProtocol);
            return {{ opened, metrics, protocols }};
        }})()",
        WITHIN_JS
    ));
    let opened: Vec<&str> = result["opened"]
        .as_array()
        .expect("the streams' first lines")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(opened, vec!["event: state"; EVENT_STREAMS], "{result}");
    let metrics = result["metrics"].as_str().unwrap_or_default();
    assert_eq!(
        series(metrics, "strata_event_streams"),
        Some(EVENT_STREAMS as f64),
        "every stream open at once: {metrics}"
    );
    let protocols = result["protocols"].as_array().expect("resource timings");
    assert!(
        !protocols.is_empty() && protocols.iter().all(|p| p == "h2"),
        "every request over HTTP/2: {protocols:?}"
    );
}

/// A promise that fails with `what` unless `promise` settles within 10 s: a request that
/// waits for a free connection fails the test with its name rather than hanging it.
const WITHIN_JS: &str = "const within = (promise, what) => Promise.race([promise, \
    new Promise((_, reject) => setTimeout(() => reject(new Error(`${what}: not within 10 s`)), 10000))]);\n";

/// The local candidate of a session's selected pair, from its browser's stats.
fn selected_local_candidate(page: &Page, id: &str) -> Value {
    page.eval_json(&format!(
        "(async () => {{
            const report = await sessions.get({id:?}).pc.getStats();
            let pair = null;
            report.forEach((r) => {{ if (r.type === 'transport') pair = report.get(r.selectedCandidatePairId); }});
            return pair ? report.get(pair.localCandidateId) : null;
        }})()"
    ))
}

fn metrics_text(page: &Page) -> String {
    let text = page.eval_json("fetch('/metrics').then((r) => r.text())");
    text.as_str().unwrap_or_default().to_owned()
}

/// A sample's value from the Prometheus text: `name` with its labels, as written.
fn series(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}
