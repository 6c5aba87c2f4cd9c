//! UDP segmentation offload (GSO, Linux's `UDP_SEGMENT`): consecutive datagrams to one
//! destination leave as one send that the kernel, or the network card, cuts into datagrams of
//! one size. Most of what a datagram costs the node is the kernel's work per send
//! (BENCHMARKS.md, `node/egress_srtp`), and a run of datagrams to one viewer (a keyframe, a
//! probe cluster, what its pacer lets go at once) then pays it once.
//!
//! The kernel's rule: every segment as long as the first, but the last, which may be shorter.
//!
//! Whether a socket segments is [`Segmentation`]: as configured (`udp_gso`), if the kernel
//! knows the option at all (asked once, at start: a kernel before 4.18 would not refuse the
//! control message but ignore it, and send the run as one long datagram), and until the
//! kernel refuses a segmented send (a device or path without it), after which every datagram
//! leaves in a message of its own.

use std::sync::atomic::{AtomicBool, Ordering};

use super::Batch;

/// Whether one socket's runs to one destination leave segmented. Shared by every worker
/// sending on the socket: a refusal any of them meets turns it off for all.
#[derive(Debug)]
pub struct Segmentation {
    on: AtomicBool,
}

impl Segmentation {
    /// On when `on` (the setting and what the kernel was found to take).
    pub fn new(on: bool) -> Self {
        Self {
            on: AtomicBool::new(on),
        }
    }

    /// Whether runs leave segmented now.
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Off for good, as the kernel refused a segmented send; whether this was the refusal
    /// that turned it off (several workers may meet one at once).
    pub fn refused(&self) -> bool {
        self.on.swap(false, Ordering::Relaxed)
    }
}

/// Most segments one send may carry (the kernel's `UDP_MAX_SEGMENTS`).
pub const MAX_SEGMENTS: usize = 64;
/// Most bytes one send may carry: a UDP datagram's payload limit, less headers, rounded down.
pub const MAX_SEND_BYTES: usize = 65_000;

/// How many datagrams from `start` can leave as one segmented send: consecutive, to one
/// destination, as long as the first but the last (which may be shorter), within
/// [`MAX_SEGMENTS`] and [`MAX_SEND_BYTES`]. 1 when only `start` can; 0 past the batch's end.
pub fn segment_run(batch: &Batch, start: usize) -> usize {
    let Some((first, to)) = batch.datagram(start) else {
        return 0;
    };
    let size = first.len();
    if size == 0 {
        // The kernel takes no segment size of 0.
        return 1;
    }
    let (mut count, mut bytes) = (1, size);
    while count < MAX_SEGMENTS {
        let Some((next, next_to)) = batch.datagram(start + count) else {
            break;
        };
        let fits = next_to == to && !next.is_empty() && next.len() <= size;
        if !fits || bytes + next.len() > MAX_SEND_BYTES {
            break;
        }
        count += 1;
        bytes += next.len();
        if next.len() < size {
            break;
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use proptest::prelude::*;

    use super::*;
    use crate::node::batch::BATCH_LEN;

    fn batch_of(datagrams: &[(u16, usize)]) -> Batch {
        let mut batch = Batch::new(1500);
        for &(port, len) in datagrams {
            let buffer = batch.next_buffer().expect("room");
            buffer[..len].fill(0xAB);
            batch.commit(SocketAddr::from(([127, 0, 0, 1], port)), len);
        }
        batch
    }

    #[test]
    fn a_run_is_one_destination_and_one_size_with_a_shorter_last() {
        let batch = batch_of(&[
            (1, 1200),
            (1, 1200),
            (1, 700),
            (1, 1200),
            (2, 1200),
            (2, 1300),
            (2, 0),
        ]);
        assert_eq!(segment_run(&batch, 0), 3, "the shorter one ends the run");
        assert_eq!(segment_run(&batch, 3), 1, "another destination next");
        assert_eq!(segment_run(&batch, 4), 1, "a longer one is not a segment");
        assert_eq!(segment_run(&batch, 5), 1, "nor an empty one");
        assert_eq!(segment_run(&batch, 6), 1);
        assert_eq!(segment_run(&batch, 7), 0);
    }

    #[test]
    fn a_run_stays_within_the_bytes_one_send_carries() {
        let batch = batch_of(&[(1, 1400); BATCH_LEN]);
        assert_eq!(segment_run(&batch, 0), BATCH_LEN);
        let mut big = Batch::new(9000);
        for _ in 0..10 {
            assert!(big.next_buffer().is_some(), "room");
            big.commit(SocketAddr::from(([127, 0, 0, 1], 1)), 9000);
        }
        assert_eq!(segment_run(&big, 0), MAX_SEND_BYTES / 9000);
    }

    proptest! {
        /// Runs cover the batch in order, each datagram once; each run goes to one
        /// destination, its segments as long as its first but the last, which is shorter.
        #[test]
        fn runs_cover_the_batch_and_keep_the_kernels_rule(
            datagrams in proptest::collection::vec(
                (1u16..3, prop_oneof![Just(1200usize), Just(1200), Just(600), 0usize..1300]),
                1..=BATCH_LEN,
            ),
        ) {
            let batch = batch_of(&datagrams);
            let mut start = 0;
            while start < batch.len() {
                let run = segment_run(&batch, start);
                prop_assert!((1..=MAX_SEGMENTS).contains(&run));
                let run_of = &datagrams[start..start + run];
                let (port, size) = run_of[0];
                prop_assert!(run_of.iter().all(|&(p, _)| p == port));
                let (last, body) = run_of[1..].split_last().map_or((None, &[][..]), |(l, b)| (Some(l), b));
                prop_assert!(body.iter().all(|&(_, len)| len == size));
                prop_assert!(last.is_none_or(|&(_, len)| len > 0 && len <= size));
                let bytes: usize = run_of.iter().map(|d| d.1).sum();
                prop_assert!(bytes <= MAX_SEND_BYTES);
                // And as long as it may be: the next datagram could not have joined.
                let open = size > 0 && run < MAX_SEGMENTS && run_of[run - 1].1 == size;
                if let Some(&(p, len)) = datagrams.get(start + run).filter(|_| open) {
                    prop_assert!(p != port || len == 0 || len > size || bytes + len > MAX_SEND_BYTES);
                }
                start += run;
            }
            prop_assert_eq!(start, datagrams.len());
        }
    }
}
