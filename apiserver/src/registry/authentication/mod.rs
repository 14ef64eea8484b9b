//! Mirrors pkg/registry/authentication: the `authentication.k8s.io/v1` reviews, create-only
//! resources answered in their status and never stored:
//!
//! - [`selfsubjectreview`]: who am I? (`kubectl auth whoami`) — the request's user as the
//!   authenticators found it.
//! - [`tokenreview`]: whose token is this? — the bearer token authenticators asked about a token.

pub mod selfsubjectreview;
pub mod tokenreview;
