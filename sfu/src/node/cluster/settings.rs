//! The `[cluster]` settings: who this node is to the others, its lease, how sessions are
//! placed, how long a drain may take. They apply only with `redis` set.

use std::time::Duration;

use serde::Deserialize;

/// `[cluster]`: each has a default, so `redis = "..."` alone makes a cluster node.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// The node's id, the same across its restarts (its boot epochs count under it); by
    /// default its URL's host and port.
    pub node: Option<String>,
    /// Where other nodes send clients to reach this one (`https://node-1.example:8443`); by
    /// default the HTTP listener's address with the announced IP.
    pub url: Option<String>,
    /// Where the media relay of other nodes reaches this node (`ip:port`): each worker has a
    /// relay socket of its own, worker `w`'s at `port + w` (any port for port 0); by default
    /// the announced IP, on ports the kernel picks.
    pub relay: Option<String>,
    /// The secret every node of the cluster shares: it authenticates the media relay's
    /// requests and keys its links. Without it, no media is relayed between nodes.
    pub secret: Option<String>,
    /// A registration (and a home) lives this long unless the heartbeat refreshes it; a node
    /// that cannot refresh it refuses new sessions once it has run out.
    pub lease_ms: u64,
    /// How often the registration and load are refreshed.
    pub heartbeat_ms: u64,
    /// A new session for a room homed on another serving node goes there while that node is
    /// less full than this (percent of its sessions or CPU); 0: placed by load alone.
    pub prefer_home_below_percent: u32,
    /// After `SIGTERM`, the node waits this long at most for its sessions to end.
    pub drain_timeout_ms: u64,
    /// The `Retry-After` of a `503` when no node can take a new session.
    pub retry_after_s: u32,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            node: None,
            url: None,
            relay: None,
            secret: None,
            lease_ms: 3_000,
            heartbeat_ms: 1_000,
            prefer_home_below_percent: 100,
            drain_timeout_ms: 300_000,
            retry_after_s: 5,
        }
    }
}

impl ClusterConfig {
    /// [`lease_ms`](Self::lease_ms) as a duration.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms)
    }

    /// [`heartbeat_ms`](Self::heartbeat_ms) as a duration.
    pub fn heartbeat(&self) -> Duration {
        Duration::from_millis(self.heartbeat_ms)
    }

    /// [`drain_timeout_ms`](Self::drain_timeout_ms) as a duration.
    pub fn drain_timeout(&self) -> Duration {
        Duration::from_millis(self.drain_timeout_ms)
    }

    /// The lease must outlast a few heartbeats, or one late beat would cost the node its
    /// registration.
    pub fn check(&self) -> Result<(), &'static str> {
        if self.heartbeat_ms == 0 || self.lease_ms < 2 * self.heartbeat_ms {
            return Err("cluster.lease_ms must be at least twice cluster.heartbeat_ms (> 0)");
        }
        if let Some(node) = &self.node {
            if node.is_empty() || node.len() > 64 || !node.bytes().all(|b| b.is_ascii_graphic()) {
                return Err("cluster.node is 1 to 64 printable ASCII characters, no spaces");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::config::NodeConfig;

    #[test]
    fn a_cluster_is_redis_and_its_table() {
        let alone = NodeConfig::default();
        assert_eq!(
            (alone.redis, alone.cluster),
            (None, ClusterConfig::default())
        );
        let config = NodeConfig::from_toml(
            "redis = \"redis://10.0.0.5:6379/2\"\n[cluster]\nnode = \"edge-1\"\n\
             lease_ms = 5000\nprefer_home_below_percent = 0\n",
        )
        .expect("valid");
        assert_eq!(config.redis.as_deref(), Some("redis://10.0.0.5:6379/2"));
        assert_eq!(config.cluster.node.as_deref(), Some("edge-1"));
        assert_eq!(config.cluster.lease(), Duration::from_secs(5));
        assert_eq!(
            config.cluster.heartbeat(),
            Duration::from_secs(1),
            "a default"
        );
        assert_eq!(config.cluster.check(), Ok(()));
        assert!(
            NodeConfig::from_toml("[cluster]\nleas_ms = 1\n").is_err(),
            "a typo"
        );
    }

    #[test]
    fn a_lease_shorter_than_two_beats_or_a_bad_id_is_refused() {
        let short = ClusterConfig {
            lease_ms: 1_500,
            ..ClusterConfig::default()
        };
        assert!(short.check().is_err());
        let spaced = ClusterConfig {
            node: Some("edge 1".into()),
            ..ClusterConfig::default()
        };
        assert!(spaced.check().is_err());
    }
}
