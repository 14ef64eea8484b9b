//! An IPv4 CIDR, for `--cluster-cidr`, `--service-cluster-ip-range` and `--nodeport-addresses`
//! (k8s.io/utils/net's `ParseCIDRSloppy`, IPv4 only).

use std::fmt;
use std::net::Ipv4Addr;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Cidr {
    pub network: Ipv4Addr,
    pub prefix: u8,
}

impl Ipv4Cidr {
    pub fn parse(s: &str) -> Result<Ipv4Cidr, String> {
        let bad = || format!("{s:?} is not an IPv4 CIDR such as 10.96.0.0/12");
        let (ip, prefix) = s.trim().split_once('/').ok_or_else(bad)?;
        let ip: Ipv4Addr = ip.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        if prefix > 32 {
            return Err(bad());
        }
        Ok(Ipv4Cidr { network: Ipv4Addr::from(u32::from(ip) & mask(prefix)), prefix })
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & mask(self.prefix) == u32::from(self.network)
    }
}

fn mask(prefix: u8) -> u32 {
    if prefix == 0 { 0 } else { u32::MAX << (32 - prefix) }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_masks_and_contains() {
        let c = Ipv4Cidr::parse("10.100.3.4/12").unwrap();
        assert_eq!(c.to_string(), "10.96.0.0/12");
        assert!(c.contains("10.111.255.255".parse().unwrap()));
        assert!(!c.contains("10.112.0.0".parse().unwrap()));
        assert!(Ipv4Cidr::parse("0.0.0.0/0").unwrap().contains("1.2.3.4".parse().unwrap()));
        assert!(Ipv4Cidr::parse("10.0.0.0").is_err());
        assert!(Ipv4Cidr::parse("10.0.0.0/33").is_err());
    }
}
