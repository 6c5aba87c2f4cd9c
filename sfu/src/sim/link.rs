//! One direction of one path: a bottleneck (a rate and a drop-tail queue) if configured, then
//! a propagation delay with jitter, random loss and duplicates, all drawn from a seeded
//! generator so that one seed gives one run.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use selector::scalability::SeededRng;

/// How one direction of a path treats what is sent on it. The default is an ideal link: no
/// delay, nothing lost, duplicated or queued.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LinkConfig {
    /// The propagation delay every packet takes.
    pub delay: Duration,
    /// Extra delay per packet, uniform in `[0, jitter)`.
    pub jitter: Duration,
    /// Whether jitter may reorder packets. When false a packet never arrives before one sent
    /// ahead of it (it waits for it, as on a path whose jitter is queueing); when true each
    /// packet takes its own delay and a later one may overtake an earlier one.
    pub reorder: bool,
    /// Probability that a packet is lost, from 0 to 1.
    pub loss: f64,
    /// Probability that a packet that is not lost arrives twice, from 0 to 1; the copy takes
    /// its own jitter.
    pub duplicate: f64,
    /// A rate limit with a queue in front of it, before the propagation delay.
    pub bottleneck: Option<Bottleneck>,
}

impl LinkConfig {
    /// A link with a fixed delay, nothing else.
    pub fn delayed(delay: Duration) -> Self {
        Self {
            delay,
            ..Self::default()
        }
    }
}

/// A rate limit: packets leave one after another at `rate_bps`, waiting in a drop-tail queue.
/// With a `burst`, it is a token bucket as a shaper is: an idle link saves up to that many
/// bytes of credit, and what fits in the credit leaves at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bottleneck {
    /// The rate packets are serialized at, in bits per second (at least 1).
    pub rate_bps: u64,
    /// How much may wait; a packet arriving at a fuller queue is dropped.
    pub queue: QueueLimit,
    /// Bytes the bucket holds: 0 for a link that serializes every packet at its rate.
    pub burst: u64,
}

impl Bottleneck {
    /// A link serializing at `rate_bps` with a queue of `queue`, no burst.
    pub fn new(rate_bps: u64, queue: QueueLimit) -> Self {
        Self {
            rate_bps,
            queue,
            burst: 0,
        }
    }
}

/// The size of a bottleneck's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueLimit {
    /// At most this many bytes waiting, the packet being serialized included.
    Bytes(u64),
    /// At most this long to drain what is waiting at the rate.
    Delay(Duration),
}

/// What a link did with what was sent on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkCounters {
    /// Packets given to the link.
    pub sent: u64,
    /// Their bytes: what the sender offered the link, whatever it carried.
    pub bytes_sent: u64,
    /// Packets lost at random.
    pub lost: u64,
    /// Packets dropped because the bottleneck's queue was full.
    pub queue_dropped: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Packets (copies included) handed out at the far end.
    pub delivered: u64,
}

/// One direction of a path carrying items of type `T`: its settings, what is in flight and
/// its counters.
#[derive(Debug)]
pub struct Link<T> {
    config: LinkConfig,
    rng: SeededRng,
    /// By arrival time, then by the order they were sent in: ties leave in sending order.
    in_flight: BTreeMap<(Instant, u64), T>,
    serial: u64,
    /// When the bottleneck finishes serializing what it has taken so far.
    busy_until: Option<Instant>,
    /// The latest arrival scheduled, which an order-keeping link does not schedule before.
    last_arrival: Option<Instant>,
    counters: LinkCounters,
}

impl<T: Clone> Link<T> {
    /// A link drawing its randomness from `seed`.
    pub fn new(config: LinkConfig, seed: u64) -> Self {
        Self {
            config,
            rng: SeededRng(seed),
            in_flight: BTreeMap::new(),
            serial: 0,
            busy_until: None,
            last_arrival: None,
            counters: LinkCounters::default(),
        }
    }

    /// Sends `item` of `size` bytes at `now`. Returns when it is due at the far end (the first
    /// copy's arrival), or None if it was lost or dropped.
    pub fn send(&mut self, now: Instant, size: usize, item: T) -> Option<Instant> {
        self.counters.sent += 1;
        self.counters.bytes_sent += size as u64;
        if chance(&mut self.rng, self.config.loss) {
            self.counters.lost += 1;
            return None;
        }
        let departure = match self.config.bottleneck {
            Some(bottleneck) => self.serialize(now, size, bottleneck)?,
            None => now,
        };
        let copies = if chance(&mut self.rng, self.config.duplicate) {
            self.counters.duplicated += 1;
            2
        } else {
            1
        };
        let mut first = None;
        for _ in 0..copies {
            let at = self.arrival(departure);
            first.get_or_insert(at);
            self.serial += 1;
            self.in_flight.insert((at, self.serial), item.clone());
        }
        first
    }

    /// When the bottleneck has sent a packet of `size` bytes taken at `now`, or None if its
    /// queue is full. `busy_until` is when it would be idle having serialized all it took at
    /// its rate; a packet leaves once that is within the burst's worth of time, and the
    /// backlog is what waits beyond the burst.
    fn serialize(&mut self, now: Instant, size: usize, bottleneck: Bottleneck) -> Option<Instant> {
        let rate = bottleneck.rate_bps.max(1);
        let time = |bytes: u64| {
            let nanos = u128::from(bytes) * 8 * 1_000_000_000 / u128::from(rate);
            Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
        };
        let start = self.busy_until.filter(|&busy| busy > now).unwrap_or(now);
        let credit = time(bottleneck.burst);
        let backlog = (start - now).saturating_sub(credit);
        let full = match bottleneck.queue {
            QueueLimit::Delay(limit) => backlog > limit,
            QueueLimit::Bytes(limit) => {
                let queued = backlog.as_nanos() * u128::from(rate) / 8_000_000_000;
                queued + size as u128 > u128::from(limit)
            }
        };
        if full {
            self.counters.queue_dropped += 1;
            return None;
        }
        let finish = start + time(size as u64);
        self.busy_until = Some(finish);
        Some(finish.checked_sub(credit).map_or(now, |d| d.max(now)))
    }

    /// When a packet leaving at `departure` arrives: the delay plus its jitter, and not before
    /// the one ahead of it unless the link reorders.
    fn arrival(&mut self, departure: Instant) -> Instant {
        let jitter = u64::try_from(self.config.jitter.as_nanos()).unwrap_or(u64::MAX);
        let jitter = match jitter {
            0 => Duration::ZERO,
            j => Duration::from_nanos(self.rng.below(j)),
        };
        let mut at = departure + self.config.delay + jitter;
        if !self.config.reorder {
            at = self.last_arrival.map_or(at, |last| at.max(last));
        }
        self.last_arrival = Some(self.last_arrival.map_or(at, |last| last.max(at)));
        at
    }

    /// When the next item arrives, if any is in flight.
    pub fn next_arrival(&self) -> Option<Instant> {
        self.in_flight.keys().next().map(|&(at, _)| at)
    }

    /// The next item to arrive by `now`, with its arrival time.
    pub fn pop_arrival(&mut self, now: Instant) -> Option<(Instant, T)> {
        let entry = self.in_flight.first_entry().filter(|e| e.key().0 <= now)?;
        let at = entry.key().0;
        self.counters.delivered += 1;
        Some((at, entry.remove()))
    }

    /// Items in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The settings.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// The settings, to change for what is sent from now on (what is in flight keeps its
    /// arrival time).
    pub fn config_mut(&mut self) -> &mut LinkConfig {
        &mut self.config
    }

    /// What the link did so far.
    pub fn counters(&self) -> LinkCounters {
        self.counters
    }
}

/// True with probability `p`: the draw's top 53 bits as a fraction of one.
fn chance(rng: &mut SeededRng, p: f64) -> bool {
    let unit = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    p > 0.0 && unit < p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(t0: Instant, millis: u64) -> Instant {
        t0 + Duration::from_millis(millis)
    }

    /// Every arrival of `count` packets of `size` bytes sent `every` apart.
    fn arrivals(
        t0: Instant,
        config: LinkConfig,
        seed: u64,
        count: u64,
        every: Duration,
    ) -> Vec<(Instant, u64)> {
        let mut link = Link::new(config, seed);
        for i in 0..count {
            link.send(t0 + every * i as u32, 1000, i);
        }
        std::iter::from_fn(|| link.pop_arrival(ms(t0, 1_000_000))).collect()
    }

    #[test]
    fn delay_and_jitter_are_deterministic_for_a_seed() {
        let config = LinkConfig {
            delay: Duration::from_millis(20),
            jitter: Duration::from_millis(25),
            reorder: true,
            ..LinkConfig::default()
        };
        let every = Duration::from_millis(1);
        let t0 = Instant::now();
        let offsets = |seed| {
            let mut link = Link::new(config, seed);
            (0..200u64)
                .map(|i| {
                    let sent = t0 + every * i as u32;
                    let at = link.send(sent, 100, i).expect("nothing lost");
                    at - sent
                })
                .collect::<Vec<_>>()
        };
        let a = offsets(7);
        assert_eq!(a, offsets(7), "one seed, one run");
        assert_ne!(a, offsets(8));
        assert!(a
            .iter()
            .all(|d| (Duration::from_millis(20)..Duration::from_millis(45)).contains(d)));
        let order: Vec<u64> = arrivals(t0, config, 7, 200, every)
            .into_iter()
            .map(|(_, i)| i)
            .collect();
        assert!(order.windows(2).any(|w| w[1] < w[0]), "jitter reorders");
        let kept = LinkConfig {
            reorder: false,
            ..config
        };
        let order: Vec<u64> = arrivals(t0, kept, 7, 200, every)
            .into_iter()
            .map(|(_, i)| i)
            .collect();
        assert_eq!(order, (0..200).collect::<Vec<_>>(), "order kept");
    }

    #[test]
    fn loss_and_duplicates_come_close_to_their_probabilities() {
        let config = LinkConfig {
            loss: 0.1,
            duplicate: 0.05,
            ..LinkConfig::default()
        };
        let t0 = Instant::now();
        let mut link = Link::new(config, 3);
        for i in 0..20_000u64 {
            link.send(t0, 100, i);
        }
        let c = link.counters();
        assert!((1_800..2_200).contains(&c.lost), "{c:?}");
        assert!((700..1_100).contains(&c.duplicated), "{c:?}");
        while link.pop_arrival(t0).is_some() {}
        let c = link.counters();
        assert_eq!(c.delivered, c.sent - c.lost + c.duplicated, "{c:?}");
    }

    #[test]
    fn a_bottleneck_spaces_packets_at_its_rate_and_drops_when_overfed() {
        // 1000-byte packets at 1 Mbit/s: 8 ms each. Sent every 10 ms they never queue.
        let bottleneck = Bottleneck::new(1_000_000, QueueLimit::Bytes(5_000));
        let config = LinkConfig {
            delay: Duration::from_millis(30),
            bottleneck: Some(bottleneck),
            ..LinkConfig::default()
        };
        let t0 = Instant::now();
        let paced = arrivals(t0, config, 1, 50, Duration::from_millis(10));
        for (i, (at, _)) in paced.iter().enumerate() {
            assert_eq!(*at, ms(t0, 10 * i as u64 + 38));
        }
        // A burst of 20 at once: they leave 8 ms apart until the queue of five is full.
        let mut link = Link::new(config, 1);
        let sent: Vec<_> = (0..20u64).map(|i| link.send(t0, 1000, i)).collect();
        let kept: Vec<Instant> = sent.iter().flatten().copied().collect();
        assert_eq!(kept.len(), 5, "{sent:?}");
        for (i, at) in kept.iter().enumerate() {
            assert_eq!(*at, ms(t0, 8 * i as u64 + 38));
        }
        assert_eq!(link.counters().queue_dropped, 15);
        // Once the queue drains there is room again.
        assert_eq!(link.send(ms(t0, 40), 1000, 99), Some(ms(t0, 78)));
        // A queue limited in time: 20 ms at the rate is two and a half packets.
        let config = LinkConfig {
            bottleneck: Some(Bottleneck {
                queue: QueueLimit::Delay(Duration::from_millis(20)),
                ..bottleneck
            }),
            ..config
        };
        let mut link = Link::new(config, 1);
        let kept = (0..10u64).filter_map(|i| link.send(t0, 1000, i)).count();
        assert_eq!(kept, 3, "backlogs of 0, 8 and 16 ms taken, 24 ms is full");
    }

    #[test]
    fn a_token_bucket_lets_its_burst_through_at_once_then_the_rate() {
        // 1000-byte packets at 1 Mbit/s with 3000 bytes of credit: an idle link passes three
        // at once, then one per 8 ms; idle again, it saves its credit back.
        let config = LinkConfig {
            bottleneck: Some(Bottleneck {
                burst: 3_000,
                ..Bottleneck::new(1_000_000, QueueLimit::Bytes(5_000))
            }),
            ..LinkConfig::default()
        };
        let t0 = Instant::now();
        let mut link = Link::new(config, 1);
        let sent: Vec<_> = (0..10u64).map(|i| link.send(t0, 1000, i)).collect();
        let kept: Vec<Instant> = sent.iter().flatten().copied().collect();
        // Three through the credit, five more queued (the queue counts beyond the credit).
        let expected: Vec<_> = [0, 0, 0, 8, 16, 24, 32, 40]
            .iter()
            .map(|&at| ms(t0, at))
            .collect();
        assert_eq!(kept, expected);
        assert_eq!(link.counters().queue_dropped, 2);
        let later = ms(t0, 200);
        assert_eq!(link.send(later, 1000, 20), Some(later));
    }
}
