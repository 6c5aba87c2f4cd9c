//! A participant's event stream between the media loop and the HTTP connection that carries
//! it: what waits in the node is counted (events and bytes), and a stream whose client does not
//! read is closed once either count reaches its bound, rather than held while it grows.
//!
//! The node's share is all that waits here, taken when the connection has room. Past it, the
//! connection holds what it has taken: at most [`CONNECTION_SEND_BUFFER`] in the kernel (an
//! event-stream connection's send buffer is set to it, so the kernel does not grow it to
//! megabytes for a client that never reads) and a few events in the HTTP server's own write
//! queue.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::mpsc;

/// Events that may wait in the node for one stream ...
pub const MAX_EVENTS: usize = 256;
/// ... and bytes.
pub const MAX_BYTES: usize = 64 << 10;
/// The send buffer asked for an event stream's connection (the kernel reserves twice this).
pub const CONNECTION_SEND_BUFFER: usize = 16 << 10;

/// What waits in the node, shared by both ends.
#[derive(Debug, Default)]
struct Waiting {
    events: AtomicUsize,
    bytes: AtomicUsize,
}

/// The media loop's end.
#[derive(Debug)]
pub struct EventSender {
    events: mpsc::UnboundedSender<String>,
    waiting: Arc<Waiting>,
}

/// The connection's end: each event taken off it no longer waits in the node.
#[derive(Debug)]
pub struct EventReceiver {
    events: mpsc::UnboundedReceiver<String>,
    waiting: Arc<Waiting>,
}

/// Why an event was not queued: the stream is to be closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// Its client does not read: the bound is reached.
    Behind,
    /// The connection went away.
    Gone,
}

/// A new stream's two ends.
pub fn event_queue() -> (EventSender, EventReceiver) {
    let (tx, rx) = mpsc::unbounded_channel();
    let waiting = Arc::new(Waiting::default());
    let sender = EventSender {
        events: tx,
        waiting: Arc::clone(&waiting),
    };
    (
        sender,
        EventReceiver {
            events: rx,
            waiting,
        },
    )
}

impl EventSender {
    /// Queues an event unless the stream is at its bound or gone. With nothing waiting, an
    /// event is taken whatever its size: a large room's state, a stream's first event, may
    /// be larger than the bound, which is on what a client leaves unread.
    pub fn send(&self, event: String) -> Result<(), Closed> {
        let events = self.waiting.events.load(Ordering::Acquire);
        let bytes = self.waiting.bytes.load(Ordering::Acquire);
        if events >= MAX_EVENTS || (events > 0 && bytes + event.len() > MAX_BYTES) {
            return Err(Closed::Behind);
        }
        let len = event.len();
        // Counted before it is sent, so the receiver never takes off more than was added.
        self.waiting.events.fetch_add(1, Ordering::AcqRel);
        self.waiting.bytes.fetch_add(len, Ordering::AcqRel);
        self.events.send(event).map_err(|_| Closed::Gone)
    }

    /// Events and bytes waiting in the node.
    pub fn waiting(&self) -> (usize, usize) {
        (
            self.waiting.events.load(Ordering::Acquire),
            self.waiting.bytes.load(Ordering::Acquire),
        )
    }
}

impl EventReceiver {
    /// The next event, once there is one; `None` once the sender is gone and all is taken.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<String>> {
        let polled = self.events.poll_recv(cx);
        if let Poll::Ready(Some(event)) = &polled {
            self.waiting.events.fetch_sub(1, Ordering::AcqRel);
            self.waiting.bytes.fetch_sub(event.len(), Ordering::AcqRel);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;

    use super::*;

    #[tokio::test]
    async fn a_stream_nobody_reads_stops_at_its_bound_of_events_or_bytes() {
        let (tx, mut rx) = event_queue();
        for n in 0..MAX_EVENTS {
            assert_eq!(tx.send(format!("event {n}")), Ok(()));
        }
        assert_eq!(tx.send("one more".into()), Err(Closed::Behind));
        assert_eq!(tx.waiting().0, MAX_EVENTS);
        // Taken by the connection: no longer the node's to hold.
        let first = poll_fn(|cx| rx.poll_recv(cx)).await;
        assert_eq!(first.as_deref(), Some("event 0"));
        assert_eq!(tx.waiting().0, MAX_EVENTS - 1);
        assert_eq!(tx.send("room again".into()), Ok(()));

        let (tx, _rx) = event_queue();
        let large = "x".repeat(MAX_BYTES / 4);
        for _ in 0..4 {
            assert_eq!(tx.send(large.clone()), Ok(()));
        }
        assert_eq!(tx.send("y".into()), Err(Closed::Behind), "bytes bound");
        assert_eq!(tx.waiting(), (4, MAX_BYTES));
    }

    /// A large room's state, a stream's first event, is larger than the bound: with nothing
    /// waiting it is taken, and the bound holds for what comes after it unread.
    #[tokio::test]
    async fn an_event_larger_than_the_bound_is_taken_when_nothing_waits() {
        let (tx, mut rx) = event_queue();
        let state = "s".repeat(2 * MAX_BYTES);
        assert_eq!(tx.send(state.clone()), Ok(()));
        assert_eq!(tx.send("next".into()), Err(Closed::Behind));
        let first = poll_fn(|cx| rx.poll_recv(cx)).await;
        assert_eq!(first, Some(state));
        assert_eq!(tx.send("next".into()), Ok(()));
    }

    #[tokio::test]
    async fn a_stream_whose_connection_went_away_says_so() {
        let (tx, rx) = event_queue();
        drop(rx);
        assert_eq!(tx.send("lost".into()), Err(Closed::Gone));
    }
}
