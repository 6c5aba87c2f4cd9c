//! The node's tests: its media core driven without sockets or clocks (sessions, rooms,
//! conferences, the wire), the `sfu serve` binary over real HTTP and UDP, and the node's fuzz
//! bodies over their seeds.

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/coturn.rs"]
#[allow(dead_code, reason = "coturn over TLS is for the HTTPS browser tests")]
mod coturn;
#[path = "../common/redis.rs"]
#[allow(
    dead_code,
    reason = "Redis on TCP on a host of its own is for the cluster's browser tests"
)]
mod redis;

mod client_limits;
mod cluster_failures;
mod cluster_http;
mod cluster_properties;
mod cluster_pulls;
mod cluster_redis;
mod cluster_relay;
mod cluster_rooms;
mod cluster_store;
mod conference;
mod data_client;
mod data_relays;
mod fixtures;
mod fuzz_bodies;
mod http;
mod http_node;
mod https;
mod ice_servers;
mod moves;
mod participants;
mod relay;
mod relay_data;
mod relay_mux;
mod rooms;
mod sessions;
mod tcp;
mod tcp_node;
mod turn;
mod viewers;
