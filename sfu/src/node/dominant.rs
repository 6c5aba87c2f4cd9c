//! The dominant speaker's hysteresis, shared by a node's rooms (over its publishers' audio
//! levels) and a clustered room's home (over the candidates its nodes report): a challenger
//! must be louder than a speaking speaker by a margin for a second, or speak for a third of
//! one while the speaker is quiet, so the speaker does not flicker between two people talking
//! over each other.

use std::time::{Duration, Instant};

/// Loudness (dB above silence) from which a track counts as speaking: -60 dBov.
pub const SPEAKING: f32 = 67.0;
/// A challenger must be this much louder than a speaking speaker ...
const MARGIN_DB: f32 = 6.0;
/// ... for this long ...
const TAKE_OVER: Duration = Duration::from_secs(1);
/// ... or speak this long while the speaker is quiet.
const TAKE_QUIET: Duration = Duration::from_millis(300);

/// Who speaks, and who is challenging it since when.
#[derive(Debug, Clone, PartialEq)]
pub struct Dominant<Id> {
    /// The speaker, once anybody has spoken.
    pub current: Option<Id>,
    challenger: Option<(Id, Instant)>,
}

impl<Id> Default for Dominant<Id> {
    fn default() -> Self {
        Self {
            current: None,
            challenger: None,
        }
    }
}

impl<Id: Copy + PartialEq> Dominant<Id> {
    /// Looks at the loudness of everyone who may speak (anyone missing counts as quiet);
    /// the new speaker when one takes over now.
    pub fn pick(&mut self, levels: &[(Id, f32)], now: Instant) -> Option<Id> {
        let level = |id: Id| {
            levels
                .iter()
                .find(|(p, _)| *p == id)
                .map_or(0.0, |&(_, l)| l)
        };
        let current = self.current.map_or(0.0, level);
        let quiet = current < SPEAKING;
        let qualifies = |l: f32| l >= SPEAKING && (quiet || l >= current + MARGIN_DB);
        let loudest = levels
            .iter()
            .filter(|&&(id, l)| Some(id) != self.current && qualifies(l))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|&(id, _)| id);
        // The challenger keeps its place while it still qualifies and nobody is louder than
        // it by the margin: two people as loud as each other do not restart each other's wait
        // whenever one is a little louder at a look.
        let held = self
            .challenger
            .map(|(id, _)| id)
            .filter(|&id| qualifies(level(id)));
        let challenger = match (held, loudest) {
            (Some(held), Some(id)) if level(id) < level(held) + MARGIN_DB => Some(held),
            (_, Some(id)) => Some(id),
            (_, None) => None,
        };
        let Some(id) = challenger else {
            self.challenger = None;
            return None;
        };
        let since = match self.challenger {
            Some((same, since)) if same == id => since,
            _ => {
                self.challenger = Some((id, now));
                now
            }
        };
        let needed = if quiet { TAKE_QUIET } else { TAKE_OVER };
        if now.saturating_duration_since(since) < needed {
            return None;
        }
        self.current = Some(id);
        self.challenger = None;
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_louder_challenger_takes_over_after_a_second_a_quiet_speaker_sooner() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let mut dominant = Dominant::default();
        assert_eq!(dominant.pick(&[(1, 80.0)], at(0)), None);
        assert_eq!(dominant.pick(&[(1, 80.0)], at(200)), None, "not yet 300 ms");
        assert_eq!(dominant.pick(&[(1, 80.0)], at(300)), Some(1));
        let both = [(1, 80.0), (2, 84.0)];
        assert_eq!(dominant.pick(&both, at(400)), None, "within the margin");
        let louder = [(1, 80.0), (2, 90.0)];
        assert_eq!(dominant.pick(&louder, at(500)), None);
        assert_eq!(dominant.pick(&louder, at(1_400)), None, "not yet a second");
        assert_eq!(dominant.pick(&louder, at(1_500)), Some(2));
        assert_eq!(dominant.current, Some(2));
        assert_eq!(
            dominant.pick(&[(1, 70.0)], at(1_600)),
            None,
            "2 is gone: quiet"
        );
        assert_eq!(dominant.pick(&[(1, 70.0)], at(1_900)), Some(1));
    }

    #[test]
    fn two_as_loud_as_each_other_do_not_restart_each_others_wait() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let mut dominant = Dominant::default();
        // The louder of the two changes at every look, by less than the margin.
        assert_eq!(dominant.pick(&[(1, 80.0), (2, 79.0)], at(0)), None);
        assert_eq!(dominant.pick(&[(1, 79.0), (2, 80.0)], at(200)), None);
        assert_eq!(dominant.pick(&[(1, 80.0), (2, 79.0)], at(300)), Some(1));
        // One clearly louder than the challenger takes its place.
        let mut dominant = Dominant::default();
        assert_eq!(dominant.pick(&[(1, 80.0), (2, 79.0)], at(0)), None);
        assert_eq!(dominant.pick(&[(1, 80.0), (2, 87.0)], at(200)), None);
        assert_eq!(
            dominant.pick(&[(1, 80.0), (2, 87.0)], at(400)),
            None,
            "2 waits anew"
        );
        assert_eq!(dominant.pick(&[(1, 80.0), (2, 87.0)], at(500)), Some(2));
    }
}
