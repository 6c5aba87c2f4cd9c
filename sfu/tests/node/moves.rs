//! Where a connected session's packets go when it is nominated elsewhere: only to an address
//! its client answers the node's check at, since a binding request's source can be forged by
//! whoever holds the session's credentials. Driven in the core, without sockets or clocks.

use selector::Layer;
use sfu::node::metrics::DropReason;
use sfu::node::peer::PeerId;
use sfu::node::remote::Remote;
use sfu::node::sdp::FragmentIce;
use sfu::node::testing::{
    answer_check, av1_track, av1_viewer, binding_request, browser_ice, credentials, join,
    publisher, Harness,
};
use stun::agent::TransactionId;
use stun::attributes::{ATTR_ICE_CONTROLLED, ATTR_PRIORITY, ATTR_USERNAME};
use stun::integrity::MessageIntegrity;
use stun::message::{Message, Setter, BINDING_REQUEST, BINDING_SUCCESS};
use stun::textattrs::TextAttribute;

use crate::fixtures::{addr, harness, l3t3, DD_IN};

/// The binding requests the core sent to `to` (its checks), oldest first.
fn checks(h: &Harness, to: impl Into<Remote>) -> Vec<Message> {
    let sent = h.sent.get(&to.into()).cloned().unwrap_or_default();
    sent.into_iter()
        .filter_map(|raw| {
            let mut m = Message::new();
            m.raw = raw;
            m.decode().ok()?;
            (m.typ == BINDING_REQUEST).then_some(m)
        })
        .collect()
}

/// Whether the core sent media (RTP or RTCP) to `to`.
fn media_to(h: &Harness, to: impl Into<Remote>) -> usize {
    let sent = h.sent.get(&to.into()).cloned().unwrap_or_default();
    sent.iter()
        .filter(|d| d.first().is_some_and(|b| b >> 6 == 2))
        .count()
}

/// A room of one publisher at 9400 and one viewer (session 2) at 9401; the publisher's
/// stream so far sent.
fn room() -> (Harness, [PeerId; 2]) {
    let mut h = harness();
    let publisher = h.publisher("room", publisher([av1_track(0xA1, DD_IN)]), addr(9400));
    let viewer = h.viewer("room", av1_viewer(0x10, None, Layer::MAX), addr(9401));
    (h, [publisher, viewer])
}

#[test]
fn a_connected_session_moves_only_once_its_client_answers_there() {
    let (mut h, [_, viewer]) = room();
    let ice = credentials(2);
    h.send(addr(9402), &binding_request(&ice, true));
    let peer = |h: &Harness| h.core.peer(viewer).and_then(|p| p.addr);
    assert_eq!(peer(&h), Some(addr(9401).into()), "not before the answer");
    let check = checks(&h, addr(9402))
        .pop()
        .expect("a check of the new address");
    // As a full agent checks (RFC 8445 section 7.2.2), signed with the browser's password.
    let username = TextAttribute::get_from_as(&check, ATTR_USERNAME).expect("USERNAME");
    assert_eq!(username.text, "browser:ufrag2");
    assert!(check.contains(ATTR_ICE_CONTROLLED) && check.contains(ATTR_PRIORITY));
    let mut signed = check.clone();
    MessageIntegrity::new_short_term_integrity(browser_ice(&ice).pwd)
        .check(&mut signed)
        .expect("signed with the browser's password");
    for (n, packet) in l3t3(0xA1, 3).iter().enumerate() {
        h.now += std::time::Duration::from_millis(33 * n as u64);
        h.send(addr(9400), packet);
    }
    assert_eq!(
        media_to(&h, addr(9402)),
        0,
        "no media to an unchecked address"
    );
    assert!(media_to(&h, addr(9401)) > 0);
    // What comes from there meanwhile is the session's (here a viewer's RTP, which it may
    // not send), not a stranger's.
    h.send(addr(9402), &l3t3(0xB1, 1)[0]);
    let counters = h.core.counters();
    assert_eq!(counters.dropped(DropReason::UnknownSource), 0);
    assert_eq!(counters.dropped(DropReason::NotAPublisher), 1);

    let answer = answer_check(&check.raw, &ice);
    // From another address, signed with another password, or for another transaction.
    h.send(addr(9403), &answer);
    h.send(
        addr(9402),
        &response(check.transaction_id, "not-the-browser-password"),
    );
    h.send(
        addr(9402),
        &response(TransactionId::new(), &browser_ice(&ice).pwd),
    );
    assert_eq!(h.core.counters().dropped(DropReason::BadStun), 3);
    assert_eq!(peer(&h), Some(addr(9401).into()));

    h.send(addr(9402), &answer);
    assert_eq!(peer(&h), Some(addr(9402).into()), "answered there: moved");
    assert_eq!(h.core.counters().ice_checks_answered, 1);
    h.send(addr(9402), &answer);
    assert_eq!(
        h.core.counters().dropped(DropReason::BadStun),
        4,
        "answered once"
    );
}

/// A binding success response for `transaction`, signed with `password`.
fn response(transaction: TransactionId, password: &str) -> Vec<u8> {
    let setters: [Box<dyn Setter>; 3] = [
        Box::new(BINDING_SUCCESS),
        Box::new(transaction),
        Box::new(MessageIntegrity::new_short_term_integrity(password.into())),
    ];
    let mut m = Message::new();
    m.build(&setters).expect("a response");
    m.raw
}

/// A session nominating the address another connected session is at (a forged source, or a
/// client back on the same port) takes it only once the client there answers as its own:
/// before its keys as after.
#[test]
fn another_connected_session_s_address_is_taken_only_once_checked() {
    let (mut h, [_, viewer]) = room();
    let other = h.viewer("room", av1_viewer(0x11, None, Layer::MAX), addr(9405));
    let at = |h: &Harness, id| h.core.peer(id).and_then(|p| p.addr);
    h.send(addr(9401), &binding_request(&credentials(3), true));
    assert_eq!(at(&h, viewer), Some(addr(9401).into()));
    assert_eq!(at(&h, other), Some(addr(9405).into()));
    let ice = h.next_credentials();
    let waiting = h
        .core
        .add_viewer(
            h.now,
            join("room", ice.clone()),
            av1_viewer(0x12, None, Layer::MAX),
        )
        .expect("room");
    h.send(addr(9401), &binding_request(&ice, true));
    assert_eq!(
        at(&h, waiting),
        None,
        "not latched at a connected session's address"
    );
    assert_eq!(at(&h, viewer), Some(addr(9401).into()));
    assert_eq!(checks(&h, addr(9401)).len(), 2, "one check for each");
    // The session's own client answers there: the waiting one's.
    let check = checks(&h, addr(9401)).pop().expect("its check");
    h.send(addr(9401), &answer_check(&check.raw, &ice));
    assert_eq!(at(&h, waiting), Some(addr(9401).into()));
    assert_eq!(at(&h, viewer), None, "not reachable there any more");
}

/// A check waiting for its answer is forgotten with its session, or when another address is
/// nominated: the core's tables empty once every session is gone.
#[test]
fn a_waiting_check_leaves_with_its_session() {
    let (mut h, [publisher, viewer]) = room();
    let ice = credentials(2);
    h.send(addr(9406), &binding_request(&ice, true));
    let first = checks(&h, addr(9406)).pop().expect("a check");
    h.send(addr(9407), &binding_request(&ice, true));
    h.send(addr(9406), &answer_check(&first.raw, &ice));
    assert_eq!(
        h.core.peer(viewer).and_then(|p| p.addr),
        Some(addr(9401).into()),
        "the first check was given up for the second"
    );
    for id in [viewer, publisher] {
        h.core.remove_peer(id).expect("removed");
    }
    assert_eq!(h.core.table_entries(), 0);
}

/// An ICE restart (a WHIP or WHEP client's trickle fragment with new credentials): binding
/// requests must prove the node's new credentials once one has, and a move is checked with
/// the client's new ones; the session keeps its address and media meanwhile.
#[test]
fn after_an_ice_restart_checks_prove_the_new_credentials() {
    let (mut h, [_, viewer]) = room();
    let old = credentials(2);
    let fragment = FragmentIce {
        ufrag: Some("restarted"),
        pwd: Some("the-browser-s-new-password"),
    };
    let new = h
        .core
        .trickle(viewer, &fragment)
        .expect("a viewer's")
        .expect("restarted");
    assert_ne!(new, old);
    assert_eq!(
        h.core.trickle(viewer, &fragment),
        Ok(None),
        "its own credentials now"
    );
    let bad_stun = |h: &Harness| h.core.counters().dropped(DropReason::BadStun);
    // The client checks its old pair until its new one works: the old credentials are
    // answered until the new ones are used, and no one's after.
    h.send(addr(9401), &binding_request(&old, false));
    assert_eq!(bad_stun(&h), 0);
    h.send(addr(9401), &binding_request(&new, false));
    assert_eq!(bad_stun(&h), 0);
    h.send(addr(9401), &binding_request(&old, false));
    assert_eq!(bad_stun(&h), 1, "the old credentials are no one's now");
    h.send(addr(9408), &binding_request(&new, true));
    let check = checks(&h, addr(9408)).pop().expect("a check");
    let username = TextAttribute::get_from_as(&check, ATTR_USERNAME).expect("USERNAME");
    assert_eq!(username.text, format!("restarted:{}", new.local_ufrag));
    let mut signed = check.clone();
    MessageIntegrity::new_short_term_integrity("the-browser-s-new-password".into())
        .check(&mut signed)
        .expect("signed with the browser's new password");
    h.send(
        addr(9408),
        &response(check.transaction_id, "the-browser-s-new-password"),
    );
    assert_eq!(
        h.core.peer(viewer).and_then(|p| p.addr),
        Some(addr(9408).into())
    );
}

/// A check from another address that does not nominate it (a client about to move, as after
/// an ICE restart): what comes from there is the session's, nothing goes there and no check
/// is sent; and it does not displace a check of a nominated address that is out.
#[test]
fn an_address_checked_without_nomination_is_heard_not_sent_to() {
    let (mut h, [_, viewer]) = room();
    let ice = credentials(2);
    h.send(addr(9409), &binding_request(&ice, false));
    assert!(checks(&h, addr(9409)).is_empty());
    h.send(addr(9409), &l3t3(0xB1, 1)[0]);
    let counters = h.core.counters();
    assert_eq!(counters.dropped(DropReason::UnknownSource), 0);
    assert_eq!(
        counters.dropped(DropReason::NotAPublisher),
        1,
        "the session's"
    );
    h.send(addr(9410), &binding_request(&ice, true));
    h.send(addr(9411), &binding_request(&ice, false));
    let check = checks(&h, addr(9410)).pop().expect("a check");
    h.send(addr(9410), &answer_check(&check.raw, &ice));
    assert_eq!(
        h.core.peer(viewer).and_then(|p| p.addr),
        Some(addr(9410).into())
    );
    assert_eq!(h.core.counters().ice_checks_sent, 1);
}

/// A session that restarted ICE and ends before it used its new credentials leaves neither
/// set behind.
#[test]
fn a_restarted_session_leaves_no_credentials_behind() {
    let (mut h, [publisher, viewer]) = room();
    let fragment = FragmentIce {
        ufrag: Some("restarted"),
        pwd: Some("the-browser-s-new-password"),
    };
    let restarted = h.core.trickle(viewer, &fragment).expect("a viewer's");
    assert!(restarted.is_some());
    h.send(addr(9412), &binding_request(&credentials(2), false));
    for id in [viewer, publisher] {
        h.core.remove_peer(id).expect("removed");
    }
    assert_eq!(h.core.table_entries(), 0);
}
