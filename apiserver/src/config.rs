//! Mirrors k8s.io/apiserver/pkg/server/config.go: what every request is served with ([`Api`]: the
//! installed resources, the admission chain, the options).
//!
//! Its own module, below the router and the filters: every handler reads [`Api`], while
//! server.rs, which builds it, imports every handler (through the filters and the router) and
//! every resource.

use serde_json::Value;

use crate::admission::chain::Chain;
use crate::audit::Auditor;
use crate::authentication::Authenticator;
use crate::authentication::user::UserInfo;
use crate::authorization::authorizer::Authorizer;
use crate::authorization::rbac::rule::DefaultRuleResolver;
use crate::error::Error;
use crate::options::Options;
use crate::kubelet_client::KubeletClient;
use crate::registry::generic::rest::Registries;
use crate::registry::generic::store::{Registry, name_of};
use crate::registry::generic::strategy::Writer;
use crate::serviceaccount::jwt::TokenIssuer;
use crate::storage::store::Storage;

/// The server's state shared by every request. (The metrics are app data of their own: only the
/// filters and `/metrics` use them.)
pub struct Api {
    pub registries: Registries,
    pub storage: Storage,
    /// For the proxies' `/debug/trace` (`kubelab trace` of a Service).
    pub http: reqwest::Client,
    /// For the node agents (logs, exec, attach, port-forward, nodes/proxy, `kubelab trace`).
    pub kubelet: KubeletClient,
    pub options: Options,
    pub admission: Chain,
    /// The authorizers of `--authorization-mode`, after the privileged groups (shared with the
    /// admission plugins that ask them: CertificateApproval, CertificateSigning).
    pub authorizer: std::sync::Arc<dyn Authorizer>,
    /// RBAC's rules over the watch caches, for the escalation checks of writes of roles and
    /// bindings (whatever the authorization mode, as in Kubernetes).
    pub rule_resolver: DefaultRuleResolver,
    /// What authenticates a request its connection does not: bearer tokens, anonymous.
    pub authenticator: Authenticator,
    /// What issues service account tokens (TokenRequest), with `--service-account-signing-key-file`.
    pub token_issuer: Option<TokenIssuer>,
    /// The audit policy and log, with `--audit-policy-file`.
    pub auditor: Option<Auditor>,
    /// Whether the default RBAC policy has been reconciled and reached the watch caches (until
    /// then `/readyz` says not ready, as kube-apiserver's `rbac/bootstrap-roles` hook does).
    pub rbac_bootstrapped: std::sync::atomic::AtomicBool,
}

impl Api {
    /// `user` as the writer of an object, for the policy checks of its strategy.
    pub fn writer<'a>(&'a self, user: &'a UserInfo) -> Writer<'a> {
        Writer { user, authorizer: self.authorizer.as_ref(), rules: &self.rule_resolver }
    }

    /// What follows a create: the objects that come with the new one (the strategy's
    /// `after_create`). One that exists already is left as it is; one that cannot be written is
    /// logged, and the create still succeeds.
    pub async fn after_create(&self, registry: &Registry, created: &Value) {
        for (info, obj) in registry.strategy.after_create(created) {
            let namespace = obj.pointer("/metadata/namespace").and_then(Value::as_str).map(String::from);
            let name = name_of(&obj).to_string();
            match self.registries.of(info).create(namespace.as_deref(), obj).await {
                Ok(_) | Err(Error::AlreadyExists { .. }) => {}
                Err(e) => tracing::warn!(target: "apiserver", namespace, kind = info.kind, name, error = %e, "could not create an object that comes with a new one"),
            }
        }
    }
}
