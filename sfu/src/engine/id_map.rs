//! Hash maps keyed by ids: the engine's and the node's ids, SSRCs, and the socket addresses of
//! sessions. Their lookups run per packet (per packet per subscriber in the fan-out), where a
//! keyed hash (SipHash, std's default) costs more than the rest of the lookup. A keyed hash
//! defends a table against keys an attacker picks to collide; every table keyed here holds
//! keys the attacker does not pick: ids the router or the node hands out, random session ids,
//! SSRCs announced in signaling, addresses bound only after the session's password proved them,
//! and a cluster's links (the other nodes' addresses, the SSRCs and tags an origin announces).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Mixes each word written into the state (a rotation, an exclusive or and one multiplication
/// by an odd constant): a `u32` id alone hashes as itself times the constant, which spreads it
/// over the high bits too (the table takes its 7-bit tags from the top); a key of several
/// words (an address and port) mixes them all.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

const MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

impl IdHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(MULTIPLIER);
    }
}

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u16(&mut self, n: u16) {
        self.add(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_u128(&mut self, n: u128) {
        // Truncation intended: the two halves, each mixed in.
        self.add(n as u64);
        self.add((n >> 64) as u64);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

/// A map keyed by ids, hashed with [`IdHasher`].
pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

#[cfg(test)]
mod tests {
    use std::hash::{BuildHasher, Hash};
    use std::net::SocketAddr;

    use super::*;

    fn hash(key: impl Hash) -> u64 {
        BuildHasherDefault::<IdHasher>::default().hash_one(key)
    }

    #[test]
    fn a_u32_id_hashes_as_itself_times_the_multiplier() {
        assert_eq!(hash(7u32), 7u64.wrapping_mul(MULTIPLIER));
        assert_ne!(
            hash(7u32) >> 57,
            hash(8u32) >> 57,
            "the top bits differ too"
        );
    }

    #[test]
    fn every_part_of_an_address_counts() {
        let base: SocketAddr = "10.0.0.1:5000".parse().expect("an address");
        let others = [
            "10.0.0.1:5001",
            "10.0.0.2:5000",
            "11.0.0.1:5000",
            "[::ffff:10.0.0.1]:5000",
            "[2001:db8::1]:5000",
            "[2001:db9::1]:5000",
        ];
        for other in others {
            let other: SocketAddr = other.parse().expect("an address");
            assert_ne!(hash(base), hash(other), "{other}");
        }
    }

    #[test]
    fn both_halves_of_a_u128_count() {
        assert_ne!(hash(1u128), hash(1u128 | 1 << 100));
        assert_ne!(hash(1u128 << 64), hash(2u128 << 64));
    }
}
