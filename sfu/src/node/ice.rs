//! ICE-lite (RFC 8445 section 2.5): the node has one host candidate and never checks
//! connectivity itself; it answers the browser's STUN binding requests (RFC 5389) and takes
//! the address the browser nominates with USE-CANDIDATE.
//!
//! It sends one kind of request of its own: a check of an address a connected session is
//! nominated at, which moves only once the client answers there ([`check_request`],
//! [`CheckResponse`]): a request's source address can be forged by whoever holds the
//! session's credentials, and a response reaches only the address it was sent to.
//!
//! STUN is parsed with the `stun` crate. It allocates per message, which is fine: binding
//! requests arrive a few times per second per peer, never per media packet.

use std::net::SocketAddr;

use stun::agent::TransactionId;
use stun::attributes::{
    AttrType, ATTR_ICE_CONTROLLED, ATTR_PRIORITY, ATTR_USERNAME, ATTR_USE_CANDIDATE,
};
use stun::fingerprint::FINGERPRINT;
use stun::integrity::MessageIntegrity;
use stun::message::{Message, Setter, BINDING_REQUEST, BINDING_SUCCESS, MESSAGE_HEADER_SIZE};
use stun::textattrs::TextAttribute;
use stun::xoraddr::XorMappedAddress;

/// Why a STUN message was not answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IceError {
    /// The datagram is not a STUN message (RFC 5389 §6: the magic cookie and type bits).
    #[error("not a STUN message")]
    NotStun,
    /// A STUN message of another type: an ICE-lite agent answers binding requests only
    /// (RFC 8445 §2.5).
    #[error("STUN message is not a binding request")]
    NotBindingRequest,
    /// A STUN message other than a binding success response where one of the node's checks
    /// is answered.
    #[error("STUN message is not a binding success response")]
    NotBindingSuccess,
    /// The request's USERNAME is missing or is not `ours:theirs` (RFC 8445 §7.2.2).
    #[error("binding request without a USERNAME of the form local:remote")]
    BadUsername,
    /// The USERNAME's first part names no session of the node.
    #[error("binding request for an unknown ufrag")]
    UnknownUfrag,
    /// The MESSAGE-INTEGRITY is not the session's password's (RFC 5389 §15.4): the sender does
    /// not know the credentials from the session's answer.
    #[error("binding request with a wrong MESSAGE-INTEGRITY")]
    BadIntegrity,
    /// The binding response could not be written.
    #[error("binding message could not be built")]
    Encode,
}

/// A binding request whose USERNAME was read but whose integrity is not checked yet (that
/// needs the password of the peer the ufrag names).
#[derive(Debug)]
pub struct BindingRequest {
    message: Message,
    /// Our ufrag: the part of USERNAME before the colon, which names the peer.
    pub local_ufrag: String,
    /// The browser nominated this address (RFC 8445 section 7.3.1.5).
    pub use_candidate: bool,
}

impl BindingRequest {
    /// Reads a STUN datagram as a binding request and its USERNAME; the integrity is checked
    /// later, with the password of the session the ufrag names.
    pub fn parse(datagram: &[u8]) -> Result<Self, IceError> {
        let message = decode_whole(datagram)?;
        if message.typ != BINDING_REQUEST {
            return Err(IceError::NotBindingRequest);
        }
        let username = TextAttribute::get_from_as(&message, ATTR_USERNAME)
            .map_err(|_| IceError::BadUsername)?;
        let local_ufrag = username
            .text
            .split_once(':')
            .map(|(local, _)| local.to_owned())
            .ok_or(IceError::BadUsername)?;
        let use_candidate = message.contains(ATTR_USE_CANDIDATE);
        Ok(Self {
            message,
            local_ufrag,
            use_candidate,
        })
    }

    /// Checks MESSAGE-INTEGRITY with our password and writes the success response: the
    /// browser's address as XOR-MAPPED-ADDRESS, signed and fingerprinted.
    pub fn answer(mut self, local_pwd: &str, from: SocketAddr) -> Result<Vec<u8>, IceError> {
        MessageIntegrity::new_short_term_integrity(local_pwd.to_owned())
            .check(&mut self.message)
            .map_err(|_| IceError::BadIntegrity)?;
        let mut response = Message::new();
        let setters: [Box<dyn Setter>; 5] = [
            Box::new(self.message.clone()),
            Box::new(BINDING_SUCCESS),
            Box::new(XorMappedAddress {
                ip: from.ip(),
                port: from.port(),
            }),
            Box::new(MessageIntegrity::new_short_term_integrity(
                local_pwd.to_owned(),
            )),
            Box::new(FINGERPRINT),
        ];
        response.build(&setters).map_err(|_| IceError::Encode)?;
        Ok(response.raw)
    }
}

/// A STUN message whose header's length covers the whole datagram: bytes past it would be read
/// by nobody, and a length cut back to MESSAGE-INTEGRITY would pass off a message whose
/// FINGERPRINT was dropped as signed.
fn decode_whole(datagram: &[u8]) -> Result<Message, IceError> {
    if !stun::message::is_message(datagram) {
        return Err(IceError::NotStun);
    }
    let mut message = Message::new();
    message.raw = datagram.to_vec();
    message.decode().map_err(|_| IceError::NotStun)?;
    if usize::try_from(message.length).ok()
        != Some(datagram.len().saturating_sub(MESSAGE_HEADER_SIZE))
    {
        return Err(IceError::NotStun);
    }
    Ok(message)
}

/// Whether a STUN datagram is a binding success response (RFC 8489 section 5: its type's
/// class and method bits), as an answer to one of the node's checks is.
pub fn is_binding_success(datagram: &[u8]) -> bool {
    datagram.get(..2) == Some(&[0x01, 0x01])
}

/// A STUN transaction id (RFC 8489 section 5).
pub type TransactionBytes = [u8; 12];

/// The PRIORITY the node's checks carry (RFC 8445 section 7.1.1): a host candidate's, as the
/// node has one.
const CHECK_PRIORITY: u32 = (126 << 24) | (65535 << 8) | 255;

/// A binding request from the node to a client's address, as a full agent checks a pair
/// (RFC 8445 section 7.2.2): USERNAME `theirs:ours`, ICE-CONTROLLED (an ICE-lite agent's role),
/// PRIORITY, signed with the client's password. Sent only to prove an address a connected
/// session is nominated at.
pub fn check_request(
    username: &str,
    remote_pwd: &str,
    transaction: TransactionBytes,
    tie_breaker: u64,
) -> Result<Vec<u8>, IceError> {
    let setters: [Box<dyn Setter>; 7] = [
        Box::new(BINDING_REQUEST),
        Box::new(TransactionId(transaction)),
        Box::new(TextAttribute::new(ATTR_USERNAME, username.to_owned())),
        Box::new(RawAttribute(
            ATTR_ICE_CONTROLLED,
            tie_breaker.to_be_bytes().to_vec(),
        )),
        Box::new(RawAttribute(
            ATTR_PRIORITY,
            CHECK_PRIORITY.to_be_bytes().to_vec(),
        )),
        Box::new(MessageIntegrity::new_short_term_integrity(
            remote_pwd.to_owned(),
        )),
        Box::new(FINGERPRINT),
    ];
    let mut m = Message::new();
    m.build(&setters).map_err(|_| IceError::Encode)?;
    Ok(m.raw)
}

/// A binding success response, as a client answers one of the node's checks: its transaction
/// id read, its integrity checked later with the password of the session whose check it names.
#[derive(Debug)]
pub struct CheckResponse {
    message: Message,
    /// The transaction it answers.
    pub transaction: TransactionBytes,
}

impl CheckResponse {
    /// Reads a STUN datagram as a binding success response.
    pub fn parse(datagram: &[u8]) -> Result<Self, IceError> {
        let message = decode_whole(datagram)?;
        if message.typ != BINDING_SUCCESS {
            return Err(IceError::NotBindingSuccess);
        }
        Ok(Self {
            transaction: message.transaction_id.0,
            message,
        })
    }

    /// Checks MESSAGE-INTEGRITY with the client's password: a response signed with another
    /// is not its client's.
    pub fn verify(mut self, remote_pwd: &str) -> Result<(), IceError> {
        MessageIntegrity::new_short_term_integrity(remote_pwd.to_owned())
            .check(&mut self.message)
            .map_err(|_| IceError::BadIntegrity)
    }
}

/// An attribute written as its bytes.
struct RawAttribute(AttrType, Vec<u8>);

impl Setter for RawAttribute {
    fn add_to(&self, m: &mut Message) -> Result<(), stun::Error> {
        m.add(self.0, &self.1);
        Ok(())
    }
}

/// The USE-CANDIDATE flag (an attribute without a value).
struct UseCandidate;

impl Setter for UseCandidate {
    fn add_to(&self, m: &mut Message) -> Result<(), stun::Error> {
        m.add(ATTR_USE_CANDIDATE, &[]);
        Ok(())
    }
}

/// A binding request as a browser sends one to us: USERNAME `ours:theirs`, signed with our
/// password. For tests and tools that play the browser's part.
pub fn binding_request(
    username: &str,
    password: &str,
    nominate: bool,
) -> Result<Vec<u8>, IceError> {
    let mut setters: Vec<Box<dyn Setter>> = vec![
        Box::new(BINDING_REQUEST),
        Box::new(TransactionId::new()),
        Box::new(TextAttribute::new(ATTR_USERNAME, username.to_owned())),
    ];
    if nominate {
        setters.push(Box::new(UseCandidate));
    }
    setters.push(Box::new(MessageIntegrity::new_short_term_integrity(
        password.to_owned(),
    )));
    setters.push(Box::new(FINGERPRINT));
    let mut m = Message::new();
    m.build(&setters).map_err(|_| IceError::Encode)?;
    Ok(m.raw)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use stun::message::Getter;

    use super::*;

    const PWD: &str = "abcdefghijklmnopqrstuvwx";

    fn request(username: &str, pwd: &str, nominate: bool) -> Vec<u8> {
        binding_request(username, pwd, nominate).expect("valid request")
    }

    #[test]
    fn a_signed_request_is_answered_with_the_mapped_address() {
        let from: SocketAddr = "127.0.0.1:40123".parse().expect("address");
        let raw = request("srv1:brw1", PWD, true);
        let parsed = BindingRequest::parse(&raw).expect("binding request");
        assert_eq!(parsed.local_ufrag, "srv1");
        assert!(parsed.use_candidate);
        let answer = parsed.answer(PWD, from).expect("answered");

        let mut response = Message::new();
        response.raw = answer;
        response.decode().expect("STUN");
        assert_eq!(response.typ, BINDING_SUCCESS);
        let mut mapped = XorMappedAddress::default();
        mapped.get_from(&response).expect("mapped address");
        assert_eq!((mapped.ip, mapped.port), (from.ip(), from.port()));
        MessageIntegrity::new_short_term_integrity(PWD.to_owned())
            .check(&mut response)
            .expect("signed with our password");
        let mut original = Message::new();
        original.raw = raw;
        original.decode().expect("STUN");
        assert_eq!(response.transaction_id, original.transaction_id);
    }

    #[test]
    fn wrong_password_and_bad_usernames_are_refused() {
        let from: SocketAddr = "127.0.0.1:1".parse().expect("address");
        let raw = request("srv1:brw1", "another password here!!", false);
        let parsed = BindingRequest::parse(&raw).expect("parses");
        assert!(!parsed.use_candidate);
        assert_eq!(parsed.answer(PWD, from), Err(IceError::BadIntegrity));
        let raw = request("no-colon", PWD, false);
        assert_eq!(
            BindingRequest::parse(&raw).map(|_| ()),
            Err(IceError::BadUsername)
        );
        assert_eq!(
            BindingRequest::parse(&[0x80, 0x60, 0, 0]).map(|_| ()),
            Err(IceError::NotStun)
        );
    }

    /// A length cut back to the end of MESSAGE-INTEGRITY (the length the HMAC was made
    /// under) leaves FINGERPRINT past the message: not a message of the datagram's size.
    #[test]
    fn a_length_that_leaves_bytes_past_the_message_is_refused() {
        let mut raw = request("srv1:brw1", PWD, true);
        assert!(BindingRequest::parse(&raw).is_ok());
        let length = u16::from_be_bytes([raw[2], raw[3]]) - 8;
        raw[2..4].copy_from_slice(&length.to_be_bytes());
        assert_eq!(
            BindingRequest::parse(&raw).map(|_| ()),
            Err(IceError::NotStun)
        );
        let mut longer = request("srv1:brw1", PWD, true);
        longer.push(0);
        assert_eq!(
            BindingRequest::parse(&longer).map(|_| ()),
            Err(IceError::NotStun)
        );
    }

    proptest! {
        #[test]
        fn hostile_bytes_are_never_answered(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let from: SocketAddr = "127.0.0.1:1".parse().expect("address");
            if let Ok(request) = BindingRequest::parse(&bytes) {
                prop_assert!(request.answer(PWD, from).is_err());
            }
        }

        /// Any byte changed up to the end of MESSAGE-INTEGRITY: the header, USERNAME,
        /// USE-CANDIDATE and the HMAC itself. FINGERPRINT (the last 8 bytes) comes after the
        /// integrity and is not covered by it.
        #[test]
        fn a_changed_byte_fails_the_integrity_check(at in any::<usize>(), flip in 1u8..=255) {
            let from: SocketAddr = "127.0.0.1:1".parse().expect("address");
            let mut raw = request("srv1:brw1", PWD, true);
            let signed = raw.len() - 8;
            raw[at % signed] ^= flip;
            let answered = BindingRequest::parse(&raw).and_then(|r| r.answer(PWD, from));
            prop_assert!(answered.is_err(), "byte {} changed, still answered", at % signed);
        }
    }
}
