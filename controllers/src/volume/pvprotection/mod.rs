//! Mirrors pkg/controller/volume/pvprotection: the `pv-protection` controller
//! ([`pv_protection_controller`]).

pub mod pv_protection_controller;

pub use pv_protection_controller::PvProtectionController;
