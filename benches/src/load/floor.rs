//! The kernel's floor on this machine: what sending a datagram costs when sending is all a
//! process does. One socket sends full-size (1,200-byte) datagrams over loopback to as many
//! sockets as the run has viewers, in batches of the node's size through the node's own
//! `sendmmsg(2)` path, to each destination in turn as the node's fan-out does (with two or
//! more, no two consecutive datagrams share one, so none leave segmented); another thread
//! reads them all. The figure is the sending thread's CPU time per datagram sent. Over
//! loopback the receive path up to the receiving socket (and the reader's wake-up) runs in
//! the sender's system call, so it is in that figure, as delivering to the viewers is in the
//! node's CPU: the node's cost per delivered packet over this one says how much of it is more
//! than the kernel's.
//!
//! The sender stays a bounded number of datagrams ahead of the reader, so the receiving
//! sockets' buffers do not overflow (a dropped datagram costs the kernel less than a
//! delivered one); whatever did not arrive is reported beside the figure.
//!
//! As fast as it can, the sender gives the kernel's best case: the reader never sleeps and
//! every path in the kernel stays in cache. [`Pace`] makes it send as the node did instead,
//! as many datagrams per call and as many calls a second, sleeping between them: each call
//! then wakes the reader, and the sender wakes from its sleep, as the node's turns do. That
//! is the floor at the node's rate, which says how much of the node's cost the rate alone
//! brings.

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use nix::time::{clock_gettime, ClockId};
use sfu::node::batch::{send_all, Batch, ReceiveBatch, RecvBatch, Segmentation, BATCH_LEN};

use super::pin::{pin_this_thread, PinError};
use super::wait::wait_until;
use crate::node::PACKET_LEN;

/// Datagrams per destination the sender may be ahead of the reader: well under what a
/// socket's default receive buffer holds of full-size datagrams (some 90).
const AHEAD_PER_DESTINATION: u64 = 16;
/// How long the reader may get nothing while datagrams are on their way before the sender
/// writes them off as lost: far longer than a thread waits for a core.
const STALL: Duration = Duration::from_secs(1);
/// The sender's nap while too far ahead.
const NAP: Duration = Duration::from_micros(50);
/// The reader's longest wait, so it sees the sender finish.
const READER_TICK: Duration = Duration::from_millis(10);
/// Once the sender is done, the reader stops after this long without a datagram.
const QUIET: Duration = Duration::from_millis(200);
/// What the datagrams hold: their bytes are not looked at.
const FILL: u8 = 0x5A;

/// How long the floor sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// This many datagrams (the last batch cut to fit).
    Sent(u64),
    /// Whole batches until this much time has passed.
    Elapsed(Duration),
}

/// A sender that sends as the node did: `per_call` datagrams a call, a call every
/// `call_interval`, and asleep between calls as often as the node slept (once every
/// `wake_interval`): the calls due within one wake-up's span go out back to back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    pub per_call: usize,
    pub call_interval: Duration,
    pub wake_interval: Duration,
}

impl Pace {
    /// The pace of `datagrams` in `calls` with `wakes` over `wall`, each call holding at
    /// most a batch, and at most one wake-up a call; none without calls.
    pub fn of(datagrams: u64, calls: u64, wakes: u64, wall: Duration) -> Option<Self> {
        let call_interval = wall.checked_div(u32::try_from(calls).ok()?)?;
        let wakes = u32::try_from(wakes.clamp(1, calls)).ok()?;
        let per_call = (datagrams as f64 / calls as f64).round() as usize;
        Some(Self {
            per_call: per_call.clamp(1, BATCH_LEN),
            call_interval,
            wake_interval: wall / wakes,
        })
    }

    /// When call `n` is due, from the start.
    fn due(&self, n: u64) -> Duration {
        self.call_interval * u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// Whether call `n` falls in a later wake-up's span than the call before it: then the
    /// sender sleeps until it is due.
    fn sleeps_before(&self, n: u64) -> bool {
        let span = |call| self.due(call).as_nanos() / self.wake_interval.as_nanos().max(1);
        n > 0 && span(n) > span(n - 1)
    }
}

/// A pace as the command line gives it, `PER_CALL,CALL_US,WAKE_US`: datagrams a call, and
/// microseconds between calls and between wake-ups.
impl FromStr for Pace {
    type Err = PaceError;

    fn from_str(text: &str) -> Result<Self, PaceError> {
        let fields: Vec<&str> = text.split(',').collect();
        let [per_call, call_us, wake_us] = fields[..] else {
            return Err(PaceError::Fields);
        };
        let number = |field: &str| field.trim().parse::<u64>().ok().filter(|&n| n > 0);
        let (Some(per_call), Some(call_us), Some(wake_us)) =
            (number(per_call), number(call_us), number(wake_us))
        else {
            return Err(PaceError::NotPositive);
        };
        let per_call = usize::try_from(per_call)
            .ok()
            .filter(|&n| n <= BATCH_LEN)
            .ok_or(PaceError::PerCall)?;
        Ok(Self {
            per_call,
            call_interval: Duration::from_micros(call_us),
            wake_interval: Duration::from_micros(wake_us),
        })
    }
}

/// The command-line form `FromStr` reads back, to the microsecond: a measured pace printed
/// this way can be given to `--floor-pace` to measure that floor alone.
impl fmt::Display for Pace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{},{},{}",
            self.per_call,
            self.call_interval.as_micros(),
            self.wake_interval.as_micros()
        )
    }
}

/// Why a pace on the command line is not one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PaceError {
    #[error("a pace is PER_CALL,CALL_US,WAKE_US: three numbers")]
    Fields,
    #[error("a pace's three numbers are whole and above 0")]
    NotPositive,
    #[error("a pace sends at most {BATCH_LEN} datagrams a call")]
    PerCall,
}

/// What the floor measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Floor {
    pub destinations: usize,
    /// Datagrams the socket took.
    pub sent: u64,
    /// Datagrams the socket refused or had no room for.
    pub lost: u64,
    /// `sendmmsg` calls made.
    pub calls: u64,
    /// Datagrams the reader got.
    pub received: u64,
    /// The sending thread's CPU time while it sent.
    pub sender_cpu: Duration,
    pub wall: Duration,
    /// Set when the sender kept the node's pace.
    pub pace: Option<Pace>,
    /// Times it slept to keep that pace.
    pub sleeps: u64,
}

impl Floor {
    /// The sender's CPU microseconds per datagram sent.
    pub fn us_per_datagram(&self) -> Option<f64> {
        per(self.sender_cpu.as_secs_f64() * 1e6, self.sent)
    }

    pub fn per_call(&self) -> Option<f64> {
        per(self.sent as f64, self.calls)
    }
}

/// `value / count`, when there is a count.
pub fn per(value: f64, count: u64) -> Option<f64> {
    (count > 0).then(|| value / count as f64)
}

/// Why the floor could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum FloorError {
    #[error("the floor's sockets: {0}")]
    Io(#[from] io::Error),
    #[error("the floor's sender: {0}")]
    Pin(#[from] PinError),
    #[error("the floor's {0} thread panicked")]
    Panicked(&'static str),
}

/// What the two threads share.
#[derive(Debug, Default)]
struct Progress {
    received: AtomicU64,
    /// Set with the final count once the sender is done.
    done: AtomicBool,
    sent: AtomicU64,
}

/// Sends to `destinations` loopback sockets until `until`, as fast as it can or at `pace`,
/// the sending thread on `sender_cpu` when given, and reads them on another thread (on the
/// caller's CPUs).
pub fn measure(
    destinations: usize,
    until: Until,
    sender_cpu: Option<usize>,
    pace: Option<Pace>,
) -> Result<Floor, FloorError> {
    let sockets = (0..destinations.max(1))
        .map(|_| {
            let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
            socket.set_nonblocking(true)?;
            Ok(socket)
        })
        .collect::<io::Result<Vec<_>>>()?;
    let addresses = sockets
        .iter()
        .map(UdpSocket::local_addr)
        .collect::<io::Result<Vec<_>>>()?;
    let progress = Arc::new(Progress::default());
    let reader = spawn_reader(sockets, Arc::clone(&progress))?;
    let sender = {
        let progress = Arc::clone(&progress);
        std::thread::Builder::new()
            .name("floor-sender".into())
            .spawn(move || {
                let sent = sender_cpu
                    .map_or(Ok(()), pin_this_thread)
                    .map_err(FloorError::from)
                    .and_then(|()| send(&addresses, until, pace, &progress));
                // The reader stops on this even when the sender failed.
                progress.done.store(true, Ordering::Release);
                sent
            })?
    };
    let sent = sender.join().map_err(|_| FloorError::Panicked("sender"));
    // Joined before either result is looked at: the reader ends once `done` is set.
    let received = reader.join().map_err(|_| FloorError::Panicked("reader"));
    let mut floor = sent??;
    floor.received = received??;
    Ok(floor)
}

/// The sending thread's loop; `received` is left for the reader to fill in.
fn send(
    addresses: &[SocketAddr],
    until: Until,
    pace: Option<Pace>,
    progress: &Progress,
) -> Result<Floor, FloorError> {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
    let mut batch = Batch::new(PACKET_LEN);
    let ahead = AHEAD_PER_DESTINATION * addresses.len() as u64;
    let per_call = pace.map_or(BATCH_LEN, |p| p.per_call) as u64;
    let mut floor = Floor {
        destinations: addresses.len(),
        pace,
        ..Floor::default()
    };
    // Datagrams that never arrived, written off so the sender need not wait for them.
    let mut written_off = 0;
    let mut next = 0;
    let cpu_before = thread_cpu()?;
    let start = Instant::now();
    loop {
        let room = match until {
            Until::Sent(n) => n.saturating_sub(floor.sent + floor.lost).min(per_call),
            Until::Elapsed(d) if start.elapsed() < d => per_call,
            Until::Elapsed(_) => 0,
        };
        if room == 0 {
            break;
        }
        for _ in 0..room {
            let Some(buffer) = batch.next_buffer() else {
                break;
            };
            // Written per datagram, as the node writes each packet it sends.
            let Some(datagram) = buffer.get_mut(..PACKET_LEN) else {
                break;
            };
            datagram.fill(FILL);
            batch.commit(addresses[next], PACKET_LEN);
            next = (next + 1) % addresses.len();
        }
        // Each datagram to the next destination: nothing to segment, one message each.
        let outcome = send_all(&socket, &batch, &Segmentation::new(false));
        batch.clear();
        floor.sent += outcome.sent as u64;
        floor.lost += outcome.lost as u64;
        floor.calls += outcome.calls as u64;
        written_off = wait_for_reader(progress, floor.sent, written_off, ahead);
        if let Some(pace) = pace.filter(|p| p.sleeps_before(floor.calls)) {
            // On a schedule from the start, so the rate holds however long each call took.
            let due = start + pace.due(floor.calls);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            floor.sleeps += 1;
        }
    }
    floor.sender_cpu = thread_cpu()?.saturating_sub(cpu_before);
    floor.wall = start.elapsed();
    progress.sent.store(floor.sent, Ordering::Release);
    Ok(floor)
}

/// Naps while more than `ahead` datagrams are on their way; once the reader has got none
/// for [`STALL`], the gap is taken as lost (a receive buffer overflowed). Returns the
/// datagrams written off so far.
fn wait_for_reader(progress: &Progress, sent: u64, written_off: u64, ahead: u64) -> u64 {
    let mut last = progress.received.load(Ordering::Acquire);
    let mut since = Instant::now();
    loop {
        let received = progress.received.load(Ordering::Acquire);
        let on_the_way = sent.saturating_sub(received + written_off);
        if on_the_way <= ahead {
            return written_off;
        }
        if received != last {
            (last, since) = (received, Instant::now());
        } else if since.elapsed() >= STALL {
            return written_off + on_the_way;
        }
        std::thread::sleep(NAP);
    }
}

/// This thread's CPU time so far.
fn thread_cpu() -> io::Result<Duration> {
    Ok(clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)?.into())
}

fn spawn_reader(
    sockets: Vec<UdpSocket>,
    progress: Arc<Progress>,
) -> io::Result<JoinHandle<Result<u64, FloorError>>> {
    let mut poll = Poll::new()?;
    for (index, socket) in sockets.iter().enumerate() {
        let fd = socket.as_raw_fd();
        poll.registry()
            .register(&mut SourceFd(&fd), Token(index), Interest::READABLE)?;
    }
    std::thread::Builder::new()
        .name("floor-reader".into())
        .spawn(move || {
            let mut events = Events::with_capacity(sockets.len());
            let mut batch = RecvBatch::new(PACKET_LEN);
            let mut received = 0;
            let mut last_arrival = Instant::now();
            loop {
                wait_until(&mut poll, &mut events, Instant::now() + READER_TICK)?;
                for event in &events {
                    if let Some(socket) = sockets.get(event.token().0) {
                        received += drain(socket, &mut batch)?;
                        last_arrival = Instant::now();
                    }
                }
                progress.received.store(received, Ordering::Release);
                if progress.done.load(Ordering::Acquire)
                    && (received >= progress.sent.load(Ordering::Acquire)
                        || last_arrival.elapsed() >= QUIET)
                {
                    return Ok(received);
                }
            }
        })
}

/// Reads a socket empty (its readiness is edge-triggered); returns the datagrams read.
fn drain(socket: &UdpSocket, batch: &mut RecvBatch) -> io::Result<u64> {
    let mut read = 0;
    loop {
        match socket.receive(batch) {
            Ok(n) => {
                read += n as u64;
                if n < BATCH_LEN {
                    return Ok(read);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(read),
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn every_datagram_sent_is_read_in_batches_of_the_node() {
        let floor = measure(3, Until::Sent(100), None, None).expect("floor");
        assert_eq!(floor.destinations, 3);
        assert_eq!((floor.sent, floor.lost, floor.received), (100, 0, 100));
        // 32 + 32 + 32 + 4.
        assert_eq!(floor.calls, 4);
        assert_eq!(floor.per_call(), Some(25.0));
        assert!(floor.sender_cpu > Duration::ZERO);
        assert!(floor.us_per_datagram().is_some_and(|us| us > 0.0));
    }

    #[test]
    fn a_time_limit_sends_whole_batches() {
        let floor =
            measure(2, Until::Elapsed(Duration::from_millis(20)), None, None).expect("floor");
        assert!(floor.sent >= BATCH_LEN as u64);
        assert_eq!(floor.sent % BATCH_LEN as u64, 0);
        assert_eq!(floor.received, floor.sent);
    }

    #[test]
    fn a_paced_sender_sends_the_node_s_batches_at_its_rate() {
        let pace = Pace {
            per_call: 5,
            call_interval: Duration::from_millis(4),
            wake_interval: Duration::from_millis(8),
        };
        let floor = measure(4, Until::Sent(40), None, Some(pace)).expect("floor");
        assert_eq!((floor.sent, floor.received, floor.calls), (40, 40, 8));
        assert_eq!(floor.per_call(), Some(5.0));
        assert_eq!(floor.pace, Some(pace));
        // Calls due at 0, 4, .. 28 ms, two to a wake-up: asleep before 8, 16, 24 and 32.
        assert_eq!(floor.sleeps, 4);
        assert!(floor.wall >= Duration::from_millis(32), "{:?}", floor.wall);
    }

    #[test]
    fn the_pace_is_the_node_s_calls_and_wake_ups_over_its_seconds() {
        let pace = Pace::of(28_000, 1_000, 500, Duration::from_secs(10)).expect("a pace");
        assert_eq!(pace.per_call, 28);
        assert_eq!(pace.call_interval, Duration::from_millis(10));
        assert_eq!(pace.wake_interval, Duration::from_millis(20));
        assert_eq!(
            (1..=4).map(|n| pace.sleeps_before(n)).collect::<Vec<_>>(),
            [false, true, false, true]
        );
        // Never more than a batch a call, never none; never more wake-ups than calls.
        let second = Duration::from_secs(1);
        assert_eq!(
            Pace::of(100_000, 10, 1, second).map(|p| p.per_call),
            Some(BATCH_LEN)
        );
        assert_eq!(Pace::of(1, 10, 1, second).map(|p| p.per_call), Some(1));
        let every_call = Pace::of(10, 10, 50, second).expect("a pace");
        assert_eq!(every_call.wake_interval, every_call.call_interval);
        assert!((1..5).all(|n| every_call.sleeps_before(n)));
        assert_eq!(Pace::of(10, 0, 1, second), None);
    }

    proptest! {
        #[test]
        fn a_pace_printed_is_read_back(
            per_call in 1..=BATCH_LEN,
            call_us in 1..u64::MAX,
            wake_us in 1..u64::MAX,
        ) {
            let pace = Pace {
                per_call,
                call_interval: Duration::from_micros(call_us),
                wake_interval: Duration::from_micros(wake_us),
            };
            prop_assert_eq!(pace.to_string().parse::<Pace>(), Ok(pace));
        }

        #[test]
        fn any_text_is_a_pace_or_says_why_not(text in "[0-9, a-]{0,40}|\\PC{0,40}") {
            if let Ok(pace) = text.parse::<Pace>() {
                prop_assert_eq!(pace.to_string().parse::<Pace>(), Ok(pace));
                prop_assert!((1..=BATCH_LEN).contains(&pace.per_call));
            }
        }
    }

    #[test]
    fn a_pace_is_read_from_its_three_numbers() {
        assert_eq!(
            "28,638,918".parse(),
            Ok(Pace {
                per_call: 28,
                call_interval: Duration::from_micros(638),
                wake_interval: Duration::from_micros(918),
            })
        );
        assert_eq!("28,638".parse::<Pace>(), Err(PaceError::Fields));
        assert_eq!("28,638,918,1".parse::<Pace>(), Err(PaceError::Fields));
        assert_eq!("28,0,918".parse::<Pace>(), Err(PaceError::NotPositive));
        assert_eq!("28,-1,918".parse::<Pace>(), Err(PaceError::NotPositive));
        assert_eq!("a,638,918".parse::<Pace>(), Err(PaceError::NotPositive));
        assert_eq!("33,638,918".parse::<Pace>(), Err(PaceError::PerCall));
        assert_eq!("32,638,918".parse::<Pace>().map(|p| p.per_call), Ok(32));
    }

    #[test]
    fn per_is_none_without_a_count() {
        assert_eq!(per(10.0, 4), Some(2.5));
        assert_eq!(per(10.0, 0), None);
        assert_eq!(Floor::default().us_per_datagram(), None);
    }
}
