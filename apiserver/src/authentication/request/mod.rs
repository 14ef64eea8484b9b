//! Mirrors k8s.io/apiserver/pkg/authentication/request: the authenticators that read a request's
//! credentials. What the connection carries is worked out when it is made ([`Connection`], kept
//! in the connection's data by the server), what a request carries when it comes.

pub mod x509;

use x509::X509User;

/// What a connection's transport says about its client, as the server accepted it.
#[derive(Clone, Debug)]
pub enum Connection {
    /// The insecure port: nothing is authenticated.
    Insecure,
    /// The secure port, and the client certificate the handshake received.
    Tls(ClientCertificate),
}

#[derive(Clone, Debug)]
pub enum ClientCertificate {
    /// None was sent (or there is no `--client-ca-file` to ask for one).
    None,
    Verified(X509User),
    /// Sent, but not one this server accepts (unknown CA, expired, not for client auth): why.
    Rejected(String),
}
