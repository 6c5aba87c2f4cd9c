//! A conference participant with data channels only, as a browser is one, for the tests that
//! need real channels over real sockets: its offer (one application section, the fingerprint
//! of its own certificate), the ICE check that nominates its address, a DTLS handshake by an
//! independent stack (the `dtls` crate, client side) and an SCTP association (`sctp-proto`)
//! over it, which opens channels in band (DCEP) and reads what the node relays. Its own
//! runtime drives it, so the tests that use it stay plain threads.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use dtls::config::{Config, ExtendedMasterSecretType};
use dtls::conn::DTLSConn;
use dtls::crypto::Certificate;
use dtls::extension::extension_use_srtp::SrtpProtectionProfile;
use parking_lot::Mutex;
use sctp_proto::{
    Association, ClientConfig, DatagramEvent, Endpoint, EndpointConfig, Event, Payload,
    PayloadProtocolIdentifier as Ppid, StreamEvent,
};
use sfu::node::datachannel::dcep::{ChannelParams, Dcep, Reliability};
use sfu::node::peer::IceCredentials;
use sfu::node::testing::binding_request;
use sha2::{Digest, Sha256};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use webrtc_util::Conn;

use crate::http_node::{request_to, SDP};

/// Long beside a join, a handshake and a relay between nodes, even on a busy machine.
const PATIENCE: Duration = Duration::from_secs(10);
/// The SCTP peer address the association is told: DTLS carries it, so any will do.
const PEER: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 5000);

/// A participant of a room on a node, its data channels up once [`connected`] says so.
pub struct DataClient {
    /// Its resource on the node.
    pub resource: String,
    http: String,
    commands: mpsc::UnboundedSender<Command>,
    seen: Arc<Mutex<Seen>>,
    _runtime: tokio::runtime::Runtime,
}

/// What the client did and was sent, and when.
#[derive(Debug, Default)]
struct Seen {
    /// When its association came up.
    connected: Option<Instant>,
    /// The channels the node opened toward it: their protocol (the owner), by stream.
    channels: Vec<(u16, String)>,
    /// The messages on them: the stream's protocol, the text, when it came.
    messages: Vec<(String, String, Instant)>,
}

enum Command {
    /// Opens a channel `label` on `stream` and writes `text` on it at once, as a page does
    /// from its channel's `open` event.
    Greet {
        stream: u16,
        label: String,
        text: String,
    },
    /// Writes `text` on the client's own channel `stream`.
    Send { stream: u16, text: String },
}

impl DataClient {
    /// Joins `room` on the node at `http` as `name` (its answer in hand), and starts the ICE
    /// check, the handshake and the association.
    pub fn join(http: &str, room: &str, name: &str) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let certificate =
            Certificate::generate_self_signed(vec!["client".to_owned()]).expect("a certificate");
        let hash = Sha256::digest(certificate.certificate[0].as_ref());
        let fingerprint: Vec<String> = hash.iter().map(|b| format!("{b:02X}")).collect();
        let offer = offer(&fingerprint.join(":"));
        let path = format!("/rooms/{room}?name={name}");
        let joined = request_to(http, "POST", &path, &[SDP], &offer);
        assert_eq!(joined.status, 201, "{name}: {}", joined.body);
        let resource = joined.header("location").expect("a resource").to_owned();
        let (ice, node) = answered(&joined.body);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let (commands, inbox) = mpsc::unbounded_channel();
        let seen = Arc::new(Mutex::new(Seen::default()));
        runtime.spawn(run(node, ice, certificate, inbox, seen.clone()));
        Self {
            resource,
            http: http.to_owned(),
            commands,
            seen,
            _runtime: runtime,
        }
    }

    /// Waits until its association is up: when it came up.
    pub fn connected(&self) -> Instant {
        self.wait(|seen| seen.connected)
    }

    /// Opens channel `label` on `stream` (even: the client's) and writes `text` on it at
    /// once, as soon as the association is up.
    pub fn greet(&self, stream: u16, label: &str, text: &str) {
        let command = Command::Greet {
            stream,
            label: label.to_owned(),
            text: text.to_owned(),
        };
        self.commands.send(command).expect("the client runs");
    }

    /// Writes `text` on its channel `stream`.
    pub fn send(&self, stream: u16, text: &str) {
        let text = text.to_owned();
        let command = Command::Send { stream, text };
        self.commands.send(command).expect("the client runs");
    }

    /// Waits for the message `text` on a channel the node opened toward it: the channel's
    /// protocol (its owner, `p<id>`) and when it came.
    pub fn wait_for(&self, text: &str) -> (String, Instant) {
        self.wait(|seen| {
            let found = seen.messages.iter().find(|(_, t, _)| t == text);
            found.map(|(protocol, _, at)| (protocol.clone(), *at))
        })
    }

    /// Every message it was sent so far.
    pub fn messages(&self) -> Vec<String> {
        let seen = self.seen.lock();
        seen.messages.iter().map(|(_, t, _)| t.clone()).collect()
    }

    /// The first message it was sent, and when.
    pub fn first_message(&self) -> Option<(String, Instant)> {
        let seen = self.seen.lock();
        seen.messages.first().map(|(_, t, at)| (t.clone(), *at))
    }

    /// Leaves the room (`DELETE` of its resource).
    pub fn leave(self) {
        let left = request_to(&self.http, "DELETE", &self.resource, &[], "");
        assert_eq!(left.status, 200, "{}", left.body);
    }

    fn wait<T>(&self, found: impl Fn(&Seen) -> Option<T>) -> T {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(found) = found(&self.seen.lock()) {
                return found;
            }
            assert!(Instant::now() < deadline, "{:?}", self.seen.lock());
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// A browser's offer of a data channel alone, under `fingerprint`.
fn offer(fingerprint: &str) -> String {
    [
        "v=0",
        "o=- 4611731400430051336 2 IN IP4 127.0.0.1",
        "s=-",
        "t=0 0",
        "a=group:BUNDLE 0",
        "a=msid-semantic: WMS",
        "m=application 9 UDP/DTLS/SCTP webrtc-datachannel",
        "c=IN IP4 0.0.0.0",
        "a=ice-ufrag:dcli",
        "a=ice-pwd:a-password-of-24-chars!!",
        "a=ice-options:trickle",
        &format!("a=fingerprint:sha-256 {fingerprint}"),
        "a=setup:actpass",
        "a=mid:0",
        "a=sctp-port:5000",
        "a=max-message-size:262144",
        "",
    ]
    .join("\r\n")
}

/// The node's ICE credentials and its UDP host candidate, from its answer.
fn answered(answer: &str) -> (IceCredentials, SocketAddr) {
    let value = |prefix: &str| {
        let line = answer.lines().find_map(|l| l.strip_prefix(prefix));
        line.expect("in the answer").trim().to_owned()
    };
    let udp = answer
        .lines()
        .filter_map(|l| l.strip_prefix("a=candidate:"));
    let candidate = udp.map(|c| c.trim()).find(|c| c.contains(" udp "));
    let fields: Vec<&str> = candidate.expect("a UDP candidate").split(' ').collect();
    let node = format!("{}:{}", fields[4], fields[5]);
    let ice = IceCredentials {
        local_ufrag: value("a=ice-ufrag:"),
        local_pwd: value("a=ice-pwd:"),
    };
    (ice, node.parse().expect("an address"))
}

/// The client: its ICE check, its handshake, then its association until the test ends.
async fn run(
    node: SocketAddr,
    ice: IceCredentials,
    certificate: Certificate,
    inbox: mpsc::UnboundedReceiver<Command>,
    seen: Arc<Mutex<Seen>>,
) {
    let socket = UdpSocket::bind("127.0.0.1:0").await.expect("a socket");
    socket.connect(node).await.expect("connected");
    let socket = Arc::new(socket);
    let check = binding_request(&ice, true);
    socket.send(&check).await.expect("sent");
    tokio::spawn(consent(socket.clone(), check));
    let config = Config {
        certificates: vec![certificate],
        srtp_protection_profiles: vec![
            SrtpProtectionProfile::Srtp_Aead_Aes_128_Gcm,
            SrtpProtectionProfile::Srtp_Aes128_Cm_Hmac_Sha1_80,
        ],
        extended_master_secret: ExtendedMasterSecretType::Require,
        // As a browser does: the node's certificate is trusted for its SDP fingerprint.
        insecure_skip_verify: true,
        server_name: "strata".to_owned(),
        ..Config::default()
    };
    let conn = Arc::new(DtlsOnly(socket));
    let dtls = DTLSConn::new(conn, config, true, None)
        .await
        .expect("the handshake");
    associate(dtls, inbox, seen).await;
}

/// The ICE check again every second, as a browser checks consent (RFC 7675), while the
/// socket is there.
async fn consent(socket: Arc<UdpSocket>, check: Vec<u8>) {
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if Arc::strong_count(&socket) == 1 || socket.send(&check).await.is_err() {
            return;
        }
    }
}

/// The association over `dtls`: what the node sends read, the test's commands done once it
/// is up, its timers served.
async fn associate(
    dtls: DTLSConn,
    mut inbox: mpsc::UnboundedReceiver<Command>,
    seen: Arc<Mutex<Seen>>,
) {
    let mut endpoint = Endpoint::new(Arc::new(EndpointConfig::default()), None);
    let (_, mut association) = endpoint
        .connect(ClientConfig::default(), PEER)
        .expect("a client association");
    let mut waiting = Vec::new();
    let mut buf = vec![0; 64 * 1024];
    loop {
        while let Some(transmit) = association.poll_transmit(Instant::now()) {
            if let Payload::RawEncode(packets) = transmit.payload {
                for packet in packets {
                    if dtls.write(&packet, None).await.is_err() {
                        return;
                    }
                }
            }
        }
        let timer = association
            .poll_timeout()
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(1));
        tokio::select! {
            read = dtls.read(&mut buf, None) => {
                let Ok(n) = read else { return };
                let packet = Bytes::copy_from_slice(&buf[..n]);
                let event = endpoint.handle(Instant::now(), PEER, None, None, packet);
                if let Some((_, DatagramEvent::AssociationEvent(event))) = event {
                    association.handle_event(event);
                }
            }
            command = inbox.recv() => match command {
                Some(command) => waiting.push(command),
                None => return,
            },
            () = tokio::time::sleep_until(timer.into()) => association.handle_timeout(Instant::now()),
        }
        take_events(&mut association, &seen);
        if seen.lock().connected.is_some() {
            for command in waiting.drain(..) {
                obey(&mut association, command);
            }
        }
    }
}

/// What the association tells: its coming up, the node's channels (acknowledged) and
/// messages on them.
fn take_events(association: &mut Association, seen: &Mutex<Seen>) {
    let mut streams = BTreeSet::new();
    while let Some(event) = association.poll() {
        match event {
            Event::Connected => {
                seen.lock().connected.get_or_insert_with(Instant::now);
            }
            Event::Stream(StreamEvent::Opened { id } | StreamEvent::Readable { id }) => {
                streams.insert(id);
            }
            _ => {}
        }
    }
    for id in streams {
        let Ok(mut stream) = association.stream(id) else {
            continue;
        };
        while let Ok(Some(chunks)) = stream.read() {
            let mut data = vec![0; chunks.len()];
            if chunks.read(&mut data).is_err() {
                continue;
            }
            let mut seen = seen.lock();
            match chunks.ppi {
                Ppid::Dcep => {
                    if let Ok(Dcep::Open(params)) = Dcep::parse(&data) {
                        let _ = stream.write_with_ppi(&[0x02], Ppid::Dcep);
                        seen.channels.push((id, params.protocol));
                    }
                }
                _ => {
                    let owner = seen.channels.iter().find(|(s, _)| *s == id);
                    let owner = owner.map(|(_, p)| p.clone()).unwrap_or_default();
                    let text = String::from_utf8_lossy(&data).into_owned();
                    seen.messages.push((owner, text, Instant::now()));
                }
            }
        }
    }
}

fn obey(association: &mut Association, command: Command) {
    match command {
        Command::Greet {
            stream,
            label,
            text,
        } => {
            let params = ChannelParams {
                unordered: false,
                reliability: Reliability::Reliable,
                priority: 0,
                label,
                protocol: String::new(),
            };
            let mut open = Vec::new();
            Dcep::Open(params).write(&mut open).expect("an open");
            let mut s = association
                .open_stream(stream, Ppid::Dcep)
                .expect("a stream");
            s.write_with_ppi(&open, Ppid::Dcep).expect("written");
            s.write_with_ppi(text.as_bytes(), Ppid::String)
                .expect("written");
        }
        Command::Send { stream, text } => {
            let mut s = association.stream(stream).expect("its stream");
            s.write_with_ppi(text.as_bytes(), Ppid::String)
                .expect("written");
        }
    }
}

/// The client's UDP socket as its DTLS stack sees it: the node's STUN answers left out.
struct DtlsOnly(Arc<UdpSocket>);

#[async_trait]
impl Conn for DtlsOnly {
    async fn connect(&self, addr: SocketAddr) -> webrtc_util::Result<()> {
        Ok(self.0.connect(addr).await?)
    }

    async fn recv(&self, buf: &mut [u8]) -> webrtc_util::Result<usize> {
        loop {
            let n = self.0.recv(buf).await?;
            // RFC 7983: DTLS records start with 20 to 63, STUN with 0 to 3.
            if n > 0 && (20..=63).contains(&buf[0]) {
                return Ok(n);
            }
        }
    }

    async fn recv_from(&self, buf: &mut [u8]) -> webrtc_util::Result<(usize, SocketAddr)> {
        let n = self.recv(buf).await?;
        Ok((n, self.0.peer_addr()?))
    }

    async fn send(&self, buf: &[u8]) -> webrtc_util::Result<usize> {
        Ok(self.0.send(buf).await?)
    }

    async fn send_to(&self, buf: &[u8], _target: SocketAddr) -> webrtc_util::Result<usize> {
        self.send(buf).await
    }

    fn local_addr(&self) -> webrtc_util::Result<SocketAddr> {
        Ok(self.0.local_addr()?)
    }

    fn remote_addr(&self) -> Option<SocketAddr> {
        self.0.peer_addr().ok()
    }

    async fn close(&self) -> webrtc_util::Result<()> {
        Ok(())
    }

    fn as_any(&self) -> &(dyn std::any::Any + Send + Sync) {
        self
    }
}
