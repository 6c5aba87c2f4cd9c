//! A WHEP offer served in one turn of the media loop: the codecs of the publisher watched,
//! the negotiation against them and the viewer's admission happen together, so the
//! publisher cannot leave (or another take its place) between the codecs read and the
//! viewer added. Parsing the offer and writing the answer stay outside the loop.

use std::collections::HashMap;
use std::time::Instant;

use rtp_ext::codec::MediaKind;
use selector::Layer;

use super::SignalError;
use crate::node::core::NodeCore;
use crate::node::peer::{Join, PeerId, Viewer, ViewerCodec, ViewerMedia};
use crate::node::sdp::{self, Offer, ViewedMedia, ViewerPlan};

/// What the loop needs to add a viewer: its join, its parsed offer, the layer it asks for
/// and the participant it watches, if it names one.
#[derive(Debug)]
pub struct WatchRequest {
    /// The session's room, credentials, owner and client.
    pub join: Join,
    /// The viewer's offer, read but not negotiated: that needs the publisher's codecs, which only
    /// the loop knows.
    pub offer: Offer,
    /// The layer asked for in the query string (the best when left out).
    pub target: Layer,
    /// The participant it watches, by name; `None`: the room's first publisher.
    pub source: Option<String>,
}

/// A viewer added: its id, the plan its answer follows, and per accepted section (by mid)
/// the SSRC and RTX SSRC we send it on.
#[derive(Debug)]
pub struct Watched {
    /// The new session.
    pub id: PeerId,
    /// What the answer accepts in each of the offer's sections.
    pub plan: ViewerPlan,
    /// Per accepted section (by mid), the SSRC and RTX SSRC the node sends it on.
    pub sources: HashMap<String, (u32, u32)>,
}

/// Negotiates the offer against what the watched publisher sends now and adds the viewer.
pub fn watch(
    core: &mut NodeCore,
    now: Instant,
    request: WatchRequest,
) -> Result<Watched, SignalError> {
    let WatchRequest {
        join,
        offer,
        target,
        source,
    } = request;
    let codecs = core.room_codecs(&join.room, source.as_deref())?;
    let plan = sdp::negotiate_viewer(&offer, &codecs)?;
    let mut viewer = Viewer {
        video: None,
        audio: None,
        target,
        source,
    };
    let mut sources = HashMap::new();
    for media in plan.sections.iter().filter_map(|s| s.accepted()) {
        let slot = match media.kind {
            MediaKind::Audio => &mut viewer.audio,
            MediaKind::Video => &mut viewer.video,
        };
        if slot.is_none() {
            let receiving = viewer_media(media, plan.extmap_allow_mixed);
            sources.insert(media.mid.clone(), (receiving.ssrc, receiving.rtx_ssrc));
            *slot = Some(receiving);
        }
    }
    let id = core.add_viewer(now, join, viewer)?;
    Ok(Watched { id, plan, sources })
}

/// What we send on a viewer's accepted section: fresh SSRCs and the codecs it takes.
pub(super) fn viewer_media(media: &ViewedMedia, extmap_allow_mixed: bool) -> ViewerMedia {
    ViewerMedia {
        ssrc: rand::random(),
        rtx_ssrc: rand::random(),
        codecs: media
            .codecs
            .iter()
            .map(|c| ViewerCodec {
                codec: c.codec,
                payload_type: c.payload_type,
                rtx_payload_type: c.rtx_payload_type,
                fmtp: c.fmtp.clone(),
            })
            .collect(),
        dd_ext_id: media.dependency_descriptor_id,
        two_byte_allowed: extmap_allow_mixed,
        transport_cc_ext_id: media
            .transport_cc_id
            .filter(|_| media.transport_cc_feedback),
        down_track: None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::engine::RouterConfig;
    use crate::node::peer::IceCredentials;

    fn request(source: Option<&str>) -> WatchRequest {
        let ice = IceCredentials {
            local_ufrag: "ufrag".into(),
            local_pwd: "a-password-of-24-chars!!".into(),
        };
        WatchRequest {
            join: Join::new("room", ice),
            offer: sdp::parse_offer(include_str!("../sdp/fixtures/viewer_recvonly.sdp"))
                .expect("the fixture parses"),
            target: Layer::MAX,
            source: source.map(str::to_owned),
        }
    }

    #[test]
    fn a_viewer_is_added_with_the_plan_its_answer_follows() {
        let mut core = NodeCore::new(RouterConfig::default(), Duration::from_secs(3));
        let watched = watch(&mut core, Instant::now(), request(None)).expect("watches");
        assert!(core.peer(watched.id).is_some(), "added in the same turn");
        assert_eq!(core.snapshot().viewers, 1);
        let accepted = watched.plan.sections.iter().filter_map(|s| s.accepted());
        for media in accepted {
            assert!(watched.sources.contains_key(&media.mid), "{}", media.mid);
        }
    }

    #[test]
    fn a_source_not_in_the_room_adds_no_viewer() {
        let mut core = NodeCore::new(RouterConfig::default(), Duration::from_secs(3));
        let refused = watch(&mut core, Instant::now(), request(Some("nobody")));
        assert!(
            matches!(refused, Err(SignalError::Missing(_))),
            "{refused:?}"
        );
        assert_eq!(core.snapshot().viewers, 0);
    }
}
