//! Nodes of one cluster sharing a store (`redis = "redis://..."`): each registers itself with
//! its load under a short lease and a boot epoch, rooms get a home node by compare-and-set, and
//! a node that cannot take a new session sends it to one that can. Without a store configured
//! the node is alone and none of this runs. See docs/cluster.md.
//!
//! - [`store`]: the cluster store's trait and what it holds; [`memory`]: in memory, for tests;
//!   [`redis`]: on a Redis server, for production.
//! - [`placement`]: which node takes a new session, from the nodes' registrations.
//! - [`member`]: this node's part: its epoch, lease, load, and the homes it holds.
//! - [`heartbeat`]: the task that measures the load and refreshes the registration.
//! - [`drain`]: `SIGTERM` on a clustered node: no new sessions, exit once they have ended.
//! - [`http`]: new sessions' requests placed (`307`, `503`), and the cluster's metrics.
//! - [`directory`]: which node hosts which publisher of a room, for the relay to pull from.
//! - [`room_feed`]: a clustered room's state across its nodes: each node's part written
//!   under the room's home when it changed, the others' read back when told ([`notice`]) and
//!   at a slow pace, the dominant speaker decided by the home; [`room_part`]: a part and when
//!   it changed; [`redis_notices`]: the Redis store's subscription to the notices.
//! - [`relay_link`]: the media relay's control channel: its requests, answers and link keys;
//!   [`relay_http`]: the origin's route and the edge's request to it; [`relay_follow`]: the
//!   rooms followed through the directory, conference participants' pulls; [`relay_pulls`]:
//!   the pulls the media loops' cores ask for, made as they come.

pub mod directory;
pub mod drain;
pub mod heartbeat;
pub mod http;
pub mod member;
pub mod memory;
pub mod notice;
pub mod placement;
pub mod redis;
pub mod redis_notices;
pub mod relay_follow;
pub mod relay_http;
pub mod relay_link;
pub mod relay_pulls;
pub mod room_feed;
pub mod room_part;
pub mod settings;
pub mod store;

pub use member::Member;
pub use settings::ClusterConfig;
pub use store::{
    ClusterStore, Listed, Load, NodeRef, NodeState, Registration, RoomParts, StoreError,
};
