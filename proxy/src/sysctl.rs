//! Mirrors the sysctl setup of kube-proxy's cmd/kube-proxy/app/server_linux.go, for the one
//! setting kubelab's pod network needs: `net.bridge.bridge-nf-call-iptables`.
//!
//! Pods on one node share the node agent's CNI bridge. When pod A reaches a Service whose chosen
//! endpoint is pod B on the same bridge, the request is routed through the node (A's gateway),
//! DNATed to B and sent back onto the bridge; B's reply to A's address is *bridged* straight to
//! A. Unless bridged traffic passes through iptables, conntrack never sees that reply, never
//! rewrites its source back to the cluster IP, and A drops it (a reply from an address it never
//! called). With the setting on (it exists once the br_netfilter module is loaded, per network
//! namespace), the reply goes through conntrack. Without it the proxier masquerades traffic to
//! cluster IPs instead ([`crate::iptables::rules::RulesConfig::bridge_netfilter`]), so that B
//! replies to the node, which un-NATs both ways.

use std::path::Path;

pub const BRIDGE_NF_CALL_IPTABLES: &str = "/proc/sys/net/bridge/bridge-nf-call-iptables";

/// Turns the setting on if this network namespace has it; returns whether it is on. The
/// br_netfilter module is not loaded from here: that would change every namespace of the host.
pub fn ensure_bridge_nf_call_iptables(path: &Path) -> bool {
    match std::fs::read_to_string(path) {
        Ok(v) if v.trim() == "1" => true,
        Ok(_) => match std::fs::write(path, "1") {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(target: "proxy::sysctl", error = %e, "cannot set net.bridge.bridge-nf-call-iptables=1; masquerading traffic to cluster IPs");
                false
            }
        },
        Err(_) => {
            tracing::warn!(target: "proxy::sysctl", "no net.bridge.bridge-nf-call-iptables (br_netfilter not loaded); masquerading traffic to cluster IPs");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_off_and_absent() {
        let dir = std::env::temp_dir().join(format!("kubelab-proxy-sysctl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("bridge-nf-call-iptables");
        std::fs::write(&p, "0\n").unwrap();
        assert!(ensure_bridge_nf_call_iptables(&p));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "1");
        assert!(!ensure_bridge_nf_call_iptables(&dir.join("absent")));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
