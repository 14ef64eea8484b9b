//! Mirrors pkg/apis/coordination: the Lease kind the node heartbeat and leader election use.

pub mod validation;
