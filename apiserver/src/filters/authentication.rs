//! Mirrors k8s.io/apiserver/pkg/endpoints/filters/authentication.go (WithAuthentication): the
//! request's user, from its connection and credentials ([`crate::authentication`]), or a 401.

use actix_web::HttpRequest;

use crate::authentication::request::{ClientCertificate, Connection};
use crate::authentication::user::UserInfo;
use crate::error::{Error, Result};

/// Who sent `req`. `anonymous_auth`: whether a request without credentials may go on as
/// `system:anonymous` (`--anonymous-auth`).
pub fn authenticate(req: &HttpRequest, anonymous_auth: bool) -> Result<UserInfo> {
    authenticate_connection(req.conn_data::<Connection>(), anonymous_auth, req.path())
}

/// The same for a connection the server serves itself (kubectl's SPDY port-forward), or a
/// request without connection data (`None`: anonymous). `path` is for the log.
pub fn authenticate_connection(connection: Option<&Connection>, anonymous_auth: bool, path: &str) -> Result<UserInfo> {
    match connection {
        Some(Connection::Insecure) => return Ok(UserInfo::insecure_superuser()),
        Some(Connection::Tls(ClientCertificate::Verified(x509))) => {
            return match x509.user_at(chrono::Utc::now().timestamp()) {
                Ok(user) => Ok(user.clone()),
                Err(reason) => unauthorized(path, &reason),
            };
        }
        Some(Connection::Tls(ClientCertificate::Rejected(reason))) => return unauthorized(path, reason),
        Some(Connection::Tls(ClientCertificate::None)) | None => {}
    }
    if anonymous_auth {
        Ok(UserInfo::anonymous())
    } else {
        unauthorized(path, "no credentials, and anonymous requests are not allowed (--anonymous-auth=false)")
    }
}

fn unauthorized(path: &str, reason: &str) -> Result<UserInfo> {
    tracing::info!(target: "apiserver::authentication", path, reason, "Unable to authenticate the request");
    Err(Error::Unauthorized)
}
