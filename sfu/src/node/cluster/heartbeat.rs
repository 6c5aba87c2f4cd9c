//! The heartbeat: every `heartbeat_ms`, the node's load is measured (sessions from its
//! workers, CPU time from the kernel, bytes sent from its counters) and its registration
//! refreshed with it. A drain beginning sends a beat at once, so the others stop sending
//! sessions here within a round trip rather than a heartbeat. With the media relay, each beat
//! also has the relay follow the node's rooms (see [`relay_follow`](super::relay_follow)).

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};

use super::member::Member;
use super::store::Load;
use crate::node::metrics::Snapshot;
use crate::node::signaling::Signaling;

/// Beats until the node's signaling is gone (held weakly, so that the media workers end with
/// the HTTP side as on a lone node).
pub async fn run(member: Arc<Member>, signaling: Weak<Signaling>, capacity: u32, every: Duration) {
    let mut meter = Meter::new(Instant::now());
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = member.beat_requested() => {}
        }
        let Some(signaling) = signaling.upgrade() else {
            return;
        };
        let (Ok(snapshot), Ok(rooms)) = (signaling.metrics().await, signaling.room_names().await)
        else {
            return;
        };
        let relay = signaling.relay();
        let followed = match &relay {
            Some(_) => signaling.relay_rooms().await.ok(),
            None => None,
        };
        drop(signaling);
        let load = meter.load(Instant::now(), &snapshot, capacity);
        if let Err(e) = member.heartbeat(load, &rooms).await {
            tracing::warn!("cluster heartbeat: {e}");
        }
        if let (Some(relay), Some(followed)) = (relay, followed) {
            relay.follow(followed);
        }
    }
}

/// Turns the running totals (CPU time, bytes sent) into rates over the last beat.
#[derive(Debug)]
struct Meter {
    at: Instant,
    cpu_ticks: Option<u64>,
    bytes_out: u64,
    cores: u64,
}

/// The kernel counts a process's CPU time in these per second (`USER_HZ`, fixed by the
/// Linux ABI for `/proc`).
const TICKS_PER_SECOND: u64 = 100;

impl Meter {
    /// A meter whose first reading measures no CPU: the first beat comes at once, and the
    /// kernel's ticks over no time say nothing (one tick over a millisecond would read as
    /// several cores busy).
    fn new(now: Instant) -> Self {
        Self {
            at: now,
            cpu_ticks: None,
            bytes_out: 0,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u64),
        }
    }

    fn load(&mut self, now: Instant, snapshot: &Snapshot, capacity: u32) -> Load {
        let elapsed_ms = now.duration_since(self.at).as_millis().max(1) as u64;
        let ticks = cpu_ticks();
        let cpu_ms = match (ticks, self.cpu_ticks) {
            (Some(now), Some(before)) => now.saturating_sub(before) * 1000 / TICKS_PER_SECOND,
            _ => 0,
        };
        let bytes = snapshot.node.bytes_out.saturating_sub(self.bytes_out);
        self.at = now;
        self.cpu_ticks = ticks;
        self.bytes_out = snapshot.node.bytes_out;
        let sessions = snapshot.publishers + snapshot.viewers + snapshot.participants;
        Load {
            sessions: u32::try_from(sessions).unwrap_or(u32::MAX),
            capacity,
            // CPU time comes in whole ticks, so a short beat may read a tick more than it
            // had: never more than all the cores.
            cpu_percent: u32::try_from(cpu_ms * 100 / (elapsed_ms * self.cores))
                .map_or(100, |p| p.min(100)),
            // bytes per millisecond * 8 = kbit/s
            outbound_kbps: bytes * 8 / elapsed_ms,
        }
    }
}

/// The process's user and system CPU time so far, in ticks: fields 14 and 15 of
/// `/proc/self/stat` (counted after the command name, which may hold spaces).
fn cpu_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let (_, after_name) = stat.rsplit_once(')')?;
    let mut fields = after_name.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(user + system)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_taken_over_the_beat() {
        let start = Instant::now();
        let mut meter = Meter::new(start);
        let mut snapshot = Snapshot {
            publishers: 1,
            viewers: 2,
            participants: 3,
            ..Snapshot::default()
        };
        snapshot.node.bytes_out = 250_000;
        let load = meter.load(start + Duration::from_secs(2), &snapshot, 10);
        assert_eq!((load.sessions, load.capacity), (6, 10));
        assert_eq!(load.cpu_percent, 0, "not measured on the first beat");
        assert_eq!(load.outbound_kbps, 1_000, "250 kB over 2 s");
        snapshot.node.bytes_out = 375_000;
        let load = meter.load(start + Duration::from_secs(3), &snapshot, 10);
        assert_eq!(load.outbound_kbps, 1_000, "125 kB over the last second");
        assert!(load.cpu_percent <= 100);
    }

    #[test]
    fn this_process_has_used_cpu() {
        assert!(cfg!(not(target_os = "linux")) || cpu_ticks().is_some());
    }
}
