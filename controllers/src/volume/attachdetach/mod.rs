//! Mirrors pkg/controller/volume/attachdetach: the attach-detach controller (`attachdetach`) for
//! CSI volumes — its pure desired state and reconciler ([`reconciler`]) and its watches and
//! writes ([`attach_detach_controller`]).

pub mod attach_detach_controller;
pub mod reconciler;

pub use attach_detach_controller::AttachDetachController;
