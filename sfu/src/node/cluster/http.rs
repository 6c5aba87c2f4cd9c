//! New sessions placed at the door: a `POST` that opens a session (`/whip/{room}`,
//! `/whep/{room}`, `/whep/{room}/{source}`, `/rooms/{room}`) is served here, redirected with
//! `307 Temporary Redirect` to the same path on the node chosen (RFC 9725 section 4.5: a WHIP
//! client follows it, as `fetch` does, with its body), or refused with `503` and
//! `Retry-After` when no node can take it. Every other request is this node's alone. A request
//! is authorized before it is placed, so that one without a valid credential learns nothing
//! of the cluster and claims no room.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::header::{self, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};

use super::member::Member;
use super::placement::Placement;
use super::relay_link::LinkError;
use super::store::Registration;
use crate::node::auth::Grant;
use crate::node::http::caller;
use crate::node::metrics::{by_reason, counter, gauge, gauge_by};
use crate::node::signaling::{JoinTaken, Signaling};

/// What the placement layer needs: the member, signaling (to authorize), and the
/// `Retry-After` of its `503`.
#[derive(Debug, Clone)]
pub struct Door {
    /// This node in the cluster.
    pub member: Arc<Member>,
    /// This node's signaling, whose credentials a request must carry.
    pub signaling: Arc<Signaling>,
    /// Seconds a refused client waits before it tries again.
    pub retry_after: u32,
}

/// The middleware: places the requests that open a session, passes the others on.
pub async fn place(State(door): State<Door>, mut request: Request, next: Next) -> Response {
    let Some((room, grant)) = session_room(request.method(), request.uri().path()) else {
        return next.run(request).await;
    };
    if let Some(ConnectInfo(client)) = request.extensions().get::<ConnectInfo<SocketAddr>>() {
        let caller = caller(request.headers(), *client);
        if let Err(refused) = door.signaling.authorize(caller, room, grant) {
            return refused.into_response();
        }
        // Placing may ask the store: a client past its rate is refused before.
        if let Err(refused) = door.signaling.take_join(caller) {
            return refused.into_response();
        }
    }
    let room = room.to_owned();
    request.extensions_mut().insert(JoinTaken);
    match door.member.place(&room).await {
        Placement::Here => next.run(request).await,
        Placement::Redirect(url) => {
            let target = request.uri().path_and_query().map_or("/", |p| p.as_str());
            let location = format!("{}{target}", url.trim_end_matches('/'));
            let mut response = StatusCode::TEMPORARY_REDIRECT.into_response();
            if let Ok(value) = HeaderValue::from_str(&location) {
                response.headers_mut().insert(header::LOCATION, value);
            }
            response
        }
        Placement::Unavailable => {
            let text = "no node of the cluster can take a session now\n";
            let mut response = (StatusCode::SERVICE_UNAVAILABLE, text).into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(door.retry_after));
            response
        }
    }
}

/// `GET /cluster/nodes`: the URLs of the cluster's nodes that take sessions now (this one
/// first, if it does), as this node last read the others: where a client whose node is
/// gone starts again (the demo page reads them, for the day its own node is the one gone).
pub async fn nodes(Extension(member): Extension<Arc<Member>>) -> Json<NodeList> {
    let status = member.status();
    let here = (status.attached && !status.draining).then(|| member.identity().url.clone());
    let others = member
        .peers()
        .into_iter()
        .filter(Registration::takes_sessions);
    Json(NodeList {
        nodes: here.into_iter().chain(others.map(|r| r.url)).collect(),
    })
}

/// The body of `GET /cluster/nodes`.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct NodeList {
    /// The URLs, as each node registered its own.
    pub nodes: Vec<String>,
}

/// The room of a request that opens a session and the grant it needs, or `None` for any
/// other request.
pub fn session_room<'a>(method: &Method, path: &'a str) -> Option<(&'a str, Grant)> {
    if method != Method::POST {
        return None;
    }
    let mut parts = path.strip_prefix('/')?.split('/');
    let (route, room, rest) = (parts.next()?, parts.next()?, parts.next());
    let grant = match (route, rest) {
        ("whip", None) => Grant::Publish,
        ("whep" | "rooms", None) => Grant::Subscribe,
        ("whep", Some(_)) if parts.next().is_none() => Grant::Subscribe,
        _ => return None,
    };
    (!room.is_empty()).then_some((room, grant))
}

/// The member's series in the Prometheus text format, appended to `/metrics`.
pub fn render(member: &Member, out: &mut String) {
    let status = member.status();
    let attached = "1 while the node's registration stands (it may take sessions).";
    gauge(
        out,
        "cluster_attached",
        attached,
        usize::from(status.attached),
    );
    let draining = "1 while the node drains.";
    gauge(
        out,
        "cluster_draining",
        draining,
        usize::from(status.draining),
    );
    let epoch = "The node's boot epoch in the cluster.";
    gauge(out, "cluster_epoch", epoch, status.epoch as usize);
    let others = "Other nodes that take sessions, as last read.";
    gauge(out, "cluster_serving_nodes", others, status.serving_others);
    gauge(
        out,
        "cluster_homes",
        "Rooms homed on this node.",
        status.homes,
    );
    let c = member.counters();
    let load = |n: &std::sync::atomic::AtomicU64| n.load(Ordering::Relaxed);
    by_reason(
        out,
        "cluster_placements_total",
        "New sessions placed, by outcome: here, redirected (307), unavailable (503).",
        [
            ("here", load(&c.here)),
            ("redirected", load(&c.redirected)),
            ("unavailable", load(&c.unavailable)),
        ],
    );
    by_reason(
        out,
        "cluster_heartbeat_failures_total",
        "Heartbeats that failed: the store unavailable, or the node fenced by a newer boot.",
        [
            ("store_unavailable", load(&c.store_unavailable)),
            ("fenced", load(&c.fenced)),
        ],
    );
    by_reason(
        out,
        "cluster_room_feed_failures_total",
        "Rooms' parts not exchanged: the store unavailable, another node's part unreadable, \
         a notice refused, the subscription to notices lost.",
        [
            ("store_unavailable", load(&c.feed_unavailable)),
            ("unreadable_part", load(&c.parts_unreadable)),
            ("unreadable_notice", load(&c.notices_refused)),
            ("subscription_lost", load(&c.subscription_lost)),
        ],
    );
    let sent = "Notices of a room's change sent to the room's other nodes.";
    counter(
        out,
        "cluster_room_notices_sent_total",
        sent,
        load(&c.notices_sent),
    );
    let received = "Notices of a room's change received from its other nodes.";
    let received_n = load(&c.notices_received);
    counter(
        out,
        "cluster_room_notices_received_total",
        received,
        received_n,
    );
    // An answer's track is the edge's to refuse: never a request's.
    let refused = LinkError::LABELS.into_iter().zip(&c.relay_refused);
    let refused = refused.filter(|(reason, _)| *reason != "bad_track");
    by_reason(
        out,
        "cluster_relay_requests_refused_total",
        "Requests of other nodes' relays refused before a relay was looked at: not signed \
         with the cluster's secret, too old, malformed, a relay of a room's data naming a \
         publisher, a bad node id, a room's name this node does not serve.",
        refused.map(|(reason, n)| (reason, load(n))),
    );
    let late = "Joins that went on before the relay's pulls they asked for were done (3 s: \
                an origin slow to answer, or other pulls ahead); the pulls finish behind them.";
    let late_n = load(&c.join_pulls_late);
    counter(out, "cluster_join_pulls_late_total", late, late_n);
    let epochs = "Boot epochs taken (the first registration and each after a lapse).";
    counter(out, "cluster_epochs_total", epochs, load(&c.epochs));
    peers(&member.peers(), out);
}

/// Each other node's state and load as its registration said when last read: one label set
/// per node of the cluster.
fn peers(peers: &[Registration], out: &mut String) {
    type Field = fn(&Registration) -> u64;
    let series: [(&str, &str, Field); 5] = [
        (
            "cluster_node_serving",
            "1 while another node takes sessions (serving, not full), as last read.",
            |r| u64::from(r.takes_sessions()),
        ),
        (
            "cluster_node_sessions",
            "Sessions on another node, as its last heartbeat said.",
            |r| u64::from(r.load.sessions),
        ),
        (
            "cluster_node_capacity",
            "Sessions another node takes at most (its limits.sessions).",
            |r| u64::from(r.load.capacity),
        ),
        (
            "cluster_node_cpu_percent",
            "Another node's CPU time over its last heartbeat, in percent of its cores.",
            |r| u64::from(r.load.cpu_percent),
        ),
        (
            "cluster_node_outbound_kbps",
            "What another node sent over its last heartbeat, kbit/s.",
            |r| r.load.outbound_kbps,
        ),
    ];
    for (name, help, field) in series {
        let samples = peers.iter().map(|r| (r.node.as_str(), field(r)));
        gauge_by(out, name, help, "node", samples);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::cluster::{Load, NodeState};

    #[test]
    fn each_peer_has_its_series() {
        let peer = |node: &str, state| Registration {
            node: node.to_owned(),
            epoch: 1,
            url: format!("http://{node}.test"),
            relay: None,
            state,
            load: Load {
                sessions: 3,
                capacity: 10,
                cpu_percent: 40,
                outbound_kbps: 2_500,
            },
        };
        let mut out = String::new();
        peers(
            &[
                peer("b", NodeState::Serving),
                peer("c\"", NodeState::Draining),
            ],
            &mut out,
        );
        for line in [
            "strata_cluster_node_serving{node=\"b\"} 1",
            "strata_cluster_node_serving{node=\"c\\\"\"} 0",
            "strata_cluster_node_sessions{node=\"b\"} 3",
            "strata_cluster_node_capacity{node=\"b\"} 10",
            "strata_cluster_node_cpu_percent{node=\"b\"} 40",
            "strata_cluster_node_outbound_kbps{node=\"c\\\"\"} 2500",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} in {out}");
        }
    }

    #[test]
    fn only_posts_that_open_a_session_are_placed() {
        let post = Method::POST;
        assert_eq!(session_room(&post, "/whip/a"), Some(("a", Grant::Publish)));
        assert_eq!(
            session_room(&post, "/whep/a"),
            Some(("a", Grant::Subscribe))
        );
        assert_eq!(
            session_room(&post, "/whep/a/alice"),
            Some(("a", Grant::Subscribe))
        );
        assert_eq!(
            session_room(&post, "/rooms/a"),
            Some(("a", Grant::Subscribe))
        );
        assert_eq!(session_room(&post, "/whip/a/123"), None, "not a route");
        assert_eq!(session_room(&post, "/rooms/a/123"), None);
        assert_eq!(session_room(&post, "/whep/a/b/c"), None);
        assert_eq!(session_room(&post, "/whip/"), None);
        assert_eq!(session_room(&post, "/metrics"), None);
        assert_eq!(session_room(&Method::GET, "/rooms/a"), None);
        assert_eq!(session_room(&Method::DELETE, "/whip/a"), None);
    }
}
