//! How often something may be done, by whom: a token bucket per key, checked before the work
//! it guards. A participant's offers again (keyed by its session, which gets a bucket only once
//! the core has taken an offer of its, so made-up resource URLs cost nothing here), and the
//! sessions a client opens (keyed by its [`ClientKey`](crate::node::client_key::ClientKey)).
//! Buckets that have refilled are forgotten each time the table has doubled since it was last
//! swept, so it holds about the keys that spent in the last second (at most twice as many, and
//! a sweep costs what the spends since the last one did).

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Tokens per key per second, sustained; a second's worth may be spent at once.
#[derive(Debug)]
pub struct Rate<K> {
    per_second: u32,
    buckets: Mutex<Buckets<K>>,
}

#[derive(Debug)]
struct Buckets<K> {
    by_key: HashMap<K, Bucket>,
    /// The table's size at which full buckets are swept out next.
    sweep_at: usize,
}

/// The smallest table swept: below it a sweep would cost more than it keeps.
const SWEEP_FLOOR: usize = 64;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Refused: the key spent its share; the next token comes after this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooFast {
    pub retry_after: Duration,
}

impl<K: Hash + Eq + Copy> Rate<K> {
    /// `per_second` tokens a second per key; 0 turns the limit off.
    pub fn new(per_second: u32) -> Self {
        Self {
            per_second,
            buckets: Mutex::new(Buckets {
                by_key: HashMap::new(),
                sweep_at: SWEEP_FLOOR,
            }),
        }
    }

    /// Whether `key` may spend at `now`: refused while its bucket is empty.
    pub fn check(&self, key: K, now: Instant) -> Result<(), TooFast> {
        let buckets = self.buckets.lock();
        let Some(bucket) = buckets.by_key.get(&key) else {
            return Ok(());
        };
        let tokens = self.refilled(*bucket, now);
        if tokens >= 1.0 {
            return Ok(());
        }
        let wait = (1.0 - tokens) / f64::from(self.per_second.max(1));
        Err(TooFast {
            retry_after: Duration::from_secs_f64(wait),
        })
    }

    /// `key` spends a token at `now`. Forgets the buckets that are full again once the table
    /// has doubled.
    pub fn spend(&self, key: K, now: Instant) {
        if self.per_second == 0 {
            return;
        }
        let mut buckets = self.buckets.lock();
        let full = f64::from(self.per_second);
        let tokens = (buckets.by_key.get(&key)).map_or(full, |bucket| self.refilled(*bucket, now));
        let spent = Bucket {
            tokens: tokens - 1.0,
            at: now,
        };
        buckets.by_key.insert(key, spent);
        if buckets.by_key.len() >= buckets.sweep_at {
            (buckets.by_key).retain(|_, bucket| self.refilled(*bucket, now) < full);
            buckets.sweep_at = (2 * buckets.by_key.len()).max(SWEEP_FLOOR);
        }
    }

    /// Keys with a bucket that is not full.
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.buckets.lock().by_key.len()
    }

    fn refilled(&self, bucket: Bucket, now: Instant) -> f64 {
        let full = f64::from(self.per_second);
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        (bucket.tokens + elapsed * full).min(full)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::peer::PeerId;

    type OfferRate = Rate<PeerId>;

    #[test]
    fn a_session_offers_its_burst_then_one_per_share_of_a_second() {
        let rate = OfferRate::new(4);
        let alice = PeerId(1);
        let start = Instant::now();
        for _ in 0..4 {
            assert_eq!(rate.check(alice, start), Ok(()));
            rate.spend(alice, start);
        }
        let refused = rate.check(alice, start).expect_err("its burst is spent");
        assert_eq!(refused.retry_after, Duration::from_millis(250));
        assert_eq!(
            rate.check(PeerId(2), start),
            Ok(()),
            "another session's own"
        );
        let later = start + Duration::from_millis(250);
        assert_eq!(rate.check(alice, later), Ok(()));
        rate.spend(alice, later);
        assert!(rate.check(alice, later).is_err());
    }

    #[test]
    fn refilled_buckets_are_forgotten_once_the_table_doubled_and_a_limit_of_zero_is_none() {
        let rate = OfferRate::new(2);
        let start = Instant::now();
        let spend_from =
            |keys: std::ops::Range<u128>, at| keys.for_each(|k| rate.spend(PeerId(k), at));
        spend_from(0..SWEEP_FLOOR as u128 - 1, start);
        assert_eq!(rate.tracked(), SWEEP_FLOOR - 1, "not swept below its floor");
        let later = start + Duration::from_secs(1);
        spend_from(1000..1001, later);
        assert_eq!(
            rate.tracked(),
            1,
            "swept at the floor: the others are full again"
        );
        let second_later = later + Duration::from_secs(1);
        spend_from(1001..1002, second_later);
        assert_eq!(
            rate.tracked(),
            2,
            "a bucket full again waits for the next sweep, not swept on every spend"
        );
        spend_from(2000..2000 + SWEEP_FLOOR as u128 - 2, second_later);
        assert_eq!(rate.tracked(), SWEEP_FLOOR - 1, "swept at the floor again");
        let off = OfferRate::new(0);
        for _ in 0..100 {
            off.spend(PeerId(1), start);
        }
        assert_eq!(off.check(PeerId(1), start), Ok(()));
        assert_eq!(off.tracked(), 0);
    }
}
