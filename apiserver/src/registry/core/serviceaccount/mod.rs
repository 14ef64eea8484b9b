//! Mirrors pkg/registry/core/serviceaccount: service accounts (every namespace gets a `default`
//! one, written when the namespace is created: see the namespace strategy's `after_create`).

pub mod printer;
pub mod strategy;
