//! One ICE-TCP connection's task: it reads frames and hands them to the worker of its
//! session, and writes what that worker queued for it, until the peer closes it, it fails,
//! or it has been silent too long. Generic over the stream, so tests drive it in memory.

use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::framing::{self, HEADER, MAX_FRAME};
use super::links::Links;
use super::listener::TcpLimits;
use super::stats::CloseReason;
use super::{TcpInput, Workers};
use crate::node::remote::Remote;
use crate::node::shard::WorkerId;

/// Bytes taken off the queue into the write buffer before it is written: a few packets per
/// write call, and the bound on what waits outside the queue.
pub(super) const WRITE_BATCH: usize = 16 * 1024;

/// What one read may add to the read buffer.
const READ_CHUNK: usize = 8 * 1024;

/// A connection, between the listener that accepted it and the worker of its session.
pub(super) struct Connection {
    /// How the core knows it.
    pub remote: Remote,
    /// What its worker queued for it (see [`Links`]).
    pub queue: mpsc::Receiver<bytes::Bytes>,
    /// Where its frames go.
    pub workers: Workers,
    /// Its time limits.
    pub limits: TcpLimits,
}

impl Connection {
    /// Serves the connection over `stream` (its socket, or what stands for it in a test)
    /// until it ends, then tells its worker (whose session it was ends with it) and takes
    /// its queue out of `links`: why it ended.
    pub async fn run<S: AsyncRead + AsyncWrite + Unpin>(
        mut self,
        stream: S,
        links: Arc<Links>,
    ) -> CloseReason {
        let mut worker = None;
        let reason = self.serve(stream, &mut worker).await;
        if let Remote::Tcp { id, .. } = self.remote {
            links.close(id);
        }
        // Gone workers take nothing: the node is stopping.
        let _ = self
            .workers
            .hand(worker, TcpInput::Closed(self.remote))
            .await;
        reason
    }

    async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        stream: S,
        worker: &mut Option<WorkerId>,
    ) -> CloseReason {
        let (mut reader, mut writer) = tokio::io::split(stream);
        let mut inbound = BytesMut::with_capacity(READ_CHUNK);
        let mut outbound = BytesMut::new();
        let started = now();
        let mut answered = false;
        let mut last_read = started;
        loop {
            // Before the node answers anything it waits the handshake time from the start;
            // then the idle time from the last read.
            let deadline = if answered {
                last_read + self.limits.idle_timeout
            } else {
                started + self.limits.handshake_timeout
            };
            if inbound.capacity() - inbound.len() < HEADER + MAX_FRAME {
                inbound.reserve(READ_CHUNK);
            }
            tokio::select! {
                read = reader.read_buf(&mut inbound) => match read {
                    Ok(0) => return CloseReason::Peer,
                    Ok(_) => {
                        last_read = now();
                        if let Err(reason) = self.take_frames(&mut inbound, worker).await {
                            return reason;
                        }
                    }
                    Err(_) => return CloseReason::Error,
                },
                packet = self.queue.recv(), if outbound.len() < WRITE_BATCH => {
                    let Some(packet) = packet else {
                        return CloseReason::Shutdown;
                    };
                    answered = true;
                    // The core's packets are far shorter than a 2-byte length holds.
                    let _ = framing::encode(&packet, &mut outbound);
                    while outbound.len() < WRITE_BATCH {
                        let Ok(packet) = self.queue.try_recv() else {
                            break;
                        };
                        let _ = framing::encode(&packet, &mut outbound);
                    }
                }
                written = writer.write_buf(&mut outbound), if !outbound.is_empty() => {
                    if !matches!(written, Ok(n) if n > 0) {
                        return CloseReason::Error;
                    }
                }
                () = tokio::time::sleep_until(deadline.into()) => {
                    return if answered {
                        CloseReason::Idle
                    } else {
                        CloseReason::HandshakeTimeout
                    };
                }
            }
        }
    }

    /// Hands every whole frame read so far to its worker: the one the first binding request
    /// named, from then on.
    async fn take_frames(
        &self,
        inbound: &mut BytesMut,
        worker: &mut Option<WorkerId>,
    ) -> Result<(), CloseReason> {
        while let Some(frame) = framing::decode(inbound).map_err(|_| CloseReason::BadFrame)? {
            *worker = worker.or_else(|| self.workers.named_by(&frame));
            let input = TcpInput::Frame(self.remote, frame);
            if !self.workers.hand(*worker, input).await {
                return Err(CloseReason::Shutdown);
            }
        }
        Ok(())
    }
}

/// The loop's clock, tokio's: tests run connections in paused time.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}
