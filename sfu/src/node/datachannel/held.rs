//! What the SCTP stack holds of the peer's DATA, followed so that it stays bounded.
//!
//! The stack keeps each DATA chunk until its message is whole and read, and with each chunk
//! it adds it walks those it holds of the same stream (the message's fragments, its unordered
//! fragments, its ordered messages), while its window counts only user data. A peer that sends
//! one-byte fragments of messages it never finishes, or ordered messages past a gap, would
//! make each packet cost the node in proportion to everything it sent before (a 40,000th
//! one-byte fragment costs the stack a walk of 40,000). So the node follows the TSNs (RFC 9260
//! section 6.2):
//! - it takes DATA only up to [`WINDOW`] TSNs past the stack's cumulative TSN (from the node's
//!   own SACKs; from the peer's initial TSN before the first), so the stack holds at most that
//!   many above it ([`LINK_WINDOW`] from another node, on a relay link);
//! - it walks the chunks in TSN order as they become contiguous, and counts those walked that
//!   the node has not read as part of a whole message: past a bound (the fragments of the
//!   largest message, at [`MIN_FRAGMENT`] bytes each on average, and the window more), the
//!   peer has left more unfinished than any message needs, and its association is ended.
//!
//! A FORWARD TSN (RFC 3758) moves the walk on as it moves the stack, and what the stack drops
//! with it (unordered fragments, ordered ones of the messages it names) is no longer counted.
//! Whatever the count, a SACK whose window is whole (the stack holds no DATA) at the walk's
//! TSN says nothing is left unread.

use smallvec::SmallVec;
use std::collections::VecDeque;

use super::screen::{chunks, SctpRefusal, DATA};

/// TSNs past the stack's cumulative TSN the node takes DATA for. A sender has outstanding
/// what its congestion window and the node's receive window (a megabyte of user data) allow:
/// in one-byte messages that could be far more, but the node relays at most
/// `messages_per_second` (1,000 by default) of a participant's messages, so 4,096 is seconds of
/// them; a packet with DATA further out is refused, and sent again as any lost one.
pub const WINDOW: u32 = 4096;
/// The same on a relay link, whose peer is another node sending every channel of the rooms
/// the link carries.
pub const LINK_WINDOW: u32 = 1 << 16;
/// The average user data a fragment of a message carries, at least, for the bound on what
/// the stack holds unread: a browser's fragments fill its packets (about 1,100 bytes each but
/// for the first and last of a message).
pub const MIN_FRAGMENT: u64 = 256;

const INIT: u8 = 1;
const INIT_ACK: u8 = 2;
const SACK: u8 = 3;
const FORWARD_TSN: u8 = 192;
/// The streams of a FORWARD TSN the node looks at: a browser names the few whose ordered
/// messages it abandoned.
const MAX_NAMED: usize = 256;
/// The Supported Extensions parameter of an INIT or INIT ACK (RFC 5061 section 4.2.7).
const SUPPORTED_EXTENSIONS: u16 = 0x8008;
/// An INIT's or INIT ACK's chunk header and fixed fields before its parameters.
const INIT_FIXED: usize = 20;
/// A DATA chunk's flags (RFC 9260 section 3.3.1).
const UNORDERED: u8 = 0x04;
const BEGINNING: u8 = 0x02;
const ENDING: u8 = 0x01;

/// One DATA chunk as the walk needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Data {
    flags: u8,
    stream: u16,
    ssn: u16,
}

impl Data {
    fn is(self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// A message the walk is inside: its first fragment, and its fragments walked.
#[derive(Debug, Clone, Copy)]
struct Open {
    first: Data,
    fragments: i64,
}

/// The peer's DATA as the stack holds it, for one association.
#[derive(Debug)]
pub struct Held {
    /// The chunk type whose initial TSN starts the walk: the peer's INIT, or its INIT ACK
    /// where this end started the association.
    start: u8,
    /// Whether the peer's INIT or INIT ACK has been seen.
    started: bool,
    /// Whether DATA has come: the walk's start is set.
    seen: bool,
    /// Whether the stack follows FORWARD TSN (both ends list it, RFC 3758 section 3.3).
    forward_tsn: bool,
    /// The stack's cumulative TSN, as its last SACK said.
    acked: u32,
    /// Every TSN up to here walked.
    walked: u32,
    /// The chunks after `walked` the stack was given, by TSN; `None` for one not yet come.
    ahead: VecDeque<Option<Data>>,
    open: Option<Open>,
    /// TSNs past `acked` the node takes DATA for.
    window: u32,
    /// The stack's receive window when it holds nothing, as the node's INIT or INIT ACK said.
    whole_window: Option<u32>,
    /// Chunks walked less chunks read in whole messages: negative while messages past the
    /// walk (unordered ones, or ordered ones whose turn it is) are read before it gets there.
    unread: i64,
    /// Past this many unread, the peer has left more unfinished than any message needs.
    bound: i64,
}

impl Held {
    /// For an association taking messages up to `max_message_size`; `client`: whether this
    /// end starts it (the peer's INIT ACK, not its INIT, carries its initial TSN).
    pub fn new(max_message_size: u64, client: bool) -> Self {
        let fragments = i64::try_from(max_message_size / MIN_FRAGMENT).unwrap_or(i64::MAX);
        Self {
            start: if client { INIT_ACK } else { INIT },
            started: false,
            seen: false,
            forward_tsn: false,
            acked: 0,
            walked: 0,
            ahead: VecDeque::new(),
            open: None,
            unread: 0,
            window: WINDOW,
            whole_window: None,
            bound: fragments.saturating_add(i64::from(WINDOW)),
        }
    }

    /// The same for a relay link's association: a window of [`LINK_WINDOW`].
    pub fn for_link(mut self) -> Self {
        self.bound = self
            .bound
            .saturating_add(i64::from(LINK_WINDOW - self.window));
        self.window = LINK_WINDOW;
        self
    }

    /// Whether the stack may have a packet from the peer: not past the window, nor when the
    /// peer has left too much unfinished (before this packet).
    pub fn check(&self, packet: &[u8]) -> Result<(), SctpRefusal> {
        if self.unread > self.bound {
            return Err(SctpRefusal::Unfinished);
        }
        let past = |(kind, _, chunk): (u8, u8, &[u8])| {
            kind == DATA && tsn(chunk).is_some_and(|t| after(t, self.acked) > self.window)
        };
        if self.started && chunks(packet).any(past) {
            return Err(SctpRefusal::Window);
        }
        Ok(())
    }

    /// A packet from the peer the stack took (one it does not read changes nothing there).
    pub fn taken(&mut self, packet: &[u8]) {
        for (kind, _, chunk) in chunks(packet) {
            match kind {
                DATA if self.started => {
                    self.seen = true;
                    self.record(chunk);
                }
                FORWARD_TSN if self.started && self.forward_tsn => self.forward(chunk),
                kind if kind == self.start && !self.seen => self.begin(chunk),
                _ => {}
            }
        }
        self.walk();
    }

    /// A packet of the node's own, to the peer: its INIT or INIT ACK says the stack's whole
    /// receive window, its SACK the stack's cumulative TSN and what is left of the window.
    pub fn sent(&mut self, packet: &[u8]) {
        for (kind, _, chunk) in chunks(packet) {
            let window = chunk
                .get(8..12)
                .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
            match (kind, tsn(chunk), window) {
                (INIT | INIT_ACK, _, Some(window)) => self.whole_window = Some(window),
                (SACK, Some(acked), Some(window)) => self.acknowledged(acked, window),
                _ => {}
            }
        }
    }

    /// The stack's SACK: up to `acked` it has every TSN, and `window` left of its window.
    fn acknowledged(&mut self, acked: u32, window: u32) {
        self.acked = acked;
        if !self.started {
            return;
        }
        if after(acked, self.walked) != 0 {
            // The stack is past the walk (it cannot be, but if it were): follow it.
            self.skip(acked);
        }
        // The stack holds no DATA at all (each chunk it holds has user data, which its
        // window counts) and the walk is where the stack is: nothing is left unread, whatever
        // the count says (it counts a message the stack dropped with a FORWARD TSN after it
        // came whole, as if read).
        let empty = self.whole_window == Some(window);
        if empty && acked == self.walked && self.ahead.is_empty() {
            self.unread = 0;
            self.open = None;
        }
    }

    /// Chunks walked less chunks read in whole messages.
    #[cfg(test)]
    pub fn unread(&self) -> i64 {
        self.unread
    }

    /// The node read a whole message of `chunks` chunks.
    pub fn read(&mut self, chunks: usize) {
        self.unread -= i64::try_from(chunks).unwrap_or(i64::MAX);
    }

    /// The peer's INIT or INIT ACK: the TSN before its first, and whether it follows FORWARD
    /// TSN. Taken again until DATA comes: a peer repeating its INIT (or INIT ACK) before the
    /// association is up says the same again.
    fn begin(&mut self, chunk: &[u8]) {
        let Some(initial) = chunk.get(16..20) else {
            return;
        };
        let before = u32::from_be_bytes([initial[0], initial[1], initial[2], initial[3]]);
        let before = before.wrapping_sub(1);
        self.started = true;
        self.acked = before;
        self.walked = before;
        self.forward_tsn = lists_forward_tsn(chunk.get(INIT_FIXED..).unwrap_or(&[]));
    }

    /// A DATA chunk the stack is given: noted by its TSN if the walk has not passed it.
    fn record(&mut self, chunk: &[u8]) {
        let (Some(t), Some(fields)) = (tsn(chunk), chunk.get(8..12)) else {
            return;
        };
        let at = after(t, self.walked);
        // Past the window only in the packet whose INIT started the walk (none is checked
        // before it): at most a packet's chunks the stack holds uncounted.
        if at == 0 || at > self.window {
            return;
        }
        let data = Data {
            flags: chunk[1],
            stream: u16::from_be_bytes([fields[0], fields[1]]),
            ssn: u16::from_be_bytes([fields[2], fields[3]]),
        };
        let index = at as usize - 1;
        if self.ahead.len() <= index {
            self.ahead.resize(index + 1, None);
        }
        // A second chunk of one TSN is a duplicate to the stack, which keeps the first.
        self.ahead[index].get_or_insert(data);
    }

    /// Walks the chunks that follow on from the walk.
    fn walk(&mut self) {
        while let Some(Some(data)) = self.ahead.front().copied() {
            self.ahead.pop_front();
            self.walked = self.walked.wrapping_add(1);
            self.unread += 1;
            if data.is(BEGINNING) {
                // A new message while one is open leaves that one to the stack unfinished,
                // and counted.
                self.open = (!data.is(ENDING)).then_some(Open {
                    first: data,
                    fragments: 1,
                });
            } else if let Some(open) = self.open.as_mut() {
                open.fragments += 1;
                if data.is(ENDING) {
                    self.open = None;
                }
            }
        }
    }

    /// A FORWARD TSN (RFC 3758 section 3.2): the stack moves its cumulative TSN to the new
    /// one, dropping the unordered fragments up to it and the ordered ones of the messages it
    /// names (a stream and the last sequence number abandoned on it). No longer counted: the
    /// open message's fragments, if the stack drops them; of those past the walk, those the
    /// stack drops are not counted when skipped, the rest are (read now or later, or held).
    fn forward(&mut self, chunk: &[u8]) {
        self.walk();
        let Some(new) = tsn(chunk) else { return };
        let skipped = after(new, self.walked);
        if skipped == 0 {
            return;
        }
        // Those past the first MAX_NAMED the node does not look at: what the stack drops by
        // them stays counted.
        let mut named: SmallVec<[(u16, u16); 8]> = chunk
            .get(8..)
            .unwrap_or(&[])
            .chunks_exact(4)
            .take(MAX_NAMED)
            .map(|s| {
                (
                    u16::from_be_bytes([s[0], s[1]]),
                    u16::from_be_bytes([s[2], s[3]]),
                )
            })
            .collect();
        named.sort_unstable();
        let dropped = |data: Data| {
            let on_stream = named.partition_point(|&(stream, _)| stream < data.stream);
            data.is(UNORDERED)
                || named[on_stream..]
                    .iter()
                    .take_while(|&&(stream, _)| stream == data.stream)
                    .any(|&(_, last)| !ssn_after(data.ssn, last))
        };
        if let Some(open) = self.open.take() {
            if dropped(open.first) {
                self.unread -= open.fragments;
            }
        }
        let skipped = (skipped as usize).min(self.ahead.len());
        // A message whole among the skipped chunks was read, or is held.
        let mut whole: Option<i64> = None;
        for data in self.ahead.drain(..skipped) {
            let Some(data) = data else {
                whole = None;
                continue;
            };
            if data.is(BEGINNING) {
                whole = Some(0);
            }
            if !dropped(data) {
                self.unread += 1;
            } else if let Some(count) = whole.as_mut() {
                *count += 1;
            }
            if data.is(ENDING) {
                self.unread += whole.take().unwrap_or(0);
            }
        }
        self.walked = new;
        if after(new, self.acked) != 0 {
            self.acked = new;
        }
    }

    /// Moves the walk to `to`, past whatever it has of the TSNs before.
    fn skip(&mut self, to: u32) {
        let skipped = after(to, self.walked) as usize;
        self.ahead.drain(..skipped.min(self.ahead.len()));
        self.walked = to;
        self.open = None;
    }
}

/// A chunk's TSN (a DATA chunk's), cumulative TSN (a SACK's) or new cumulative TSN (a FORWARD
/// TSN's): each the first field after the chunk header.
fn tsn(chunk: &[u8]) -> Option<u32> {
    let field = chunk.get(4..8)?;
    Some(u32::from_be_bytes([field[0], field[1], field[2], field[3]]))
}

/// How far `tsn` is past `base` in serial number arithmetic (RFC 1982); 0 at or before it.
fn after(tsn: u32, base: u32) -> u32 {
    let distance = tsn.wrapping_sub(base);
    if distance < 1 << 31 {
        distance
    } else {
        0
    }
}

/// Whether stream sequence number `ssn` is past `last` (serial number arithmetic).
fn ssn_after(ssn: u16, last: u16) -> bool {
    let distance = ssn.wrapping_sub(last);
    distance != 0 && distance < 1 << 15
}

/// Whether an INIT's or INIT ACK's parameters list FORWARD TSN among its extensions.
fn lists_forward_tsn(mut params: &[u8]) -> bool {
    while let Some(header) = params.get(..4) {
        let kind = u16::from_be_bytes([header[0], header[1]]);
        let length = usize::from(u16::from_be_bytes([header[2], header[3]]));
        let value = params.get(4..length.max(4)).unwrap_or(&[]);
        if kind == SUPPORTED_EXTENSIONS && value.contains(&FORWARD_TSN) {
            return true;
        }
        let Some(rest) = params.get(length.max(4).next_multiple_of(4)..) else {
            break;
        };
        params = rest;
    }
    false
}

#[cfg(test)]
#[path = "held_tests.rs"]
mod tests;
