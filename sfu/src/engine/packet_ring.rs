//! The recent packets of one received stream, by extended sequence number, so a NACK (RFC 4585)
//! is answered with the very packet that was forwarded (RFC 4588 retransmission).

/// Default number of packets kept: about one second of a high-rate video stream.
pub const DEFAULT_RING_CAPACITY: usize = 1024;

/// A bounded ring of recent packets, shared by all subscribers of a receiver.
///
/// The slot of a packet is its extended sequence number modulo the capacity, a power of two, so
/// lookups are one mask and one compare. A newer packet overwrites the slot of the one a full
/// capacity older; nothing is allocated after construction.
#[derive(Debug)]
pub struct PacketRing<T> {
    slots: Box<[Option<Stored<T>>]>,
    mask: usize,
}

#[derive(Debug)]
struct Stored<T> {
    ext_seq: i64,
    packet: T,
}

impl<T> PacketRing<T> {
    /// A ring holding `capacity` packets, rounded up to a power of two (at least 1).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1).next_power_of_two();
        Self {
            slots: (0..capacity).map(|_| None).collect(),
            mask: capacity - 1,
        }
    }

    /// How many packets the ring holds at most.
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Stores `packet` under `ext_seq`. Returns false, keeping the ring as it was, when the slot
    /// already holds a newer packet: a very late arrival must not evict a recent one.
    pub fn insert(&mut self, ext_seq: i64, packet: T) -> bool {
        let slot = &mut self.slots[self.index(ext_seq)];
        if slot.as_ref().is_some_and(|s| s.ext_seq > ext_seq) {
            return false;
        }
        *slot = Some(Stored { ext_seq, packet });
        true
    }

    /// The packet stored under `ext_seq`, or None when it never arrived or was overwritten.
    pub fn get(&self, ext_seq: i64) -> Option<&T> {
        self.slots[self.index(ext_seq)]
            .as_ref()
            .filter(|s| s.ext_seq == ext_seq)
            .map(|s| &s.packet)
    }

    fn index(&self, ext_seq: i64) -> usize {
        // Truncation intended: only the low bits select the slot, and the mask keeps them in range
        // whatever the sign (two's complement keeps negatives consistent modulo the capacity).
        (ext_seq as usize) & self.mask
    }
}

impl<T> Default for PacketRing<T> {
    fn default() -> Self {
        Self::new(DEFAULT_RING_CAPACITY)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    #[test]
    fn capacity_rounds_up_to_a_power_of_two() {
        assert_eq!(PacketRing::<u8>::new(1000).capacity(), 1024);
        assert_eq!(PacketRing::<u8>::new(1024).capacity(), 1024);
        assert_eq!(PacketRing::<u8>::new(0).capacity(), 1);
        assert_eq!(
            PacketRing::<u8>::default().capacity(),
            DEFAULT_RING_CAPACITY
        );
    }

    #[test]
    fn a_newer_packet_overwrites_the_one_a_capacity_older() {
        let mut ring = PacketRing::new(4);
        for ext in 0..4 {
            assert!(ring.insert(ext, Bytes::from(vec![ext as u8])));
        }
        assert_eq!(ring.get(0).map(|b| b[0]), Some(0));
        assert!(ring.insert(4, Bytes::from_static(&[4])));
        assert_eq!(ring.get(0), None, "overwritten by 4");
        assert_eq!(ring.get(4).map(|b| b[0]), Some(4));
        assert_eq!(ring.get(1).map(|b| b[0]), Some(1));
        assert_eq!(ring.get(8), None, "same slot, never stored");
    }

    #[test]
    fn a_late_packet_does_not_evict_a_newer_one() {
        let mut ring = PacketRing::new(4);
        assert!(ring.insert(9, 'n'));
        assert!(!ring.insert(5, 'o'), "5 shares the slot of the newer 9");
        assert_eq!(ring.get(9), Some(&'n'));
        assert_eq!(ring.get(5), None);
    }

    #[test]
    fn extended_numbers_past_the_16_bit_wrap_and_below_zero_keep_their_slots() {
        let mut ring = PacketRing::new(8);
        for ext in 65_530..65_540 {
            ring.insert(ext, ext);
        }
        assert_eq!(ring.get(65_535), Some(&65_535));
        assert_eq!(ring.get(65_536), Some(&65_536));
        assert_eq!(ring.get(65_531), None, "more than 8 behind the newest");
        let mut ring = PacketRing::new(8);
        ring.insert(-1, -1);
        ring.insert(7, 7);
        assert_eq!(ring.get(-1), None, "-1 and 7 share a slot, 7 is newer");
        assert_eq!(ring.get(7), Some(&7));
    }

    #[test]
    fn the_ring_handle_is_three_words() {
        // The slots live on the heap, allocated once; the handle stays small.
        assert_eq!(size_of::<PacketRing<Bytes>>(), 3 * size_of::<usize>());
    }
}
