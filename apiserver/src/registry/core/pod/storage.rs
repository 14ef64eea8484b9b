//! Mirrors pkg/registry/core/pod/storage/storage.go's `PodStorage`: the subresources a pod's own
//! code serves, each by the REST interface it implements. (`status` is a view of the pod that the
//! generic handlers serve.)

use super::{binding, eviction, exec, log, portforward, proxy};
use crate::registry::generic::rest::SubresourceRest;

pub const SUBRESOURCES: &[(&str, SubresourceRest)] = &[
    ("binding", SubresourceRest::Create(binding::create)),
    ("eviction", SubresourceRest::Create(eviction::create)),
    ("log", SubresourceRest::Get(log::get)),
    ("exec", SubresourceRest::Connect(exec::connect)),
    ("attach", SubresourceRest::Connect(exec::connect)),
    ("portforward", SubresourceRest::Connect(portforward::connect)),
    ("proxy", SubresourceRest::Connect(proxy::connect)),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::core::pod::strategy::PODS;

    #[test]
    fn every_subresource_served_here_is_in_discovery() {
        for (name, _) in SUBRESOURCES {
            assert!(PODS.subresources.iter().any(|s| s.name == *name), "{name} is not in PODS.subresources");
        }
    }
}
