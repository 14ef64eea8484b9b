//! The CNI network configuration for this node: a bridge with host-local IPAM over the node's
//! pod CIDR, portmap for hostPorts, and loopback (the plugins Debian's
//! containernetworking-plugins ships). containerd's CRI plugin reads it from its `conf_dir` and
//! runs it inside RunPodSandbox. In Kubernetes a network add-on (flannel, calico, …) writes this
//! file; kubelab's node agent writes it itself from `--pod-cidr`.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The file name: CRI takes the first conflist in lexical order (`max_conf_num = 1`).
pub(crate) const CONFLIST_NAME: &str = "10-kubelab.conflist";

/// A pod CIDR like `10.244.1.0/24`, with the first host address as the bridge's gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodCidr {
    pub(crate) network: Ipv4Addr,
    pub(crate) prefix: u8,
}

impl PodCidr {
    pub fn parse(s: &str) -> Result<PodCidr> {
        let bad = || Error::InvalidFlag(format!("--pod-cidr {s:?}: want an IPv4 CIDR such as 10.244.1.0/24"));
        let (ip, prefix) = s.split_once('/').ok_or_else(bad)?;
        let ip: Ipv4Addr = ip.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        if !(8..=30).contains(&prefix) {
            return Err(bad());
        }
        let mask = u32::MAX << (32 - prefix);
        Ok(PodCidr { network: Ipv4Addr::from(u32::from(ip) & mask), prefix })
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// The bridge's address, the pods' default gateway: the network's first address.
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) + 1)
    }

    #[cfg(test)]
    pub(crate) fn contains(&self, ip: Ipv4Addr) -> bool {
        let mask = u32::MAX << (32 - self.prefix);
        u32::from(ip) & mask == u32::from(self.network)
    }
}

impl std::fmt::Display for PodCidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// The bridge for `cidr`: `kubelab<third octet>` (10.244.3.0/24 → `kubelab3`), so that several
/// agents on one host (the end-to-end tests) do not share a bridge.
pub fn bridge_name(cidr: &PodCidr) -> String {
    format!("kubelab{}", cidr.network.octets()[2])
}

/// The conflist text for `cidr`, with IPAM state kept in `ipam_dir`.
pub(crate) fn conflist(cidr: &PodCidr, bridge: &str, ipam_dir: &Path) -> String {
    let v = serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "kubelab",
        "plugins": [
            {
                "type": "bridge",
                "bridge": bridge,
                "isGateway": true,
                "ipMasq": true,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": cidr.to_string(), "gateway": cidr.gateway().to_string()}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": ipam_dir.to_string_lossy(),
                }
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
            {"type": "loopback"}
        ]
    });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

/// Write the conflist into `conf_dir` (atomically, and only when it changed: containerd reloads
/// on every change). Blocking; call from `spawn_blocking`.
pub fn write_conflist(conf_dir: &Path, cidr: &PodCidr, bridge: &str, ipam_dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(conf_dir).map_err(|e| Error::io(conf_dir, e))?;
    std::fs::create_dir_all(ipam_dir).map_err(|e| Error::io(ipam_dir, e))?;
    let path = conf_dir.join(CONFLIST_NAME);
    let text = conflist(cidr, bridge, ipam_dir);
    if std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
        return Ok(path);
    }
    let tmp = conf_dir.join(format!(".{CONFLIST_NAME}.tmp"));
    std::fs::write(&tmp, &text).map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
    Ok(path)
}

/// host-local keeps one file per allocated IP, holding the container (sandbox) ID. After a crash
/// those of sandboxes that no longer exist leak addresses: free them. Returns the IPs released.
/// Blocking.
pub(crate) fn release_leaked_ips(ipam_dir: &Path, live_sandboxes: &std::collections::HashSet<String>) -> Vec<String> {
    let mut released = vec![];
    let Ok(networks) = std::fs::read_dir(ipam_dir) else { return released };
    for net in networks.flatten() {
        let Ok(entries) = std::fs::read_dir(net.path()) else { continue };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.parse::<Ipv4Addr>().is_err() {
                continue; // last_reserved_ip.0, lock
            }
            let owner = std::fs::read_to_string(e.path()).unwrap_or_default();
            let id = owner.lines().next().unwrap_or_default().trim();
            if !id.is_empty() && !live_sandboxes.contains(id) && std::fs::remove_file(e.path()).is_ok() {
                released.push(name);
            }
        }
    }
    released
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_parsing_and_gateway() {
        let c = PodCidr::parse("10.244.1.7/24").expect("cidr");
        assert_eq!(c.to_string(), "10.244.1.0/24");
        assert_eq!(c.gateway(), Ipv4Addr::new(10, 244, 1, 1));
        assert!(c.contains(Ipv4Addr::new(10, 244, 1, 200)));
        assert!(!c.contains(Ipv4Addr::new(10, 244, 2, 1)));
        assert!(PodCidr::parse("10.244.1.0").is_err());
        assert!(PodCidr::parse("fe80::/64").is_err());
    }

    #[test]
    fn conflist_is_written_once_and_leaks_are_freed() {
        let dir = tempfile::tempdir().expect("tmp");
        let c = PodCidr::parse("10.244.3.0/24").expect("cidr");
        let ipam = dir.path().join("ipam");
        let p = write_conflist(&dir.path().join("net.d"), &c, "kubelab0", &ipam).expect("write");
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&p).expect("read")).expect("json");
        assert_eq!(v["plugins"][0]["ipam"]["ranges"][0][0]["gateway"], "10.244.3.1");
        let mtime = std::fs::metadata(&p).and_then(|m| m.modified()).expect("mtime");
        write_conflist(&dir.path().join("net.d"), &c, "kubelab0", &ipam).expect("rewrite");
        assert_eq!(std::fs::metadata(&p).and_then(|m| m.modified()).expect("mtime"), mtime);

        let net = ipam.join("kubelab");
        std::fs::create_dir_all(&net).expect("mkdir");
        std::fs::write(net.join("10.244.3.2"), "live\neth0").expect("w");
        std::fs::write(net.join("10.244.3.3"), "dead\neth0").expect("w");
        std::fs::write(net.join("last_reserved_ip.0"), "10.244.3.3").expect("w");
        let live = std::collections::HashSet::from(["live".to_string()]);
        assert_eq!(release_leaked_ips(&ipam, &live), ["10.244.3.3"]);
        assert!(net.join("10.244.3.2").exists() && net.join("last_reserved_ip.0").exists());
    }
}
