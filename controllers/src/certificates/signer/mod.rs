//! Mirrors pkg/controller/certificates/signer: the CSR signing controller ([`signer`]).

#[allow(clippy::module_inception)] // named after signer.go, as the house names files
pub mod signer;
