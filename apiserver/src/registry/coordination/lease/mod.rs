//! Mirrors pkg/registry/coordination/lease: leases (node heartbeats, leader election).

pub mod printer;
pub mod strategy;
