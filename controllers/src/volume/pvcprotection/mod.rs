//! Mirrors pkg/controller/volume/pvcprotection: the `pvc-protection` controller
//! ([`pvc_protection_controller`]).

pub mod pvc_protection_controller;

pub use pvc_protection_controller::PvcProtectionController;
