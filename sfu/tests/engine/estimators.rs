//! The estimators against a simulated bottleneck: a paced sender whose rate follows the
//! estimate (capped at the media rate), a link of a given capacity with a drop-tail queue and
//! a one-way delay, optional random loss, and transport-wide CC feedback every 100 ms.
//! Everything is computed, not timed: the runs are deterministic.

use std::time::{Duration, Instant};

use sfu::engine::bwe::{
    BandwidthEstimator, EstimatorConfig, FeedbackEstimator, PacketResult, RembEstimator,
};

const PACKET_SIZE: usize = 1200;
const TICK: Duration = Duration::from_millis(1);
const FEEDBACK_INTERVAL: Duration = Duration::from_millis(100);
/// The viewer's clock starts elsewhere: only differences between arrivals may matter.
const VIEWER_CLOCK_OFFSET: Duration = Duration::from_secs(12_345);

/// A seeded xorshift64: the losses are random but the same every run.
struct XorShift(u64);

impl XorShift {
    fn chance(&mut self, probability: f64) -> bool {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) < probability
    }
}

/// The bottleneck: a FIFO link with a drop-tail queue.
struct Link {
    capacity_bps: f64,
    /// Packets that would wait longer than this in the queue are dropped.
    queue_limit: Duration,
    one_way: Duration,
    /// Random loss past the queue, as a radio link's.
    random_loss: f64,
    /// When the link finishes sending what it holds.
    busy_until: Instant,
    rng: XorShift,
}

impl Link {
    fn new(start: Instant, capacity_bps: f64) -> Self {
        Self {
            capacity_bps,
            queue_limit: Duration::from_millis(300),
            one_way: Duration::from_millis(25),
            random_loss: 0.0,
            busy_until: start,
            rng: XorShift(0x5eed_1234_abcd_0001),
        }
    }

    /// When a packet sent at `sent` arrives, or `None` when it is dropped.
    fn carry(&mut self, sent: Instant, size: usize) -> Option<Instant> {
        let start = sent.max(self.busy_until);
        if start - sent > self.queue_limit {
            return None;
        }
        self.busy_until = start + Duration::from_secs_f64(size as f64 * 8.0 / self.capacity_bps);
        if self.rng.chance(self.random_loss) {
            return None;
        }
        Some(self.busy_until + self.one_way)
    }
}

/// A sent packet not yet reported, with its arrival on the simulation's clock.
struct InFlight {
    result: PacketResult,
    arrival: Option<Instant>,
}

/// Sender, link, viewer and estimator, stepped a millisecond at a time.
struct Simulation<E> {
    start: Instant,
    now: Instant,
    link: Link,
    estimator: E,
    /// The most the publishers send; the sender never exceeds it outside probes.
    media_bps: f64,
    /// Bytes the pacer may send now.
    budget: f64,
    sequence: i64,
    in_flight: Vec<InFlight>,
    /// Probe packets still to send: (when, cluster).
    probes: Vec<(Instant, u32)>,
    next_feedback: Instant,
}

impl<E: BandwidthEstimator> Simulation<E> {
    fn new(estimator: E, capacity_bps: f64, media_bps: f64) -> Self {
        let start = Instant::now();
        Self {
            start,
            now: start,
            link: Link::new(start, capacity_bps),
            estimator,
            media_bps,
            budget: 0.0,
            sequence: 0,
            in_flight: Vec::new(),
            probes: Vec::new(),
            next_feedback: start + FEEDBACK_INTERVAL,
        }
    }

    /// Runs for `duration`, calling `sample` with the estimate after every feedback.
    fn run(&mut self, duration: Duration, mut sample: impl FnMut(Duration, u64)) {
        let end = self.now + duration;
        while self.now < end {
            self.now += TICK;
            self.send_probes();
            self.send_media();
            if self.now >= self.next_feedback {
                self.next_feedback += FEEDBACK_INTERVAL;
                self.feedback();
                sample(self.now - self.start, self.estimator.estimate_bps());
            }
        }
    }

    /// Schedules a probe cluster: `packets` packets paced at `rate_bps` from now.
    fn probe(&mut self, cluster: u32, rate_bps: f64, packets: u32) {
        let spacing = Duration::from_secs_f64(PACKET_SIZE as f64 * 8.0 / rate_bps);
        self.probes
            .extend((0..packets).map(|index| (self.now + spacing * index, cluster)));
    }

    fn send_probes(&mut self) {
        let now = self.now;
        let due: Vec<(Instant, u32)> = self
            .probes
            .iter()
            .copied()
            .filter(|&(at, _)| at <= now)
            .collect();
        self.probes.retain(|&(at, _)| at > now);
        for (at, cluster) in due {
            self.send(at, Some(cluster));
        }
    }

    /// Media at the estimate, capped at the media rate; a probe cluster being sent carries
    /// the media instead, as a pacer's probe does.
    fn send_media(&mut self) {
        if !self.probes.is_empty() {
            self.budget = 0.0;
            return;
        }
        let rate = (self.estimator.estimate_bps() as f64).min(self.media_bps);
        // At most two packets of credit: a paced sender, not a bursty one.
        self.budget = (self.budget + rate * TICK.as_secs_f64() / 8.0).min(2.0 * PACKET_SIZE as f64);
        while self.budget >= PACKET_SIZE as f64 {
            self.budget -= PACKET_SIZE as f64;
            self.send(self.now, None);
        }
    }

    fn send(&mut self, at: Instant, probe_cluster: Option<u32>) {
        let arrival = self.link.carry(at, PACKET_SIZE);
        self.in_flight.push(InFlight {
            result: PacketResult {
                sequence: self.sequence,
                send_time: at,
                size: PACKET_SIZE,
                probe_cluster,
                arrival: None,
            },
            arrival,
        });
        self.sequence += 1;
    }

    /// The feedback the viewer sent a one-way delay ago: every packet up to the last one
    /// received by then, the ones not received among them reported lost.
    fn feedback(&mut self) {
        let viewer_now = self.now - self.link.one_way;
        let Some(last) = self
            .in_flight
            .iter()
            .rposition(|packet| packet.arrival.is_some_and(|at| at <= viewer_now))
        else {
            return;
        };
        let start = self.start;
        let batch: Vec<PacketResult> = self
            .in_flight
            .drain(..=last)
            .map(|packet| PacketResult {
                arrival: packet.arrival.map(|at| at - start + VIEWER_CLOCK_OFFSET),
                ..packet.result
            })
            .collect();
        self.estimator
            .on_round_trip_time(self.now, 2 * self.link.one_way);
        self.estimator.on_feedback(self.now, &batch);
    }
}

fn config(initial_bps: u64) -> EstimatorConfig {
    EstimatorConfig {
        initial_bps,
        ..EstimatorConfig::default()
    }
}

#[test]
fn settles_under_a_one_megabit_bottleneck() {
    const CAPACITY: f64 = 1_000_000.0;
    // Starting at twice the capacity, with publishers sending 2.5 times it.
    let mut sim = Simulation::new(
        FeedbackEstimator::new(config(2_000_000)),
        CAPACITY,
        2_500_000.0,
    );
    sim.run(Duration::from_secs(5), |_, _| {});
    let mut samples = Vec::new();
    sim.run(Duration::from_secs(20), |at, bps| {
        samples.push((at, bps as f64))
    });
    let outside: Vec<_> = samples
        .iter()
        .filter(|&&(_, bps)| !(0.7 * CAPACITY..=1.05 * CAPACITY).contains(&bps))
        .collect();
    assert!(
        outside.is_empty(),
        "outside 0.7..1.05 C after 5 s: {outside:?}"
    );
    let below = samples.iter().filter(|&&(_, bps)| bps < CAPACITY).count();
    assert!(
        below * 10 >= samples.len() * 7,
        "below C {below} of {}",
        samples.len()
    );
}

#[test]
fn follows_a_capacity_drop_within_two_seconds() {
    let mut sim = Simulation::new(
        FeedbackEstimator::new(config(2_500_000)),
        2_500_000.0,
        5_000_000.0,
    );
    let mut before = 0;
    sim.run(Duration::from_secs(10), |_, bps| before = bps);
    assert!(before > 2_000_000, "settled at {before} on 2.5 Mbit/s");
    sim.link.capacity_bps = 600_000.0;
    let dropped = sim.now - sim.start;
    let mut reached = None;
    sim.run(Duration::from_secs(4), |at, bps| {
        if bps < 650_000 && reached.is_none() {
            reached = Some(at - dropped);
        }
    });
    let reached = reached.expect("the estimate went under 0.65 Mbit/s");
    assert!(reached <= Duration::from_secs(2), "took {reached:?}");
    let mut late = Vec::new();
    sim.run(Duration::from_secs(10), |_, bps| late.push(bps));
    assert!(late.iter().all(|&bps| bps < 700_000), "{late:?}");
    assert!(
        late.iter().filter(|&&bps| bps >= 400_000).count() * 10 >= late.len() * 8,
        "{late:?}"
    );
}

#[test]
fn a_probe_cluster_lets_the_estimate_jump_past_the_media_rate() {
    // Publishers send 1 Mbit/s over a 3 Mbit/s path: the estimate can rise only to about 1.5
    // times what arrives, unless a probe shows more.
    let mut sim = Simulation::new(
        FeedbackEstimator::new(config(1_000_000)),
        3_000_000.0,
        1_000_000.0,
    );
    let mut earlier = 0;
    sim.run(Duration::from_secs(5), |_, bps| earlier = bps);
    assert!((1_000_000..=1_600_000).contains(&earlier), "{earlier}");
    assert_eq!(sim.estimator.probe_result_bps(), None);
    sim.probe(1, 2.0 * earlier as f64, 15);
    let mut after = 0;
    sim.run(Duration::from_secs(1), |_, bps| after = bps);
    let probed = sim.estimator.probe_result_bps().expect("a probe result");
    assert!(
        probed as f64 > 1.5 * earlier as f64,
        "probe showed {probed}, earlier {earlier}"
    );
    assert!(
        after as f64 > 1.5 * earlier as f64,
        "after {after}, earlier {earlier}"
    );
}

#[test]
fn a_probe_into_a_narrower_path_jumps_only_to_what_it_carries() {
    const CAPACITY: f64 = 1_200_000.0;
    let mut sim = Simulation::new(FeedbackEstimator::new(config(500_000)), CAPACITY, 500_000.0);
    let mut earlier = 0;
    sim.run(Duration::from_secs(5), |_, bps| earlier = bps);
    assert!(earlier as f64 <= 0.8 * CAPACITY, "{earlier}");
    // Twice the estimate is more than the path carries: the probe saturates it.
    sim.probe(1, 2.0 * earlier as f64, 15);
    let mut highest = 0;
    sim.run(Duration::from_secs(2), |_, bps| highest = highest.max(bps));
    let probed = sim.estimator.probe_result_bps().expect("a probe result") as f64;
    assert!(
        (0.85 * CAPACITY..=CAPACITY).contains(&probed),
        "probe showed {probed}"
    );
    assert!(highest as f64 <= CAPACITY, "rose to {highest}");
    assert!(highest as f64 >= 0.85 * CAPACITY, "rose only to {highest}");
}

/// The estimate after 10 s of `loss` random loss on a path far wider than the media rate.
fn under_random_loss(loss: f64) -> (u64, u64) {
    let mut sim = Simulation::new(
        FeedbackEstimator::new(config(1_000_000)),
        10_000_000.0,
        1_000_000.0,
    );
    sim.link.random_loss = loss;
    let mut lowest = u64::MAX;
    let mut last = 0;
    sim.run(Duration::from_secs(10), |_, bps| {
        lowest = lowest.min(bps);
        last = bps;
    });
    (lowest, last)
}

#[test]
fn five_percent_random_loss_holds_the_estimate() {
    let (lowest, last) = under_random_loss(0.05);
    assert!(lowest >= 900_000, "fell to {lowest}");
    assert!(last >= 950_000, "ended at {last}");
}

#[test]
fn twenty_percent_random_loss_drops_the_estimate() {
    let (_, last) = under_random_loss(0.2);
    assert!(last < 500_000, "ended at {last}");
}

#[test]
fn feedback_reporting_everything_lost_or_nothing_does_not_panic() {
    let now = Instant::now();
    let mut estimator = FeedbackEstimator::new(EstimatorConfig {
        min_bps: 50_000,
        max_bps: 10_000,
        initial_bps: u64::MAX,
    });
    let lost: Vec<PacketResult> = (0..100)
        .map(|sequence| PacketResult {
            sequence,
            send_time: now,
            size: usize::MAX,
            probe_cluster: Some(u32::MAX),
            arrival: None,
        })
        .collect();
    let strange: Vec<PacketResult> = (0..100)
        .map(|sequence| PacketResult {
            arrival: Some(Duration::MAX - Duration::from_secs(sequence as u64 % 3)),
            ..lost[sequence as usize]
        })
        .collect();
    for second in 0..5 {
        let at = now + Duration::from_secs(second);
        estimator.on_feedback(at, &[]);
        estimator.on_feedback(at, &lost);
        estimator.on_feedback(at, &strange);
        estimator.on_round_trip_time(at, Duration::MAX);
        estimator.on_remb(at, 0);
    }
    assert_eq!(estimator.estimate_bps(), 50_000);
}

#[test]
fn remb_mode_takes_the_viewer_at_its_word() {
    let now = Instant::now();
    let mut estimator = RembEstimator::new(config(800_000));
    assert_eq!(estimator.estimate_bps(), 800_000);
    estimator.on_remb(now, 1_234_567);
    assert_eq!(estimator.estimate_bps(), 1_234_567);
    // Feedback and round trips change nothing: the viewer estimates for itself.
    let mut sim = Simulation::new(estimator, 300_000.0, 2_000_000.0);
    sim.run(Duration::from_secs(2), |_, bps| assert_eq!(bps, 1_234_567));
    sim.estimator.on_remb(now, 10);
    assert_eq!(sim.estimator.estimate_bps(), 30_000);
    sim.estimator.on_remb(now, u64::MAX);
    assert_eq!(sim.estimator.estimate_bps(), 20_000_000);
    assert_eq!(sim.estimator.probe_result_bps(), None);
}

#[test]
fn a_remb_caps_the_feedback_estimate() {
    let mut sim = Simulation::new(
        FeedbackEstimator::new(config(1_000_000)),
        10_000_000.0,
        5_000_000.0,
    );
    sim.run(Duration::from_secs(2), |_, _| {});
    sim.estimator.on_remb(sim.now, 400_000);
    sim.run(Duration::from_secs(2), |_, bps| {
        assert!(bps <= 400_000, "{bps}")
    });
}
