//! Graceful drain: on `SIGTERM` a clustered node stops taking sessions (they are sent to
//! other nodes), tells the others at once, and returns once its own sessions have ended or
//! the deadline has passed; then it leaves the cluster and shuts down as a lone node does.

use std::time::Duration;

use tokio::time::Instant;

use super::member::Member;
use crate::node::signaling::Signaling;

/// How often the sessions left are counted while draining.
const POLL: Duration = Duration::from_millis(250);

/// Drains until no session is left or `deadline` has passed; then leaves the cluster.
pub async fn drain(member: &Member, signaling: &Signaling, deadline: Duration) {
    member.drain();
    let until = Instant::now() + deadline;
    tracing::info!(?deadline, "draining: new sessions go to other nodes");
    loop {
        let left = match signaling.metrics().await {
            Ok(s) => s.publishers + s.viewers + s.participants,
            Err(_) => 0,
        };
        if left == 0 {
            tracing::info!("drained: no session left");
            break;
        }
        if Instant::now() >= until {
            tracing::info!(left, "drain deadline passed");
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    if let Err(e) = member.leave().await {
        tracing::warn!("leaving the cluster: {e}");
    }
}
