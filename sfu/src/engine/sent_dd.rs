//! The DD each packet went out with, remembered so that a retransmission carries the same
//! bytes. Most fit inline in the packet's slot of the send history; a larger one (a keyframe's,
//! with the dependency structure) is copied into a ring of fixed slots allocated with the
//! DownTrack, so remembering it allocates nothing: a keyframe reaching a thousand viewers costs
//! no allocation per viewer.

use selector::dd::MAX_DD_SIZE;

/// DDs up to this size are remembered inline.
const INLINE_DD: usize = 24;
/// Large DDs remembered at most, the newest. A keyframe's structure rides on its first packet,
/// and the send history's 512 packets reach back a keyframe or two (the router asks for one
/// at most every half a second), so eight outlast every packet a NACK can still name.
const LARGE_DDS: usize = 8;

/// The rewritten DD a packet went out with. `Copy`, with no destructor: recording a packet is
/// then only a store into its slot, with no read of the slot's old (cold) contents to drop.
#[derive(Debug, Clone, Copy)]
pub(super) enum SentDd {
    Inline {
        len: u8,
        bytes: [u8; INLINE_DD],
    },
    /// In the DownTrack's [`LargeDds`], under the packet's output sequence number.
    Large,
}

impl SentDd {
    /// The first `len` bytes of `scratch`; `Large` when they do not fit inline (the caller
    /// keeps them aside). The copy is of a fixed size whatever `len`: a few vector moves,
    /// where a copy of `len` bytes would be a call whose result the CPU cannot forward.
    pub(super) fn new(scratch: &[u8; MAX_DD_SIZE], len: usize) -> Self {
        match scratch.first_chunk::<INLINE_DD>() {
            Some(&bytes) if len <= INLINE_DD => Self::Inline {
                // At most INLINE_DD.
                len: len as u8,
                bytes,
            },
            _ => Self::Large,
        }
    }
}

/// One large DD and the output sequence number of the packet it went out with; `len` 0 is an
/// empty slot.
#[derive(Debug, Clone, Copy)]
struct LargeDd {
    out_seq: u16,
    len: u8,
    bytes: [u8; MAX_DD_SIZE],
}

const EMPTY: LargeDd = LargeDd {
    out_seq: 0,
    len: 0,
    bytes: [0; MAX_DD_SIZE],
};

/// The newest [`LARGE_DDS`] large DDs, each over the oldest; no slots at all for a track that
/// carries no DD (audio), so they cost only the DownTracks that can use them (2 KiB each).
#[derive(Debug)]
pub(super) struct LargeDds {
    slots: Box<[LargeDd]>,
    /// The slot the next one goes in.
    next: usize,
}

impl LargeDds {
    /// Slots for a track whose packets carry a DD; none otherwise.
    pub(super) fn new(carries_dd: bool) -> Self {
        let slots = if carries_dd { LARGE_DDS } else { 0 };
        Self {
            slots: vec![EMPTY; slots].into_boxed_slice(),
            next: 0,
        }
    }

    /// Keeps `dd`, sent under `out_seq`, over the oldest. Without slots, or longer than a DD
    /// can be, it is not kept: a retransmission of its packet is then not remembered.
    pub(super) fn keep(&mut self, out_seq: u16, dd: &[u8]) {
        let Ok(len) = u8::try_from(dd.len()) else {
            return;
        };
        let Some(slot) = self.slots.get_mut(self.next) else {
            return;
        };
        slot.bytes[..dd.len()].copy_from_slice(dd);
        slot.len = len;
        slot.out_seq = out_seq;
        self.next = (self.next + 1) % self.slots.len();
    }

    /// The large DD sent under `out_seq`, the newest first (an older one under the same number,
    /// 65,536 packets back, is not its packet's).
    pub(super) fn get(&self, out_seq: u16) -> Option<&[u8]> {
        let (newer, older) = self.slots.split_at(self.next);
        newer
            .iter()
            .rev()
            .chain(older.iter().rev())
            .find(|slot| slot.len > 0 && slot.out_seq == out_seq)
            .map(|slot| &slot.bytes[..usize::from(slot.len)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dd(fill: u8, len: usize) -> Vec<u8> {
        vec![fill; len]
    }

    #[test]
    fn a_short_dd_is_inline_and_a_long_one_aside() {
        let mut scratch = [7; MAX_DD_SIZE];
        scratch[0] = 1;
        match SentDd::new(&scratch, INLINE_DD) {
            SentDd::Inline { len, bytes } => {
                assert_eq!(&bytes[..usize::from(len)], &scratch[..INLINE_DD])
            }
            SentDd::Large => panic!("{INLINE_DD} bytes fit inline"),
        }
        assert!(matches!(
            SentDd::new(&scratch, INLINE_DD + 1),
            SentDd::Large
        ));
    }

    #[test]
    fn the_newest_are_kept_over_the_oldest() {
        let mut large = LargeDds::new(true);
        for seq in 0..(LARGE_DDS as u16 + 3) {
            large.keep(seq, &dd(seq as u8, 40 + usize::from(seq)));
        }
        for forgotten in 0..3 {
            assert_eq!(large.get(forgotten), None);
        }
        for seq in 3..(LARGE_DDS as u16 + 3) {
            assert_eq!(
                large.get(seq),
                Some(&dd(seq as u8, 40 + usize::from(seq))[..])
            );
        }
    }

    #[test]
    fn the_newest_under_a_number_is_found_and_empty_slots_never() {
        let mut large = LargeDds::new(true);
        assert_eq!(large.get(0), None, "an empty slot is no DD");
        large.keep(5, &dd(1, 30));
        large.keep(9, &dd(2, 30));
        // The sequence space came round: 5 again, a different packet.
        large.keep(5, &dd(3, MAX_DD_SIZE));
        assert_eq!(large.get(5), Some(&dd(3, MAX_DD_SIZE)[..]));
        assert_eq!(large.get(9), Some(&dd(2, 30)[..]));
    }

    #[test]
    fn a_track_without_a_dd_keeps_none_and_holds_no_slots() {
        let mut large = LargeDds::new(false);
        large.keep(1, &dd(1, 30));
        assert_eq!(large.get(1), None);
        assert_eq!(large.slots.len(), 0);
        let mut with = LargeDds::new(true);
        with.keep(1, &dd(1, MAX_DD_SIZE + 1));
        assert_eq!(with.get(1), None, "longer than a DD can be");
    }
}
