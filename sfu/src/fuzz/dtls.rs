//! The node's side of a peer's DTLS under fuzzing: one association fed datagrams and time.
//! The node's randomness is a constant here (`DtlsCertificate::with_constant_randomness`), so
//! its cookie is the same in every run and an input that answers it reaches the rest of the
//! handshake: the node's certificate flight, and the parsing of the peer's certificate, key
//! exchange and certificate verify.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::records;
use crate::node::dtls::{
    self, DtlsAssociation, DtlsCertificate, DtlsConfig, DtlsError, DtlsOutput, DATAGRAM_LIMIT, MTU,
};

/// The handshake timeout of `dtls_association`'s associations: a few time records pass it.
const DTLS_TIMEOUT: Duration = Duration::from_secs(10);

/// `dtls_association`'s node configuration and the fingerprint its peer is expected to have,
/// made once: a key pair per input would be most of the fuzzer's time.
pub fn dtls_fixture() -> &'static (DtlsConfig, String) {
    static FIXTURE: OnceLock<(DtlsConfig, String)> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let node = DtlsCertificate::generate().expect("a certificate");
        let peer = DtlsCertificate::generate().expect("a certificate");
        let node = node.with_constant_randomness();
        let config = DtlsConfig::new(&node, DTLS_TIMEOUT).expect("a configuration");
        (config, peer.fingerprint())
    })
}

/// A fresh association of the fixture's, at `now`.
fn association(now: Instant) -> DtlsAssociation {
    let (config, fingerprint) = dtls_fixture();
    let (algorithm, value) = fingerprint.split_once(' ').expect("algorithm and value");
    DtlsAssociation::new(now, config, (algorithm, value)).expect("the fingerprint parses")
}

/// `dtls_association`: a fresh association, the node's side of a peer's DTLS, fed `records`:
/// even `op` a datagram from the peer, odd `op` `op / 2 * 100` ms passing. After each,
/// everything it has is polled: datagrams fit the MTU, it never connects (nothing here holds
/// the key of the certificate it expects), and once it has failed or closed it takes nothing
/// more.
pub fn dtls_association(data: &[u8]) {
    dtls_association_sent(data);
}

/// The `dtls_association` body, returning the datagrams the node sent (for the tests that
/// check the seeds get that far).
pub fn dtls_association_sent(data: &[u8]) -> Vec<Vec<u8>> {
    let mut now = Instant::now();
    let mut association = association(now);
    let mut buf = vec![0; DATAGRAM_LIMIT];
    let mut sent = Vec::new();
    for (op, bytes) in records(data) {
        if op % 2 == 0 {
            let ended = association.is_ended();
            let taken = association.handle_datagram(now, bytes);
            if ended {
                assert!(matches!(taken, Err(DtlsError::Ended)));
            }
        } else {
            now += Duration::from_millis(u64::from(op / 2) * 100);
            association.handle_timeout(now);
        }
        drain_association(&mut association, &mut buf, &mut sent);
    }
    sent
}

/// Every datagram of a client's whole handshake with an association of the fixture's: a seed
/// that answers the cookie exchange.
pub fn dtls_client_flights() -> Vec<Vec<u8>> {
    let now = Instant::now();
    dtls::client_flights(now, &mut association(now))
}

fn drain_association(association: &mut DtlsAssociation, buf: &mut [u8], sent: &mut Vec<Vec<u8>>) {
    while let Some(output) = association.poll_output(buf) {
        match output {
            DtlsOutput::Datagram(datagram) => {
                assert!(datagram.len() <= MTU);
                sent.push(datagram.to_vec());
            }
            DtlsOutput::Closed | DtlsOutput::Failed(_) => {
                assert!(association.poll_output(buf).is_none());
                assert!(association.is_ended());
                return;
            }
            other => panic!("an association without the peer's key reported {other:?}"),
        }
    }
}
