//! Starting and stopping the node: bind the HTTP listener, the UDP socket and the ICE-TCP
//! listener, run the media loop and the HTTP server until SIGTERM or Ctrl-C, then let both
//! finish.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, UdpSocket};
use tokio::task::JoinSet;

use super::admission::Admission;
use super::auth::Auth;
use super::batch::{self, Segmentation};
use super::cluster::http::Door;
use super::cluster::member::Identity;
use super::cluster::redis::RedisStore;
use super::cluster::relay_http::{self, RelayService};
use super::cluster::relay_pulls;
use super::cluster::{drain, heartbeat, room_feed, ClusterStore, Member};
use super::config::{ConfigError, NodeConfig};
use super::core::NodeCore;
use super::descriptors;
use super::dtls::{DtlsCertificate, DtlsConfig};
use super::http;
use super::listener::{self, HttpClients, HttpLimits, HttpSettings};
use super::media_loop::{MediaLoop, TcpPart};
use super::relays::RelayHosts;
use super::shard;
use super::signaling::{Signaling, SignalingConfig};
use super::socket::{media_socket, relay_socket};
use super::spaced_reads::SpacedReads;
use super::tcp::{self, Links, TcpLimits, TcpStats};
use super::tls::{Certificates, TlsError};
use crate::engine::RouterConfig;

/// Why the node could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The HTTP listener could not be bound.
    #[error("cannot listen for HTTP on {addr}: {source}")]
    Http {
        /// The address configured for it.
        addr: SocketAddr,
        /// What the system said.
        source: std::io::Error,
    },
    /// The media socket could not be bound.
    #[error("cannot bind the UDP socket {addr}: {source}")]
    Udp {
        /// The address configured for it.
        addr: SocketAddr,
        /// What the system said.
        source: std::io::Error,
    },
    /// The ICE-TCP listener could not be bound.
    #[error("cannot listen for ICE-TCP on {addr}: {source}")]
    Tcp {
        /// The address configured for it (or the UDP socket's).
        addr: SocketAddr,
        /// What the system said.
        source: std::io::Error,
    },
    /// The node's DTLS key and certificate could not be made.
    #[error("cannot make the DTLS certificate: {0}")]
    Certificate(String),
    /// The address a listener or socket was bound at could not be read back.
    #[error("HTTP server failed: {0}")]
    Serve(std::io::Error),
    /// The HTTPS certificate could not be loaded or made.
    #[error("HTTPS: {0}")]
    Tls(#[from] TlsError),
    /// The settings contradict each other.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// The cluster settings are unusable.
    #[error("cluster: {0}")]
    Cluster(String),
    /// A media worker's task ended on its own, which only a bug does: the node stops rather
    /// than answer signaling for media that no longer flows.
    #[error("the media loop stopped unexpectedly")]
    MediaLoop,
}

/// Runs the node until a shutdown signal: alone, or with the other nodes of the cluster its
/// `redis` setting names.
pub async fn serve(config: NodeConfig) -> Result<(), ServeError> {
    let listener = TcpListener::bind(config.http)
        .await
        .map_err(|source| ServeError::Http {
            addr: config.http,
            source,
        })?;
    let store = match &config.redis {
        Some(url) => {
            // A request to the store waits no longer than a heartbeat: a node cut off from
            // it must notice within its lease.
            let store = RedisStore::open(url, config.cluster.heartbeat())
                .map_err(|e| ServeError::Cluster(e.to_string()))?;
            Some(Arc::new(store) as Arc<dyn ClusterStore>)
        }
        None => None,
    };
    serve_with(config, listener, store).await
}

/// Runs the node on a bound HTTP `listener` until a shutdown signal; with a cluster `store`,
/// as a node of that cluster (whatever `redis` says).
pub async fn serve_with(
    config: NodeConfig,
    listener: TcpListener,
    store: Option<Arc<dyn ClusterStore>>,
) -> Result<(), ServeError> {
    let certificates = config
        .tls()?
        .map(Certificates::load)
        .transpose()?
        .map(Arc::new);
    let (socket, buffers) = media_socket(config.udp).map_err(|source| ServeError::Udp {
        addr: config.udp,
        source,
    })?;
    let http_addr = listener.local_addr().map_err(ServeError::Serve)?;
    let udp_addr = socket.local_addr().map_err(ServeError::Serve)?;
    let tcp = bind_tcp(&config, udp_addr).await?;
    let (http_connections, tcp_connections) = connection_caps(&config, tcp.is_some());
    let certificate =
        DtlsCertificate::generate().map_err(|e| ServeError::Certificate(e.to_string()))?;
    let dtls = DtlsConfig::new(&certificate, config.dtls_timeout())
        .map_err(|e| ServeError::Certificate(e.to_string()))?;
    let router = RouterConfig {
        keyframe_interval: config.keyframe_interval(),
        ..RouterConfig::default()
    };
    let segmentation = Arc::new(segmentation(&config, &socket));
    let socket = Arc::new(socket);
    let workers = config.workers();
    // One worker reads the socket itself; several take their datagrams from one reader.
    let (reader, shards) = match workers {
        1 => (None, Vec::new()),
        n => {
            let (reader, shards) = shard::split(n);
            (Some(reader), shards)
        }
    };
    let mut shards = shards.into_iter();
    let (tcp_workers, tcp_inboxes) = tcp::inboxes(workers);
    let mut tcp_inboxes = tcp_inboxes.into_iter();
    let links = Arc::new(Links::default());
    let admission = Arc::new(Admission::default());
    let relays = RelayHosts::resolve(&config.ice_servers);
    let mut handles = Vec::with_capacity(workers);
    let mut media = JoinSet::new();
    // The relay between nodes takes what the cores ask to pull, on a clustered node with a
    // secret.
    let relaying = store.is_some() && config.cluster.secret.is_some();
    let (pulls, pulled) = relay_pulls::pull_queue();
    let relay_sockets = match relaying {
        true => relay_sockets(&config, workers, udp_addr)?,
        false => Vec::new(),
    };
    let relay_addrs: Vec<SocketAddr> = relay_sockets.iter().map(|(_, at)| *at).collect();
    let mut relay_sockets = relay_sockets.into_iter();
    for worker in 0..workers {
        let mut core = NodeCore::new(router, config.peer_timeout())
            .with_limits(config.limits)
            .with_data_channels(config.data_channels)
            .with_viewer_estimation(config.viewer_estimation)
            .with_loudest_speakers((config.loudest_speakers > 0).then_some(config.loudest_speakers))
            .with_relays(relays.clone())
            .with_dtls(dtls.clone());
        let shard = shards.next();
        if let Some(shard) = &shard {
            core = core.with_shard(worker, admission.clone(), shard.steering.clone());
        }
        let (media_loop, handle) = MediaLoop::new(core, socket.clone());
        let mut media_loop = media_loop
            .with_segmentation(segmentation.clone())
            .with_read_spacing(config.udp_read_spacing());
        if let Some(shard) = shard {
            media_loop = media_loop.with_shard(shard);
        }
        if let Some((relay, _)) = relay_sockets.next() {
            media_loop = media_loop.with_pulls(pulls.clone()).with_relay(relay);
        }
        if let (Some(_), Some(inbox)) = (&tcp, tcp_inboxes.next()) {
            let links = links.clone();
            media_loop = media_loop.with_tcp(TcpPart { inbox, links });
        }
        media.spawn(media_loop.run());
        handles.push(handle);
    }
    // The queue closes with the media loops.
    drop(pulls);
    let reader = match reader {
        Some(reader) => {
            let reads = SpacedReads::new(socket.clone(), config.udp_read_spacing())
                .map_err(ServeError::Serve)?;
            Some(tokio::spawn(reader.run(reads)))
        }
        None => None,
    };
    let candidate = SocketAddr::new(config.announced_ip(), udp_addr.port());
    let tcp_stats = Arc::new(TcpStats::default());
    let tcp_candidate = match tcp {
        Some(listener) => {
            let tcp_addr = listener.local_addr().map_err(ServeError::Serve)?;
            let limits = TcpLimits {
                connections: tcp_connections,
                per_client: config.limits.tcp_connections_per_client,
                handshake_timeout: config.tcp_handshake_timeout(),
                idle_timeout: config.peer_timeout(),
            };
            let stats = tcp_stats.clone();
            tokio::spawn(tcp::listen(listener, tcp_workers, links, stats, limits));
            tracing::info!(%tcp_addr, "ICE over TCP");
            Some(SocketAddr::new(config.announced_ip(), tcp_addr.port()))
        }
        None => None,
    };
    let auth = Auth::new(
        config.tokens.clone(),
        config.jwt_secret.clone().map(String::into_bytes),
    )
    .with_metrics_token(config.metrics_token.clone());
    // The answer names the hash itself: it takes the hex value alone.
    let fingerprint = certificate.fingerprint();
    let fingerprint = fingerprint
        .split_once(' ')
        .map_or(fingerprint.as_str(), |(_, hex)| hex)
        .to_owned();
    let http_clients = Arc::new(HttpClients::default());
    let signaling = SignalingConfig {
        fingerprint,
        candidate,
        publisher_bitrate_kbps: config.publisher_bitrate_kbps,
        limits: config.limits,
        socket: Some(buffers),
        tcp: tcp_candidate.map(|_| tcp_stats),
        http_clients: Some(http_clients.clone()),
        tcp_candidate,
        ice_servers: config.ice_servers.clone(),
    };
    let signaling = Arc::new(Signaling::new(handles, auth, signaling));
    let body_timeout = Duration::from_millis(config.http_body_timeout_ms);
    tracing::info!(%udp_addr, %candidate, workers, "media on one UDP port");
    let shutdown = shutdown_signal();
    let tls = match &certificates {
        Some(certificates) => {
            println!(
                "HTTPS certificate SHA-256 fingerprint: {}",
                certificates.fingerprint()
            );
            tokio::spawn(reload_on_hangup(certificates.clone()));
            Some(certificates.acceptor()?)
        }
        None => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let member = store
        .map(|store| join_cluster(&config, store, &signaling, (scheme, http_addr)))
        .transpose()?;
    let door = member.clone().map(|member| Door {
        member,
        signaling: signaling.clone(),
        retry_after: config.cluster.retry_after_s,
    });
    let app = http::routes(signaling.clone(), config.max_body_bytes, body_timeout, door);
    let app = match (&member, &config.cluster.secret) {
        (Some(member), Some(secret)) => {
            tracing::info!(relays = ?relay_addrs, "relaying media between nodes");
            let service = Arc::new(RelayService::new(
                secret.clone(),
                relay_addrs,
                signaling.clone(),
                member.clone(),
            ));
            signaling.set_relay(Arc::downgrade(&service));
            tokio::spawn(relay_pulls::serve(Arc::downgrade(&service), pulled));
            app.merge(relay_http::routes(service, body_timeout))
        }
        _ => app,
    };
    let drain_timeout = config.cluster.drain_timeout();
    let shutdown = async move {
        shutdown.await;
        if let Some(member) = member {
            // A second signal stops the node without waiting for the drain.
            let again = shutdown_signal();
            tokio::select! {
                () = drain::drain(&member, &signaling, drain_timeout) => {}
                () = again => tracing::info!("stopping without waiting for the drain"),
            }
        }
    };
    println!("Strata is serving: open {scheme}://{http_addr}/ to publish and watch");
    let settings = HttpSettings {
        limits: HttpLimits {
            connections: http_connections,
            per_client: config.limits.http_connections_per_client,
            header_timeout: Duration::from_millis(config.http_header_timeout_ms),
            idle_timeout: Duration::from_millis(config.http_idle_timeout_ms),
            streams: config.http2_max_streams,
        },
        tls,
        trusted_proxies: config.trusted_proxies.clone().into(),
        clients: http_clients,
    };
    let http = listener::serve(listener, app, settings, shutdown);
    tokio::select! {
        () = http => {
            // The HTTP side is gone with its loop handles: the media loops end after them.
            while media.join_next().await.is_some() {}
            if let Some(reader) = reader {
                reader.abort();
            }
            tracing::info!("stopped");
            Ok(())
        }
        // A media loop only ends on its own through a bug: stop rather than keep answering
        // signaling for media that no longer flows.
        Some(ended) = media.join_next() => {
            tracing::error!("a media loop ended: {ended:?}");
            Err(ServeError::MediaLoop)
        }
    }
}

/// Where other nodes' links reach this node's media port: `cluster.relay`, or the address
/// announced in answers.
/// Whether the media socket segments runs to one destination: as `udp_gso` says, where the
/// kernel knows how (said at start).
/// HTTP and ICE-TCP connections at most, as configured (ICE-TCP at most one per session)
/// within the file descriptors the process may open, its limit raised first; said at start
/// when the descriptors hold either below its setting.
fn connection_caps(config: &NodeConfig, ice_tcp: bool) -> (usize, usize) {
    let budget = descriptors::raise_limit();
    let wanted = (
        config.limits.http_connections,
        if ice_tcp { config.limits.sessions } else { 0 },
    );
    let caps = descriptors::share(budget, wanted.0, wanted.1);
    if caps != wanted {
        tracing::warn!(
            descriptors = budget,
            http_connections = caps.0,
            ice_tcp_connections = caps.1,
            "the process may open too few file descriptors for the configured connections: \
             raise its open-files limit (LimitNOFILE=, ulimit -n)"
        );
    }
    caps
}

fn segmentation(config: &NodeConfig, socket: &std::net::UdpSocket) -> Segmentation {
    let kernel = batch::kernel_segments(socket);
    let on = config.udp_gso && kernel;
    match (config.udp_gso, kernel) {
        (true, false) => tracing::info!("UDP segmentation (GSO): the kernel has none"),
        (false, _) => tracing::info!("UDP segmentation (GSO): off (udp_gso = false)"),
        (true, true) => tracing::info!("UDP segmentation (GSO): on"),
    }
    Segmentation::new(on)
}

/// Each worker's socket for the media relay's links, and where other nodes reach it: on
/// `cluster.relay`'s address at its port plus the worker's index (any port the kernel picks,
/// for port 0), or else at the announced IP on a port the kernel picks; bound on the media
/// socket's IP (`media`, which their ports must leave alone).
fn relay_sockets(
    config: &NodeConfig,
    workers: usize,
    media: SocketAddr,
) -> Result<Vec<(Arc<UdpSocket>, SocketAddr)>, ServeError> {
    let wanted: SocketAddr = match &config.cluster.relay {
        Some(relay) => relay
            .parse()
            .map_err(|_| ServeError::Cluster("cluster.relay is ip:port".to_owned()))?,
        None => SocketAddr::new(config.announced_ip(), 0),
    };
    let first = usize::from(wanted.port());
    if first != 0 && (first..first + workers).contains(&usize::from(media.port())) {
        // Before, links ended on the media port: a setting from then names it.
        return Err(ServeError::Cluster(format!(
            "cluster.relay's ports ({first} and one more per worker) include the media port \
             {}: the relay's sockets are its own, give it other ports",
            media.port()
        )));
    }
    (0..workers)
        .map(|worker| {
            let port = match wanted.port() {
                0 => Some(0),
                base => u16::try_from(worker).ok().and_then(|w| base.checked_add(w)),
            };
            let port = port.ok_or_else(|| {
                ServeError::Cluster("cluster.relay's port leaves no port per worker".to_owned())
            })?;
            let addr = SocketAddr::new(config.udp.ip(), port);
            let socket = relay_socket(addr).map_err(|source| ServeError::Udp { addr, source })?;
            let bound = socket.local_addr().map_err(ServeError::Serve)?;
            Ok((Arc::new(socket), SocketAddr::new(wanted.ip(), bound.port())))
        })
        .collect()
}

/// This node as a member of the cluster of `store`, its heartbeat started.
fn join_cluster(
    config: &NodeConfig,
    store: Arc<dyn ClusterStore>,
    signaling: &Arc<Signaling>,
    (scheme, http_addr): (&str, SocketAddr),
) -> Result<Arc<Member>, ServeError> {
    let settings = &config.cluster;
    settings
        .check()
        .map_err(|e| ServeError::Cluster(e.to_owned()))?;
    let reachable = match http_addr.ip().is_unspecified() {
        true => SocketAddr::new(config.announced_ip(), http_addr.port()),
        false => http_addr,
    };
    let url = settings
        .url
        .clone()
        .unwrap_or_else(|| format!("{scheme}://{reachable}"));
    let identity = Identity {
        node: settings
            .node
            .clone()
            .unwrap_or_else(|| reachable.to_string()),
        url,
        relay: settings.relay.clone(),
    };
    tracing::info!(node = %identity.node, url = %identity.url, "joining the cluster");
    let lease = settings.lease();
    let member = Arc::new(Member::new(
        store.clone(),
        identity,
        lease,
        settings.prefer_home_below_percent,
    ));
    let capacity = u32::try_from(config.limits.sessions).unwrap_or(u32::MAX);
    tokio::spawn(heartbeat::run(
        member.clone(),
        Arc::downgrade(signaling),
        capacity,
        settings.heartbeat(),
    ));
    tokio::spawn(room_feed::run(
        member.clone(),
        store,
        Arc::downgrade(signaling),
        (lease, settings.heartbeat()),
    ));
    Ok(member)
}

/// The ICE-TCP listener, where the settings put it; `None` when they turn it off.
async fn bind_tcp(config: &NodeConfig, udp: SocketAddr) -> Result<Option<TcpListener>, ServeError> {
    let Some(addr) = config.tcp(udp)? else {
        return Ok(None);
    };
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Tcp { addr, source })?;
    Ok(Some(listener))
}

/// SIGTERM or Ctrl-C, registered when this is called: the node calls it before it says it
/// serves, so a signal the moment after stops it gracefully instead of killing it.
fn shutdown_signal() -> impl Future<Output = ()> {
    #[cfg(unix)]
    let (terminate, interrupt) = {
        use tokio::signal::unix::{signal, SignalKind};
        (
            signal(SignalKind::terminate()).ok(),
            signal(SignalKind::interrupt()).ok(),
        )
    };
    async move {
        #[cfg(unix)]
        tokio::select! {
            () = received(terminate) => {},
            () = received(interrupt) => {},
        }
        #[cfg(not(unix))]
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
        tracing::info!("shutting down");
    }
}

/// Reads the HTTPS certificate's files again on each SIGHUP: handshakes from then on present
/// the new one; open connections and every session go on as they were.
async fn reload_on_hangup(certificates: Arc<Certificates>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut hangup) = signal(SignalKind::hangup()) else {
            tracing::warn!("no SIGHUP handler: the HTTPS certificate is not reloaded");
            return;
        };
        while hangup.recv().await.is_some() {
            match certificates.reload() {
                Ok(()) => tracing::info!(
                    fingerprint = %certificates.fingerprint(),
                    "HTTPS certificate reloaded"
                ),
                Err(e) => tracing::error!("HTTPS certificate not reloaded, the old one stays: {e}"),
            }
        }
    }
    #[cfg(not(unix))]
    drop(certificates);
}

/// The first delivery of a registered signal; never, for one that could not be registered.
#[cfg(unix)]
async fn received(signal: Option<tokio::signal::unix::Signal>) {
    match signal {
        Some(mut signal) => {
            signal.recv().await;
        }
        None => std::future::pending().await,
    }
}
