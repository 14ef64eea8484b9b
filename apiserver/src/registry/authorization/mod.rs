//! Mirrors pkg/registry/authorization: the `authorization.k8s.io/v1` reviews — questions put to
//! the server's authorizers, answered in the object's status and never stored (create-only
//! resources, [`crate::registry::generic::rest::CreateOnly`]):
//!
//! - [`subjectaccessreview`]: may this user (or these groups) do this? Cluster-wide; what an
//!   authorizing webhook or a node agent asks about its callers.
//! - [`localsubjectaccessreview`]: the same, in the path's namespace only.
//! - [`selfsubjectaccessreview`]: may I do this? (`kubectl auth can-i`).
//! - [`selfsubjectrulesreview`]: what may I do in this namespace? (`kubectl auth can-i --list`).
//!
//! Validation is the `api` crate's ([`api::authorization::validation`]); the attributes asked
//! about are built as a request's would be ([`util`]). A create of a review is authorized like
//! any create (`system:basic-user` lets every authenticated user make the two self reviews).
//!
//! Implementation caveats:
//! - `resourceAttributes.fieldSelector` and `labelSelector` are accepted and ignored: no
//!   kubelab authorizer decides on selectors.
//! - No admission plugin sees a review (kube-apiserver's would; none of kubelab's act on them).

pub mod localsubjectaccessreview;
pub mod selfsubjectaccessreview;
pub mod selfsubjectrulesreview;
pub mod subjectaccessreview;
pub mod util;
