//! Mirrors the patch machinery the API server's `patch.go` uses: evanphx/json-patch (RFC 6902),
//! apimachinery's jsonmergepatch (RFC 7386) and pkg/util/strategicpatch.
//!
//! Which one runs is chosen by the request's `Content-Type`:
//!
//! | Content-Type                                | function                  | sent by                     |
//! |---------------------------------------------|---------------------------|-----------------------------|
//! | `application/json-patch+json`               | [`json_patch`]            | `kubectl patch --type=json` |
//! | `application/merge-patch+json`              | [`merge_patch`]           | `kubectl label`, `annotate` |
//! | `application/strategic-merge-patch+json`    | [`strategic_merge_patch`] | `kubectl apply`, `edit`, `cordon` |
//! | `application/apply-patch+yaml`              | `managedfields::apply`    | `kubectl apply --server-side` |
//!
//! A strategic merge patch needs to know, for each list, how to merge it: Kubernetes reads this
//! from Go struct tags (`patchStrategy:"merge" patchMergeKey:"name"`); we keep the same facts in a
//! [`PatchMeta`] table per kind.

mod json_patch;
mod merge_patch;
mod patch_meta;
mod strategicpatch;

pub use self::json_patch::json_patch;
pub use self::merge_patch::merge_patch;
pub use self::patch_meta::{ListStrategy, PatchMeta};
pub use self::strategicpatch::strategic_merge_patch;
pub use crate::error::PatchError as Error;
