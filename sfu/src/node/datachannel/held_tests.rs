//! The walk over the peer's TSNs, on packets written here (the stack is not involved: the
//! association's tests drive it with a client's stack).

use super::*;

/// The peer's first TSN in these tests.
const FIRST: u32 = 1_000;
/// A first fragment, a middle one, a last one, a whole message.
const B: u8 = BEGINNING;
const M: u8 = 0;
const E: u8 = ENDING;
const WHOLE: u8 = BEGINNING | ENDING;

fn packet(chunks: &[Vec<u8>]) -> Vec<u8> {
    let mut packet = vec![0; 12];
    for chunk in chunks {
        packet.extend_from_slice(chunk);
        packet.resize(packet.len().next_multiple_of(4), 0);
    }
    packet
}

fn chunk(kind: u8, flags: u8, value: &[u8]) -> Vec<u8> {
    let length = u16::try_from(4 + value.len()).expect("short");
    let mut chunk = vec![kind, flags];
    chunk.extend_from_slice(&length.to_be_bytes());
    chunk.extend_from_slice(value);
    chunk
}

/// An INIT with the first TSN [`FIRST`], listing FORWARD TSN if `forward_tsn`.
fn init(forward_tsn: bool) -> Vec<u8> {
    let mut value = vec![0; 12];
    value.extend_from_slice(&FIRST.to_be_bytes());
    let listed = if forward_tsn { FORWARD_TSN } else { 130 };
    value.extend_from_slice(&[0x80, 0x08, 0, 6, listed, 0, 0, 0]);
    packet(&[chunk(INIT, 0, &value)])
}

/// A DATA chunk of one byte.
fn data(tsn: u32, flags: u8, stream: u16, ssn: u16) -> Vec<u8> {
    let mut value = tsn.to_be_bytes().to_vec();
    value.extend_from_slice(&stream.to_be_bytes());
    value.extend_from_slice(&ssn.to_be_bytes());
    value.extend_from_slice(&[0, 0, 0, 53, 7]);
    chunk(DATA, flags, &value)
}

fn sack(acked: u32) -> Vec<u8> {
    sack_left(acked, 0)
}

/// A SACK with `window` left of the stack's receive window.
fn sack_left(acked: u32, window: u32) -> Vec<u8> {
    let mut value = acked.to_be_bytes().to_vec();
    value.extend_from_slice(&window.to_be_bytes());
    value.extend_from_slice(&[0; 4]);
    packet(&[chunk(SACK, 0, &value)])
}

fn forward(new: u32, named: &[(u16, u16)]) -> Vec<u8> {
    let mut value = new.to_be_bytes().to_vec();
    for (stream, ssn) in named {
        value.extend_from_slice(&stream.to_be_bytes());
        value.extend_from_slice(&ssn.to_be_bytes());
    }
    packet(&[chunk(FORWARD_TSN, 0, &value)])
}

/// A server's walk past the peer's INIT.
fn started(forward_tsn: bool) -> Held {
    let mut held = Held::new(256 * 1024, false);
    held.taken(&init(forward_tsn));
    held
}

/// Gives the walk `chunks` in one packet, after its check.
fn give(held: &mut Held, chunks: &[Vec<u8>]) -> Result<(), SctpRefusal> {
    let packet = packet(chunks);
    held.check(&packet)?;
    held.taken(&packet);
    Ok(())
}

#[test]
fn data_is_taken_up_to_the_window_past_what_the_stack_acknowledged() {
    let mut held = Held::new(256 * 1024, false);
    // Before the peer's INIT nothing is known: the stack has no association to take DATA.
    assert_eq!(give(&mut held, &[data(9, WHOLE, 0, 0)]), Ok(()));
    held.taken(&init(false));
    let last = FIRST - 1 + WINDOW;
    assert_eq!(give(&mut held, &[data(last, WHOLE, 0, 0)]), Ok(()));
    let past = data(last + 1, WHOLE, 0, 0);
    assert_eq!(
        give(&mut held, &[data(FIRST, WHOLE, 0, 0), past.clone()]),
        Err(SctpRefusal::Window)
    );
    // The walk does not move the window: the stack's SACK does.
    assert_eq!(
        give(&mut held, &[data(FIRST, WHOLE, 0, 0)]),
        Ok(()),
        "a packet within it"
    );
    assert_eq!(
        give(&mut held, std::slice::from_ref(&past)),
        Err(SctpRefusal::Window)
    );
    held.sent(&sack(FIRST));
    assert_eq!(give(&mut held, &[past]), Ok(()));
    // Old and duplicate TSNs are the stack's to drop.
    assert_eq!(give(&mut held, &[data(FIRST - 5, WHOLE, 0, 0)]), Ok(()));
}

#[test]
fn data_bundled_after_the_init_is_noted_only_within_the_window() {
    let mut held = Held::new(256 * 1024, false);
    let mut packet = init(false);
    for chunk in [data(FIRST + (1 << 30), B, 0, 0), data(FIRST, B, 0, 0)] {
        packet.extend_from_slice(&chunk);
        packet.resize(packet.len().next_multiple_of(4), 0);
    }
    assert_eq!(held.check(&packet), Ok(()));
    held.taken(&packet);
    assert_eq!((held.walked, held.ahead.len(), held.unread), (FIRST, 0, 1));
}

#[test]
fn a_relay_link_s_window_is_wider() {
    let mut held = Held::new(256 * 1024, true).for_link();
    let mut init_ack = init(false);
    init_ack[12] = INIT_ACK;
    held.taken(&init_ack);
    let last = FIRST - 1 + LINK_WINDOW;
    assert_eq!(give(&mut held, &[data(last, WHOLE, 0, 0)]), Ok(()));
    let past = data(last + 1, WHOLE, 0, 0);
    assert_eq!(give(&mut held, &[past]), Err(SctpRefusal::Window));
}

#[test]
fn a_message_never_finished_ends_the_association_past_the_bound() {
    let mut held = started(false);
    let bound = 256 * 1024 / MIN_FRAGMENT as i64 + i64::from(WINDOW);
    let tsn = std::cell::Cell::new(FIRST);
    let next = |flags| {
        tsn.set(tsn.get() + 1);
        data(tsn.get() - 1, flags, 0, 0)
    };
    assert_eq!(give(&mut held, &[next(B)]), Ok(()));
    let mut given = 1;
    while given < 2 * bound && give(&mut held, &[next(M), next(M)]).is_ok() {
        given += 2;
        held.sent(&sack(tsn.get() - 1));
    }
    // Refused at the first packet after the walk went past the bound.
    assert_eq!(given, bound + 1);
    assert_eq!(held.unread, bound + 1);
    assert_eq!(
        held.check(&packet(&[next(E)])),
        Err(SctpRefusal::Unfinished)
    );
}

#[test]
fn messages_read_whole_are_not_counted_even_read_before_the_walk() {
    let mut held = started(false);
    // Ten messages of three fragments, the second of each late: the stack reads a message
    // when it is whole, before the walk reaches it only when it is unordered (or its turn).
    for message in 0..10_000u32 {
        let tsn = FIRST + 3 * message;
        let ssn = message as u16;
        give(&mut held, &[data(tsn, B, 1, ssn), data(tsn + 2, E, 1, ssn)]).unwrap();
        assert_eq!(held.unread, 1, "the walk stops at the gap");
        give(&mut held, &[data(tsn + 1, M, 1, ssn)]).unwrap();
        held.read(3);
        held.sent(&sack(tsn + 2));
        assert_eq!(held.unread, 0);
    }
    // Read before the walk: an unordered whole message past a gap.
    give(&mut held, &[data(FIRST + 30_001, WHOLE | UNORDERED, 1, 0)]).unwrap();
    held.read(1);
    assert_eq!(held.unread, -1);
    give(&mut held, &[data(FIRST + 30_000, WHOLE, 1, 0)]).unwrap();
    held.read(1);
    assert_eq!(held.unread, 0);
}

#[test]
fn a_forward_tsn_uncounts_what_the_stack_drops_with_it() {
    let mut held = started(true);
    // An ordered message on stream 2 (sequence number 4) open at the walk, its third
    // fragment lost; past it, an unordered message missing its last fragment and a whole
    // one (read), and an ordered fragment of stream 3 the FORWARD TSN does not name.
    give(&mut held, &[data(FIRST, B, 2, 4), data(FIRST + 1, M, 2, 4)]).unwrap();
    let past = [
        data(FIRST + 3, B | UNORDERED, 2, 0),
        data(FIRST + 4, M | UNORDERED, 2, 0),
        data(FIRST + 6, WHOLE | UNORDERED, 2, 0),
        data(FIRST + 7, M, 3, 9),
        data(FIRST + 9, WHOLE, 2, 5),
    ];
    give(&mut held, &past).unwrap();
    held.read(1);
    assert_eq!(held.unread, 1);
    held.taken(&forward(FIRST + 7, &[(2, 4)]));
    // Stream 2's message and the unfinished unordered one dropped by the stack; the whole one
    // read; stream 3's fragment still held.
    assert_eq!(held.unread, 1);
    assert_eq!(held.walked, FIRST + 7);
    assert_eq!(held.acked, FIRST + 7);
    // Not named, an ordered message open at the walk stays counted; the whole message past
    // the new cumulative TSN is walked as it comes after it.
    give(&mut held, &[data(FIRST + 8, B, 5, 0)]).unwrap();
    assert_eq!((held.unread, held.walked), (3, FIRST + 9));
    held.read(1);
    held.taken(&forward(FIRST + 9, &[(2, 5)]));
    assert_eq!(held.unread, 2);
    // Named with a later sequence number, it is dropped too; an old FORWARD TSN is nothing.
    give(&mut held, &[data(FIRST + 10, B, 5, 1)]).unwrap();
    held.taken(&forward(FIRST + 11, &[(5, 3)]));
    assert_eq!(held.unread, 2);
    held.taken(&forward(FIRST + 2, &[(3, 9)]));
    assert_eq!(held.unread, 2);
}

#[test]
fn a_forward_tsn_is_not_followed_where_the_peer_did_not_list_it() {
    let mut held = started(false);
    give(&mut held, &[data(FIRST, B | UNORDERED, 0, 0)]).unwrap();
    held.taken(&forward(FIRST + 100, &[]));
    assert_eq!((held.unread, held.walked), (1, FIRST));
}

#[test]
fn a_sack_of_a_whole_window_at_the_walk_leaves_nothing_unread() {
    const WHOLE_WINDOW: u32 = 1 << 20;
    let mut held = started(true);
    // The node's INIT ACK: its initiate tag, then its window.
    let mut value = vec![0; 4];
    value.extend_from_slice(&WHOLE_WINDOW.to_be_bytes());
    value.extend_from_slice(&[0; 8]);
    held.sent(&packet(&[chunk(INIT_ACK, 0, &value)]));
    // A whole message walked and never read (the stack dropped it after it came whole), and
    // a chunk past a gap.
    give(
        &mut held,
        &[data(FIRST, WHOLE, 0, 0), data(FIRST + 2, B, 0, 1)],
    )
    .unwrap();
    held.sent(&sack_left(FIRST, WHOLE_WINDOW - 1));
    assert_eq!(held.unread, 1, "the stack holds a byte");
    held.sent(&sack_left(FIRST, WHOLE_WINDOW));
    assert_eq!(held.unread, 1, "a chunk is past the walk");
    held.taken(&forward(FIRST + 2, &[(0, 1)]));
    held.sent(&sack_left(FIRST + 2, WHOLE_WINDOW - 1));
    assert_eq!(held.unread, 1);
    held.sent(&sack_left(FIRST + 2, WHOLE_WINDOW));
    assert_eq!((held.unread, held.open.is_none()), (0, true));
}

#[test]
fn a_sack_past_the_walk_moves_it() {
    let mut held = started(false);
    give(&mut held, &[data(FIRST + 1, WHOLE, 0, 0)]).unwrap();
    held.sent(&sack(FIRST + 1));
    assert_eq!((held.walked, held.ahead.len()), (FIRST + 1, 0));
    give(&mut held, &[data(FIRST + 2, WHOLE, 0, 0)]).unwrap();
    assert_eq!(held.unread, 1);
}

proptest::proptest! {
    #[test]
    fn any_bytes_are_followed_without_a_panic(
        packets in proptest::collection::vec(proptest::collection::vec(0u8.., 0..96), 0..8),
    ) {
        let mut held = started(true);
        for packet in &packets {
            if held.check(packet).is_ok() {
                held.taken(packet);
            }
            held.sent(packet);
            proptest::prop_assert!(held.ahead.len() <= WINDOW as usize);
        }
    }
}
