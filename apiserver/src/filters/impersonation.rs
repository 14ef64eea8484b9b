//! Mirrors k8s.io/apiserver/pkg/endpoints/filters/impersonation.go (WithImpersonation): a request
//! may ask to be served as another user (`kubectl --as=jane --as-group=devs`: the headers
//! `Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid` and `Impersonate-Extra-<key>`).
//! Each thing asked for is authorized first, as the verb `impersonate` on `users`, `groups`,
//! `serviceaccounts` (a `system:serviceaccount:<ns>:<name>` user), or `uids` and
//! `userextras/<key>` of `authentication.k8s.io`; then the request goes on as the user asked for,
//! and authorization judges that user. A refusal is Kubernetes' 403.
//!
//! The user asked for has exactly the groups asked for; with none, a service account gets its
//! own (`system:serviceaccounts`, `system:serviceaccounts:<ns>`), and any user but
//! `system:anonymous` gets `system:authenticated`, as the authenticators would have given it.

use actix_web::HttpRequest;
use actix_web::http::header::HeaderMap;

use super::authorization::forbidden;
use crate::authentication::user::{ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, ANONYMOUS, UserInfo};
use crate::authorization::authorizer::{Attributes, Authorizer, Decision};
use crate::error::{Error, Result};

const USER: &str = "impersonate-user";
const UID: &str = "impersonate-uid";
const GROUP: &str = "impersonate-group";
const EXTRA_PREFIX: &str = "impersonate-extra-";

/// One thing a request asks to impersonate, as the authorizers are asked about it.
struct Request {
    api_group: &'static str,
    resource: &'static str,
    subresource: String,
    namespace: String,
    name: String,
}

/// The user `req` is to be served as: `requestor` when it asks for nobody else, or the user it
/// asks for once `requestor` may impersonate every part of it.
pub fn impersonate(req: &HttpRequest, authorizer: &dyn Authorizer, requestor: UserInfo) -> Result<UserInfo> {
    let headers = req.headers();
    let requests = requests(headers)?;
    if requests.is_empty() {
        return Ok(requestor);
    }
    for r in &requests {
        let a = Attributes {
            user: &requestor,
            verb: "impersonate",
            resource_request: true,
            path: req.path(),
            namespace: &r.namespace,
            api_group: r.api_group,
            api_version: "",
            resource: r.resource,
            subresource: &r.subresource,
            name: &r.name,
        };
        let (decision, reason) = authorizer.authorize(&a);
        if decision != Decision::Allow {
            tracing::debug!(target: "apiserver::authorization", user = %requestor.name, resource = r.resource, name = %r.name, reason, "impersonation forbidden");
            return Err(forbidden(&a, &reason));
        }
    }
    let name = header(headers, USER).unwrap_or_default().to_string();
    let mut groups: Vec<String> = headers.get_all(GROUP).filter_map(|v| v.to_str().ok()).map(String::from).collect();
    if groups.is_empty() {
        if let Some((namespace, _)) = split_service_account(&name) {
            groups = vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{namespace}")];
        }
        if name != ANONYMOUS && !groups.iter().any(|g| g == ALL_AUTHENTICATED || g == ALL_UNAUTHENTICATED) {
            groups.push(ALL_AUTHENTICATED.into());
        }
    }
    let mut user = UserInfo { name, uid: header(headers, UID).unwrap_or_default().to_string(), groups, ..Default::default() };
    for r in requests.iter().filter(|r| r.resource == "userextras") {
        user.extra.entry(r.subresource.clone()).or_default().push(r.name.clone());
    }
    tracing::debug!(target: "apiserver::authentication", requestor = %requestor.name, user = %user.name, "acting as another user");
    Ok(user)
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty())
}

/// What the headers ask to impersonate (`buildImpersonationRequests`); a group, uid or extra
/// without a user is an error (kube-apiserver answers it 500, and so does this).
fn requests(headers: &HeaderMap) -> Result<Vec<Request>> {
    let mut out = Vec::new();
    let request = |api_group, resource, namespace: &str, name: &str| Request { api_group, resource, subresource: String::new(), namespace: namespace.into(), name: name.into() };
    let user = header(headers, USER);
    if let Some(user) = user {
        out.push(match split_service_account(user) {
            Some((namespace, name)) => request("", "serviceaccounts", namespace, name),
            None => request("", "users", "", user),
        });
    }
    for group in headers.get_all(GROUP).filter_map(|v| v.to_str().ok()) {
        out.push(request("", "groups", "", group));
    }
    for (name, value) in headers.iter() {
        if let Some(key) = name.as_str().strip_prefix(EXTRA_PREFIX)
            && let Ok(value) = value.to_str()
        {
            out.push(Request { subresource: unescape(key), ..request("authentication.k8s.io", "userextras", "", value) });
        }
    }
    if let Some(uid) = header(headers, UID) {
        out.push(request("authentication.k8s.io", "uids", "", uid));
    }
    if user.is_none() && !out.is_empty() {
        return Err(Error::Internal("requested impersonation of a group, uid or extra without impersonating a user".into()));
    }
    Ok(out)
}

/// `system:serviceaccount:<namespace>:<name>` → (namespace, name) (`serviceaccount.SplitUsername`).
fn split_service_account(user: &str) -> Option<(&str, &str)> {
    let (namespace, name) = user.strip_prefix("system:serviceaccount:")?.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains(':')).then_some((namespace, name))
}

/// An extra's key from its header name: lowercased (HTTP header names are), `%XX` decoded, so
/// that a key holding `/` can be sent (`acme.com%2Fproject`).
fn unescape(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;
    use crate::authorization::authorizerfactory::PrivilegedGroups;

    fn admin() -> UserInfo {
        UserInfo { name: "admin".into(), groups: vec!["system:masters".into()], ..Default::default() }
    }

    #[test]
    fn the_user_asked_for_replaces_the_requestor() {
        let masters = PrivilegedGroups(vec!["system:masters".into()]);
        let req = TestRequest::default().to_http_request();
        assert_eq!(impersonate(&req, &masters, admin()).expect("no headers"), admin());

        let req = TestRequest::default().insert_header(("Impersonate-User", "jane")).append_header(("Impersonate-Group", "devs")).append_header(("Impersonate-Extra-Acme.com%2fProject", "x")).to_http_request();
        let jane = impersonate(&req, &masters, admin()).expect("allowed");
        assert_eq!((jane.name.as_str(), jane.groups.as_slice()), ("jane", &["devs".to_string()][..]), "the groups asked for, nothing added");
        assert_eq!(jane.extra["acme.com/project"], vec!["x".to_string()]);

        let req = TestRequest::default().insert_header(("Impersonate-User", "system:serviceaccount:team:reader")).to_http_request();
        let sa = impersonate(&req, &masters, admin()).expect("allowed");
        assert_eq!(sa.groups, ["system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"]);
    }

    #[test]
    fn impersonating_needs_permission() {
        let masters = PrivilegedGroups(vec!["system:masters".into()]);
        let jane = UserInfo { name: "jane".into(), groups: vec!["system:authenticated".into()], ..Default::default() };
        let req = TestRequest::default().insert_header(("Impersonate-User", "system:serviceaccount:team:reader")).to_http_request();
        let e = impersonate(&req, &masters, jane.clone()).expect_err("forbidden");
        assert_eq!(e.to_string(), r#"serviceaccounts "reader" is forbidden: User "jane" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "team""#);
        let req = TestRequest::default().insert_header(("Impersonate-Group", "devs")).to_http_request();
        assert_eq!(impersonate(&req, &masters, jane).expect_err("no user").code(), 500);
    }
}
