//! What an agent's fetch may reach (§16): `http`/`https` URLs without credentials, not `localhost`, whose every
//! address is globally routable. The classifier covers the special-purpose ranges of the IANA IPv4 and IPv6
//! registries, and the IPv6 forms that embed an IPv4 address (mapped, compatible, NAT64, 6to4) by that address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use reqwest::Url;

/// Why a URL or an address is refused; the text names the rule, never the address a name resolved to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotAllowed(pub String);

fn refuse(reason: impl Into<String>) -> NotAllowed {
    NotAllowed(reason.into())
}

/// Where a checked URL points: a literal address, or a name still to be resolved (and its addresses checked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Address(IpAddr),
    Name(String),
}

/// Checks the URL's form; `allow_private` lifts the `localhost` and address rules, never the scheme and
/// credential rules.
pub fn check_url(text: &str, allow_private: bool) -> Result<(Url, Target), NotAllowed> {
    let url = Url::parse(text.trim()).map_err(|_| refuse("the url is not a valid absolute URL"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(refuse("only http and https URLs can be fetched"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refuse("the url must not hold credentials"));
    }
    // The URL parser has already normalised numeric hosts (`2130706433`, `0x7f.1`) to dotted IPv4 and put IPv6
    // in brackets, so what does not parse as an address is a name.
    let host = url
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| refuse("the url has no host"))?;
    let target = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => Target::Address(IpAddr::V6(
            v6.parse().map_err(|_| refuse("the url's host is malformed"))?,
        )),
        None => match host.parse::<Ipv4Addr>() {
            Ok(v4) => Target::Address(IpAddr::V4(v4)),
            Err(_) => Target::Name(host.to_ascii_lowercase()),
        },
    };
    if !allow_private {
        match &target {
            Target::Address(ip) => check_address(*ip)?,
            Target::Name(name) => {
                let name = name.trim_end_matches('.');
                if name == "localhost" || name.ends_with(".localhost") {
                    return Err(refuse("localhost cannot be fetched"));
                }
            }
        }
    }
    Ok((url, target))
}

/// Refuses an address that is not globally routable.
pub fn check_address(ip: IpAddr) -> Result<(), NotAllowed> {
    match non_global(ip) {
        Some(kind) => Err(refuse(format!(
            "the url's host is {kind} address, which cannot be fetched"
        ))),
        None => Ok(()),
    }
}

/// The kind of a non-global address (with its article, for messages), or `None` for a global one.
pub fn non_global(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => non_global_v4(v4),
        IpAddr::V6(v6) => non_global_v6(v6),
    }
}

fn non_global_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        _ if ip.is_unspecified() => "an unspecified",
        (0, _, _) => "a this-network (0.0.0.0/8)",
        (127, _, _) => "a loopback",
        (10, _, _) => "a private",
        (172, 16..=31, _) => "a private",
        (192, 168, _) => "a private",
        (100, 64..=127, _) => "a shared (carrier-grade NAT)",
        (169, 254, _) => "a link-local",
        (192, 0, 0) => "an IETF protocol assignment",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "a documentation",
        (192, 88, 99) => "a 6to4 relay",
        (198, 18..=19, _) => "a benchmarking",
        (224..=239, _, _) => "a multicast",
        _ if ip.is_broadcast() => "a broadcast",
        (240..=255, _, _) => "a reserved",
        _ => return None,
    })
}

fn non_global_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let segments = ip.segments();
    let embedded_v4 = |high: usize| {
        let s = &segments[high..high + 2];
        Ipv4Addr::new((s[0] >> 8) as u8, s[0] as u8, (s[1] >> 8) as u8, s[1] as u8)
    };
    if ip.is_unspecified() {
        return Some("an unspecified");
    }
    if ip.is_loopback() {
        return Some("a loopback");
    }
    // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible, deprecated) reach the IPv4 address.
    if segments[..5] == [0; 5] && (segments[5] == 0xffff || segments[5] == 0) {
        return non_global_v4(embedded_v4(6));
    }
    // 64:ff9b::/96, the well-known NAT64 prefix, reaches the embedded IPv4 address.
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return non_global_v4(embedded_v4(6));
    }
    // 2002::/16, 6to4, reaches the IPv4 address in its next 32 bits.
    if segments[0] == 0x2002 {
        return non_global_v4(embedded_v4(1));
    }
    Some(match segments[0] {
        0x0064 if segments[1] == 0xff9b && segments[2] == 1 => "a local-use NAT64",
        0x0100 if segments[1..4] == [0, 0, 0] => "a discard-only",
        0x2001 if segments[1] < 0x0200 => "an IETF protocol assignment (Teredo, benchmarking, ORCHID)",
        0x2001 if segments[1] == 0x0db8 => "a documentation",
        0x3fff if segments[1] < 0x1000 => "a documentation",
        s if s & 0xfe00 == 0xfc00 => "a unique local",
        s if s & 0xffc0 == 0xfe80 => "a link-local",
        s if s & 0xffc0 == 0xfec0 => "a site-local",
        s if s & 0xff00 == 0xff00 => "a multicast",
        // Outside 2000::/3 nothing is assigned for global unicast.
        s if s & 0xe000 != 0x2000 => "a reserved",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_that_are_not_globally_routable_are_named() {
        for (ip, kind) in [
            ("0.0.0.0", "an unspecified"),
            ("0.1.2.3", "a this-network (0.0.0.0/8)"),
            ("127.0.0.1", "a loopback"),
            ("127.255.0.9", "a loopback"),
            ("10.1.2.3", "a private"),
            ("172.16.0.1", "a private"),
            ("172.31.255.255", "a private"),
            ("192.168.1.1", "a private"),
            ("100.64.0.1", "a shared (carrier-grade NAT)"),
            ("100.127.255.254", "a shared (carrier-grade NAT)"),
            ("169.254.169.254", "a link-local"),
            ("192.0.0.8", "an IETF protocol assignment"),
            ("192.0.2.1", "a documentation"),
            ("198.51.100.7", "a documentation"),
            ("203.0.113.9", "a documentation"),
            ("192.88.99.1", "a 6to4 relay"),
            ("198.18.0.1", "a benchmarking"),
            ("198.19.255.1", "a benchmarking"),
            ("224.0.0.1", "a multicast"),
            ("239.255.255.250", "a multicast"),
            ("240.0.0.1", "a reserved"),
            ("255.255.255.255", "a broadcast"),
            ("::", "an unspecified"),
            ("::1", "a loopback"),
            ("::ffff:127.0.0.1", "a loopback"),
            ("::ffff:169.254.169.254", "a link-local"),
            ("::ffff:10.0.0.1", "a private"),
            ("::127.0.0.1", "a loopback"),
            ("64:ff9b::a9fe:a9fe", "a link-local"),
            ("64:ff9b::7f00:1", "a loopback"),
            ("64:ff9b:1::1", "a local-use NAT64"),
            ("2002:7f00:1::", "a loopback"),
            ("2002:c0a8:101::1", "a private"),
            ("100::1", "a discard-only"),
            ("2001::1", "an IETF protocol assignment (Teredo, benchmarking, ORCHID)"),
            (
                "2001:2::1",
                "an IETF protocol assignment (Teredo, benchmarking, ORCHID)",
            ),
            ("2001:db8::1", "a documentation"),
            ("3fff::1", "a documentation"),
            ("fc00::1", "a unique local"),
            ("fd12:3456::1", "a unique local"),
            ("fe80::1", "a link-local"),
            ("fec0::1", "a site-local"),
            ("ff02::1", "a multicast"),
            ("4000::1", "a reserved"),
        ] {
            assert_eq!(non_global(ip.parse().unwrap()), Some(kind), "{ip}");
        }
    }

    #[test]
    fn global_addresses_pass() {
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "172.32.0.1",
            "100.128.0.1",
            "192.0.3.1",
            "198.20.0.1",
            "223.255.255.1",
            "2606:4700:4700::1111",
            "2a00:1450:4001::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "2001:4860:4860::8888",
        ] {
            assert_eq!(non_global(ip.parse().unwrap()), None, "{ip}");
        }
    }

    #[test]
    fn url_rules_refuse_schemes_credentials_localhost_and_literal_addresses() {
        for url in [
            "ftp://example.com/x",
            "file:///etc/passwd",
            "gopher://example.com",
            "javascript:alert(1)",
            "example.com/no-scheme",
            "https://user:secret@example.com/",
            "https://user@example.com/",
            "http://localhost:8080/",
            "http://LOCALHOST./",
            "http://api.localhost/",
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://[::1]:80/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:7f00:1]/",
            "http://169.254.169.254/latest/meta-data/",
            "http://10.0.0.1/",
            "http://[fd00::1]/",
            "http://0.0.0.0:9000/",
        ] {
            assert!(check_url(url, false).is_err(), "{url} must be refused");
        }
        let (url, target) = check_url("https://API.Example.com:8443/path?q=1", false).unwrap();
        assert_eq!(target, Target::Name("api.example.com".into()));
        assert_eq!(url.port(), Some(8443));
        assert_eq!(
            check_url("http://8.8.8.8/", false).unwrap().1,
            Target::Address("8.8.8.8".parse().unwrap())
        );
    }

    #[test]
    fn allow_private_lifts_the_address_rules_but_not_scheme_or_credentials() {
        for url in [
            "http://127.0.0.1:3000/",
            "http://localhost/",
            "http://[::1]/",
            "http://10.0.0.1/",
        ] {
            assert!(check_url(url, true).is_ok(), "{url}");
        }
        for url in ["ftp://127.0.0.1/", "http://u:p@127.0.0.1/"] {
            assert!(check_url(url, true).is_err(), "{url}");
        }
    }
}
