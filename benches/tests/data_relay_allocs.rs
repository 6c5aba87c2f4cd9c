//! Allocations of one data channel message relayed to N receivers (`benches::data_relay`),
//! counted exactly, phase by phase: the sender's DATA taken in and written toward every
//! receiver, then each receiver's SACK taken in. The relay itself adds none per receiver:
//! every per-receiver allocation left is the SCTP stack's, writing the message into chunks
//! and packets, and parsing the SACK.

use benches::alloc_counter::{AllocCount, CountingAllocator};
use benches::data_relay::RelayRoom;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// What a message costs however many receive it, and what each receiver adds.
#[derive(Debug, Clone, Copy)]
struct Costs {
    size: usize,
    /// The sender's packets into the stack (each copied into the association's buffer, a new
    /// one while the stack holds a fragment), parsed, the message gathered into one buffer,
    /// and the node's SACK to the sender.
    message: u64,
    /// The stack writing it toward one receiver: the list of its chunks, the list of chunks
    /// popped to send and of packets built (each growing by doubling), and per packet the
    /// chunk's box, the packet's chunk list and its buffer (made small and grown once).
    write: u64,
}

/// The first receiver makes the message's buffer shared: the one reference count every
/// receiver's chunks then point into.
const SHARED: u64 = 1;
/// The stack taking one receiver's SACK: its chunk list, the chunk's box and the SACK's
/// own fields. The packet's copy reuses the association's buffer.
const SACK: u64 = 3;

const SMALL: Costs = Costs {
    size: 100,
    message: 11,
    write: 10,
};
/// 16 KiB: 16 fragments of 1 KiB in, 19 chunks of 900 bytes (one packet each) out.
const LARGE: Costs = Costs {
    size: 16 * 1024,
    message: 122,
    write: 130,
};

/// Allocations of relaying one message to `receivers`, after a warm-up: (sending it, the
/// SACKs), the least of a few messages. The stack's table of chunks in flight is a std
/// `HashMap` with a random seed: under the churn of a chunk in per send and out per SACK it
/// now and then grows (one allocation), a few messages in a thousand (`alloc_counts.rs`
/// bounds how often); the least of five is the steady cost, and a new allocation on every
/// message still shows in it.
fn counted(costs: Costs, receivers: usize) -> (u64, u64) {
    let mut room = RelayRoom::new(receivers);
    let message = vec![7; costs.size];
    for _ in 0..200 {
        room.relay(&message);
    }
    let (mut send, mut sacks) = once(&mut room, &message);
    for _ in 0..4 {
        let (s, a) = once(&mut room, &message);
        (send, sacks) = (send.min(s), sacks.min(a));
    }
    (send, sacks)
}

/// Allocations of relaying `message` once: (sending it, the SACKs).
fn once(room: &mut RelayRoom, message: &[u8]) -> (u64, u64) {
    let mut sacks = 0;
    let send = AllocCount::during(|| room.send(message)).allocs;
    loop {
        let mut sent = None;
        let take = AllocCount::during(|| sent = room.take()).allocs;
        assert_eq!(take, 0, "taking the packets allocates nothing");
        if sent.is_none() {
            return (send, sacks);
        }
        sacks += AllocCount::during(|| room.acknowledge()).allocs;
    }
}

#[test]
fn a_message_costs_each_receiver_only_the_stacks_chunks_and_sack() {
    for costs in [SMALL, LARGE] {
        for receivers in [0, 1, 10, 50] {
            let n = receivers as u64;
            let shared = if n > 0 { SHARED } else { 0 };
            let expected = (costs.message + shared + n * costs.write, n * SACK);
            assert_eq!(
                counted(costs, receivers),
                expected,
                "{} bytes to {receivers}",
                costs.size
            );
        }
    }
}

#[test]
fn every_message_costs_the_same() {
    let mut room = RelayRoom::new(10);
    let message = vec![7; 100];
    for _ in 0..200 {
        room.relay(&message);
    }
    let counts: Vec<u64> = (0..500)
        .map(|_| AllocCount::during(|| assert_eq!(room.relay(&message), 10)).allocs)
        .collect();
    let each = SMALL.message + SHARED + 10 * (SMALL.write + SACK);
    // The stack's table growing now and then (see `counted`): one allocation per association
    // at most, in one message of a hundred at most.
    let grown: Vec<u64> = counts.iter().copied().filter(|&n| n != each).collect();
    assert!(
        grown.iter().all(|&n| n > each && n <= each + 11),
        "{counts:?}"
    );
    assert!(grown.len() * 100 <= counts.len(), "{counts:?}");
}
