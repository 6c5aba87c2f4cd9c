//! The thin loop around [`NodeCore`]: one task owns the core and the UDP socket, and reads
//! the clock for it. Signaling talks to it through [`Command`]s; DTLS handshakes run as tasks
//! of their own and hand their datagrams and keys back through channels.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use selector::Layer;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};

use super::core::{CoreError, Inbound, NodeCore, MAX_DATAGRAM};
use super::dtls::{DtlsCertificate, DtlsError, DtlsInput, DtlsServer};
use super::metrics::Snapshot;
use super::peer::{IceCredentials, PeerId, Publisher, Viewer};
use super::sdp::Fingerprint;
use super::srtp::{self, SrtpKeys};

/// A new session's transport parameters from its offer.
#[derive(Debug)]
pub struct Transport {
    pub ice: IceCredentials,
    /// The browser's certificate fingerprint: its DTLS certificate must match.
    pub fingerprint: Fingerprint,
}

/// What signaling asks of the media loop; each carries where the answer goes.
#[derive(Debug)]
pub enum Command {
    Publish {
        room: String,
        transport: Transport,
        publisher: Publisher,
        reply: oneshot::Sender<Result<PeerId, CoreError>>,
    },
    Watch {
        room: String,
        transport: Transport,
        viewer: Viewer,
        reply: oneshot::Sender<PeerId>,
    },
    End {
        id: PeerId,
        reply: oneshot::Sender<Result<(), CoreError>>,
    },
    SetLayer {
        id: PeerId,
        target: Layer,
        reply: oneshot::Sender<Result<(), CoreError>>,
    },
    Metrics {
        reply: oneshot::Sender<Snapshot>,
    },
}

/// Something a DTLS handshake task reports.
enum DtlsEvent {
    Send(PeerId, Bytes),
    Done(PeerId, Result<SrtpKeys, DtlsError>),
}

pub struct MediaLoop {
    core: NodeCore,
    socket: Arc<UdpSocket>,
    certificate: Arc<DtlsCertificate>,
    commands: mpsc::Receiver<Command>,
    dtls_tx: mpsc::UnboundedSender<DtlsEvent>,
    dtls_rx: mpsc::UnboundedReceiver<DtlsEvent>,
    handshakes: HashMap<PeerId, DtlsInput>,
    out: Vec<u8>,
}

impl std::fmt::Debug for MediaLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaLoop")
            .field("core", &self.core)
            .finish_non_exhaustive()
    }
}

impl MediaLoop {
    pub fn new(
        core: NodeCore,
        socket: UdpSocket,
        certificate: Arc<DtlsCertificate>,
        commands: mpsc::Receiver<Command>,
    ) -> Self {
        let (dtls_tx, dtls_rx) = mpsc::unbounded_channel();
        Self {
            core,
            socket: Arc::new(socket),
            certificate,
            commands,
            dtls_tx,
            dtls_rx,
            handshakes: HashMap::new(),
            out: Vec::with_capacity(MAX_DATAGRAM + 64),
        }
    }

    /// Runs until every command sender is gone (the node shuts down).
    pub async fn run(mut self) {
        let mut buf = vec![0u8; 2048];
        loop {
            let deadline = self
                .core
                .poll_timeout()
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(1));
            tokio::select! {
                received = self.socket.recv_from(&mut buf) => match received {
                    Ok((len, from)) => self.on_datagram(from, &buf[..len]),
                    Err(e) => tracing::debug!("udp receive: {e}"),
                },
                command = self.commands.recv() => match command {
                    Some(command) => self.on_command(command),
                    None => break,
                },
                Some(event) = self.dtls_rx.recv() => self.on_dtls(event),
                () = tokio::time::sleep_until(deadline.into()) => {
                    self.core.handle_timeout(Instant::now());
                }
            }
            self.flush();
        }
    }

    fn on_datagram(&mut self, from: SocketAddr, data: &[u8]) {
        if let Inbound::Dtls(id) = self.core.handle_datagram(Instant::now(), from, data) {
            if let Some(handshake) = self.handshakes.get(&id) {
                handshake.push(Bytes::copy_from_slice(data));
            }
        }
    }

    fn on_command(&mut self, command: Command) {
        let now = Instant::now();
        // A dropped reply means the HTTP request went away; nothing to tell.
        match command {
            Command::Publish {
                room,
                transport,
                publisher,
                reply,
            } => {
                let added = self
                    .core
                    .add_publisher(now, &room, transport.ice, publisher);
                if let Ok(id) = added {
                    self.start_dtls(id, transport.fingerprint);
                    tracing::info!(peer = %id, room, "publisher joined");
                }
                let _ = reply.send(added);
            }
            Command::Watch {
                room,
                transport,
                viewer,
                reply,
            } => {
                let id = self.core.add_viewer(now, &room, transport.ice, viewer);
                self.start_dtls(id, transport.fingerprint);
                tracing::info!(peer = %id, room, "viewer joined");
                let _ = reply.send(id);
            }
            Command::End { id, reply } => {
                let _ = reply.send(self.core.remove_peer(id));
            }
            Command::SetLayer { id, target, reply } => {
                let _ = reply.send(self.core.set_target(id, target));
            }
            Command::Metrics { reply } => {
                let _ = reply.send(self.core.snapshot());
            }
        }
    }

    fn start_dtls(&mut self, id: PeerId, fingerprint: Fingerprint) {
        let to_loop = self.dtls_tx.clone();
        let send = Box::new(move |datagram: Bytes| {
            let _ = to_loop.send(DtlsEvent::Send(id, datagram));
        });
        let remote = (fingerprint.algorithm.as_str(), fingerprint.value.as_str());
        let (input, done) = DtlsServer::start(&self.certificate, remote, send);
        let to_loop = self.dtls_tx.clone();
        tokio::spawn(async move {
            // No result: the session was removed before its handshake ended.
            if let Ok(result) = done.await {
                let _ = to_loop.send(DtlsEvent::Done(id, result));
            }
        });
        self.handshakes.insert(id, input);
    }

    fn on_dtls(&mut self, event: DtlsEvent) {
        match event {
            DtlsEvent::Send(id, datagram) => {
                if let Some(to) = self.core.peer(id).and_then(|p| p.addr) {
                    // UDP: a full socket buffer loses the record, and DTLS retransmits.
                    let _ = self.socket.try_send_to(&datagram, to);
                }
            }
            DtlsEvent::Done(id, Ok(keys)) => match srtp::session(&keys) {
                Ok(context) => {
                    tracing::info!(peer = %id, "DTLS-SRTP connected");
                    self.core.set_srtp(id, Box::new(context));
                }
                Err(e) => tracing::warn!(peer = %id, "SRTP keys unusable: {e}"),
            },
            DtlsEvent::Done(id, Err(e)) => {
                tracing::warn!(peer = %id, "DTLS handshake failed: {e}");
                let _ = self.core.remove_peer(id);
            }
        }
    }

    /// Sends everything the core has to send, then forgets removed sessions' handshakes.
    /// Never waits for the socket: a full send buffer (a viewer that does not read) loses the
    /// packet, which NACK repairs, instead of stalling every other session behind it.
    fn flush(&mut self) {
        while let Some(to) = self.core.poll_datagram(&mut self.out) {
            if let Err(e) = self.socket.try_send_to(&self.out, to) {
                self.core.count_send_failure();
                tracing::trace!("udp send to {to}: {e}");
            }
        }
        while let Some(id) = self.core.poll_removed() {
            self.handshakes.remove(&id);
        }
    }
}
