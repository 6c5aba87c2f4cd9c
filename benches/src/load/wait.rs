//! Waiting on many clients' sockets at once (epoll, through `mio`), so a thread that drives
//! hundreds of clients sleeps until a datagram or a timer is due instead of spinning. The
//! clients keep their std sockets; only their descriptors are registered.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use crate::client::Client;

/// The least time between two timer polls of one client: the WebRTC state may ask to be
/// polled "now" again right after a poll, and waiting on that would spin.
pub const MIN_TIMER_GAP: Duration = Duration::from_millis(1);

/// Wakes `poll` with `token` whenever the client's socket has something to read. Readiness
/// is edge-triggered: the client must be read until its socket is empty.
pub fn register(poll: &Poll, client: &Client, token: usize) -> std::io::Result<()> {
    let fd = client.as_raw_fd();
    poll.registry()
        .register(&mut SourceFd(&fd), Token(token), Interest::READABLE)
}

/// Undoes [`register`] (before the client's socket closes).
pub fn deregister(poll: &Poll, client: &Client) -> std::io::Result<()> {
    let fd = client.as_raw_fd();
    poll.registry().deregister(&mut SourceFd(&fd))
}

/// Waits until a registered socket is readable or `until` passes; the events are in `events`
/// (none when a signal cut the wait short).
pub fn wait_until(poll: &mut Poll, events: &mut Events, until: Instant) -> std::io::Result<()> {
    let timeout = until.saturating_duration_since(Instant::now());
    match poll.poll(events, Some(timeout)) {
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
            events.clear();
            Ok(())
        }
        other => other,
    }
}
