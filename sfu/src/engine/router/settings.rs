//! What the host changes on a running subscription or track: the layers a subscription may
//! forward and whether it is paused; the order a track's layers are climbed in, whether its
//! video comes first, and whether its packets go to its subscribers at all.

use std::time::Instant;

use selector::LayerLimits;

use super::{Published, Router, RouterError};
use crate::engine::allocation::LayerOrder;
use crate::engine::track::{DownTrackId, TrackId};

impl Router {
    /// Sets the layers a subscription may forward (a ceiling; the switch happens at the next switch
    /// point).
    pub fn set_limits(&mut self, id: DownTrackId, limits: LayerLimits) -> Result<(), RouterError> {
        let down_track = self
            .down_tracks
            .get(&id)
            .ok_or(RouterError::UnknownDownTrack)?;
        down_track.set_limits(limits);
        let transport = down_track.transport();
        self.on_limits_changed(transport);
        Ok(())
    }

    /// Pauses a subscription (nothing forwarded) or resumes it (at the next switch point, with a
    /// keyframe request through the throttle).
    pub fn set_muted(&mut self, id: DownTrackId, muted: bool) -> Result<(), RouterError> {
        self.down_tracks
            .get(&id)
            .ok_or(RouterError::UnknownDownTrack)?
            .set_muted(muted);
        Ok(())
    }

    /// The order in which allocation climbs a track's layers for viewers short of bandwidth
    /// (`None`: the default, every temporal layer of the base spatial layer first, then each
    /// spatial layer at full frame rate).
    pub fn set_layer_order(
        &mut self,
        track: TrackId,
        order: Option<LayerOrder>,
    ) -> Result<(), RouterError> {
        self.published_mut(track)?.layer_order = order;
        Ok(())
    }

    /// Gives a track's video the first share of its viewers' estimates (the dominant
    /// speaker's): allocation climbs it to the top before the others leave their lowest step.
    pub fn set_priority(&mut self, track: TrackId, priority: bool) -> Result<(), RouterError> {
        self.published_mut(track)?.priority = priority;
        Ok(())
    }

    /// Whether a track's packets go to its subscribers: a host that forwards only the
    /// loudest audio tracks holds the others back. Held back, a track is still received,
    /// repaired and reported, and its speech level kept.
    pub fn set_forwarded(&mut self, track: TrackId, forwarded: bool) -> Result<(), RouterError> {
        self.published_mut(track)?.forwarded = forwarded;
        Ok(())
    }

    /// Asks the publisher of `track` for a keyframe of the stream sent under `ssrc` (its media
    /// or RTX SSRC; the first stream for any other), through the track's throttle as a
    /// subscriber's PLI is: the request of a subscriber beyond this router (a node the track
    /// is relayed to).
    pub fn request_keyframe_of(
        &mut self,
        now: Instant,
        track: TrackId,
        ssrc: u32,
    ) -> Result<(), RouterError> {
        let published = self.published_mut(track)?;
        let stream = published
            .receiver
            .config()
            .streams
            .iter()
            .position(|s| s.ssrc == ssrc || s.rtx_ssrc == Some(ssrc))
            .unwrap_or(0);
        published
            .keyframes
            .request(now, u8::try_from(stream).unwrap_or(0));
        Ok(())
    }

    /// A published track, to set what the host chose for it.
    fn published_mut(&mut self, track: TrackId) -> Result<&mut Published, RouterError> {
        self.tracks.get_mut(&track).ok_or(RouterError::UnknownTrack)
    }
}
