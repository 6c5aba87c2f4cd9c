//! One keyframe requester per published track: merges every subscriber's need for a keyframe
//! into at most one request per stream per interval, however many subscribers ask at once.

use std::time::{Duration, Instant};

use smallvec::SmallVec;

/// Default spacing of keyframe requests to one stream.
pub const DEFAULT_KEYFRAME_INTERVAL: Duration = Duration::from_millis(500);

#[derive(Debug, Clone, Copy, Default)]
struct StreamRequests {
    /// When the oldest unanswered need arose: a first request is due at once, so the host
    /// learns of it through [`KeyframeRequester::next_timeout`] like any later one.
    pending_since: Option<Instant>,
    last_sent: Option<Instant>,
}

impl StreamRequests {
    fn due(&self, interval: Duration) -> Option<Instant> {
        let since = self.pending_since?;
        Some(self.last_sent.map_or(since, |at| since.max(at + interval)))
    }
}

/// Counters: what subscribers asked for and what went to the publisher.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyframeCounters {
    /// Keyframe requests asked for (by subscribers' PLIs and FIRs, and selectors waiting for a switch point).
    pub asked: u64,
    /// Requests sent to the publisher: at most one per stream per throttle interval.
    pub sent: u64,
}

#[derive(Debug, Clone)]
pub struct KeyframeRequester {
    interval: Duration,
    streams: SmallVec<[StreamRequests; 4]>,
    counters: KeyframeCounters,
}

impl KeyframeRequester {
    pub fn new(streams: usize, interval: Duration) -> Self {
        Self {
            interval,
            streams: SmallVec::from_elem(StreamRequests::default(), streams),
            counters: KeyframeCounters::default(),
        }
    }

    /// A subscriber (or the engine) needs a keyframe of `stream` as of `now`.
    pub fn request(&mut self, now: Instant, stream: u8) {
        if let Some(s) = self.streams.get_mut(usize::from(stream)) {
            s.pending_since.get_or_insert(now);
            self.counters.asked += 1;
        }
    }

    /// The next stream to send a keyframe request (PLI) for, if one is due now.
    pub fn poll(&mut self, now: Instant) -> Option<u8> {
        let interval = self.interval;
        let (index, stream) = self
            .streams
            .iter_mut()
            .enumerate()
            .find(|(_, s)| s.due(interval).is_some_and(|due| now >= due))?;
        stream.pending_since = None;
        stream.last_sent = Some(now);
        self.counters.sent += 1;
        // At most four streams.
        Some(index as u8)
    }

    /// When a pending request becomes due.
    pub fn next_timeout(&self) -> Option<Instant> {
        self.streams
            .iter()
            .filter_map(|s| s.due(self.interval))
            .min()
    }

    pub fn counters(&self) -> KeyframeCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_requests_make_one_per_interval() {
        let t0 = Instant::now();
        let mut k = KeyframeRequester::new(1, Duration::from_millis(500));
        for _ in 0..100 {
            k.request(t0, 0);
        }
        assert_eq!(k.next_timeout(), Some(t0), "a first request is due at once");
        assert_eq!(k.poll(t0), Some(0));
        assert_eq!(k.poll(t0), None, "nothing pending any more");
        k.request(t0 + Duration::from_millis(100), 0);
        assert_eq!(k.poll(t0 + Duration::from_millis(499)), None, "throttled");
        assert_eq!(k.next_timeout(), Some(t0 + Duration::from_millis(500)));
        assert_eq!(k.poll(t0 + Duration::from_millis(500)), Some(0));
        assert_eq!(
            k.counters(),
            KeyframeCounters {
                asked: 101,
                sent: 2
            }
        );
    }

    #[test]
    fn streams_are_throttled_separately_and_unknown_ones_ignored() {
        let t0 = Instant::now();
        let mut k = KeyframeRequester::new(2, DEFAULT_KEYFRAME_INTERVAL);
        k.request(t0, 0);
        k.request(t0, 1);
        k.request(t0, 7);
        assert_eq!(k.poll(t0), Some(0));
        assert_eq!(k.poll(t0), Some(1));
        assert_eq!(k.poll(t0), None);
        assert_eq!(k.counters().asked, 2);
    }
}
