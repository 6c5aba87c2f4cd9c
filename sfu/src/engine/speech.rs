//! How loud a published audio track is, from the audio level its publisher writes in each
//! packet (RFC 6464: the level in -dBov, 0 the loudest, 127 silence): smoothed over about a
//! third of a second, so a word is speech and a click is not, and decaying to silence when
//! packets stop (a muted or discontinuous sender).

use std::time::{Duration, Instant};

/// The smoothing's time constant.
const TIME_CONSTANT: Duration = Duration::from_millis(300);
/// The level RFC 6464 calls silence.
const SILENCE_DBOV: u8 = 127;
/// Packets come every 20 ms or so; a track silent for longer than this fades.
const GRACE: Duration = Duration::from_millis(100);
/// The time a first packet's level is weighed over, as if silence came before it.
const PACKET_TIME: Duration = Duration::from_millis(20);

/// A track's smoothed loudness, in dB above silence (0 silent, 127 as loud as it gets).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SpeechLevel {
    loudness: f32,
    at: Option<Instant>,
}

impl SpeechLevel {
    /// One packet's level (its -dBov value), at `now`.
    pub fn on_level(&mut self, now: Instant, level_dbov: u8) {
        let loudness = f32::from(SILENCE_DBOV - level_dbov.min(SILENCE_DBOV));
        let since = self.since(now);
        self.loudness = match self.at {
            Some(_) => self.loudness + (loudness - self.loudness) * weight(since),
            None => loudness * weight(PACKET_TIME),
        };
        self.at = Some(now);
    }

    /// The loudness at `now`: what the packets said, fading toward silence once none has
    /// come for a while.
    pub fn at(&self, now: Instant) -> f32 {
        let silent = self.since(now).saturating_sub(GRACE);
        self.loudness * (1.0 - weight(silent))
    }

    fn since(&self, now: Instant) -> Duration {
        self.at
            .map_or(Duration::ZERO, |at| now.saturating_duration_since(at))
    }
}

/// How much a new reading counts after `elapsed`: an exponential average's weight.
fn weight(elapsed: Duration) -> f32 {
    1.0 - (-elapsed.as_secs_f32() / TIME_CONSTANT.as_secs_f32()).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A level every 20 ms (an Opus packet's time) for `span`.
    fn feed(level: &mut SpeechLevel, from: Instant, span: Duration, dbov: u8) -> Instant {
        let mut now = from;
        while now < from + span {
            now += Duration::from_millis(20);
            level.on_level(now, dbov);
        }
        now
    }

    #[test]
    fn speech_rises_within_a_second_and_a_click_stays_low() {
        let start = Instant::now();
        let mut level = SpeechLevel::default();
        let now = feed(&mut level, start, Duration::from_millis(600), 30);
        assert!(level.at(now) > 80.0, "{}", level.at(now));
        let now = feed(&mut level, now, Duration::from_secs(1), 30);
        assert!((level.at(now) - 97.0).abs() < 1.0, "{}", level.at(now));
        let mut click = SpeechLevel::default();
        let now = feed(&mut click, start, Duration::from_millis(20), 10);
        let now = feed(&mut click, now, Duration::from_millis(500), 127);
        assert!(click.at(now) < 10.0, "{}", click.at(now));
    }

    #[test]
    fn a_sender_that_stops_fades_to_silence() {
        let start = Instant::now();
        let mut level = SpeechLevel::default();
        let now = feed(&mut level, start, Duration::from_secs(1), 20);
        let loud = level.at(now);
        assert_eq!(level.at(now + GRACE), loud, "a packet late is not silence");
        assert!(level.at(now + GRACE + Duration::from_millis(300)) < loud * 0.4);
        assert!(level.at(now + Duration::from_secs(2)) < 1.0);
    }
}
