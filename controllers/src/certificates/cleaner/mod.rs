//! Mirrors pkg/controller/certificates/cleaner: the CSR cleaner ([`cleaner`]).

#[allow(clippy::module_inception)] // named after cleaner.go, as the house names files
pub mod cleaner;
