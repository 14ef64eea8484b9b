//! Mirrors pkg/controller/garbagecollector: the garbage collector ([`garbagecollector`]) over
//! the dependency graph ([`graph`]).

#[allow(clippy::module_inception)] // named after garbagecollector.go, as the house names files
pub mod garbagecollector;
pub mod graph;

pub use garbagecollector::GarbageCollector;
