//! Mirrors pkg/kubelet/client/kubelet_client.go's `NodeConnectionInfoGetter`: where a node's agent
//! answers, for the API server's calls to it (pods/log, pods/exec, pods/attach, pods/portforward,
//! `kubelab trace`).

use serde_json::Value;

use super::strategy::NODES;
use crate::error::{Error, Result};
use crate::registry::generic::rest::Registries;

/// The node agent's address: the node's InternalIP (else its first address) and its daemon port.
pub fn node_agent_url(node: &Value) -> Option<String> {
    let port = node.pointer("/status/daemonEndpoints/kubeletEndpoint/Port").and_then(Value::as_i64).unwrap_or(10250);
    Some(format!("http://{}:{port}", node_host(node)?))
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
    Ok(base.trim_start_matches("http://").to_string())
}
