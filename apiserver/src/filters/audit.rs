//! Mirrors k8s.io/apiserver/pkg/endpoints/filters/audit.go (WithAudit), with
//! `WithFailedAuthenticationAudit` and the audit annotations of filters/authorization.go: a
//! request's Event ([`crate::audit`]) is begun once its user is known — the policy judges the
//! user who sent it, the Event also names the one it acts as — written at `RequestReceived`,
//! given the authorizer's decision and reason and, at level Request, the request's body, and
//! written again with the answer (`ResponseComplete`). Nothing of this runs without
//! `--audit-policy-file`.

use std::net::IpAddr;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::http::header::USER_AGENT;
use actix_web::{HttpMessage, HttpRequest, HttpResponse};
use chrono::Utc;
use serde_json::Value;

use crate::audit::Auditor;
use crate::audit::event::Event;
use crate::audit::policy::{Level, Stage};
use crate::authentication::user::UserInfo;
use crate::endpoints::request::parse_body;
use super::authorization::attributes;
use crate::endpoints::requestinfo::PathInfo;

/// Begins `req`'s Event for `requestor` and writes its `RequestReceived` stage.
pub fn begin(auditor: &Auditor, req: &HttpRequest, info: &PathInfo, requestor: &UserInfo) {
    let a = attributes(requestor, info);
    let decision = auditor.policy.decide(&a);
    if decision.level == Level::None {
        return;
    }
    let source_ip = req.connection_info().realip_remote_addr().and_then(|a| a.parse::<std::net::SocketAddr>().map(|s| s.ip()).or_else(|_| a.parse::<IpAddr>()).ok()).map(|ip| ip.to_string());
    let agent = req.headers().get(USER_AGENT).and_then(|v| v.to_str().ok());
    let uri = req.uri().path_and_query().map(|p| p.as_str()).unwrap_or(req.path());
    let event = Event::new(decision, Utc::now(), uri, &a, source_ip, agent);
    if let Some(e) = event.at(Stage::RequestReceived) {
        auditor.backend.process(&e);
    }
    req.extensions_mut().insert(event);
}

/// A request refused by authentication: audited with no user, at the level the policy gives one.
pub fn failed_authentication(auditor: &Auditor, req: &HttpRequest, info: &PathInfo) {
    begin(auditor, req, info, &UserInfo::default());
}

/// The user the request acts as, when it impersonates one.
pub fn impersonated(req: &HttpRequest, user: &UserInfo) {
    if let Some(event) = req.extensions_mut().get_mut::<Event>() {
        event.impersonated(user);
    }
}

/// The authorizer's decision and reason, as annotations of the Event.
pub fn annotate_authorization(req: &HttpRequest, allowed: bool, reason: &str) {
    if let Some(event) = req.extensions_mut().get_mut::<Event>() {
        event.annotate("authorization.k8s.io/decision", if allowed { "allow" } else { "forbid" });
        event.annotate("authorization.k8s.io/reason", reason);
    }
}

/// The request's body (`LogRequestObject`): it names the object a create makes, and is kept at
/// level Request and above.
pub fn request_body(req: &HttpRequest, body: &[u8]) {
    if body.is_empty() || !req.extensions().contains::<Event>() {
        return;
    }
    if let Ok(object) = parse_body(req, body)
        && let Some(event) = req.extensions_mut().get_mut::<Event>()
    {
        event.request_object(object);
    }
}

/// Ends the Event with the answer: its code, an error's Status, at level RequestResponse a
/// whole (not streamed) JSON answer's body. A long-running request (a watch, an exec) is written
/// at `ResponseStarted` only: its answer goes on after this.
pub async fn finish(auditor: &Auditor, req: &HttpRequest, resp: HttpResponse, long_running: bool) -> HttpResponse {
    let Some(mut event) = req.extensions_mut().remove::<Event>() else { return resp };
    let code = resp.status().as_u16();
    let keep_body = code >= 400 || (event.level() == Level::RequestResponse && !long_running);
    let resp = if keep_body && !matches!(resp.body().size(), actix_web::body::BodySize::Stream) {
        let (head, body) = resp.into_parts();
        match actix_web::body::to_bytes(body).await {
            Ok(bytes) => {
                let object = serde_json::from_slice::<Value>(&bytes).ok();
                event.response_status(code, object.as_ref());
                if code < 400
                    && let Some(o) = object
                {
                    event.response_object(o);
                }
                head.set_body(BoxBody::new(bytes))
            }
            Err(_) => {
                event.response_status(code, None);
                head.set_body(BoxBody::new(()))
            }
        }
    } else {
        event.response_status(code, None);
        resp
    };
    let stage = if long_running { Stage::ResponseStarted } else { Stage::ResponseComplete };
    if let Some(e) = event.at(stage) {
        auditor.backend.process(&e);
    }
    resp
}
