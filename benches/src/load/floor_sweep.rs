//! The floor alone (`--floor-pace`): no node, only the kernel's best case and the same
//! sender at each pace given, one after the other. How much of a sender's cost per datagram
//! its pace brings (datagrams a call, calls and wake-ups a second) is the question a load
//! run's two floors raise; this answers it for any pace, the node's among them.

use std::fmt::Write;

use serde_json::{json, Value};

use super::floor::Floor;
use super::options::Options;
use super::{measure_floor, pin_tool, LoadError};

/// The floors measured, the best case first.
#[derive(Debug, Clone, PartialEq)]
pub struct Sweep {
    pub floors: Vec<Floor>,
}

/// Measures the best case, then each of `--floor-pace`, pinned as a load run pins its floor.
pub fn run(options: &Options) -> Result<Sweep, LoadError> {
    options.validate()?;
    // The floor's reader is spawned from this thread: on the tool's core.
    let pinning = pin_tool(options)?;
    let paces = std::iter::once(None).chain(options.floor_pace.iter().copied().map(Some));
    let mut floors = Vec::new();
    for pace in paces {
        floors.extend(measure_floor(options, pinning, pace)?);
    }
    Ok(Sweep { floors })
}

impl Sweep {
    /// Each floor's cost against the best case's.
    fn over_best(&self, floor: &Floor) -> Option<f64> {
        let best = self.floors.first()?.us_per_datagram()?;
        Some(floor.us_per_datagram()? / best)
    }

    pub fn table(&self) -> String {
        let mut out = String::from(
            "  pace (a call / a wake-up)      us per datagram  / best case  per call  calls/s  sleeps/s\n",
        );
        for floor in &self.floors {
            let pace = floor.pace.map_or("best case".to_string(), |p| {
                format!(
                    "{} every {} us / {} us",
                    p.per_call,
                    p.call_interval.as_micros(),
                    p.wake_interval.as_micros()
                )
            });
            let wall = floor.wall.as_secs_f64().max(f64::MIN_POSITIVE);
            // Writing to a String cannot fail.
            let _ = writeln!(
                out,
                "  {pace:<30} {:>15.2} {:>11.2} {:>9.1} {:>8.0} {:>9.0}",
                floor.us_per_datagram().unwrap_or(0.0),
                self.over_best(floor).unwrap_or(0.0),
                floor.per_call().unwrap_or(0.0),
                floor.calls as f64 / wall,
                floor.sleeps as f64 / wall,
            );
        }
        out
    }

    pub fn json(&self) -> Value {
        let floors: Vec<Value> = self
            .floors
            .iter()
            .map(|floor| {
                json!({
                    "per_call": floor.pace.map(|p| p.per_call),
                    "call_interval_us": floor.pace.map(|p| p.call_interval.as_micros() as u64),
                    "wake_interval_us": floor.pace.map(|p| p.wake_interval.as_micros() as u64),
                    "us_per_datagram": floor.us_per_datagram(),
                    "over_best_case": self.over_best(floor),
                    "sent": floor.sent,
                    "received": floor.received,
                    "calls": floor.calls,
                    "sleeps": floor.sleeps,
                    "wall_s": floor.wall.as_secs_f64(),
                })
            })
            .collect();
        json!({ "floors": floors })
    }

    /// What `--check` fails the sweep for: a floor whose datagrams did not all arrive
    /// (a dropped datagram costs the kernel less, so its figure reads low).
    pub fn check(&self) -> Vec<String> {
        self.floors
            .iter()
            .filter(|f| f.received < f.sent || f.lost > 0)
            .map(|f| {
                format!(
                    "a floor read {} of {} datagrams sent ({} refused)",
                    f.received, f.sent, f.lost
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;

    use super::*;

    #[test]
    fn the_best_case_comes_first_then_each_pace() {
        let options = Options::parse_from([
            "load",
            "--viewers",
            "3",
            "--floor-seconds",
            "0.05",
            "--floor-pace",
            "4,2000,4000",
        ]);
        let sweep = run(&options).expect("the floors");
        assert_eq!(sweep.floors.len(), 2);
        assert_eq!(sweep.floors[0].pace, None);
        assert_eq!(sweep.floors[1].pace, options.floor_pace.first().copied());
        // About 25 calls in 50 ms, every other one after a sleep.
        let paced = &sweep.floors[1];
        assert_eq!(paced.per_call(), Some(4.0));
        assert!(paced.sleeps > 0 && paced.sleeps < paced.calls, "{paced:?}");
        assert_eq!(sweep.check(), Vec::<String>::new());
        assert_eq!(sweep.over_best(&sweep.floors[0]), Some(1.0));
        let table = sweep.table();
        assert!(table.contains("best case"), "{table}");
        assert!(table.contains("4 every 2000 us / 4000 us"), "{table}");
        let json = sweep.json();
        assert_eq!(json["floors"][1]["wake_interval_us"], 4000);
        assert_eq!(json["floors"][0]["per_call"], Value::Null);
    }

    #[test]
    fn a_floor_that_lost_datagrams_fails_the_check() {
        let whole = Floor {
            sent: 10,
            received: 10,
            wall: Duration::from_secs(1),
            ..Floor::default()
        };
        let short = Floor {
            received: 7,
            ..whole
        };
        let sweep = Sweep {
            floors: vec![whole, short],
        };
        assert_eq!(
            sweep.check(),
            ["a floor read 7 of 10 datagrams sent (0 refused)"]
        );
    }
}
