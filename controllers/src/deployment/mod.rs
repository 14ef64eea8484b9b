//! Mirrors pkg/controller/deployment: the Deployment controller
//! ([`deployment_controller`]), one rollout step each sync ([`rolling`] or [`recreate`]), what
//! both use ([`sync`]), the status and its conditions ([`progress`]) and the arithmetic
//! ([`util`]).

pub mod deployment_controller;
pub mod progress;
pub mod recreate;
pub mod rolling;
pub mod sync;
pub mod util;

pub use deployment_controller::DeploymentController;
