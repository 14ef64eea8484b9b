//! Mirrors k8s.io/apimachinery: the pieces of machinery every Kubernetes component uses on API
//! objects, here applied to objects held as `serde_json::Value`.
//!
//! # Tour
//!
//! A request reaching the API server passes through this crate in roughly this order:
//!
//! 1. **Selectors** narrow a list or watch. [`labels::Selector`] parses `?labelSelector=` (and
//!    converts a `metav1.LabelSelector` such as a Deployment's `spec.selector`);
//!    [`fields::FieldSelector`] parses `?fieldSelector=`, whose `exact_match` lets the server
//!    look up only one node's pods.
//! 2. **Patches** turn a PATCH body into the new object: [`patch::json_patch`] (RFC 6902),
//!    [`patch::merge_patch`] (RFC 7386) and [`patch::strategic_merge_patch`], which merges lists
//!    by key according to a [`patch::PatchMeta`] table.
//! 3. **Server-side apply** ([`managedfields::apply`]) merges an applied configuration, detects
//!    conflicts between field managers and records ownership in `metadata.managedFields`; other
//!    writes record theirs with [`managedfields::update_managed_fields`].
//! 4. **Validation** checks the result: [`validation::validate_object_meta`] and the name, label
//!    and IP checks, reporting [`validation::FieldError`]s worded as Kubernetes words them, for
//!    the server to put into a 422 `Status`.
//!
//! Errors are in [`error`]: selector errors (400), patch errors (400 or 422), apply errors (409
//! conflict); each has `http_code()` for the server's edge.
//!
//! Every module is public: the crate is a library of these steps for the API server (all of
//! them), the scheduler (selectors) and the node agent and `api` (quantities, validation).
//!
//! # Implementation caveats
//!
//! - Patch metadata is a hand-written table ([`patch::PatchMeta::for_kind`]) instead of Go struct
//!   tags read by reflection: it covers ObjectMeta, Pod (and pod templates), Node. Any other list
//!   is replaced whole. Lists keyed by several fields (a container port by `containerPort` *and*
//!   `protocol` in server-side apply) use the single strategic-merge key.
//! - Strategic merge patch keeps Kubernetes' list ordering rules (`$setElementOrder`, patch order
//!   first, server-only items interleaved by their old position) but does not check that a patch
//!   item's type matches the schema: a scalar replacing a map simply replaces it.
//! - Server-side apply is a simplification of structured-merge-diff: no schema (types come from
//!   the JSON and the `PatchMeta` table), no version conversion of managed fields, no
//!   `subresource` entries written by `apply`, no granular maps vs atomic maps distinction (every
//!   map is granular), and conflicts are detected only on leaf values. The applied configuration
//!   is merged with the strategic merge rules. Empty maps left behind by a removal are pruned, as
//!   Go's `omitempty` would do for typed objects.
//! - The `"."` marker in FieldsV1 is written only for list items (and set values never need it);
//!   Kubernetes also writes it for maps an `Update` created.
//! - Conflict messages omit Kubernetes' ` using <apiVersion>` after the manager name.
//! - `is_valid_ip` is stricter than Kubernetes' legacy parser (no leading zeros in IPv4).
//! - Selector strings arrive URL-decoded: turning `+` into a space is the API server's job.

pub mod error;
pub mod fields;
pub mod labels;
pub mod managedfields;
pub mod patch;
pub mod resource;
pub mod validation;

pub use error::{ApplyError, Error, PatchError, Result};
