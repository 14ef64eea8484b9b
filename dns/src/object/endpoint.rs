//! Mirrors CoreDNS's plugin/kubernetes/object/endpoint.go (EndpointSliceToEndpoints): an
//! EndpointSlice as DNS sees it — its Service, its ready addresses and its ports.

use std::net::IpAddr;

use k8s_openapi::api::discovery::v1 as discoveryv1;

use super::Port;

/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointSlice {
    pub namespace: String,
    pub name: String,
    /// The Service this slice belongs to (its `kubernetes.io/service-name` label).
    pub service: String,
    pub addresses: Vec<EndpointAddress>,
    pub ports: Vec<Port>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointAddress {
    pub ip: IpAddr,
    /// `endpoints[].hostname` (a StatefulSet pod's, or a pod's `spec.hostname` under a
    /// subdomain), lowercased.
    pub hostname: Option<String>,
}

impl EndpointAddress {
    /// endpointHostname: the hostname, else the address with its dots (or colons) as dashes.
    pub fn dns_label(&self) -> String {
        match &self.hostname {
            Some(h) => h.clone(),
            None => self.ip.to_string().replace(['.', ':'], "-"),
        }
    }
}

impl EndpointSlice {
    /// EndpointSliceToEndpoints: keeps only ready endpoints (a nil `ready` counts as ready, as
    /// the API documents; the EndpointSlice controller already marks every endpoint of a
    /// `publishNotReadyAddresses` Service ready) and only IP addresses (FQDN slices are skipped).
    /// `None` for a slice of no Service.
    pub fn from_api(slice: &discoveryv1::EndpointSlice) -> Option<EndpointSlice> {
        let namespace = slice.metadata.namespace.clone()?;
        let name = slice.metadata.name.clone()?;
        let service = slice.metadata.labels.as_ref()?.get(SERVICE_NAME_LABEL)?.clone();
        if slice.address_type == "FQDN" {
            return None;
        }
        let addresses = slice
            .endpoints
            .iter()
            .flatten()
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true))
            .flat_map(|e| {
                let hostname = e.hostname.as_ref().filter(|h| !h.is_empty()).map(|h| h.to_ascii_lowercase());
                e.addresses.iter().filter_map(move |a| Some(EndpointAddress { ip: a.parse().ok()?, hostname: hostname.clone() }))
            })
            .collect();
        let ports = slice
            .ports
            .iter()
            .flatten()
            .filter_map(|p| Port::new(p.name.as_deref(), p.protocol.as_deref(), p.port?))
            .collect();
        Some(EndpointSlice { namespace, name, service, addresses, ports })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort};

    #[test]
    fn keeps_ready_ip_endpoints_of_a_service() {
        let mut s = discoveryv1::EndpointSlice { address_type: "IPv4".into(), ..Default::default() };
        s.metadata.name = Some("db-abcde".into());
        s.metadata.namespace = Some("default".into());
        s.metadata.labels = Some([(SERVICE_NAME_LABEL.to_string(), "db".to_string())].into());
        let ep = |ip: &str, host: Option<&str>, ready: Option<bool>| Endpoint {
            addresses: vec![ip.into()],
            hostname: host.map(String::from),
            conditions: Some(EndpointConditions { ready, ..Default::default() }),
            ..Default::default()
        };
        s.endpoints = Some(vec![ep("10.244.0.5", Some("db-0"), Some(true)), ep("10.244.0.6", None, None), ep("10.244.0.7", None, Some(false))]);
        s.ports = Some(vec![EndpointPort { name: Some("pg".into()), port: Some(5432), ..Default::default() }]);
        let e = EndpointSlice::from_api(&s).expect("slice");
        assert_eq!(e.service, "db");
        let labels: Vec<String> = e.addresses.iter().map(EndpointAddress::dns_label).collect();
        assert_eq!(labels, ["db-0", "10-244-0-6"], "the not-ready endpoint is left out");
        assert_eq!(e.ports, [Port { name: "pg".into(), protocol: "tcp".into(), port: 5432 }]);

        s.metadata.labels = None;
        assert_eq!(EndpointSlice::from_api(&s), None, "a slice of no Service");
    }
}
