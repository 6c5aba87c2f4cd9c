//! The ICE servers the node hands its clients (`[[ice_servers]]`): STUN and TURN servers run
//! beside it, for clients on networks that block UDP to the node. A TURN server configured
//! with a shared secret (its REST API scheme, as coturn's `use-auth-secret`) gets credentials
//! minted per session that expire on their own; one with a static username and credential
//! gets those. Clients get them as `Link` headers on WHIP and WHEP answers (RFC 9725 §4.6) and
//! as JSON in the conference's join response and room state.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha1::Sha1;

/// How long minted credentials last unless configured: a session's ICE restarts within it.
const DEFAULT_TTL_SECONDS: u64 = 24 * 60 * 60;

/// One `[[ice_servers]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IceServerConfig {
    /// `stun:`, `turn:` or `turns:` URLs (RFC 7064, RFC 7065), e.g.
    /// `turns:turn.example.net:443?transport=tcp`.
    pub urls: Vec<String>,
    /// A static username, with `credential`.
    #[serde(default)]
    pub username: Option<String>,
    /// A static password, with `username`.
    #[serde(default)]
    pub credential: Option<String>,
    /// The TURN server's shared secret: credentials are minted per session from it.
    #[serde(default)]
    pub secret: Option<String>,
    /// How long minted credentials are valid, in seconds.
    #[serde(default)]
    pub ttl_seconds: Option<u64>,
}

/// What is wrong with an `[[ice_servers]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IceServerError {
    /// An entry without URLs.
    #[error("an ice_servers entry has no urls")]
    NoUrls,
    /// A URL that is not `stun:`, `turn:` or `turns:`, or has a character a `Link` header
    /// cannot carry.
    #[error("ice_servers: {0:?} is not a stun:, turn: or turns: URL")]
    BadUrl(String),
    /// A username without a credential or the other way round, or both with a secret.
    #[error("ice_servers: give username and credential together, or a secret, not both")]
    Credentials,
}

/// An ICE server as one client gets it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IceServer {
    /// As configured.
    pub urls: Vec<String>,
    /// For a TURN server: static, or minted (`<expiry>:<user>`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// For a TURN server: static, or the minted password.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
}

impl IceServerConfig {
    /// Checks an entry as read from the configuration.
    pub fn validate(&self) -> Result<(), IceServerError> {
        if self.urls.is_empty() {
            return Err(IceServerError::NoUrls);
        }
        if let Some(bad) = self.urls.iter().find(|url| !is_ice_url(url)) {
            return Err(IceServerError::BadUrl(bad.clone()));
        }
        match (&self.username, &self.credential, &self.secret) {
            (Some(_), Some(_), None) | (None, None, _) => Ok(()),
            _ => Err(IceServerError::Credentials),
        }
    }

    /// The server as the client `user` gets it at `now`: a secret mints a username that
    /// expires `ttl` from now and its HMAC-SHA1 password (the TURN REST API scheme).
    pub fn for_client(&self, user: &str, now: SystemTime) -> IceServer {
        let (username, credential) = match &self.secret {
            Some(secret) => {
                let ttl = Duration::from_secs(self.ttl_seconds.unwrap_or(DEFAULT_TTL_SECONDS));
                let expiry = (now + ttl)
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let username = format!("{expiry}:{user}");
                let password = mint_password(secret.as_bytes(), &username);
                (Some(username), Some(password))
            }
            None => (self.username.clone(), self.credential.clone()),
        };
        IceServer {
            urls: self.urls.clone(),
            username,
            credential,
        }
    }
}

impl IceServer {
    /// Its `Link` header values, one per URL (RFC 9725 §4.6).
    pub fn link_values(&self) -> impl Iterator<Item = String> + '_ {
        self.urls.iter().map(|url| {
            let mut value = format!("<{url}>; rel=\"ice-server\"");
            if let (Some(username), Some(credential)) = (&self.username, &self.credential) {
                value.push_str(&format!(
                    "; username=\"{}\"; credential=\"{}\"; credential-type=\"password\"",
                    quoted(username),
                    quoted(credential)
                ));
            }
            value
        })
    }
}

/// The TURN REST API password of `username`: base64 of its HMAC-SHA1 under the shared secret.
fn mint_password(secret: &[u8], username: &str) -> String {
    let mut mac = Hmac::<Sha1>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(username.as_bytes());
    STANDARD.encode(mac.finalize().into_bytes())
}

fn is_ice_url(url: &str) -> bool {
    let scheme_ok = ["stun:", "stuns:", "turn:", "turns:"]
        .iter()
        .any(|scheme| url.starts_with(scheme));
    scheme_ok
        && url
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b"<>\"".contains(&b))
}

/// A quoted-string's content (RFC 9110 §5.6.4): backslash and quote escaped. A configured
/// username has no other character that needs it; a minted one is digits, a colon, the
/// session's user name and base64.
fn quoted(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(secret: Option<&str>) -> IceServerConfig {
        IceServerConfig {
            urls: vec!["turn:turn.example.net:3478?transport=udp".to_owned()],
            username: None,
            credential: None,
            secret: secret.map(str::to_owned),
            ttl_seconds: Some(600),
        }
    }

    #[test]
    fn a_secret_mints_an_expiring_username_and_its_hmac() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let server = turn(Some("north")).for_client("p42", now);
        assert_eq!(server.username.as_deref(), Some("1700000600:p42"));
        // HMAC-SHA1("north", "1700000600:p42"), base64: computed independently with
        // `printf %s 1700000600:p42 | openssl dgst -sha1 -hmac north -binary | base64`.
        assert_eq!(
            server.credential.as_deref(),
            Some("fewyWGbtREDNyj+0ZM5e+b62D9U=")
        );
        let links: Vec<String> = server.link_values().collect();
        assert_eq!(
            links[0],
            format!(
                "<turn:turn.example.net:3478?transport=udp>; rel=\"ice-server\"; \
                 username=\"1700000600:p42\"; credential=\"{}\"; credential-type=\"password\"",
                server.credential.as_deref().unwrap_or_default()
            )
        );
    }

    #[test]
    fn static_credentials_and_stun_servers_pass_through() {
        let mut config = turn(None);
        config.username = Some("u".to_owned());
        config.credential = Some("p\"w".to_owned());
        let server = config.for_client("p1", SystemTime::now());
        assert_eq!(server.username.as_deref(), Some("u"));
        assert!(server
            .link_values()
            .all(|l| l.contains("credential=\"p\\\"w\"")));
        let stun = IceServerConfig {
            urls: vec!["stun:stun.example.net".to_owned()],
            ..turn(None)
        };
        let link: Vec<String> = stun
            .for_client("p1", SystemTime::now())
            .link_values()
            .collect();
        assert_eq!(link, ["<stun:stun.example.net>; rel=\"ice-server\""]);
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        assert_eq!(
            IceServerConfig {
                urls: vec![],
                ..turn(None)
            }
            .validate(),
            Err(IceServerError::NoUrls)
        );
        let http = IceServerConfig {
            urls: vec!["http://x".to_owned()],
            ..turn(None)
        };
        assert!(matches!(http.validate(), Err(IceServerError::BadUrl(_))));
        let half = IceServerConfig {
            username: Some("u".to_owned()),
            ..turn(None)
        };
        assert_eq!(half.validate(), Err(IceServerError::Credentials));
        assert_eq!(turn(Some("s")).validate(), Ok(()));
    }
}
