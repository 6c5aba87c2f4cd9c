//! What a viewer on the demo page shows, judged from its stats: the sizes it decodes, its
//! decode rate, its audio, and a round trip of layer switches. For any page that evaluates
//! script, Chromium's or Firefox's.

use std::time::Duration;

use serde_json::Value;

use crate::strata::{self, num, poll_until, size, stats, Eval, EVERY_SECOND};

/// How soon a viewer must show a new layer after asking for it ...
pub const SWITCH: Duration = Duration::from_secs(2);
/// ... and a higher one, which its estimate may need a probe cluster to allow.
pub const SWITCH_UP: Duration = Duration::from_secs(5);

/// Waits until every viewer decodes its expected (width, height), within `within`.
pub fn wait_sizes(page: &dyn Eval, expected: &[(&str, (f64, f64))], within: Duration) {
    let started = std::time::Instant::now();
    poll_until(
        page,
        within,
        Duration::from_millis(250),
        &format!("viewers at {expected:?}"),
        |s| {
            expected
                .iter()
                .all(|(id, want)| size(s, id) == *want)
                .then_some(())
        },
    );
    // For the record of how fast each codec's viewers reach their layers.
    eprintln!("viewers at {expected:?} after {:?}", started.elapsed());
}

/// Frames decoded per second over `window`.
pub fn decode_rate(page: &dyn Eval, id: &str, window: Duration) -> f64 {
    let before = num(&stats(page)[id]["video"], "framesDecoded");
    std::thread::sleep(window);
    let after = num(&stats(page)[id]["video"], "framesDecoded");
    (after - before) / window.as_secs_f64()
}

/// Waits until the viewer decodes frames of some size, within `within`, and checks that it
/// goes on decoding.
pub fn assert_decoding(page: &dyn Eval, id: &str, who: &str, within: Duration) {
    let first = poll_until(page, within, EVERY_SECOND, &format!("{who} decodes"), |s| {
        let v = &s[id]["video"];
        (num(v, "framesDecoded") > 0.0 && num(v, "frameWidth") > 0.0)
            .then(|| num(v, "framesDecoded"))
    });
    let rate = decode_rate(page, id, Duration::from_secs(2));
    assert!(rate > 0.0, "{who} stopped decoding after {first} frames");
}

pub fn assert_audio(page: &dyn Eval, id: &str) {
    let received = |s: &Value| num(&s[id]["audio"], "packetsReceived");
    let first = received(&stats(page));
    poll_until(
        page,
        Duration::from_secs(10),
        EVERY_SECOND,
        "audio packets arrive",
        |s| (received(s) > first).then_some(()),
    );
}

/// From the top spatial layer to the base and back, each followed within `SWITCH` (up within
/// `SWITCH_UP`), without a freeze, with at most one keyframe request per switch and decoding
/// never stopping. `sizes` are the frame sizes of spatial layers 0 to 2.
pub fn switch_round_trip(page: &dyn Eval, id: &str, sizes: [(f64, f64); 3]) {
    let start = stats(page)[id]["video"].clone();
    for spatial in [0, 2] {
        let decoded = num(&stats(page)[id]["video"], "framesDecoded");
        assert_eq!(
            strata::set_layer(page, id, spatial as u64, 2),
            204,
            "PATCH to spatial {spatial}"
        );
        // Up is within what the viewer's estimate has shown its path carries, and a probe
        // may have to show it first: the viewer's choice is a ceiling, not a promise.
        let within = if spatial == 0 { SWITCH } else { SWITCH_UP };
        poll_until(
            page,
            within,
            Duration::from_millis(200),
            &format!("switch to spatial {spatial}"),
            |s| (size(s, id) == sizes[spatial]).then_some(()),
        );
        let now = num(&stats(page)[id]["video"], "framesDecoded");
        assert!(
            now > decoded,
            "decoding went on across the switch to {spatial}"
        );
    }
    let end = stats(page)[id]["video"].clone();
    let delta = |key| num(&end, key) - num(&start, key);
    assert_eq!(delta("freezeCount"), 0.0, "freezes across switches: {end}");
    assert!(
        delta("pliCount") <= 2.0,
        "keyframe requests for two switches: {end}"
    );
}
