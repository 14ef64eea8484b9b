//! Mirrors pkg/kubelet/certificate and client-go's util/certificate: the node agent's own client
//! certificate.
//!
//! - [`bootstrap`]: TLS bootstrap at start (`--bootstrap-kubeconfig`): when `--kubeconfig` has no
//!   good client certificate, ask the API server for one with a bootstrap token and write the
//!   kubeconfig that uses it.
//! - [`csr`]: creating a `CertificateSigningRequest` and waiting until it is signed (client-go's
//!   `util/certificate/csr`).
//! - [`certificate_store`]: `<cert-dir>/kubelet-client-<timestamp>.pem` and the
//!   `kubelet-client-current.pem` symlink (client-go's `certificate_store.go`).

pub(crate) mod bootstrap;
pub(crate) mod certificate_store;
pub(crate) mod csr;
