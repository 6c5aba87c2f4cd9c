//! Notices of a changed room: a node that wrote its part of a clustered room tells the room's
//! other nodes so on the room's channel (`strata:notice:{room}`, the writer's node id as the
//! payload), and each of them reads the room's parts when told rather than at its next safety
//! read. A notice carries no state: a lost one costs a delay (the reader has the room whole
//! at its next safety read), never a wrong room.
//!
//! Notices come from the store's subscription, so they are hostile input: [`Notice::read`]
//! checks the channel and the payload and refuses what a node would not have sent. The
//! [`Inbox`] keeps the rooms told about until the room feed takes them, one entry per room
//! however many notices came: a burst of notices makes one read.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio::sync::Notify;

/// The channel of a room's notices, before the room's name.
pub const CHANNEL_PREFIX: &str = "strata:notice:";

/// Bytes of a notice's payload at most: a node id (see `cluster.node`).
pub const MAX_NODE_BYTES: usize = 64;

/// Bytes of a notice's room at most. Rooms are named within the node's
/// `limits.room_name_bytes`; a notice for a longer name than any node takes is refused.
pub const MAX_ROOM_BYTES: usize = 256;

/// The channel `room`'s notices go on.
pub fn channel(room: &str) -> String {
    format!("{CHANNEL_PREFIX}{room}")
}

/// One node telling the others it wrote its part of a room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The room.
    pub room: String,
    /// The node that wrote.
    pub node: String,
}

/// Why a notice was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoticeError {
    /// The channel is not a room's notices' channel, or names no room a node would have.
    #[error("not a room's channel")]
    NotARoom,
    /// The payload is not a node id: empty, too long, or not printable ASCII.
    #[error("not a node id")]
    NotANode,
    /// A room this node does not listen to.
    #[error("a room not listened to")]
    NotHeard,
}

impl Notice {
    /// A notice as the store delivered it: its channel's name and its payload.
    pub fn read(channel: &[u8], payload: &[u8]) -> Result<Self, NoticeError> {
        let room = channel
            .strip_prefix(CHANNEL_PREFIX.as_bytes())
            .filter(|room| !room.is_empty() && room.len() <= MAX_ROOM_BYTES)
            .filter(|room| {
                room.iter()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(b))
            })
            .ok_or(NoticeError::NotARoom)?;
        let node_id = |b: &u8| b.is_ascii_graphic();
        if payload.is_empty() || payload.len() > MAX_NODE_BYTES || !payload.iter().all(node_id) {
            return Err(NoticeError::NotANode);
        }
        // Both checked to be ASCII above.
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        Ok(Self {
            room: text(room),
            node: text(payload),
        })
    }
}

/// The rooms a node was told about and has not read since, and what it heard.
#[derive(Debug, Default)]
pub struct Inbox {
    state: Mutex<Heard>,
    wake: Notify,
    counts: InboxCounts,
}

#[derive(Debug, Default)]
struct Heard {
    /// This node's id: its own notices are not news.
    me: String,
    /// The rooms it listens to.
    rooms: BTreeSet<String>,
    /// The rooms told about since the feed last took them.
    told: BTreeSet<String>,
}

/// What the inbox counted since last asked.
#[derive(Debug, Default)]
struct InboxCounts {
    received: AtomicU64,
    refused: AtomicU64,
    lost_subscription: AtomicU64,
}

/// The inbox's counts since last asked (see [`Inbox::take_counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Notices of other nodes, of rooms listened to.
    pub received: u64,
    /// Notices refused ([`NoticeError`]).
    pub refused: u64,
    /// Subscriptions that failed or were lost (the store unreachable).
    pub lost_subscription: u64,
}

impl Inbox {
    /// Listens, as node `me`, to the notices of `rooms` (replacing those listened to).
    pub fn listen(&self, me: &str, rooms: &[String]) {
        let mut state = self.state.lock();
        if state.me != me {
            me.clone_into(&mut state.me);
        }
        let rooms: BTreeSet<String> = rooms.iter().cloned().collect();
        state.told.retain(|room| rooms.contains(room));
        state.rooms = rooms;
    }

    /// The rooms listened to, in order.
    pub fn rooms(&self) -> Vec<String> {
        self.state.lock().rooms.iter().cloned().collect()
    }

    /// A notice as the store delivered it: the room is marked to be read (unless the notice
    /// is this node's own), a bad one counted and dropped.
    pub fn deliver(&self, channel: &[u8], payload: &[u8]) {
        let mut state = self.state.lock();
        let notice = Notice::read(channel, payload).and_then(|notice| {
            match state.rooms.contains(&notice.room) {
                true => Ok(notice),
                false => Err(NoticeError::NotHeard),
            }
        });
        match notice {
            Ok(notice) if notice.node == state.me => {}
            Ok(notice) => {
                self.counts.received.fetch_add(1, Ordering::Relaxed);
                state.told.insert(notice.room);
                self.wake.notify_one();
            }
            Err(e) => {
                self.counts.refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("a room's notice refused: {e}");
            }
        }
    }

    /// Every room listened to is to be read: notices may have been missed (the subscription
    /// was made again after a loss).
    pub fn tell_all(&self) {
        let mut state = self.state.lock();
        state.told = state.rooms.clone();
        self.wake.notify_one();
    }

    /// The subscription failed or was lost.
    pub fn lost_subscription(&self) {
        let lost = &self.counts.lost_subscription;
        lost.fetch_add(1, Ordering::Relaxed);
    }

    /// Waits until a room is told about (at once when one was since the last take).
    pub async fn told(&self) {
        self.wake.notified().await;
    }

    /// The rooms told about since last taken.
    pub fn take(&self) -> BTreeSet<String> {
        std::mem::take(&mut self.state.lock().told)
    }

    /// The counts since last asked.
    pub fn take_counts(&self) -> Counts {
        let take = |n: &AtomicU64| n.swap(0, Ordering::Relaxed);
        Counts {
            received: take(&self.counts.received),
            refused: take(&self.counts.refused),
            lost_subscription: take(&self.counts.lost_subscription),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_notice_names_a_room_and_a_node_or_is_refused() {
        let read =
            |channel: &str, payload: &str| Notice::read(channel.as_bytes(), payload.as_bytes());
        let notice = read("strata:notice:call-1.a_b", "edge-1:8080");
        assert_eq!(
            notice,
            Ok(Notice {
                room: "call-1.a_b".into(),
                node: "edge-1:8080".into()
            })
        );
        assert_eq!(read("strata:nodes", "a"), Err(NoticeError::NotARoom));
        assert_eq!(read("strata:notice:", "a"), Err(NoticeError::NotARoom));
        assert_eq!(read("strata:notice:a b", "a"), Err(NoticeError::NotARoom));
        let long = "r".repeat(MAX_ROOM_BYTES + 1);
        assert_eq!(read(&channel(&long), "a"), Err(NoticeError::NotARoom));
        assert_eq!(read("strata:notice:call", ""), Err(NoticeError::NotANode));
        assert_eq!(
            read("strata:notice:call", "a b"),
            Err(NoticeError::NotANode)
        );
        let long = "n".repeat(MAX_NODE_BYTES + 1);
        assert_eq!(
            read("strata:notice:call", &long),
            Err(NoticeError::NotANode)
        );
        assert_eq!(
            Notice::read(b"strata:notice:call", &[0xff]),
            Err(NoticeError::NotANode)
        );
    }

    #[test]
    fn a_burst_of_notices_is_one_room_to_read_and_a_nodes_own_are_not_news() {
        let inbox = Inbox::default();
        inbox.listen("one", &["call".into(), "talk".into()]);
        for _ in 0..5 {
            inbox.deliver(b"strata:notice:call", b"two");
        }
        inbox.deliver(b"strata:notice:talk", b"one");
        inbox.deliver(b"strata:notice:other", b"two");
        inbox.deliver(b"strata:notice:call", b"");
        assert_eq!(inbox.take(), BTreeSet::from(["call".to_owned()]));
        assert!(inbox.take().is_empty());
        let counts = inbox.take_counts();
        assert_eq!((counts.received, counts.refused), (5, 2));
        inbox.tell_all();
        assert_eq!(inbox.take().len(), 2);
        // A room no longer listened to is no longer to be read.
        inbox.deliver(b"strata:notice:talk", b"two");
        inbox.listen("one", &["call".into()]);
        assert!(inbox.take().is_empty());
    }

    proptest! {
        #[test]
        fn a_notice_reads_back_as_sent(
            room in "[A-Za-z0-9._-]{1,64}",
            node in "[!-~]{1,64}",
        ) {
            let read = Notice::read(channel(&room).as_bytes(), node.as_bytes());
            prop_assert_eq!(read, Ok(Notice { room, node }));
        }

        #[test]
        fn any_bytes_read_or_are_refused(channel: Vec<u8>, payload: Vec<u8>) {
            let _ = Notice::read(&channel, &payload);
        }
    }
}
