//! Mirrors pkg/apis/core: the core/v1 kinds' defaulting ([`v1::defaults`]), helpers
//! ([`v1::helper`]), well-known names ([`v1::well_known`]) and validation ([`validation`]).

pub mod v1;
pub mod validation;
