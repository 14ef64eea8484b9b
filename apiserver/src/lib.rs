//! # apiserver — kubelab's kube-apiserver
//!
//! The only component that talks to the store; every other component talks to it. It serves a
//! kubectl-compatible subset of the Kubernetes REST API over HTTPS on its secure port (client
//! certificates authenticate, RBAC authorizes: [`authentication`], [`authorization`]) and, for
//! teaching only, plain HTTP on an insecure port where every request is a superuser's (see
//! [`server::secure_serving`]), keeping objects as JSON in the store
//! (`kubelab store` or a real etcd 3.4+) under `--etcd-prefix`. Its layout is
//! k8s.io/apiserver's: filters, endpoints, admission, registry, storage.
//!
//! ## The flow of a request
//! 1. [`filters`]: every request to `/api` and `/apis` passes the filter chain in order — request
//!    info (verb, resource, namespace, name, subresource), panic recovery, authentication (who:
//!    the connection's client certificate, a bearer token, or anonymous; 401; then impersonation, `kubectl
//!    --as`), authorization (may they: the `--authorization-mode` authorizers, RBAC over the
//!    default policy, Node for the node agents' own pods; 403), the timeout of
//!    requests that are not long-running, the body read up to `--max-request-bytes` — and leaves
//!    its audit Event ([`audit`], with `--audit-policy-file`) and its metrics on the way out. A GET of a root or a group version is discovery
//!    ([`endpoints::discovery`]), authenticated and authorized as a path, as every other path is.
//! 2. [`endpoints`]: the router resolves `/api/v1/...` or `/apis/<g>/<v>/...` to a resource's
//!    store (namespace, name, subresource) and runs the verb's handler
//!    ([`endpoints::handlers`]): get, list, watch, create, update, patch, delete,
//!    deletecollection; or the resource's own code for a subresource such as pods/log or
//!    pods/exec ([`registry::generic::rest::SubresourceRest`]); or, for a resource with no store
//!    (the reviews: `kubectl auth can-i`, `whoami`), its create
//!    ([`registry::generic::rest::CreateOnly`]), which answers and writes nothing; an upgrade is passed to the node
//!    agent by [`proxy`], over HTTPS with the API server's client certificate
//!    ([`kubelet_client`], `--kubelet-client-certificate`). (kubectl's plain SPDY port-forward never reaches actix-web: the server
//!    takes it off the listener and tunnels it, [`registry::core::pod::portforward::serve_spdy`].)
//! 3. The handler decodes the body through the typed object (k8s-openapi; JSON, YAML or, for the
//!    kinds kubectl's generators send, protobuf: [`serializer::protobuf`]) — unknown fields
//!    become warnings, or 400 under `fieldValidation=Strict`.
//! 4. [`admission`]: on a create, update, patch or delete (and a subresource's create: an
//!    eviction, a token), the mutating plugins that decide on the request run in order
//!    (NamespaceLifecycle: the namespace exists and is not terminating; the system namespaces
//!    stay; ServiceAccount: the account a pod names exists; NodeRestriction: a node writes only
//!    its own Node, Lease and pods; CertificateApproval and CertificateSigning: approving a
//!    CertificateSigningRequest needs `approve`, writing its certificate `sign`, on its signer).
//!    A CertificateSigningRequest's create records its requestor, the request's user, in its
//!    spec (the strategy's `prepare_for_create_by`).
//! 5. [`registry`]: the resource's generic store ([`registry::generic::store::Registry`]) runs
//!    its [`registry::generic::strategy::Strategy`]. A create's BeforeCreate applies the type's
//!    defaults (the `api` crate's `SetDefaults_*`), the mutating plugins that change the object
//!    (ServiceAccount, Priority, DefaultTolerationSeconds on a pod; DefaultStorageClass and
//!    StorageObjectInUseProtection on a claim or volume), the checks of the object's writer
//!    (RBAC's escalation checks: [`registry::rbac::escalation`]), PrepareForCreate and validation (the
//!    `api` crate's `validate_*`, whose field errors become a 422's causes), then the validating
//!    plugins (CertificateSubjectRestriction: no `system:masters` certificate from the API
//!    server's client signer); an update splits spec from status (a CertificateSigningRequest
//!    three ways: the object, `/status`, `/approval`). The store writes with a Txn conditioned on the
//!    object's revision — unless the request is a dry run (`dryRun=All`, in the query or in a
//!    delete's or an eviction's DeleteOptions: [`registry::generic::options::DryRun`]), which
//!    runs every step but that write and answers what the write would have.
//! 6. [`storage`]: the store itself ([`storage::store`]); lists and watches with a
//!    resourceVersion are served by the resource's watch cache ([`storage::watch_cache`]): one
//!    store watch per resource, fanned out to every watcher. Between the JSON and the store sit
//!    the resource's transformers ([`storage::value`], from `--encryption-provider-config`:
//!    [`server::encryptionconfig`]): the values of the resources it names (Secrets, in `kubelab
//!    up`) are encrypted on every write and decrypted on every read, the watch cache's included,
//!    as `k8s:enc:aescbc:v1:<key>:` or `k8s:enc:secretbox:v1:<key>:` and ciphertext. A value read
//!    with any key but the first is stale and its next update is written even if unchanged: a
//!    key is rotated by putting the new one first and replacing every object.
//! 7. The answer is written in the first media type the client offers that the server writes
//!    ([`endpoints::negotiation`], decided before the handler runs; 406 when there is none): JSON,
//!    YAML, metadata only (`PartialObjectMetadata`), or a Table ([`printers`], with each resource's columns in its registry folder) when
//!    kubectl asks for one. Errors leave as a `metav1.Status` ([`error::Error::to_status`]).
//!
//! Beside the request flow, the server describes itself: discovery ([`endpoints::discovery`]) and
//! OpenAPI, built once per request as an [`endpoints::openapi::Spec`] (every path and operation,
//! every kind's schema) and rendered as v3 (`/openapi/v3`, a document per group-version:
//! [`endpoints::openapi`]) or v2 (`/openapi/v2`, one Swagger 2.0 document, JSON or gnostic
//! protobuf, with an ETag: [`endpoints::openapi_v2`]). kubectl reads them for `explain`, to learn
//! that the server validates fields, and to compute a client-side `apply`'s patch.
//!
//! [`server::run`] installs the resources (one line each in server.rs), starts the watch caches,
//! the compactor and the bootstrap of the system namespaces, and serves; [`config::Api`] is the
//! state every request is served with. At every start the default RBAC policy is reconciled
//! ([`registry::rbac::reconciliation`]).
//!
//! ## Public surface
//! - [`run`] and [`Options`] (what `kubelab apiserver` and `kubelab up` start it with);
//!   [`Error`] and [`Result`].
//! - The modules above, public so that their docs can be read as one; nothing outside the crate
//!   uses more than `run` and `Options`.
//!
//! ## Implementation caveats
//! - JSON storage; responses in JSON, YAML or a `meta.k8s.io/v1` Table. Protobuf is accepted
//!   only as a request body, for the kinds in `serializer::protobuf::decode` (namespaces,
//!   configmaps, secrets, serviceaccounts, services, delete options, the RBAC kinds, the reviews, CertificateSigningRequests; deployments, jobs, cronjobs and
//!   poddisruptionbudgets as far as their messages are modelled), and never written: a client that
//!   offers protobuf first (kubectl's typed clients do) is answered in the JSON it offers next,
//!   and one that offers only protobuf gets 406. `meta.k8s.io/v1beta1` Tables and
//!   `PartialObjectMetadata` are not served either (passed over the same way); their `v1` forms
//!   are. No admission webhooks.
//! - Security, so far: TLS on the secure port (HTTP/1.1 only: no HTTP/2), x509 client
//!   certificates, anonymous requests, impersonation, `AlwaysAllow`/`AlwaysDeny`/`RBAC` with the
//!   default policy reconciled at start and the escalation checks on writes of roles and
//!   bindings, `Node` with the NodeRestriction admission plugin (simplified: see
//!   [`authorization::node`] and [`admission::node_restriction`]; `kubelab up` runs `Node,RBAC`), the review APIs (SubjectAccessReview, LocalSubjectAccessReview,
//!   SelfSubjectAccessReview, SelfSubjectRulesReview, SelfSubjectReview, TokenReview), bearer
//!   tokens: service account tokens ([`serviceaccount`], issued by TokenRequest) and static ones
//!   (`--token-auth-file`), bootstrap tokens (`--enable-bootstrap-token-auth`); the audit log
//!   ([`audit`]: JSON lines, no rotation); CertificateSigningRequests with the approval, signing
//!   and subject restriction plugins (the approving and signing controllers are the controller
//!   manager's). The serving certificate is read once at
//!   start (kube-apiserver reloads it when the file changes), and a connection's client
//!   certificate is verified when it is made. kubectl validates a review it is given with
//!   `create -f` on its own side (it finds no PATCH of one in OpenAPI), which lists CRDs, which
//!   kubelab does not serve: such a create needs `--validate=false`.
//! - Encryption at rest: the `aescbc`, `secretbox` and `identity` providers only (no KMS, no
//!   `aesgcm`: refused at start). The keys are in a file beside the data (`kubelab up`'s
//!   `<data>/encryption-config.yaml`, mode 0600): a copy of the store is protected, the machine
//!   is not. The file is read once at start; nothing rewrites data under an old key by itself
//!   (a rotation is a replace of every object). Data whose key is gone stays in the store
//!   untouched and is a 500 on its GET and on a list read from the store; the watch cache leaves
//!   it out (with an error logged) so that the rest of the resource, and the server's
//!   readiness, are not held up — Kubernetes' cacher keeps failing its list instead.
//! - Defaults are applied on create only (to the new object, in BeforeCreate, before the
//!   admission plugins that change it) — except for the workload kinds and the RBAC bindings,
//!   whose strategies default updates too; Kubernetes' decoder applies them to every object it decodes, updates and
//!   patches included, before admission sees the request.
//! - Resources: namespaces, pods (+status, binding, eviction, log, exec, attach, portforward, proxy), nodes (+status, proxy), events,
//!   configmaps, secrets, serviceaccounts (+token), services (+status, proxy), endpoints, coordination.k8s.io
//!   leases, discovery.k8s.io/v1 endpointslices; apps/v1 deployments,
//!   replicasets, statefulsets (+status, scale), daemonsets (+status), controllerrevisions;
//!   batch/v1 jobs, cronjobs (+status); policy/v1 poddisruptionbudgets (+status);
//!   rbac.authorization.k8s.io/v1 roles, rolebindings, clusterroles, clusterrolebindings (no
//!   status; an aggregated ClusterRole's rules are written by the controller manager's ClusterRole
//!   aggregation controller); the create-only reviews of authorization.k8s.io/v1 and
//!   authentication.k8s.io/v1 (SelfSubjectReview also as v1beta1); certificates.k8s.io/v1
//!   certificatesigningrequests (+status, approval; `csr`); the storage API: persistentvolumes
//!   (`pv`, cluster-scoped, +status), persistentvolumeclaims (`pvc`, +status), storage.k8s.io/v1
//!   storageclasses (`sc`), csidrivers, csinodes, volumeattachments (+status) — with the
//!   DefaultStorageClass and StorageObjectInUseProtection admission plugins, the CSI sidecars'
//!   ClusterRoles in the default policy, and the Node authorizer's pod → claim → volume and
//!   VolumeAttachment → node edges (no CSIStorageCapacity, VolumeAttributesClass or
//!   PersistentVolumeClaimResize; a claim's `storage` is printed as written, not in Go's
//!   canonical Quantity form). Of the
//!   workloads' controllers, the Deployment, ReplicaSet and disruption ones run (in `controllers`); a scale
//!   takes no server-side apply. An eviction consults
//!   the pod's PodDisruptionBudget (429 when none may be disrupted; `registry/core/pod/eviction.rs`). No CRDs yet.
//! - Services take IPv4 cluster IPs only (no dual stack, no IPv6 range, no ServiceCIDR or
//!   IPAddress resources served: the IPAddress records are the allocator's, in the store only);
//!   no LoadBalancer controller (EXTERNAL-IP stays `<pending>`). The proxy subresources (pods,
//!   services, nodes) do not rewrite links in the HTML they pass back.
//!   The `default/kubernetes` Service points at this server's secure port (at its insecure port
//!   when it has none), and has no endpoint for a server bound to loopback without
//!   `--advertise-address`.
//! - Deletion propagation sets the garbage collector's finalizers (`orphan`,
//!   `foregroundDeletion`) as kube-apiserver does; the collector runs in `controllers`.
//! - Dry run: a DELETE with a body also takes `dryRun` and `gracePeriodSeconds` from the query
//!   when the body leaves them unset (kube-apiserver ignores the query then); an eviction's
//!   `deleteOptions.dryRun` is validated (kube-apiserver takes any value as a dry run), and one
//!   that differs from the query's is a 400 (kube-apiserver: 500).
//! - Server-side apply tracks field ownership in a simplified way (see apimachinery's docs).
//! - OpenAPI (v3 and v2) carries each kind's schema as k8s-openapi gives it (descriptions, types,
//!   `required`, except a kind's `metadata`, which Kubernetes does not require), with the patch
//!   strategies of the lists the server's strategic merge patch knows (`x-kubernetes-patch-*`,
//!   from apimachinery's `PatchMeta`), but not `x-kubernetes-list-type`/`-map-keys`, defaults or
//!   enums. Operations name their parameters, request body and response schema; there are no
//!   `/watch/` paths (the server has none), no `securityDefinitions`, and the v3 documents'
//!   `?hash=` is the crate version, not a hash of the document. The v2 ETag is a 128-bit FNV-1a
//!   of the JSON form (kube-openapi: SHA-512); the document is rendered on every request
//!   (kube-openapi caches it).

pub mod admission;
pub mod audit;
pub mod authentication;
pub mod authorization;
pub mod config;
pub mod controlplane;
pub mod endpoints;
pub mod error;
pub mod filters;
pub mod kubelet_client;
pub mod options;
pub mod printers;
pub mod proxy;
pub mod registry;
pub mod serializer;
pub mod server;
pub mod serviceaccount;
pub mod storage;

pub use error::{Error, Result};
pub use options::Options;
pub use server::run;
