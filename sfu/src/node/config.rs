//! The node's settings: built-in defaults, overridden by a TOML file, overridden by flags and
//! environment variables (the command line parses both; see `sfu serve --help`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::cluster::ClusterConfig;
use super::datachannel::DataChannelConfig;
use super::ice_servers::{IceServerConfig, IceServerError};
use super::limits::Limits;
use super::shard::MAX_WORKERS;
use super::tls::TlsSource;

/// Everything `sfu serve` can be told. Every field has a default, so an empty file (or none)
/// is a complete configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeConfig {
    /// Where WHIP, WHEP, `/metrics` and the demo page are served.
    pub http: SocketAddr,
    /// The one UDP socket all media, STUN and DTLS share.
    pub udp: SocketAddr,
    /// The ICE-TCP listener (RFC 6544, passive): by default the UDP socket's address and
    /// port on TCP; an empty string turns ICE over TCP off.
    pub tcp: Option<String>,
    /// An ICE-TCP connection on which the node has answered nothing (no binding request of
    /// one of its sessions came) for this long is closed.
    pub tcp_handshake_timeout_ms: u64,
    /// The address put in ICE candidates; by default the UDP socket's own, or loopback when
    /// that is unspecified (0.0.0.0).
    pub public_ip: Option<IpAddr>,
    /// Static bearer tokens allowed to publish and watch any room.
    pub tokens: Vec<String>,
    /// Secret of HS256 JWTs carrying room and publish/subscribe grants.
    pub jwt_secret: Option<String>,
    /// Least time between two keyframe requests to one publisher's stream.
    pub keyframe_interval_ms: u64,
    /// Tracing filter (`info`, `sfu=debug`, ...).
    pub log: String,
    /// Bitrate a publisher's video encoder is asked to start at and stay above (kbit/s), put
    /// in the answer's fmtp line; 0 leaves the encoder to its own estimate.
    pub publisher_bitrate_kbps: u32,
    /// Largest signaling body accepted (an SDP offer is a few KiB).
    pub max_body_bytes: usize,
    /// A peer that sends no STUN for this long is gone (ICE consent, RFC 7675; also a
    /// session that never starts ICE).
    pub peer_timeout_ms: u64,
    /// A DTLS handshake that has not finished this long after its first record fails, and
    /// its session ends.
    pub dtls_timeout_ms: u64,
    /// With tokens configured, `/metrics` needs this bearer token (and is refused without
    /// one configured). On an open node `/metrics` is open.
    pub metrics_token: Option<String>,
    /// A request's head must arrive within this long of its first byte (or of the
    /// connection), and its body within `http_body_timeout_ms`.
    pub http_header_timeout_ms: u64,
    /// A request's body must arrive whole within this long (408 otherwise), so a client
    /// trickling its body holds nothing for long.
    pub http_body_timeout_ms: u64,
    /// A keep-alive connection with no request for this long is closed.
    pub http_idle_timeout_ms: u64,
    /// Viewers that negotiate transport-wide CC get the sequence on every packet, and their
    /// feedback sets the estimate their layers are fitted to (and their pacing, and probe
    /// clusters when the estimate holds them below what they asked for). On by default; off,
    /// a viewer's REMB is its estimate, which cannot rise much above what it is sent and so
    /// cannot bring it back up past a layer or two. Viewers' REMB caps the estimate either way.
    pub viewer_estimation: bool,
    /// Media workers: each takes whole rooms, and they share the UDP port. 0 (the default)
    /// is one per core the node may run on.
    pub workers: usize,
    /// UDP segmentation offload: a run of datagrams to one destination leaves as one send
    /// where the kernel has it (Linux 4.18 and later); off, one send per datagram.
    pub udp_gso: bool,
    /// While datagrams keep coming, the media socket is read at most once this often (µs),
    /// off the poller in between, so that what arrived meanwhile is read, and what it makes
    /// the node send leaves, in fuller batches; a read that finds the socket empty puts it
    /// back on the poller, and the next datagram is read at once. 0: each arrival is read
    /// at once (a wake-up and a turn of the media loop each).
    pub udp_read_spacing_us: u64,
    /// While more publishers of a room speak at once than this, only the loudest are
    /// forwarded; 0 (the default): all of them.
    pub loudest_speakers: usize,
    /// HTTPS: the certificate chain (PEM, leaf first), read again on SIGHUP. With
    /// `tls_key`; without both the node serves plain HTTP.
    pub tls_cert: Option<PathBuf>,
    /// HTTPS: the certificate's private key (PEM), read again on SIGHUP.
    pub tls_key: Option<PathBuf>,
    /// HTTPS with a fresh self-signed certificate (its fingerprint printed at start), for a
    /// quick try on a LAN; ignored when `tls_cert` is set.
    pub tls_self_signed: bool,
    /// Requests at once on one HTTP/2 connection.
    pub http2_max_streams: u32,
    /// Reverse proxies whose `X-Forwarded-For` names the client (for per-client limits and
    /// logs); from any other address the header is ignored.
    pub trusted_proxies: Vec<IpAddr>,
    /// STUN and TURN servers handed to clients (`[[ice_servers]]`), for networks that block
    /// UDP to the node.
    pub ice_servers: Vec<IceServerConfig>,
    /// Sessions per node, room and client, handshakes, offer sizes, room names, connections.
    pub limits: Limits,
    /// Participants' data channels: the largest message, a receiver's backlog, rates.
    pub data_channels: DataChannelConfig,
    /// The cluster store (`redis://host:port/db`) this node shares with the other nodes of
    /// its cluster; none: the node is alone.
    pub redis: Option<String>,
    /// This node in its cluster (`[cluster]`), with `redis` set.
    pub cluster: ClusterConfig,
}

/// The longest the media socket is left unread while datagrams keep coming, whatever
/// `udp_read_spacing_us` says: longer would hold media and feedback past what a viewer's
/// jitter buffer and estimate allow for.
pub const MAX_READ_SPACING: Duration = Duration::from_millis(20);

impl Default for NodeConfig {
    fn default() -> Self {
        let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
        Self {
            http: SocketAddr::new(loopback, 8080),
            udp: SocketAddr::new(loopback, 50_000),
            tcp: None,
            tcp_handshake_timeout_ms: 10_000,
            public_ip: None,
            tokens: Vec::new(),
            jwt_secret: None,
            keyframe_interval_ms: 500,
            // The DTLS crate warns about every TLS 1.3 extension a browser offers.
            log: "info,dtls=error".to_owned(),
            // Without bandwidth probing toward it a publisher ramps up slowly; pinning its
            // start rate lets every spatial layer flow from the first seconds.
            publisher_bitrate_kbps: 2500,
            max_body_bytes: 64 * 1024,
            peer_timeout_ms: 30_000,
            dtls_timeout_ms: 10_000,
            metrics_token: None,
            http_header_timeout_ms: 5_000,
            http_body_timeout_ms: 10_000,
            http_idle_timeout_ms: 30_000,
            viewer_estimation: true,
            workers: 0,
            udp_gso: true,
            udp_read_spacing_us: 1_000,
            loudest_speakers: 0,
            tls_cert: None,
            tls_key: None,
            tls_self_signed: false,
            http2_max_streams: 100,
            trusted_proxies: Vec::new(),
            ice_servers: Vec::new(),
            limits: Limits::default(),
            data_channels: DataChannelConfig::default(),
            redis: None,
            cluster: ClusterConfig::default(),
        }
    }
}

/// A configuration file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file, as given.
        path: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// `tls_cert` and `tls_key` name each other: one without the other is a mistake.
    #[error("tls_cert and tls_key go together: set both or neither")]
    TlsPair,
    /// `tcp` is neither empty nor an address.
    #[error("tcp = {0:?} is neither empty (off) nor an address")]
    Tcp(String),
    /// An `[[ice_servers]]` entry is unusable.
    #[error(transparent)]
    IceServer(#[from] IceServerError),
    /// The file is not TOML, or a key has a value of the wrong type or is unknown.
    #[error("bad configuration in {path}: {source}")]
    Parse {
        /// The file, as given.
        path: String,
        /// Where and what, as the TOML reader says it.
        source: Box<toml::de::Error>,
    },
}

impl NodeConfig {
    /// Reads a TOML file; keys it leaves out keep their defaults.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: name.clone(),
            source,
        })?;
        let config = Self::from_toml(&text).map_err(|source| ConfigError::Parse {
            path: name,
            source: Box::new(source),
        })?;
        for server in &config.ice_servers {
            server.validate()?;
        }
        config.tcp(config.udp)?;
        Ok(config)
    }

    /// Reads the text of a TOML configuration; keys it leaves out keep their defaults.
    pub fn from_toml(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }

    /// Where the HTTPS certificate comes from, if the node serves HTTPS.
    pub fn tls(&self) -> Result<Option<TlsSource>, ConfigError> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Ok(Some(TlsSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            })),
            (None, None) if self.tls_self_signed => {
                let mut names = vec!["localhost".to_owned(), self.http.ip().to_string()];
                names.push(self.announced_ip().to_string());
                names.dedup();
                Ok(Some(TlsSource::SelfSigned(names)))
            }
            (None, None) => Ok(None),
            _ => Err(ConfigError::TlsPair),
        }
    }

    /// Where the ICE-TCP listener binds, given where the UDP socket was bound (`udp`): the
    /// setting's address, or by default the UDP socket's (any port when the UDP one was
    /// asked for any); `None` when the setting is empty (off).
    pub fn tcp(&self, udp: SocketAddr) -> Result<Option<SocketAddr>, ConfigError> {
        match self.tcp.as_deref().map(str::trim) {
            None if self.udp.port() == 0 => Ok(Some(SocketAddr::new(udp.ip(), 0))),
            None => Ok(Some(udp)),
            Some("") => Ok(None),
            Some(addr) => addr
                .parse()
                .map(Some)
                .map_err(|_| ConfigError::Tcp(addr.to_owned())),
        }
    }

    /// [`tcp_handshake_timeout_ms`](Self::tcp_handshake_timeout_ms) as a duration.
    pub fn tcp_handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.tcp_handshake_timeout_ms)
    }

    /// The address announced in ICE candidates.
    pub fn announced_ip(&self) -> IpAddr {
        match self.public_ip {
            Some(ip) => ip,
            None if self.udp.ip().is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            None => self.udp.ip(),
        }
    }

    /// How many media workers run: as configured, or one per core the node may run on.
    pub fn workers(&self) -> usize {
        let cores = || std::thread::available_parallelism().map_or(1, usize::from);
        match self.workers {
            0 => cores(),
            n => n,
        }
        .min(MAX_WORKERS)
    }

    /// [`keyframe_interval_ms`](Self::keyframe_interval_ms) as a duration.
    pub fn keyframe_interval(&self) -> Duration {
        Duration::from_millis(self.keyframe_interval_ms)
    }

    /// [`peer_timeout_ms`](Self::peer_timeout_ms) as a duration.
    pub fn peer_timeout(&self) -> Duration {
        Duration::from_millis(self.peer_timeout_ms)
    }

    /// [`udp_read_spacing_us`](Self::udp_read_spacing_us) as a duration, at most
    /// [`MAX_READ_SPACING`].
    pub fn udp_read_spacing(&self) -> Duration {
        Duration::from_micros(self.udp_read_spacing_us).min(MAX_READ_SPACING)
    }

    /// [`dtls_timeout_ms`](Self::dtls_timeout_ms) as a duration.
    pub fn dtls_timeout(&self) -> Duration {
        Duration::from_millis(self.dtls_timeout_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_file_is_the_defaults() {
        assert_eq!(NodeConfig::from_toml(""), Ok(NodeConfig::default()));
        let defaults = NodeConfig::default();
        assert_eq!(defaults.http.to_string(), "127.0.0.1:8080");
        assert_eq!(defaults.announced_ip().to_string(), "127.0.0.1");
    }

    #[test]
    fn file_values_override_defaults() {
        let config = NodeConfig::from_toml(
            "udp = \"0.0.0.0:40000\"\npublic_ip = \"203.0.113.7\"\ntokens = [\"a\", \"b\"]\n\
             keyframe_interval_ms = 1000\n",
        )
        .expect("valid");
        assert_eq!(config.udp.port(), 40_000);
        assert_eq!(config.announced_ip().to_string(), "203.0.113.7");
        assert_eq!(config.tokens, ["a", "b"]);
        assert_eq!(config.keyframe_interval(), Duration::from_secs(1));
        assert_eq!(config.http, NodeConfig::default().http);
        assert!(config.udp_gso, "segmentation on unless turned off");
        let off = NodeConfig::from_toml("udp_gso = false").expect("valid");
        assert!(!off.udp_gso);
        assert_eq!(config.udp_read_spacing(), Duration::from_millis(1));
        let at_once = NodeConfig::from_toml("udp_read_spacing_us = 0").expect("valid");
        assert_eq!(at_once.udp_read_spacing(), Duration::ZERO);
        let long = NodeConfig::from_toml("udp_read_spacing_us = 90000").expect("valid");
        assert_eq!(long.udp_read_spacing(), MAX_READ_SPACING);
    }

    #[test]
    fn unspecified_udp_address_announces_loopback() {
        let config = NodeConfig::from_toml("udp = \"0.0.0.0:40000\"").expect("valid");
        assert_eq!(config.announced_ip().to_string(), "127.0.0.1");
    }

    #[test]
    fn tls_is_both_files_or_self_signed_or_none() {
        let config = NodeConfig::from_toml("tls_cert = \"a.pem\"").expect("valid");
        assert!(matches!(config.tls(), Err(ConfigError::TlsPair)));
        let config =
            NodeConfig::from_toml("tls_cert = \"a.pem\"\ntls_key = \"k.pem\"").expect("valid");
        assert!(matches!(config.tls(), Ok(Some(TlsSource::Files { .. }))));
        let config = NodeConfig::from_toml("tls_self_signed = true").expect("valid");
        let Ok(Some(TlsSource::SelfSigned(names))) = config.tls() else {
            panic!("self-signed: {:?}", config.tls());
        };
        assert_eq!(names, ["localhost", "127.0.0.1"]);
        assert!(matches!(NodeConfig::default().tls(), Ok(None)));
    }

    #[test]
    fn tcp_is_the_udp_address_by_default_another_or_off() {
        let udp: SocketAddr = "127.0.0.1:50000".parse().expect("an address");
        let defaults = NodeConfig::default();
        assert_eq!(defaults.tcp(udp).expect("valid"), Some(udp));
        let any = NodeConfig::from_toml("udp = \"127.0.0.1:0\"").expect("valid");
        let bound = "127.0.0.1:41234".parse().expect("an address");
        let tcp = any.tcp(bound).expect("valid").expect("on");
        assert_eq!(tcp.port(), 0, "any port, as the UDP one was asked for");
        let other = NodeConfig::from_toml("tcp = \"0.0.0.0:443\"").expect("valid");
        assert_eq!(other.tcp(udp).expect("valid"), "0.0.0.0:443".parse().ok());
        let off = NodeConfig::from_toml("tcp = \"\"").expect("valid");
        assert_eq!(off.tcp(udp).expect("valid"), None);
        let bad = NodeConfig::from_toml("tcp = \"port 443\"").expect("a string");
        assert!(matches!(bad.tcp(udp), Err(ConfigError::Tcp(_))));
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        let unknown = NodeConfig::from_toml("htp = \"127.0.0.1:1\"").expect_err("typo");
        assert!(unknown.to_string().contains("htp"), "{unknown}");
        assert!(NodeConfig::from_toml("udp = \"not an address\"").is_err());
    }
}
