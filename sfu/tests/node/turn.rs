//! The TURN credentials the node mints, checked by a real TURN server: Debian's coturn with a
//! shared secret (`use-auth-secret`) allocates a relay for them, and refuses a wrong or an
//! expired one. Ignored by default: needs `turnserver`; `.ci/browser-test` runs it.

use std::net::UdpSocket;
use std::time::{Duration, SystemTime};

use sfu::node::ice_servers::IceServerConfig;
use stun::agent::TransactionId;
use stun::attributes::ATTR_XOR_RELAYED_ADDRESS;
use stun::attributes::{ATTR_NONCE, ATTR_REALM, ATTR_REQUESTED_TRANSPORT, ATTR_USERNAME};
use stun::error_code::ErrorCodeAttribute;
use stun::integrity::MessageIntegrity;
use stun::message::METHOD_ALLOCATE;
use stun::message::{Getter, Message, MessageType, Setter, CLASS_REQUEST};
use stun::message::{CLASS_ERROR_RESPONSE, CLASS_SUCCESS_RESPONSE};
use stun::textattrs::TextAttribute;

use crate::coturn::{coturn, SECRET};
/// REQUESTED-TRANSPORT: UDP (RFC 8656 §18.7).
const UDP: [u8; 4] = [17, 0, 0, 0];

/// The long-term credentials of a second Allocate: username, password, and the realm and
/// nonce the server's 401 named.
struct Credentials<'a> {
    username: &'a str,
    password: &'a str,
    realm: &'a str,
    nonce: &'a str,
}

/// An Allocate for a UDP relay, with credentials if given (MESSAGE-INTEGRITY last).
fn allocate_request(credentials: Option<&Credentials<'_>>) -> Message {
    let mut request = Message::new();
    let setters: Vec<Box<dyn Setter>> = vec![
        Box::new(MessageType::new(METHOD_ALLOCATE, CLASS_REQUEST)),
        Box::new(TransactionId::new()),
    ];
    request.build(&setters).expect("a request");
    request.add(ATTR_REQUESTED_TRANSPORT, &UDP);
    if let Some(c) = credentials {
        for (attr, text) in [
            (ATTR_USERNAME, c.username),
            (ATTR_REALM, c.realm),
            (ATTR_NONCE, c.nonce),
        ] {
            TextAttribute::new(attr, text.to_owned())
                .add_to(&mut request)
                .expect("added");
        }
        let integrity = MessageIntegrity::new_long_term_integrity(
            c.username.to_owned(),
            c.realm.to_owned(),
            c.password.to_owned(),
        );
        integrity.add_to(&mut request).expect("added");
    }
    request
}

/// Sends `request` until the server answers (it may still be starting).
fn exchange(socket: &UdpSocket, port: u16, request: &Message) -> Message {
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("a timeout");
    let mut buf = [0; 1500];
    for _ in 0..50 {
        socket
            .send_to(&request.raw, ("127.0.0.1", port))
            .expect("sent");
        if let Ok((n, _)) = socket.recv_from(&mut buf) {
            let mut reply = Message::new();
            reply.unmarshal_binary(&buf[..n]).expect("a STUN reply");
            return reply;
        }
    }
    panic!("no answer from turnserver on port {port}");
}

/// Allocates with `username` and `password` the long-term way: a first request learns the
/// realm and nonce from the 401, the second carries the credentials. The final answer.
fn allocate(port: u16, username: &str, password: &str) -> Message {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("a socket");
    let challenge = exchange(&socket, port, &allocate_request(None));
    assert_eq!(
        challenge.typ.class, CLASS_ERROR_RESPONSE,
        "a challenge first"
    );
    let realm = TextAttribute::get_from_as(&challenge, ATTR_REALM).expect("a realm");
    let nonce = TextAttribute::get_from_as(&challenge, ATTR_NONCE).expect("a nonce");
    let credentials = Credentials {
        username,
        password,
        realm: &realm.text,
        nonce: &nonce.text,
    };
    exchange(&socket, port, &allocate_request(Some(&credentials)))
}

fn error_code(reply: &Message) -> u16 {
    let mut code = ErrorCodeAttribute::default();
    code.get_from(reply).expect("an error code");
    code.code.0
}

#[test]
#[ignore = "needs turnserver (coturn): run .ci/browser-test"]
fn coturn_allocates_for_minted_credentials_and_refuses_wrong_or_expired_ones() {
    let server = coturn();
    let config = IceServerConfig {
        urls: vec![format!("turn:127.0.0.1:{}?transport=udp", server.port)],
        username: None,
        credential: None,
        secret: Some(SECRET.to_owned()),
        ttl_seconds: Some(600),
    };
    config.validate().expect("valid");
    let minted = config.for_client("p7", SystemTime::now());
    let (username, password) = (
        minted.username.as_deref().expect("minted"),
        minted.credential.as_deref().expect("minted"),
    );
    let granted = allocate(server.port, username, password);
    assert_eq!(granted.typ.class, CLASS_SUCCESS_RESPONSE, "{granted}");
    assert!(
        granted.contains(ATTR_XOR_RELAYED_ADDRESS),
        "a relayed address"
    );

    let wrong = allocate(server.port, username, "not the password");
    assert_eq!(wrong.typ.class, CLASS_ERROR_RESPONSE);
    assert_eq!(error_code(&wrong), 401);

    let long_ago = SystemTime::now() - Duration::from_secs(3600);
    let expired = config.for_client("p7", long_ago);
    let refused = allocate(
        server.port,
        expired.username.as_deref().expect("minted"),
        expired.credential.as_deref().expect("minted"),
    );
    assert_eq!(
        refused.typ.class, CLASS_ERROR_RESPONSE,
        "expired credentials"
    );
    assert_eq!(error_code(&refused), 401);
}
