//! Who may publish to or view a room: static bearer tokens (RFC 6750) and HS256 JSON Web
//! Tokens (RFC 7519, RFC 7515) signed with a shared secret. With neither configured, the node
//! is open.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The only JWS header accepted: HMAC-SHA256 (RFC 7518 section 3.2). `none` and every other
/// algorithm are refused so a token cannot choose how it is checked.
const ALGORITHM: &str = "HS256";

/// The claim value of `room` that grants every room.
const ANY_ROOM: &str = "*";

/// What a request wants to do in a room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// Send media (WHIP).
    Publish,
    /// Receive media (WHEP).
    Subscribe,
}

/// Why a request is not authorized. Each maps to HTTP 401 or 403.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No `Authorization` header while tokens are configured.
    #[error("no Authorization header")]
    Missing,
    /// The header is not `Bearer <token>`, or the token is not a well-formed JWT.
    #[error("malformed token")]
    Malformed,
    /// The token is neither a configured token nor a JWT, and no JWT secret is configured.
    #[error("unknown token")]
    UnknownToken,
    /// The JWT header names an algorithm other than HS256.
    #[error("unsupported JWT algorithm")]
    UnsupportedAlgorithm,
    /// The JWT signature does not match the secret.
    #[error("bad token signature")]
    BadSignature,
    /// The JWT's `exp` has passed.
    #[error("token expired")]
    Expired,
    /// The JWT's `nbf` has not come yet.
    #[error("token not yet valid")]
    NotYetValid,
    /// The JWT is for another room.
    #[error("token is for another room")]
    WrongRoom,
    /// The JWT does not grant what is asked.
    #[error("token does not allow this")]
    NotAllowed,
}

/// The node's authorization settings.
#[derive(Clone, Default)]
pub struct Auth {
    /// Tokens that grant everything in every room.
    tokens: Vec<String>,
    /// The shared secret JWTs are signed with.
    jwt_secret: Option<Vec<u8>>,
    /// What `/metrics` takes when the node is not open.
    metrics_token: Option<String>,
}

/// Secrets stay out of logs.
impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("tokens", &self.tokens.len())
            .field("jwt_secret", &self.jwt_secret.is_some())
            .field("metrics_token", &self.metrics_token.is_some())
            .finish()
    }
}

/// The JWT claims read (RFC 7519 section 4.1 for `exp` and `nbf`).
#[derive(Deserialize)]
struct Claims {
    room: String,
    /// Who the token is for (RFC 7519 section 4.1.2): the name a participant goes by.
    sub: Option<String>,
    #[serde(default)]
    publish: bool,
    #[serde(default)]
    subscribe: bool,
    exp: Option<u64>,
    nbf: Option<u64>,
}

/// The JOSE header (RFC 7515 section 4).
#[derive(Deserialize)]
struct Header {
    alg: String,
    typ: Option<String>,
}

impl Auth {
    /// Everything is allowed.
    pub fn open() -> Self {
        Self::default()
    }

    /// Static tokens and an optional JWT secret; empty tokens are dropped, and with no token
    /// and no secret the node is open.
    pub fn new(tokens: Vec<String>, jwt_secret: Option<Vec<u8>>) -> Self {
        Self {
            tokens: tokens.into_iter().filter(|t| !t.is_empty()).collect(),
            jwt_secret: jwt_secret.filter(|s| !s.is_empty()),
            metrics_token: None,
        }
    }

    /// The bearer token `/metrics` takes once tokens are configured.
    pub fn with_metrics_token(mut self, token: Option<String>) -> Self {
        self.metrics_token = token.filter(|t| !t.is_empty());
        self
    }

    /// `/metrics`: open on an open node; otherwise only with the metrics token (and never
    /// when none is configured, since room tokens are not for reading the node's state).
    pub fn authorize_metrics(&self, authorization: Option<&str>) -> Result<(), AuthError> {
        if self.is_open() {
            return Ok(());
        }
        let token = bearer_token(authorization.ok_or(AuthError::Missing)?)?;
        match &self.metrics_token {
            Some(wanted) if constant_time_eq(wanted.as_bytes(), token.as_bytes()) => Ok(()),
            _ => Err(AuthError::UnknownToken),
        }
    }

    /// No token is configured: every request is allowed.
    pub fn is_open(&self) -> bool {
        self.tokens.is_empty() && self.jwt_secret.is_none()
    }

    /// Whether the request's `Authorization` header allows `grant` in `room` at `now_unix`
    /// seconds.
    pub fn authorize(
        &self,
        authorization: Option<&str>,
        room: &str,
        grant: Grant,
        now_unix: u64,
    ) -> Result<(), AuthError> {
        if self.is_open() {
            return Ok(());
        }
        let token = bearer_token(authorization.ok_or(AuthError::Missing)?)?;
        if self
            .tokens
            .iter()
            .any(|t| constant_time_eq(t.as_bytes(), token.as_bytes()))
        {
            return Ok(());
        }
        let secret = self.jwt_secret.as_deref().ok_or(AuthError::UnknownToken)?;
        check_claims(&verify_hs256(secret, token)?, room, grant, now_unix)
    }
}

impl Auth {
    /// The subject (`sub`) of the request's token, when it is a valid JWT with one: the name
    /// its holder goes by in a room. Checked as [`authorize`](Self::authorize) checks it.
    pub fn subject(&self, authorization: Option<&str>) -> Option<String> {
        let token = bearer_token(authorization?).ok()?;
        let claims = verify_hs256(self.jwt_secret.as_deref()?, token).ok()?;
        claims.sub
    }
}

/// The token of `Bearer <token>`; the scheme is case-insensitive (RFC 7235 section 2.1).
fn bearer_token(header: &str) -> Result<&str, AuthError> {
    let (scheme, token) = header.trim().split_once(' ').ok_or(AuthError::Malformed)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(AuthError::Malformed);
    }
    Ok(token)
}

/// Checks a compact JWS (RFC 7515 section 7.1) and returns its claims.
fn verify_hs256(secret: &[u8], token: &str) -> Result<Claims, AuthError> {
    let (signing_input, signature) = token.rsplit_once('.').ok_or(AuthError::Malformed)?;
    let (header, payload) = signing_input
        .split_once('.')
        .filter(|(_, payload)| !payload.contains('.'))
        .ok_or(AuthError::Malformed)?;
    let header: Header = decode_json(header)?;
    if header.alg != ALGORITHM || header.typ.is_some_and(|t| !t.eq_ignore_ascii_case("JWT")) {
        return Err(AuthError::UnsupportedAlgorithm);
    }
    let signature = URL_SAFE_NO_PAD
        .decode(signature)
        .map_err(|_| AuthError::Malformed)?;
    mac(secret, signing_input)
        .verify_slice(&signature)
        .map_err(|_| AuthError::BadSignature)?;
    decode_json(payload)
}

fn decode_json<T: for<'de> Deserialize<'de>>(part: &str) -> Result<T, AuthError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| AuthError::Malformed)?;
    serde_json::from_slice(&bytes).map_err(|_| AuthError::Malformed)
}

fn check_claims(claims: &Claims, room: &str, grant: Grant, now_unix: u64) -> Result<(), AuthError> {
    // A token is valid before `exp` and from `nbf` on (RFC 7519 sections 4.1.4 and 4.1.5).
    if claims.exp.is_some_and(|exp| now_unix >= exp) {
        return Err(AuthError::Expired);
    }
    if claims.nbf.is_some_and(|nbf| now_unix < nbf) {
        return Err(AuthError::NotYetValid);
    }
    if claims.room != ANY_ROOM && claims.room != room {
        return Err(AuthError::WrongRoom);
    }
    let granted = match grant {
        Grant::Publish => claims.publish,
        Grant::Subscribe => claims.subscribe,
    };
    if granted {
        Ok(())
    } else {
        Err(AuthError::NotAllowed)
    }
}

fn mac(secret: &[u8], signing_input: &str) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC accepts a key of any length");
    mac.update(signing_input.as_bytes());
    mac
}

/// Compares without stopping at the first difference, so that the time taken does not tell
/// how much of a guessed token is right. The length may show.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A compact HS256 JWT with `claims_json` as payload, for tests and the token helper.
pub fn sign_hs256(secret: &[u8], claims_json: &str) -> String {
    let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"HS256","typ":"JWT"}"#);
    let payload = URL_SAFE_NO_PAD.encode(claims_json);
    let signing_input = format!("{header}.{payload}");
    let signature = URL_SAFE_NO_PAD.encode(mac(secret, &signing_input).finalize().into_bytes());
    format!("{signing_input}.{signature}")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const SECRET: &[u8] = b"a shared secret of the deployment";
    const NOW: u64 = 1_800_000_000;

    fn jwt_auth() -> Auth {
        Auth::new(vec!["static-token".to_owned()], Some(SECRET.to_vec()))
    }

    fn bearer(token: &str) -> String {
        format!("Bearer {token}")
    }

    fn check(header: &str, room: &str, grant: Grant) -> Result<(), AuthError> {
        jwt_auth().authorize(Some(header), room, grant, NOW)
    }

    fn signed(claims: &str) -> String {
        bearer(&sign_hs256(SECRET, claims))
    }

    /// A token with `header_json` as its JOSE header, signed with the secret.
    fn with_header(header_json: &str, claims: &str) -> String {
        let header = URL_SAFE_NO_PAD.encode(header_json);
        let payload = URL_SAFE_NO_PAD.encode(claims);
        let input = format!("{header}.{payload}");
        let signature = URL_SAFE_NO_PAD.encode(mac(SECRET, &input).finalize().into_bytes());
        bearer(&format!("{input}.{signature}"))
    }

    #[test]
    fn open_mode_allows_everything() {
        let auth = Auth::open();
        assert!(auth.is_open());
        assert_eq!(auth.authorize(None, "room", Grant::Publish, NOW), Ok(()));
        assert!(Auth::new(vec![String::new()], Some(Vec::new())).is_open());
    }

    #[test]
    fn static_tokens_grant_everything() {
        let auth = Auth::new(vec!["one".to_owned(), "two".to_owned()], None);
        for grant in [Grant::Publish, Grant::Subscribe] {
            assert_eq!(
                auth.authorize(Some("Bearer two"), "any", grant, NOW),
                Ok(())
            );
            assert_eq!(
                auth.authorize(Some("bearer  one "), "other", grant, NOW),
                Ok(())
            );
        }
        assert_eq!(
            auth.authorize(Some("Bearer three"), "any", Grant::Publish, NOW),
            Err(AuthError::UnknownToken)
        );
        assert_eq!(
            auth.authorize(None, "any", Grant::Publish, NOW),
            Err(AuthError::Missing)
        );
    }

    #[test]
    fn valid_tokens_pass() {
        let publish = signed(r#"{"room":"lobby","publish":true,"exp":1800000060}"#);
        assert_eq!(check(&publish, "lobby", Grant::Publish), Ok(()));
        let subscribe = signed(r#"{"room":"*","subscribe":true,"nbf":1800000000}"#);
        assert_eq!(check(&subscribe, "anywhere", Grant::Subscribe), Ok(()));
        assert_eq!(
            check(&bearer("static-token"), "lobby", Grant::Publish),
            Ok(())
        );
    }

    #[test]
    fn claims_limit_room_grant_and_time() {
        let publish = signed(r#"{"room":"lobby","publish":true}"#);
        assert_eq!(
            check(&publish, "stage", Grant::Publish),
            Err(AuthError::WrongRoom)
        );
        assert_eq!(
            check(&publish, "lobby", Grant::Subscribe),
            Err(AuthError::NotAllowed)
        );
        let expired = signed(r#"{"room":"lobby","publish":true,"exp":1800000000}"#);
        assert_eq!(
            check(&expired, "lobby", Grant::Publish),
            Err(AuthError::Expired)
        );
        let early = signed(r#"{"room":"lobby","publish":true,"nbf":1800000001}"#);
        assert_eq!(
            check(&early, "lobby", Grant::Publish),
            Err(AuthError::NotYetValid)
        );
    }

    #[test]
    fn tampered_tokens_fail_the_signature() {
        let token = sign_hs256(SECRET, r#"{"room":"lobby","publish":false}"#);
        let (input, signature) = token.rsplit_once('.').unwrap();
        let (header, _) = input.split_once('.').unwrap();
        let forged = URL_SAFE_NO_PAD.encode(r#"{"room":"lobby","publish":true}"#);
        let tampered = bearer(&format!("{header}.{forged}.{signature}"));
        assert_eq!(
            check(&tampered, "lobby", Grant::Publish),
            Err(AuthError::BadSignature)
        );
        let other_secret = bearer(&sign_hs256(
            b"another secret",
            r#"{"room":"lobby","publish":true}"#,
        ));
        assert_eq!(
            check(&other_secret, "lobby", Grant::Publish),
            Err(AuthError::BadSignature)
        );
    }

    #[test]
    fn only_hs256_is_accepted() {
        let claims = r#"{"room":"lobby","publish":true}"#;
        for header in [
            r#"{"alg":"none","typ":"JWT"}"#,
            r#"{"alg":"HS512"}"#,
            r#"{"alg":"HS256","typ":"JWE"}"#,
        ] {
            assert_eq!(
                check(&with_header(header, claims), "lobby", Grant::Publish),
                Err(AuthError::UnsupportedAlgorithm),
                "{header}"
            );
        }
        // An unsigned token as `alg: none` writes it: an empty signature.
        let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#);
        let payload = URL_SAFE_NO_PAD.encode(claims);
        let unsigned = bearer(&format!("{header}.{payload}."));
        assert_eq!(
            check(&unsigned, "lobby", Grant::Publish),
            Err(AuthError::UnsupportedAlgorithm)
        );
        assert_eq!(
            check(
                &with_header(r#"{"alg":"HS256"}"#, claims),
                "lobby",
                Grant::Publish
            ),
            Ok(())
        );
    }

    #[test]
    fn garbage_is_malformed() {
        for header in [
            "Bearer",
            "Basic dXNlcjpwYXNz",
            "Bearer a.b",
            "Bearer a.b.c.d",
            "Bearer !!!.???.###",
            "Bearer e30.e30.e30",
        ] {
            assert_eq!(
                check(header, "lobby", Grant::Publish),
                Err(AuthError::Malformed),
                "{header}"
            );
        }
        let no_room = signed(r#"{"publish":true}"#);
        assert_eq!(
            check(&no_room, "lobby", Grant::Publish),
            Err(AuthError::Malformed)
        );
        assert_eq!(
            check("", "lobby", Grant::Publish),
            Err(AuthError::Malformed)
        );
    }

    #[test]
    fn debug_hides_secrets() {
        let shown = format!("{:?}", jwt_auth());
        assert!(
            !shown.contains("static-token") && !shown.contains("shared secret"),
            "{shown}"
        );
    }

    proptest! {
        #[test]
        fn arbitrary_headers_never_authorize(header in any::<String>(), room in "[a-z*]{0,8}") {
            let auth = jwt_auth();
            prop_assert!(auth.authorize(Some(&header), &room, Grant::Publish, NOW).is_err());
            let bearer = format!("Bearer {header}");
            prop_assert!(auth.authorize(Some(&bearer), &room, Grant::Subscribe, NOW).is_err());
        }

        #[test]
        fn dotted_base64_never_authorizes(parts in proptest::collection::vec("[A-Za-z0-9_-]{0,40}", 0..5)) {
            let token = parts.join(".");
            prop_assert!(check(&bearer(&token), "lobby", Grant::Publish).is_err());
        }
    }
}
