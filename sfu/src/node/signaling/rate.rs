//! How often something may be done, by whom: a token bucket per key, checked before the work
//! it guards. A participant's offers again (keyed by its session, which gets a bucket only once
//! the core has taken an offer of its, so made-up resource URLs cost nothing here), and the
//! sessions a client opens (keyed by its [`ClientKey`](crate::node::client_key::ClientKey)).
//! Buckets that have refilled are forgotten, so the table holds only the keys that spent in
//! the last second.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Tokens per key per second, sustained; a second's worth may be spent at once.
#[derive(Debug)]
pub struct Rate<K> {
    per_second: u32,
    buckets: Mutex<HashMap<K, Bucket>>,
}

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
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `key` may spend at `now`: refused while its bucket is empty.
    pub fn check(&self, key: K, now: Instant) -> Result<(), TooFast> {
        let buckets = self.buckets.lock();
        let Some(bucket) = buckets.get(&key) else {
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

    /// `key` spends a token at `now`. Forgets the buckets that are full again.
    pub fn spend(&self, key: K, now: Instant) {
        if self.per_second == 0 {
            return;
        }
        let mut buckets = self.buckets.lock();
        let full = f64::from(self.per_second);
        let tokens = buckets
            .get(&key)
            .map_or(full, |bucket| self.refilled(*bucket, now));
        buckets.insert(
            key,
            Bucket {
                tokens: tokens - 1.0,
                at: now,
            },
        );
        buckets.retain(|_, bucket| self.refilled(*bucket, now) < full);
    }

    /// Keys with a bucket that is not full.
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.buckets.lock().len()
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
    fn refilled_buckets_are_forgotten_and_a_limit_of_zero_is_none() {
        let rate = OfferRate::new(2);
        let start = Instant::now();
        rate.spend(PeerId(1), start);
        rate.spend(PeerId(2), start);
        assert_eq!(rate.tracked(), 2);
        rate.spend(PeerId(3), start + Duration::from_secs(1));
        assert_eq!(rate.tracked(), 1, "the first two are full again");
        let off = OfferRate::new(0);
        for _ in 0..100 {
            off.spend(PeerId(1), start);
        }
        assert_eq!(off.check(PeerId(1), start), Ok(()));
        assert_eq!(off.tracked(), 0);
    }
}
