//! The load test: the node as its own process under one AV1 L3T3 publisher and N viewers,
//! every one a WebRTC peer of the independent client crate (real ICE, DTLS, SRTP and RTCP over
//! loopback). The published video is generated, not recorded: no real L3T3 capture with a
//! Dependency Descriptor exists beside the checkout, so the frame pattern and DDs come from the
//! workspace's own DD stream generator (`selector::scalability`), with frame sizes set to a
//! browser-like 2.5 Mbit/s over three spatial layers (`benches::load::source`).
//!
//! `cargo run --release -p benches --bin load -- --viewers 300 --seconds 60 [--workers N]
//! [--loss PCT] [--pin] [--json] [--check]`; `--help` lists the rest. Beside the table, the
//! node's CPU per delivered packet against the kernel's floor, measured first in the same run
//! (`--floor-seconds`), and against the same floor at the node's own pace, measured last.
//! Progress goes to stderr, the
//! report (a table, or one JSON line with `--json`) to stdout. With `--check` the exit status
//! is 1 unless every viewer connected and got video and the loss after retransmission stayed
//! below `--max-loss` percent (1 by default); 2 when the run itself could not be done.
//!
//! The floor alone, `--floor-pace PER_CALL,CALL_US,WAKE_US` (repeatable): no node, the
//! kernel's best case and the same sender at each pace (`benches::load::floor_sweep`); with
//! `--check` it fails when a floor's datagrams did not all arrive.
//!
//! The data mode, `--participants N [--data-rate R] [--data-size B]`: no media, N conference
//! participants in one room, each with a data channel the node relays to the others, writing R
//! messages a second; reports the message latency (p50, p99), what arrived of what should
//! have, and the node's CPU (`benches::load::data`). With `--check` it fails unless every
//! participant had every channel and every message arrived at every other participant.

use std::process::ExitCode;

#[cfg(target_os = "linux")]
use benches::load::{floor_sweep, run, run_data, Options};
#[cfg(target_os = "linux")]
use clap::Parser;

#[cfg(not(target_os = "linux"))]
fn main() -> ExitCode {
    eprintln!("load: runs on Linux only (it reads /proc and waits with epoll)");
    ExitCode::from(2)
}

#[cfg(target_os = "linux")]
fn main() -> ExitCode {
    let options = Options::parse();
    // The report as JSON and as a table, and why `--check` fails it.
    let outcome = match (options.participants, options.floor_pace.is_empty()) {
        (0, false) => {
            floor_sweep::run(&options).map(|s| (s.json().to_string(), s.table(), s.check()))
        }
        (0, true) => {
            run(&options).map(|r| (r.json().to_string(), r.table(), r.check(options.max_loss)))
        }
        _ => run_data(&options).map(|r| (r.json().to_string(), r.table(), r.check())),
    };
    let (json, table, failures) = match outcome {
        Ok(outcome) => outcome,
        Err(e) => {
            eprintln!("load: {e}");
            return ExitCode::from(2);
        }
    };
    match options.json {
        true => println!("{json}"),
        false => print!("{table}"),
    }
    if !options.check {
        return ExitCode::SUCCESS;
    }
    for failure in &failures {
        eprintln!("load: check failed: {failure}");
    }
    match failures.is_empty() {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    }
}
