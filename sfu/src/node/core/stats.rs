//! A receiving session's estimate and subscriptions (a WHEP viewer's, or a conference
//! participant's), read from the session and the engine for `/metrics` and the `GET` on a
//! viewer's resource.

use rtp_ext::codec::{Codec, MediaKind};
use selector::LayerLimits;

use super::conference::subscription_limits;
use super::NodeCore;
use crate::node::peer::{Peer, PeerId, Role, ViewerMedia};
use crate::node::stats::{TrackStats, ViewerStats};

impl NodeCore {
    /// A receiving session's stats; None for a publisher or an unknown session.
    pub fn viewer_stats(&self, id: PeerId) -> Option<ViewerStats> {
        let peer = self.peers.get(&id)?;
        let tracks = match &peer.role {
            Role::Viewer(viewer) => [&viewer.video, &viewer.audio]
                .into_iter()
                .flatten()
                .filter_map(|media| {
                    self.track_stats(peer, media, |codec| viewer.limits(codec, media.dd_ext_id))
                })
                .collect(),
            Role::Participant(participant) => participant
                .sections
                .iter()
                .filter_map(|section| {
                    let choice = section
                        .source
                        .and_then(|t| participant.choices.get(&t).copied())
                        .unwrap_or_default();
                    let dd = section.media.dd_ext_id;
                    self.track_stats(peer, &section.media, |codec| {
                        subscription_limits(choice, Some(codec), dd)
                    })
                })
                .collect(),
            Role::Publisher(_) => return None,
        };
        Some(ViewerStats {
            session: id,
            room: peer.room.clone(),
            estimate_bps: peer.estimate_bps,
            tracks,
        })
    }

    /// Every viewer's stats, by room and session, so `/metrics` lists them in a stable order.
    pub(super) fn all_viewer_stats(&self) -> Vec<ViewerStats> {
        let mut all: Vec<ViewerStats> = self
            .peers
            .keys()
            .filter_map(|&id| self.viewer_stats(id))
            .collect();
        all.sort_unstable_by(|a, b| (&a.room, a.session).cmp(&(&b.room, b.session)));
        all
    }

    /// One subscription's stats; `limits` gives its limits for the track's codec.
    fn track_stats(
        &self,
        peer: &Peer,
        media: &ViewerMedia,
        limits: impl Fn(Codec) -> LayerLimits,
    ) -> Option<TrackStats> {
        let down_track = media.down_track?;
        let info = self.router.down_track_info(down_track)?;
        let codec = self.router.receiver_config(info.track)?.codec;
        let sent = self
            .router
            .down_track_counters(down_track)
            .unwrap_or_default();
        let video = codec.kind() == MediaKind::Video;
        let allocated = peer
            .allocated
            .filter(|&(allocated_to, _)| allocated_to == down_track)
            .map(|(_, layer)| layer.into());
        Some(TrackStats {
            kind: codec.kind(),
            codec,
            layer: info.layer.filter(|_| video).map(Into::into),
            allocated,
            ceiling: video.then(|| limits(codec).effective().into()),
            packets_sent: sent.packets,
            bytes_sent: sent.bytes,
        })
    }
}
