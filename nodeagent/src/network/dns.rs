//! Mirrors kubelet's pkg/kubelet/network/dns/dns.go: the resolv.conf each pod's sandbox gets
//! (the CRI `DNSConfig`), by the pod's `dnsPolicy`.
//!
//! 1. getPodDNSType: `None` → none; `ClusterFirstWithHostNet` → cluster; `ClusterFirst` →
//!    cluster, unless the pod is on the host's network (then host); `Default` → host.
//! 2. The base: none is empty; host is the node's resolv.conf (`--resolv-conf`; with an empty
//!    flag, the node's own loopback resolver); cluster is `--cluster-dns` as nameservers,
//!    `<ns>.svc.<domain> svc.<domain> <domain>` before the host's search domains, and
//!    `options ndots:5`. Cluster without `--cluster-dns` falls back to host, with a warning.
//! 3. `spec.dnsConfig` is merged in: its nameservers and searches appended (duplicates dropped),
//!    its options replacing those of the same name.
//! 4. The limits the resolver has (formDNSConfigFitsLimits): 3 nameservers, 32 search domains
//!    in at most 2048 characters; what goes over is dropped, with a warning.

use std::net::IpAddr;

use k8s_cri::v1 as api;
use k8s_openapi::api::core::v1::Pod;

/// The most nameservers a resolv.conf may list (validation.MaxDNSNameservers).
pub(crate) const MAX_DNS_NAMESERVERS: usize = 3;
/// The most search domains (validation.MaxDNSSearchPaths).
pub(crate) const MAX_DNS_SEARCH_PATHS: usize = 32;
/// The longest search line, in characters (validation.MaxDNSSearchListChars).
pub(crate) const MAX_DNS_SEARCH_LIST_CHARS: usize = 2048;

/// The event reasons the kubelet gives.
pub(crate) const MISSING_CLUSTER_DNS: &str = "MissingClusterDNS";
pub(crate) const DNS_CONFIG_FORMING: &str = "DNSConfigForming";

/// podDNSType.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PodDnsType {
    Cluster,
    Host,
    None,
}

/// A warning about a pod's DNS, for the pod's events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DnsWarning {
    pub(crate) reason: &'static str,
    pub(crate) message: String,
}

/// The kubelet's dns.Configurer: what the flags and the node's resolv.conf say.
#[derive(Clone, Debug, Default)]
pub(crate) struct Configurer {
    /// `--cluster-dns`.
    pub(crate) cluster_dns: Vec<IpAddr>,
    /// `--cluster-domain` (empty: no cluster search domains).
    pub(crate) cluster_domain: String,
    /// The node's resolv.conf as read at start; `None` when `--resolv-conf` is empty.
    pub(crate) host: Option<api::DnsConfig>,
    /// The node's IPs: with no resolv.conf, the host policy points at the node's own loopback
    /// of the same family.
    pub(crate) node_ips: Vec<IpAddr>,
}

/// getPodDNSType.
pub(crate) fn pod_dns_type(pod: &Pod) -> PodDnsType {
    let spec = pod.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    match spec.and_then(|s| s.dns_policy.as_deref()).unwrap_or("ClusterFirst") {
        "None" => PodDnsType::None,
        "ClusterFirstWithHostNet" => PodDnsType::Cluster,
        "Default" => PodDnsType::Host,
        // ClusterFirst (and anything validation would have refused).
        _ if host_network => PodDnsType::Host,
        _ => PodDnsType::Cluster,
    }
}

impl Configurer {
    /// GetPodDNS: the pod's DNS config and the warnings for its events.
    pub(crate) fn get_pod_dns(&self, pod: &Pod) -> (api::DnsConfig, Vec<DnsWarning>) {
        let mut warnings = vec![];
        // Step 1: the policy.
        let mut dns_type = pod_dns_type(pod);
        if dns_type == PodDnsType::Cluster && self.cluster_dns.is_empty() {
            let policy = pod.spec.as_ref().and_then(|s| s.dns_policy.clone()).unwrap_or_else(|| "ClusterFirst".into());
            warnings.push(DnsWarning {
                reason: MISSING_CLUSTER_DNS,
                message: format!("kubelet does not have ClusterDNS IP configured and cannot create Pod using {policy:?} policy. Falling back to \"Default\" policy."),
            });
            dns_type = PodDnsType::Host;
        }
        // Step 2: the base.
        let mut config = match dns_type {
            PodDnsType::None => api::DnsConfig::default(),
            PodDnsType::Host => self.host_config(),
            PodDnsType::Cluster => {
                let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
                let host_searches = self.host.as_ref().map(|h| h.searches.clone()).unwrap_or_default();
                api::DnsConfig {
                    servers: self.cluster_dns.iter().map(IpAddr::to_string).collect(),
                    searches: self.cluster_searches(namespace, host_searches),
                    options: vec!["ndots:5".into()],
                }
            }
        };
        // Step 3: spec.dnsConfig.
        if let Some(d) = pod.spec.as_ref().and_then(|s| s.dns_config.as_ref()) {
            config.servers = omit_duplicates(config.servers.into_iter().chain(d.nameservers.iter().flatten().cloned()));
            config.searches = omit_duplicates(config.searches.into_iter().chain(d.searches.iter().flatten().cloned()));
            for o in d.options.iter().flatten() {
                let name = o.name.clone().unwrap_or_default();
                let option = match o.value.as_deref() {
                    Some(v) if !v.is_empty() => format!("{name}:{v}"),
                    _ => name.clone(),
                };
                match config.options.iter_mut().find(|x| x.split(':').next() == Some(name.as_str())) {
                    Some(existing) => *existing = option,
                    None => config.options.push(option),
                }
            }
        }
        // Step 4: the limits.
        if config.servers.len() > MAX_DNS_NAMESERVERS {
            config.servers.truncate(MAX_DNS_NAMESERVERS);
            warnings.push(DnsWarning {
                reason: DNS_CONFIG_FORMING,
                message: format!(
                    "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: {}",
                    config.servers.join(" ")
                ),
            });
        }
        if fit_search_limits(&mut config.searches) {
            warnings.push(DnsWarning {
                reason: DNS_CONFIG_FORMING,
                message: format!(
                    "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: {}",
                    config.searches.join(" ")
                ),
            });
        }
        (config, warnings)
    }

    /// The host policy's base: the node's resolv.conf, or with none, the node's loopback.
    fn host_config(&self) -> api::DnsConfig {
        match &self.host {
            Some(h) => h.clone(),
            None => api::DnsConfig {
                servers: if self.node_ips.is_empty() {
                    vec!["127.0.0.1".into()]
                } else {
                    self.node_ips.iter().map(|ip| if ip.is_ipv6() { "::1".to_string() } else { "127.0.0.1".to_string() }).collect()
                },
                searches: vec![".".into()],
                options: vec![],
            },
        }
    }

    /// generateSearchesForDNSClusterFirst.
    fn cluster_searches(&self, namespace: &str, host_searches: Vec<String>) -> Vec<String> {
        if self.cluster_domain.is_empty() {
            return host_searches;
        }
        let d = &self.cluster_domain;
        let cluster = [format!("{namespace}.svc.{d}"), format!("svc.{d}"), d.clone()];
        omit_duplicates(cluster.into_iter().chain(host_searches))
    }
}

/// formDNSSearchFitsLimits: at most 32 search domains in at most 2048 characters (joined by
/// spaces). Whether any was dropped.
fn fit_search_limits(searches: &mut Vec<String>) -> bool {
    let before = searches.len();
    searches.truncate(MAX_DNS_SEARCH_PATHS);
    while !searches.is_empty() && searches.join(" ").len() > MAX_DNS_SEARCH_LIST_CHARS {
        searches.pop();
    }
    searches.len() != before
}

fn omit_duplicates(items: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// parseResolvConf: the nameserver, search and options lines of a resolv.conf (the last search
/// and options lines win, as the libc resolver reads them).
pub(crate) fn parse_resolv_conf(text: &str) -> api::DnsConfig {
    let mut c = api::DnsConfig::default();
    for line in text.lines() {
        let line = line.split(['#', ';']).next().unwrap_or_default();
        let mut f = line.split_whitespace();
        match f.next() {
            Some("nameserver") => c.servers.extend(f.next().map(String::from)),
            Some("search") => c.searches = f.map(String::from).collect(),
            Some("options") => c.options = f.map(String::from).collect(),
            _ => {}
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodDNSConfig, PodDNSConfigOption, PodSpec};

    fn pod(policy: Option<&str>, host_network: bool, dns_config: Option<PodDNSConfig>) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some("web".into());
        p.metadata.namespace = Some("shop".into());
        p.spec = Some(PodSpec {
            dns_policy: policy.map(String::from),
            host_network: Some(host_network),
            dns_config,
            ..Default::default()
        });
        p
    }

    fn configurer(cluster_dns: &[&str]) -> Configurer {
        Configurer {
            cluster_dns: cluster_dns.iter().map(|ip| ip.parse().unwrap()).collect(),
            cluster_domain: "cluster.local".into(),
            host: Some(parse_resolv_conf("nameserver 192.168.1.1\nsearch lan example.com\noptions ndots:2 edns0\n")),
            node_ips: vec![],
        }
    }

    fn show(c: &api::DnsConfig) -> (Vec<&str>, Vec<&str>, Vec<&str>) {
        fn v(x: &[String]) -> Vec<&str> {
            x.iter().map(String::as_str).collect()
        }
        (v(&c.servers), v(&c.searches), v(&c.options))
    }

    #[test]
    fn the_dns_type_of_each_policy() {
        let table = [
            (None, false, PodDnsType::Cluster),
            (Some("ClusterFirst"), false, PodDnsType::Cluster),
            (Some("ClusterFirst"), true, PodDnsType::Host),
            (Some("ClusterFirstWithHostNet"), true, PodDnsType::Cluster),
            (Some("ClusterFirstWithHostNet"), false, PodDnsType::Cluster),
            (Some("Default"), false, PodDnsType::Host),
            (Some("None"), true, PodDnsType::None),
        ];
        for (policy, host_network, want) in table {
            assert_eq!(pod_dns_type(&pod(policy, host_network, None)), want, "{policy:?} hostNetwork={host_network}");
        }
    }

    #[test]
    fn cluster_first_points_at_the_cluster_dns() {
        let (c, warnings) = configurer(&["10.96.0.10"]).get_pod_dns(&pod(Some("ClusterFirst"), false, None));
        assert_eq!(
            show(&c),
            (vec!["10.96.0.10"], vec!["shop.svc.cluster.local", "svc.cluster.local", "cluster.local", "lan", "example.com"], vec!["ndots:5"])
        );
        assert!(warnings.is_empty());
        // On the host's network, ClusterFirstWithHostNet does the same; ClusterFirst does not.
        let (c, _) = configurer(&["10.96.0.10"]).get_pod_dns(&pod(Some("ClusterFirstWithHostNet"), true, None));
        assert_eq!(c.servers, ["10.96.0.10"]);
        let (c, _) = configurer(&["10.96.0.10"]).get_pod_dns(&pod(Some("ClusterFirst"), true, None));
        assert_eq!(c.servers, ["192.168.1.1"]);
    }

    #[test]
    fn cluster_first_without_cluster_dns_falls_back_to_the_host_with_a_warning() {
        let (c, warnings) = configurer(&[]).get_pod_dns(&pod(None, false, None));
        assert_eq!(show(&c), (vec!["192.168.1.1"], vec!["lan", "example.com"], vec!["ndots:2", "edns0"]));
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0].reason, MISSING_CLUSTER_DNS);
    }

    #[test]
    fn default_is_the_hosts_resolv_conf_or_its_loopback() {
        let (c, _) = configurer(&["10.96.0.10"]).get_pod_dns(&pod(Some("Default"), false, None));
        assert_eq!(show(&c), (vec!["192.168.1.1"], vec!["lan", "example.com"], vec!["ndots:2", "edns0"]));
        let none = Configurer { host: None, node_ips: vec!["fd00::5".parse().unwrap()], ..configurer(&[]) };
        let (c, _) = none.get_pod_dns(&pod(Some("Default"), false, None));
        assert_eq!(show(&c), (vec!["::1"], vec!["."], vec![]));
    }

    #[test]
    fn none_takes_only_the_pods_dns_config_and_others_merge_it() {
        let dns_config = PodDNSConfig {
            nameservers: Some(vec!["1.2.3.4".into()]),
            searches: Some(vec!["my.dns.search".into(), "lan".into()]),
            options: Some(vec![
                PodDNSConfigOption { name: Some("ndots".into()), value: Some("1".into()) },
                PodDNSConfigOption { name: Some("single-request".into()), value: None },
            ]),
        };
        let (c, _) = configurer(&["10.96.0.10"]).get_pod_dns(&pod(Some("None"), false, Some(dns_config.clone())));
        assert_eq!(show(&c), (vec!["1.2.3.4"], vec!["my.dns.search", "lan"], vec!["ndots:1", "single-request"]));
        let (c, _) = configurer(&["10.96.0.10"]).get_pod_dns(&pod(Some("Default"), false, Some(dns_config.clone())));
        assert_eq!(
            show(&c),
            (vec!["192.168.1.1", "1.2.3.4"], vec!["lan", "example.com", "my.dns.search"], vec!["ndots:1", "edns0", "single-request"])
        );
        let (c, _) = configurer(&["10.96.0.10"]).get_pod_dns(&pod(None, false, Some(dns_config)));
        assert_eq!(c.servers, ["10.96.0.10", "1.2.3.4"]);
        assert_eq!(c.options, ["ndots:1", "single-request"]);
    }

    #[test]
    fn what_exceeds_the_limits_is_dropped_with_a_warning() {
        let dns_config = PodDNSConfig {
            nameservers: Some(vec!["1.1.1.1".into(), "2.2.2.2".into(), "3.3.3.3".into(), "4.4.4.4".into()]),
            searches: Some((0..40).map(|i| format!("s{i}.example")).collect()),
            options: None,
        };
        let (c, warnings) = configurer(&[]).get_pod_dns(&pod(Some("None"), false, Some(dns_config)));
        assert_eq!(c.servers, ["1.1.1.1", "2.2.2.2", "3.3.3.3"]);
        assert_eq!(c.searches.len(), MAX_DNS_SEARCH_PATHS);
        assert_eq!(warnings.iter().map(|w| w.reason).collect::<Vec<_>>(), [DNS_CONFIG_FORMING, DNS_CONFIG_FORMING]);

        let long = PodDNSConfig { searches: Some((0..10).map(|i| format!("{i}{}", "a".repeat(250))).collect()), ..Default::default() };
        let (c, _) = configurer(&[]).get_pod_dns(&pod(Some("None"), false, Some(long)));
        assert!(c.searches.join(" ").len() <= MAX_DNS_SEARCH_LIST_CHARS);
        assert_eq!(c.searches.len(), 8, "eight of 251 characters and their spaces fit in 2048");
    }
}
