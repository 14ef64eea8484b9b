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
//!   pod names, from the request's object in [`interfaces::Attributes::object`];
//!   NodeRestriction, from the request's user, its object and the object it replaces). This
//!   step runs on creates, updates, patches and deletes, and on the creates of subresources the
//!   resource's code serves (pods/eviction, serviceaccounts/token, pods/binding);
//! - on the object (`admit_object`), from BeforeCreate, between the defaults and PrepareForCreate:
//!   the plugins that change the object (ServiceAccount, Priority, DefaultTolerationSeconds on a
//!   pod; DefaultStorageClass and StorageObjectInUseProtection on a claim or volume), on its
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
//! 3. [`node_restriction`]: a node (`system:node:<name>`) creates only its own mirror pods,
//!    deletes, evicts and updates the status of only the pods bound to it, writes only its own
//!    Node (not its restricted labels or its taints), its own Lease and its own CSINode, and
//!    requests tokens only bound to its own pods;
//! 4. [`priority`]: a pod's priority from its PriorityClass;
//! 5. [`default_toleration_seconds`]: a pod tolerates a not-ready or unreachable node for five
//!    minutes (`--default-not-ready-toleration-seconds`, `--default-unreachable-toleration-seconds`);
//! 6. [`storage`]: DefaultStorageClass (a new claim that names no class gets the default
//!    StorageClass; of several defaults, the newest — read from the StorageClass watch cache) and
//!    StorageObjectInUseProtection (a new claim gets `kubernetes.io/pvc-protection`, a new volume
//!    `kubernetes.io/pv-protection`), both on the object;
//! 7. [`certificates`]: CertificateApproval (approving or denying a CertificateSigningRequest
//!    needs `approve` on its signer) and CertificateSigning (writing its certificate needs
//!    `sign`), both on the request; they ask the authorizers, which the server hands them.
//!
//! One validating plugin, on the object a create is about to write: CertificateSubjectRestriction
//! ([`certificates::subjectrestriction`]: no `system:masters` certificate requested from the API
//! server's client signer). (ResourceQuota, PodSecurity and the webhooks would be others.)
//!
//! Implementation caveats (left out on purpose):
//! - Admission runs on create, update, patch and delete and on a subresource's create, not on
//!   connect (exec, attach, port-forward, proxy) nor on an update of a workload's scale. An update
//!   by patch is admitted only when a plugin handles it (the patch is then applied once more, to
//!   the object as read, for the plugins to see), and a retry after a conflict is not admitted
//!   again.
//! - NodeRestriction, CertificateApproval and CertificateSigning are validating plugins in
//!   Kubernetes, run on the object about to be written; kubelab runs them on the request, the one
//!   step that sees every operation they restrict.
//! - No webhooks (MutatingAdmissionWebhook, ValidatingAdmissionWebhook) and no
//!   `--enable-admission-plugins`: the chain is fixed.
//! - The ServiceAccount plugin adds the token volume only when the API server issues tokens
//!   (`--service-account-signing-key-file`), which kube-apiserver cannot be without.
//! - DefaultStorageClass reads the classes from the StorageClass watch cache: a class created a
//!   moment before the claim may not be seen yet. PersistentVolumeClaimResize (a claim grows only
//!   when its class allows expansion) is not in the chain, and NodeRestriction does not narrow
//!   what a node writes of a claim's status.
//! - Priority knows only the built-in classes; any other `priorityClassName` is left for the caller
//!   to resolve. There is no global-default PriorityClass.

pub mod certificates;
pub mod chain;
pub mod default_toleration_seconds;
pub mod interfaces;
pub mod namespace_lifecycle;
pub mod node_restriction;
pub mod priority;
pub mod service_account;
pub mod storage;
