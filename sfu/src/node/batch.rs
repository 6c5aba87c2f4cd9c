//! Datagrams sent and received in batches: what one poll of the core produces leaves in one
//! `sendmmsg(2)` call instead of one `sendto(2)` each, and what waits on the socket comes in
//! one `recvmmsg(2)`. The system call, not the cipher, is most of what a
//! datagram costs the node (BENCHMARKS.md, `node/egress_srtp`), and a forwarding server sends
//! many small datagrams to many destinations at once, so the call is what to share.
//!
//! Behind [`SendBatch`] and [`ReceiveBatch`]: on Linux one call per batch, and consecutive
//! datagrams to one destination as one segmented send ([`segments`]); elsewhere one
//! `send_to` or `recv_from` per datagram; in tests a socket that fills up.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

pub use segments::Segmentation;

/// Datagrams per batch: enough that the call's cost is shared thin, few enough that the
/// message headers fit on the stack (about 6 KiB with their addresses).
pub const BATCH_LEN: usize = 32;

/// Datagrams waiting to be sent, each written where it is sent from: a buffer of its own,
/// allocated (and zeroed) once, never resized.
#[derive(Debug)]
pub struct Batch {
    buffers: Vec<Box<[u8]>>,
    /// Each datagram written: where it goes and how long it is.
    written: Vec<(SocketAddr, usize)>,
}

impl Batch {
    /// [`BATCH_LEN`] buffers of `datagram_capacity` bytes each.
    pub fn new(datagram_capacity: usize) -> Self {
        Self {
            buffers: (0..BATCH_LEN)
                .map(|_| vec![0; datagram_capacity].into_boxed_slice())
                .collect(),
            written: Vec::with_capacity(BATCH_LEN),
        }
    }

    /// The whole buffer the next datagram is written into, or None when the batch is full.
    /// It holds whatever an earlier datagram left.
    pub fn next_buffer(&mut self) -> Option<&mut [u8]> {
        self.buffers
            .get_mut(self.written.len())
            .map(|buffer| &mut buffer[..])
    }

    /// The first `len` bytes of [`Self::next_buffer`] are a datagram to go to `to` (cut to
    /// the buffer).
    pub fn commit(&mut self, to: SocketAddr, len: usize) {
        if let Some(buffer) = self.buffers.get(self.written.len()) {
            self.written.push((to, len.min(buffer.len())));
        }
    }

    /// Datagrams waiting.
    pub fn len(&self) -> usize {
        self.written.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.written.is_empty()
    }

    /// Whether no more fits.
    pub fn is_full(&self) -> bool {
        self.written.len() == self.buffers.len()
    }

    /// Datagram `index` and where it goes.
    pub fn datagram(&self, index: usize) -> Option<(&[u8], SocketAddr)> {
        let (to, len) = *self.written.get(index)?;
        Some((self.buffers.get(index)?.get(..len)?, to))
    }

    /// Forgets what waits; the buffers stay for the next batch.
    pub fn clear(&mut self) {
        self.written.clear();
    }
}

/// A socket that sends a batch's datagrams in order.
pub trait SendBatch {
    /// Sends datagrams `start..` of `batch` in order, as many as the socket takes in one go,
    /// runs to one destination as one segmented message each while `segmentation` is on;
    /// says how many went. An error is about datagram `start`: a full send buffer
    /// (`WouldBlock`) or what the host says of its destination.
    fn send_from(
        &self,
        batch: &Batch,
        start: usize,
        segmentation: &Segmentation,
    ) -> io::Result<Taken>;
}

/// What one send call took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Taken {
    /// Datagrams.
    pub datagrams: usize,
    /// The messages they left in: one a datagram, or one a segmented run.
    pub messages: usize,
    /// Those of the datagrams that left in segmented messages.
    pub segmented: usize,
    /// Whether the kernel refused a segmented send on the way (and segmentation went off).
    pub refused: bool,
}

impl Taken {
    /// `datagrams` taken one a message.
    pub fn one_each(datagrams: usize) -> Self {
        Self {
            datagrams,
            messages: datagrams,
            ..Self::default()
        }
    }
}

/// What became of a batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sent {
    /// Datagrams the socket took.
    pub sent: usize,
    /// Datagrams lost: refused, or behind a full send buffer.
    pub lost: usize,
    /// Send calls made.
    pub calls: usize,
    /// Messages the datagrams sent left in (fewer than they when runs left segmented).
    pub messages: usize,
    /// Datagrams sent within segmented messages.
    pub segmented: usize,
    /// Segmented sends the kernel refused, each turning segmentation off.
    pub refusals: usize,
}

/// Sends all of `batch` the socket takes, never waiting for it: a datagram the host refuses
/// (an unreachable destination) is lost alone and the rest still go; a full send buffer
/// loses the rest of the batch (NACK repairs media, DTLS and STUN retransmit), as it would
/// one datagram sent alone. A viewer that does not read is never what the others wait on.
pub fn send_all(socket: &impl SendBatch, batch: &Batch, segmentation: &Segmentation) -> Sent {
    let mut outcome = Sent::default();
    let mut start = 0;
    while start < batch.len() {
        outcome.calls += 1;
        match socket.send_from(batch, start, segmentation) {
            Ok(taken) if taken.datagrams == 0 => break,
            Ok(taken) => {
                outcome.sent += taken.datagrams;
                outcome.messages += taken.messages;
                outcome.segmented += taken.segmented;
                outcome.refusals += usize::from(taken.refused);
                start += taken.datagrams;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(_) => {
                outcome.lost += 1;
                start += 1;
            }
        }
    }
    outcome.lost += batch.len() - start;
    outcome
}

/// Whether the kernel knows UDP segmentation on `socket` (Linux 4.18 and later): asked once,
/// at start, since an older kernel would not refuse the option but ignore it.
#[cfg(target_os = "linux")]
pub fn kernel_segments(socket: &impl std::os::fd::AsRawFd) -> bool {
    mmsg::kernel_segments(socket.as_raw_fd())
}

/// Nowhere but on Linux.
#[cfg(not(target_os = "linux"))]
pub fn kernel_segments<T>(_: &T) -> bool {
    false
}

/// Datagrams received in one call, each in a buffer of its own, allocated once.
#[derive(Debug, Default)]
pub struct RecvBatch {
    buffers: Vec<Vec<u8>>,
    lens: Vec<usize>,
    from: Vec<SocketAddr>,
    /// How long each waited in the socket before the call (see [`waited`](Self::waited)).
    waited: Vec<Duration>,
}

impl RecvBatch {
    /// [`BATCH_LEN`] buffers of `datagram_capacity` bytes each.
    pub fn new(datagram_capacity: usize) -> Self {
        Self {
            buffers: vec![vec![0; datagram_capacity]; BATCH_LEN],
            lens: Vec::with_capacity(BATCH_LEN),
            from: Vec::with_capacity(BATCH_LEN),
            waited: Vec::with_capacity(BATCH_LEN),
        }
    }

    /// Datagrams received by the last call.
    pub fn len(&self) -> usize {
        self.from.len()
    }

    /// Whether the last call received none.
    pub fn is_empty(&self) -> bool {
        self.from.is_empty()
    }

    /// Datagram `index` of the last call and where it came from.
    pub fn datagram(&self, index: usize) -> Option<(&[u8], SocketAddr)> {
        let from = *self.from.get(index)?;
        let len = *self.lens.get(index)?;
        Some((self.buffers.get(index)?.get(..len)?, from))
    }

    /// How long datagram `index` of the last call waited in the socket before the call took
    /// it: from the kernel's receive stamp, on a socket that has them on
    /// ([`stamp_arrivals`]); zero without one.
    pub fn waited(&self, index: usize) -> Duration {
        self.waited.get(index).copied().unwrap_or_default()
    }

    fn clear(&mut self) {
        self.lens.clear();
        self.from.clear();
        self.waited.clear();
    }

    fn push(&mut self, len: usize, from: SocketAddr, waited: Duration) {
        if self.from.len() < self.buffers.len() {
            self.lens.push(len);
            self.from.push(from);
            self.waited.push(waited);
        }
    }
}

/// Asks the kernel to stamp each datagram `socket` receives with the time it arrived
/// (`SO_TIMESTAMPNS`, Linux), so that a read some time later still knows when each came
/// ([`RecvBatch::waited`]). A socket read in spaced turns would otherwise tell the core that
/// everything in a turn arrived at once, and the arrival times in the transport-wide
/// feedback to a publisher (draft-holmer-rmcat-transport-wide-cc-extensions), which its
/// bandwidth estimate reads, would be the reader's schedule, not the path's.
pub fn stamp_arrivals(socket: &impl std::os::fd::AsRawFd) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    return mmsg::stamp_arrivals(socket.as_raw_fd());
    #[cfg(not(target_os = "linux"))]
    {
        let _ = socket;
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// A socket that receives datagrams in batches.
pub trait ReceiveBatch {
    /// Receives what is waiting, up to a batch, without waiting: `WouldBlock` when nothing
    /// is. The batch holds what came, in arrival order.
    fn receive(&self, batch: &mut RecvBatch) -> io::Result<usize>;
}

/// Receives what waits on `socket`, up to a batch, and hands each datagram to `each` (its
/// sender, its bytes, how long it waited) in arrival order. Nothing waiting is not an error
/// (readiness can be stale); another error is logged, and the next readiness tries again.
pub fn receive_each(
    socket: &impl ReceiveBatch,
    batch: &mut RecvBatch,
    each: impl FnMut(SocketAddr, &[u8], Duration),
) {
    let read = socket.receive(batch);
    each_received(read, batch, each);
}

/// Hands each datagram of `batch` to `each`, as [`receive_each`] does, after a `read` of
/// the socket into it.
pub fn each_received(
    read: io::Result<usize>,
    batch: &RecvBatch,
    mut each: impl FnMut(SocketAddr, &[u8], Duration),
) {
    match read {
        Ok(_) => {
            for index in 0..batch.len() {
                if let Some((data, from)) = batch.datagram(index) {
                    each(from, data, batch.waited(index));
                }
            }
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
        Err(e) => tracing::debug!("udp receive: {e}"),
    }
}

#[cfg(target_os = "linux")]
impl SendBatch for tokio::net::UdpSocket {
    fn send_from(&self, batch: &Batch, start: usize, gso: &Segmentation) -> io::Result<Taken> {
        use std::os::fd::AsRawFd;
        // Through the runtime, so a full buffer clears the socket's write readiness as
        // `try_send_to` does.
        self.try_io(tokio::io::Interest::WRITABLE, || {
            mmsg::send(self.as_raw_fd(), batch, start, gso)
        })
    }
}

#[cfg(target_os = "linux")]
impl SendBatch for std::net::UdpSocket {
    fn send_from(&self, batch: &Batch, start: usize, gso: &Segmentation) -> io::Result<Taken> {
        use std::os::fd::AsRawFd;
        mmsg::send(self.as_raw_fd(), batch, start, gso)
    }
}

#[cfg(not(target_os = "linux"))]
impl SendBatch for tokio::net::UdpSocket {
    fn send_from(&self, batch: &Batch, start: usize, _: &Segmentation) -> io::Result<Taken> {
        let (datagram, to) = batch.datagram(start).ok_or(io::ErrorKind::InvalidInput)?;
        self.try_send_to(datagram, to).map(|_| Taken::one_each(1))
    }
}

#[cfg(not(target_os = "linux"))]
impl SendBatch for std::net::UdpSocket {
    fn send_from(&self, batch: &Batch, start: usize, _: &Segmentation) -> io::Result<Taken> {
        let (datagram, to) = batch.datagram(start).ok_or(io::ErrorKind::InvalidInput)?;
        self.send_to(datagram, to).map(|_| Taken::one_each(1))
    }
}

#[cfg(target_os = "linux")]
impl ReceiveBatch for tokio::net::UdpSocket {
    fn receive(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        // Through the runtime, so an empty socket clears its read readiness.
        self.try_io(tokio::io::Interest::READABLE, || {
            mmsg::receive(self.as_raw_fd(), batch)
        })
    }
}

#[cfg(target_os = "linux")]
impl ReceiveBatch for std::net::UdpSocket {
    fn receive(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        mmsg::receive(self.as_raw_fd(), batch)
    }
}

#[cfg(not(target_os = "linux"))]
impl ReceiveBatch for tokio::net::UdpSocket {
    fn receive(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        batch.clear();
        let buffer = batch
            .buffers
            .first_mut()
            .ok_or(io::ErrorKind::InvalidInput)?;
        let (len, from) = self.try_recv_from(buffer)?;
        batch.push(len, from, Duration::ZERO);
        Ok(1)
    }
}

#[cfg(not(target_os = "linux"))]
impl ReceiveBatch for std::net::UdpSocket {
    fn receive(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        batch.clear();
        self.set_nonblocking(true)?;
        let buffer = batch
            .buffers
            .first_mut()
            .ok_or(io::ErrorKind::InvalidInput)?;
        let (len, from) = self.recv_from(buffer)?;
        batch.push(len, from, Duration::ZERO);
        Ok(1)
    }
}

/// `sendmmsg(2)` and `recvmmsg(2)`, which std and the runtime do not offer. The message
/// headers point into the batch's buffers and into addresses on this stack frame, both alive
/// for the call.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod mmsg {
    use std::io;
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
    use std::os::fd::RawFd;

    use smallvec::SmallVec;
    use socket2::SockAddr;

    use super::segments::{segment_run, Segmentation};
    use super::{Batch, RecvBatch, Taken, BATCH_LEN};

    /// `UDP_SEGMENT` (linux/udp.h): the segment size of a send, as a control message, and
    /// as a socket option.
    const UDP_SEGMENT: libc::c_int = 103;

    /// Whether the socket knows the `UDP_SEGMENT` option: a kernel that reads the control
    /// message answers for the option too (its default segment size); an older one refuses.
    pub(super) fn kernel_segments(fd: RawFd) -> bool {
        let mut size: libc::c_int = 0;
        let mut len = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `size` and `len` are alive for the call, `len` says how long `size` is.
        let answered = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_UDP,
                UDP_SEGMENT,
                (&mut size as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        answered == 0
    }

    /// Room for one control message holding a `u16` (a segment size) or a `timespec` (an
    /// arrival stamp), aligned as the kernel reads it.
    #[derive(Clone, Copy)]
    #[repr(C, align(8))]
    struct Control([u8; 32]);

    /// `sendmmsg(2)` of datagrams `start..`: while `gso` is on, a run that [`segment_run`]
    /// finds leaves as one message with its segment size, the others one message each.
    /// Returns what the messages the kernel took held.
    pub(super) fn send(
        fd: RawFd,
        batch: &Batch,
        start: usize,
        gso: &Segmentation,
    ) -> io::Result<Taken> {
        let segmented = gso.is_on();
        // Per message: its first datagram and how many it holds.
        let mut messages: SmallVec<[(usize, usize); BATCH_LEN]> = SmallVec::new();
        let mut next = start;
        while next < batch.len() && messages.len() < BATCH_LEN {
            let run = if segmented {
                segment_run(batch, next)
            } else {
                1
            };
            messages.push((next, run.max(1)));
            next += run.max(1);
        }
        let addrs: SmallVec<[SockAddr; BATCH_LEN]> = messages
            .iter()
            .filter_map(|&(first, _)| batch.datagram(first).map(|(_, to)| SockAddr::from(to)))
            .collect();
        // SAFETY: iovec, mmsghdr and cmsghdr are plain C structs for which all zeroes is
        // valid (null pointers, zero lengths).
        let mut iovecs: [libc::iovec; BATCH_LEN] = unsafe { std::mem::zeroed() };
        let mut headers: [libc::mmsghdr; BATCH_LEN] = unsafe { std::mem::zeroed() };
        let mut controls = [Control([0; 32]); BATCH_LEN];
        for (index, datagram) in (start..next).filter_map(|i| batch.datagram(i)).enumerate() {
            iovecs[index] = libc::iovec {
                // The kernel only reads from it.
                iov_base: datagram.0.as_ptr() as *mut libc::c_void,
                iov_len: datagram.0.len(),
            };
        }
        for (m, (&(first, count), addr)) in messages.iter().zip(&addrs).enumerate() {
            let header = &mut headers[m].msg_hdr;
            header.msg_name = addr.as_ptr() as *mut libc::c_void;
            header.msg_namelen = addr.len();
            header.msg_iov = &mut iovecs[first - start];
            header.msg_iovlen = count;
            if count > 1 {
                let size = batch.datagram(first).map_or(0, |(d, _)| d.len());
                set_segment_size(header, &mut controls[m], size as u16);
            }
        }
        // SAFETY: `headers[..addrs.len()]` are initialized above and point at buffers,
        // addresses and control messages that outlive the call; the kernel writes only their
        // `msg_len`.
        let sent = unsafe {
            libc::sendmmsg(
                fd,
                headers.as_mut_ptr(),
                addrs.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if sent < 0 {
            let error = io::Error::last_os_error();
            let unsupported = matches!(
                error.raw_os_error(),
                Some(libc::EIO | libc::EINVAL | libc::ENOPROTOOPT | libc::EOPNOTSUPP)
            );
            if unsupported && messages.first().is_some_and(|&(_, count)| count > 1) {
                // A device or path without segmentation: one datagram per message from now.
                let first = gso.refused();
                if first {
                    tracing::warn!("UDP segmentation refused ({error}): off for this socket");
                }
                let taken = send(fd, batch, start, gso)?;
                return Ok(Taken {
                    refused: first,
                    ..taken
                });
            }
            return Err(error);
        }
        let took = &messages[..(sent as usize).min(messages.len())];
        let datagrams = took.iter().map(|&(_, count)| count).sum();
        let segmented = took.iter().map(|&(_, c)| c).filter(|&c| c > 1).sum();
        Ok(Taken {
            datagrams,
            messages: took.len(),
            segmented,
            refused: false,
        })
    }

    /// Gives `header` one control message: `UDP_SEGMENT` with `size`, in `control`.
    fn set_segment_size(header: &mut libc::msghdr, control: &mut Control, size: u16) {
        header.msg_control = control.0.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE only computes a length.
        header.msg_controllen = unsafe { libc::CMSG_SPACE(size_of::<u16>() as libc::c_uint) } as _;
        // SAFETY: `header` points at `control`, which is aligned for a cmsghdr and longer than
        // CMSG_SPACE(2), so the first header and its two data bytes lie within it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(header);
            (*cmsg).cmsg_level = libc::SOL_UDP;
            (*cmsg).cmsg_type = UDP_SEGMENT;
            (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as libc::c_uint) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), size);
        }
    }

    /// Turns on `SO_TIMESTAMPNS`: each datagram then comes with the kernel's wall-clock stamp
    /// of its arrival, as a control message.
    pub(super) fn stamp_arrivals(fd: RawFd) -> io::Result<()> {
        let on: libc::c_int = 1;
        // SAFETY: `on` is alive for the call and the length says how long it is.
        let set = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                (&on as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        match set {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        }
    }

    /// `recvmmsg(2)` into the batch's buffers, without waiting; with each datagram, how long
    /// before the call it arrived, where the kernel stamped it.
    pub(super) fn receive(fd: RawFd, batch: &mut RecvBatch) -> io::Result<usize> {
        batch.clear();
        let count = batch.buffers.len().min(BATCH_LEN);
        // SAFETY: iovec, sockaddr_storage and mmsghdr are plain C structs for which all
        // zeroes is valid.
        let mut iovecs: [libc::iovec; BATCH_LEN] = unsafe { std::mem::zeroed() };
        let mut names: [libc::sockaddr_storage; BATCH_LEN] = unsafe { std::mem::zeroed() };
        let mut headers: [libc::mmsghdr; BATCH_LEN] = unsafe { std::mem::zeroed() };
        let mut controls = [Control([0; 32]); BATCH_LEN];
        for (i, buffer) in batch.buffers.iter_mut().take(count).enumerate() {
            iovecs[i] = libc::iovec {
                iov_base: buffer.as_mut_ptr() as *mut libc::c_void,
                iov_len: buffer.len(),
            };
            let header = &mut headers[i].msg_hdr;
            header.msg_name = (&mut names[i] as *mut libc::sockaddr_storage).cast();
            header.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            header.msg_iov = &mut iovecs[i];
            header.msg_iovlen = 1;
            header.msg_control = controls[i].0.as_mut_ptr().cast();
            header.msg_controllen = size_of::<Control>() as _;
        }
        // SAFETY: `headers[..count]` point at the batch's buffers (each `iov_len` long), at
        // `names` and at `controls` (each `msg_controllen` long), all alive and not otherwise
        // touched during the call.
        let received = unsafe {
            libc::recvmmsg(
                fd,
                headers.as_mut_ptr(),
                count as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if received < 0 {
            return Err(io::Error::last_os_error());
        }
        // The stamps are on the wall clock: read it once, after the call.
        let read_at = std::time::SystemTime::now();
        for (header, name) in headers.iter().zip(&names).take(received as usize) {
            // A datagram longer than its buffer arrives cut to it, as `recv_from` cuts it.
            if let Some(from) = socket_addr(name) {
                let waited = arrival_stamp(&header.msg_hdr)
                    .and_then(|stamp| read_at.duration_since(stamp).ok())
                    .unwrap_or_default();
                batch.push(header.msg_len as usize, from, waited);
            }
        }
        Ok(batch.len())
    }

    /// The kernel's stamp among a received message's control messages, if it has one (a
    /// clock stepped back since reads as no wait at all).
    fn arrival_stamp(header: &libc::msghdr) -> Option<std::time::SystemTime> {
        // SAFETY: the kernel wrote `msg_controllen` bytes of well-formed control messages at
        // `msg_control` (one of `controls`, alive), and CMSG_FIRSTHDR / CMSG_NXTHDR stay
        // within that length; the stamp is read unaligned from inside its message.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(header);
            while !cmsg.is_null() {
                let length = libc::CMSG_LEN(size_of::<libc::timespec>() as libc::c_uint);
                if (*cmsg).cmsg_level == libc::SOL_SOCKET
                    && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
                    && (*cmsg).cmsg_len as usize >= length as usize
                {
                    let stamp: libc::timespec =
                        std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                    let secs = u64::try_from(stamp.tv_sec).ok()?;
                    let nanos = u32::try_from(stamp.tv_nsec).ok()?;
                    let since_epoch = std::time::Duration::new(secs, nanos);
                    return std::time::UNIX_EPOCH.checked_add(since_epoch);
                }
                cmsg = libc::CMSG_NXTHDR(header, cmsg);
            }
        }
        None
    }

    /// The address the kernel wrote for a received datagram.
    fn socket_addr(name: &libc::sockaddr_storage) -> Option<SocketAddr> {
        match libc::c_int::from(name.ss_family) {
            libc::AF_INET => {
                // SAFETY: for AF_INET the kernel wrote a sockaddr_in, which fits in the
                // storage and needs no more alignment than it has.
                let v4 = unsafe {
                    &*(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>()
                };
                let ip = Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr));
                Some(SocketAddr::V4(SocketAddrV4::new(
                    ip,
                    u16::from_be(v4.sin_port),
                )))
            }
            libc::AF_INET6 => {
                // SAFETY: as above, a sockaddr_in6 for AF_INET6.
                let v6 = unsafe {
                    &*(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
                };
                let ip = Ipv6Addr::from(v6.sin6_addr.s6_addr);
                Some(SocketAddr::V6(SocketAddrV6::new(
                    ip,
                    u16::from_be(v6.sin6_port),
                    v6.sin6_flowinfo,
                    v6.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

pub mod segments;
#[cfg(test)]
pub(in crate::node) mod tests;
