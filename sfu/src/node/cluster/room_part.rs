//! A node's part of a clustered room, as the store carries it (JSON), and when it has changed
//! enough to be written at once rather than at the next lease refresh: whatever another node
//! shows or tells its participants (participants, names, tracks, channels, viewers, the
//! room's speaker) as soon as it changes; a layer's measured rate only with the refresh; the
//! node's speaker candidate when it is another participant, starts or stops speaking, or
//! moved by [`LEVEL_STEP_DB`] since written, which is what the home's hysteresis weighs.

use serde::{Deserialize, Serialize};

use crate::node::core::FollowedNode;
use crate::node::dominant::SPEAKING;
use crate::node::participant::ParticipantId;
use crate::node::room_view::ParticipantView;

/// A candidate's level is written again once it moved this far from the level last written:
/// half the margin by which a challenger must be louder than a speaking speaker, so that the
/// home weighs levels at most this stale.
pub const LEVEL_STEP_DB: f32 = 3.0;

/// A node's part of a room, as the store carries it (JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// Its participants and WHIP publishers, in the order they came.
    pub participants: Vec<ParticipantView>,
    /// Its WHEP viewers.
    pub viewers: usize,
    /// Its own dominant speaker and how loud it is now.
    pub candidate: Option<Candidate>,
    /// The room's dominant speaker: written by the room's home only.
    pub speaker: Option<ParticipantId>,
}

impl Part {
    /// A part as another node wrote it: its JSON, with a finite level (a level past what an
    /// `f32` holds would read as infinite, and the hysteresis would never let go of it) and
    /// at most [`MAX_PART_VIEWERS`] viewers (the room's count adds every node's).
    pub fn read(json: &[u8]) -> Result<Self, PartError> {
        let part: Self = serde_json::from_slice(json).map_err(|_| PartError::NotJson)?;
        let finite = |c: &Candidate| c.level.is_finite();
        if !part.candidate.as_ref().is_none_or(finite) {
            return Err(PartError::BadLevel);
        }
        if part.viewers > MAX_PART_VIEWERS {
            return Err(PartError::TooManyViewers);
        }
        Ok(part)
    }

    /// What node `node`, whose part this is, holds of the room for the relay to pull: its
    /// conference participants (whose data channels cross) and its named publishers with
    /// tracks.
    pub fn node(&self, node: &str) -> FollowedNode {
        let publishers = self.participants.iter().filter(|p| !p.tracks.is_empty());
        FollowedNode {
            node: node.to_owned(),
            participants: self.participants.iter().any(|p| p.kind == "participant"),
            publishers: publishers.map(|p| p.name.clone()).collect(),
        }
    }

    /// Whether this part differs from `written`, the last one written, in what the room's
    /// other nodes must learn at once (see the module).
    pub fn changed_from(&self, written: &Self) -> bool {
        self.viewers != written.viewers
            || self.speaker != written.speaker
            || moved(self.candidate, written.candidate)
            || without_rates(&self.participants) != without_rates(&written.participants)
    }
}

/// Whether a candidate changed as the home's hysteresis sees it.
fn moved(now: Option<Candidate>, then: Option<Candidate>) -> bool {
    match (now, then) {
        (Some(now), Some(then)) => {
            now.participant != then.participant
                || (now.level >= SPEAKING) != (then.level >= SPEAKING)
                || (now.level - then.level).abs() >= LEVEL_STEP_DB
        }
        (now, then) => now.is_some() != then.is_some(),
    }
}

/// Participants with their layers' measured rates left out.
fn without_rates(participants: &[ParticipantView]) -> Vec<ParticipantView> {
    let mut participants = participants.to_vec();
    let layers = participants.iter_mut().flat_map(|p| &mut p.tracks);
    for layer in layers.flat_map(|t| &mut t.layers) {
        layer.bps = 0;
    }
    participants
}

/// Why another node's part was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PartError {
    /// Not a part's JSON.
    #[error("not a part's JSON")]
    NotJson,
    /// A candidate's level that is not a finite number.
    #[error("a level that is not a finite number")]
    BadLevel,
    /// More viewers than [`MAX_PART_VIEWERS`].
    #[error("more viewers than a node holds")]
    TooManyViewers,
}

/// Viewers a node's part may say it has: more than any node holds, few enough that the
/// room's count over every node's part cannot pass a `usize`.
pub const MAX_PART_VIEWERS: usize = u32::MAX as usize;

/// A node's dominant speaker, which the home weighs against the other nodes'.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// Who.
    pub participant: ParticipantId,
    /// Its loudness now, dB above silence (0: quiet).
    pub level: f32,
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest::proptest! {
        #[test]
        fn a_part_reads_back_as_written(
            people in proptest::collection::vec(
                (any::<u64>(), ".{0,16}", any::<bool>(), proptest::collection::vec(
                    (any::<u32>(), 0..8usize, 1..4usize, any::<(u8, u8, u64)>()), 0..3)),
                0..4),
            viewers in 0..1000usize,
            candidate in proptest::option::of((any::<u64>(), 0.0f32..130.0)),
            speaker in proptest::option::of(any::<u64>()),
        ) {
            use rtp_ext::codec::Codec;
            use crate::node::room_view::{ChannelView, LayerRate, TrackView};
            let codecs = ["AV1", "VP9", "VP8", "H264", "opus", "PCMU", "PCMA", "G722"];
            let participants = people.into_iter().map(|(id, name, whip, tracks)| {
                let id = ParticipantId(id);
                let tracks = tracks.into_iter().map(|(track, codec, streams, (s, t, bps))| {
                    let codec = Codec::from_encoding_name(codecs[codec]).expect("a codec");
                    TrackView {
                        id: track, participant: id, kind: codec.kind(), codec, streams,
                        layers: vec![LayerRate { spatial: s, temporal: t, bps }],
                        viewers: streams,
                    }
                });
                let channel = ChannelView {
                    participant: id, label: name.clone(), ordered: whip,
                    reliability: if whip { "max_lifetime" } else { "reliable" },
                    limit: whip.then_some(250), protocol: String::new(),
                };
                ParticipantView {
                    id, name, kind: if whip { "whip" } else { "participant" },
                    tracks: tracks.collect(), receiving: viewers, channels: vec![channel],
                }
            });
            let part = Part {
                participants: participants.collect(),
                viewers,
                candidate: candidate.map(|(id, level)| Candidate {
                    participant: ParticipantId(id), level,
                }),
                speaker: speaker.map(ParticipantId),
            };
            let json = serde_json::to_vec(&part).expect("JSON");
            prop_assert_eq!(Part::read(&json), Ok(part));
        }
    }

    #[test]
    fn a_part_tells_the_relay_of_its_participants_and_publishers_with_tracks() {
        use crate::node::room_view::TrackView;
        use rtp_ext::codec::Codec;
        let view = |name: &str, kind, tracks: usize| ParticipantView {
            id: ParticipantId(name.len() as u64),
            name: name.into(),
            kind,
            tracks: (0..tracks)
                .map(|id| TrackView {
                    id: id as u32,
                    participant: ParticipantId(1),
                    kind: Codec::Opus.kind(),
                    codec: Codec::Opus,
                    streams: 1,
                    layers: Vec::new(),
                    viewers: 0,
                })
                .collect(),
            receiving: 0,
            channels: Vec::new(),
        };
        let mut part = Part {
            participants: vec![view("cam", "whip", 1), view("reader", "participant", 0)],
            viewers: 0,
            candidate: None,
            speaker: None,
        };
        let node = part.node("b");
        assert_eq!((node.node.as_str(), node.participants), ("b", true));
        assert_eq!(node.publishers, ["cam"], "the reader publishes nothing");
        part.participants.pop();
        assert!(
            !part.node("b").participants,
            "a WHIP publisher has no channels"
        );
    }

    #[test]
    fn a_part_that_is_not_one_is_refused() {
        assert_eq!(Part::read(b"{}"), Err(PartError::NotJson));
        let infinite = br#"{"participants":[],"viewers":0,"speaker":null,
            "candidate":{"participant":"0000000000000001","level":1e39}}"#;
        assert_eq!(Part::read(infinite), Err(PartError::BadLevel));
        let bad_id = br#"{"participants":[],"viewers":0,"candidate":null,"speaker":"12"}"#;
        assert_eq!(Part::read(bad_id), Err(PartError::NotJson));
        let crowd = format!(
            r#"{{"participants":[],"viewers":{},"candidate":null,"speaker":null}}"#,
            MAX_PART_VIEWERS + 1
        );
        assert_eq!(Part::read(crowd.as_bytes()), Err(PartError::TooManyViewers));
    }

    #[test]
    fn a_rate_or_a_small_move_of_the_candidate_is_no_change() {
        use crate::node::room_view::{LayerRate, TrackView};
        use rtp_ext::codec::Codec;
        let id = ParticipantId(7);
        let layer = |bps| LayerRate {
            spatial: 0,
            temporal: 0,
            bps,
        };
        let track = TrackView {
            id: 1,
            participant: id,
            kind: Codec::Vp8.kind(),
            codec: Codec::Vp8,
            streams: 1,
            layers: vec![layer(100_000)],
            viewers: 1,
        };
        let written = Part {
            participants: vec![ParticipantView {
                id,
                name: "ada".into(),
                kind: "participant",
                tracks: vec![track],
                receiving: 0,
                channels: Vec::new(),
            }],
            viewers: 2,
            candidate: Some(Candidate {
                participant: id,
                level: 70.0,
            }),
            speaker: None,
        };
        let with = |change: &dyn Fn(&mut Part)| {
            let mut part = written.clone();
            change(&mut part);
            part.changed_from(&written)
        };
        assert!(!with(
            &|p| p.participants[0].tracks[0].layers[0] = layer(250_000)
        ));
        assert!(!with(&|p| p.candidate = Some(Candidate {
            participant: id,
            level: 72.9
        })));
        assert!(with(&|p| p.candidate = Some(Candidate {
            participant: id,
            level: 73.0
        })));
        let quiet = Candidate {
            participant: id,
            level: SPEAKING - 0.5,
        };
        assert!(with(&|p| p.candidate = Some(quiet)), "stopped speaking");
        assert!(with(&|p| p.candidate = None));
        assert!(with(&|p| p.viewers = 3));
        assert!(with(&|p| p.speaker = Some(id)));
        assert!(
            with(&|p| p.participants[0].tracks[0].layers.clear()),
            "a layer gone"
        );
        assert!(with(&|p| p.participants[0].name = "bo".into()));
    }
}
