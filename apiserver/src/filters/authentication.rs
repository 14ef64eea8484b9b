//! Mirrors k8s.io/apiserver/pkg/endpoints/filters/authentication.go (WithAuthentication) and the
//! union of request authenticators kube-apiserver builds: the request's user, from its
//! connection (the insecure port; a client certificate, [`crate::authentication::request`]),
//! else from its bearer token ([`crate::authentication::token`],
//! k8s.io/apiserver/pkg/authentication/request/bearertoken), else anonymous — or a 401.

use actix_web::HttpRequest;
use actix_web::http::header::AUTHORIZATION;

use crate::authentication::Authenticator;
use crate::authentication::request::{ClientCertificate, Connection};
use crate::authentication::token::TokenAuthenticator;
use crate::authentication::user::UserInfo;
use crate::error::{Error, Result};

/// Who sent `req`.
pub fn authenticate(req: &HttpRequest, authenticator: &Authenticator) -> Result<UserInfo> {
    let token = req.headers().get(AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer_token);
    authenticate_connection(req.conn_data::<Connection>(), token, authenticator, req.path())
}

/// The same for a connection the server serves itself (kubectl's SPDY port-forward), with the
/// bearer token of its request if any, or a request without connection data (`None`). `path`
/// is for the log.
pub fn authenticate_connection(connection: Option<&Connection>, token: Option<&str>, authenticator: &Authenticator, path: &str) -> Result<UserInfo> {
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
    if let Some(token) = token {
        return match authenticator.tokens.authenticate_token(token, &authenticator.audiences) {
            Ok(Some(user)) => Ok(user.with_authenticated_group()),
            Ok(None) => unauthorized(path, "invalid bearer token"),
            Err(reason) => unauthorized(path, &reason),
        };
    }
    if authenticator.anonymous {
        Ok(UserInfo::anonymous())
    } else {
        unauthorized(path, "no credentials, and anonymous requests are not allowed (--anonymous-auth=false)")
    }
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in any case); None for
/// another scheme or an empty token (`bearertoken.go`).
pub fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn unauthorized(path: &str, reason: &str) -> Result<UserInfo> {
    tracing::info!(target: "apiserver::authentication", path, reason, "Unable to authenticate the request");
    Err(Error::Unauthorized)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authentication::token::Union;

    struct OneToken;

    impl TokenAuthenticator for OneToken {
        fn authenticate_token(&self, token: &str, _: &[String]) -> std::result::Result<Option<UserInfo>, String> {
            match token {
                "good" => Ok(Some(UserInfo { name: "jane".into(), ..Default::default() })),
                "expired" => Err("token has expired".into()),
                _ => Ok(None),
            }
        }
    }

    #[test]
    fn tokens_then_anonymous() {
        let a = Authenticator { tokens: Union(vec![Box::new(OneToken)]), audiences: vec![], anonymous: true };
        let user = authenticate_connection(None, Some("good"), &a, "/").expect("jane");
        assert_eq!((user.name.as_str(), user.groups.as_slice()), ("jane", &["system:authenticated".to_string()][..]));
        assert_eq!(authenticate_connection(None, Some("expired"), &a, "/").unwrap_err().code(), 401);
        assert_eq!(authenticate_connection(None, Some("unknown"), &a, "/").unwrap_err().code(), 401, "an unknown token is not anonymous");
        assert_eq!(authenticate_connection(None, None, &a, "/").expect("anonymous").name, "system:anonymous");
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer  abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
    }
}
