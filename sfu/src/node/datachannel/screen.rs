//! A look at an SCTP packet's chunks (RFC 9260 section 3) before the stack has it, for what
//! the stack would take in but must not be given: it keeps every DATA chunk until its message
//! is whole, and each one it adds is a walk (and a sort) of those it holds, while its window
//! counts only user data. So a DATA chunk with no user data (which RFC 9260 section 6.2 says
//! to abort on) or a fragment other than the last that is smaller than any sender cuts one
//! would cost the node per chunk held and next to nothing against the window; and DATA
//! beyond a rate well above what the node's data limits let through is refused too. (Fragments
//! of 10 bytes, which a browser may send, still cost the stack more per chunk held than
//! their bytes say: the rate and the window bound it, the stack's queues would have to
//! change to end it.) An INIT to an end
//! that has its association (or to a client's end, which takes none: the stack would panic)
//! is refused as well: the node restarts no association.

use std::time::{Duration, Instant};

/// A fragment other than a message's last carries at least this much user data. Senders
/// mostly cut messages at a packet's worth (900 bytes for the node's own), but a browser's
/// stack fills what is left of a packet with a fragment of as little as 10 bytes, first or
/// middle (after a retransmission, say), and would resend a refused one for ever: this is its
/// floor, not more.
pub const MIN_FRAGMENT: usize = 10;
/// The user data of a DATA chunk that a sender's rate is reckoned in (the node's own cut).
const RECKONED_CHUNK: u64 = 900;

/// DATA chunks one association takes a second, at most: twice what the data limits let
/// through, `messages` and `bytes` a second in chunks of 900 bytes (with the defaults,
/// 11,320).
pub fn chunks_per_second(messages: u32, bytes: u64) -> u32 {
    let chunks = u64::from(messages).saturating_add(bytes / RECKONED_CHUNK);
    u32::try_from(chunks.saturating_mul(2)).unwrap_or(u32::MAX)
}

const DATA: u8 = 0;
const INIT: u8 = 1;
/// DATA's E flag: the message's last fragment.
const ENDING: u8 = 0x01;
/// A DATA chunk's header and fixed fields before its user data.
const DATA_HEADER: usize = 16;
/// The common header before the chunks.
const COMMON_HEADER: usize = 12;

/// Why a packet is not given to the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SctpRefusal {
    /// A DATA chunk with no user data.
    #[error("a DATA chunk with no user data")]
    EmptyData,
    /// A DATA chunk that is a fragment other than the last, shorter than [`MIN_FRAGMENT`].
    #[error("a fragment other than the last shorter than {MIN_FRAGMENT} bytes")]
    ShortFragment,
    /// An INIT to an end that takes none.
    #[error("an INIT to an association that has one")]
    Init,
    /// DATA chunks past the association's rate ([`chunks_per_second`]).
    #[error("DATA chunks past the association's rate")]
    ChunkRate,
    /// A packet the stack did not read (too short, a bad checksum, for no association).
    #[error("a packet the SCTP stack did not read")]
    Unread,
}

/// The DATA chunks an association has taken in the current second.
#[derive(Debug, Clone, Copy)]
pub struct ChunkBudget {
    since: Instant,
    taken: u32,
    per_second: u32,
}

impl ChunkBudget {
    /// None taken yet, the second starting at `now`, `per_second` at most.
    pub fn new(now: Instant, per_second: u32) -> Self {
        Self {
            since: now,
            taken: 0,
            per_second,
        }
    }

    /// Whether `chunks` more may be taken at `now` (and if so, they are).
    fn take(&mut self, now: Instant, chunks: u32) -> bool {
        if now.saturating_duration_since(self.since) >= Duration::from_secs(1) {
            (self.since, self.taken) = (now, 0);
        }
        let taken = self.taken.saturating_add(chunks);
        let within = taken <= self.per_second;
        if within {
            self.taken = taken;
        }
        within
    }
}

/// Whether the stack may have `packet`: `takes_init`, whether this end takes an INIT now.
pub fn screen(
    packet: &[u8],
    takes_init: bool,
    budget: &mut ChunkBudget,
    now: Instant,
) -> Result<(), SctpRefusal> {
    let mut chunks = packet.get(COMMON_HEADER..).ok_or(SctpRefusal::Unread)?;
    let mut data = 0u32;
    while let (Some(&kind), Some(&flags), Some(length)) = (
        chunks.first(),
        chunks.get(1),
        chunks
            .get(2..4)
            .map(|l| usize::from(u16::from_be_bytes([l[0], l[1]]))),
    ) {
        match kind {
            // Shorter than its fixed fields: the stack refuses it whole.
            DATA if length < DATA_HEADER => return Err(SctpRefusal::Unread),
            DATA if length == DATA_HEADER => return Err(SctpRefusal::EmptyData),
            DATA if flags & ENDING == 0 && length - DATA_HEADER < MIN_FRAGMENT => {
                return Err(SctpRefusal::ShortFragment)
            }
            DATA => data += 1,
            INIT if !takes_init => return Err(SctpRefusal::Init),
            _ => {}
        }
        // Chunks are padded to four bytes; one shorter than its header ends the walk.
        let Some(rest) = chunks.get(length.max(4).next_multiple_of(4)..) else {
            break;
        };
        chunks = rest;
    }
    match data == 0 || budget.take(now, data) {
        true => Ok(()),
        false => Err(SctpRefusal::ChunkRate),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packet of one chunk of `kind`, `flags` and `value` bytes after its header.
    fn packet(kind: u8, flags: u8, value: usize) -> Vec<u8> {
        let mut packet = vec![0; COMMON_HEADER];
        let length = u16::try_from(4 + value).expect("short");
        packet.extend([kind, flags]);
        packet.extend(length.to_be_bytes());
        packet.resize(packet.len() + value.next_multiple_of(4), 0);
        packet
    }

    #[test]
    fn data_chunks_carry_user_data_and_fragments_but_the_last_a_packet_s_worth() {
        let now = Instant::now();
        let mut budget = ChunkBudget::new(now, u32::MAX);
        let mut screened = |p: &[u8]| screen(p, false, &mut budget, now);
        assert_eq!(
            screened(&packet(DATA, 0x03, 12)),
            Err(SctpRefusal::EmptyData)
        );
        assert_eq!(screened(&packet(DATA, 0x03, 8)), Err(SctpRefusal::Unread));
        // A whole message of one byte, and a last fragment of one: taken.
        assert_eq!(screened(&packet(DATA, 0x03, 13)), Ok(()));
        assert_eq!(screened(&packet(DATA, ENDING, 13)), Ok(()));
        // A first or middle fragment: a packet's worth.
        for flags in [0x02, 0x00, 0x06] {
            let short = packet(DATA, flags, 12 + MIN_FRAGMENT - 1);
            assert_eq!(screened(&short), Err(SctpRefusal::ShortFragment));
            assert_eq!(screened(&packet(DATA, flags, 12 + MIN_FRAGMENT)), Ok(()));
        }
        // The refusal is found past other chunks, bundled (a SACK first).
        let mut bundled = packet(3, 0, 12);
        bundled.extend_from_slice(&packet(DATA, 0x03, 12)[COMMON_HEADER..]);
        assert_eq!(screened(&bundled), Err(SctpRefusal::EmptyData));
        assert_eq!(screened(&[0; 11]), Err(SctpRefusal::Unread));
    }

    #[test]
    fn an_init_is_taken_only_where_the_end_takes_one() {
        let now = Instant::now();
        let mut budget = ChunkBudget::new(now, u32::MAX);
        let init = packet(INIT, 0, 16);
        assert_eq!(screen(&init, true, &mut budget, now), Ok(()));
        assert_eq!(
            screen(&init, false, &mut budget, now),
            Err(SctpRefusal::Init)
        );
    }

    #[test]
    fn data_chunks_past_the_rate_wait_for_the_next_second() {
        let now = Instant::now();
        let per_second = chunks_per_second(1_000, 4 << 20);
        assert_eq!(per_second, 11_320);
        let mut budget = ChunkBudget::new(now, per_second);
        let one = packet(DATA, 0x03, 13);
        for _ in 0..per_second {
            assert_eq!(screen(&one, false, &mut budget, now), Ok(()));
        }
        assert_eq!(
            screen(&one, false, &mut budget, now),
            Err(SctpRefusal::ChunkRate)
        );
        // Control chunks are not counted.
        assert_eq!(screen(&packet(3, 0, 12), false, &mut budget, now), Ok(()));
        let later = now + Duration::from_secs(1);
        assert_eq!(screen(&one, false, &mut budget, later), Ok(()));
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_are_screened_without_a_panic(bytes in proptest::collection::vec(0u8.., 0..256)) {
            let now = Instant::now();
            let mut budget = ChunkBudget::new(now, 64);
            let _ = screen(&bytes, bytes.len() % 2 == 0, &mut budget, now);
        }
    }
}
