//! Mirrors pkg/kubelet/client/kubelet_client.go's `NodeConnectionInfoGetter`: where a node's agent
//! answers, for the API server's calls to it (pods/log, pods/exec, pods/attach, pods/portforward,
//! nodes/proxy, `kubelab trace`), which go over HTTPS with [`crate::kubelet_client`].

use serde_json::Value;

use super::strategy::NODES;
use crate::error::{Error, Result};
use crate::registry::generic::rest::Registries;

/// The agents' daemon port when a node reports none.
const DEFAULT_KUBELET_PORT: i64 = 10250;

/// The node agent's address: the node's InternalIP (else its first address) and its daemon port.
pub fn node_agent_url(node: &Value) -> Option<String> {
    Some(format!("https://{}:{}", node_host(node)?, kubelet_port(node)))
}

/// The daemon port the node reports.
pub fn kubelet_port(node: &Value) -> i64 {
    node.pointer("/status/daemonEndpoints/kubeletEndpoint/Port").and_then(Value::as_i64).unwrap_or(DEFAULT_KUBELET_PORT)
}

/// The node's InternalIP (else its first address) as a URL's host: bracketed if IPv6.
pub fn node_host(node: &Value) -> Option<String> {
    let addrs = node.pointer("/status/addresses").and_then(Value::as_array)?;
    let ip = addrs
        .iter()
        .find(|a| a["type"] == "InternalIP")
        .or_else(|| addrs.first())
        .and_then(|a| a.get("address"))
        .and_then(Value::as_str)?;
    Some(if ip.contains(':') { format!("[{ip}]") } else { ip.to_string() })
}

/// `host:port` of the agent on node `node_name`, for a connection of our own (exec, attach,
/// port-forward): 500 while the node has not reported an address.
pub async fn node_agent_authority(registries: &Registries, node_name: &str) -> Result<String> {
    let node = registries.of(&NODES).get(None, node_name).await?;
    let base = node_agent_url(&node)
        .ok_or_else(|| Error::Internal(format!("node {node_name} has no address yet: its node agent has not reported")))?;
    Ok(base.trim_start_matches("https://").to_string())
}
