//! `sfu serve`: the standalone node. Flags and `STRATA_*` environment variables override the
//! TOML file, which overrides the built-in defaults.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use sfu::node::config::NodeConfig;
use sfu::node::server::serve;
use tracing_subscriber::EnvFilter;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// A TOML file of settings (see docs/configuration.md); flags override it.
    #[arg(long, env = "STRATA_CONFIG")]
    config: Option<PathBuf>,
    /// HTTP listen address (WHIP, WHEP, /metrics, the demo page) [default: 127.0.0.1:8080].
    #[arg(long, env = "STRATA_HTTP")]
    http: Option<SocketAddr>,
    /// The UDP socket for all media [default: 127.0.0.1:50000].
    #[arg(long, env = "STRATA_UDP")]
    udp: Option<SocketAddr>,
    /// The ICE-TCP listener (passive candidates); empty turns it off [default: the UDP
    /// socket's address, on TCP].
    #[arg(long, env = "STRATA_TCP")]
    tcp: Option<String>,
    /// The IP address announced in ICE candidates (the UDP socket's by default).
    #[arg(long, env = "STRATA_PUBLIC_IP")]
    public_ip: Option<IpAddr>,
    /// A bearer token allowed to publish and watch (repeat, or comma-separated in the env).
    #[arg(long = "token", env = "STRATA_TOKENS", value_delimiter = ',')]
    tokens: Vec<String>,
    /// Secret of HS256 JWTs with room and publish/subscribe grants.
    #[arg(long, env = "STRATA_JWT_SECRET")]
    jwt_secret: Option<String>,
    /// With tokens configured, the bearer token `/metrics` takes (it is refused without one).
    #[arg(long, env = "STRATA_METRICS_TOKEN")]
    metrics_token: Option<String>,
    /// Least time between keyframe requests to a publisher's stream, in ms [default: 500].
    #[arg(long, env = "STRATA_KEYFRAME_INTERVAL_MS")]
    keyframe_interval_ms: Option<u64>,
    /// Log filter, e.g. `info` or `sfu=debug` [default: info].
    #[arg(long, env = "STRATA_LOG")]
    log: Option<String>,
    /// Media workers, each taking whole rooms [default: one per core the node may use].
    #[arg(long, env = "STRATA_WORKERS")]
    workers: Option<usize>,
    /// UDP segmentation offload, where the kernel has it: `--udp-gso false` sends one
    /// datagram per message [default: true].
    #[arg(long, alias = "gso", env = "STRATA_UDP_GSO", action = clap::ArgAction::Set)]
    udp_gso: Option<bool>,
    /// While datagrams keep coming, read the media socket at most once this often, in µs
    /// (0: at each arrival; at most 20000) [default: 1000].
    #[arg(long, env = "STRATA_UDP_READ_SPACING_US")]
    udp_read_spacing_us: Option<u64>,
    /// While more publishers of a room speak at once, forward only this many of the loudest
    /// [default: 0, all].
    #[arg(long, env = "STRATA_LOUDEST_SPEAKERS")]
    loudest_speakers: Option<usize>,
    /// HTTPS certificate chain, PEM (with --tls-key); read again on SIGHUP.
    #[arg(long, env = "STRATA_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// HTTPS private key, PEM (with --tls-cert); read again on SIGHUP.
    #[arg(long, env = "STRATA_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// HTTPS with a fresh self-signed certificate, for a quick try on a LAN (the node prints
    /// its fingerprint).
    #[arg(long, env = "STRATA_TLS_SELF_SIGNED")]
    tls_self_signed: bool,
}

impl ServeArgs {
    fn config(self) -> Result<NodeConfig, String> {
        let mut config = match &self.config {
            Some(path) => NodeConfig::from_file(path).map_err(|e| e.to_string())?,
            None => NodeConfig::default(),
        };
        config.http = self.http.unwrap_or(config.http);
        config.udp = self.udp.unwrap_or(config.udp);
        config.public_ip = self.public_ip.or(config.public_ip);
        config.tcp = self.tcp.or(config.tcp);
        config.tcp(config.udp).map_err(|e| e.to_string())?;
        if !self.tokens.is_empty() {
            config.tokens = self.tokens;
        }
        config.jwt_secret = self.jwt_secret.or(config.jwt_secret);
        config.metrics_token = self.metrics_token.or(config.metrics_token);
        config.keyframe_interval_ms = self
            .keyframe_interval_ms
            .unwrap_or(config.keyframe_interval_ms);
        config.log = self.log.unwrap_or(config.log);
        config.workers = self.workers.unwrap_or(config.workers);
        config.udp_gso = self.udp_gso.unwrap_or(config.udp_gso);
        config.udp_read_spacing_us = self
            .udp_read_spacing_us
            .unwrap_or(config.udp_read_spacing_us);
        config.loudest_speakers = self.loudest_speakers.unwrap_or(config.loudest_speakers);
        config.tls_cert = self.tls_cert.or(config.tls_cert);
        config.tls_key = self.tls_key.or(config.tls_key);
        config.tls_self_signed |= self.tls_self_signed;
        config.tls().map_err(|e| e.to_string())?;
        Ok(config)
    }

    pub fn run(self) -> ExitCode {
        let config = match self.config() {
            Ok(config) => config,
            Err(e) => {
                eprintln!("sfu serve: {e}");
                return ExitCode::from(2);
            }
        };
        let filter = EnvFilter::try_new(&config.log).unwrap_or_else(|_| EnvFilter::new("info"));
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(e) => {
                eprintln!("sfu serve: no async runtime: {e}");
                return ExitCode::FAILURE;
            }
        };
        match runtime.block_on(serve(config)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("sfu serve: {e}");
                ExitCode::FAILURE
            }
        }
    }
}
