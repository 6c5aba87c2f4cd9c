//! The last offer each participant made, read: a participant that offers the same again (a
//! browser renegotiating when nothing changed rewrites only the `o=` line's version) is not
//! read again. Reading a large room's offer is milliseconds of allocation-heavy parsing; the
//! comparison is a pass over its bytes. Bounded by the bytes of the offers kept: the least
//! recently used go first, so the memo holds the sessions that are renegotiating now.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::node::peer::PeerId;
use crate::node::sdp::{Offer, ParticipantPlan};

/// Bytes of offer text the memo keeps at most (each offer also keeps its reading, of about
/// the same size).
pub const MEMO_BYTES: usize = 8 << 20;

/// An offer as read and planned, shared by whoever uses it.
pub type Read = Arc<(Offer, ParticipantPlan)>;

#[derive(Debug, Default)]
pub struct OfferMemo {
    inner: Mutex<Memo>,
}

#[derive(Debug, Default)]
struct Memo {
    entries: HashMap<PeerId, Entry>,
    bytes: usize,
    /// Increases with every use: the entry with the lowest is the least recently used.
    clock: u64,
}

#[derive(Debug)]
struct Entry {
    text: String,
    read: Read,
    used: u64,
}

impl OfferMemo {
    /// The reading of `text` if it is `session`'s last offer again, `o=` line aside.
    pub fn recall(&self, session: PeerId, text: &str) -> Option<Read> {
        let mut memo = self.inner.lock();
        memo.clock += 1;
        let clock = memo.clock;
        let entry = memo.entries.get_mut(&session)?;
        if !same_offer(&entry.text, text) {
            return None;
        }
        entry.used = clock;
        Some(Arc::clone(&entry.read))
    }

    /// Keeps `text` and its reading as `session`'s last offer, forgetting the least recently
    /// used offers past [`MEMO_BYTES`]. An offer larger than the whole memo is not kept.
    pub fn keep(&self, session: PeerId, text: &str, read: Read) {
        if text.len() > MEMO_BYTES {
            return;
        }
        let mut memo = self.inner.lock();
        memo.clock += 1;
        let used = memo.clock;
        let entry = Entry {
            text: text.to_owned(),
            read,
            used,
        };
        memo.bytes += text.len();
        if let Some(old) = memo.entries.insert(session, entry) {
            memo.bytes -= old.text.len();
        }
        while memo.bytes > MEMO_BYTES {
            let Some(oldest) = memo
                .entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(&id, _)| id)
            else {
                break;
            };
            if let Some(gone) = memo.entries.remove(&oldest) {
                memo.bytes -= gone.text.len();
            }
        }
    }

    /// Bytes of offer text kept.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.inner.lock().bytes
    }
}

/// Whether two offers are the same but for their `o=` line (whose version a browser counts up
/// in every offer it makes).
fn same_offer(a: &str, b: &str) -> bool {
    let (a_head, a_tail) = around_origin(a);
    let (b_head, b_tail) = around_origin(b);
    a_head == b_head && a_tail == b_tail
}

/// The text before the `o=` line and after it; all of it and nothing without one.
fn around_origin(text: &str) -> (&str, &str) {
    let start = if text.starts_with("o=") {
        Some(0)
    } else {
        text.find("\no=").map(|at| at + 1)
    };
    let Some(start) = start else {
        return (text, "");
    };
    let end = text[start..]
        .find('\n')
        .map_or(text.len(), |n| start + n + 1);
    (&text[..start], &text[end..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::sdp::{negotiate_participant, parse_offer};

    const OFFER: &str = include_str!("../sdp/fixtures/publisher_av1.sdp");

    fn read(text: &str) -> Read {
        let offer = parse_offer(text).expect("an offer");
        let plan = negotiate_participant(&offer).expect("served");
        Arc::new((offer, plan))
    }

    #[test]
    fn the_same_offer_with_another_origin_version_is_recalled_anything_else_is_not() {
        let memo = OfferMemo::default();
        let alice = PeerId(1);
        let text = OFFER.replace("\r\n", "\n").replace('\n', "\r\n");
        assert!(memo.recall(alice, &text).is_none(), "nothing kept yet");
        memo.keep(alice, &text, read(&text));
        assert!(memo.recall(alice, &text).is_some());
        let origin = text
            .lines()
            .find(|l| l.starts_with("o="))
            .expect("an o= line");
        let next_version = text.replace(origin, &format!("{origin}9"));
        assert!(memo.recall(alice, &next_version).is_some(), "o= aside");
        let changed = text.replace("a=sendonly", "a=sendrecv");
        assert!(memo.recall(alice, &changed).is_none());
        assert!(memo.recall(PeerId(2), &text).is_none(), "another session's");
        let no_origin: String = text.lines().filter(|l| !l.starts_with("o=")).collect();
        assert!(memo.recall(alice, &no_origin).is_none());
    }

    #[test]
    fn the_memo_keeps_its_byte_bound_forgetting_the_least_recently_used() {
        let memo = OfferMemo::default();
        let text = OFFER.replace("\r\n", "\n").replace('\n', "\r\n");
        let reading = read(&text);
        let padded = |n: usize| format!("{text}a=x:{}\r\n", "y".repeat(n));
        let big = MEMO_BYTES / 3;
        memo.keep(PeerId(1), &padded(big), Arc::clone(&reading));
        memo.keep(PeerId(2), &padded(big), Arc::clone(&reading));
        assert!(
            memo.recall(PeerId(1), &padded(big)).is_some(),
            "1 used last"
        );
        memo.keep(PeerId(3), &padded(big), Arc::clone(&reading));
        assert!(memo.bytes() <= MEMO_BYTES);
        assert!(
            memo.recall(PeerId(2), &padded(big)).is_none(),
            "2 went first"
        );
        assert!(memo.recall(PeerId(1), &padded(big)).is_some());
        assert!(memo.recall(PeerId(3), &padded(big)).is_some());
        memo.keep(PeerId(4), &padded(MEMO_BYTES), reading);
        assert!(
            memo.recall(PeerId(4), &padded(MEMO_BYTES)).is_none(),
            "too large"
        );
    }
}
