//! Mirrors pkg/apis/authorization: the `authorization.k8s.io/v1` reviews — questions put to the
//! API server's authorizers ("may this user do this?", "what may I do here?"), answered in the
//! object's status and never stored. Only their validation lives here; the answers are the API
//! server's (apiserver's registry/authorization).

pub mod validation;
