//! The media relay over HTTP between nodes: the origin's route (`POST /cluster/relay`), and
//! the edge's request to it for a publisher on another node (the one the room's state or
//! directory names, or else the room's home) or for the data of a room's participants there. See [`relay_link`](super::relay_link) for what they carry and how it is
//! authenticated, and the core's `relay` module for the link itself.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{to_bytes, Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::member::Member;
use super::relay_link::{
    link_keys, link_session, nonce, read_request, sign, unix_ms, verify, LinkError, RelayAnswer,
    RelayKind, RelayRequest, AUTH_HEADER, MAX_BODY,
};
use crate::node::core::{CoreError, NewLink, RelayOffer, RelayRefusal};
use crate::node::http;
use crate::node::media_loop::LoopGone;
use crate::node::remote::Remote;
use crate::node::shard::worker_for_room;
use crate::node::signaling::Signaling;

/// The route's path.
pub const PATH: &str = "/cluster/relay";
/// How long an edge waits for the origin's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// Both ends of the relay on this node: the secret, its workers' relay sockets as the others
/// reach them, and what asks its media loops.
#[derive(Debug)]
pub struct RelayService {
    /// The cluster's shared secret.
    pub secret: String,
    /// Each worker's relay socket, where the links of the rooms it serves end: a link is
    /// between two workers' sockets, so rooms on different workers of the same two nodes
    /// relay on links of their own.
    pub relays: Vec<SocketAddr>,
    /// This node's signaling, whose loops hold the cores.
    pub signaling: Arc<Signaling>,
    /// This node in the cluster, to find a room's home.
    pub member: Arc<Member>,
    /// Held through a pull: two viewers arriving together make one relay, not a second
    /// request that would restart the first.
    pub(super) pulling: tokio::sync::Mutex<()>,
    /// Held while the directory is followed: a heartbeat finding the last one still at work
    /// leaves it be.
    pub(super) following: tokio::sync::Mutex<()>,
}

/// The route, its body limited to [`MAX_BODY`] and to arrive within `body_timeout` (the
/// signature is checked once it has all come, so until then anyone may be sending it).
pub fn routes(service: Arc<RelayService>, body_timeout: Duration) -> Router {
    let routes = Router::new().route(PATH, post(route));
    http::bodies_within(routes, MAX_BODY, body_timeout).with_state(service)
}

/// `POST /cluster/relay` on the origin: an authenticated edge's request starts the relay of a
/// publisher of the room here, or of the room's data; the answer, signed, says what the edge
/// publishes.
pub async fn route(
    State(service): State<Arc<RelayService>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let tag = headers
        .get(AUTH_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let read =
        read_request(&service.secret, &body, tag, unix_ms()).and_then(|request| {
            match request.kind == RelayKind::Data && !service.signaling.serves_room(&request.room) {
                true => Err(LinkError::BadRoom),
                false => Ok(request),
            }
        });
    let request = match read {
        Ok(request) => request,
        Err(refused) => return service.refuse(refused),
    };
    let origin_nonce = nonce();
    let keys = link_keys(&service.secret, &request.nonce, &origin_nonce, true);
    let Ok(srtp) = link_session(&keys) else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let link = NewLink {
        id: origin_nonce,
        srtp: Box::new(srtp),
    };
    let room = request.room.clone();
    let relayed = match request.kind {
        RelayKind::Publisher => service.relay_publisher(request, link).await,
        RelayKind::Data => service.relay_data(request, link).await,
    };
    let (offer, link) = match relayed {
        Ok(Ok(relayed)) => relayed,
        Ok(Err(refused)) => return refusal(&refused).into_response(),
        Err(_) => return StatusCode::SERVICE_UNAVAILABLE.into_response(),
    };
    let answer = RelayAnswer::new(service.relay_for(&room), link, &offer);
    let Ok(body) = serde_json::to_vec(&answer) else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let tag = sign(&service.secret, &body);
    ([(AUTH_HEADER, tag)], body).into_response()
}

/// The status of a relay the origin's core refused: `503` at a limit (the edge may ask
/// again later), `404` for a publisher not here, `409` for an SSRC another relay of the link
/// has.
fn refusal(refused: &CoreError) -> (StatusCode, String) {
    let status = match refused {
        CoreError::RelayRefused(RelayRefusal::LinkFull | RelayRefusal::TooManyLinks) => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        CoreError::NoSuchParticipant | CoreError::UnknownPeer => StatusCode::NOT_FOUND,
        _ => StatusCode::CONFLICT,
    };
    (status, refused.to_string())
}

/// Why an edge got no relay.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    /// The home's URL is not plain `http://host:port` (the relay's requests are signed, not
    /// encrypted; nodes reach each other over their private network).
    #[error("the home's URL is not http://host:port")]
    Url,
    /// Connecting, writing or reading failed, or timed out.
    #[error("the origin could not be reached: {0}")]
    Io(String),
    /// The origin refused, or answered something unsigned or malformed.
    #[error("the origin refused: {0}")]
    Refused(String),
}

/// What the origin's core answers a relay request: the edge's offer and the link's id.
type Relayed = Result<Result<(RelayOffer, String), CoreError>, LoopGone>;

impl RelayService {
    /// A request refused before it reached a core: counted by reason, `403` when it is not
    /// the cluster's (unsigned, or too old), `400` for what a node of it would not send.
    fn refuse(&self, refused: LinkError) -> Response {
        tracing::warn!(%refused, "a relay request refused");
        let counted = &self.member.counters().relay_refused[refused as usize];
        counted.fetch_add(1, Ordering::Relaxed);
        let status = match refused {
            LinkError::Unauthenticated | LinkError::Stale => StatusCode::FORBIDDEN,
            _ => StatusCode::BAD_REQUEST,
        };
        (status, refused.to_string()).into_response()
    }

    /// The origin's end of a publisher's relay the edge asked for.
    async fn relay_publisher(&self, request: RelayRequest, link: NewLink) -> Relayed {
        let to = Remote::Link(request.relay);
        let RelayRequest {
            room,
            source,
            links,
            ..
        } = request;
        let room_name = room.clone();
        self.signaling
            .ask_room(&room, move |worker, now| {
                let source = source.as_deref();
                worker
                    .core
                    .relay_out(now, &room_name, source, to, &links, link)
            })
            .await
    }

    /// The origin's end of a relay of a room's data the edge asked for: an offer of no
    /// tracks, under the relay's tag. The edge's own data is pulled in turn first when this
    /// node's core asks for it.
    async fn relay_data(self: &Arc<Self>, request: RelayRequest, link: NewLink) -> Relayed {
        let to = Remote::Link(request.relay);
        let RelayRequest {
            room, links, node, ..
        } = request;
        let (room_name, edge) = (room.clone(), node.clone());
        let relayed = self
            .signaling
            .ask_room(&room, move |worker, now| {
                let edge = edge.as_deref();
                worker
                    .core
                    .relay_data_out(now, &room_name, to, &links, link, edge)
            })
            .await?;
        let relayed = match relayed {
            Ok(relayed) => relayed,
            Err(refused) => return Ok(Err(refused)),
        };
        if let Some(node) = node.filter(|_| relayed.pull_back) {
            self.pull_back(&room, &node).await;
        }
        let offer = RelayOffer {
            name: None,
            participant: None,
            tracks: Vec::new(),
            codecs: Vec::new(),
            tag: relayed.tag,
        };
        Ok(Ok((offer, relayed.link)))
    }

    /// The relay of a node of `member`'s cluster, whose workers' relay sockets are at
    /// `relays` (one per worker, in the workers' order).
    pub fn new(
        secret: String,
        relays: Vec<SocketAddr>,
        signaling: Arc<Signaling>,
        member: Arc<Member>,
    ) -> Self {
        Self {
            secret,
            relays,
            signaling,
            member,
            pulling: tokio::sync::Mutex::new(()),
            following: tokio::sync::Mutex::new(()),
        }
    }

    /// The relay socket of the worker that serves `room` here (as the signaling picks it).
    pub fn relay_for(&self, room: &str) -> SocketAddr {
        let worker = worker_for_room(room, self.relays.len());
        let unbound = SocketAddr::from(([0, 0, 0, 0], 0));
        self.relays.get(worker).copied().unwrap_or(unbound)
    }

    /// On the edge, before a viewer of `room` is added: when nobody it would watch is here,
    /// asks the node that hosts the publisher (the directory's, or else the room's home) for
    /// a relay of it and publishes it here, so the viewer is served as by a local publisher.
    /// Whatever fails is logged and the viewer added all the same, waiting as for a
    /// publisher to come; so it is when the pull is not done within
    /// [`JOIN_WAIT`](super::relay_pulls::JOIN_WAIT).
    pub async fn pull(self: &Arc<Self>, room: &str, source: Option<&str>) {
        let (service, room, source) = (self.clone(), room.to_owned(), source.map(str::to_owned));
        self.before_join(async move { service.pull_viewed(&room, source.as_deref()).await })
            .await;
    }

    /// [`pull`](Self::pull), waited for whole.
    async fn pull_viewed(&self, room: &str, source: Option<&str>) {
        let _one_at_a_time = self.pulling.lock().await;
        if !self.needs_relay(room, source).await {
            return;
        }
        let hosted = self.member.hosted_elsewhere(room, &[]).await;
        let listed = hosted
            .unwrap_or_default()
            .into_iter()
            .find(|(_, name)| source.is_none_or(|wanted| wanted == name));
        let (origin, source) = match listed {
            Some((origin, name)) => (origin, Some(name)),
            None => match self.member.home_elsewhere(room).await {
                Some(home) => (home, source.map(str::to_owned)),
                None => return,
            },
        };
        if let Err(failed) = self.pull_from(&origin.url, room, source.as_deref()).await {
            tracing::warn!(room, origin = %origin.node, %failed, "no relay");
        }
    }

    /// Whether a viewer of `room` watching `source` would find nobody here.
    pub(super) async fn needs_relay(&self, room: &str, source: Option<&str>) -> bool {
        let (room_name, wanted) = (room.to_owned(), source.map(str::to_owned));
        let needed = self
            .signaling
            .ask_room(room, move |worker, _| {
                worker.core.needs_relay(&room_name, wanted.as_deref())
            })
            .await;
        needed == Ok(true)
    }

    pub(super) async fn pull_from(
        &self,
        url: &str,
        room: &str,
        source: Option<&str>,
    ) -> Result<(), PullError> {
        let request = self.request(room, source).await?;
        let (answer, link, from) = self.ask_origin(url, &request).await?;
        let offer = answer
            .offer()
            .map_err(|e| PullError::Refused(e.to_string()))?;
        let room_name = room.to_owned();
        let added = self
            .signaling
            .ask_room(room, move |worker, now| {
                worker.core.relay_in(now, &room_name, offer, from, link)
            })
            .await
            .map_err(|_| PullError::Io("the media loop stopped".into()))?;
        added.map_err(|e| PullError::Refused(e.to_string()))?;
        Ok(())
    }

    /// Asks the origin of node `node` at `url` for the data of `room`'s participants there,
    /// relayed here on the link the two share (or a new one).
    pub(super) async fn pull_data_from(
        &self,
        url: &str,
        room: &str,
        node: &str,
    ) -> Result<(), PullError> {
        let request = RelayRequest {
            kind: RelayKind::Data,
            node: Some(self.member.identity().node.clone()),
            ..self.request(room, None).await?
        };
        let (answer, link, from) = self.ask_origin(url, &request).await?;
        let (room_name, node_name) = (room.to_owned(), node.to_owned());
        let tag = answer.tag;
        let added = self
            .signaling
            .ask_room(room, move |worker, now| {
                let of = (room_name.as_str(), node_name.as_str());
                worker.core.relay_data_in(now, of, from, link, tag)
            })
            .await
            .map_err(|_| PullError::Io("the media loop stopped".into()))?;
        added.map_err(|e| PullError::Refused(e.to_string()))
    }

    /// A request for `room`'s publisher `source` (or its first), from the relay socket of the
    /// worker that serves the room here, naming the links that worker receives on.
    async fn request(&self, room: &str, source: Option<&str>) -> Result<RelayRequest, PullError> {
        let links = self
            .signaling
            .ask_room(room, |worker, _| worker.core.links_in())
            .await
            .map_err(|_| PullError::Io("the media loop stopped".into()))?;
        Ok(RelayRequest {
            room: room.to_owned(),
            source: source.map(str::to_owned),
            relay: self.relay_for(room),
            nonce: nonce(),
            links,
            at_ms: unix_ms(),
            kind: RelayKind::Publisher,
            node: None,
        })
    }

    /// `request` sent to the origin at `url`, signed, and its answer read once signed: the
    /// answer, the link the relay comes on should it be new, and where the origin's end is.
    async fn ask_origin(
        &self,
        url: &str,
        request: &RelayRequest,
    ) -> Result<(RelayAnswer, NewLink, Remote), PullError> {
        let body = serde_json::to_vec(request).map_err(|e| PullError::Io(e.to_string()))?;
        let (tag, body) =
            tokio::time::timeout(ANSWER_TIMEOUT, post_signed(url, &self.secret, body))
                .await
                .map_err(|_| PullError::Io("timed out".into()))??;
        verify(&self.secret, &body, &tag).map_err(|e| PullError::Refused(e.to_string()))?;
        let answer: RelayAnswer =
            serde_json::from_slice(&body).map_err(|e| PullError::Refused(e.to_string()))?;
        let keys = link_keys(&self.secret, &request.nonce, &answer.nonce, false);
        let srtp = link_session(&keys).map_err(|e| PullError::Refused(e.to_string()))?;
        let link = NewLink {
            id: answer.nonce.clone(),
            srtp: Box::new(srtp),
        };
        let from = Remote::Link(answer.relay);
        Ok((answer, link, from))
    }
}

/// `POST {url}/cluster/relay` with `body` signed: the answer's tag and body.
async fn post_signed(url: &str, secret: &str, body: Vec<u8>) -> Result<(String, Bytes), PullError> {
    let host = url
        .strip_prefix("http://")
        .map(|rest| rest.trim_end_matches('/'))
        .filter(|host| !host.contains('/'))
        .ok_or(PullError::Url)?;
    let io = |e: &dyn std::fmt::Display| PullError::Io(e.to_string());
    let stream = TcpStream::connect(host).await.map_err(|e| io(&e))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| io(&e))?;
    tokio::spawn(connection);
    let request = Request::post(PATH)
        .header("host", host)
        .header("content-type", "application/json")
        .header(AUTH_HEADER, sign(secret, &body))
        .body(Body::from(body))
        .map_err(|e| io(&e))?;
    let response = sender.send_request(request).await.map_err(|e| io(&e))?;
    let status = response.status();
    let tag = response
        .headers()
        .get(AUTH_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = to_bytes(Body::new(response.into_body()), MAX_BODY)
        .await
        .map_err(|e| io(&e))?;
    if !status.is_success() {
        let reason = String::from_utf8_lossy(&body).into_owned();
        return Err(PullError::Refused(format!("{status}: {reason}")));
    }
    Ok((tag, body))
}
