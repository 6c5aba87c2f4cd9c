//! The HTTP side's connections: at most a fixed number open at once (the rest wait in the
//! kernel's backlog, so the node never runs out of file descriptors) and a share of them per
//! client (past it a connection is closed as it comes), a request head that
//! must arrive in time (a slow-header client is dropped), and keep-alive connections closed
//! once idle; HTTPS with HTTP/2 beside HTTP/1.1 when configured. The routes themselves are in
//! [`http`](super::http).

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use super::client_key::{ClientPlace, PerClient};
use super::forwarded;
use super::tls::ALPN_H2;

/// How the listener treats connections.
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// Open at once; the next connection is accepted when one closes.
    pub connections: usize,
    /// Open at once from one client (a trusted proxy's are not counted): one more is closed
    /// as it comes, so one client cannot hold every connection.
    pub per_client: usize,
    /// From the connection's start (or a request's first byte) to its complete head.
    pub header_timeout: Duration,
    /// A keep-alive connection with nothing read or written for this long is closed.
    pub idle_timeout: Duration,
    /// Requests at once on one HTTP/2 connection.
    pub streams: u32,
}

/// What a request's handler may change about the connection it came on (a request
/// extension): the connection applies it before it next writes.
#[derive(Debug, Clone, Default)]
pub struct ConnectionControl {
    /// A send buffer size asked for; 0: none asked.
    send_buffer: Arc<AtomicUsize>,
    /// How long the connection may carry nothing; zero: no bound.
    idle: Duration,
}

impl ConnectionControl {
    /// How long the connection may carry nothing before it is closed: a response that
    /// streams with pauses writes something more often. `None`: no bound.
    pub fn idle_timeout(&self) -> Option<Duration> {
        Some(self.idle).filter(|idle| !idle.is_zero())
    }

    /// Asks for the connection's kernel send buffer to be `bytes` (a response that streams
    /// for the connection's life to a client that may not read).
    pub fn set_send_buffer(&self, bytes: usize) {
        self.send_buffer.store(bytes, Ordering::Release);
    }

    /// The size asked for since the last call, if any.
    fn take_send_buffer(&self) -> Option<usize> {
        Some(self.send_buffer.swap(0, Ordering::AcqRel)).filter(|&n| n > 0)
    }
}

/// What the HTTP server queues for a connection before it stops taking a streamed body (and
/// the largest request head it reads): a response body is taken only as the connection
/// sends, so a client that does not read leaves what waits counted in the node.
const WRITE_QUEUE: usize = 16 << 10;

/// How long a graceful stop waits for requests in flight.
const DRAIN: Duration = Duration::from_secs(5);

/// How the listener serves: its limits, TLS if configured, and whose forwarded headers it
/// believes.
#[derive(Clone)]
pub struct HttpSettings {
    /// Connections, timeouts and streams.
    pub limits: HttpLimits,
    /// HTTPS, with HTTP/2 by ALPN; `None`: plain HTTP/1.1.
    pub tls: Option<TlsAcceptor>,
    /// Proxies whose `X-Forwarded-For` names the client (see [`forwarded`]).
    pub trusted_proxies: Arc<[IpAddr]>,
    /// The connections each client holds, and those refused.
    pub clients: Arc<HttpClients>,
}

/// A connection refused: its client holds its share already.
#[derive(Debug)]
struct ShareHeld;

/// The HTTP connections each client holds, shared with `/metrics`.
#[derive(Debug, Default)]
pub struct HttpClients {
    open: Arc<PerClient>,
    refused: AtomicU64,
}

impl HttpClients {
    /// Connections closed as they came, their client holding its share.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// A place for a connection from `remote`: always one for a trusted proxy, whose
    /// connections carry many clients' requests.
    fn admit(
        &self,
        remote: IpAddr,
        settings: &HttpSettings,
    ) -> Result<Option<ClientPlace>, ShareHeld> {
        if settings.trusted_proxies.contains(&remote) {
            return Ok(None);
        }
        match self.open.take(remote, settings.limits.per_client) {
            Some(place) => Ok(Some(place)),
            None => {
                self.refused.fetch_add(1, Ordering::Relaxed);
                Err(ShareHeld)
            }
        }
    }
}

impl std::fmt::Debug for HttpSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpSettings")
            .field("limits", &self.limits)
            .field("tls", &self.tls.is_some())
            .field("trusted_proxies", &self.trusted_proxies)
            .field("clients", &self.clients)
            .finish()
    }
}

/// Serves `app` until `shutdown` completes, then lets requests in flight finish.
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    settings: HttpSettings,
    shutdown: impl Future<Output = ()>,
) {
    let cap = settings.limits.connections.max(1);
    let permits = Arc::new(Semaphore::new(cap));
    let (stop, stopped) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let (stream, remote) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors or memory for a moment: wait rather than spin.
                    tracing::warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(client) = settings.clients.admit(remote.ip(), &settings) else {
            tracing::debug!(%remote, "http connection refused: its client holds its share");
            continue;
        };
        let connection = Connection {
            remote,
            app: app.clone(),
            settings: settings.clone(),
            stop: stopped.clone(),
            _permit: permit,
            _client: client,
        };
        connections.spawn(connection.run(stream));
    }
    let _ = stop.send(true);
    let drained = async { while connections.join_next().await.is_some() {} };
    let _ = tokio::time::timeout(DRAIN, drained).await;
}

/// One accepted connection and what serves it.
struct Connection {
    remote: SocketAddr,
    app: axum::Router,
    settings: HttpSettings,
    stop: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
    _client: Option<ClientPlace>,
}

impl Connection {
    /// Until the client closes, a timeout, or the node stops: TLS first if configured (its
    /// handshake within the header timeout), then HTTP/2 if the
    /// client chose it by ALPN, else HTTP/1.1.
    async fn run(self, stream: TcpStream) {
        let _ = stream.set_nodelay(true);
        let control = ConnectionControl {
            idle: self.settings.limits.idle_timeout,
            ..ConnectionControl::default()
        };
        let idle = Idle::new(stream, self.settings.limits, control.clone());
        let Some(acceptor) = self.settings.tls.clone() else {
            return self.http1(TokioIo::new(idle), control).await;
        };
        // The idle stream's deadline moves on with every byte: a client trickling its
        // handshake a byte at a time would keep the connection's slot for ever.
        let handshake = acceptor.accept(idle);
        let tls = match tokio::time::timeout(self.settings.limits.header_timeout, handshake).await {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                tracing::debug!(remote = %self.remote, "TLS handshake: {e}");
                return;
            }
            Err(_) => {
                tracing::debug!(remote = %self.remote, "TLS handshake: not done in time");
                return;
            }
        };
        if tls.get_ref().1.alpn_protocol() == Some(ALPN_H2) {
            self.http2(TokioIo::new(tls), control).await;
        } else {
            self.http1(TokioIo::new(tls), control).await;
        }
    }

    async fn http1<I>(self, io: TokioIo<I>, control: ConnectionControl)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        // One request at a time, and bytes between them, which the idle stream times.
        let service = self.service(control, OpenRequests::default());
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(self.settings.limits.header_timeout)
            .max_buf_size(WRITE_QUEUE);
        let conn = builder.serve_connection(io, service);
        tokio::pin!(conn);
        let mut stop = self.stop;
        tokio::select! {
            served = conn.as_mut() => log_end(self.remote, served),
            _ = stop.changed() => {
                conn.as_mut().graceful_shutdown();
                let _ = conn.await;
            }
        }
    }

    /// HTTP/2: each stream is a request with the same body limits and timeouts as one on
    /// HTTP/1.1; a connection holds at most `limits.streams` at once, and its send buffers
    /// per stream are as small as HTTP/1.1's write queue.
    async fn http2<I>(self, io: TokioIo<I>, control: ConnectionControl)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let open = OpenRequests::default();
        let service = self.service(control, open.clone());
        let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        builder
            .timer(TokioTimer::new())
            .max_concurrent_streams(self.settings.limits.streams)
            .max_header_list_size(WRITE_QUEUE as u32)
            .max_send_buf_size(WRITE_QUEUE);
        // No pings of our own: a connection with nothing to carry is left to the idle timeout
        // (a ping the client answers would keep it, and its connection slot, forever).
        let conn = builder.serve_connection(io, service);
        tokio::pin!(conn);
        let mut stop = self.stop;
        // The idle stream sees bytes, and a client's pings (or settings) are bytes: without
        // streams counted, a pinging client would keep its connection's slot for ever.
        let idle = open.none_for(self.settings.limits.idle_timeout);
        tokio::select! {
            served = conn.as_mut() => log_end(self.remote, served),
            _ = stop.changed() => {
                conn.as_mut().graceful_shutdown();
                let _ = conn.await;
            }
            () = idle => {
                tracing::debug!(remote = %self.remote, "http/2 connection: no stream open");
                conn.as_mut().graceful_shutdown();
                let _ = conn.await;
            }
        }
    }

    /// Each request with its client's address (the proxy's, or the one a trusted proxy
    /// forwarded) and the connection's control, counted in `open` until its response's body
    /// is done with.
    fn service(
        &self,
        control: ConnectionControl,
        open: OpenRequests,
    ) -> impl hyper::service::Service<
        hyper::Request<Incoming>,
        Response = axum::response::Response,
        Error = std::convert::Infallible,
        Future: Send + 'static,
    > + Clone
           + Send
           + 'static {
        let app = self.app.clone();
        let remote = self.remote;
        let proxies = self.settings.trusted_proxies.clone();
        hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            let client = forwarded::client(remote, request.headers(), &proxies);
            request.extensions_mut().insert(ConnectInfo(client));
            request.extensions_mut().insert(control.clone());
            let opened = open.opened();
            let response = app.clone().oneshot(request);
            async move {
                let response = response.await?;
                Ok(response.map(|body| {
                    axum::body::Body::new(Counted {
                        body,
                        _opened: opened,
                    })
                }))
            }
        })
    }
}

/// The requests open on one connection, each until its response's body is done with (sent,
/// or the stream reset).
#[derive(Debug, Clone, Default)]
struct OpenRequests(Arc<watch::Sender<usize>>);

impl OpenRequests {
    /// One more open, until the returned guard drops.
    fn opened(&self) -> Opened {
        self.0.send_modify(|open| *open += 1);
        Opened(Arc::clone(&self.0))
    }

    /// Completes once none has been open for `idle`.
    async fn none_for(&self, idle: Duration) {
        let mut open = self.0.subscribe();
        loop {
            // Never an error: `self` holds the sender.
            let _ = open.wait_for(|&open| open == 0).await;
            tokio::select! {
                () = tokio::time::sleep(idle) => return,
                _ = open.changed() => {}
            }
        }
    }
}

/// A request counted open.
#[derive(Debug)]
struct Opened(Arc<watch::Sender<usize>>);

impl Drop for Opened {
    fn drop(&mut self) {
        self.0.send_modify(|open| *open -= 1);
    }
}

/// A response's body that keeps its request counted open until the server drops it.
struct Counted {
    body: axum::body::Body,
    _opened: Opened,
}

impl hyper::body::Body for Counted {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

fn log_end(remote: SocketAddr, served: Result<(), hyper::Error>) {
    if let Err(e) = served {
        tracing::debug!(%remote, "http connection: {e}");
    }
}

/// A TCP stream that fails once nothing has moved for too long: first the header timeout
/// (a connection that never sends a request), then the idle timeout between requests.
#[derive(Debug)]
struct Idle {
    stream: TcpStream,
    deadline: Pin<Box<Sleep>>,
    idle: Duration,
    control: ConnectionControl,
}

impl Idle {
    fn new(stream: TcpStream, limits: HttpLimits, control: ConnectionControl) -> Self {
        Self {
            stream,
            deadline: Box::pin(tokio::time::sleep(limits.header_timeout)),
            idle: limits.idle_timeout,
            control,
        }
    }

    /// A write through `write`, after what a handler asked of the connection; progress
    /// resets the idle deadline, and a write that waits past it fails.
    fn write(
        &mut self,
        cx: &mut Context<'_>,
        write: impl FnOnce(Pin<&mut TcpStream>, &mut Context<'_>) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        self.apply_control();
        match write(Pin::new(&mut self.stream), cx) {
            Poll::Ready(result) => {
                self.progressed();
                Poll::Ready(result)
            }
            Poll::Pending => self.expired(cx).map(Err),
        }
    }

    /// What a handler asked of the connection, applied before the next write.
    fn apply_control(&self) {
        if let Some(bytes) = self.control.take_send_buffer() {
            // A smaller buffer only bounds memory; failing to set it changes nothing else.
            let _ = socket2::SockRef::from(&self.stream).set_send_buffer_size(bytes);
        }
    }

    fn progressed(&mut self) {
        self.deadline.as_mut().reset(Instant::now() + self.idle);
    }

    fn expired(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        self.deadline
            .as_mut()
            .poll(cx)
            .map(|()| io::Error::new(io::ErrorKind::TimedOut, "idle connection"))
    }
}

impl AsyncRead for Idle {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    this.progressed();
                }
                Poll::Ready(result)
            }
            Poll::Pending => this.expired(cx).map(Err),
        }
    }
}

impl AsyncWrite for Idle {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .write(cx, |stream, cx| stream.poll_write(cx, data))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .write(cx, |stream, cx| stream.poll_write_vectored(cx, data))
    }

    /// Vectored: the server then queues a body's chunks as they are rather than copying them
    /// into one buffer.
    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
