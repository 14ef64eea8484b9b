//! Mirrors pkg/controller/endpoint: the Endpoints controller ([`endpoints_controller`]), with
//! what it shares with the EndpointSlice controller ([`controller_utils`], from
//! pkg/controller/util/endpoint) and the trigger times it annotates ([`trigger_time_tracker`]).

pub mod controller_utils;
pub mod endpoints_controller;
pub mod trigger_time_tracker;

pub use endpoints_controller::EndpointsController;
