//! The conference routes: join a room with an offer, offer again to renegotiate, choose per
//! track, follow the room's events, read its state (leaving is the `DELETE` every session has).

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Extension, Path, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::{caller, content_type_is, created, offer_text, trickle, OfferRequest, ResourcePath};
use crate::node::event_queue::{EventReceiver, CONNECTION_SEND_BUFFER};
use crate::node::listener::ConnectionControl;
use crate::node::participant::{Choice, NamedTrack, ParticipantId};
use crate::node::peer::Kind;
use crate::node::signaling::{Answered, SignalError, Signaling};
use selector::Layer;

/// A comment line this often (or twice per the connection's idle timeout, if shorter) keeps
/// an event stream's connection from being taken for idle.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The keep-alive's floor, whatever the idle timeout: a comment line a few times a second at
/// most.
const MIN_KEEP_ALIVE: Duration = Duration::from_millis(100);

/// `?name=`: the name a participant (or WHIP publisher) goes by when its token has no
/// subject.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Name {
    pub(super) name: Option<String>,
}

/// `POST /rooms/{room}`: joins with an offer; 201 with the answer, its `Location` and `ETag`.
pub(super) async fn join(
    State(signaling): State<Arc<Signaling>>,
    Path(room): Path<String>,
    request: OfferRequest<Name>,
) -> Result<Response, SignalError> {
    let caller = request.caller();
    let name = request.query("the query is ?name=NAME")?;
    let offer = request.offer()?;
    let answered = signaling
        .join_conference(&room, &offer, name.name.as_deref(), caller)
        .await?;
    let ice_servers = signaling.ice_servers(&answered.id.to_string());
    let mut response = created(
        Kind::Participant,
        &room,
        (answered.id, answered.answer.clone()),
        &answered.refused,
        &ice_servers,
    );
    set_etag(&mut response, &answered);
    Ok(response)
}

/// `PATCH /rooms/{room}/{id}`: an offer (`application/sdp`, `If-Match` optional) is answered
/// with 200, the answer and its `ETag`; a choice (`application/json`,
/// `{"track":N,"spatial":S,"temporal":T,"paused":B}`) is 204; a trickle fragment is 204 (422
/// when it asks for an ICE restart, which a participant makes with an offer).
pub(super) async fn patch(
    State(signaling): State<Arc<Signaling>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path((room, id)): ResourcePath,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, SignalError> {
    let caller = caller(&headers, client);
    let resource = (room.as_str(), id.as_str());
    if content_type_is(&headers, "application/sdp") {
        let offer = offer_text(&headers, &body)?;
        let if_match = if_match(&headers)?;
        let answered = signaling
            .renegotiate(resource, &offer, if_match, caller)
            .await?;
        let mut response = (StatusCode::OK, answered.answer.clone()).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/sdp"),
        );
        set_etag(&mut response, &answered);
        return Ok(response);
    }
    if content_type_is(&headers, "application/json") {
        let asked: TrackChoice = serde_json::from_slice(&body).map_err(|_| {
            SignalError::BadBody(
                "expected {\"track\":N} with \"participant\" (its id), \"spatial\", \"temporal\" (numbers) or \"paused\" (true or false)",
            )
        })?;
        let choice = Choice {
            target: Layer::new(
                asked.spatial.unwrap_or(u8::MAX),
                asked.temporal.unwrap_or(u8::MAX),
            ),
            paused: asked.paused.unwrap_or(false),
        };
        let track = NamedTrack {
            id: asked.track,
            participant: asked.participant,
        };
        signaling.choose(resource, track, choice, caller).await?;
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let resource = (Kind::Participant, room.as_str(), id.as_str());
    trickle(&signaling, resource, caller, (&headers, &body)).await
}

/// `GET /rooms/{room}/{id}/events`: the participant's events, `text/event-stream`.
pub(super) async fn events(
    State(signaling): State<Arc<Signaling>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path((room, id)): ResourcePath,
    connection: Option<Extension<ConnectionControl>>,
    headers: HeaderMap,
) -> Result<Response, SignalError> {
    let events = signaling
        .events((&room, &id), caller(&headers, client))
        .await?;
    // The connection now carries this stream for good: its kernel buffer is kept small, so
    // a client that does not read holds little beyond what the node counts.
    let mut keep_alive = KEEP_ALIVE;
    if let Some(Extension(connection)) = connection {
        connection.set_send_buffer(CONNECTION_SEND_BUFFER);
        let idle = connection.idle_timeout().unwrap_or(KEEP_ALIVE);
        keep_alive = keep_alive.min(idle / 2).max(MIN_KEEP_ALIVE);
    }
    let body = Body::from_stream(EventStream {
        events,
        keep_alive: tokio::time::interval_at(tokio::time::Instant::now() + keep_alive, keep_alive),
    });
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `GET /rooms/{room}`: the room's state as JSON, with the ICE servers a page joining it
/// configures its connection with (TURN credentials minted for the room's reader).
pub(super) async fn state(
    State(signaling): State<Arc<Signaling>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path(room): Path<String>,
    headers: HeaderMap,
) -> Result<Response, SignalError> {
    let view = signaling
        .room_state(&room, caller(&headers, client))
        .await?;
    let mut json = serde_json::to_value(view).unwrap_or_default();
    json["ice_servers"] = serde_json::json!(signaling.ice_servers(&format!("room-{room}")));
    let mut response = axum::Json(json).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// A participant's choice for one track; left out: the best layer, not paused.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrackChoice {
    track: u32,
    participant: Option<ParticipantId>,
    spatial: Option<u8>,
    temporal: Option<u8>,
    paused: Option<bool>,
}

/// `If-Match: "N"` (or `N`, or `*` for any): the version of the answer the offer follows.
fn if_match(headers: &HeaderMap) -> Result<Option<u64>, SignalError> {
    let Some(value) = headers.get(header::IF_MATCH) else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or_default().trim();
    if text == "*" {
        return Ok(None);
    }
    text.trim_matches('"')
        .parse()
        .map(Some)
        .map_err(|_| SignalError::BadBody("If-Match is the ETag of the session's last answer"))
}

fn set_etag(response: &mut Response, answered: &Answered) {
    if let Ok(value) = HeaderValue::from_str(&format!("\"{}\"", answered.version)) {
        response.headers_mut().insert(header::ETAG, value);
    }
}

/// A participant's events as the response body, with a comment line whenever nothing was
/// sent for [`KEEP_ALIVE`]; it ends when the session does (or falls behind).
struct EventStream {
    events: EventReceiver,
    keep_alive: tokio::time::Interval,
}

impl futures_core::Stream for EventStream {
    type Item = Result<String, std::convert::Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        match this.events.poll_recv(cx) {
            Poll::Ready(Some(event)) => {
                this.keep_alive.reset();
                Poll::Ready(Some(Ok(event)))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.keep_alive.poll_tick(cx) {
                Poll::Ready(_) => Poll::Ready(Some(Ok(": keep-alive\n\n".to_owned()))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}
