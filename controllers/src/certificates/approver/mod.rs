//! Mirrors pkg/controller/certificates/approver: the CSR approving controller ([`sarapprove`]).

pub mod sarapprove;
