//! The media socket's reads, spaced under load.
//!
//! A socket registered with the runtime's poller wakes a thread for each datagram that
//! arrives, and the turn of the loop that follows (a read, the core's work, a send call)
//! costs more than the datagram. While datagrams keep coming, the socket is instead left
//! unregistered and read once every `spacing`: what arrived meanwhile is read as one batch,
//! and what it makes the core send leaves in fuller batches. A read that finds the socket
//! empty registers it again, so the first datagram after a quiet spell wakes the loop at
//! once; registering reports what arrived before it, so none waits for the next. What is
//! registered is a duplicate of the socket's descriptor, closed when it leaves the poller:
//! the socket itself, which the senders share, is never on it.
//!
//! With no spacing the socket stays registered and is read at each arrival.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;

use super::batch::{stamp_arrivals, ReceiveBatch, RecvBatch, BATCH_LEN};

/// The one reader of a UDP socket (the only worker, or the reader that steers datagrams to
/// several), reading it at arrivals or in spaced turns.
#[derive(Debug)]
pub struct SpacedReads {
    socket: Arc<std::net::UdpSocket>,
    /// The socket registered with the runtime's poller, while the reads wait for arrivals.
    registered: Option<UdpSocket>,
    /// Least time between two reads while datagrams keep coming; zero: read at each arrival.
    spacing: Duration,
    /// When the socket is read next, while it is not registered.
    next_read: Option<Instant>,
}

impl SpacedReads {
    /// Reads of the non-blocking `socket`, at least `spacing` apart while datagrams keep
    /// coming. It starts registered: the first datagram wakes the reader. The kernel is asked
    /// to stamp each datagram's arrival, which a spaced read would otherwise lose
    /// ([`stamp_arrivals`]); where it cannot, a datagram is taken to arrive when it is read.
    pub fn new(socket: Arc<std::net::UdpSocket>, spacing: Duration) -> io::Result<Self> {
        if let Err(e) = stamp_arrivals(&*socket) {
            tracing::debug!("udp arrivals not stamped: {e}");
        }
        let registered = Some(UdpSocket::from_std(socket.try_clone()?)?);
        Ok(Self {
            socket,
            registered,
            spacing,
            next_read: None,
        })
    }

    /// The socket read, for the sends that share it.
    pub fn socket(&self) -> &Arc<std::net::UdpSocket> {
        &self.socket
    }

    /// When the socket must be read without waiting for an arrival: `spacing` after a read
    /// that found datagrams. `None` while it is registered.
    pub fn next_read(&self) -> Option<Instant> {
        self.next_read
    }

    /// Waits until the registered socket has something to read; never, while the reads are
    /// spaced (the reader wakes at [`next_read`](Self::next_read) instead).
    pub async fn readable(&self) -> io::Result<()> {
        match &self.registered {
            // The readiness is cleared by the read that finds the socket empty.
            Some(registered) => registered.readable().await,
            None => std::future::pending().await,
        }
    }

    /// Reads what waits, up to a batch, as [`ReceiveBatch::receive`] does; at `now`, which
    /// sets when the next read is due. A read that finds datagrams leaves the socket
    /// unregistered until then; one that finds none registers it again.
    pub fn read(&mut self, now: Instant, batch: &mut RecvBatch) -> io::Result<usize> {
        let read = match &self.registered {
            // Through the runtime, so an empty socket clears its read readiness.
            Some(registered) => registered.receive(batch),
            None => self.socket.receive(batch),
        };
        if !self.spacing.is_zero() {
            match &read {
                // A full batch leaves more waiting: read on at the next turn.
                Ok(BATCH_LEN..) => self.space(now, Duration::ZERO),
                Ok(1..) => self.space(now, self.spacing),
                Err(e) if e.kind() != io::ErrorKind::WouldBlock => self.space(now, self.spacing),
                _ => self.register(now),
            }
        }
        read
    }

    /// Leaves the socket unread for `spacing` from `now`, unregistered meanwhile (the
    /// registered duplicate, dropped, leaves the poller and is closed).
    fn space(&mut self, now: Instant, spacing: Duration) {
        self.registered = None;
        self.next_read = Some(now + spacing);
    }

    /// Registers the socket again, so that the next arrival wakes the reader. A poller that
    /// refuses it (out of memory or descriptors) leaves the reads spaced, to try again at
    /// the next.
    fn register(&mut self, now: Instant) {
        if self.registered.is_some() {
            return;
        }
        match self.socket.try_clone().and_then(UdpSocket::from_std) {
            Ok(registered) => {
                self.registered = Some(registered);
                self.next_read = None;
            }
            Err(e) => {
                tracing::debug!("udp socket not registered: {e}");
                self.next_read = Some(now + self.spacing);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::UdpSocket;

    use super::*;

    /// A non-blocking socket on loopback, and one that sends to it.
    fn pair() -> (Arc<UdpSocket>, UdpSocket) {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("bound");
        socket.set_nonblocking(true).expect("non-blocking");
        let sender = UdpSocket::bind("127.0.0.1:0").expect("bound");
        sender
            .connect(socket.local_addr().expect("bound"))
            .expect("connected");
        (Arc::new(socket), sender)
    }

    /// Waits, at most a few seconds, for the reads to be readable.
    async fn readable(reads: &SpacedReads) {
        let waited = tokio::time::timeout(Duration::from_secs(5), reads.readable()).await;
        waited.expect("woken by the datagram").expect("readable");
    }

    #[tokio::test]
    async fn spaced_reads_leave_the_poller_while_datagrams_come_and_rejoin_it_when_quiet() {
        let (socket, sender) = pair();
        let spacing = Duration::from_millis(2);
        let mut reads = SpacedReads::new(socket, spacing).expect("registered");
        let mut batch = RecvBatch::new(2048);
        assert_eq!(reads.next_read(), None, "registered at first");

        sender.send(b"first").expect("sent");
        readable(&reads).await;
        let now = Instant::now();
        assert_eq!(reads.read(now, &mut batch).expect("read"), 1);
        assert_eq!(
            reads.next_read(),
            Some(now + spacing),
            "spaced after datagrams"
        );
        assert!(reads.registered.is_none(), "off the poller while spaced");

        for _ in 0..3 {
            sender.send(b"more").expect("sent");
        }
        // Unregistered, the reads never say readable: the reader wakes at `next_read`.
        let woke = tokio::time::timeout(Duration::from_millis(50), reads.readable()).await;
        assert!(woke.is_err(), "no arrival wakes spaced reads");
        let later = now + spacing;
        assert_eq!(reads.read(later, &mut batch).expect("read"), 3, "one batch");
        assert_eq!(reads.next_read(), Some(later + spacing));

        let empty = reads.read(later + spacing, &mut batch);
        assert_eq!(empty.map_err(|e| e.kind()), Err(io::ErrorKind::WouldBlock));
        assert_eq!(reads.next_read(), None, "registered again when quiet");

        // The next arrival wakes the reader at once.
        sender.send(b"after").expect("sent");
        readable(&reads).await;
        assert_eq!(reads.read(Instant::now(), &mut batch).expect("read"), 1);
    }

    /// A read that fills its batch leaves more waiting: the next is due at once.
    #[tokio::test]
    async fn a_full_batch_is_followed_at_once() {
        let (socket, sender) = pair();
        let mut reads = SpacedReads::new(socket, Duration::from_millis(2)).expect("registered");
        let mut batch = RecvBatch::new(2048);
        for _ in 0..BATCH_LEN + 1 {
            sender.send(b"many").expect("sent");
        }
        readable(&reads).await;
        let now = Instant::now();
        assert_eq!(reads.read(now, &mut batch).expect("read"), BATCH_LEN);
        assert_eq!(reads.next_read(), Some(now), "the rest read next");
        assert_eq!(reads.read(now, &mut batch).expect("read"), 1);
        assert_eq!(reads.next_read(), Some(now + Duration::from_millis(2)));
    }

    /// A datagram that arrives between the read that found the socket empty and its
    /// registration is not left waiting for the next one.
    #[tokio::test]
    async fn a_datagram_before_the_registration_is_not_missed() {
        let (socket, sender) = pair();
        let mut reads = SpacedReads::new(socket, Duration::from_millis(2)).expect("registered");
        let mut batch = RecvBatch::new(2048);
        sender.send(b"first").expect("sent");
        readable(&reads).await;
        reads.read(Instant::now(), &mut batch).expect("read");
        // Spaced now; one arrives, then the socket is registered again (as after an empty
        // read) before anyone reads it.
        sender.send(b"meanwhile").expect("sent");
        std::thread::sleep(Duration::from_millis(10));
        reads.register(Instant::now());
        readable(&reads).await;
        assert_eq!(reads.read(Instant::now(), &mut batch).expect("read"), 1);
    }

    /// A spell's datagrams are read together, yet each says when it came (Linux, where the
    /// kernel stamps arrivals): the first, sent 40 ms before the last, waited 40 ms longer.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_spaced_read_knows_when_each_datagram_came() {
        let (socket, sender) = pair();
        let mut reads = SpacedReads::new(socket, Duration::from_millis(20)).expect("registered");
        crate::node::batch::tests::after_stamps_turn_on();
        let mut batch = RecvBatch::new(2048);
        for _ in 0..3 {
            sender.send(b"paced").expect("sent");
            std::thread::sleep(Duration::from_millis(20));
        }
        readable(&reads).await;
        assert_eq!(reads.read(Instant::now(), &mut batch).expect("read"), 3);
        let (first, last) = (batch.waited(0), batch.waited(2));
        assert!(
            first >= last + Duration::from_millis(40),
            "{first:?} {last:?}"
        );
    }

    /// With no spacing the socket stays registered, read at each arrival.
    #[tokio::test]
    async fn without_spacing_every_arrival_is_read_at_once() {
        let (socket, sender) = pair();
        let mut reads = SpacedReads::new(socket, Duration::ZERO).expect("registered");
        let mut batch = RecvBatch::new(2048);
        for _ in 0..3 {
            sender.send(b"one").expect("sent");
            readable(&reads).await;
            assert_eq!(reads.read(Instant::now(), &mut batch).expect("read"), 1);
            assert_eq!(reads.next_read(), None);
            let empty = reads.read(Instant::now(), &mut batch);
            assert_eq!(empty.map_err(|e| e.kind()), Err(io::ErrorKind::WouldBlock));
        }
    }
}
