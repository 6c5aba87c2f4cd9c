//! The client behind a reverse proxy: a request from a configured proxy names its client in
//! `X-Forwarded-For`, which the per-client limits and the logs then use. A request from any
//! other address is its own client, whatever its headers say (anyone can write them).

use std::net::{IpAddr, SocketAddr};

use axum::http::HeaderMap;

/// The header proxies append the address they received from to (comma-separated, oldest
/// first).
const X_FORWARDED_FOR: &str = "x-forwarded-for";

/// The request's client: `remote`, unless `remote` is a trusted proxy, in which case the
/// last address in `X-Forwarded-For` that is not itself a trusted proxy (each proxy appends
/// the address it received from, so entries left of an untrusted one could be forged). A
/// missing or malformed header leaves `remote`. The port is the proxy's, as the client's is
/// not forwarded.
pub fn client(remote: SocketAddr, headers: &HeaderMap, trusted: &[IpAddr]) -> SocketAddr {
    if !trusted.contains(&remote.ip()) {
        return remote;
    }
    let mut entries = headers
        .get_all(X_FORWARDED_FOR)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .collect::<Vec<_>>()
        .into_iter()
        .rev();
    for entry in entries.by_ref() {
        match entry.parse::<IpAddr>() {
            Ok(ip) if trusted.contains(&ip) => continue,
            Ok(ip) => return SocketAddr::new(ip, remote.port()),
            Err(_) => return remote,
        }
    }
    remote
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;
    use proptest::prelude::*;

    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append(X_FORWARDED_FOR, HeaderValue::from_str(v).expect("a value"));
        }
        map
    }

    const PROXY: &str = "10.0.0.2:40000";

    /// Whether the header text lists `ip` as one of its entries (in any spelling of it).
    fn lists(value: &str, ip: IpAddr) -> bool {
        value
            .split(',')
            .any(|e| e.trim().parse::<IpAddr>() == Ok(ip))
    }

    #[test]
    fn a_trusted_proxy_names_the_client_and_others_cannot() {
        let proxy: SocketAddr = PROXY.parse().expect("an address");
        let trusted = [proxy.ip()];
        let h = headers(&["198.51.100.9"]);
        assert_eq!(client(proxy, &h, &trusted).ip().to_string(), "198.51.100.9");
        let stranger: SocketAddr = "203.0.113.5:1234".parse().expect("an address");
        assert_eq!(client(stranger, &h, &trusted), stranger);
        assert_eq!(client(proxy, &h, &[]), proxy, "no proxy trusted");
    }

    #[test]
    fn the_rightmost_untrusted_entry_is_the_client() {
        let proxy: SocketAddr = PROXY.parse().expect("an address");
        let inner: IpAddr = "10.0.0.3".parse().expect("an address");
        let trusted = [proxy.ip(), inner];
        // A client that forged an entry, then two proxies of ours.
        let h = headers(&["1.2.3.4, 198.51.100.9", "10.0.0.3"]);
        assert_eq!(client(proxy, &h, &trusted).ip().to_string(), "198.51.100.9");
        let garbage = headers(&["not an address"]);
        assert_eq!(client(proxy, &garbage, &trusted), proxy);
        assert_eq!(client(proxy, &HeaderMap::new(), &trusted), proxy);
    }

    proptest! {
        #[test]
        fn any_header_gives_the_proxy_or_an_address_it_listed(value in "[ -~]{0,80}") {
            let proxy: SocketAddr = PROXY.parse().expect("an address");
            let Ok(v) = HeaderValue::from_str(&value) else { return Ok(()) };
            let mut map = HeaderMap::new();
            map.insert(X_FORWARDED_FOR, v);
            let got = client(proxy, &map, &[proxy.ip()]);
            prop_assert!(got == proxy || lists(&value, got.ip()));
        }

        #[test]
        fn a_listed_address_round_trips(a in any::<[u8; 4]>(), b in any::<[u16; 8]>()) {
            let proxy: SocketAddr = PROXY.parse().expect("an address");
            for ip in [IpAddr::from(a), IpAddr::from(b)] {
                let map = headers(&[&format!("192.0.2.1, {ip}")]);
                let expected = if ip == proxy.ip() { "192.0.2.1".parse().expect("ip") } else { ip };
                prop_assert_eq!(client(proxy, &map, &[proxy.ip()]).ip(), expected);
            }
        }
    }
}
