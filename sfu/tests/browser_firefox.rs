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

#[test]
#[ignore = "explore"]
fn explore() {
    let node = Node::start(&[]);
    let browser = Firefox::launch();
    let page = browser.open(&node.url("/"));
    let mode = std::env::var("MODE").unwrap_or_default();
    let simulcast = mode == "simulcast";
    let publisher = strata::publish(
        &page,
        json!({ "room": "ff", "codec": "VP8", "scalabilityMode": "L1T1", "simulcast": simulcast }),
    );
    let sdp = page.eval_json(&format!(
        "sessions.get({publisher:?}).pc.localDescription.sdp"
    ));
    println!("{}", sdp.as_str().unwrap());
    let viewer = strata::watch(&page, json!({ "room": "ff", "spatial": 2, "temporal": 2 }));
    let start = Instant::now();
    for _ in 0..40 {
        std::thread::sleep(Duration::from_secs(1));
        let s = strata::stats(&page);
        let enc: Vec<String> = s[&publisher]["video"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| format!("{}:{}x{}", v["rid"], v["frameWidth"], v["frameHeight"]))
            .collect();
        println!(
            "{:5.1} pub {:?} view {:?}",
            start.elapsed().as_secs_f64(),
            enc,
            strata::size(&s, &viewer)
        );
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
