//! The state kept for each SSRC a peer sends under (a replay window, a rollover count), found
//! by SSRC on every packet the peer sends, and bounded: the peer picks its SSRCs, and each
//! one that authenticates would otherwise hold state for as long as the session lives.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use smallvec::SmallVec;

use super::SrtpError;

/// SSRCs searched in order before the keyed table: one cache line of them. A browser's
/// session sends under a handful (its tracks, their retransmissions, its receivers' reports),
/// so its lookups compare a few words and hash nothing.
const SEARCHED: usize = 16;

/// Per SSRC, one `T`: the first [`SEARCHED`] in order of their first packet, the rest (a
/// relay link carries many publishers') in a keyed hash, since the peer picks the SSRCs and
/// could pick ones that collide under an unkeyed one. At most `max` in all. The states are
/// allocated as their SSRCs come, never per packet.
#[derive(Debug)]
pub(super) struct Streams<T> {
    /// Inline, never past [`SEARCHED`]: a lookup reads the line it is on and then its state's.
    ssrcs: SmallVec<[u32; SEARCHED]>,
    states: Vec<T>,
    rest: HashMap<u32, T>,
    max: usize,
}

impl<T: Default> Streams<T> {
    /// No stream yet; at most `max` ever.
    pub fn new(max: usize) -> Self {
        Self {
            ssrcs: SmallVec::new(),
            states: Vec::new(),
            rest: HashMap::new(),
            max,
        }
    }

    /// `ssrc`'s state, if it has one.
    pub fn get(&self, ssrc: u32) -> Option<&T> {
        match self.ssrcs.iter().position(|&s| s == ssrc) {
            Some(at) => self.states.get(at),
            None => self.rest.get(&ssrc),
        }
    }

    /// Whether a state for one more SSRC fits: asked before a packet under a new one is
    /// decrypted, so a packet that could not be kept costs no decryption.
    pub fn has_room(&self) -> bool {
        self.len() < self.max
    }

    /// `ssrc`'s state, made when it has none; [`SrtpError::TooManyStreams`] when it has none
    /// and `max` are kept already.
    pub fn entry(&mut self, ssrc: u32) -> Result<&mut T, SrtpError> {
        let full = !self.has_room();
        if let Some(at) = self.ssrcs.iter().position(|&s| s == ssrc) {
            return self.states.get_mut(at).ok_or(SrtpError::TooManyStreams);
        }
        if self.ssrcs.len() < SEARCHED {
            if full {
                return Err(SrtpError::TooManyStreams);
            }
            self.ssrcs.push(ssrc);
            self.states.push(T::default());
            return self.states.last_mut().ok_or(SrtpError::TooManyStreams);
        }
        match self.rest.entry(ssrc) {
            Entry::Occupied(state) => Ok(state.into_mut()),
            Entry::Vacant(_) if full => Err(SrtpError::TooManyStreams),
            Entry::Vacant(slot) => Ok(slot.insert(T::default())),
        }
    }

    fn len(&self) -> usize {
        self.ssrcs.len() + self.rest.len()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn past_its_maximum_a_new_ssrc_is_refused_and_the_kept_ones_stay() {
        for max in [0, 1, SEARCHED - 1, SEARCHED, SEARCHED + 3] {
            let mut streams = Streams::<u64>::new(max);
            for ssrc in 0..max as u32 {
                *streams.entry(ssrc).expect("room") += u64::from(ssrc) + 1;
            }
            assert!(!streams.has_room(), "{max}");
            assert_eq!(
                streams.entry(1_000),
                Err(SrtpError::TooManyStreams),
                "{max}"
            );
            assert_eq!(streams.get(1_000), None, "{max}");
            for ssrc in 0..max as u32 {
                assert_eq!(streams.entry(ssrc).copied(), Ok(u64::from(ssrc) + 1));
                assert_eq!(streams.get(ssrc).copied(), Some(u64::from(ssrc) + 1));
            }
        }
    }

    #[test]
    fn the_searched_ones_are_kept_inline_and_the_rest_hashed() {
        let mut streams = Streams::<u8>::new(100);
        for ssrc in 0..40 {
            streams.entry(ssrc * 7).expect("room");
        }
        assert_eq!(streams.ssrcs.len(), SEARCHED);
        assert_eq!(streams.rest.len(), 40 - SEARCHED);
    }

    proptest! {
        /// Whatever SSRCs come in whatever order, each keeps its own state, and the first
        /// `max` distinct ones are the ones kept.
        #[test]
        fn each_ssrc_keeps_its_own_state(
            ssrcs in proptest::collection::vec(0u32..64, 0..200),
            max in 0usize..48,
        ) {
            let mut streams = Streams::<u32>::new(max);
            let mut model: Vec<(u32, u32)> = Vec::new();
            for ssrc in ssrcs {
                let known = model.iter().position(|&(s, _)| s == ssrc);
                match (streams.entry(ssrc), known) {
                    (Ok(count), Some(at)) => {
                        *count += 1;
                        model[at].1 += 1;
                        prop_assert_eq!(*count, model[at].1);
                    }
                    (Ok(count), None) => {
                        prop_assert!(model.len() < max);
                        *count += 1;
                        model.push((ssrc, 1));
                    }
                    (Err(e), known) => {
                        prop_assert_eq!(e, SrtpError::TooManyStreams);
                        prop_assert!(known.is_none() && model.len() == max);
                    }
                }
            }
            for &(ssrc, count) in &model {
                prop_assert_eq!(streams.get(ssrc).copied(), Some(count));
            }
            prop_assert_eq!(streams.has_room(), model.len() < max);
        }
    }
}
