//! The HTTP side of the node: WHIP (RFC 9725) and WHEP endpoints, a viewer's stats, CORS,
//! `/metrics` and the demo page. Handlers only translate HTTP to [`Signaling`] calls and back.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{
    ConnectInfo, DefaultBodyLimit, Extension, FromRequest, FromRequestParts, MatchedPath, Path,
    Query, Request, State,
};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::auth::Grant;
use super::cluster::http::{self as cluster_http, Door};
use super::cluster::Member;
use super::ice_servers::IceServer;
use super::peer::{Kind, PeerId};
use super::sdp;
use super::signaling::{Caller, JoinTaken, SignalError, Signaling};
use selector::Layer;

mod rooms;

const DEMO_PAGE: &str = include_str!("demo.html");
/// The demo page's conference view.
const CONFERENCE_JS: &str = include_str!("conference.js");

/// The routes, sharing one [`Signaling`]. A request's body must arrive whole within
/// `body_timeout` (408 otherwise), so a client trickling its body holds nothing for long; it
/// may be `max_body_bytes` long, or a participant's offer's limit on the conference routes
/// (an offer there grows with the room). In a cluster (`door`), each request that opens a
/// session is placed first: served here, redirected, or refused.
pub fn routes(
    signaling: Arc<Signaling>,
    max_body_bytes: usize,
    body_timeout: Duration,
    door: Option<Door>,
) -> axum::Router {
    let sessions = axum::Router::new()
        .route("/", get(|| async { Html(DEMO_PAGE) }))
        .route(
            "/conference.js",
            get(|| async { ([(header::CONTENT_TYPE, "text/javascript")], CONFERENCE_JS) }),
        )
        .route("/metrics", get(metrics))
        .route("/ice-servers/{room}", get(ice_servers))
        .route("/whip/{room}", post(publish))
        .route("/whep/{room}", post(watch))
        .route(
            "/whip/{room}/{id}",
            axum::routing::delete(|s, c, p, h| end(Kind::Publisher, s, c, p, h))
                .patch(patch_publisher),
        )
        .route(
            "/whep/{room}/{id}",
            axum::routing::delete(|s, c, p, h| end(Kind::Viewer, s, c, p, h))
                .patch(patch_viewer)
                .get(viewer_stats)
                .post(watch_named),
        );
    let rooms = axum::Router::new()
        .route("/rooms/{room}", get(rooms::state).post(rooms::join))
        .route(
            "/rooms/{room}/{id}",
            axum::routing::delete(|s, c, p, h| end(Kind::Participant, s, c, p, h))
                .patch(rooms::patch),
        )
        .route("/rooms/{room}/{id}/events", get(rooms::events));
    let participant_bytes = max_body_bytes.max(sdp::MAX_PARTICIPANT_SDP_LEN);
    let mut app = bodies_within(sessions, max_body_bytes, body_timeout)
        .merge(bodies_within(rooms, participant_bytes, body_timeout))
        .route_layer(middleware::from_fn_with_state(
            signaling.clone(),
            authorize_first,
        ));
    if let Some(door) = door {
        app = app
            .route("/cluster/nodes", get(cluster_http::nodes))
            .layer(Extension(door.member.clone()))
            .layer(middleware::from_fn_with_state(door, cluster_http::place));
    }
    app.layer(middleware::from_fn(cors)).with_state(signaling)
}

/// The routes with bodies of at most `limit` bytes, each arriving within `timeout`.
pub(crate) fn bodies_within<S: Clone + Send + Sync + 'static>(
    routes: axum::Router<S>,
    limit: usize,
    timeout: Duration,
) -> axum::Router<S> {
    routes
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn(move |request, next| {
            read_body(request, next, limit, timeout)
        }))
}

/// Reads the whole body first, within the size limit and the time allowed.
async fn read_body(request: Request, next: Next, limit: usize, timeout: Duration) -> Response {
    let (parts, body) = request.into_parts();
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(_)) => (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is larger than {limit} bytes, or broken off\n"),
        )
            .into_response(),
        Err(_) => (
            StatusCode::REQUEST_TIMEOUT,
            "the body did not arrive in time\n",
        )
            .into_response(),
    }
}

/// Authorizes a request that carries a body (`POST`, `PATCH`) from its path and headers before
/// the body is read: a caller without a credential for the room holds no buffer of up to the
/// route's limit for as long as its body takes. Only the grant the route needs at least is
/// checked here (publishing on `/whip`, watching elsewhere); the handler checks the rest (the
/// resource's owner, a participant's grant to publish).
async fn authorize_first(
    State(signaling): State<Arc<Signaling>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    request: Request,
    next: Next,
) -> Response {
    if !matches!(*request.method(), Method::POST | Method::PATCH) {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let room = Path::<std::collections::HashMap<String, String>>::from_request_parts(
        &mut parts, &signaling,
    )
    .await
    .ok()
    .and_then(|Path(mut params)| params.remove("room"));
    let publishes = parts
        .extensions
        .get::<MatchedPath>()
        .is_some_and(|path| path.as_str().starts_with("/whip/"));
    if let Some(room) = room {
        let grant = if publishes {
            Grant::Publish
        } else {
            Grant::Subscribe
        };
        let caller = caller(&parts.headers, client);
        if let Err(refused) = signaling.authorize(caller, &room, grant) {
            return refused.into_response();
        }
        if opens_session(&parts) {
            if let Err(refused) = signaling.take_join(caller) {
                return refused.into_response();
            }
        }
    }
    next.run(Request::from_parts(parts, body)).await
}

/// Whether the request opens a session (a `POST` of an offer to a room) whose client's
/// token was not taken yet (by the cluster's door).
fn opens_session(parts: &axum::http::request::Parts) -> bool {
    let opens = cluster_http::session_room(&parts.method, parts.uri.path()).is_some();
    opens && parts.extensions.get::<JoinTaken>().is_none()
}

/// Answers to a CORS preflight: what a page may send.
const PREFLIGHT: [(header::HeaderName, &str); 3] = [
    (
        header::ACCESS_CONTROL_ALLOW_METHODS,
        "GET, POST, PATCH, DELETE, OPTIONS",
    ),
    (
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        "Authorization, Content-Type, If-Match",
    ),
    (header::ACCESS_CONTROL_MAX_AGE, "86400"),
];

/// On every response: any origin, and the headers a page needs to read.
const EVERY_RESPONSE: [(header::HeaderName, &str); 2] = [
    (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
    (
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        "Location, Link, ETag, Warning, Retry-After",
    ),
];

fn insert_all(headers: &mut HeaderMap, values: &[(header::HeaderName, &'static str)]) {
    for (name, value) in values {
        headers.insert(name.clone(), HeaderValue::from_static(value));
    }
}

/// Lets pages of any origin publish and watch (the bearer token is the access control): the
/// preflight is answered here, and every response exposes `Location`.
async fn cors(request: Request, next: Next) -> Response {
    let mut response = if request.method() == Method::OPTIONS {
        let mut preflight = StatusCode::NO_CONTENT.into_response();
        insert_all(preflight.headers_mut(), &PREFLIGHT);
        preflight
    } else {
        next.run(request).await
    };
    insert_all(response.headers_mut(), &EVERY_RESPONSE);
    response
}

impl IntoResponse for SignalError {
    fn into_response(self) -> Response {
        let status = match &self {
            SignalError::BadOffer(_)
            | SignalError::BadBody(_)
            | SignalError::BadFingerprint(_)
            | SignalError::BadFragment(_)
            | SignalError::BadRoom(_)
            | SignalError::OfferTooLarge { .. } => StatusCode::BAD_REQUEST,
            SignalError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            SignalError::Forbidden => StatusCode::FORBIDDEN,
            SignalError::NotSdp => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            SignalError::NotFound | SignalError::Missing(_) => StatusCode::NOT_FOUND,
            SignalError::Conflict | SignalError::NameTaken => StatusCode::CONFLICT,
            SignalError::Stale(_) => StatusCode::PRECONDITION_FAILED,
            SignalError::OfferMismatch(_) | SignalError::IceRestart => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            SignalError::Limit(limit) => {
                StatusCode::from_u16(limit.status()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE)
            }
            SignalError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            SignalError::OfferRate { .. } => StatusCode::TOO_MANY_REQUESTS,
        };
        let mut response = (status, format!("{self}\n")).into_response();
        let headers = response.headers_mut();
        if status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        match self {
            SignalError::Limit(limit) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(limit.retry_after()));
            }
            SignalError::OfferRate { retry_after, .. } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after.max(1)));
            }
            _ => {}
        }
        response
    }
}

pub(crate) fn caller(headers: &HeaderMap, client: SocketAddr) -> Caller<'_> {
    Caller {
        authorization: headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok()),
        client: Some(client.ip()),
    }
}

fn content_type_is(headers: &HeaderMap, wanted: &str) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(wanted))
}

fn offer_text(headers: &HeaderMap, body: &Bytes) -> Result<String, SignalError> {
    if !content_type_is(headers, "application/sdp") {
        return Err(SignalError::NotSdp);
    }
    String::from_utf8(body.to_vec()).map_err(|_| SignalError::BadBody("the offer is not UTF-8"))
}

/// 201 Created with the answer and the session's resource, and a `Warning` (RFC 9111
/// section 5.5, code 299: a persistent warning) for each section not served, so a client
/// missing a track sees why.
fn created(
    kind: Kind,
    room: &str,
    (id, answer): (PeerId, String),
    refused: &[String],
    ice_servers: &[IceServer],
) -> Response {
    let location = format!("/{}/{room}/{id}", kind.path());
    let mut response = (StatusCode::CREATED, answer).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/sdp"),
    );
    if let Ok(value) = HeaderValue::from_str(&location) {
        headers.insert(header::LOCATION, value);
    }
    // The ICE servers, as RFC 9725 section 4.6 hands them to WHIP and WHEP clients.
    for link in ice_servers.iter().flat_map(IceServer::link_values) {
        if let Ok(value) = HeaderValue::from_str(&link) {
            headers.append(header::LINK, value);
        }
    }
    for reason in refused {
        let text = reason.replace(['"', '\\'], "'");
        if let Ok(value) = HeaderValue::from_str(&format!("299 strata \"{text}\"")) {
            headers.append(header::WARNING, value);
        }
    }
    response
}

/// `GET /ice-servers/{room}`: the STUN and TURN servers a client configures its connection
/// with before it offers (TURN credentials minted for it), for a caller who may watch the room.
async fn ice_servers(
    State(signaling): State<Arc<Signaling>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path(room): Path<String>,
    headers: HeaderMap,
) -> Result<Response, SignalError> {
    signaling.authorize(caller(&headers, client), &room, Grant::Subscribe)?;
    let servers = signaling.ice_servers(&format!("room-{room}"));
    let mut response = axum::Json(serde_json::json!({ "ice_servers": servers })).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `POST /whip/{room}?name=NAME`: publishes, as a participant of the room that only publishes
/// (named by its token's subject, or `NAME`, or a name of its own).
async fn publish(
    State(signaling): State<Arc<Signaling>>,
    Path(room): Path<String>,
    request: OfferRequest<rooms::Name>,
) -> Result<Response, SignalError> {
    let caller = request.caller();
    signaling.authorize(caller, &room, Grant::Publish)?;
    let name = request.query("the query is ?name=NAME")?;
    let offer = request.offer()?;
    let (id, answer, refused) = signaling
        .publish(&room, &offer, name.name.as_deref(), caller)
        .await?;
    let ice_servers = signaling.ice_servers(&id.to_string());
    Ok(created(
        Kind::Publisher,
        &room,
        (id, answer),
        &refused,
        &ice_servers,
    ))
}

/// What a `POST` that opens a session carries besides its path, read the same way on every
/// such route: who sends it, its query and its offer.
struct OfferRequest<Q> {
    client: SocketAddr,
    /// `None` when the query does not parse: refused with the route's own usage.
    query: Option<Q>,
    headers: HeaderMap,
    body: Bytes,
}

impl<Q> OfferRequest<Q> {
    fn caller(&self) -> Caller<'_> {
        caller(&self.headers, self.client)
    }

    /// The query, or a 400 that says `usage`.
    fn query(&self, usage: &'static str) -> Result<&Q, SignalError> {
        self.query.as_ref().ok_or(SignalError::BadBody(usage))
    }

    fn offer(&self) -> Result<String, SignalError> {
        offer_text(&self.headers, &self.body)
    }
}

impl<Q, S> FromRequest<S> for OfferRequest<Q>
where
    Q: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let ConnectInfo(client) = ConnectInfo::from_request_parts(&mut parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let query = Query::from_request_parts(&mut parts, state).await.ok();
        let headers = parts.headers.clone();
        let body = Bytes::from_request(Request::from_parts(parts, body), state)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(Self {
            client,
            query: query.map(|Query(query)| query),
            headers,
            body,
        })
    }
}

/// `?spatial=S&temporal=T`; either left out means the best available.
#[derive(Debug, Default, Deserialize)]
struct LayerChoice {
    spatial: Option<u8>,
    temporal: Option<u8>,
}

impl LayerChoice {
    fn layer(&self) -> Layer {
        Layer::new(
            self.spatial.unwrap_or(u8::MAX),
            self.temporal.unwrap_or(u8::MAX),
        )
    }
}

async fn watch(
    State(signaling): State<Arc<Signaling>>,
    Path(room): Path<String>,
    request: OfferRequest<LayerChoice>,
) -> Result<Response, SignalError> {
    watch_source(&signaling, (room, None), request).await
}

/// `POST /whep/{room}/{participant}`: watches the participant (or WHIP publisher) of that
/// name.
async fn watch_named(
    State(signaling): State<Arc<Signaling>>,
    Path((room, participant)): ResourcePath,
    request: OfferRequest<LayerChoice>,
) -> Result<Response, SignalError> {
    watch_source(&signaling, (room, Some(participant)), request).await
}

async fn watch_source(
    signaling: &Signaling,
    (room, source): (String, Option<String>),
    request: OfferRequest<LayerChoice>,
) -> Result<Response, SignalError> {
    let caller = request.caller();
    signaling.authorize(caller, &room, Grant::Subscribe)?;
    let choice = request.query("spatial and temporal must be numbers")?;
    let offer = request.offer()?;
    let (id, answer, refused) = signaling
        .watch((&room, source.as_deref()), &offer, choice.layer(), caller)
        .await?;
    let ice_servers = signaling.ice_servers(&id.to_string());
    Ok(created(
        Kind::Viewer,
        &room,
        (id, answer),
        &refused,
        &ice_servers,
    ))
}

/// A resource URL's room and session id.
type ResourcePath = Path<(String, String)>;

/// `DELETE` on a session's resource (`kind` as its path names it): ends the session.
pub(super) async fn end(
    kind: Kind,
    State(signaling): State<Arc<Signaling>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path((room, id)): ResourcePath,
    headers: HeaderMap,
) -> Result<StatusCode, SignalError> {
    let resource = (kind, room.as_str(), id.as_str());
    let caller = caller(&headers, client);
    signaling.end(resource, caller).await?;
    Ok(StatusCode::OK)
}

/// Trickle ICE (`application/trickle-ice-sdpfrag`): an ICE-lite node learns the browser's
/// addresses from its binding requests, so a fragment is taken (204) and needs nothing more,
/// unless it restarts ICE: then 200 with the node's new credentials.
async fn patch_publisher(
    State(signaling): State<Arc<Signaling>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path((room, id)): ResourcePath,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, SignalError> {
    let resource = (Kind::Publisher, room.as_str(), id.as_str());
    trickle(
        &signaling,
        resource,
        caller(&headers, client),
        (&headers, &body),
    )
    .await
}

pub(super) async fn trickle(
    signaling: &Signaling,
    resource: (Kind, &str, &str),
    caller: Caller<'_>,
    (headers, body): (&HeaderMap, &Bytes),
) -> Result<Response, SignalError> {
    if !content_type_is(headers, "application/trickle-ice-sdpfrag") {
        return Err(SignalError::BadBody(
            "PATCH takes application/trickle-ice-sdpfrag (or, on a viewer, application/json)",
        ));
    }
    let fragment =
        std::str::from_utf8(body).map_err(|_| SignalError::BadBody("the fragment is not UTF-8"))?;
    Ok(match signaling.trickle(resource, caller, fragment).await? {
        None => StatusCode::NO_CONTENT.into_response(),
        Some(answer) => {
            let content_type = [(header::CONTENT_TYPE, "application/trickle-ice-sdpfrag")];
            (StatusCode::OK, content_type, answer).into_response()
        }
    })
}

/// `{"spatial":S,"temporal":T}` changes the viewer's layer; a trickle fragment is accepted.
async fn patch_viewer(
    State(signaling): State<Arc<Signaling>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path((room, id)): ResourcePath,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, SignalError> {
    let caller = caller(&headers, client);
    if !content_type_is(&headers, "application/json") {
        let resource = (Kind::Viewer, room.as_str(), id.as_str());
        return trickle(&signaling, resource, caller, (&headers, &body)).await;
    }
    let choice: LayerChoice = serde_json::from_slice(&body)
        .map_err(|_| SignalError::BadBody("expected {\"spatial\":S,\"temporal\":T}"))?;
    let resource = (room.as_str(), id.as_str());
    signaling
        .set_layer(resource, caller, choice.layer())
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The viewer's estimate and, per subscription, its layers, as JSON.
async fn viewer_stats(
    State(signaling): State<Arc<Signaling>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path((room, id)): ResourcePath,
    headers: HeaderMap,
) -> Result<Response, SignalError> {
    let resource = (room.as_str(), id.as_str());
    let stats = signaling
        .viewer_stats(resource, caller(&headers, client))
        .await?;
    let mut response = axum::Json(stats).into_response();
    // Polled for live values: a cached answer would be a stale one.
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

async fn metrics(
    State(signaling): State<Arc<Signaling>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    member: Option<Extension<Arc<Member>>>,
    headers: HeaderMap,
) -> Result<Response, SignalError> {
    signaling.authorize_metrics(caller(&headers, client))?;
    let mut text = signaling.metrics().await?.render();
    if let Some(Extension(member)) = member {
        cluster_http::render(&member, &mut text);
    }
    let mut response = text.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    Ok(response)
}
