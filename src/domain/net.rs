//! IP addresses and CIDR blocks, as `TRUSTED_PROXIES` names them (docs/api.md §15).

use std::net::IpAddr;
use std::str::FromStr;

/// An address or a CIDR block (`10.0.0.0/8`, `fd00::/8`, `192.0.2.7`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

impl IpNet {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for IpNet {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let addr = IpAddr::from_str(addr)
            .map_err(|_| format!("{text:?} is not an IP address or CIDR block"))?
            .to_canonical();
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            // Digits only: `u8::from_str` would also take "+8".
            Some(p) => match p.parse::<u8>() {
                Ok(n) if n <= max && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => n,
                _ => return Err(format!("{text:?} has a prefix length outside 0-{max}")),
            },
        };
        Ok(IpNet { addr, prefix })
    }
}

/// `TRUSTED_PROXIES`: comma-separated addresses or CIDR blocks; any malformed entry is an error (the start is
/// refused rather than a proxy silently not trusted, or worse, a typo trusting everyone).
pub fn parse_trusted_proxies(list: &str) -> Result<Vec<IpNet>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(IpNet::from_str)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn blocks_contain_what_their_prefix_covers() {
        let net: IpNet = "10.1.0.0/16".parse().unwrap();
        assert!(net.contains(ip("10.1.255.3")));
        assert!(!net.contains(ip("10.2.0.1")));
        assert!(
            net.contains(ip("::ffff:10.1.0.9")),
            "an IPv4-mapped peer is its IPv4 address"
        );
        let one: IpNet = "192.0.2.7".parse().unwrap();
        assert!(one.contains(ip("192.0.2.7")) && !one.contains(ip("192.0.2.8")));
        let all: IpNet = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("203.0.113.1")) && !all.contains(ip("::1")));
        let v6: IpNet = "fd00::/8".parse().unwrap();
        assert!(v6.contains(ip("fd12::1")) && !v6.contains(ip("fe80::1")));
    }

    #[test]
    fn malformed_entries_are_refused() {
        for bad in [
            "10.0.0.0/33",
            "::/129",
            "nginx",
            "10.0.0.1/",
            "10.0.0.1/+8",
            "10.0.0.0/8,zzz",
            "1.2.3",
        ] {
            assert!(parse_trusted_proxies(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_trusted_proxies(" 127.0.0.1 , 10.0.0.0/8,").unwrap().len(), 2);
    }
}
