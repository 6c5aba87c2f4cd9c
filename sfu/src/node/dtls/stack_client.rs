//! The DTLS stack in the client role, in memory, for the tests and the fuzz seeds: a peer's
//! first hello, and every datagram of a whole handshake against one of the node's
//! associations.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use rtc_dtls::config::{ConfigBuilder, HandshakeConfig};
use rtc_dtls::crypto::Certificate;
use rtc_dtls::endpoint::Endpoint;
use rtc_dtls::extension::extension_use_srtp::SrtpProtectionProfile;

use super::{DtlsAssociation, DtlsOutput, DATAGRAM_LIMIT};

/// The client's address, and the node's, as the client stack is told them.
const CLIENT: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 1);
pub(super) const NODE: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 2);

/// Turns of the exchange at most: a handshake takes four.
const TURNS: usize = 16;

/// A ClientHello from the DTLS stack in the client role, as a peer's first datagram.
pub fn client_hello(now: Instant) -> Vec<u8> {
    let mut client = client(now, Vec::new());
    let hello = client.poll_transmit().expect("a ClientHello");
    hello.message.to_vec()
}

/// Every datagram a client with a certificate of its own sends `association` in a whole
/// handshake, all at `now`, in order: its hello, its hello with the node's cookie, and its
/// second flight (its certificate, key exchange, certificate verify and finished). The
/// association refuses it in the end unless it expects that certificate, which nobody else
/// has: the flights are real, for the fuzz seeds to reach past the cookie exchange.
pub fn client_flights(now: Instant, association: &mut DtlsAssociation) -> Vec<Vec<u8>> {
    let provider = rtc_dtls::crypto_provider::default_provider().expect("a crypto provider");
    let certificate = Certificate::generate_self_signed(vec!["peer".to_owned()], provider.crypto())
        .expect("a certificate");
    let mut client = client(now, vec![certificate]);
    let mut sent = Vec::new();
    let mut buf = vec![0; DATAGRAM_LIMIT];
    for _ in 0..TURNS {
        let mut moved = false;
        while let Some(transmit) = client.poll_transmit() {
            let datagram = transmit.message.to_vec();
            let _ = association.handle_datagram(now, &datagram);
            sent.push(datagram);
            moved = true;
        }
        while let Some(output) = association.poll_output(&mut buf) {
            if let DtlsOutput::Datagram(datagram) = output {
                let _ = client.read(now, NODE, None, BytesMut::from(datagram));
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
    sent
}

/// The client stack, connecting to the node at `now` with `certificates` to present.
fn client(now: Instant, certificates: Vec<Certificate>) -> Endpoint {
    let provider = rtc_dtls::crypto_provider::default_provider().expect("a crypto provider");
    let config = ConfigBuilder::default()
        .with_crypto_provider(provider)
        .with_certificates(certificates)
        .with_srtp_protection_profiles(vec![SrtpProtectionProfile::Srtp_Aead_Aes_128_Gcm])
        .with_insecure_skip_verify(true)
        .build(true, None)
        .expect("a client configuration");
    connect(now, config)
}

/// The client stack with `config`, connecting to the node (at [`NODE`]) at `now`.
pub(super) fn connect(now: Instant, config: HandshakeConfig) -> Endpoint {
    let mut client = Endpoint::new(CLIENT, rtc_shared::TransportProtocol::UDP, None);
    client
        .connect(now, NODE, Arc::new(config), None)
        .expect("the client starts");
    client
}
