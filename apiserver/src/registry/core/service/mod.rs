//! Mirrors pkg/registry/core/service: the Service resource ([`strategy`], [`printer`]) and the
//! two pools its objects take from — cluster IPs ([`ipallocator`]) and node ports
//! ([`portallocator`]) — with the code that takes and gives back ([`alloc`]) and the loop that
//! puts the pools right after a crash between a take and a write ([`repair`]);
//! `services/proxy` ([`proxy`]); and kubelab's `/debug/trace/.../services/<name>` ([`trace`]).

pub mod alloc;
pub mod ipallocator;
pub mod portallocator;
pub mod printer;
pub mod proxy;
pub mod repair;
pub mod strategy;
pub mod trace;
