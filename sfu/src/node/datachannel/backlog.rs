//! What waits toward one receiver on one relayed channel, counted in the channel's own bytes
//! and in the receiver's over all its relayed channels. A receiver that reads nothing would
//! otherwise hold a full backlog on every channel of every other participant (64 channels of
//! 49 others, a megabyte each); the receiver's total bounds that. The total is shared by the
//! receiver's backlogs and each takes its bytes back out as it goes, whoever drops it, so no
//! place that forgets a channel can leave the total counting bytes that are gone.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use super::sctp::MessageKind;

/// What a queued message counts for beyond its bytes, so empty messages are bounded too.
pub const MESSAGE_COST: usize = 64;

/// One receiver's bytes waiting over all its relayed channels.
#[derive(Debug, Clone, Default)]
pub(super) struct ReceiverTotal(Arc<AtomicUsize>);

impl ReceiverTotal {
    /// The bytes waiting (with [`MESSAGE_COST`] each).
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

/// The messages waiting on one relayed channel toward its receiver, oldest first.
#[derive(Debug)]
pub(super) struct Backlog {
    queue: VecDeque<(MessageKind, Bytes)>,
    queued: usize,
    total: ReceiverTotal,
}

impl Backlog {
    /// An empty backlog counted in `total`, its receiver's.
    pub fn new(total: &ReceiverTotal) -> Self {
        Self {
            queue: VecDeque::new(),
            queued: 0,
            total: total.clone(),
        }
    }

    /// Queues a message: the same bytes every receiver holds, a reference count.
    pub fn push(&mut self, kind: MessageKind, data: Bytes) {
        let cost = data.len() + MESSAGE_COST;
        self.queued += cost;
        self.total.0.fetch_add(cost, Ordering::Relaxed);
        self.queue.push_back((kind, data));
    }

    /// The oldest message, taken out.
    pub fn pop(&mut self) -> Option<(MessageKind, Bytes)> {
        let (kind, data) = self.queue.pop_front()?;
        let cost = data.len() + MESSAGE_COST;
        self.queued -= cost;
        self.total.0.fetch_sub(cost, Ordering::Relaxed);
        Some((kind, data))
    }

    /// The channel's bytes waiting (with [`MESSAGE_COST`] each).
    pub fn queued(&self) -> usize {
        self.queued
    }

    /// The receiver's bytes waiting over all its relayed channels, this one's included.
    pub fn receiver_total(&self) -> usize {
        self.total.get()
    }

    /// Messages waiting.
    pub fn len(&self) -> usize {
        self.queue.len()
    }
}

impl Drop for Backlog {
    fn drop(&mut self) {
        self.total.0.fetch_sub(self.queued, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Whatever is pushed, popped and dropped on a receiver's backlogs, its total is what
        /// the live ones hold.
        #[test]
        fn the_receiver_s_total_is_what_its_live_backlogs_hold(
            ops in proptest::collection::vec((0usize..4, 0u8..3, 0usize..300), 0..200),
        ) {
            let total = ReceiverTotal::default();
            let mut backlogs: Vec<Option<Backlog>> = (0..4).map(|_| None).collect();
            for (at, op, len) in ops {
                let backlog = backlogs[at].get_or_insert_with(|| Backlog::new(&total));
                match op {
                    0 => backlog.push(MessageKind::Binary, Bytes::from(vec![0; len])),
                    1 => {
                        backlog.pop();
                    }
                    _ => backlogs[at] = None,
                }
                let held: usize = backlogs.iter().flatten().map(Backlog::queued).sum();
                prop_assert_eq!(total.get(), held);
            }
            drop(backlogs);
            prop_assert_eq!(total.get(), 0);
        }
    }
}
