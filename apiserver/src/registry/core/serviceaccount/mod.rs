//! Mirrors pkg/registry/core/serviceaccount: service accounts (every namespace gets a `default`
//! one, written when the namespace is created: see the namespace strategy's `after_create`), and
//! their `token` subresource ([`token`], TokenRequest), which issues them tokens; and where a
//! token's objects are looked up when it comes back ([`tokengetter`]).

pub mod printer;
pub mod strategy;
pub mod token;
pub mod tokengetter;
