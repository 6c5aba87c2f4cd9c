//! The thin loop around [`NodeCore`]: one task owns the core and the UDP socket, and reads
//! the clock for it. Signaling talks to it through [`Command`]s; everything on the wire, DTLS
//! included, goes through the core.
//!
//! Timers: after every input the loop serves whatever timer of the core is due, and it
//! sleeps until the core's next one, so a stream of datagrams or requests never holds the
//! periodic work (the sweep of silent sessions, keyframe requests, reports) back.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use selector::Layer;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};

use super::batch::{self, Batch, RecvBatch};
use super::core::{CoreError, Negotiated, NodeCore, ParticipantOffer, Resource, MAX_DATAGRAM};
use super::event_queue::{event_queue, Closed, EventReceiver, EventSender};
use super::memory;
use super::metrics::{DropReason, Snapshot};
use super::participant::Choice;
use super::peer::{Join, PeerId, Publisher};
use super::room_view::RoomView;
use super::shard::{Handoff, Shard};
use super::signaling::{self, SignalError, WatchRequest, Watched};
use super::stats::ViewerStats;
use crate::engine::rtcp::WallClock;
use crate::engine::TrackId;

/// What signaling asks of the media loop; each carries where the answer goes.
#[derive(Debug)]
pub enum Command {
    /// A WHIP offer, negotiated by signaling: the publisher added with its tracks.
    Publish {
        /// The session's room, ICE credentials, fingerprint, owner and client.
        join: Join,
        /// The tracks the answer accepted.
        publisher: Publisher,
        /// The new session's id, or why the core refused it.
        reply: oneshot::Sender<Result<PeerId, CoreError>>,
    },
    /// A WHEP offer: negotiated and the viewer added in the same turn.
    Watch {
        /// The viewer's join, offer and layer choice, negotiated against the room's codecs in the
        /// loop.
        request: WatchRequest,
        /// The new session and its answer, or why it was refused.
        reply: oneshot::Sender<Result<Watched, SignalError>>,
    },
    /// A conference participant joins with its offer.
    Join {
        /// The session's room, credentials and the name it goes by.
        join: Join,
        /// What signaling made of its offer.
        offer: ParticipantOffer,
        /// What the answer must say, or why the core refused.
        reply: oneshot::Sender<Result<Negotiated, CoreError>>,
    },
    /// A participant's new offer, with the version its `If-Match` named.
    Renegotiate {
        /// The participant's resource URL and credential.
        resource: Resource,
        /// `None` when the request had no `If-Match`.
        if_match: Option<u64>,
        /// What signaling made of the new offer.
        offer: ParticipantOffer,
        /// What the new answer must say, or why the core refused.
        reply: oneshot::Sender<Result<Negotiated, CoreError>>,
    },
    /// A participant's event stream: the room as it is, then its changes.
    Events {
        /// The participant's resource URL and credential.
        resource: Resource,
        /// The receiving end of the stream's queue, which opens with the room's state.
        reply: oneshot::Sender<Result<EventReceiver, CoreError>>,
    },
    /// A participant's choice for one of the room's tracks.
    Choose {
        /// The participant's resource URL and credential.
        resource: Resource,
        /// The room's track the choice is for.
        track: TrackId,
        /// The layer it wants of that track, or that it is paused.
        choice: Choice,
        /// Done, or why not (no such track, not a participant).
        reply: oneshot::Sender<Result<(), CoreError>>,
    },
    /// The room's state.
    RoomState {
        /// The room's name.
        room: String,
        /// `None` when nobody is in the room.
        reply: oneshot::Sender<Option<RoomView>>,
    },
    /// Something done to a session through its resource URL.
    Resource {
        /// The resource URL and the credential it came with.
        resource: Resource,
        /// What to do once the resource is found to be the caller's.
        action: Action,
        /// Done, or why not (unknown, not the owner).
        reply: oneshot::Sender<Result<(), CoreError>>,
    },
    /// Sessions and counters of the worker, for `/metrics` (summed over the workers).
    Metrics {
        /// The worker's snapshot.
        reply: oneshot::Sender<Snapshot>,
    },
    /// A viewer session's estimate and layers, through its resource URL.
    ViewerStats {
        /// The viewer's resource URL and credential.
        resource: Resource,
        /// The stats, or why not.
        reply: oneshot::Sender<Result<ViewerStats, CoreError>>,
    },
}

impl Command {
    /// The room the command is about: the worker that serves that room takes it.
    pub fn room(&self) -> Option<&str> {
        match self {
            Self::Publish { join, .. } | Self::Join { join, .. } => Some(&join.room),
            Self::Watch { request, .. } => Some(&request.join.room),
            Self::RoomState { room, .. } => Some(room),
            Self::Resource { resource, .. }
            | Self::ViewerStats { resource, .. }
            | Self::Renegotiate { resource, .. }
            | Self::Events { resource, .. }
            | Self::Choose { resource, .. } => Some(&resource.room),
            Self::Metrics { .. } => None,
        }
    }
}

/// What a request does to an existing session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Only checks that the resource is the caller's (a trickle PATCH).
    Check,
    /// Ends the session (`DELETE`).
    End,
    /// A viewer's new layer choice (`PATCH` with JSON).
    SetLayer(Layer),
}

/// Longest sleep while the core has no timer (no session has come yet).
const IDLE: Duration = Duration::from_secs(1);

/// Least time between two hand-backs of freed memory after sessions left.
pub const RELEASE_INTERVAL: Duration = Duration::from_secs(5);

/// The loop's clock: tokio's, so tests can run the loop in paused (simulated) time.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// The task that owns one worker's [`NodeCore`] and UDP socket: it reads datagrams into the
/// core, sends what the core polls out, wakes for the core's timers and serves signaling's
/// [`Command`]s, one at a time between them.
pub struct MediaLoop {
    core: NodeCore,
    socket: Arc<UdpSocket>,
    commands: mpsc::Receiver<Command>,
    /// What one flush sends, in as few calls as it fits.
    batch: Batch,
    /// Sessions removed since memory was last handed back, and when it may be next.
    reaped: usize,
    next_release: Instant,
    /// This loop's part when the node has several workers.
    shard: Option<Shard>,
    /// Participants' event streams.
    event_streams: HashMap<PeerId, EventSender>,
}

impl std::fmt::Debug for MediaLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaLoop")
            .field("core", &self.core)
            .finish_non_exhaustive()
    }
}

impl MediaLoop {
    /// The loop around `core`, reading and sending on `socket`, taking `commands`; it anchors
    /// the core's wall clock.
    pub fn new(core: NodeCore, socket: Arc<UdpSocket>, commands: mpsc::Receiver<Command>) -> Self {
        let mut core = core;
        // Sender reports carry wall-clock NTP time (RFC 3550 section 6.4.1): the one clock read
        // the engine needs, done here and handed in as a pair with the loop's own clock.
        core.set_wall_clock(WallClock {
            instant: now(),
            unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default(),
        });
        Self {
            core,
            socket,
            commands,
            batch: Batch::new(MAX_DATAGRAM),
            reaped: 0,
            next_release: now(),
            shard: None,
            event_streams: HashMap::new(),
        }
    }

    /// The same loop as one worker of several (its core made
    /// [`with_shard`](NodeCore::with_shard) with the same steering).
    pub fn with_shard(mut self, shard: Shard) -> Self {
        self.shard = Some(shard);
        self
    }

    /// Runs until every command sender is gone (the node shuts down).
    pub async fn run(mut self) {
        let mut inbound = RecvBatch::new(2048);
        // One of several workers takes its datagrams from the reader, not the socket.
        let reads = self.shard.is_none();
        loop {
            let deadline = self.serve_timers();
            tokio::select! {
                readable = self.socket.readable(), if reads => match readable {
                    Ok(()) => self.receive(&mut inbound),
                    Err(e) => tracing::debug!("udp receive: {e}"),
                },
                command = self.commands.recv() => match command {
                    Some(command) => self.on_command(command),
                    None => break,
                },
                Some((from, data)) = handed_over(&mut self.shard) => self.take_handed_over(from, &data),
                () = tokio::time::sleep_until(deadline.into()) => {}
            }
            self.flush();
        }
    }

    /// Runs the core's timers if due and says when to wake next.
    fn serve_timers(&mut self) -> Instant {
        let now = now();
        if self.core.poll_timeout().is_some_and(|at| at <= now) {
            self.core.handle_timeout(now);
            self.flush();
        }
        if self.reaped > 0 && now >= self.next_release {
            self.reaped = 0;
            self.next_release = now + RELEASE_INTERVAL;
            // Off the media loop: trimming a large heap takes milliseconds.
            tokio::task::spawn_blocking(memory::release_freed);
        }
        self.core.poll_timeout().unwrap_or(now + IDLE)
    }

    /// Takes what waits on the socket, a batch at a time; what it makes the core send goes
    /// out together, after the batch.
    fn receive(&mut self, inbound: &mut RecvBatch) {
        let socket = Arc::clone(&self.socket);
        batch::receive_each(&*socket, inbound, |from, data| self.on_datagram(from, data));
    }

    /// A datagram the reader handed over, and up to a batch more that wait behind it: what
    /// they make the core send goes out together, as after a batch read from the socket
    /// (a loop turn and a send call per datagram cost more than the datagram itself).
    fn take_handed_over(&mut self, from: SocketAddr, data: &[u8]) {
        self.on_datagram(from, data);
        for _ in 1..batch::BATCH_LEN {
            let Some(Ok((from, data))) = self.shard.as_mut().map(|s| s.inbox.try_recv()) else {
                break;
            };
            self.on_datagram(from, &data);
        }
    }

    fn on_datagram(&mut self, from: SocketAddr, data: &[u8]) {
        self.core.handle_datagram(now(), from, data);
    }

    fn on_command(&mut self, command: Command) {
        let now = now();
        // A dropped reply means the HTTP request went away; nothing to tell.
        match command {
            Command::Publish {
                join,
                publisher,
                reply,
            } => {
                let room = join.room.clone();
                let added = self.core.add_publisher(now, join, publisher);
                reply_joined(added, &room, "publisher", reply);
            }
            Command::Watch { request, reply } => {
                let room = request.join.room.clone();
                let watched = signaling::watch(&mut self.core, now, request);
                if let Ok(watched) = &watched {
                    tracing::info!(peer = %watched.id, room, "viewer joined");
                }
                let _ = reply.send(watched);
            }
            Command::Join { join, offer, reply } => {
                let _ = reply.send(self.core.add_participant(now, join, offer));
            }
            Command::Renegotiate {
                resource,
                if_match,
                offer,
                reply,
            } => {
                let renegotiated = self
                    .core
                    .resource(&resource)
                    .and_then(|id| self.core.renegotiate(now, id, if_match, offer));
                let _ = reply.send(renegotiated);
            }
            Command::Events { resource, reply } => {
                let _ = reply.send(self.open_events(now, &resource));
            }
            Command::Choose {
                resource,
                track,
                choice,
                reply,
            } => {
                let chosen = self
                    .core
                    .resource(&resource)
                    .and_then(|id| self.core.set_choice(id, track, choice));
                let _ = reply.send(chosen);
            }
            Command::RoomState { room, reply } => {
                let _ = reply.send(self.core.room_view(&room, now));
            }
            Command::Resource {
                resource,
                action,
                reply,
            } => {
                let _ = reply.send(self.on_resource(&resource, action));
            }
            Command::Metrics { reply } => {
                if let Some(shard) = &self.shard {
                    let lost = shard.lost.swap(0, std::sync::atomic::Ordering::Relaxed);
                    self.core.count_dropped(DropReason::HandoffFull, lost);
                }
                let mut snapshot = self.core.snapshot();
                snapshot.event_streams = self.event_streams.len();
                snapshot.event_stream_waiting_bytes =
                    self.event_streams.values().map(|s| s.waiting().1).sum();
                let _ = reply.send(snapshot);
            }
            Command::ViewerStats { resource, reply } => {
                let stats = self.core.resource(&resource).and_then(|id| {
                    // The resource names a viewer: only a publisher would have none.
                    self.core.viewer_stats(id).ok_or(CoreError::NotAViewer)
                });
                let _ = reply.send(stats);
            }
        }
    }

    fn on_resource(&mut self, resource: &Resource, action: Action) -> Result<(), CoreError> {
        let id = self.core.resource(resource)?;
        match action {
            Action::Check => Ok(()),
            Action::End => {
                tracing::info!(peer = %id, "session ended by its client");
                self.core.remove_peer(id)
            }
            Action::SetLayer(target) => self.core.set_target(id, target),
        }
    }

    /// Sends everything the core has to send, a batch per call, then forgets removed
    /// sessions' event streams. Never waits for the socket: a full send buffer (a viewer that
    /// does not read) loses what is left of the batch, which NACK repairs, instead of
    /// stalling every other session behind it.
    fn flush(&mut self) {
        loop {
            while let Some(buffer) = self.batch.next_buffer() {
                let Some((to, len)) = self.core.poll_datagram(buffer) else {
                    break;
                };
                self.batch.commit(to, len);
            }
            if self.batch.is_empty() {
                break;
            }
            let more = self.batch.is_full();
            let outcome = batch::send_all(&*self.socket, &self.batch);
            self.core.count_sent(outcome);
            self.batch.clear();
            if !more {
                break;
            }
        }
        while let Some(id) = self.core.poll_removed() {
            // Its event stream ends with it.
            self.event_streams.remove(&id);
            self.reaped += 1;
        }
        self.deliver_session_events();
    }

    /// A participant's event stream, opening with the room as it is; a stream it had before
    /// ends.
    fn open_events(
        &mut self,
        now: Instant,
        resource: &Resource,
    ) -> Result<EventReceiver, CoreError> {
        let id = self.core.resource(resource)?;
        let snapshot = self
            .core
            .session_snapshot(id, now)
            .ok_or(CoreError::NotAParticipant)?;
        let (tx, rx) = event_queue();
        // A new stream has room for its first event, and its receiver is here.
        let _ = tx.send(snapshot.to_wire());
        self.event_streams.insert(id, tx);
        Ok(rx)
    }

    /// The core's events to their participants' streams. A stream whose client does not
    /// read them is closed at its bound rather than let grow (counted): the client opens
    /// another and starts again from the room's state.
    fn deliver_session_events(&mut self) {
        while let Some((id, event)) = self.core.poll_session_event() {
            let Some(stream) = self.event_streams.get(&id) else {
                continue;
            };
            if let Err(closed) = stream.send(event.to_wire()) {
                self.event_streams.remove(&id);
                if closed == Closed::Behind {
                    self.core.count_dropped(DropReason::EventStreamBehind, 1);
                }
            }
        }
    }
}

/// The next datagram another worker handed over; never, for the only worker.
async fn handed_over(shard: &mut Option<Shard>) -> Option<Handoff> {
    match shard {
        Some(shard) => shard.inbox.recv().await,
        None => std::future::pending().await,
    }
}

/// Logs a session that joined `room` as `role`, and answers the request that added it.
fn reply_joined(
    added: Result<PeerId, CoreError>,
    room: &str,
    role: &str,
    reply: oneshot::Sender<Result<PeerId, CoreError>>,
) {
    if let Ok(id) = added {
        tracing::info!(peer = %id, room, "{role} joined");
    }
    let _ = reply.send(added);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::RouterConfig;
    use crate::node::peer::IceCredentials;

    async fn metrics(commands: &mpsc::Sender<Command>) -> Snapshot {
        let (reply, snapshot) = oneshot::channel();
        commands
            .send(Command::Metrics { reply })
            .await
            .expect("the loop runs");
        snapshot.await.expect("answered")
    }

    /// A request every 100 ms, in simulated time: the loop still sweeps the silent session out
    /// within a second of its timeout (before, each request re-armed a one-second sleep and
    /// the sweep never ran).
    #[tokio::test(start_paused = true)]
    async fn the_sweep_runs_under_a_request_every_100_ms() {
        let core = NodeCore::new(RouterConfig::default(), Duration::from_secs(3));
        let socket = Arc::new(UdpSocket::bind("127.0.0.1:0").await.expect("a socket"));
        let (commands, receiver) = mpsc::channel(8);
        let media = MediaLoop::new(core, socket, receiver);
        tokio::spawn(media.run());
        let ice = IceCredentials {
            local_ufrag: "ufrag".into(),
            local_pwd: "a-password-of-24-chars!!".into(),
        };
        let offer = crate::node::sdp::parse_offer(include_str!("sdp/fixtures/viewer_recvonly.sdp"))
            .expect("the fixture parses");
        let (reply, added) = oneshot::channel();
        let request = WatchRequest {
            join: Join::new("room", ice),
            offer,
            target: Layer::MAX,
            source: None,
        };
        let watch = Command::Watch { request, reply };
        commands.send(watch).await.expect("the loop runs");
        added.await.expect("answered").expect("room for a viewer");
        let started = tokio::time::Instant::now();
        while metrics(&commands).await.viewers == 1 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(started.elapsed() < Duration::from_secs(10), "never swept");
        }
        let swept = started.elapsed();
        assert!(
            swept > Duration::from_secs(3) && swept <= Duration::from_millis(4100),
            "swept at {swept:?}"
        );
    }
}
