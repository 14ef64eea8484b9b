//! Mirrors pkg/controller/daemon: the DaemonSet controller ([`daemon_controller`]), its rolling
//! update and ControllerRevision history ([`update`]), and what a daemon pod is and where it
//! should run ([`util`]).

pub mod daemon_controller;
pub mod update;
pub mod util;

pub use daemon_controller::DaemonSetsController;
