//! One keyframe requester per published track: merges every subscriber's need for a keyframe
//! into at most one request per stream per interval, however many subscribers ask at once.

use std::time::{Duration, Instant};

use smallvec::SmallVec;

/// Default spacing of keyframe requests to one stream.
pub const DEFAULT_KEYFRAME_INTERVAL: Duration = Duration::from_millis(500);
/// Spacing of keyframe requests to one track whatever stream they name. A browser's encoder
/// takes one request per 300 ms for all its simulcast streams and drops the rest, so a
/// request for another stream sent sooner would be lost and its subscriber left waiting for
/// a retry; it waits here instead (with room for the requests' jitter on the way).
pub const TRACK_REQUEST_SPACING: Duration = Duration::from_millis(350);

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
    /// The last request sent for any stream.
    last_sent: Option<Instant>,
    counters: KeyframeCounters,
}

impl KeyframeRequester {
    pub fn new(streams: usize, interval: Duration) -> Self {
        Self {
            interval,
            streams: SmallVec::from_elem(StreamRequests::default(), streams),
            last_sent: None,
            counters: KeyframeCounters::default(),
        }
    }

    /// When a stream's pending request may go: after its own interval and the track's
    /// spacing (never longer than the interval, which a host may set shorter).
    fn due(&self, stream: &StreamRequests) -> Option<Instant> {
        let spacing = self.interval.min(TRACK_REQUEST_SPACING);
        let due = stream.due(self.interval)?;
        Some(self.last_sent.map_or(due, |at| due.max(at + spacing)))
    }

    /// A keyframe of `stream` arrived: it answers every request pending for that stream.
    pub fn answered(&mut self, stream: u8) {
        if let Some(s) = self.streams.get_mut(usize::from(stream)) {
            s.pending_since = None;
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
        let index = self
            .streams
            .iter()
            .position(|s| self.due(s).is_some_and(|due| now >= due))?;
        let stream = &mut self.streams[index];
        stream.pending_since = None;
        stream.last_sent = Some(now);
        self.last_sent = Some(now);
        self.counters.sent += 1;
        // At most four streams.
        Some(index as u8)
    }

    /// When a pending request becomes due.
    pub fn next_timeout(&self) -> Option<Instant> {
        self.streams.iter().filter_map(|s| self.due(s)).min()
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

    /// Found with a real browser: a participant joining a call asked for a simulcast stream's
    /// keyframe 100 ms after another subscriber had asked for another stream's; the publisher
    /// dropped it, and the participant saw nothing of that publisher for a second.
    #[test]
    fn another_stream_waits_for_the_tracks_spacing_and_unknown_ones_are_ignored() {
        let t0 = Instant::now();
        let mut k = KeyframeRequester::new(3, DEFAULT_KEYFRAME_INTERVAL);
        k.request(t0, 2);
        k.request(t0, 7);
        assert_eq!(k.poll(t0), Some(2));
        let soon = t0 + Duration::from_millis(100);
        k.request(soon, 1);
        assert_eq!(k.poll(soon), None, "the publisher would drop it");
        assert_eq!(k.next_timeout(), Some(t0 + TRACK_REQUEST_SPACING));
        assert_eq!(k.poll(t0 + TRACK_REQUEST_SPACING), Some(1));
        assert_eq!(k.counters().asked, 2);
    }

    #[test]
    fn a_keyframe_that_arrives_answers_what_is_pending() {
        let t0 = Instant::now();
        let mut k = KeyframeRequester::new(2, DEFAULT_KEYFRAME_INTERVAL);
        k.request(t0, 0);
        assert_eq!(k.poll(t0), Some(0));
        k.request(t0 + Duration::from_millis(100), 0);
        k.request(t0 + Duration::from_millis(100), 1);
        // All streams' keyframes come on one request from a browser.
        k.answered(0);
        k.answered(1);
        assert_eq!(k.next_timeout(), None);
        assert_eq!(k.poll(t0 + DEFAULT_KEYFRAME_INTERVAL), None);
        assert_eq!(k.counters().sent, 1);
    }
}
