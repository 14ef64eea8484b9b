//! Mirrors k8s.io/apimachinery/pkg/runtime/serializer: request bodies in encodings other than
//! JSON and YAML (which [`crate::endpoints::request::parse_body`] reads itself).

pub mod protobuf;
