//! The client a request counts under for rate limits (docs/api.md §15): the TCP peer, or, when the peer is one of
//! `TRUSTED_PROXIES`, the right-most `X-Forwarded-For` address that is not a trusted proxy. From any other peer the
//! header is ignored, so a stranger cannot choose the bucket it is counted in, and behind the documented proxy every
//! client has its own.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::HeaderMap;
use axum::http::request::Parts;

use crate::domain::net::IpNet;
use crate::state::AppState;

/// The address a request from `peer` with `headers` counts under.
pub fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let peer = peer.to_canonical();
    let is_trusted = |ip: IpAddr| trusted.iter().any(|net| net.contains(ip));
    if !is_trusted(peer) {
        return peer;
    }
    // Every X-Forwarded-For line in order, each a comma-separated list; read from the right (the nearest hop).
    let mut entries: Vec<&str> = Vec::new();
    for value in headers.get_all("x-forwarded-for") {
        let Ok(value) = value.to_str() else {
            return peer;
        };
        entries.extend(value.split(','));
    }
    for entry in entries.into_iter().rev() {
        match IpAddr::from_str(entry.trim()) {
            Ok(ip) if is_trusted(ip) => continue,
            Ok(ip) => return ip.to_canonical(),
            Err(_) => return peer,
        }
    }
    peer
}

/// The client address of a request, as rate limits count it.
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub IpAddr);

impl FromRequestParts<AppState> for ClientAddr {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        // The server inserts the peer on every connection; a request built without one (a unit test) is unspecified.
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map_or(IpAddr::from([0, 0, 0, 0]), |ConnectInfo(addr)| addr.ip());
        Ok(ClientAddr(client_ip(
            peer,
            &parts.headers,
            &state.config.server.trusted_proxies,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::net::parse_trusted_proxies;
    use axum::http::HeaderValue;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn forwarded(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append("x-forwarded-for", HeaderValue::from_str(v).unwrap());
        }
        headers
    }

    #[test]
    fn the_header_counts_only_from_a_trusted_peer_and_only_its_untrusted_right_most_entry() {
        let trusted = parse_trusted_proxies("127.0.0.1,10.0.0.0/8").unwrap();
        let peer = ip("127.0.0.1");
        let cases: &[(&[&str], &str)] = &[
            (&["203.0.113.9"], "203.0.113.9"),
            (&["6.6.6.6, 203.0.113.9"], "203.0.113.9"),
            (&["203.0.113.9, 10.0.0.2"], "203.0.113.9"),
            (&["6.6.6.6", "203.0.113.9, 10.0.0.2"], "203.0.113.9"),
            (&["10.0.0.2, 10.0.0.3"], "127.0.0.1"),
            (&["not-an-ip"], "127.0.0.1"),
            (&["203.0.113.9, garbage"], "127.0.0.1"),
            (&[], "127.0.0.1"),
            (&["2001:db8::5"], "2001:db8::5"),
        ];
        for (values, want) in cases {
            assert_eq!(client_ip(peer, &forwarded(values), &trusted), ip(want), "{values:?}");
        }
        // A stranger's header is ignored.
        assert_eq!(
            client_ip(ip("198.51.100.4"), &forwarded(&["203.0.113.9"]), &trusted),
            ip("198.51.100.4")
        );
        // Without TRUSTED_PROXIES nobody is believed.
        assert_eq!(client_ip(peer, &forwarded(&["203.0.113.9"]), &[]), peer);
    }
}
