//! Mirrors pkg/controller/clusterroleaggregation: the ClusterRole aggregation controller
//! ([`clusterroleaggregation_controller`]), which fills each aggregated ClusterRole with the
//! rules of the ClusterRoles its selectors pick.

pub mod clusterroleaggregation_controller;

pub use clusterroleaggregation_controller::ClusterRoleAggregationController;
