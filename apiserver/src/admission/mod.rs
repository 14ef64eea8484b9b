//! Mirrors k8s.io/apiserver/pkg/admission and the built-in plugins kube-apiserver enables by
//! default (plugin/pkg/admission, admission/plugin/namespace/lifecycle): what may change or
//! refuse a write after it is decoded and before it is stored.
//!
//! The chain ([`chain::Chain`], built in server.rs) runs every mutating plugin that handles the
//! request, in order, then every validating one; the first refusal ends the request.
//!
//! kubelab runs the mutating phase in two steps, because it applies a type's defaults to a new
//! object in the store's BeforeCreate, where Kubernetes' decoder has applied them before the
//! chain runs:
//! - on the request (`admit`), from the handler, before any work on the object — where Kubernetes
//!   runs the whole chain: the plugins that decide from what the request asks for
//!   (NamespaceLifecycle, which may look the namespace up; ServiceAccount, the account the
//!   pod names, from the request's object in [`interfaces::Attributes::object`]);
//! - on the object (`admit_object`), from BeforeCreate, between the defaults and PrepareForCreate:
//!   the plugins that change the pod (ServiceAccount, Priority, DefaultTolerationSeconds), on its
//!   typed form, decoded once for all of them ([`crate::registry::generic::typed::Object`]).
//!
//! A plugin implements the step it needs; in each, the plugins run in the chain's order, which
//! is kube-apiserver's. kubelab's plugins, in that order, one file each:
//!
//! 1. [`namespace_lifecycle`]: no create in a namespace that does not exist or is terminating;
//!    the system namespaces may not be deleted;
//! 2. [`service_account`]: a pod runs as a service account that exists (`default` unless it
//!    names one; it may look the account up) and gets its token, the cluster's CA and its
//!    namespace as the `kube-api-access-*` volume;
//! 3. [`priority`]: a pod's priority from its PriorityClass;
//! 4. [`default_toleration_seconds`]: a pod tolerates a not-ready or unreachable node for five
//!    minutes (`--default-not-ready-toleration-seconds`, `--default-unreachable-toleration-seconds`).
//!
//! There is no validating plugin yet (ResourceQuota, PodSecurity and the webhooks would be).
//!
//! Implementation caveats (left out on purpose):
//! - Admission runs on create and delete; no plugin here handles update or connect, so those
//!   requests do not go through it.
//! - No webhooks (MutatingAdmissionWebhook, ValidatingAdmissionWebhook) and no
//!   `--enable-admission-plugins`: the chain is fixed.
//! - The ServiceAccount plugin adds the token volume only when the API server issues tokens
//!   (`--service-account-signing-key-file`), which kube-apiserver cannot be without.
//! - Priority knows only the built-in classes; any other `priorityClassName` is left for the caller
//!   to resolve. There is no global-default PriorityClass.

pub mod chain;
pub mod default_toleration_seconds;
pub mod interfaces;
pub mod namespace_lifecycle;
pub mod node_restriction;
pub mod priority;
pub mod service_account;
