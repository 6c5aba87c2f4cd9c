//! When a datagram arrived, as the core is told it.
//!
//! The socket's one reader takes a datagram some time after it came: up to a turn later
//! when its reads are spaced ([`SpacedReads`](super::spaced_reads::SpacedReads)), a queue
//! later when it hands the datagram to another worker. The kernel's receive stamp says how
//! long each waited in the socket ([`RecvBatch::waited`](super::batch::RecvBatch::waited));
//! here that becomes an instant on the loop's clock, which the core reports back to a
//! publisher as its packet's arrival (its bandwidth estimate reads the path's timing from
//! those, not the reader's schedule); the core still takes the datagram at its own `now`.

use std::time::{Duration, Instant};

/// The longest wait a stamp is believed: one older says a wall clock stepped, or a reader so
/// far behind that its arrival times no longer matter.
pub const MAX_WAIT: Duration = Duration::from_secs(1);

/// The instant a datagram read at `read` arrived, after waiting `waited` in the socket (at
/// most [`MAX_WAIT`]).
pub fn stamped(read: Instant, waited: Duration) -> Instant {
    read.checked_sub(waited.min(MAX_WAIT)).unwrap_or(read)
}

/// The arrivals one reader reports, in the order it reads them: never one before the last
/// (a wall clock stepped back between two stamps).
#[derive(Debug, Default)]
pub struct Arrivals {
    latest: Option<Instant>,
}

impl Arrivals {
    /// The arrival to report for a datagram `stamped` on arrival: its stamp, or the last one
    /// reported if that is later.
    pub fn at(&mut self, stamped: Instant) -> Instant {
        let at = self.latest.map_or(stamped, |latest| latest.max(stamped));
        self.latest = Some(at);
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_datagram_is_reported_arriving_when_it_did_not_when_read() {
        let start = Instant::now();
        let read = start + 10 * MS;
        let mut arrivals = Arrivals::default();
        assert_eq!(arrivals.at(stamped(read, 4 * MS)), start + 6 * MS);
        assert_eq!(arrivals.at(stamped(read, 2 * MS)), start + 8 * MS);
        assert_eq!(arrivals.at(stamped(read, Duration::ZERO)), read);
    }

    #[test]
    fn arrivals_never_run_back() {
        let start = Instant::now();
        let mut arrivals = Arrivals::default();
        assert_eq!(arrivals.at(start + 7 * MS), start + 7 * MS);
        // Stamped out of order (a wall clock stepped back): no earlier than the one before.
        assert_eq!(arrivals.at(start + 6 * MS), start + 7 * MS);
        assert_eq!(arrivals.at(start + 8 * MS), start + 8 * MS);
    }

    #[test]
    fn a_wait_past_belief_is_cut_to_the_longest_believed() {
        let read = Instant::now() + 2 * MAX_WAIT;
        let hours = Duration::from_secs(3 * 3600);
        assert_eq!(stamped(read, hours), read - MAX_WAIT);
    }
}
