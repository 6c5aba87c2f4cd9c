//! The ICE servers of `[[ice_servers]]` as clients get them: `Link` headers on WHIP, WHEP and
//! conference answers (RFC 9725 §4.6), `GET /ice-servers/{room}` before an offer, and the
//! room's state; TURN credentials minted from the shared secret per session.

use serde_json::Value;

use crate::http_node::{node_with_config, SDP};

const AV1_OFFER: &str = include_str!("../../src/node/sdp/fixtures/publisher_av1.sdp");
const VIEWER_OFFER: &str = include_str!("../../src/node/sdp/fixtures/viewer_recvonly.sdp");

const SERVERS: &str = "[[ice_servers]]\nurls = [\"stun:stun.example.net:3478\"]\n\n\
    [[ice_servers]]\nurls = [\"turn:turn.example.net:3478?transport=udp\", \
    \"turns:turn.example.net:443?transport=tcp\"]\nsecret = \"north\"\nttl_seconds = 600\n";

/// The minted username's parts: its expiry (seconds since the epoch) and whom it names.
fn minted(link: &str) -> (u64, String) {
    let username = link
        .split("username=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("a username in {link}"));
    let (expiry, user) = username.split_once(':').expect("expiry:user");
    (expiry.parse().expect("seconds"), user.to_owned())
}

#[test]
fn answers_carry_the_ice_servers_as_link_headers_with_minted_credentials() {
    let node = node_with_config(SERVERS, &[]);
    let published = node.request("POST", "/whip/demo", &[SDP], AV1_OFFER);
    assert_eq!(published.status, 201, "{}", published.body);
    let links: Vec<&str> = published
        .headers
        .iter()
        .filter(|(n, _)| n == "link")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(links.len(), 3, "one per URL: {links:?}");
    assert_eq!(links[0], "<stun:stun.example.net:3478>; rel=\"ice-server\"");
    assert!(links[1].starts_with(
        "<turn:turn.example.net:3478?transport=udp>; rel=\"ice-server\"; username=\""
    ));
    assert!(
        links[2].contains("credential-type=\"password\""),
        "{}",
        links[2]
    );
    let (expiry, user) = minted(links[1]);
    let id = published
        .header("location")
        .and_then(|l| l.rsplit('/').next())
        .expect("an id");
    assert_eq!(user, id, "minted for the session");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after the epoch")
        .as_secs();
    assert!(
        (now + 590..=now + 610).contains(&expiry),
        "{expiry} is 600 s from {now}"
    );

    let watched = node.request("POST", "/whep/demo", &[SDP], VIEWER_OFFER);
    assert_eq!(watched.status, 201);
    let viewer_links = watched.headers.iter().filter(|(n, _)| n == "link").count();
    assert_eq!(viewer_links, 3);
}

#[test]
fn a_client_reads_the_ice_servers_before_it_offers_if_it_may_watch() {
    let node = node_with_config(&format!("tokens = [\"letmein\"]\n{SERVERS}"), &[]);
    let refused = node.request("GET", "/ice-servers/demo", &[], "");
    assert_eq!(
        refused.status, 401,
        "TURN credentials only for a caller with a grant"
    );
    let allowed = node.request(
        "GET",
        "/ice-servers/demo",
        &[("Authorization", "Bearer letmein")],
        "",
    );
    assert_eq!(allowed.status, 200, "{}", allowed.body);
    let json: Value = serde_json::from_str(&allowed.body).expect("JSON");
    let servers = json["ice_servers"].as_array().expect("a list");
    assert_eq!(servers.len(), 2);
    assert_eq!(servers[0]["urls"][0], "stun:stun.example.net:3478");
    assert!(
        servers[0].get("username").is_none(),
        "a STUN server has no credentials"
    );
    assert_eq!(servers[1]["urls"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        servers[1]["credential"].as_str().map(str::len),
        Some(28),
        "base64 of 20 bytes"
    );
    let bad_room = node.request(
        "GET",
        "/ice-servers/..",
        &[("Authorization", "Bearer letmein")],
        "",
    );
    assert_eq!(bad_room.status, 400);
}

#[test]
fn a_bad_ice_servers_entry_stops_the_node_with_the_reason() {
    let path = std::env::temp_dir().join(format!("strata-ice-{}.toml", std::process::id()));
    std::fs::write(&path, "[[ice_servers]]\nurls = [\"http://x\"]\n").expect("written");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sfu"))
        .args(["serve", "--config"])
        .arg(&path)
        .output()
        .expect("runs");
    let _ = std::fs::remove_file(&path);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("not a stun:, turn: or turns: URL"), "{text}");
}
