use std::cell::RefCell;
use std::net::UdpSocket;
use std::time::Duration;

use proptest::prelude::*;

use super::*;

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A batch of `count` one-byte datagrams numbered from 0, to port `1000 + n % 2`.
fn numbered(count: usize) -> Batch {
    let mut batch = Batch::new(16);
    for n in 0..count {
        let buffer = batch.next_buffer().expect("room");
        buffer[0] = n as u8;
        batch.commit(addr(1000 + (n % 2) as u16), 1);
    }
    batch
}

/// A socket that takes at most `per_call` datagrams a call, has room for `room` in all,
/// and refuses the datagrams numbered in `refused` (as a host refuses a destination).
struct Fake {
    per_call: usize,
    room: usize,
    refused: Vec<u8>,
    taken: RefCell<Vec<u8>>,
}

impl Fake {
    fn new(per_call: usize, room: usize, refused: &[u8]) -> Self {
        Self {
            per_call,
            room,
            refused: refused.to_vec(),
            taken: RefCell::new(Vec::new()),
        }
    }
}

/// Segmentation on: what a socket of a kernel that has it starts with.
fn on() -> Segmentation {
    Segmentation::new(true)
}

impl SendBatch for Fake {
    fn send_from(&self, batch: &Batch, start: usize, _: &Segmentation) -> io::Result<Taken> {
        let mut taken = self.taken.borrow_mut();
        let mut n = 0;
        for index in start..batch.len() {
            let (datagram, _) = batch.datagram(index).expect("in the batch");
            if n == self.per_call {
                break;
            }
            if taken.len() == self.room {
                return if n == 0 {
                    Err(io::ErrorKind::WouldBlock.into())
                } else {
                    Ok(Taken::one_each(n))
                };
            }
            if self.refused.contains(&datagram[0]) {
                return if n == 0 {
                    Err(io::ErrorKind::HostUnreachable.into())
                } else {
                    Ok(Taken::one_each(n))
                };
            }
            taken.push(datagram[0]);
            n += 1;
        }
        Ok(Taken::one_each(n))
    }
}

#[test]
fn a_batch_fills_to_its_length_and_keeps_its_buffers() {
    let mut batch = numbered(BATCH_LEN);
    assert!(batch.is_full());
    assert!(batch.next_buffer().is_none(), "nothing more fits");
    batch.commit(addr(1), 1);
    assert_eq!(batch.len(), BATCH_LEN, "a commit past the end is ignored");
    assert_eq!(batch.datagram(3), Some((&[3u8][..], addr(1001))));
    assert_eq!(batch.datagram(BATCH_LEN), None);
    batch.clear();
    assert!(batch.is_empty());
    let buffer = batch.next_buffer().expect("room again");
    assert_eq!(buffer.len(), 16, "the whole buffer, kept");
    assert_eq!(buffer[0], 0, "as the last datagram left it");
    batch.commit(addr(1), 17);
    assert_eq!(
        batch.datagram(0).map(|(d, _)| d.len()),
        Some(16),
        "cut to the buffer"
    );
}

#[test]
fn every_datagram_goes_once_and_in_order_however_few_a_call_takes() {
    for per_call in [1, 5, BATCH_LEN] {
        let batch = numbered(BATCH_LEN);
        let socket = Fake::new(per_call, usize::MAX, &[]);
        let outcome = send_all(&socket, &batch, &on());
        let expected: Vec<u8> = (0..BATCH_LEN as u8).collect();
        assert_eq!(*socket.taken.borrow(), expected, "{per_call} a call");
        assert_eq!(outcome.sent, BATCH_LEN);
        assert_eq!(outcome.lost, 0);
        assert_eq!(outcome.calls, BATCH_LEN.div_ceil(per_call));
    }
}

#[test]
fn a_full_send_buffer_loses_the_rest_counted_and_does_not_wait() {
    let batch = numbered(20);
    let socket = Fake::new(8, 12, &[]);
    let outcome = send_all(&socket, &batch, &on());
    assert_eq!(*socket.taken.borrow(), (0..12).collect::<Vec<u8>>());
    assert_eq!(
        outcome,
        Sent {
            sent: 12,
            lost: 8,
            calls: 3,
            messages: 12,
            ..Sent::default()
        }
    );
}

#[test]
fn a_refused_destination_loses_its_datagram_alone() {
    let batch = numbered(10);
    let socket = Fake::new(BATCH_LEN, usize::MAX, &[0, 4, 9]);
    let outcome = send_all(&socket, &batch, &on());
    assert_eq!(*socket.taken.borrow(), vec![1, 2, 3, 5, 6, 7, 8]);
    assert_eq!((outcome.sent, outcome.lost), (7, 3));
}

/// Two receivers on loopback, each read until it has `count` datagrams or a pause.
fn receive(socket: &UdpSocket, count: usize) -> Vec<Vec<u8>> {
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut got = Vec::new();
    let mut buf = [0u8; 2048];
    while got.len() < count {
        match socket.recv(&mut buf) {
            Ok(n) => got.push(buf[..n].to_vec()),
            Err(_) => break,
        }
    }
    got
}

/// Sends `datagrams` (each to the first or the second peer, of its length) through the real
/// socket a batch at a time, segmenting as `segmentation` says: each peer gets exactly its
/// datagrams, whole and in order, and none is lost. What the batches came to, summed.
fn through_the_socket(
    datagrams: &[(bool, usize)],
    segmentation: &Segmentation,
) -> Result<Sent, TestCaseError> {
    through(
        &UdpSocket::bind("127.0.0.1:0").expect("bind"),
        datagrams,
        segmentation,
    )
}

/// [`through_the_socket`] from `node`.
fn through(
    node: &UdpSocket,
    datagrams: &[(bool, usize)],
    segmentation: &Segmentation,
) -> Result<Sent, TestCaseError> {
    let peers = [
        UdpSocket::bind("127.0.0.1:0").expect("bind"),
        UdpSocket::bind("127.0.0.1:0").expect("bind"),
    ];
    let to = peers.each_ref().map(|p| p.local_addr().expect("bound"));
    let mut expected: [Vec<Vec<u8>>; 2] = [Vec::new(), Vec::new()];
    let mut batch = Batch::new(1228);
    let mut sent = Sent::default();
    for (n, &(second, len)) in datagrams.iter().enumerate() {
        let peer = usize::from(second);
        let datagram: Vec<u8> = (0..len).map(|i| (n + i) as u8).collect();
        let buffer = batch.next_buffer().expect("room");
        buffer[..len].copy_from_slice(&datagram);
        batch.commit(to[peer], len);
        expected[peer].push(datagram);
        if batch.is_full() || n + 1 == datagrams.len() {
            let outcome = send_all(node, &batch, segmentation);
            prop_assert_eq!(outcome.lost, 0);
            sent.sent += outcome.sent;
            sent.calls += outcome.calls;
            sent.messages += outcome.messages;
            sent.segmented += outcome.segmented;
            sent.refusals += outcome.refusals;
            batch.clear();
            // Read each batch before the next, so no receive buffer overflows.
            for (peer, expected) in peers.iter().zip(&mut expected) {
                prop_assert_eq!(&receive(peer, expected.len()), &*expected);
                expected.clear();
            }
        }
    }
    prop_assert_eq!(sent.sent, datagrams.len());
    Ok(sent)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Through the real socket (`sendmmsg` on Linux): each destination gets exactly its
    /// datagrams, whole and in order, batch after batch.
    #[test]
    fn through_the_socket_each_destination_gets_its_datagrams_in_order(
        datagrams in proptest::collection::vec((any::<bool>(), 1usize..1200), 1..80),
    ) {
        through_the_socket(&datagrams, &on())?;
    }
}

/// Runs of datagrams to one destination, most of one size: what a keyframe to one viewer
/// looks like, and what segmentation sends as one.
fn runs() -> impl Strategy<Value = Vec<(bool, usize)>> {
    let run = (
        any::<bool>(),
        1usize..12,
        prop_oneof![Just(1100usize), Just(1228), 1usize..1228],
        prop_oneof![Just(None), (1usize..1228).prop_map(Some)],
    );
    proptest::collection::vec(run, 1..12).prop_map(|runs| {
        runs.into_iter()
            .flat_map(|(second, count, size, last)| {
                let last = last.map(|l| l.min(size));
                (0..count).map(move |i| {
                    (
                        second,
                        if i + 1 == count {
                            last.unwrap_or(size)
                        } else {
                            size
                        },
                    )
                })
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Through the real socket, runs to one destination leaving segmented: each destination
    /// still gets exactly its datagrams, whole and in order, in fewer messages than datagrams
    /// wherever a batch held a run.
    #[test]
    fn segmented_runs_arrive_as_the_datagrams_they_were(datagrams in runs()) {
        let node = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let segmentation = Segmentation::new(kernel_segments(&node));
        let sent = through(&node, &datagrams, &segmentation)?;
        prop_assert_eq!(sent.refusals, 0);
        prop_assert_eq!(segmentation.is_on(), cfg!(target_os = "linux"), "the kernel took them");
        let (runs, in_runs) = if segmentation.is_on() { segmented_runs(&datagrams) } else { (0, 0) };
        prop_assert_eq!(sent.segmented, in_runs);
        prop_assert_eq!(sent.messages, sent.sent - in_runs + runs);
    }

    /// Segmentation off (`udp_gso = false`): the same datagrams, one a message.
    #[test]
    fn unsegmented_runs_leave_one_datagram_a_message(datagrams in runs()) {
        let sent = through_the_socket(&datagrams, &Segmentation::new(false))?;
        prop_assert_eq!((sent.messages, sent.segmented), (datagrams.len(), 0));
    }
}

/// The runs of more than one datagram that [`segments::segment_run`] finds, batch by batch as
/// [`through`] sends them, and the datagrams in them.
fn segmented_runs(datagrams: &[(bool, usize)]) -> (usize, usize) {
    let mut runs = 0;
    let mut datagrams_in_runs = 0;
    for chunk in datagrams.chunks(BATCH_LEN) {
        let mut batch = Batch::new(1228);
        for &(second, len) in chunk {
            batch.next_buffer().expect("room");
            batch.commit(addr(if second { 2 } else { 1 }), len);
        }
        let mut start = 0;
        while start < batch.len() {
            let run = segments::segment_run(&batch, start);
            if run > 1 {
                runs += 1;
                datagrams_in_runs += run;
            }
            start += run;
        }
    }
    (runs, datagrams_in_runs)
}

/// A kernel that refuses segmented sends (here because the socket sends without UDP
/// checksums, which segmentation needs: the kernel answers EINVAL, as it does where it has
/// no segmentation for the path): the first refusal is counted and turns segmentation off,
/// and every datagram still arrives, whole and in order, one a message.
#[cfg(target_os = "linux")]
#[test]
fn a_refused_segmented_send_turns_segmentation_off_and_loses_nothing() {
    use std::os::fd::AsRawFd;
    let node = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let no_check: libc::c_int = 1;
    // SAFETY: the option's value is a live c_int, and its length says so.
    #[allow(unsafe_code)]
    let set = unsafe {
        libc::setsockopt(
            node.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_NO_CHECK,
            (&no_check as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(set, 0, "{}", io::Error::last_os_error());
    let segmentation = Segmentation::new(true);
    let datagrams = [
        [(false, 1000); 5].as_slice(),
        &[(true, 700); 3],
        &[(false, 1000); 40],
    ]
    .concat();
    let sent = through(&node, &datagrams, &segmentation).expect("all arrive in order");
    assert!(!segmentation.is_on(), "off after the refusal");
    assert_eq!(sent.refusals, 1, "counted once");
    assert_eq!((sent.messages, sent.segmented), (datagrams.len(), 0));
    let again = through(&node, &datagrams, &segmentation).expect("all arrive in order");
    assert_eq!(again.refusals, 0, "not tried again");
}

/// The kernel here knows UDP segmentation on a UDP socket; no socket that is not UDP does.
#[cfg(target_os = "linux")]
#[test]
fn the_kernel_is_asked_whether_it_segments() {
    assert!(kernel_segments(
        &UdpSocket::bind("127.0.0.1:0").expect("bind")
    ));
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    assert!(!kernel_segments(&tcp), "a TCP socket has no UDP option");
}

#[test]
fn an_empty_socket_receives_nothing_and_does_not_wait() {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let mut batch = RecvBatch::new(2048);
    let error = socket.receive(&mut batch).expect_err("nothing waits");
    assert_eq!(error.kind(), io::ErrorKind::WouldBlock);
    assert!(batch.is_empty());
}

/// The kernel turns its receive stamps on for the first socket that asks a moment later
/// (from a work queue); a datagram that comes before is stamped when it is read.
#[cfg(target_os = "linux")]
pub(in crate::node) fn after_stamps_turn_on() {
    std::thread::sleep(Duration::from_millis(100));
}

/// With the kernel's stamps on, a read says how long each datagram waited in the socket
/// before it: the first, sent 30 ms before the second, waited 30 ms longer. A socket without
/// them says nothing waited.
#[cfg(target_os = "linux")]
#[test]
fn a_stamped_datagram_says_how_long_it_waited_before_the_read() {
    let stamped = UdpSocket::bind("127.0.0.1:0").expect("bind");
    stamp_arrivals(&stamped).expect("the kernel stamps arrivals");
    after_stamps_turn_on();
    let unstamped = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let sender = UdpSocket::bind("127.0.0.1:0").expect("bind");
    for datagram in [b"early", b"later"] {
        for socket in [&stamped, &unstamped] {
            let to = socket.local_addr().expect("bound");
            sender.send_to(datagram, to).expect("send");
        }
        std::thread::sleep(Duration::from_millis(30));
    }
    let mut batch = RecvBatch::new(2048);
    assert_eq!(stamped.receive(&mut batch).expect("two wait"), 2);
    let (early, later) = (batch.waited(0), batch.waited(1));
    assert!(
        early >= later + Duration::from_millis(30),
        "{early:?} {later:?}"
    );
    assert!(
        later >= Duration::from_millis(30),
        "slept after it too: {later:?}"
    );
    assert!(early < Duration::from_secs(10), "{early:?}");
    assert_eq!(unstamped.receive(&mut batch).expect("two wait"), 2);
    assert_eq!(
        (batch.waited(0), batch.waited(1)),
        (Duration::ZERO, Duration::ZERO)
    );
}

/// Receives until `count` datagrams came or a second passed.
fn receive_batches(socket: &UdpSocket, count: usize) -> Vec<(Vec<u8>, SocketAddr)> {
    let mut batch = RecvBatch::new(2048);
    let mut got = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    while got.len() < count && std::time::Instant::now() < deadline {
        match socket.receive(&mut batch) {
            Ok(n) => {
                assert!(n <= BATCH_LEN);
                got.extend(
                    (0..n)
                        .filter_map(|i| batch.datagram(i))
                        .map(|(d, f)| (d.to_vec(), f)),
                );
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
            Err(e) => panic!("receive: {e}"),
        }
    }
    got
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Through the real socket (`recvmmsg` on Linux): every datagram from each sender, whole,
    /// in its order, with the sender's address.
    #[test]
    fn through_the_socket_every_datagram_arrives_with_its_sender(
        datagrams in proptest::collection::vec((any::<bool>(), 1usize..1200), 1..48),
    ) {
        let node = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let at = node.local_addr().expect("bound");
        let senders = [
            UdpSocket::bind("127.0.0.1:0").expect("bind"),
            UdpSocket::bind("127.0.0.1:0").expect("bind"),
        ];
        let mut expected: Vec<(Vec<u8>, SocketAddr)> = Vec::new();
        for (n, &(second, len)) in datagrams.iter().enumerate() {
            let sender = &senders[usize::from(second)];
            let datagram: Vec<u8> = (0..len).map(|i| (n * 7 + i) as u8).collect();
            sender.send_to(&datagram, at).expect("send");
            expected.push((datagram, sender.local_addr().expect("bound")));
        }
        let got = receive_batches(&node, expected.len());
        // One socket receives in the order sent over loopback.
        prop_assert_eq!(got, expected);
    }
}
