//! The thin loop around [`NodeCore`]: one task owns the core and the UDP socket, and reads
//! the clock for it. Signaling talks to it through [`MediaLoopHandle::ask`]: a closure the
//! loop runs against its [`Worker`] at the current time, so each request is one round trip
//! and what it checks still holds when it acts. Everything on the wire, DTLS included, goes
//! through the core.
//!
//! Timers: after every input the loop serves whatever timer of the core is due, and it
//! sleeps until the core's next one, so a stream of datagrams or requests never holds the
//! periodic work (the sweep of silent sessions, keyframe requests, reports) back.
//!
//! Reads: the only worker reads the socket itself, through [`SpacedReads`]: at each arrival
//! while datagrams are few, and once every `udp_read_spacing_us` while they keep coming (the
//! loop then wakes for that read as it wakes for a timer).

use std::borrow::Cow;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};

use super::arrival::{self, Arrivals};
use super::batch::{self, Batch, RecvBatch, Segmentation, Sent};
use super::core::{CoreError, NodeCore, RelayPull, MAX_DATAGRAM};
use super::event_queue::{event_queue, Closed, EventReceiver, EventSender};
use super::memory;
use super::metrics::{DropReason, Snapshot};
use super::peer::PeerId;
use super::remote::Remote;
use super::shard::{Handoff, Shard};
use super::spaced_reads::SpacedReads;
use super::tcp::{Links, TcpInput};
use crate::engine::rtcp::WallClock;

/// A request to the media loop: run once against its worker, at the loop's `now`.
type Request = Box<dyn FnOnce(&mut Worker, Instant) + Send>;

/// Requests queued for a loop before a sender waits.
const REQUEST_QUEUE: usize = 256;

/// The media loop has stopped (the node with it): a request was not run, or its answer was
/// lost with the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the media loop has stopped")]
pub struct LoopGone;

/// Where signaling sends one media loop its requests; the loop ends when every handle is
/// gone.
#[derive(Debug)]
pub struct MediaLoopHandle {
    requests: mpsc::Sender<Request>,
}

impl MediaLoopHandle {
    /// Runs `request` on the loop's worker at the loop's current time and answers what it
    /// returns: one round trip, served in one turn of the loop, so nothing else reaches the
    /// core between what the request checks and what it does. What the core queued meanwhile
    /// (datagrams to send, sessions removed, events) goes out right after, as after any input.
    pub async fn ask<T: Send + 'static>(
        &self,
        request: impl FnOnce(&mut Worker, Instant) -> T + Send + 'static,
    ) -> Result<T, LoopGone> {
        let (reply, answer) = oneshot::channel();
        let request: Request = Box::new(move |worker, now| {
            // A dropped reply means the HTTP request went away; nothing to tell.
            let _ = reply.send(request(worker, now));
        });
        self.requests.send(request).await.map_err(|_| LoopGone)?;
        answer.await.map_err(|_| LoopGone)
    }
}

/// What a request runs against: one worker's core, and what the loop keeps beside it that a
/// request opens or reads (participants' event streams hold channel ends, which the sans-IO
/// core does not). The socket, the send batch and the clock stay the loop's own.
#[derive(Debug)]
pub struct Worker {
    /// The worker's sessions and engine.
    pub core: NodeCore,
    /// Participants' event streams.
    event_streams: HashMap<PeerId, EventSender>,
    /// Datagrams the reader dropped because this worker's queue was full, not yet counted;
    /// `None` for the only worker, which reads the socket itself.
    handoff_lost: Option<Arc<AtomicU64>>,
    /// Where the core's pulls go: the relay between nodes, on a node that has it.
    pulls: Option<mpsc::Sender<RelayPull>>,
}

impl Worker {
    /// Participant `id`'s event stream, opening with the room as it is; a stream it had
    /// before ends.
    pub fn open_events(&mut self, now: Instant, id: PeerId) -> Result<EventReceiver, CoreError> {
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

    /// Sessions and counters of the worker, for `/metrics` (summed over the workers): the
    /// core's, the hand-off losses counted first, and the event streams'.
    pub fn snapshot(&mut self) -> Snapshot {
        if let Some(lost) = &self.handoff_lost {
            let lost = lost.swap(0, Ordering::Relaxed);
            self.core.count_dropped(DropReason::HandoffFull, lost);
        }
        let mut snapshot = self.core.snapshot();
        snapshot.event_streams = self.event_streams.len();
        snapshot.event_stream_waiting_bytes =
            self.event_streams.values().map(|s| s.waiting().1).sum();
        snapshot
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

    /// The core's pulls to the relay between nodes, never waiting: one the relay's queue has
    /// no room for is counted, and the core asks for it again when next wanted.
    fn hand_pulls(&mut self) {
        while let Some(pull) = self.core.poll_relay_pull() {
            let Some(pulls) = &self.pulls else {
                continue;
            };
            if let Err(refused) = pulls.try_send(pull) {
                let pull = match refused {
                    mpsc::error::TrySendError::Full(pull)
                    | mpsc::error::TrySendError::Closed(pull) => pull,
                };
                self.core.relay_pull_dropped(&pull);
            }
        }
    }
}

/// Longest sleep while the core has no timer (no session has come yet).
const IDLE: Duration = Duration::from_secs(1);

/// Least time between two hand-backs of freed memory after sessions left.
pub const RELEASE_INTERVAL: Duration = Duration::from_secs(5);

/// The loop's clock: tokio's, so tests can run the loop in paused (simulated) time.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// The task that owns one [`Worker`] and the UDP socket: it reads datagrams into the core,
/// sends what the core polls out, wakes for the core's timers and runs signaling's requests,
/// one at a time between them.
pub struct MediaLoop {
    worker: Worker,
    /// The media socket, which the loop sends on (and reads, as the only worker).
    socket: Arc<std::net::UdpSocket>,
    /// Least time between two reads of the socket while datagrams keep coming.
    read_spacing: Duration,
    /// Whether the socket's runs to one destination leave segmented.
    segmentation: Arc<Segmentation>,
    requests: mpsc::Receiver<Request>,
    /// What one flush sends, in as few calls as it fits.
    batch: Batch,
    /// Sessions removed since memory was last handed back, and when it may be next.
    reaped: usize,
    next_release: Instant,
    /// This loop's part when the node has several workers.
    shard: Option<Shard>,
    /// Its part of ICE-TCP, when the node listens for it.
    tcp: Option<TcpPart>,
    /// Its own socket for the media relay's links, on a node that relays.
    relay: Option<Arc<UdpSocket>>,
    /// When datagrams from the media socket arrived, as the core reports them.
    arrivals: Arrivals,
}

/// A worker's part of ICE-TCP: what its sessions' connections hand it, and every
/// connection's send queue.
#[derive(Debug)]
pub struct TcpPart {
    /// Frames and closings of the connections whose sessions are this worker's.
    pub inbox: mpsc::Receiver<TcpInput>,
    /// Where packets for a connection go.
    pub links: Arc<Links>,
}

impl std::fmt::Debug for MediaLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaLoop")
            .field("worker", &self.worker)
            .finish_non_exhaustive()
    }
}

impl MediaLoop {
    /// The loop around `core`, reading and sending on the non-blocking `socket` (segmenting
    /// runs where the kernel can), and the handle that sends it requests; it anchors the
    /// core's wall clock.
    pub fn new(core: NodeCore, socket: Arc<std::net::UdpSocket>) -> (Self, MediaLoopHandle) {
        let mut core = core;
        // Sender reports carry wall-clock NTP time (RFC 3550 section 6.4.1): the one clock read
        // the engine needs, done here and handed in as a pair with the loop's own clock.
        core.set_wall_clock(WallClock {
            instant: now(),
            unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default(),
        });
        let (handle, requests) = mpsc::channel(REQUEST_QUEUE);
        let media_loop = Self {
            worker: Worker {
                core,
                event_streams: HashMap::new(),
                handoff_lost: None,
                pulls: None,
            },
            segmentation: Arc::new(Segmentation::new(batch::kernel_segments(&*socket))),
            socket,
            read_spacing: Duration::ZERO,
            requests,
            batch: Batch::new(MAX_DATAGRAM),
            reaped: 0,
            next_release: now(),
            shard: None,
            tcp: None,
            relay: None,
            arrivals: Arrivals::default(),
        };
        (media_loop, MediaLoopHandle { requests: handle })
    }

    /// The same loop as one worker of several (its core made
    /// [`with_shard`](NodeCore::with_shard) with the same steering).
    pub fn with_shard(mut self, shard: Shard) -> Self {
        self.worker.handoff_lost = Some(Arc::clone(&shard.lost));
        self.shard = Some(shard);
        self
    }

    /// The same loop segmenting as `segmentation` says, which every worker on the socket
    /// shares (the node's `udp_gso` setting, and a refusal met by any of them).
    pub fn with_segmentation(mut self, segmentation: Arc<Segmentation>) -> Self {
        self.segmentation = segmentation;
        self
    }

    /// The same loop handing what its core asks to pull from other nodes to `pulls` (the
    /// relay between nodes), which turns the core's pulls on.
    pub fn with_pulls(mut self, pulls: mpsc::Sender<RelayPull>) -> Self {
        self.worker.core.enable_relay_pulls();
        self.worker.pulls = Some(pulls);
        self
    }

    /// The same loop with its own socket for the media relay's links: its core's links to
    /// other nodes' workers go from and to it, so that each pair of workers of two nodes has
    /// links of its own (the one media socket would steer every link of a node to one worker).
    pub fn with_relay(mut self, relay: Arc<UdpSocket>) -> Self {
        self.relay = Some(relay);
        self
    }

    /// The same loop reading its socket at most once every `spacing` while datagrams keep
    /// coming (the node's `udp_read_spacing_us`), as the only worker; see [`SpacedReads`].
    pub fn with_read_spacing(mut self, spacing: Duration) -> Self {
        self.read_spacing = spacing;
        self
    }

    /// The same loop taking its sessions' ICE-TCP connections too.
    pub fn with_tcp(mut self, tcp: TcpPart) -> Self {
        self.tcp = Some(tcp);
        self
    }

    /// Runs until every [`MediaLoopHandle`] is gone (the node shuts down).
    pub async fn run(mut self) {
        let mut inbound = RecvBatch::new(2048);
        let mut from_links = RecvBatch::new(2048);
        // One of several workers takes its datagrams from the reader, not the socket.
        let mut reads = match self.shard {
            Some(_) => None,
            None => match SpacedReads::new(Arc::clone(&self.socket), self.read_spacing) {
                Ok(reads) => Some(reads),
                Err(e) => return tracing::error!("the media socket cannot be polled: {e}"),
            },
        };
        loop {
            let deadline = self.serve_timers();
            let next_read = reads.as_ref().and_then(SpacedReads::next_read);
            let wake = next_read.map_or(deadline, |at| at.min(deadline));
            tokio::select! {
                readable = socket_readable(&reads) => match readable {
                    Ok(()) => self.receive(&mut reads, &mut inbound),
                    Err(e) => tracing::debug!("udp receive: {e}"),
                },
                request = self.requests.recv() => match request {
                    Some(request) => request(&mut self.worker, now()),
                    None => break,
                },
                Some(handoff) = handed_over(&mut self.shard) => self.take_handed_over(handoff),
                Some(input) = from_tcp(&mut self.tcp) => self.take_from_tcp(input),
                readable = relay_readable(&self.relay) => match readable {
                    Ok(()) => self.receive_links(&mut from_links),
                    Err(e) => tracing::debug!("relay socket receive: {e}"),
                },
                () = tokio::time::sleep_until(wake.into()) => {
                    if next_read.is_some_and(|at| at <= now()) {
                        self.receive(&mut reads, &mut inbound);
                    }
                }
            }
            // Whatever the input made the core queue, a request's included.
            self.flush();
            self.worker.core.count_turn();
        }
    }

    /// Runs the core's timers if due and says when to wake next.
    fn serve_timers(&mut self) -> Instant {
        let now = now();
        if self.worker.core.poll_timeout().is_some_and(|at| at <= now) {
            self.worker.core.handle_timeout(now);
            self.flush();
        }
        if self.reaped > 0 && now >= self.next_release {
            self.reaped = 0;
            self.next_release = now + RELEASE_INTERVAL;
            // Off the media loop: trimming a large heap takes milliseconds.
            tokio::task::spawn_blocking(memory::release_freed);
        }
        self.worker.core.poll_timeout().unwrap_or(now + IDLE)
    }

    /// Takes what waits on the socket, a batch at a time; what it makes the core send goes
    /// out together, after the batch.
    fn receive(&mut self, reads: &mut Option<SpacedReads>, inbound: &mut RecvBatch) {
        let Some(reads) = reads else {
            return;
        };
        let read_at = now();
        let read = reads.read(read_at, inbound);
        batch::each_received(read, inbound, |from, data, waited| {
            self.on_datagram(from, Cow::Borrowed(data), arrival::stamped(read_at, waited));
        });
    }

    /// Takes what waits on the relay socket, as [`receive`](Self::receive) does the media
    /// socket's.
    fn receive_links(&mut self, inbound: &mut RecvBatch) {
        let Some(relay) = self.relay.clone() else {
            return;
        };
        let core = &mut self.worker.core;
        // Read at each arrival: the read's instant is the datagram's.
        batch::receive_each(&*relay, inbound, |from, data, _| {
            core.handle_packet(now(), Remote::Link(from), data);
        });
    }

    /// A datagram the reader handed over, and up to a batch more that wait behind it: what
    /// they make the core send goes out together, as after a batch read from the socket
    /// (a loop turn and a send call per datagram cost more than the datagram itself).
    fn take_handed_over(&mut self, (from, data, arrived): Handoff) {
        self.on_datagram(from, Cow::Owned(data), arrived);
        for _ in 1..batch::BATCH_LEN {
            let Some(Ok((from, data, arrived))) = self.shard.as_mut().map(|s| s.inbox.try_recv())
            else {
                break;
            };
            self.on_datagram(from, Cow::Owned(data), arrived);
        }
    }

    /// What a TCP connection handed over, and up to a batch more behind it, as datagrams
    /// handed over are taken.
    fn take_from_tcp(&mut self, input: TcpInput) {
        let mut next = Some(input);
        for _ in 0..batch::BATCH_LEN {
            match next.take() {
                Some(TcpInput::Frame(from, data)) => {
                    self.worker.core.handle_packet(now(), from, &data);
                }
                Some(TcpInput::Closed(remote)) => self.worker.core.handle_closed(remote),
                None => break,
            }
            next = self.tcp.as_mut().and_then(|t| t.inbox.try_recv().ok());
        }
    }

    /// A datagram from the media socket, stamped with when it `arrived`.
    fn on_datagram(&mut self, from: SocketAddr, data: Cow<'_, [u8]>, arrived: Instant) {
        let arrived = self.arrivals.at(arrived);
        let core = &mut self.worker.core;
        core.handle_datagram_arrived(now(), arrived, from, data);
    }

    /// Sends everything the core has to send, a batch per call, then forgets removed
    /// sessions' event streams. Never waits for the socket: a full send buffer (a viewer that
    /// does not read) loses what is left of the batch, which NACK repairs, instead of
    /// stalling every other session behind it.
    fn flush(&mut self) {
        let worker = &mut self.worker;
        loop {
            while let Some(buffer) = self.batch.next_buffer() {
                let Some((to, len)) = worker.core.poll_datagram(buffer) else {
                    break;
                };
                match to {
                    Remote::Udp(to) => self.batch.commit(to, len),
                    // A connection's packet leaves through its queue; the buffer is reused.
                    Remote::Tcp { id, .. } => {
                        let links = self.tcp.as_ref().map(|t| &t.links);
                        let sent = links.map_or(Err(DropReason::TcpClosed), |links| {
                            links.send(id, &buffer[..len])
                        });
                        if let Err(reason) = sent {
                            worker.core.count_dropped(reason, 1);
                        }
                    }
                    // A link's datagram leaves from the relay socket, one call each: a link
                    // carries one copy of each relayed packet, not one per viewer.
                    Remote::Link(to) => {
                        let relay = self.relay.as_ref();
                        let sent = relay.map(|r| r.try_send_to(&buffer[..len], to));
                        let taken = usize::from(matches!(sent, Some(Ok(_))));
                        worker.core.count_sent(Sent {
                            sent: taken,
                            lost: 1 - taken,
                            calls: 1,
                            messages: taken,
                            ..Sent::default()
                        });
                    }
                }
            }
            if self.batch.is_empty() {
                break;
            }
            let more = self.batch.is_full();
            let outcome = batch::send_all(&*self.socket, &self.batch, &self.segmentation);
            worker.core.count_sent(outcome);
            self.batch.clear();
            if !more {
                break;
            }
        }
        while let Some(id) = worker.core.poll_removed() {
            // Its event stream ends with it.
            worker.event_streams.remove(&id);
            self.reaped += 1;
        }
        worker.deliver_session_events();
        worker.hand_pulls();
    }
}

/// The media socket readable; never, for one of several workers (the reader reads it).
async fn socket_readable(reads: &Option<SpacedReads>) -> std::io::Result<()> {
    match reads {
        Some(reads) => reads.readable().await,
        None => std::future::pending().await,
    }
}

/// The next input from a TCP connection; never, without ICE-TCP.
async fn from_tcp(tcp: &mut Option<TcpPart>) -> Option<TcpInput> {
    match tcp {
        Some(tcp) => tcp.inbox.recv().await,
        None => std::future::pending().await,
    }
}

/// The relay socket readable; never, on a node that does not relay.
async fn relay_readable(relay: &Option<Arc<UdpSocket>>) -> std::io::Result<()> {
    match relay {
        Some(relay) => relay.readable().await,
        None => std::future::pending().await,
    }
}

/// The next datagram another worker handed over; never, for the only worker.
async fn handed_over(shard: &mut Option<Shard>) -> Option<Handoff> {
    match shard {
        Some(shard) => shard.inbox.recv().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::task::Poll;

    use selector::Layer;

    use super::*;
    use crate::engine::RouterConfig;
    use crate::node::peer::{IceCredentials, Join};
    use crate::node::signaling::{watch, WatchRequest};

    /// A loop around a core whose sessions time out after three seconds, not yet running.
    async fn media_loop() -> (MediaLoop, MediaLoopHandle) {
        let core = NodeCore::new(RouterConfig::default(), Duration::from_secs(3));
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("a socket");
        socket.set_nonblocking(true).expect("non-blocking");
        MediaLoop::new(core, Arc::new(socket))
    }

    async fn viewers(handle: &MediaLoopHandle) -> usize {
        let viewers = handle.ask(|worker, _| worker.snapshot().viewers).await;
        viewers.expect("the loop runs")
    }

    /// A request every 100 ms, in simulated time: the loop still sweeps the silent session out
    /// within a second of its timeout (before, each request re-armed a one-second sleep and
    /// the sweep never ran).
    #[tokio::test(start_paused = true)]
    async fn the_sweep_runs_under_a_request_every_100_ms() {
        let (media, handle) = media_loop().await;
        tokio::spawn(media.run());
        let ice = IceCredentials {
            local_ufrag: "ufrag".into(),
            local_pwd: "a-password-of-24-chars!!".into(),
        };
        let offer = crate::node::sdp::parse_offer(include_str!("sdp/fixtures/viewer_recvonly.sdp"))
            .expect("the fixture parses");
        let request = WatchRequest {
            join: Join::new("room", ice),
            offer,
            target: Layer::MAX,
            source: None,
        };
        let added = handle.ask(|worker, now| watch(&mut worker.core, now, request));
        added
            .await
            .expect("the loop runs")
            .expect("room for a viewer");
        let started = tokio::time::Instant::now();
        while viewers(&handle).await == 1 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(started.elapsed() < Duration::from_secs(10), "never swept");
        }
        let swept = started.elapsed();
        assert!(
            swept > Duration::from_secs(3) && swept <= Duration::from_millis(4100),
            "swept at {swept:?}"
        );
    }

    /// Each turn is counted once, whatever woke it: here a request each (the clock paused, so
    /// no timer's turn comes between them).
    #[tokio::test(start_paused = true)]
    async fn each_turn_of_the_loop_is_counted() {
        let (media, handle) = media_loop().await;
        tokio::spawn(media.run());
        let turns = || handle.ask(|worker, _| worker.snapshot().node.loop_turns);
        let first = turns().await.expect("the loop runs");
        let second = turns().await.expect("the loop runs");
        let third = turns().await.expect("the loop runs");
        // Counted after its turn, a request sees the turns before it.
        assert_eq!((second - first, third - second), (1, 1));
    }

    /// A request to a loop that has stopped, or that stops with the request queued, is told
    /// so rather than left waiting.
    #[tokio::test]
    async fn a_request_to_a_stopped_loop_is_told_it_is_gone() {
        let (media, handle) = media_loop().await;
        let mut asked = std::pin::pin!(handle.ask(|worker, _| worker.snapshot().viewers));
        let waits = std::future::poll_fn(|cx| Poll::Ready(asked.as_mut().poll(cx).is_pending()));
        assert!(waits.await, "queued, and waiting for its answer");
        drop(media);
        assert_eq!(
            asked.await,
            Err(LoopGone),
            "the loop stopped with it queued"
        );
        let after = handle.ask(|worker, _| worker.snapshot().viewers).await;
        assert_eq!(after, Err(LoopGone), "asked after the loop stopped");
    }
}
