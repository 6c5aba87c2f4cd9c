//! What the cluster's viewers decode, judged from their pages' `getStats()`: the frame size,
//! the frames decoded per second, freezes, and the packets lost net of retransmissions.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::strata::{num, size, stats, Eval, EVERY_SECOND};

/// A viewer's expected size that any decoded size meets.
pub const ANY_SIZE: (f64, f64) = (0.0, 0.0);

/// What one viewer decoded over a span.
#[derive(Debug)]
pub struct Span {
    pub size: (f64, f64),
    pub fps: f64,
    pub freezes: f64,
    /// Packets lost and not repaired: Chromium's `packetsLost` counts the original stream
    /// only (RFC 3550), so a packet a retransmission repaired stays counted there and shows
    /// in `retransmittedPacketsReceived` too.
    pub unrepaired: f64,
    pub received: f64,
}

/// A page's stats at a moment: where a span starts.
pub struct Mark {
    stats: Value,
    at: Instant,
}

pub fn mark(page: &dyn Eval) -> Mark {
    Mark {
        stats: stats(page),
        at: Instant::now(),
    }
}

/// What each viewer `ids` of the page decoded since `mark`.
pub fn since(page: &dyn Eval, mark: &Mark, ids: &[&str]) -> Vec<Span> {
    let last = stats(page);
    let elapsed = mark.at.elapsed().as_secs_f64();
    ids.iter()
        .map(|id| {
            let (a, b) = (&mark.stats[id]["video"], &last[id]["video"]);
            let delta = |key: &str| num(b, key) - num(a, key);
            Span {
                size: size(&last, id),
                fps: delta("framesDecoded") / elapsed,
                freezes: delta("freezeCount"),
                unrepaired: delta("packetsLost") - delta("retransmittedPacketsReceived"),
                received: delta("packetsReceived"),
            }
        })
        .collect()
}

/// The viewers of the page decoded their sizes since `mark` at `min_fps` or more, without a
/// freeze and with less than 1 % of their packets lost for good. `who` names them in a
/// failure.
pub fn assert_smooth_since(
    page: &dyn Eval,
    mark: &Mark,
    who: &str,
    viewers: &[(&str, (f64, f64))],
    min_fps: f64,
) {
    let ids: Vec<&str> = viewers.iter().map(|(id, _)| *id).collect();
    let spans = since(page, mark, &ids);
    println!(
        "{who}, over {:.1} s: {spans:?}",
        mark.at.elapsed().as_secs_f64()
    );
    for ((id, want), got) in viewers.iter().zip(&spans) {
        // Any size when none is wanted: the viewer's estimate chooses its layer.
        let size_ok = *want == ANY_SIZE || got.size == *want;
        assert!(size_ok, "{who}, viewer {id} not at {want:?}: {got:?}");
        assert!(got.fps >= min_fps, "{who}, viewer {id}: {got:?}");
        assert_eq!(got.freezes, 0.0, "{who}, viewer {id}: {got:?}");
        assert!(
            got.unrepaired < 0.01 * got.received,
            "{who}, viewer {id}: {got:?}"
        );
    }
}

/// Waits until every viewer decodes its size (any, for [`ANY_SIZE`]); fails after `within` with the last stats.
/// Returns how long it took.
pub fn wait_sizes(
    page: &dyn Eval,
    who: &str,
    viewers: &[(&str, (f64, f64))],
    within: Duration,
) -> Duration {
    let started = Instant::now();
    loop {
        let now = stats(page);
        let at = |id: &str, want: (f64, f64)| match want {
            ANY_SIZE => size(&now, id).0 > 0.0,
            _ => size(&now, id) == want,
        };
        if viewers.iter().all(|(id, want)| at(id, *want)) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "{who}: not at {viewers:?} within {within:?}; last stats:\n{now:#}"
        );
        std::thread::sleep(EVERY_SECOND / 4);
    }
}

/// The resource URL the page's session `id` was given (after a `307`, on the node that
/// served it).
pub fn location(page: &dyn Eval, id: &str) -> String {
    let value: Value = page.eval_json(&format!("sessions.get({id:?}).location"));
    value.as_str().unwrap_or_default().to_owned()
}
