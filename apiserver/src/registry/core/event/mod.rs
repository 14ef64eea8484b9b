//! Mirrors pkg/registry/core/event: events, which expire `--event-ttl` after they were written.

pub mod printer;
pub mod strategy;
