//! What the node tells of one viewer session: the bandwidth estimate it holds for it and, per
//! subscription, the layer it is sent, the layer allocation capped it at, the most it asked
//! for, and what it was sent. One shape for `/metrics` (every viewer) and for the JSON a
//! `GET` on the viewer's resource answers with.

use rtp_ext::codec::{Codec, MediaKind};
use selector::Layer;
use serde::Serialize;

use super::peer::PeerId;

/// A viewer session's state, as `GET /whep/{room}/{id}` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ViewerStats {
    /// The session, a label of its `/metrics` series; left out of the JSON, whose resource
    /// URL names it already.
    #[serde(skip)]
    pub session: PeerId,
    /// Its room, likewise.
    #[serde(skip)]
    pub room: String,
    /// The latest estimate of what the path to the viewer carries, bits/s: from its REMB or
    /// its transport-wide CC feedback. None until the first.
    pub estimate_bps: Option<u64>,
    /// One per subscription (a section waiting for a publisher has none yet).
    pub tracks: Vec<TrackStats>,
}

/// One subscription of a viewer. The layers are video's: an audio track has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TrackStats {
    /// Audio or video: `"audio"` or `"video"` in JSON.
    #[serde(serialize_with = "kind_name")]
    pub kind: MediaKind,
    /// The codec it is sent in, by its SDP encoding name.
    #[serde(serialize_with = "codec_name")]
    pub codec: Codec,
    /// What it is sent now; None while nothing decodable is (waiting for a keyframe).
    pub layer: Option<LayerView>,
    /// The most allocation lets it be sent to fit the estimate; None before allocation ran
    /// for this subscription (no estimate yet).
    pub allocated: Option<LayerView>,
    /// The most it may be sent: what the viewer asked for, capped by what its negotiation
    /// allows (AV1 without the Dependency Descriptor: the base spatial layer).
    pub ceiling: Option<Ceiling>,
    /// Sent on this subscription, retransmissions and probes included: a counter, so its
    /// rate over time is the bitrate the viewer is sent.
    pub packets_sent: u64,
    /// The bytes of those packets, headers included.
    pub bytes_sent: u64,
}

/// A layer as JSON shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LayerView {
    /// The spatial layer (simulcast stream or SVC spatial layer), from 0.
    pub spatial: u8,
    /// The temporal layer, from 0.
    pub temporal: u8,
}

impl From<Layer> for LayerView {
    fn from(layer: Layer) -> Self {
        Self {
            spatial: layer.spatial,
            temporal: layer.temporal,
        }
    }
}

/// A ceiling per axis; None on an axis the viewer left open (the best available).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Ceiling {
    /// The highest spatial layer it may be sent.
    pub spatial: Option<u8>,
    /// The highest temporal layer it may be sent.
    pub temporal: Option<u8>,
}

impl From<Layer> for Ceiling {
    /// [`Layer::MAX`]'s axes (`u8::MAX`) are "take everything": no codec has that many layers.
    fn from(layer: Layer) -> Self {
        let open = |n: u8| (n != u8::MAX).then_some(n);
        Self {
            spatial: open(layer.spatial),
            temporal: open(layer.temporal),
        }
    }
}

/// A media kind as `/metrics` labels and the JSON name it.
pub fn kind_label(kind: MediaKind) -> &'static str {
    match kind {
        MediaKind::Audio => "audio",
        MediaKind::Video => "video",
    }
}

/// Serializes a media kind by its [`kind_label`].
pub fn kind_name<S: serde::Serializer>(kind: &MediaKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(kind_label(*kind))
}

/// Serializes a codec by its SDP encoding name (`VP8`, `AV1`, `opus`).
pub fn codec_name<S: serde::Serializer>(codec: &Codec, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(codec.encoding_name())
}

/// Reads a media kind back from its [`kind_label`].
pub fn kind_by_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<MediaKind, D::Error> {
    let name = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
    [MediaKind::Audio, MediaKind::Video]
        .into_iter()
        .find(|&kind| kind_label(kind) == name)
        .ok_or_else(|| serde::de::Error::custom("not a media kind"))
}

/// Reads a codec back from its SDP encoding name.
pub fn codec_by_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Codec, D::Error> {
    let name = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
    Codec::from_encoding_name(&name).ok_or_else(|| serde::de::Error::custom("not a codec"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_names_kinds_codecs_and_open_axes() {
        let stats = ViewerStats {
            session: PeerId(7),
            room: "room".into(),
            estimate_bps: Some(800_000),
            tracks: vec![TrackStats {
                kind: MediaKind::Video,
                codec: Codec::Av1,
                layer: Some(Layer::new(1, 2).into()),
                allocated: None,
                ceiling: Some(Layer::new(2, u8::MAX).into()),
                packets_sent: 3,
                bytes_sent: 3000,
            }],
        };
        let json = serde_json::to_value(&stats).expect("serializes");
        assert_eq!(
            json,
            serde_json::json!({
                "estimate_bps": 800_000,
                "tracks": [{
                    "kind": "video",
                    "codec": "AV1",
                    "layer": {"spatial": 1, "temporal": 2},
                    "allocated": null,
                    "ceiling": {"spatial": 2, "temporal": null},
                    "packets_sent": 3,
                    "bytes_sent": 3000,
                }],
            })
        );
    }
}
