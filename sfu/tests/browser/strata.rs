//! The demo page's `window.strata` API seen from a test, and polling of its stats.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::chromium::Page;

/// A page that evaluates script: a Chromium tab or a Firefox one.
pub trait Eval {
    /// Evaluates `expr`, awaiting it if it is a promise, and returns its value as JSON.
    fn eval_json(&self, expr: &str) -> Value;
}

impl Eval for Page<'_> {
    fn eval_json(&self, expr: &str) -> Value {
        Page::eval_json(self, expr)
    }
}

/// Stats are read once a second, as a person watching the page would see them change.
pub const EVERY_SECOND: Duration = Duration::from_secs(1);

pub fn publish(page: &dyn Eval, options: Value) -> String {
    id(page.eval_json(&format!("strata.publish({options})")))
}

pub fn watch(page: &dyn Eval, options: Value) -> String {
    id(page.eval_json(&format!("strata.watch({options})")))
}

fn id(value: Value) -> String {
    value.as_str().expect("a session id").to_owned()
}

/// Pauses or resumes a publisher's simulcast encoding `rid`.
pub fn set_encoding_active(page: &dyn Eval, id: &str, rid: &str, active: bool) {
    page.eval_json(&format!(
        "strata.setEncodingActive({id:?}, {rid:?}, {active})"
    ));
}

/// Changes a viewer's layers; returns the HTTP status of the PATCH.
pub fn set_layer(page: &dyn Eval, id: &str, spatial: u64, temporal: u64) -> u64 {
    let status = page.eval_json(&format!("strata.setLayer({id:?}, {spatial}, {temporal})"));
    status.as_u64().expect("an HTTP status")
}

/// A raw POST from the page: (status, body).
pub fn post(
    page: &dyn Eval,
    path: &str,
    body: &str,
    content_type: &str,
    token: Option<&str>,
) -> (u64, String) {
    let args = json!([path, body, content_type, token]);
    let res = page.eval_json(&format!("strata.post(...{args})"));
    let status = res["status"].as_u64().expect("an HTTP status");
    (status, res["body"].as_str().unwrap_or_default().to_owned())
}

pub fn stats(page: &dyn Eval) -> Value {
    page.eval_json("strata.stats()")
}

/// Ends every session on the page, so the next scenario starts with an idle machine.
pub fn stop_all(page: &dyn Eval) {
    page.eval_json("strata.stats().then((all) => Object.keys(all).forEach(strata.stop))");
}

/// A number from a stats entry, 0 when absent (stats omit counters that have not started).
pub fn num(entry: &Value, key: &str) -> f64 {
    entry[key].as_f64().unwrap_or(0.0)
}

/// A viewer's (width, height).
pub fn size(stats: &Value, id: &str) -> (f64, f64) {
    let video = &stats[id]["video"];
    (num(video, "frameWidth"), num(video, "frameHeight"))
}

/// Polls the stats every `every` until `check` gives a value or `within` has passed; then fails
/// with `what` and the last stats.
pub fn poll_until<T>(
    page: &dyn Eval,
    within: Duration,
    every: Duration,
    what: &str,
    mut check: impl FnMut(&Value) -> Option<T>,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        let now = stats(page);
        if let Some(found) = check(&now) {
            return found;
        }
        if Instant::now() >= deadline {
            panic!("{what}: not within {within:?}; last stats:\n{now:#}");
        }
        std::thread::sleep(every);
    }
}

/// Waits until a publisher is connected and encoding; returns its video outbound entries.
pub fn wait_publishing(page: &dyn Eval, id: &str) -> Vec<Value> {
    poll_until(
        page,
        Duration::from_secs(15),
        EVERY_SECOND,
        "publisher encoding",
        |s| {
            let me = &s[id];
            let encoding = me["video"]
                .as_array()?
                .iter()
                .any(|v| num(v, "framesEncoded") > 0.0);
            (me["connectionState"] == "connected" && encoding)
                .then(|| me["video"].as_array().cloned())?
        },
    )
}

/// A field (`candidateType`, `protocol`) of the local candidate that session `id`'s
/// connection selected; null before it selected one.
pub fn selected_local(page: &dyn Eval, id: &str, field: &str) -> Value {
    page.eval_json(&format!(
        "(async () => {{
            const report = await sessions.get({id:?}).pc.getStats();
            let pair = null;
            report.forEach((r) => {{ if (r.type === 'transport') pair = report.get(r.selectedCandidatePairId); }});
            return pair ? report.get(pair.localCandidateId)[{field:?}] : null;
        }})()"
    ))
}

/// Restarts session `id`'s ICE (`strata.restartIce`) and waits up to 10 s for it to select a
/// pair under its new username fragment; what the page's call resolved to.
pub fn restart_ice(page: &dyn Eval, id: &str) -> Value {
    let restarted = page.eval_json(&format!("strata.restartIce({id:?})"));
    let ufrag = restarted["local"].clone();
    assert!(ufrag.is_string(), "restarted: {restarted}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while selected_local(page, id, "usernameFragment") != ufrag {
        assert!(
            Instant::now() < deadline,
            "session {id} selects no pair under its new credentials {ufrag}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    restarted
}

/// Ends one session on the page.
pub fn stop_one(page: &dyn Eval, id: &str) {
    page.eval_json(&format!("strata.stop({id:?})"));
}

/// The node's drop counters (`strata_dropped_total`) that are not zero, by reason.
pub fn drops(page: &dyn Eval) -> Vec<(String, f64)> {
    let text = page.eval_json("fetch('/metrics').then((r) => r.text())");
    let text = text.as_str().unwrap_or_default().to_owned();
    text.lines()
        .filter_map(|line| line.strip_prefix("strata_dropped_total{reason=\""))
        .filter_map(|rest| {
            let (reason, value) = rest.split_once("\"} ")?;
            let value: f64 = value.trim().parse().ok()?;
            (value > 0.0).then(|| (reason.to_owned(), value))
        })
        .collect()
}

/// Fails unless every packet the node dropped was for one of the `allowed` reasons.
pub fn assert_drops_only(page: &dyn Eval, allowed: &[&str]) {
    let drops = drops(page);
    let unexpected: Vec<&(String, f64)> = drops
        .iter()
        .filter(|(reason, _)| !allowed.contains(&reason.as_str()))
        .collect();
    assert!(
        unexpected.is_empty(),
        "the node dropped {unexpected:?} (all drops: {drops:?})"
    );
}
