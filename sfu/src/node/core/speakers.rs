//! Who speaks in each room. The dominant speaker is picked from each publisher's audio level
//! (RFC 6464, smoothed by the engine) with the hysteresis of [`Dominant`]. It is told to the
//! room's participants and its video gets the first share of every viewer's estimate. With a
//! limit set, while more publishers speak at once than the limit, only the loudest are
//! forwarded.

use std::time::{Duration, Instant};

use rtp_ext::codec::MediaKind;

use super::NodeCore;
use crate::engine::TrackId;
use crate::node::dominant::{Dominant, SPEAKING};
use crate::node::peer::PeerId;
use crate::node::session_events::SessionEvent;

/// How often the rooms' speakers are looked at.
pub const SPEAKER_INTERVAL: Duration = Duration::from_millis(200);

/// A room's speaker among the node's publishers, and how it was picked.
pub(super) type Speakers = Dominant<PeerId>;

impl NodeCore {
    /// Looks at every room's speakers, if it is time to.
    pub(super) fn check_speakers(&mut self, now: Instant) {
        if self.next_speakers.is_some_and(|at| at > now) {
            return;
        }
        self.next_speakers = Some(now + SPEAKER_INTERVAL);
        let rooms: Vec<String> = self.rooms.keys().cloned().collect();
        for room in rooms {
            let levels = self.loudness(&room, now);
            self.pick_speaker(&room, &levels, now);
            if let Some(limit) = self.loudest_speakers {
                self.forward_loudest(&levels, limit);
            }
        }
    }

    /// Each publisher of the room with an audio track: its loudest audio track's loudness,
    /// and its audio tracks.
    pub(super) fn loudness(&self, room: &str, now: Instant) -> Vec<(PeerId, f32, Vec<TrackId>)> {
        let Some(members) = self.rooms.get(room) else {
            return Vec::new();
        };
        members
            .publishers
            .iter()
            .filter_map(|&id| {
                let audio: Vec<TrackId> = self
                    .tracks_of(id)
                    .into_iter()
                    .filter(|&t| self.track_kind(t) == Some(MediaKind::Audio))
                    .collect();
                let loudest = audio
                    .iter()
                    .filter_map(|&t| self.router.speech_level(t, now))
                    .fold(None, |max: Option<f32>, l| {
                        Some(max.map_or(l, |m| m.max(l)))
                    })?;
                Some((id, loudest, audio))
            })
            .collect()
    }

    fn pick_speaker(&mut self, room: &str, levels: &[(PeerId, f32, Vec<TrackId>)], now: Instant) {
        let Some(speakers) = self.rooms.get_mut(room).map(|r| &mut r.speakers) else {
            return;
        };
        let levels: Vec<(PeerId, f32)> = levels.iter().map(|&(id, l, _)| (id, l)).collect();
        let previous = speakers.current;
        if let Some(id) = speakers.pick(&levels, now) {
            self.announce_speaker(room, previous, id);
        }
    }

    /// The room's participants hear of the new speaker; its video is climbed first.
    fn announce_speaker(&mut self, room: &str, previous: Option<PeerId>, id: PeerId) {
        for (peer, priority) in previous.into_iter().map(|p| (p, false)).chain([(id, true)]) {
            for track in self.tracks_of(peer) {
                if self.track_kind(track) == Some(MediaKind::Video) {
                    // A track of the room's own publisher: known to the router.
                    let _ = self.router.set_priority(track, priority);
                }
            }
        }
        let Some(public) = self
            .peers
            .get(&id)
            .and_then(|p| p.identity.as_ref())
            .map(|i| i.public)
        else {
            return;
        };
        let Some(members) = self.rooms.get_mut(room) else {
            return;
        };
        members.speaker = Some(public);
        tracing::debug!(room, speaker = %public, "dominant speaker");
        if members.followed.is_some() {
            // A clustered room's speaker is its home's to decide: this one is the node's
            // candidate.
            return;
        }
        let event = SessionEvent::DominantSpeaker {
            participant: public,
        };
        let Some(members) = self.rooms.get(room) else {
            return;
        };
        for &to in &members.participants {
            self.session_events.push_back((to, event.clone()));
        }
    }

    /// While more publishers speak than `limit`, only the `limit` loudest are forwarded.
    fn forward_loudest(&mut self, levels: &[(PeerId, f32, Vec<TrackId>)], limit: usize) {
        let mut speaking: Vec<(f32, &[TrackId])> = levels
            .iter()
            .filter(|&&(_, l, _)| l >= SPEAKING)
            .map(|(_, l, tracks)| (*l, tracks.as_slice()))
            .collect();
        speaking.sort_by(|a, b| b.0.total_cmp(&a.0));
        let crowded = speaking.len() > limit;
        for (_, loudness, tracks) in levels {
            let rank = speaking
                .iter()
                .position(|(l, t)| *l == *loudness && std::ptr::eq(*t, tracks.as_slice()));
            let forwarded = !crowded || rank.is_some_and(|r| r < limit);
            for &track in tracks {
                // The room's own tracks: known to the router.
                let _ = self.router.set_forwarded(track, forwarded);
            }
        }
    }

    fn track_kind(&self, track: TrackId) -> Option<MediaKind> {
        Some(self.router.receiver_config(track)?.codec.kind())
    }
}
