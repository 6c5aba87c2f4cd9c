//! Simulcast: the publisher sends each spatial layer as its own RTP stream, named by rid. The
//! stream's index (its place in the publisher's rid list) is the spatial layer; a DD inside a
//! stream says spatial id 0 for every one of them, so it never names the stream.
//!
//! This selector only chooses the stream. Within the chosen stream, that stream's own DD or
//! payload descriptor drives temporal selection (a [`crate::dd::DdSelector`] or VP8 selector
//! the caller keeps), and the caller's munger keeps sequence numbers, timestamps and picture ids
//! continuous across a switch.

use crate::layer::{Layer, LayerLimits};
use crate::selection::KeyframeRequests;
use crate::unwrap::Unwrapper;

/// Most simulcast streams a publisher sends.
pub const MAX_STREAMS: u8 = 4;

/// What to do with one packet of a simulcast publisher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamChoice {
    /// Not the stream this subscriber receives.
    Drop,
    /// The current stream: hand the packet to its temporal selection.
    Forward,
    /// This packet starts a keyframe of the newly chosen stream: reset the temporal selection
    /// and the munger for the new source, then forward.
    SwitchTo,
}

/// Chooses one stream per subscriber; switches only at a keyframe of the new stream.
#[derive(Debug, Clone, Default)]
pub struct SimulcastSelector {
    limits: LayerLimits,
    /// Bit `i` set when the publisher sends stream `i`.
    active: u8,
    current: Option<u8>,
    keyframes: KeyframeRequests,
    /// The stream a keyframe request is for.
    requested: Option<u8>,
    /// Per stream, its sequence numbers, to tell a keyframe that arrives in order from one that
    /// arrives after later packets of its stream (which were dropped, so the keyframe or the
    /// frames after it would reach the subscriber incomplete).
    sequence_numbers: [Unwrapper; MAX_STREAMS as usize],
}

impl SimulcastSelector {
    /// A selector for a publisher sending `streams` streams, all active.
    pub fn new(streams: u8) -> Self {
        Self {
            active: all_streams(streams),
            ..Default::default()
        }
    }

    pub fn set_limits(&mut self, limits: LayerLimits) {
        self.limits = limits;
    }

    pub fn limits(&self) -> LayerLimits {
        self.limits
    }

    /// The publisher stopped or resumed streams (bit `i`: stream `i` is sent).
    pub fn set_active_streams(&mut self, active: u8) {
        self.active = active & all_streams(MAX_STREAMS);
    }

    /// The stream forwarded now.
    pub fn current(&self) -> Option<u8> {
        self.current
    }

    /// The spatial layer forwarded now, with the temporal layer the caller's temporal
    /// selection reports.
    pub fn current_layer(&self, temporal: u8) -> Option<Layer> {
        self.current.map(|stream| Layer::new(stream, temporal))
    }

    /// The limits for the temporal selection within the chosen stream: any spatial id (the
    /// stream's own DD says 0), the subscriber's temporal target.
    ///
    /// While a lower stream is wanted and its keyframe has not come, the current stream goes
    /// on at its base temporal layer only. A switch down is for a link that carries less, and
    /// the keyframe it waits for may take several requests (a publisher ignores one that
    /// comes soon after another): the base layer is a fraction of the stream's rate and is
    /// taken at once, so the link drains meanwhile instead of freezing the subscriber.
    pub fn stream_limits(&self) -> LayerLimits {
        let down = self.current.zip(self.wanted()).is_some_and(|(c, w)| w < c);
        let temporal = |l: Layer| Layer::new(u8::MAX, if down { 0 } else { l.temporal });
        LayerLimits {
            target: temporal(self.limits.target),
            max: temporal(self.limits.max),
        }
    }

    pub fn keyframe_requests(&mut self) -> &mut KeyframeRequests {
        &mut self.keyframes
    }

    /// The stream whose publisher should send the keyframe requested.
    pub fn requested_stream(&self) -> Option<u8> {
        self.requested
    }

    /// Decides one packet of stream `stream`. `keyframe_start` is true on the first packet of
    /// a keyframe.
    pub fn choose(
        &mut self,
        stream: u8,
        sequence_number: u16,
        keyframe_start: bool,
    ) -> StreamChoice {
        let in_order = self
            .sequence_numbers
            .get_mut(usize::from(stream))
            .is_some_and(|u| {
                let before = u.highest();
                let extended = u.unwrap(sequence_number);
                before.is_none_or(|h| extended > h)
            });
        let wanted = self.wanted();
        if wanted == self.current {
            self.keyframes.satisfied();
            return self.same_stream(stream);
        }
        if Some(stream) == wanted && keyframe_start && in_order {
            self.current = wanted;
            self.keyframes.satisfied();
            self.requested = None;
            return StreamChoice::SwitchTo;
        }
        if self.requested != wanted {
            // A wait for another stream's keyframe brings nothing of this one: ask at once.
            self.keyframes.restart();
        }
        self.requested = wanted;
        if wanted.is_some() {
            self.keyframes.request();
        }
        // Until the wanted stream's keyframe, keep the current stream if it is still sent.
        if self.current.is_some_and(|c| self.active & (1 << c) == 0) {
            self.current = None;
        }
        self.same_stream(stream)
    }

    fn same_stream(&self, stream: u8) -> StreamChoice {
        if Some(stream) == self.current {
            StreamChoice::Forward
        } else {
            StreamChoice::Drop
        }
    }

    /// The highest active stream within the limits.
    fn wanted(&self) -> Option<u8> {
        let limit = self.limits.effective().spatial;
        (0..MAX_STREAMS)
            .rev()
            .find(|&s| s <= limit && self.active & (1 << s) != 0)
    }
}

fn all_streams(count: u8) -> u8 {
    // At most MAX_STREAMS (4) bits.
    ((1u16 << count.min(MAX_STREAMS)) - 1) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(spatial: u8) -> LayerLimits {
        LayerLimits {
            target: Layer::new(spatial, u8::MAX),
            max: Layer::MAX,
        }
    }

    #[test]
    fn starts_at_a_keyframe_of_the_wanted_stream() {
        let mut s = SimulcastSelector::new(3);
        s.set_limits(limits(1));
        assert_eq!(s.choose(1, 101, false), StreamChoice::Drop);
        assert!(s.keyframe_requests().take());
        assert_eq!(s.requested_stream(), Some(1));
        assert_eq!(
            s.choose(2, 102, true),
            StreamChoice::Drop,
            "not the wanted stream"
        );
        assert_eq!(s.choose(1, 103, true), StreamChoice::SwitchTo);
        assert_eq!(s.choose(1, 104, false), StreamChoice::Forward);
        assert_eq!(s.choose(0, 105, true), StreamChoice::Drop);
        assert_eq!(s.current(), Some(1));
        assert!(!s.keyframe_requests().waiting());
    }

    #[test]
    fn keeps_the_current_stream_until_the_new_one_has_a_keyframe() {
        let mut s = SimulcastSelector::new(3);
        s.set_limits(limits(0));
        assert_eq!(s.choose(0, 106, true), StreamChoice::SwitchTo);
        s.set_limits(limits(2));
        assert_eq!(s.choose(0, 107, false), StreamChoice::Forward);
        assert_eq!(s.choose(2, 108, false), StreamChoice::Drop);
        assert_eq!(s.keyframe_requests().raised(), 1);
        assert_eq!(s.choose(0, 109, false), StreamChoice::Forward);
        assert_eq!(s.keyframe_requests().raised(), 1, "one request per wait");
        assert_eq!(s.choose(2, 110, true), StreamChoice::SwitchTo);
        assert_eq!(s.choose(0, 111, false), StreamChoice::Drop);
    }

    /// Found with a real browser: a publisher ignores a keyframe request that comes soon
    /// after one for another of its simulcast streams, and the subscriber waited for good.
    #[test]
    fn a_long_wait_raises_the_request_again() {
        let mut s = SimulcastSelector::new(3);
        s.set_limits(limits(2));
        let mut raised = Vec::new();
        for seq in 0..200u16 {
            assert_eq!(s.choose(0, seq, false), StreamChoice::Drop);
            if s.keyframe_requests().take() {
                raised.push(seq);
            }
        }
        let every = crate::RETRY_AFTER_PACKETS as u16;
        assert_eq!(raised, [0, every, 2 * every, 3 * every]);
        assert_eq!(s.requested_stream(), Some(2));
        assert_eq!(s.choose(2, 200, true), StreamChoice::SwitchTo);
        for seq in 201..400u16 {
            s.choose(2, seq, false);
        }
        assert!(!s.keyframe_requests().take(), "no request once switched");
    }

    /// Found with a real browser: a participant joining a room aimed at the top stream
    /// before its first allocation, which then picked a lower one; that stream's keyframe
    /// was asked for only when the wait for the top one was retried, a second later.
    #[test]
    fn a_new_target_while_waiting_is_asked_for_at_once() {
        let mut s = SimulcastSelector::new(3);
        s.set_limits(limits(2));
        assert_eq!(s.choose(0, 1, false), StreamChoice::Drop);
        assert!(s.keyframe_requests().take());
        assert_eq!(s.requested_stream(), Some(2));
        s.set_limits(limits(1));
        assert_eq!(s.choose(0, 2, false), StreamChoice::Drop);
        assert!(
            s.keyframe_requests().take(),
            "the new stream's keyframe asked for"
        );
        assert_eq!(s.requested_stream(), Some(1));
        assert_eq!(s.choose(2, 3, false), StreamChoice::Drop);
        assert!(!s.keyframe_requests().take(), "once per wait");
        assert_eq!(s.choose(1, 4, true), StreamChoice::SwitchTo);
    }

    #[test]
    fn falls_back_when_the_publisher_stops_a_stream() {
        let mut s = SimulcastSelector::new(3);
        assert_eq!(s.choose(2, 112, true), StreamChoice::SwitchTo);
        s.set_active_streams(0b011);
        assert_eq!(s.choose(1, 113, false), StreamChoice::Drop);
        assert_eq!(s.current(), None, "the stopped stream is left at once");
        assert_eq!(s.requested_stream(), Some(1));
        assert_eq!(s.choose(1, 114, true), StreamChoice::SwitchTo);
        assert_eq!(s.current_layer(2), Some(Layer::new(1, 2)));
    }

    #[test]
    fn a_keyframe_arriving_after_later_packets_of_its_stream_is_not_a_switch_point() {
        let mut s = SimulcastSelector::new(2);
        assert_eq!(
            s.choose(1, 11, false),
            StreamChoice::Drop,
            "reordered ahead of the keyframe"
        );
        assert_eq!(s.choose(1, 10, true), StreamChoice::Drop);
        assert_eq!(s.choose(1, 12, false), StreamChoice::Drop);
        assert_eq!(s.choose(1, 20, true), StreamChoice::SwitchTo);
    }

    #[test]
    fn a_switch_down_keeps_the_current_streams_base_layer_until_the_keyframe() {
        let mut s = SimulcastSelector::new(3);
        s.set_limits(limits(2));
        assert_eq!(s.choose(2, 1, true), StreamChoice::SwitchTo);
        assert_eq!(s.stream_limits().effective(), Layer::new(u8::MAX, u8::MAX));
        s.set_limits(limits(1));
        assert_eq!(s.choose(2, 2, false), StreamChoice::Forward);
        assert_eq!(s.stream_limits().effective(), Layer::new(u8::MAX, 0));
        assert_eq!(s.choose(1, 3, true), StreamChoice::SwitchTo);
        assert_eq!(s.stream_limits().effective(), Layer::new(u8::MAX, u8::MAX));
        // Going up waits at the current stream's full rate.
        s.set_limits(limits(2));
        assert_eq!(s.choose(1, 4, false), StreamChoice::Forward);
        assert_eq!(s.stream_limits().effective(), Layer::new(u8::MAX, u8::MAX));
    }

    #[test]
    fn temporal_limits_pass_through_to_the_stream() {
        let mut s = SimulcastSelector::new(2);
        s.set_limits(LayerLimits {
            target: Layer::new(1, 1),
            max: Layer::new(3, 2),
        });
        let inner = s.stream_limits();
        assert_eq!(inner.effective(), Layer::new(u8::MAX, 1));
    }
}
