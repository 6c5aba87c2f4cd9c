//! WHIP and WHEP sessions from signaling's side: an offer becomes a session of the media loop
//! and an answer. Independent of HTTP (the routes in `http` translate), so the flow can be
//! driven directly. Signaling keeps no session state of its own: the media loop's core is
//! the one place a session lives, so one that ends there is gone here too.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Instant, SystemTime};

use selector::Layer;
use tokio::sync::Notify;

use super::auth::{Auth, AuthError, Grant};
use super::client_key::ClientKey;
use super::cluster::relay_http::RelayService;
use super::core::{CoreError, Resource, RoomRelays};
use super::dtls::check_fingerprint;
use super::ice_servers::{IceServer, IceServerConfig};
use super::limits::{LimitError, Limits, RoomNameError};
use super::listener::HttpClients;
use super::media_loop::{LoopGone, MediaLoopHandle, Worker};
use super::peer::{IceCredentials, Join, Kind, Owner, PeerId, RemoteIce};
use super::sdp::{
    self, AnswerMedia, AnswerParams, FragmentIce, Offer, PublishedMedia, RoomCodec, SdpError,
    SendSource, ViewedMedia,
};
use super::shard::{mark_ufrag, worker_for_room, WorkerId};
use super::socket::{receive_overflows, SocketBuffers};

mod conference;
mod followed;
mod offer_memo;
mod publisher;
mod rate;
mod watch;

use super::stats::ViewerStats;
use super::tcp::TcpStats;
pub use conference::{participant_answer, participant_offer, Answered};
use offer_memo::OfferMemo;
use publisher::publisher_of;
use rate::Rate;
pub use watch::{watch, WatchRequest, Watched};

impl Kind {
    /// The grant a token needs to create, change or end a session of this kind.
    pub fn grant(self) -> Grant {
        match self {
            Self::Publisher => Grant::Publish,
            // A participant's own resource is its to change as long as it may receive.
            Self::Viewer | Self::Participant => Grant::Subscribe,
        }
    }
}

/// Why a signaling request was refused; each maps to one HTTP status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignalError {
    /// The offer is not SDP the node can read or serve (400).
    #[error("bad offer: {0}")]
    BadOffer(#[from] SdpError),
    /// A trickle `PATCH`'s fragment is not one the node can read (400).
    #[error("bad trickle fragment: {0}")]
    BadFragment(SdpError),
    /// A participant's trickle `PATCH` asks for an ICE restart (422), which a participant makes
    /// with a new offer; the session goes on with its credentials (RFC 9725 section 4.3.2).
    #[error(
        "the fragment's ICE credentials are not the offer's: a participant restarts ICE with \
         a new offer, not a fragment; the session goes on with its own"
    )]
    IceRestart,
    /// The request's body or query is not what the route takes; says what is (400).
    #[error("bad request: {0}")]
    BadBody(&'static str),
    /// The offer's `a=fingerprint` is not one the DTLS handshake can check (400).
    #[error("bad a=fingerprint: {0}")]
    BadFingerprint(String),
    /// The room name breaks the node's rules (400).
    #[error("bad room name: {0}")]
    BadRoom(#[from] RoomNameError),
    /// The offer has more of something than the limits allow (400).
    #[error("the offer has {found} {what}; at most {limit} are accepted")]
    OfferTooLarge {
        /// What there is too much of: m-sections, or sending m-sections.
        what: &'static str,
        /// How many the offer has.
        found: usize,
        /// How many the limits accept.
        limit: usize,
    },
    /// No credential, or one the node does not accept (401 with `WWW-Authenticate: Bearer`).
    #[error("unauthorized: {0}")]
    Unauthorized(#[from] AuthError),
    /// The session exists but another credential created it (403).
    #[error("forbidden: the session belongs to another credential")]
    Forbidden,
    /// The offer came as another content type than `application/sdp` (415).
    #[error("the offer must be sent as application/sdp")]
    NotSdp,
    /// No such session at this resource URL (404).
    #[error("no such session")]
    NotFound,
    /// Another track already publishes under an SSRC of the offer (409).
    #[error("the offer's SSRCs are already published")]
    Conflict,
    /// The room has no such participant or track (404): which.
    #[error("{0}")]
    Missing(String),
    /// Another session of the room goes by the name (409).
    #[error("the name is taken in this room")]
    NameTaken,
    /// The `If-Match` names an answer older than the session's last (412).
    #[error("{0}")]
    Stale(String),
    /// The renegotiation changed what must stay the same for the session (422): what.
    #[error("the offer does not match the session: {0}")]
    OfferMismatch(String),
    /// A limit refused the session (429 or 503, with `Retry-After`).
    #[error("{0}")]
    Limit(#[from] LimitError),
    /// The media loop has stopped, the node with it (503).
    #[error("the node is shutting down")]
    ShuttingDown,
    /// The participant offers more often than the limit allows (429, with `Retry-After`).
    #[error("this participant offers more than {per_second} times a second; offer again later")]
    OfferRate {
        /// The limit, offers per second.
        per_second: u32,
        /// Seconds until the next offer is taken (rounded up).
        retry_after: u64,
    },
}

impl From<LoopGone> for SignalError {
    fn from(_: LoopGone) -> Self {
        Self::ShuttingDown
    }
}

impl From<CoreError> for SignalError {
    fn from(e: CoreError) -> Self {
        match e {
            CoreError::UnknownPeer | CoreError::NotAViewer | CoreError::NotAParticipant => {
                Self::NotFound
            }
            CoreError::NoSuchParticipant | CoreError::UnknownTrack => Self::Missing(e.to_string()),
            CoreError::NotOwner => Self::Forbidden,
            CoreError::SsrcInUse | CoreError::RelayRefused(_) => Self::Conflict,
            CoreError::NameTaken => Self::NameTaken,
            CoreError::BadName => {
                Self::BadBody("a name is 1 to 64 bytes without control characters")
            }
            CoreError::Stale { .. } => Self::Stale(e.to_string()),
            CoreError::OfferMismatch(reason) => Self::OfferMismatch(reason),
            CoreError::IceRestart => Self::IceRestart,
            CoreError::Limit(limit) => Self::Limit(limit),
        }
    }
}

/// A request extension: the request's client spent its token for the session it opens
/// already (at the cluster's door), so it is not asked for another.
#[derive(Debug, Clone, Copy)]
pub struct JoinTaken;

/// Who is asking: the request's credential and the address it came from.
#[derive(Debug, Clone, Copy, Default)]
pub struct Caller<'a> {
    /// The `Authorization` header, when the request had one.
    pub authorization: Option<&'a str>,
    /// The HTTP client's address: sessions are counted per client.
    pub client: Option<IpAddr>,
}

/// What signaling needs besides the media loop: what to put in answers, and what to check.
#[derive(Debug, Clone)]
pub struct SignalingConfig {
    /// Our DTLS certificate's SHA-256 fingerprint, `AB:CD:...`.
    pub fingerprint: String,
    /// The address announced in every answer's ICE candidate: where the node's media socket is
    /// reached.
    pub candidate: SocketAddr,
    /// The passive ICE-TCP candidate announced after it, when the node listens on TCP.
    pub tcp_candidate: Option<SocketAddr>,
    /// The bitrate a publisher's video encoder is asked to start at and stay above (kbit/s);
    /// 0: the encoder's own estimate.
    pub publisher_bitrate_kbps: u32,
    /// What one session, room, client and node may hold.
    pub limits: Limits,
    /// The media socket's buffers, for `/metrics` (none when signaling runs without one).
    pub socket: Option<SocketBuffers>,
    /// The ICE-TCP listener's counters, for `/metrics` (none without one).
    pub tcp: Option<Arc<TcpStats>>,
    /// The HTTP listener's connections per client, for `/metrics` (none without one).
    pub http_clients: Option<Arc<HttpClients>>,
    /// STUN and TURN servers handed to clients with each answer and room state.
    pub ice_servers: Vec<IceServerConfig>,
}

/// The node's signaling: it turns an HTTP request into a checked request to the media worker
/// of the room (authorization, limits, SDP read and negotiated) and the worker's reply into
/// an answer.
#[derive(Debug)]
pub struct Signaling {
    /// Each media worker's loop, by worker.
    loops: Vec<MediaLoopHandle>,
    auth: Auth,
    config: SignalingConfig,
    /// How often each participant may offer again.
    offer_rate: Rate<PeerId>,
    /// Each participant's last offer as read, so the same offer again is not read again.
    offer_memo: OfferMemo,
    /// Offers refused for coming too often.
    offers_refused: AtomicU64,
    /// How often each client may open a session.
    join_rate: Rate<ClientKey>,
    /// Sessions refused for a client opening them too often.
    joins_refused: AtomicU64,
    /// The media relay between nodes, on a clustered node with a secret: a viewer of a room
    /// homed elsewhere has its publisher relayed here first. Weak: the HTTP routes own it.
    relay: OnceLock<Weak<RelayService>>,
    /// Woken when a session joins or leaves: a clustered node's room feed then writes the
    /// room's part at once instead of at its next look, so a node whose participant joins at
    /// the same moment learns of this one within a round trip of the store.
    sessions_changed: Arc<Notify>,
}

impl Signaling {
    /// Signaling for the media workers' `loops` (at least one).
    pub fn new(loops: Vec<MediaLoopHandle>, auth: Auth, config: SignalingConfig) -> Self {
        Self {
            loops,
            auth,
            offer_rate: Rate::new(config.limits.offers_per_second),
            join_rate: Rate::new(config.limits.joins_per_client_per_second),
            joins_refused: AtomicU64::new(0),
            offer_memo: OfferMemo::default(),
            config,
            offers_refused: AtomicU64::new(0),

            relay: OnceLock::new(),
            sessions_changed: Arc::new(Notify::new()),
        }
    }

    /// What a session joining or leaving wakes (one wake-up kept while nobody waits).
    pub fn sessions_changed(&self) -> Arc<Notify> {
        self.sessions_changed.clone()
    }

    /// A session joined or left.
    pub(super) fn changed(&self) {
        self.sessions_changed.notify_one();
    }

    /// Relays publishers of rooms homed elsewhere to this node's viewers through `relay`.
    pub fn set_relay(&self, relay: Weak<RelayService>) {
        let _ = self.relay.set(relay);
    }

    /// Runs `request` on the worker that serves `room`, in one turn of its loop.
    pub async fn ask_room<T: Send + 'static>(
        &self,
        room: &str,
        request: impl FnOnce(&mut Worker, Instant) -> T + Send + 'static,
    ) -> Result<T, LoopGone> {
        self.loops
            .get(self.worker(room))
            .ok_or(LoopGone)?
            .ask(request)
            .await
    }

    /// The ICE servers as the client `user` gets them now: TURN credentials from a shared
    /// secret are minted for it.
    pub fn ice_servers(&self, user: &str) -> Vec<IceServer> {
        let now = SystemTime::now();
        self.config
            .ice_servers
            .iter()
            .map(|server| server.for_client(user, now))
            .collect()
    }

    /// Checks the caller's grant in a room whose name is one the node serves.
    pub fn authorize(
        &self,
        caller: Caller<'_>,
        room: &str,
        grant: Grant,
    ) -> Result<(), SignalError> {
        self.config.limits.check_room_name(room)?;
        let now = SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Ok(self
            .auth
            .authorize(caller.authorization, room, grant, now)?)
    }

    /// A request that would open a session spends one of its client's tokens (before its
    /// offer is read: reading it is most of what a refused join costs), or is refused.
    pub fn take_join(&self, caller: Caller<'_>) -> Result<(), SignalError> {
        let Some(client) = caller.client.map(ClientKey::from) else {
            return Ok(());
        };
        let now = Instant::now();
        let per_second = self.config.limits.joins_per_client_per_second;
        if self.join_rate.check(client, now).is_err() {
            self.joins_refused.fetch_add(1, Ordering::Relaxed);
            return Err(LimitError::ClientRate(per_second).into());
        }
        self.join_rate.spend(client, now);
        Ok(())
    }

    /// Checks the caller may read `/metrics`: anyone on an open node, else only the bearer of
    /// the metrics token.
    pub fn authorize_metrics(&self, caller: Caller<'_>) -> Result<(), SignalError> {
        Ok(self.auth.authorize_metrics(caller.authorization)?)
    }

    /// A WHIP offer: publishes its tracks and answers, with why each section not served is
    /// not.
    pub async fn publish(
        &self,
        room: &str,
        offer: &str,
        name: Option<&str>,
        caller: Caller<'_>,
    ) -> Result<(PeerId, String, Vec<String>), SignalError> {
        let offer = self.parse_offer(offer)?;
        let plan = sdp::negotiate_publisher(&offer)?;
        let accepted: Vec<&PublishedMedia> =
            plan.sections.iter().filter_map(|s| s.accepted()).collect();
        self.check_tracks(accepted.len())?;
        let mut publisher = publisher_of(&accepted)?;
        publisher.codecs = accepted
            .iter()
            .map(|m| RoomCodec {
                codec: m.codec.codec,
                fmtp: m.codec.fmtp.clone(),
            })
            .collect();
        let name = self
            .name(caller, name)
            .unwrap_or_else(|| format!("publisher-{:08x}", rand::random::<u32>()));
        let join = Join {
            name: Some(name),
            ..self.join(room, &offer, caller)
        };
        let local = join.ice.clone();
        let id = self
            .loop_of(room)?
            .ask(move |worker, now| {
                let room = join.room.clone();
                let added = worker.core.add_publisher(now, join, publisher);
                added.inspect(|id| tracing::info!(peer = %id, room, "publisher joined"))
            })
            .await??;
        self.changed();
        let answer = sdp::build_answer(&self.answer_params(
            &local,
            plan.extmap_allow_mixed,
            AnswerMedia::for_publisher(&plan),
        ));
        Ok((id, answer, refused(id, &plan.sections)))
    }

    /// A WHEP offer: subscribes the viewer to the room's first publisher, or to the one named
    /// `source` (now, or when it publishes), and answers with the SSRCs it will receive, and
    /// why each section not served is not.
    pub async fn watch(
        &self,
        (room, source): (&str, Option<&str>),
        offer: &str,
        target: Layer,
        caller: Caller<'_>,
    ) -> Result<(PeerId, String, Vec<String>), SignalError> {
        let offer = self.parse_offer(offer)?;
        if let Some(relay) = self.relay() {
            relay.pull(room, source).await;
        }
        let join = self.join(room, &offer, caller);
        let local = join.ice.clone();
        let request = WatchRequest {
            join,
            offer,
            target,
            source: source.map(str::to_owned),
        };
        let Watched { id, plan, sources } = self
            .loop_of(room)?
            .ask(move |worker, now| {
                let room = request.join.room.clone();
                let watched = watch(&mut worker.core, now, request);
                watched.inspect(|w| tracing::info!(peer = %w.id, room, "viewer joined"))
            })
            .await??;
        self.changed();
        let source_of = |media: &ViewedMedia| {
            let &(ssrc, rtx_ssrc) = sources.get(&media.mid)?;
            let has_rtx = media.codecs.iter().any(|c| c.rtx_payload_type.is_some());
            Some(SendSource {
                ssrc,
                rtx_ssrc: has_rtx.then_some(rtx_ssrc),
                cname: format!("strata-{id}"),
                stream_id: format!("strata-{room}"),
                track_id: format!("{}-{id}", media.mid),
            })
        };
        let media = AnswerMedia::for_viewer(&plan, source_of);
        let answer = sdp::build_answer(&self.answer_params(&local, plan.extmap_allow_mixed, media));
        Ok((id, answer, refused(id, &plan.sections)))
    }

    /// A trickle `PATCH`'s fragment (RFC 8840) for a resource that must be the caller's: the
    /// session exists as that kind in that room, and the caller holds the credential that
    /// created it. A fragment that names the session's ICE credentials (or none) needs nothing
    /// more: an ICE-lite node learns addresses from binding requests. One that names others
    /// restarts ICE on a WHIP or WHEP session (RFC 9725 section 4.3.2): what it returns is then
    /// the fragment that answers it, with the node's new credentials.
    pub async fn trickle(
        &self,
        resource: (Kind, &str, &str),
        caller: Caller<'_>,
        fragment: &str,
    ) -> Result<Option<String>, SignalError> {
        let ice = sdp::read_fragment(fragment).map_err(SignalError::BadFragment)?;
        let (ufrag, pwd) = (ice.ufrag.map(str::to_owned), ice.pwd.map(str::to_owned));
        let restarted = self.on_session(resource, caller, move |worker, id, _| {
            let ice = FragmentIce {
                ufrag: ufrag.as_deref(),
                pwd: pwd.as_deref(),
            };
            worker.core.trickle(id, &ice)
        });
        let restarted = restarted.await?;
        Ok(restarted.map(|local| sdp::restart_answer(&local.local_ufrag, &local.local_pwd)))
    }

    /// Ends the session of a resource (`DELETE`), under the same rules as
    /// [`trickle`](Self::trickle).
    pub async fn end(
        &self,
        resource: (Kind, &str, &str),
        caller: Caller<'_>,
    ) -> Result<(), SignalError> {
        self.on_session(resource, caller, |worker, id, _| {
            tracing::info!(peer = %id, "session ended by its client");
            worker.core.remove_peer(id)
        })
        .await?;
        self.changed();
        Ok(())
    }

    /// A viewer's new layer choice (`PATCH` with JSON), under the same rules as
    /// [`trickle`](Self::trickle).
    pub async fn set_layer(
        &self,
        (room, id): (&str, &str),
        caller: Caller<'_>,
        target: Layer,
    ) -> Result<(), SignalError> {
        let resource = (Kind::Viewer, room, id);
        self.on_session(resource, caller, move |worker, id, _| {
            worker.core.set_target(id, target)
        })
        .await
    }

    /// A GET on a viewer's resource: its estimate and layers, under the same rules as a
    /// PATCH or DELETE on it.
    pub async fn viewer_stats(
        &self,
        (room, id): (&str, &str),
        caller: Caller<'_>,
    ) -> Result<ViewerStats, SignalError> {
        self.on_session((Kind::Viewer, room, id), caller, |worker, id, _| {
            // The resource names a viewer: only a publisher would have none.
            worker.core.viewer_stats(id).ok_or(CoreError::NotAViewer)
        })
        .await
    }

    /// A resource URL with the caller's credential, once the caller holds a grant of that
    /// kind in the room; the media loop checks the rest (the session exists, is the caller's).
    fn resource(
        &self,
        (kind, room, id): (Kind, &str, &str),
        caller: Caller<'_>,
    ) -> Result<Resource, SignalError> {
        self.authorize(caller, room, kind.grant())?;
        let id: PeerId = id.parse().map_err(|_| SignalError::NotFound)?;
        Ok(Resource {
            kind,
            room: room.to_owned(),
            id,
            owner: self.owner(caller),
        })
    }

    /// Every worker's figures, summed.
    pub async fn metrics(&self) -> Result<super::metrics::Snapshot, SignalError> {
        use super::metrics::SocketView;
        let mut total: Option<super::metrics::Snapshot> = None;
        for media_loop in &self.loops {
            let part = media_loop.ask(|worker, _| worker.snapshot()).await?;
            match &mut total {
                Some(total) => total.merge(part),
                None => total = Some(part),
            }
        }
        let mut total = total.ok_or(SignalError::ShuttingDown)?;
        total.offers_refused = self.offers_refused.load(Ordering::Relaxed);
        let per_second = self.config.limits.joins_per_client_per_second;
        let joins_refused = self.joins_refused.load(Ordering::Relaxed);
        (total.node).refuse_many(LimitError::ClientRate(per_second), joins_refused);
        if let Some(socket) = self.config.socket {
            total.socket = Some(SocketView {
                receive_buffer: socket.receive,
                send_buffer: socket.send,
                receive_overflows: socket.inode.and_then(receive_overflows),
            });
        }
        total.tcp = self.config.tcp.as_ref().map(|tcp| tcp.view());
        total.http_connections_refused = self.config.http_clients.as_ref().map(|c| c.refused());
        Ok(total)
    }

    /// The rooms with a session on this node, every worker's.
    pub async fn room_names(&self) -> Result<Vec<String>, SignalError> {
        let mut names = Vec::new();
        for media_loop in &self.loops {
            let part = media_loop
                .ask(|worker, _| {
                    worker
                        .core
                        .room_names()
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
                .await?;
            names.extend(part);
        }
        Ok(names)
    }

    /// Every room on this node as the media relay follows it.
    pub async fn relay_rooms(&self) -> Result<Vec<RoomRelays>, SignalError> {
        self.ask_every(|worker, _| worker.core.relay_rooms()).await
    }

    /// What `request` answers on every worker, one after the other, gathered.
    pub async fn ask_every<T: Send + 'static>(
        &self,
        request: impl Fn(&mut Worker, Instant) -> Vec<T> + Clone + Send + 'static,
    ) -> Result<Vec<T>, SignalError> {
        let mut gathered = Vec::new();
        for media_loop in &self.loops {
            gathered.extend(media_loop.ask(request.clone()).await?);
        }
        Ok(gathered)
    }

    /// Whether `room` is a name this node serves (its limits take it): another node's
    /// request for the room's data names it.
    pub fn serves_room(&self, room: &str) -> bool {
        self.config.limits.check_room_name(room).is_ok()
    }

    /// The media relay between nodes, when this node has one.
    pub fn relay(&self) -> Option<Arc<RelayService>> {
        self.relay.get().and_then(Weak::upgrade)
    }

    /// The worker that serves `room`.
    fn worker(&self, room: &str) -> WorkerId {
        worker_for_room(room, self.loops.len())
    }

    /// The loop of the worker that serves `room`, which every request about the room asks.
    fn loop_of(&self, room: &str) -> Result<&MediaLoopHandle, SignalError> {
        let worker = self.worker(room);
        self.loops.get(worker).ok_or(SignalError::ShuttingDown)
    }

    /// Runs `act` on the session of a resource URL, once the caller holds a grant of its
    /// kind in its room, and answers what `act` returns; see [`with_session`](Self::with_session).
    async fn on_session<T: Send + 'static>(
        &self,
        resource: (Kind, &str, &str),
        caller: Caller<'_>,
        act: impl FnOnce(&mut Worker, PeerId, Instant) -> Result<T, CoreError> + Send + 'static,
    ) -> Result<T, SignalError> {
        let resource = self.resource(resource, caller)?;
        Ok(self.with_session(resource, act).await??)
    }

    /// Runs `act` on the session a resource URL names, in the same turn of its worker's loop
    /// that finds the session there, of that kind and the caller's: one round trip, and
    /// nothing between the check and the act. The outer error: the loop is gone; the inner:
    /// what the core refused.
    async fn with_session<T: Send + 'static>(
        &self,
        resource: Resource,
        act: impl FnOnce(&mut Worker, PeerId, Instant) -> Result<T, CoreError> + Send + 'static,
    ) -> Result<Result<T, CoreError>, SignalError> {
        let media_loop = self.loop_of(&resource.room)?;
        let acted = media_loop.ask(move |worker, now| {
            let id = worker.core.resource(&resource)?;
            act(worker, id, now)
        });
        Ok(acted.await?)
    }

    /// Parses an offer within the node's limits on its size.
    fn parse_offer(&self, text: &str) -> Result<Offer, SignalError> {
        let limits = &self.config.limits;
        Self::offer_within(text, sdp::MAX_SDP_LEN, limits.sections_per_offer)
    }

    /// Parses an offer of at most `max_len` bytes and `limit` m-sections.
    fn offer_within(text: &str, max_len: usize, limit: usize) -> Result<Offer, SignalError> {
        let offer = sdp::parse_offer_within(text, max_len)?;
        let fingerprint = &offer.fingerprint;
        if let Err(refused) = check_fingerprint(&fingerprint.algorithm, &fingerprint.value) {
            return Err(SignalError::BadFingerprint(refused.to_string()));
        }
        if offer.media.len() > limit {
            return Err(SignalError::OfferTooLarge {
                what: "m-sections",
                found: offer.media.len(),
                limit,
            });
        }
        Ok(offer)
    }

    fn check_tracks(&self, found: usize) -> Result<(), SignalError> {
        let limit = self.config.limits.tracks_per_offer;
        if found > limit {
            return Err(SignalError::OfferTooLarge {
                what: "sending m-sections",
                found,
                limit,
            });
        }
        Ok(())
    }

    /// A session's owner: the credential it was created with, unless the node is open (then
    /// the unguessable resource URL is what proves it).
    fn owner(&self, caller: Caller<'_>) -> Option<Owner> {
        if self.auth.is_open() {
            return None;
        }
        caller.authorization.map(|a| Owner::of(a.trim()))
    }

    /// Our ICE credentials for a new session, and what else the core keeps of it.
    fn join(&self, room: &str, offer: &Offer, caller: Caller<'_>) -> Join {
        let (mut local_ufrag, local_pwd) = sdp::random_ice_credentials();
        // Marked with the room's worker, so a worker that reads the session's first binding
        // request before ICE bound its address knows whose it is.
        if self.loops.len() > 1 {
            local_ufrag = mark_ufrag(self.worker(room), &local_ufrag);
        }
        let ice = IceCredentials {
            local_ufrag,
            local_pwd,
        };
        Join {
            fingerprint: Some(offer.fingerprint.clone()),
            owner: self.owner(caller),
            client: caller.client,
            remote_ice: Some(RemoteIce {
                ufrag: offer.ice_ufrag.clone(),
                pwd: offer.ice_pwd.clone(),
            }),
            ..Join::new(room, ice)
        }
    }

    fn answer_params(
        &self,
        ice: &IceCredentials,
        extmap_allow_mixed: bool,
        media: Vec<AnswerMedia>,
    ) -> AnswerParams {
        AnswerParams {
            ice_ufrag: ice.local_ufrag.clone(),
            ice_pwd: ice.local_pwd.clone(),
            fingerprint: self.config.fingerprint.clone(),
            candidates: vec![self.config.candidate],
            tcp_candidate: self.config.tcp_candidate,
            extmap_allow_mixed,
            video_fmtp_suffix: self.publisher_bitrate(),
            media,
            origin: None,
        }
    }

    /// The start (and floor) bitrate a publisher's video is pinned at, written after the
    /// format parameters of every section the node receives in: a WHIP publisher's and a
    /// conference participant's alike, so neither starts at the browser's default estimate.
    fn publisher_bitrate(&self) -> Option<String> {
        let kbps = self.config.publisher_bitrate_kbps;
        (kbps > 0).then(|| format!("x-google-min-bitrate={kbps};x-google-start-bitrate={kbps}"))
    }
}

/// The reasons of the sections a session is not served, logged: a client that misses a track
/// gets them too, in the response.
fn refused<T>(id: PeerId, sections: &[sdp::Section<T>]) -> Vec<String> {
    let reasons = sdp::refusals(sections);
    for reason in &reasons {
        tracing::info!(peer = %id, %reason, "section not served");
    }
    reasons
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::engine::RouterConfig;
    use crate::node::core::NodeCore;
    use crate::node::media_loop::MediaLoop;

    const PUBLISHER_VP8: &str = include_str!("sdp/fixtures/publisher_vp8.sdp");

    /// Once the media loop has stopped, a request is refused as the node shutting down (503)
    /// rather than left waiting for an answer.
    #[tokio::test]
    async fn a_request_after_the_media_loop_stopped_is_refused_as_shutting_down() {
        let core = NodeCore::new(RouterConfig::default(), Duration::from_secs(3));
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("a socket");
        let (media, handle) = MediaLoop::new(core, Arc::new(socket));
        drop(media);
        let config = SignalingConfig {
            fingerprint: "AB:CD".to_owned(),
            candidate: SocketAddr::from(([127, 0, 0, 1], 9)),
            tcp_candidate: None,
            publisher_bitrate_kbps: 0,
            limits: Limits::default(),
            socket: None,
            tcp: None,
            http_clients: None,
            ice_servers: Vec::new(),
        };
        let signaling = Signaling::new(vec![handle], Auth::open(), config);
        let metrics = signaling.metrics().await;
        assert!(
            matches!(metrics, Err(SignalError::ShuttingDown)),
            "{metrics:?}"
        );
        let caller = Caller::default();
        let published = signaling.publish("room", PUBLISHER_VP8, None, caller).await;
        assert!(
            matches!(published, Err(SignalError::ShuttingDown)),
            "{published:?}"
        );
        let resource = (Kind::Publisher, "room", "0123456789abcdef0123456789abcdef");
        assert_eq!(
            signaling.end(resource, caller).await,
            Err(SignalError::ShuttingDown)
        );
    }
}
