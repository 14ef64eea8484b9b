//! Mirrors pkg/registry/core/secret: secrets, whose write-only `stringData` is folded into
//! `data` on create.

pub mod lister;
pub mod printer;
pub mod strategy;
