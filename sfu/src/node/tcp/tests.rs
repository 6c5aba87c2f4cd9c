//! A connection's task driven in memory: frames in to its worker whatever the reads, packets
//! out framed, garbage and silence closing it, and a peer that does not read held to its
//! bound without holding anything else up.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::connection::{Connection, WRITE_BATCH};
use super::framing::HEADER;
use super::*;
use crate::node::metrics::DropReason;

const LIMITS: TcpLimits = TcpLimits {
    connections: 10,
    per_client: 2,
    handshake_timeout: Duration::from_secs(10),
    idle_timeout: Duration::from_secs(30),
};

struct Open {
    client: DuplexStream,
    remote: Remote,
    links: Arc<Links>,
    inbox: mpsc::Receiver<TcpInput>,
    task: JoinHandle<CloseReason>,
}

/// A connection whose peer is `client`, a pipe of `capacity` bytes each way.
fn open(capacity: usize) -> Open {
    let (client, server) = tokio::io::duplex(capacity);
    let links = Arc::new(Links::default());
    let (workers, mut inboxes) = inboxes(1);
    let (id, queue) = links.open();
    let peer = SocketAddr::from(([192, 0, 2, 1], 40_000));
    let remote = Remote::Tcp { id, peer };
    let connection = Connection {
        remote,
        queue,
        workers,
        limits: LIMITS,
    };
    let task = tokio::spawn(connection.run(server, links.clone()));
    Open {
        client,
        remote,
        links,
        inbox: inboxes.remove(0),
        task,
    }
}

fn frame(data: &[u8]) -> Vec<u8> {
    let mut out = (data.len() as u16).to_be_bytes().to_vec();
    out.extend_from_slice(data);
    out
}

fn id(remote: Remote) -> crate::node::remote::ConnectionId {
    match remote {
        Remote::Tcp { id, .. } => id,
        Remote::Udp(_) | Remote::Link(_) => unreachable!("a connection's"),
    }
}

#[tokio::test]
async fn frames_in_whatever_the_reads_and_packets_out_framed_until_the_peer_closes() {
    let mut c = open(64 * 1024);
    let mut stream = [frame(b"one"), frame(b"two!"), frame(b"three")].concat();
    let split = stream.split_off(9);
    c.client.write_all(&stream).await.expect("written");
    c.client.write_all(&split).await.expect("written");
    for expected in [&b"one"[..], b"two!", b"three"] {
        let input = c.inbox.recv().await.expect("an input");
        assert_eq!(input, TcpInput::Frame(c.remote, Bytes::from(expected)));
    }
    assert_eq!(c.links.send(id(c.remote), b"answer"), Ok(()));
    let mut out = [0; 8];
    c.client.read_exact(&mut out).await.expect("read");
    assert_eq!(&out, b"\x00\x06answer");
    drop(c.client);
    assert_eq!(c.task.await.expect("ran"), CloseReason::Peer);
    assert_eq!(c.inbox.recv().await, Some(TcpInput::Closed(c.remote)));
    assert!(c.links.is_empty(), "its queue went with it");
}

#[tokio::test]
async fn a_peer_sending_garbage_is_closed_and_its_session_told() {
    let mut c = open(1024);
    c.client
        .write_all(b"GET / HTTP/1.1\r\n\r\n")
        .await
        .expect("written");
    assert_eq!(c.task.await.expect("ran"), CloseReason::BadFrame);
    assert_eq!(c.inbox.recv().await, Some(TcpInput::Closed(c.remote)));
}

#[tokio::test(start_paused = true)]
async fn a_connection_never_answered_closes_at_the_handshake_timeout() {
    let started = tokio::time::Instant::now();
    let mut c = open(1024);
    // A frame the node does not answer (no session's binding request) changes nothing.
    c.client.write_all(&frame(b"hello")).await.expect("written");
    assert_eq!(c.task.await.expect("ran"), CloseReason::HandshakeTimeout);
    assert_eq!(started.elapsed(), LIMITS.handshake_timeout);
    assert!(matches!(c.inbox.recv().await, Some(TcpInput::Frame(..))));
    assert_eq!(c.inbox.recv().await, Some(TcpInput::Closed(c.remote)));
}

#[tokio::test(start_paused = true)]
async fn an_answered_connection_closes_when_silent_for_the_idle_time() {
    let started = tokio::time::Instant::now();
    let c = open(1024);
    assert_eq!(c.links.send(id(c.remote), b"answer"), Ok(()));
    assert_eq!(c.task.await.expect("ran"), CloseReason::Idle);
    assert_eq!(started.elapsed(), LIMITS.idle_timeout);
}

/// A peer that never reads, behind a pipe of 4 KB: what waits for it stays within its
/// queue, one write batch and the pipe, the rest is dropped (counted by the worker), and its
/// own frames still come in while its writes are stuck.
#[tokio::test]
async fn a_slow_reader_is_held_to_its_bound_and_holds_nothing_up() {
    const PIPE: usize = 4096;
    let mut c = open(PIPE);
    let packet = [0x80; 1000];
    let (mut queued, mut dropped) = (0, 0);
    for _ in 0..5000 {
        match c.links.send(id(c.remote), &packet) {
            Ok(()) => queued += 1,
            Err(reason) => {
                assert_eq!(reason, DropReason::TcpQueueFull);
                dropped += 1;
            }
        }
        tokio::task::yield_now().await;
    }
    let framed = HEADER + packet.len();
    let bound = SEND_QUEUE + WRITE_BATCH.div_ceil(framed) + 1 + PIPE.div_ceil(framed);
    assert!(queued <= bound, "{queued} taken, at most {bound}");
    assert_eq!(queued + dropped, 5000);
    c.client
        .write_all(&frame(b"still read"))
        .await
        .expect("written");
    let input = c.inbox.recv().await.expect("an input");
    assert_eq!(
        input,
        TcpInput::Frame(c.remote, Bytes::from_static(b"still read"))
    );
    // Once it reads, what was kept arrives whole, in order.
    let mut first = vec![0; framed];
    c.client.read_exact(&mut first).await.expect("read");
    assert_eq!(first, frame(&packet));
}
