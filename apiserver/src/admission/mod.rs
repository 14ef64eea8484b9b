//! Mirrors k8s.io/apiserver/pkg/admission and the built-in plugins kube-apiserver enables by
//! default (plugin/pkg/admission, admission/plugin/namespace/lifecycle): what may change or
//! refuse a write after it is decoded and before it is stored.
//!
//! The chain ([`chain::Chain`], built in server.rs) runs every mutating plugin that handles the
//! request, in order, then every validating one; the first refusal ends the request. kubelab's
//! plugins, in kube-apiserver's order, one file each:
//!
//! 1. [`namespace_lifecycle`]: no create in a namespace that does not exist or is terminating;
//!    the system namespaces may not be deleted;
//! 2. [`service_account`]: a pod runs as `default` unless it names a service account;
//! 3. [`priority`]: a pod's priority from its PriorityClass;
//! 4. [`default_toleration_seconds`]: a pod tolerates a not-ready or unreachable node for five
//!    minutes.
//!
//! There is no validating plugin yet (ResourceQuota, PodSecurity and the webhooks would be).
//!
//! Implementation caveats (left out on purpose):
//! - Admission runs on create and delete; no plugin here handles update or connect, so those
//!   requests do not go through it.
//! - No webhooks (MutatingAdmissionWebhook, ValidatingAdmissionWebhook) and no
//!   `--enable-admission-plugins`: the chain is fixed.
//! - The ServiceAccount plugin's token volume (`kube-api-access-xxxxx` and its mounts) is not added.
//! - Priority knows only the built-in classes; any other `priorityClassName` is left for the caller
//!   to resolve. There is no global-default PriorityClass.

pub mod chain;
pub mod default_toleration_seconds;
pub mod interfaces;
pub mod namespace_lifecycle;
pub mod priority;
pub mod service_account;
