//! Conference participants on demo pages, Chromium's or Firefox's: who decodes whom, read from
//! each participant's stats.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::strata::{self, num, Eval};

/// How often the participants' stats are read.
pub const SAMPLE: Duration = Duration::from_millis(250);

/// One participant: the page it runs in and its session id there.
pub struct Participant<'a> {
    pub name: &'static str,
    pub page: &'a dyn Eval,
    pub id: String,
}

/// The participants' stats, by name: each page is read once, however many participants it
/// holds (a read takes every session's stats on the page; reading a page of four once per
/// participant only kept its browser busier while it negotiated).
pub fn sample(participants: &[Participant<'_>]) -> BTreeMap<&'static str, Value> {
    let mut pages: Vec<(*const (), Value)> = Vec::new();
    participants
        .iter()
        .map(|p| {
            let page = std::ptr::from_ref(p.page).cast::<()>();
            let read = match pages.iter().position(|(seen, _)| *seen == page) {
                Some(i) => &pages[i].1,
                None => {
                    pages.push((page, strata::stats(p.page)));
                    &pages[pages.len() - 1].1
                }
            };
            (p.name, read[&p.id].clone())
        })
        .collect()
}

/// The names of the participants `stats` decodes video from (frames decoded at a size).
pub fn decoding(stats: &Value) -> Vec<String> {
    let mut names: Vec<String> = stats["remote"]
        .as_object()
        .map(|remote| {
            remote
                .values()
                .filter(|r| {
                    num(&r["video"], "framesDecoded") > 0.0 && num(&r["video"], "frameWidth") > 0.0
                })
                .filter_map(|r| r["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Whether every participant decodes exactly the others, and decoded more since `before`.
pub fn everyone_decodes_the_others(
    participants: &[Participant<'_>],
    now: &BTreeMap<&'static str, Value>,
    before: Option<&BTreeMap<&'static str, Value>>,
) -> bool {
    participants.iter().all(|p| {
        let mut others: Vec<String> = participants
            .iter()
            .filter(|o| o.name != p.name)
            .map(|o| o.name.to_owned())
            .collect();
        others.sort();
        let stats = &now[p.name];
        let moving = before.is_none_or(|before| {
            others
                .iter()
                .all(|o| frames(stats, o) > frames(&before[p.name], o))
        });
        decoding(stats) == others && moving
    })
}

/// Frames `stats` decoded from participant `name`.
pub fn frames(stats: &Value, name: &str) -> f64 {
    remote_of(stats, name).map_or(0.0, |r| num(&r["video"], "framesDecoded"))
}

pub fn remote_of<'a>(stats: &'a Value, name: &str) -> Option<&'a Value> {
    stats["remote"]
        .as_object()?
        .values()
        .find(|r| r["name"] == name)
}

/// Waits up to `within` until every participant decodes exactly the others (`what`), then for
/// them to go on decoding each other for up to 5 s; returns how long the first took, and the
/// stats of the moment they first did.
pub fn decode_each_other(
    participants: &[Participant<'_>],
    within: Duration,
    what: &str,
) -> (Duration, BTreeMap<&'static str, Value>) {
    let took = until(participants, within, what, |now| {
        everyone_decodes_the_others(participants, now, None)
    });
    let before = sample(participants);
    until(
        participants,
        Duration::from_secs(5),
        "and keep decoding",
        |now| everyone_decodes_the_others(participants, now, Some(&before)),
    );
    (took, before)
}

/// Samples until `done` holds; returns how long it took, or fails with the last stats.
pub fn until(
    participants: &[Participant<'_>],
    within: Duration,
    what: &str,
    mut done: impl FnMut(&BTreeMap<&'static str, Value>) -> bool,
) -> Duration {
    let start = Instant::now();
    loop {
        let now = sample(participants);
        if done(&now) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "{what}: not within {within:?}; in short:\n{}last stats:\n{:#}",
            summary(&now),
            json!(now)
        );
        std::thread::sleep(SAMPLE);
    }
}

/// A line per participant: what it decodes of each other one (frames, height, PLIs sent),
/// its renegotiations and its estimate; read first when a run fails, before the whole stats.
pub fn summary(stats: &BTreeMap<&'static str, Value>) -> String {
    stats
        .iter()
        .map(|(name, seen)| {
            let remote: Vec<String> = seen["remote"]
                .as_object()
                .map(|remote| {
                    remote
                        .values()
                        .map(|r| {
                            let video = &r["video"];
                            format!(
                                "{} {}f@{}p pli {}",
                                r["name"].as_str().unwrap_or("?"),
                                num(video, "framesDecoded"),
                                num(video, "frameHeight"),
                                num(video, "pliCount")
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            let ago = |what: &str| {
                seen["negotiation"][what]
                    .as_f64()
                    .map_or("-".to_owned(), |ms| format!("{ms:.0} ms ago"))
            };
            format!(
                "{name}: [{}] renegotiations {} (asked {}, offered {}, answered {}, error {}) \
                 estimate {}\n",
                remote.join(", "),
                seen["renegotiations"],
                ago("asked"),
                ago("offered"),
                ago("answered"),
                seen["error"],
                seen["estimate_bps"]
            )
        })
        .collect()
}

/// Joins `room` as `name` with the demo page's conference driver, its camera at 640x360.
pub fn join<'a>(
    page: &'a dyn Eval,
    room: &str,
    name: &'static str,
    options: Value,
) -> Participant<'a> {
    let mut options = options;
    options["room"] = json!(room);
    options["name"] = json!(name);
    // 360p at 15 fps: a page holds several participants, each encoding every layer and
    // decoding every other one, and two cores run them all beside the node; at 30 fps the
    // browsers' own starved threads made short freezes and slow negotiations of their own.
    options["width"] = json!(640);
    options["height"] = json!(360);
    options["frameRate"] = json!(15);
    let id = page
        .eval_json(&format!("strata.join({options})"))
        .as_str()
        .expect("a session id")
        .to_owned();
    Participant { name, page, id }
}
