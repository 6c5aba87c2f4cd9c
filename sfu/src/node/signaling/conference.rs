//! Conference sessions from signaling's side: a participant's offer (joining, or again to
//! renegotiate) becomes what the core needs and the core's [`Negotiated`] becomes the answer;
//! the event stream, the room's state and a participant's choice per track.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use rtp_ext::codec::MediaKind;

use super::watch::viewer_media;
use super::{publisher_of, refused, Caller, SignalError, Signaling};
use crate::node::auth::Grant;
use crate::node::core::{Negotiated, ParticipantOffer, Sending};
use crate::node::event_queue::EventReceiver;
use crate::node::participant::{Choice, NamedTrack};
use crate::node::peer::{Join, Kind, PeerId};
use crate::node::room_view::RoomView;
use crate::node::sdp::{
    self, AnswerMedia, InactiveMedia, OfferShape, ParticipantMedia, ParticipantPlan, SendSource,
    ViewedMedia,
};

/// What a join or a renegotiation answers: the session, the answer, its version (the `ETag`
/// the next offer's `If-Match` names) and why each section not served is not.
#[derive(Debug, Clone)]
pub struct Answered {
    /// The session.
    pub id: PeerId,
    /// The answer, `application/sdp`.
    pub answer: String,
    /// The answer's version: its `ETag`, which the next offer's `If-Match` names.
    pub version: u64,
    /// Why each section not served is not, for the response's `Warning` headers.
    pub refused: Vec<String>,
}

impl Signaling {
    /// A participant joins `room` with its offer, named by its token's subject or else by
    /// `name`: it publishes what it sends and receives the room's tracks in the sections it
    /// receives in.
    pub async fn join_conference(
        &self,
        room: &str,
        offer: &str,
        name: Option<&str>,
        caller: Caller<'_>,
    ) -> Result<Answered, SignalError> {
        self.authorize(caller, room, Grant::Subscribe)?;
        let name = self.name(caller, name).ok_or(SignalError::BadBody(
            "a participant needs a name: ?name=, or a token with a subject",
        ))?;
        let offer = self.parse_participant_offer(offer)?;
        if let Some(relay) = self.relay() {
            relay.pull_room(room).await;
        }
        let plan = sdp::negotiate_participant(&offer)?;
        let participant = self.participant_offer(&plan, &offer, caller, room)?;
        let join = Join {
            name: Some(name),
            ..self.join(room, &offer, caller)
        };
        let negotiated = self
            .loop_of(room)?
            .ask(move |worker, now| worker.core.add_participant(now, join, participant))
            .await??;
        self.changed();
        Ok(self.answered(&plan, &negotiated, room))
    }

    /// A participant's new offer (PATCH with `application/sdp`): answered with the room as it
    /// is now. `if_match` is its `If-Match` version, if it sent one.
    pub async fn renegotiate(
        &self,
        (room, id): (&str, &str),
        text: &str,
        if_match: Option<u64>,
        caller: Caller<'_>,
    ) -> Result<Answered, SignalError> {
        let started = Instant::now();
        let resource = self.resource((Kind::Participant, room, id), caller)?;
        let session = resource.id;
        self.check_offer_rate(session)?;
        // Counted from here, whatever is wrong with the offer: reading a bad one is work too.
        self.offer_rate.spend(session, Instant::now());
        let read = match self.offer_memo.recall(session, text) {
            Some(read) => read,
            None => {
                let offer = self.parse_participant_offer(text)?;
                let plan = sdp::negotiate_participant(&offer)?;
                Arc::new((offer, plan))
            }
        };
        let (offer, plan) = &*read;
        let participant = self.participant_offer(plan, offer, caller, room)?;
        let renegotiated = self.with_session(resource, move |worker, id, now| {
            worker.core.renegotiate(now, id, if_match, participant)
        });
        let negotiated = renegotiated.await?;
        let answered = self.answered(plan, &negotiated?, room);
        self.offer_memo.keep(session, text, Arc::clone(&read));
        tracing::debug!(peer = %session, took = ?started.elapsed(), "offer answered");
        Ok(answered)
    }

    /// Refuses an offer from a session that offered its share of this second already.
    fn check_offer_rate(&self, session: PeerId) -> Result<(), SignalError> {
        self.offer_rate
            .check(session, Instant::now())
            .map_err(|too_fast| {
                self.offers_refused.fetch_add(1, Ordering::Relaxed);
                SignalError::OfferRate {
                    per_second: self.config.limits.offers_per_second,
                    retry_after: too_fast.retry_after.as_secs_f64().ceil() as u64,
                }
            })
    }

    /// A participant's event stream, each item one event on the wire.
    pub async fn events(
        &self,
        (room, id): (&str, &str),
        caller: Caller<'_>,
    ) -> Result<EventReceiver, SignalError> {
        let resource = (Kind::Participant, room, id);
        self.on_session(resource, caller, |worker, id, now| {
            worker.open_events(now, id)
        })
        .await
    }

    /// A participant's choice for one of the room's tracks.
    pub async fn choose(
        &self,
        (room, id): (&str, &str),
        track: NamedTrack,
        choice: Choice,
        caller: Caller<'_>,
    ) -> Result<(), SignalError> {
        let resource = (Kind::Participant, room, id);
        self.on_session(resource, caller, move |worker, id, _| {
            worker.core.set_choice(id, track, choice)
        })
        .await
    }

    /// The room's state, for a caller who may receive in it.
    pub async fn room_state(
        &self,
        room: &str,
        caller: Caller<'_>,
    ) -> Result<RoomView, SignalError> {
        self.authorize(caller, room, Grant::Subscribe)?;
        let name = room.to_owned();
        self.loop_of(room)?
            .ask(move |worker, now| worker.core.room_view(&name, now))
            .await?
            .ok_or_else(|| SignalError::Missing("nobody is in the room".to_owned()))
    }

    /// Parses a participant's offer within the limits of one: larger than a WHIP or WHEP
    /// offer, since it grows with the room.
    fn parse_participant_offer(&self, text: &str) -> Result<sdp::Offer, SignalError> {
        let limit = self.config.limits.sections_per_participant_offer;
        Self::offer_within(text, sdp::MAX_PARTICIPANT_SDP_LEN, limit)
    }

    /// The name a session goes by: its token's subject, or else the one it gave.
    pub(super) fn name(&self, caller: Caller<'_>, given: Option<&str>) -> Option<String> {
        self.auth
            .subject(caller.authorization)
            .or_else(|| given.map(str::to_owned))
    }

    /// What the core needs of a participant's plan. Sending sections need the publish grant
    /// and stay within the tracks an offer may publish.
    fn participant_offer(
        &self,
        plan: &ParticipantPlan,
        offer: &sdp::Offer,
        caller: Caller<'_>,
        room: &str,
    ) -> Result<ParticipantOffer, SignalError> {
        let participant = participant_offer(plan, offer)?;
        if !participant.publisher.tracks.is_empty() {
            self.authorize(caller, room, Grant::Publish)?;
        }
        self.check_tracks(participant.publisher.tracks.len())?;
        Ok(participant)
    }

    /// The answer to a participant's plan, with what the core sends in each receiving section.
    fn answered(&self, plan: &ParticipantPlan, negotiated: &Negotiated, room: &str) -> Answered {
        let params = self.answer_params(&negotiated.ice, plan.extmap_allow_mixed, Vec::new());
        Answered {
            id: negotiated.id,
            answer: participant_answer(plan, negotiated, room, params),
            version: negotiated.origin.1,
            refused: refused(negotiated.id, &plan.sections),
        }
    }
}

/// What the core needs of a participant's plan: the tracks of its sending sections, and its
/// receiving sections with fresh SSRCs and the codecs it takes.
pub fn participant_offer(
    plan: &ParticipantPlan,
    offer: &sdp::Offer,
) -> Result<ParticipantOffer, SignalError> {
    let published: Vec<&sdp::PublishedMedia> = plan
        .sections
        .iter()
        .filter_map(|s| match s.accepted()? {
            ParticipantMedia::Publish(media) => Some(media),
            _ => None,
        })
        .collect();
    let mut publisher = publisher_of(&published)?;
    publisher.codecs = published
        .iter()
        .map(|m| sdp::RoomCodec {
            codec: m.codec.codec,
            fmtp: m.codec.fmtp.clone(),
        })
        .collect();
    let receive = plan
        .sections
        .iter()
        .filter_map(|s| match s.accepted()? {
            ParticipantMedia::Receive(media) => Some((
                media.mid.clone(),
                media.kind,
                viewer_media(media, plan.extmap_allow_mixed),
            )),
            _ => None,
        })
        .collect();
    Ok(ParticipantOffer {
        publisher,
        receive,
        shape: OfferShape::of(offer),
        data: plan.data().map(|d| d.sctp),
    })
}

/// The answer to a participant's plan (`params` gives the transport; its media and origin
/// are the plan's and the core's), with what the core sends in each receiving section.
pub fn participant_answer(
    plan: &ParticipantPlan,
    negotiated: &Negotiated,
    room: &str,
    params: sdp::AnswerParams,
) -> String {
    let media = AnswerMedia::for_participant(plan, negotiated.max_message_size, |media| {
        let sending = negotiated
            .sending
            .iter()
            .find(|(mid, _)| *mid == media.mid)
            .and_then(|(_, s)| s.as_ref());
        receiving_section(media, sending, room)
    });
    sdp::build_answer(&sdp::AnswerParams {
        origin: Some(negotiated.origin),
        media,
        ..params
    })
}

/// A receiving section: sendonly with the track it carries (its codec alone, its stream
/// named after its publisher), or inactive while it carries none.
fn receiving_section(media: &ViewedMedia, sending: Option<&Sending>, room: &str) -> AnswerMedia {
    let Some(sending) = sending else {
        // Negotiation keeps a receiving section only with a codec: the first is named.
        let codec = media
            .codecs
            .first()
            .cloned()
            .map(|codec| sdp::OfferedCodec {
                rtx_payload_type: None,
                feedback: Vec::new(),
                ..codec
            });
        return AnswerMedia::Inactive {
            mid: media.mid.clone(),
            media: InactiveMedia {
                kind: media.kind,
                codec: codec.unwrap_or_else(|| placeholder_codec(media.kind)),
            },
        };
    };
    let codecs = media
        .codecs
        .iter()
        .filter(|c| c.payload_type == sending.codec.payload_type)
        .cloned()
        .collect();
    let has_rtx = sending.codec.rtx_payload_type.is_some();
    AnswerMedia::Send {
        media: ViewedMedia {
            codecs,
            ..media.clone()
        },
        source: Some(SendSource {
            ssrc: sending.ssrc,
            rtx_ssrc: has_rtx.then_some(sending.rtx_ssrc),
            cname: format!("strata-{room}"),
            stream_id: format!("p{}", sending.owner),
            track_id: format!("t{}", sending.track),
        }),
    }
}

/// A codec to name in an inactive section that offered none the node knows (negotiation
/// refuses such sections before they get here).
fn placeholder_codec(kind: MediaKind) -> sdp::OfferedCodec {
    let (codec, clock_rate, channels) = match kind {
        MediaKind::Audio => (rtp_ext::codec::Codec::Opus, 48_000, Some(2)),
        MediaKind::Video => (rtp_ext::codec::Codec::Vp8, 90_000, None),
    };
    sdp::OfferedCodec {
        payload_type: 96,
        codec,
        clock_rate,
        channels,
        fmtp: String::new(),
        rtx_payload_type: None,
        feedback: Vec::new(),
    }
}
