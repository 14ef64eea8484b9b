//! Mirrors pkg/registry/core/namespace: a namespace is deleted in two stages. Deleting it marks it
//! Terminating (it carries the `kubernetes` finalizer in spec.finalizers); the namespace
//! controller deletes everything in it, then removes the finalizer through `/finalize`, and the
//! namespace goes.

pub mod printer;
pub mod strategy;
