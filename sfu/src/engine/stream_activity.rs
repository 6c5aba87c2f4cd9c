//! Which of a simulcast track's streams the publisher sends now. An encoder pauses a stream
//! (its bandwidth or CPU fell short, or the page set `active: false` on the encoding) without
//! saying so in RTP: the stream just stops. Waiting for its measured rate to fade would leave
//! its viewers on a frozen picture for seconds; a stream with no media for a few of its own
//! frame intervals while another stream of the track still flows is taken as paused at once,
//! and its first packet again resumes it. A stream never seen while the others flow counts
//! as paused from the track's first packet.

use std::time::{Duration, Instant};

/// A stream paused this long at least, however fast its frames came ...
pub const PAUSE_AFTER: Duration = Duration::from_millis(300);
/// ... or this many of its frame intervals, for a stream whose frames come slower.
const PAUSE_FRAMES: u32 = 4;
/// The frame interval assumed before one is measured: 30 frames a second.
const FIRST_FRAME_INTERVAL: Duration = Duration::from_millis(33);
/// Streams a track has at most.
const MAX_STREAMS: usize = 4;

/// The streams of one track that are sent, as their media arrives.
#[derive(Debug, Clone)]
pub struct StreamActivity {
    streams: usize,
    /// Bit `i`: stream `i` is sent.
    active: u8,
    /// When the track's first media arrived: streams not seen since are measured from it.
    first: Option<Instant>,
    last: [Option<Frame>; MAX_STREAMS],
    /// Per stream, a running mean of the time between its frames.
    interval: [Duration; MAX_STREAMS],
}

/// The latest frame of a stream: its timestamp, when its first and latest packets arrived,
/// and since when the stream has flowed without a pause.
#[derive(Debug, Clone, Copy)]
struct Frame {
    timestamp: u32,
    started: Instant,
    arrival: Instant,
    flowing_since: Instant,
}

impl StreamActivity {
    /// A track of `streams` streams, all taken as sent until their media says otherwise.
    pub fn new(streams: usize) -> Self {
        let streams = streams.min(MAX_STREAMS);
        Self {
            streams,
            active: ((1u16 << streams) - 1) as u8,
            first: None,
            last: [None; MAX_STREAMS],
            interval: [FIRST_FRAME_INTERVAL; MAX_STREAMS],
        }
    }

    /// Bit `i` set while stream `i` is sent.
    pub fn active(&self) -> u8 {
        self.active
    }

    /// A media packet of `stream` (RTP timestamp `timestamp`) arrived at `now`: the streams
    /// sent now, when that changed.
    pub fn on_media(&mut self, now: Instant, stream: u8, timestamp: u32) -> Option<u8> {
        let index = usize::from(stream);
        if index >= self.streams {
            return None;
        }
        let first = *self.first.get_or_insert(now);
        let flowing = self.note_frame(index, now, timestamp);
        let mut active = self.active | (1 << stream);
        for other in (0..self.streams).filter(|&s| s != index) {
            let silent =
                now.saturating_duration_since(self.last[other].map_or(first, |f| f.arrival));
            let limit = PAUSE_AFTER.max(self.interval[other] * PAUSE_FRAMES);
            // Silent while this stream flowed all along: not a pause of the whole track,
            // whose streams come back one after the other.
            if silent > limit && flowing > limit {
                active &= !(1 << other);
            }
        }
        (active != self.active).then(|| {
            self.active = active;
            active
        })
    }

    /// Notes a packet of stream `index`; returns how long the stream has flowed without a
    /// pause.
    fn note_frame(&mut self, index: usize, now: Instant, timestamp: u32) -> Duration {
        let fresh = Frame {
            timestamp,
            started: now,
            arrival: now,
            flowing_since: now,
        };
        let frame = match self.last[index] {
            // After a pause the stream flows anew.
            Some(last) if now.saturating_duration_since(last.arrival) > PAUSE_AFTER => fresh,
            Some(last) if last.timestamp == timestamp => Frame {
                arrival: now,
                ..last
            },
            Some(last) => {
                let gap = now.saturating_duration_since(last.started);
                self.interval[index] = (self.interval[index] * 7 + gap) / 8;
                Frame {
                    flowing_since: last.flowing_since,
                    ..fresh
                }
            }
            None => fresh,
        };
        self.last[index] = Some(frame);
        now.saturating_duration_since(frame.flowing_since)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: Duration = Duration::from_millis(33);

    /// Frames of `streams` (each its own timestamp) every 33 ms for `frames` frames from `at`;
    /// each change of the streams sent, with when it came.
    fn flow(
        activity: &mut StreamActivity,
        at: &mut Instant,
        streams: &[u8],
        frames: u32,
    ) -> Vec<(Instant, u8)> {
        let mut changes = Vec::new();
        for n in 0..frames {
            for &s in streams {
                changes.extend(activity.on_media(*at, s, n * 3000).map(|m| (*at, m)));
            }
            *at += FRAME;
        }
        changes
    }

    fn masks(changes: &[(Instant, u8)]) -> Vec<u8> {
        changes.iter().map(|&(_, mask)| mask).collect()
    }

    #[test]
    fn a_stream_that_stops_while_the_others_flow_is_paused_within_300_ms_and_resumes() {
        let mut activity = StreamActivity::new(3);
        let mut at = Instant::now();
        assert!(flow(&mut activity, &mut at, &[0, 1, 2], 30).is_empty());
        let last_sent = at - FRAME;
        let changes = flow(&mut activity, &mut at, &[0, 2], 15);
        assert_eq!(masks(&changes), [0b101], "stream 1 paused, once");
        let noticed = changes[0].0 - last_sent;
        assert!(
            noticed > PAUSE_AFTER && noticed <= PAUSE_AFTER + FRAME,
            "{noticed:?}"
        );
        let resumed = flow(&mut activity, &mut at, &[0, 1, 2], 1);
        assert_eq!(masks(&resumed), [0b111], "resumed at its first packet");
    }

    #[test]
    fn a_track_whose_streams_all_pause_changes_nothing_and_a_stream_never_sent_is_paused() {
        let mut activity = StreamActivity::new(3);
        let mut at = Instant::now();
        flow(&mut activity, &mut at, &[0, 1], 30);
        assert_eq!(activity.active(), 0b011, "stream 2 never came");
        at += Duration::from_secs(5);
        assert!(
            flow(&mut activity, &mut at, &[0, 1], 3).is_empty(),
            "all came back"
        );
    }

    #[test]
    fn a_slow_stream_is_given_four_of_its_frame_intervals() {
        let mut activity = StreamActivity::new(2);
        let mut at = Instant::now();
        for n in 0..40u32 {
            activity.on_media(at, 0, n * 3000);
            if n % 6 == 0 {
                // Stream 1 at 5 frames a second: a frame every 200 ms.
                activity.on_media(at, 1, n * 3000);
            }
            at += FRAME;
        }
        assert_eq!(
            activity.active(),
            0b11,
            "a 200 ms frame interval is no pause"
        );
    }
}
